"""The one measurement harness: clock, statistics, display, provenance; timeline, plots and capabilities beside.

Explained in notebooks/00_setup.ipynb.
"""

from .clock import Timer, drain, elapsed, factors, interleaved, interleaved_until_steady, measure, now, per_call, sync
from .display import BAR_FORMAT, TIMING_PREFIX, predicted, progress, show
from .processes import memory_by_process, pss_mb
from .provenance import cpu_name, git_state, gpu_name, hardware_line, provenance, save_results, versions
from .stats import (
    MIN_ROUNDS,
    TIE,
    TOO_FEW,
    Verdict,
    best_of,
    interval_figures,
    median,
    median_interval,
    p95,
    ratio,
    ratios,
    summarize,
    verdict,
)
from .threads import torch_threads

__all__ = [
    "memory_by_process",
    "pss_mb",
    "Timer",
    "drain",
    "elapsed",
    "interleaved",
    "interleaved_until_steady",
    "measure",
    "now",
    "per_call",
    "sync",
    "factors",
    "BAR_FORMAT",
    "TIMING_PREFIX",
    "predicted",
    "progress",
    "show",
    "cpu_name",
    "git_state",
    "gpu_name",
    "hardware_line",
    "provenance",
    "save_results",
    "versions",
    "best_of",
    "median",
    "p95",
    "ratio",
    "summarize",
    "median_interval",
    "interval_figures",
    "ratios",
    "verdict",
    "Verdict",
    "MIN_ROUNDS",
    "TIE",
    "TOO_FEW",
    "torch_threads",
]
