"""The explorer's state without widgets: the session (model, input, ticks, target, view
settings, the run request), pins and the memory budget. No Qt here."""
