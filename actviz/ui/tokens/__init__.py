"""Token sequences, attention and the logit lens in the window (issue 15's views)."""
