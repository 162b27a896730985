"""A fresh permutation per epoch: numpy/torch full shuffles vs the slide's and the helpers' grouped ones, against N.

Explained in notebooks/04_fast_shuffle.ipynb. `cost_curve()` computes the table and figures that notebook 04 shows
and `python -m fastloops_helpers.book.bench shuffle` saves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import config, measure
from ..data import ffcv_io
from ..load.order import grouped_permutation
from ..teach.quasi_random import batch_class_entropy, quasi_random_permutation, slide_grouped_permutation
from . import BenchResult

FULL = ("numpy permutation", "numpy shuffle (in place)", "torch randperm")


def numpy_permutation(n: int, rng: np.random.Generator) -> np.ndarray:
    """numpy's full shuffle into a new array: Fisher-Yates, one random draw and one swap per index."""
    return rng.permutation(n)


def numpy_shuffle(index: np.ndarray, rng: np.random.Generator) -> None:
    """The same Fisher-Yates in place, over an index array made once."""
    rng.shuffle(index)


def torch_randperm(n: int, generator: torch.Generator) -> torch.Tensor:
    """torch's full shuffle, on the generator's device (a CUDA generator: the GPU's randperm)."""
    return torch.randperm(n, generator=generator, device=generator.device)


@dataclass(frozen=True)
class Contenders:
    """The permutations timed: notebook 04 passes the ones its cells define (and the helpers' it renders)."""

    permutation: Callable[[int, np.random.Generator], Any] = numpy_permutation
    shuffle: Callable[[np.ndarray, np.random.Generator], Any] = numpy_shuffle
    randperm: Callable[[int, torch.Generator], torch.Tensor] = torch_randperm
    slide: Callable[..., torch.Tensor] = slide_grouped_permutation
    grouped: Callable[..., torch.Tensor] = grouped_permutation


def _contenders(contenders: Contenders | None, slide: Callable[..., torch.Tensor] | None) -> Contenders:
    found = contenders or Contenders()
    return replace(found, slide=slide) if slide is not None else found


def permuters(
    n: int,
    group_size: int,
    seed: int = 0,
    slide: Callable[..., torch.Tensor] | None = None,
    contenders: Contenders | None = None,
) -> dict[str, Callable[[], Any]]:
    """Return {method: fn()} making one permutation of range(n) each call (CUDA randperm when present).

    `contenders` holds the functions called (default: the package's); `slide`, when given, replaces its slide's
    grouped shuffle.
    """
    c = _contenders(contenders, slide)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    index = np.arange(n)
    fns = {
        "numpy permutation": lambda: c.permutation(n, rng),
        "numpy shuffle (in place)": lambda: c.shuffle(index, rng),
        "torch randperm": lambda: c.randperm(n, gen),
        f"slide's grouped (g={group_size})": lambda: c.slide(n, group_size, gen),
        f"grouped_permutation (g={group_size})": lambda: c.grouped(n, group_size, gen),
    }
    if torch.cuda.is_available():
        cuda_gen = torch.Generator("cuda").manual_seed(seed)
        fns["torch randperm (cuda)"] = lambda: c.randperm(n, cuda_gen)
        fns["grouped_permutation (cuda)"] = lambda: c.grouped(n, group_size, cuda_gen)
    return fns


def time_permutations(
    n: int,
    group_size: int,
    repeat: int,
    slide: Callable[..., torch.Tensor] | None = None,
    contenders: Contenders | None = None,
) -> list[dict[str, Any]]:
    """Time every permuter at size `n`, interleaved; one row per method with median seconds and ns per index.

    Every row carries `speedup_over_full`: the median over rounds of the fastest full CPU permutation's
    time over its own. `contenders` (and `slide`) are the functions timed, as in `permuters`. Explained in
    notebooks/04_fast_shuffle.ipynb.
    """
    fns = permuters(n, group_size, slide=slide, contenders=contenders)
    seconds = measure.interleaved(fns, repeat=repeat, warmup=1, shuffle=True)
    fastest = min(FULL, key=lambda m: measure.median(seconds[m]))
    rows = []
    for name, values in seconds.items():
        t = measure.median(values)
        rows.append(
            {
                "n": n,
                "method": name,
                "seconds": t,
                "p95_s": measure.p95(values),
                "ns_per_index": t / n * 1e9,
                "gb_per_s_written": n * 8 / t / 1e9,
                "speedup_over_full": measure.ratio(seconds, fastest, name),
            }
        )
    return rows


