"""From a capture to what is shown: the one preparation path (no Qt).

Start at :func:`~actviz.display.prepare.prepare` (single runs, live frames, pins, export);
:mod:`~actviz.display.repage` remakes results for page turns and normalisation changes;
:mod:`~actviz.display.mosaic` is where normalisation happens. Imports point
``ui -> io -> display -> core``.
"""
