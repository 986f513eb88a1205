"""Bundled data: demo weights, sample inputs, icons (installed as ``actviz.resources``)."""
