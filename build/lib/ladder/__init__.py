"""ladder: find the largest stable env count and the best agent profile on the GPUs at hand."""

__version__ = "0.1.0"
