"""Live mode: frame sources and perturbations, the controller that runs them, and its dock."""
