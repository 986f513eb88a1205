"""The Compare tab: the latest run against a pin, another input or another model."""
