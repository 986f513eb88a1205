"""The main window, composed of plain objects: actions, layout, the result display, file
opening, exports and pins, with the window's settings, loaders, banner and dialogs."""
