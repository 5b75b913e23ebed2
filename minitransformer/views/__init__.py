"""The views: terminal reports, the HTML report and its drawings, plots, and the files they are written to."""
