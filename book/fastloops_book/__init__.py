"""The collection's own machinery.

The claims registry, the notebook runner, the report, the benchmarks' command line and publishing.
"""
