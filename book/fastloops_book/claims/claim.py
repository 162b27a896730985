"""What a claim is: the seed's figure, the figure measured here and its threshold; and a benchmark's target.

The rows live in the registries beside this module (`loop`, `loaders`, `beyond`: one per part of the notebook
sequence); `fastloops_book.claims` joins them and judges a measured value. Explained in notebooks/13_conclusion.ipynb.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastloops_helpers.measure.stats import HIGH, LOW, decide

REPRODUCED, NOT_REPRODUCED, NOT_MEASURED = "reproduced", "not reproduced here", "not measured"
NEEDS_GPU, PUBLISHED, TIE = "needs a GPU", "published, not measurable here", "a tie on this machine"
STATUSES = (REPRODUCED, NOT_REPRODUCED, TIE, NOT_MEASURED, NEEDS_GPU, PUBLISHED)


@dataclass(frozen=True)
class Claim:
    """One claim: the seed's figure, the figure measured here, and the threshold it must pass."""

    name: str  # registry key, used in claims.check(name, ...)
    seed: str  # who made the claim: "000/001", "002", "003", "004", or a paper
    claim: str  # the claim in one sentence
    seed_figure: str  # the figure as published ("" where the seed gives none)
    notebook: str = ""  # result name of the notebook that measures it ("02_getitem_cost")
    figure: str = ""  # saved figure name (default: name); "a/b" is a ratio of two figures
    at_least: float | None = None  # holds when measured >= at_least ...
    at_most: float | None = None  # ... and measured <= at_most; neither: a yes/no claim
    unit: str = "x"
    needs: str = ""  # "": measurable here; "gpu": the effect needs a GPU; "published"
    source: str = ""  # where a published figure comes from

    @property
    def key(self) -> str:
        """Return the saved figure name (or "a/b") this claim reads."""
        return self.figure or self.name

    def needed(self) -> str:
        """Return the threshold in words: ">= 5x", "<= 1.5x", "0.9x to 4x", "yes"."""
        lo, hi, u = self.at_least, self.at_most, self.unit
        if lo is not None and hi is not None:
            return f"{lo:g}{u} to {hi:g}{u}"
        if lo is not None or hi is not None:
            return f"{'>=' if lo is not None else '<='} {lo if lo is not None else hi:g}{u}"
        return "yes"


N00, N01, N02, N03, N04 = "00_setup", "01_the_question", "02_getitem_cost", "03_custom_loader", "04_fast_shuffle"
N05, N06, N07, N08 = "05_fusion", "06_device_moves", "07_dataloader_anatomy", "08_read_and_decode"
N09, N10, N11, N12 = "09_precompute_memmap", "10_ffcv_otto", "11_ffcv_cifar", "12_scaling_out"
N14, N15 = "14_threads_or_processes", "15_is_my_loop_input_bound"
N16 = "16_when_data_no_longer_fits"
HF_WDS_SOURCE = "Hugging Face Hub docs, WebDataset (huggingface.co/docs/hub/datasets-webdataset)"
WDS_SHARDING_SOURCE = (
    "WebDataset docs, Sharding, Parallel I/O, and DataLoader (webdataset.github.io/webdataset/sharding)"
)
HF_SHUFFLE_SOURCE = "Hugging Face datasets docs, IterableDataset.shuffle (datasets 5.2.0)"
SPDL = "SPDL paper"
SPDL_SOURCE = "arXiv 2504.20067 (Meta, SPDL), ImageNet iteration vs the PyTorch DataLoader"
TORCH_THREADS_SOURCE = "pytorch/pytorch pull request 161044 (thread-based DataLoader workers, ImageNet images)"


@dataclass(frozen=True)
class Target:
    """A benchmark's target on a quiet machine (stricter than a notebook's busy-machine check)."""

    benchmark: str  # result name, "bench-NAME"
    figure: str  # a figure of that benchmark's JSON ("a/b": a ratio)
    at_least: float | None = None
    at_most: float | None = None
    unit: str = "x"
    needs: str = ""  # "gpu": the figure is saved by a GPU run only
    parity: bool = False  # a tie counts as parity ("as fast as"), as the seed's claim reads

    def needed(self) -> str:
        """Return the target in words: ">= 3 GB/s"."""
        op, bound = (">=", self.at_least) if self.at_least is not None else ("<=", self.at_most)
        return f"{op} {bound:g}{self.unit}" + (" (a tie is parity)" if self.parity else "")

    def verdict(self, figures: Mapping[str, Any], device: str = "cpu") -> str:
        """Return "met", "missed", "a tie on this machine" (from a saved interval), "not run", or "needs a GPU"
        for a GPU's target where the run's `device` was not CUDA."""
        value = value_of(figures, self.figure)
        if self.needs == "gpu" and not device.startswith("cuda"):
            return NEEDS_GPU
        if value is None or value != value:
            return "not run"
        low, high = saved_interval(figures, self.figure) or (value, value)
        return decide(low, high, *bounds(self))


def saved_interval(figures: Mapping[str, Any], key: str) -> tuple[float, float] | None:
    """Return the 95 % interval saved beside figure `key` (`measure.interval_figures`), None for a single run."""
    if "/" in key or key + LOW not in figures:
        return None
    return float(figures[key + LOW]), float(figures[key + HIGH])


def how_measured(interval: tuple[float, float] | None) -> str:
    """Return the label a printed figure carries: its 95 % interval, or "single run" where it has none."""
    return "single run" if interval is None else f"95 % interval {interval[0]:.3g} to {interval[1]:.3g}"


def value_of(figures: Mapping[str, Any], key: str) -> float | None:
    """Return figure `key` of a figures dict ("a/b": the ratio of two figures), None when absent."""
    parts = key.split("/")
    if not all(p in figures and figures[p] is not None for p in parts):
        return None
    values = [float(figures[p]) for p in parts]
    return values[0] / values[1] if len(values) == 2 else values[0]


def bounds(claim: Claim | Target) -> tuple[float, float]:
    """Return the span the claim's (or target's) figure must lie within: (-inf, at_most) for "at most"."""
    lo = claim.at_least if claim.at_least is not None else float("-inf")
    return lo, claim.at_most if claim.at_most is not None else float("inf")
