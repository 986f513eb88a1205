"""actviz.core."""
