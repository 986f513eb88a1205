"""From a capture to what is shown, the one preparation path (no Qt): start at
:func:`~actviz.display.prepare.prepare` and :mod:`~actviz.display.repage` (page turns).
Imports point one way: ``ui -> io -> display -> core``."""
