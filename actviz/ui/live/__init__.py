"""Live mode: frame sources and perturbations (``frames``), the controller that drives them
through the window's worker (``controller``) and its dock (``dock``)."""
