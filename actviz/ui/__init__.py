"""actviz.ui."""
