"""The Atlas tab: a layer's map of the scanned dataset, with the current input on it."""
