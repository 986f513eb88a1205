"""Token sequences, attention and the logit lens in the window."""
