"""The one measurement harness: clock, statistics, display, provenance; timeline, plots and capabilities beside.

Explained in notebooks/00_setup.ipynb.
"""

from .clock import Timer, interleaved, measure, now, sync
from .display import BAR_FORMAT, TIMING_PREFIX, progress, show
from .provenance import cpu_name, git_state, gpu_name, hardware_line, provenance, save_results, versions
from .stats import best_of, median, p95, ratio, summarize

__all__ = ["Timer", "interleaved", "measure", "now", "sync", "BAR_FORMAT", "TIMING_PREFIX", "progress", "show",
           "cpu_name", "git_state", "gpu_name", "hardware_line", "provenance", "save_results", "versions",
           "best_of", "median", "p95", "ratio", "summarize"]
