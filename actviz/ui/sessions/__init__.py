"""Session files in the window: save, open, recent, reports, and the session kept on quit."""
