"""Loaders, samplers, prefetchers and measurement tools behind the fastloops notebooks."""

__version__ = "0.1.0"
