"""The collection's own machinery: the claims registry, the notebook runner, the report, the benchmarks' command line and publishing."""
