"""actviz.bench."""
