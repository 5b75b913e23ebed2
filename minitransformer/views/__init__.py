"""The views: terminal reports, the trace and its stepper, the HTML report and its drawings, plots, and the files
they are written to."""
