"""From a capture to what is shown: the one preparation path (no Qt).

Start at :func:`~actviz.display.prepare.prepare` (single runs, live frames, pins, export) and
:mod:`~actviz.display.repage` (page turns, renormalising); :mod:`~actviz.display.mosaic` is the
one place mosaics are normalised and :mod:`~actviz.display.colormaps` the one colour registry;
the frozen results are in :mod:`~actviz.display.prepared`.

Imports point one way: ``ui -> io -> display -> core``.
"""
