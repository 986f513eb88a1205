"""The module tree: its Qt item model, the dock around it and the module details."""
