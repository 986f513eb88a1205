"""actviz.io."""