def headline(rows: list[dict[str, Any]], n: int, method: str = "grouped_permutation (g=") -> float:
    """Return how many times faster `method` (a name's start; default the helpers' grouped permutation on the
    CPU) is than the fastest full CPU permutation at `n`."""
    return next(r["speedup_over_full"] for r in rows if r["n"] == n and r["method"].startswith(method))


def group_size_speed(
    n: int,
    group_sizes: Iterable[int],
    repeat: int,
    full_method: str = "torch randperm",
    seed: int = 0,
    contenders: Contenders | None = None,
) -> list[dict[str, Any]]:
    """Time the grouped permutation at size `n` per group size, interleaved with the full permutation `full_method`.

    One row per group size: median seconds, the full permutation's median seconds in the same rounds, and the
    median over rounds of full/grouped. `contenders` are the functions timed, as in `permuters`. Explained in
    notebooks/04_fast_shuffle.ipynb.
    """
    if full_method not in FULL:
        raise ValueError(f"full_method must be one of {FULL}, got {full_method!r}")
    c = _contenders(contenders, None)
    gen = torch.Generator().manual_seed(seed)
    fns: dict[str | int, Callable[[], Any]] = {full_method: permuters(n, 1, seed, contenders=c)[full_method]}
    fns |= {g: partial(c.grouped, n, g, gen) for g in group_sizes}
    seconds = measure.interleaved(fns, repeat=repeat, warmup=1, desc="group sizes", shuffle=True)
    return [
        {
            "group_size": g,
            "seconds": measure.median(seconds[g]),
            "full_method": full_method,
            "full_seconds": measure.median(seconds[full_method]),
            "speedup_over_full": measure.ratio(seconds, full_method, g),
        }
        for g in group_sizes
    ]


