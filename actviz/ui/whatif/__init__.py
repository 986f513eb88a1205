"""What-if in the window: edits from the tiles, the Edits dock, before/after and differences."""
