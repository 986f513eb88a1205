"""The main window, composed of plain objects (actions, layout, display, files, exports, pins)."""