def sorted_blobs(
    n: int, classes: int = 10, features: int = 32, seed: int = 0, split: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (X, y): overlapping Gaussian blobs, one per class, sorted by class (the worst case for groups).

    The class centres depend on `seed` only; `split` draws other samples around the same centres (a test set).
    """
    centres = torch.randn(classes, features, generator=torch.Generator().manual_seed(seed)) * 0.6
    y = torch.arange(n) * classes // n
    X = centres[y] + torch.randn(n, features, generator=torch.Generator().manual_seed(seed * 1000 + split + 1))
    return X, y


def quasi_batches(
    X: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
    page_size: int,
    seed: int,
    quasi: Callable[..., np.ndarray] = quasi_random_permutation,
) -> Callable[[int], Iterator[tuple[torch.Tensor, torch.Tensor]]]:
    """Return epoch -> batches in FFCV's QUASI_RANDOM order `quasi` (pages of `page_size`, 2 x batch_size open)."""

    def epoch_batches(epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        rng = np.random.default_rng([seed, epoch])
        order = torch.from_numpy(quasi(len(y), page_size, 2 * batch_size, rng))
        for index in order.split(batch_size):
            yield X[index], y[index]

    return epoch_batches


def train_accuracy(
    batches: Callable[[int], Iterable[tuple[torch.Tensor, torch.Tensor]]],
    epochs: int,
    test: tuple[torch.Tensor, torch.Tensor],
    classes: int = 10,
    seed: int = 0,
) -> float:
    """Train a small MLP with SGD on `batches(epoch)` for `epochs`; return its test accuracy."""
    torch.manual_seed(seed)
    with measure.torch_threads(1):  # a tiny model: more threads only add synchronisation, badly so on a busy machine
        return _train(batches, epochs, test, classes)


def _train(
    batches: Callable[[int], Iterable[tuple[torch.Tensor, torch.Tensor]]],
    epochs: int,
    test: tuple[torch.Tensor, torch.Tensor],
    classes: int,
) -> float:
    X_test, y_test = test
    model = torch.nn.Sequential(torch.nn.Linear(X_test.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(epochs):
        for xb, yb in batches(epoch):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    with torch.no_grad():
        return float((model(X_test).argmax(1) == y_test).float().mean())


def _epochs_of(loader: Any) -> Callable[[int], Iterable[Any]]:
    """Return epoch -> `loader` set to that epoch (a BatchLoader reshuffles per epoch)."""

    def epoch_batches(epoch: int) -> Iterable[Any]:
        loader.set_epoch(epoch)
        return loader

    return epoch_batches


def _quasi_order(
    n: int, page_size: int, buffer_size: int, seed: int, quasi: Callable[..., np.ndarray] = quasi_random_permutation
) -> np.ndarray:
    return quasi(n, page_size, buffer_size, np.random.default_rng(seed))


def quality_rows(
    n: int,
    group_sizes: Iterable[int],
    batch_size: int = 100,
    epochs: int = 2,
    classes: int = 10,
    seed: int = 0,
    quasi: Callable[..., np.ndarray] = quasi_random_permutation,
    entropy_of: Callable[..., float] = batch_class_entropy,
) -> list[dict[str, Any]]:
    """Class mix per batch (entropy, bits) and test accuracy after a short run, per order and group size.

    `quasi` makes FFCV's quasi-random order and `entropy_of` measures a class mix (notebook 04 passes its cells').
    """
    from ..load.batch_loader import BatchLoader

    X, y = sorted_blobs(n, classes, seed=seed)
    test = sorted_blobs(n // 5, classes, seed=seed, split=1)
    gen = torch.Generator().manual_seed(seed)
    orders: list[tuple[str, int, Callable[[int], Iterable], Callable[[], Any]]] = []
    full = BatchLoader((X, y), batch_size, shuffle=True, seed=seed)
    orders.append(("full shuffle", n, _epochs_of(full), lambda: torch.randperm(n, generator=gen)))
    for g in group_sizes:
        grouped = BatchLoader((X, y), batch_size, shuffle="grouped", seed=seed, group_size=g)
        orders.append(("grouped", g, _epochs_of(grouped), partial(grouped_permutation, n, g, gen)))
        orders.append(
            (
                "FFCV quasi-random",
                g,
                quasi_batches(X, y, batch_size, g, seed, quasi),
                partial(_quasi_order, n, g, 2 * batch_size, seed, quasi),
            )
        )
    rows = []
    for name, g, batches, make_order in measure.progress(orders, desc="orders"):
        entropy = entropy_of(y, make_order(), batch_size, classes)
        rows.append(
            {
                "order": name,
                "group_size": g,
                "entropy_bits": entropy,
                "test_accuracy": train_accuracy(batches, epochs, test, classes, seed),
            }
        )
    return rows


def write_sorted_beton(path: Path, n: int, row_bytes: int, classes: int = 10) -> tuple[Path, np.ndarray]:
    """Write `n` rows of `row_bytes` (float32, each row's index in its first column) and labels sorted in `classes`
    blocks, as `sorted_blobs`' are, as a table `.beton`; return its path and labels. An existing file is kept."""
    labels = np.arange(n) * classes // n
    if not path.exists():
        X = np.zeros((n, row_bytes // 4), dtype=np.float32)
        X[:, 0] = np.arange(n)
        ffcv_io.write_table_beton(path, X, labels)
    return path, labels


def _order_stats(order: np.ndarray, labels: np.ndarray, pages: np.ndarray, batch_size: int) -> dict[str, float]:
    batches = order[: len(order) // batch_size * batch_size].reshape(-1, batch_size)
    return {
        "entropy_bits": batch_class_entropy(labels, order, batch_size),
        "pages_per_batch": float(np.mean([len(np.unique(pages[b])) for b in batches])),
        "pages_in_first_quarter": len(np.unique(pages[order[: len(order) // 4]])),
    }


def ffcv_order_rows(
    path: Path,
    labels: np.ndarray,
    batch_sizes: Iterable[int],
    epochs: int,
    quasi: Callable[..., np.ndarray] = quasi_random_permutation,
) -> list[dict[str, Any]]:
    """Class mix and pages per batch of FFCV's own QUASI_RANDOM order over `path`, of the replica `quasi` on the
    same pages (rows per storage page, 2 x batch_size open) and of a full shuffle: means over `epochs` epochs.

    `labels` are the file's labels in row order. Explained in notebooks/04_fast_shuffle.ipynb.
    """
    rows = []
    for b in batch_sizes:
        real, pages = ffcv_io.loader_orders(path, b, epochs)
        page_size = int(np.bincount(pages).max())
        if not np.array_equal(pages - pages.min(), np.arange(len(pages)) // page_size):
            raise ValueError(f"{path} does not store its rows in runs of {page_size}, the replica's pages")
        orders = {
            "FFCV Loader, QUASI_RANDOM": real,
            "replica": [quasi(len(labels), page_size, 2 * b, np.random.default_rng(s)) for s in range(epochs)],
            "full shuffle": [np.random.default_rng(s).permutation(len(labels)) for s in range(epochs)],
        }
        for name, found in orders.items():
            stats = pd.DataFrame([_order_stats(o, labels, pages, b) for o in found]).mean()
            rows.append({"order": name, "batch_size": b, "open_pages": 2 * b, "page_size": page_size, **stats})
    return rows


def cost_curve(
    sizes: Iterable[int],
    n_headline: int,
    group_size: int,
    repeat: int,
    slide: Callable[..., torch.Tensor] | None = None,
    contenders: Contenders | None = None,
) -> BenchResult:
    """Time full and grouped permutations at every N of `sizes` and at `n_headline`; return rows and figures.

    `contenders` (and `slide`) are the functions timed, as in `permuters`. Explained in notebooks/04_fast_shuffle.ipynb.
    """
    sizes = sorted(set(sizes) | {n_headline})
    rows = [
        row
        for n in measure.progress(sizes, desc="N")
        for row in time_permutations(n, group_size, repeat, slide, contenders)
    ]
    key = f"grouped_speedup_2p{round(math.log2(n_headline))}"
    figures = {
        key: headline(rows, n_headline),
        "grouped_speedup_headline": headline(rows, n_headline),
        "slide_grouped_speedup_headline": headline(rows, n_headline, "slide's grouped (g="),
    }
    at_head = {r["method"]: r["seconds"] for r in rows if r["n"] == n_headline}
    figures["fastest_full_ns_per_index"] = min(at_head[m] for m in FULL) / n_headline * 1e9
    # the medians behind the two speed-ups (those are medians of per-round ratios, from the same rounds)
    for key, method in (("grouped", "grouped_permutation (g="), ("slide_grouped", "slide's grouped (g=")):
        figures[f"{key}_ns_per_index"] = next(t for m, t in at_head.items() if m.startswith(method)) / n_headline * 1e9
    at_small = {r["method"]: r["ns_per_index"] for r in rows if r["n"] == sizes[0]}
    figures["fastest_full_ns_per_index_smallest"] = min(at_small[m] for m in FULL)
    knobs = {"group_size": group_size, "sizes": sizes, "n_headline": n_headline, "threads": torch.get_num_threads()}
    return BenchResult(rows, figures, knobs=knobs, repeats=repeat)


def run(scale: str) -> BenchResult:
    """Time full and grouped permutations over `scale`'s N sweep plus its headline N (2^26 at workshop)."""
    return cost_curve(
        config.size("shuffle.sizes", scale),
        config.size("shuffle.n_headline", scale),
        config.size("shuffle.group_size", scale),
        config.size("shuffle.repeat", scale),
    )
