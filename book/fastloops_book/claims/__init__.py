"""The one registry of the seeds' figures and of every threshold a reproduction check uses.

Usage in a notebook's `## Reproduction check` (the cell nbval compares):

    from fastloops_book import claims
    claims.check("slide_100_speedup", figures)        # looks up the claim's figure in the dict you save
    claims.check("slide_100_speedup", single / batched)  # or pass the measured value itself
    claims.check("memmap_val_same_batches", torch.equal(a, b))   # a yes/no claim
    claims.check("pinned_copy_speedup", None, why="no GPU here")  # not measured, and why

Each call prints one line, e.g.
`[claim] slide_100_speedup: measured 24.1x (single run), needs >= 5x: reproduced (seed 000/001: 122 µs vs 3.42 µs
(36x))`, or with "(95 % interval LOW to HIGH)" for per-round ratios; tests/sanitize.cfg masks only the number after
"measured", so nbval compares the verdict.
`claims.holds(name, value)` returns the verdict as a bool without printing; `claims.quote(name)` returns the
seed's figure for a printed sentence. Never write a seed figure or a threshold in a notebook: add or change the row
in its notebook's registry (`loop.py` for 00 to 06, `loaders.py` for 07 to 12, `beyond.py` for 14 to 16; `CLAIMS`
joins them). A claim's `figure` is the name the notebook saves (results/NN_name.json through
`measure.save_results`); "a/b" is the ratio of two saved figures. One name, one number: a claim reads the figure
saved under its own name when there is one (`check` refuses figures that hold both). REPORT.md and notebook 13 read
the same rows.

Explained in notebooks/13_conclusion.ipynb.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastloops_helpers.measure.stats import decide

from . import beyond, loaders, loop
from .claim import (
    N01,
    N02,
    N04,
    N05,
    N07,
    N09,
    N14,
    NEEDS_GPU,
    NOT_MEASURED,
    NOT_REPRODUCED,
    PUBLISHED,
    REPRODUCED,
    STATUSES,
    TIE,
    Claim,
    Target,
    bounds,
    how_measured,
    saved_interval,
    value_of,
)

__all__ = [  # the registry's API: the rows, the verdicts, and what a claim and a target are
    "CHECKLIST",
    "CLAIMS",
    "NEEDS_GPU",
    "NOT_MEASURED",
    "NOT_REPRODUCED",
    "PUBLISHED",
    "REPRODUCED",
    "STATUSES",
    "TARGETS",
    "TIE",
    "Claim",
    "Target",
    "check",
    "get",
    "holds",
    "how_measured",
    "interval",
    "line",
    "quote",
    "saved_interval",
    "status",
    "value_of",
]

CLAIMS: tuple[Claim, ...] = loop.ROWS + loaders.ROWS + beyond.ROWS

TARGETS: tuple[Target, ...] = (
    Target("bench-loops", "helpers_over_numpy", at_most=1.0),
    Target("bench-loops", "dataloader_nw0_over_helpers", at_least=50),
    Target("bench-gather", "helpers_gb_per_s", at_least=3.0, unit=" GB/s"),
    Target("bench-shuffle", "grouped_speedup_headline", at_least=3.0),  # the helpers' variant, not the slide's
    Target("bench-devices", "move_to_over_fastest", at_most=1.1),
    Target("bench-imagefolder", "memmap_train_speedup", at_least=5),
    Target("bench-imagefolder", "memmap_val_speedup", at_least=20),
    Target("bench-otto", "otto_helpers_over_ffcv_load", at_least=1.0),
    Target("bench-otto", "otto_helpers_over_dataloader_load", at_least=10),
    Target("bench-cifar", "helpers_over_ffcv_load", at_least=1.0),
    Target("bench-cifar", "cifar_helpers_wrn_28_10_wait_share", at_most=0.05, unit="", needs="gpu"),
    Target("bench-cifar", "cifar_helpers_wrn_16_2_hidden_pct", at_least=80, unit=" %", needs="gpu"),
    Target("bench-cifar", "cifar_helpers_wrn_28_10_step_over_ffcv", at_most=1.0, needs="gpu", parity=True),
    Target("bench-diagnose", "jpeg_helpers_best_resnet50_wait_share", at_most=0.05, unit="", needs="gpu"),
    Target("bench-threads", "helpers_threads_over_limit", at_least=0.8),
    Target("bench-threads", "helpers_threads_over_dataloader_best", at_least=1.0),
    Target("bench-threads", "helpers_threads_over_spdl", at_least=1.0),
    Target("bench-threads", "helpers_threads_pss_over_dataloader_best", at_most=0.5),
    Target("bench-streaming", "stream_wire_efficiency", at_least=0.8),
    Target("bench-streaming", "stream_wire_efficiency_vs_profile", at_least=0.8),
    Target("bench-streaming", "stream_entropy_small_buffer_over_full", at_most=0.7),
    Target("bench-streaming", "stream_entropy_large_buffer_over_full", at_least=0.9),
    Target("bench-streaming", "stream_shuffle_buffer_cost", at_most=1.1),
    Target("bench-streaming", "stream_ranks_exactly_once", at_least=1.0, unit=""),
    Target("bench-streaming", "stream_ranks_duplicates", at_most=0.0, unit=""),
)

# What to do first in a real training loop: each item with the notebook figure that measures its payoff here.
CHECKLIST: tuple[tuple[str, str, str], ...] = (
    ("Fetch whole batches (batched indexing, `__getitems__`), never one sample per call", N02, "slide_100_speedup"),
    (
        "Replace a per-sample DataLoader over in-memory tensors by a batched loader (BatchLoader)",
        N01,
        "dataloader_nw0_over_helpers",
    ),
    ("Decode and resize once, store uint8 in a memmap, apply batched transforms (val)", N09, "memmap_val_speedup"),
    ("Same for training with random crops and flips done on the batch", N09, "memmap_train_speedup"),
    ("Shuffle huge indexes with the helpers' grouped_permutation", N04, "grouped_speedup_headline"),
    ("Use DataLoader workers when each sample needs real CPU work (decoding)", N07, "workers2_over_workers0"),
    ("Fuse pointwise chains with torch.compile", N05, "fusion_speedup_largest"),
    (
        "Decode on threads, not processes, with a decoder that releases the GIL (notebook 14)",
        N14,
        "helpers_threads_over_dataloader_best",
    ),
)

_BY_NAME = {c.name: c for c in CLAIMS}


def get(name: str) -> Claim:
    """Return the registered claim `name`."""
    if name not in _BY_NAME:
        raise KeyError(
            f"no claim named {name!r} in fastloops_book.claims.CLAIMS; add a row to its notebook's registry "
            f"(book/fastloops_book/claims/loop.py, loaders.py or beyond.py) "
            f"(known: {', '.join(sorted(_BY_NAME))})"
        )
    return _BY_NAME[name]


def _rounds(measured: Any) -> bool:
    return isinstance(measured, (list, tuple)) or getattr(measured, "ndim", 0) == 1


def _measured(claim: Claim, measured: Any) -> float | None:
    if isinstance(measured, Mapping):
        if claim.key != claim.name and claim.name in measured:
            raise ValueError(
                f"the figures hold {claim.name!r}, but claim {claim.name!r} reads {claim.key!r}: one name, one "
                f"number. Save the figure under one name, or drop the claim's figure= in its row under "
                "book/fastloops_book/claims/"
            )
        return value_of(measured, claim.key)
    if measured is None:
        return None
    if _rounds(measured):
        from fastloops_helpers.measure import median

        return median(measured)
    return float(bool(measured)) if isinstance(measured, bool) else float(measured)


def interval(name: str, measured: Any) -> tuple[float, float] | None:
    """Return the 95 % interval of claim `name`'s measured ratio, from per-round ratios or saved _ci figures."""
    if _rounds(measured):
        from fastloops_helpers.measure import median_interval

        return median_interval(measured)
    return saved_interval(measured, get(name).key) if isinstance(measured, Mapping) else None


