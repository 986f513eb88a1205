"""The window's feature visualisation: "What it wants" in the channel view."""
