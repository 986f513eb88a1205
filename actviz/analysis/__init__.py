"""Analyses built on captures: feature visualisation and channel effects (torch only, no Qt)."""