def holds(name: str, measured: Any) -> bool:
    """Return whether the measured value (or a figures dict holding it) passes the claim's threshold."""
    c, v = get(name), _measured(get(name), measured)
    if v is None or v != v:
        return False
    if c.at_least is None and c.at_most is None:
        return v >= 0.5  # a yes/no claim saved as 1.0 / 0.0
    return (c.at_least is None or v >= c.at_least) and (c.at_most is None or v <= c.at_most)


def status(name: str, measured: Any, device: str | None = None) -> str:
    """Return the claim's status here: reproduced, not reproduced, not measured, needs a GPU, or published."""
    c, v = get(name), _measured(get(name), measured)
    if c.needs == "published":
        return PUBLISHED
    if c.needs == "gpu" and not str(device if device is not None else _device()).startswith("cuda"):
        return NEEDS_GPU
    if v is None:
        return NOT_MEASURED
    if c.at_least is None and c.at_most is None:
        return REPRODUCED if holds(name, v) else NOT_REPRODUCED
    low, high = interval(name, measured) or (v, v)  # a single run decides by its value alone: never a tie
    return {"met": REPRODUCED, "missed": NOT_REPRODUCED}.get(decide(low, high, *bounds(c)), TIE)


def quote(name: str) -> str:
    """Return the seed's figure with who published it, for a printed sentence: "seed 004: 20,452 vs 669 fps"."""
    c = get(name)
    where = c.source or (f"seed {c.seed}" if c.seed[:1].isdigit() else c.seed)
    return f"{where}: {c.seed_figure}" if c.seed_figure else f"{where}: no figure"


def line(name: str, measured: Any = None, why: str = "", device: str | None = None) -> str:
    """Return the printed verdict line of `check`."""
    c, v = get(name), _measured(get(name), measured)
    if v is None:
        got = "not measured" + (f" ({why})" if why else "")
    elif c.at_least is None and c.at_most is None:
        got = f"measured {'yes' if v >= 0.5 else 'no'}"
    else:
        got = f"measured {v:.3g}{c.unit} ({how_measured(interval(name, measured))})"
    gpu = " on a GPU" if c.needs == "gpu" else ""
    seed = f" ({quote(name)})" if c.seed_figure else ""
    return f"[claim] {name}: {got}, needs {c.needed()}{gpu}: {status(name, measured, device)}{seed}"


def check(name: str, measured: Any = None, why: str = "", device: str | None = None) -> None:
    """Print the claim's verdict line for a value, per-round ratios, a figures dict, a bool, or None.

    Per-round ratios (or a figures dict holding `measure.interval_figures`) are judged by their 95 % interval: the claim
    is reproduced or not only when the interval lies on one side of the threshold, else a tie on this machine. A
    figure without rounds is judged by its value and its line says "single run".
    """
    print(line(name, measured, why, device))


def _device() -> str:
    from fastloops_helpers import config  # lazy: claims is read by the report without torch's device logic

    return str(config.device())
