"""validate's float64 truth for the Gemma family (placeholder, filled below)."""

NOTE = ""


def float64_throughout(reference, model, torch) -> None:
    pass
