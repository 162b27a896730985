"""FFCV vs DataLoader vs the helpers' loader on Otto with the seed's MLP: load-only and full-step times."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from .. import config, measure
from ..data import ffcv_io, otto_csv
from ..load.batch_loader import BatchLoader
from ..load.move import move_to
from ..measure.steps import Blocks, StepTimes, compare_steps
from ..models import MLP
from . import BenchResult
from .training import SKIP, Step, batch_times, table, train_step


def prepare(rows: int, seed: int = 0) -> dict[str, Any]:
    """Load (or generate) `rows` rows of Otto, split them, and write the training rows as `.beton` when ffcv is here."""
    X, y, X_val, y_val = otto_csv.load_otto(rows, seed=seed)
    beton = None
    if ffcv_io.have_ffcv():
        beton = config.data_dir() / f"otto-synthetic-{rows}-s{seed}" / "train.beton"
        if not beton.exists():
            ffcv_io.write_table_beton(beton, X, y)
    return {"X": X, "y": y, "X_val": X_val, "y_val": y_val, "beton": beton}


def make_loaders(data: dict[str, Any], batch_size: int, device: torch.device, seed: int = 0) -> dict[str, Any]:
    """Return the three loaders the seed compares (FFCV only when importable), each shuffling every epoch."""
    cuda = device.type == "cuda"
    loaders: dict[str, Any] = {}
    if data["beton"] is not None:
        loaders["FFCV"] = ffcv_io.Batches(
            ffcv_io.table_loader(
                data["beton"], batch_size, num_workers=1, order="random", device=device, seed=seed, drop_last=True
            )
        )
    loaders["DataLoader"] = torch.utils.data.DataLoader(
        otto_csv.OttoRows(data["X"], data["y"]),
        batch_size=batch_size,
        shuffle=True,
        num_workers=1,
        pin_memory=cuda,
        drop_last=True,
        generator=torch.Generator().manual_seed(seed),
    )
    tensors = move_to((torch.from_numpy(data["X"]), torch.from_numpy(data["y"])), device)
    loaders["helpers"] = BatchLoader(tensors, batch_size=batch_size, shuffle=True, drop_last=True, seed=seed)
    return loaders


def compare(
    loaders: dict[str, Any],
    epochs: int,
    step_factory: Callable[[], Step] | None,
    device: torch.device,
    desc: str = "",
    skip: int = SKIP,
) -> dict[str, list[float]]:
    """Warm each loader up for one epoch, then time `epochs` rounds of one epoch of each; return batch times.

    Every round runs the loaders in a new order, so a change in the machine's load (other programs) hits all
    loaders alike and no loader always follows the same neighbour. Each loader's list holds its rounds' batches
    in order, the same number per round: `per_round` splits it again. With a step, each batch's time is its
    wait plus the step, timed by `step_times`.
    """
    steps = {name: step_factory() if step_factory is not None else None for name in loaders}
    for name, loader in loaders.items():  # numba compiles FFCV's pipeline in its first epoch
        batch_times(loader, 1, steps[name], skip=0, device=device)
    if step_factory is not None:
        return step_times(loaders, step_factory, epochs, device, desc, skip).flat("steps")
    out: dict[str, list[float]] = {name: [] for name in loaders}

    def epoch(name: str) -> Callable[[], None]:
        return lambda: out[name].extend(batch_times(loaders[name], 1, None, skip=skip, device=device))

    measure.interleaved({name: epoch(name) for name in loaders}, epochs, 0, device, desc, shuffle=True)
    return out


def step_times(
    loaders: dict[str, Any],
    step_factory: Callable[[], Step],
    epochs: int,
    device: torch.device,
    desc: str = "",
    skip: int = SKIP,
) -> StepTimes:
    """Train behind each loader for `epochs` rounds of one epoch each, each loader waiting as it would alone.

    An epoch is a block of `measure.steps.compare_steps`: a fresh iterator, its first `skip` batches left out
    (0 counts the start-up too), then every batch to the epoch's end, each batch's wait kept apart; the iterator
    is closed before the next loader's epoch, in a new order every round. Explained in notebooks/10_ffcv_otto.ipynb.
    """
    return compare_steps(loaders, step_factory, epochs, Blocks(settle=skip, timed=None), device, desc)


def per_round(
    times: dict[str, list[float]], rounds: int, stat: Callable[[list[float]], float]
) -> dict[str, list[float]]:
    """Split each loader's batch times (from `compare`) into its `rounds` epochs and return `stat` of each epoch."""
    out = {}
    for name, values in times.items():
        if not values or len(values) % rounds:
            raise ValueError(f"{name!r} has {len(values)} batch times, not the same number in each of {rounds} rounds")
        n = len(values) // rounds
        out[name] = [float(stat(values[i * n : (i + 1) * n])) for i in range(rounds)]
    return out


def load_only(
    loaders: dict[str, Any], epochs: int, batch_size: int, device: torch.device, desc: str = "load only"
) -> tuple[pd.DataFrame, dict[str, list[float]]]:
    """Time `epochs` load-only rounds (every batch of one epoch of each loader, in a new order each round).

    Returns the per-batch table and {loader: samples/s per round}: compare two loaders with
    `measure.ratios(rates, a, b)`, their per-round ratios. Explained in notebooks/10_ffcv_otto.ipynb.
    """
    times = compare(loaders, epochs, None, device, desc, skip=0)
    seconds = per_round(times, epochs, math.fsum)  # every batch of the epoch: the epoch's time
    batches = {name: len(v) // epochs for name, v in times.items()}
    return table(times, batch_size), {n: [batches[n] * batch_size / s for s in seconds[n]] for n in times}


def mlp_factory(device: torch.device, seed: int = 0) -> Callable[[], Step]:
    """Return a factory of fresh MLP training steps (same initial weights each time), Adam lr 5e-4 as the seed."""

    def factory() -> Step:
        torch.manual_seed(seed)
        model = MLP(otto_csv.NUM_FEATURES, len(otto_csv.CLASSES)).to(device)
        return train_step(model, torch.optim.Adam(model.parameters(), 5e-4), device)

    return factory


# ------------------------------------------------------------------------ seed 003's own protocol, as written
SEED_SKIP = 11  # the seed times a batch only `if i > 10`: batches 0 to 10 of each epoch are left out


def seed_protocol_data(data: dict[str, Any], rows: int) -> dict[str, Any]:
    """Return the first `rows` training rows (the seed's 39,601 at workshop and full) and their own `.beton`."""
    if rows > len(data["X"]):
        raise ValueError(
            f"the seed protocol wants {rows} rows but the training split has {len(data['X'])}: "
            "pass more rows to prepare() (otto.rows in the scale table)"
        )
    X, y = np.array(data["X"][:rows]), np.array(data["y"][:rows])  # the split was shuffled: a random subset
    beton = None
    if data["beton"] is not None:
        beton = data["beton"].with_name(f"seed-protocol-{rows}.beton")
        if not beton.exists():
            ffcv_io.write_table_beton(beton, X, y)
    return {"X": X, "y": y, "beton": beton}


def seed_protocol_loaders(data: dict[str, Any], batch_size: int, device: torch.device) -> dict[str, Any]:
    """Return the seed's loaders: no shuffle, one worker, pinned memory (where a GPU makes it mean anything).

    FFCV's Loader keeps its default `drop_last=True` and the DataLoader its default `False`, as in the seed;
    the helpers' loader is added under the same rules.
    """
    loaders: dict[str, Any] = {}
    if data["beton"] is not None:
        loaders["FFCV"] = ffcv_io.Batches(
            ffcv_io.table_loader(
                data["beton"], batch_size, num_workers=1, order="sequential", device=device, drop_last=True
            )
        )
    loaders["DataLoader"] = torch.utils.data.DataLoader(
        otto_csv.OttoRows(data["X"], data["y"]), batch_size=batch_size, num_workers=1, pin_memory=device.type == "cuda"
    )
    tensors = move_to((torch.from_numpy(data["X"]), torch.from_numpy(data["y"])), device)
    loaders["helpers"] = BatchLoader(tensors, batch_size=batch_size, shuffle=False)
    return loaders


def forward_loss_factory(device: torch.device, seed: int = 0) -> Callable[[], Step]:
    """Return a factory of the seed's timed step: forward and loss only (no backward, no optimizer step)."""
    loss_fn = nn.CrossEntropyLoss()

    def factory() -> Step:
        torch.manual_seed(seed)
        model = MLP(otto_csv.NUM_FEATURES, len(otto_csv.CLASSES)).to(device)

        def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            x, y = move_to((x, y), device, non_blocking=True)
            return loss_fn(model(x), y.flatten())  # autograd still records the graph, as in the seed

        return step

    return factory


def seed_protocol(
    loaders: dict[str, Any],
    step_factory: Callable[[], Step],
    epochs: int,
    device: torch.device,
    desc: str = "",
    skip: int = SEED_SKIP,
) -> dict[str, list[float]]:
    """Time seed 003's Otto protocol with its timing loop as written; return {loader: seconds of each timed batch}.

    The clock runs back to back: a batch's time is everything from the end of the previous batch to the end of
    its own step (the wait for the batch, the step, a device sync), kept from batch `skip` of each epoch on
    (`skip=0`: every batch, the first with the start of the epoch's iterator). No warm-up epoch. The seed ran
    one loader's epochs, then the other's; here the loaders take turns, one epoch each per round in a new order,
    so a slow spell of the machine hits them alike. Each loader keeps one model from `step_factory` through all
    its epochs, as the seed's shared model did; the loader's name is its contender for the warp (`measure.warp`).
    """
    steps = {name: step_factory() for name in loaders}
    times: dict[str, list[float]] = {name: [] for name in loaders}
    turns = random.Random(0)
    for _ in measure.progress(range(epochs), desc=desc):  # the seed's `for j in range(10)`
        for name in turns.sample(list(loaders), len(loaders)):  # the loaders' turns: a new order every round
            now = measure.now()
            for i, b in enumerate(loaders[name]):
                x, y = b
                steps[name](x, y)  # the seed: x = x.cuda(); y = y.cuda().flatten(); loss = critetion(model(x), y)
                measure.sync(device)  # torch.cuda.synchronize()
                if i > skip - 1:  # the seed's `if i > 10`, with skip = SEED_SKIP = 11
                    times[name].append(measure.elapsed(now, name))
                now = measure.now()
    return times


def seed_table(times: dict[str, list[float]], baseline: str = "DataLoader") -> pd.DataFrame:
    """Return seed 003's table as it builds it: a row per loader, then an uplift row per other loader.

    A loader's row holds the mean, median and 0.95 quantile of its batch times (seconds); the row
    "UPLIFT name (%)" holds (name - baseline) / baseline x 100 for each column (the seed's one "UPLIFT (%)" row
    is FFCV's against its DataLoader, "TORCH").
    """
    means = []
    medians = []
    quantiles = []
    names = []
    for name, t in times.items():
        means.append(np.mean(t))
        medians.append(np.median(t))
        quantiles.append(np.quantile(t, 0.95))
        names.append(name)
    d = pd.DataFrame({"Mean": means, "Median": medians, "0.95-Quantile": quantiles})
    d.index = names
    for name in names:
        if name != baseline:
            up = ((d.loc[name] - d.loc[baseline]) / d.loc[baseline]) * 100
            d.loc[f"UPLIFT {name} (%)"] = up.values
    return d


def figures(
    load: pd.DataFrame,
    rates: dict[str, list[float]],
    full: pd.DataFrame,
    step_rounds: dict[str, list[float]],
    seed: pd.DataFrame | None = None,
    seed_rounds: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """Return notebook 10's and `bench otto`'s figures, named as in the claims registry.

    Each ratio of two loaders is the median of its per-round ratios, saved with its 95 % interval
    (`_ci_low`, `_ci_high`): load-only `rates` (samples/s per round, from `load_only`), and the median step per
    round (`step_rounds`, `seed_rounds`: `per_round(times, epochs, measure.median)` of the times of `compare`
    and `seed_protocol`); `seed` is `seed_table`'s table, whose loaders' medians are saved.
    """
    rate = load["samples_per_s"]
    out = {f"otto_{n.lower()}_load_samples_per_s": float(rate[n]) for n in load.index}
    out.update({f"otto_{n.lower()}_step_ms": float(full.loc[n, "median"] * 1e3) for n in full.index})
    out.update(
        measure.interval_figures("otto_helpers_over_dataloader_load", measure.ratios(rates, "helpers", "DataLoader"))
    )
    if "FFCV" in rate:
        out.update(measure.interval_figures("otto_helpers_over_ffcv_load", measure.ratios(rates, "helpers", "FFCV")))
        out.update(
            measure.interval_figures("otto_ffcv_over_dataloader_load", measure.ratios(rates, "FFCV", "DataLoader"))
        )
        step = measure.ratios(step_rounds, "DataLoader", "FFCV")
        out.update(measure.interval_figures("otto_dataloader_step_over_ffcv_step", step))
    if seed is not None:
        named = [n for n in seed.index if not n.startswith("UPLIFT")]  # the loaders' rows of `seed_table`
        out.update({f"otto_seed_protocol_{n.lower()}_ms": float(seed.loc[n, "Median"] * 1e3) for n in named})
        if "FFCV" in seed.index and seed_rounds is not None:  # uplift % of the median, per round
            uplift = [(r - 1) * 100 for r in measure.ratios(seed_rounds, "FFCV", "DataLoader")]
            out.update(measure.interval_figures("otto_seed_protocol_uplift_pct", uplift))
    return out


def run(scale: str) -> BenchResult:
    """Measure load-only and full-step batch times of FFCV, DataLoader and the helpers, and seed 003's protocol."""
    s, device = config.sizes("otto", scale), config.device()
    batch_size, epochs = s["batch_size"], s["epochs"]
    data = prepare(s["rows"])
    loaders = make_loaders(data, batch_size, device)
    load, rates = load_only(loaders, epochs, batch_size, device)  # whole epochs, img/s per round
    stepped = step_times(loaders, mlp_factory(device), epochs, device, "full step")
    full_times = stepped.flat("steps")
    full, waits = table(full_times, batch_size), table(stepped.flat("waits"), batch_size)
    seed_loaders = seed_protocol_loaders(seed_protocol_data(data, s["seed_rows"]), s["seed_batch_size"], device)
    seed_epochs = s["seed_epochs"]
    seed_times = seed_protocol(seed_loaders, forward_loss_factory(device), seed_epochs, device, "seed 003 protocol")
    seed = seed_table(seed_times)
    rows = [
        {"loader": name, "phase": phase, **{k: float(v) for k, v in t.loc[name].items()}}
        for phase, t in (("load", load), ("step", full), ("wait", waits), ("seed protocol", seed))
        for name in t.index
    ]
    knobs = {
        "rows": len(data["X"]) + len(data["X_val"]),
        "train_rows": len(data["X"]),
        "batch_size": batch_size,
        "epochs": epochs,
        "skip": SKIP,
        "device": str(device),
        "ffcv": data["beton"] is not None,
        "threads": torch.get_num_threads(),
        **{f"seed_{k}": s[f"seed_{k}"] for k in ("rows", "batch_size", "epochs")},
        "seed_skip": SEED_SKIP,
    }
    step_rounds = per_round(full_times, epochs, measure.median)  # each round's median step, per loader
    seed_rounds = per_round(seed_times, seed_epochs, measure.median)
    return BenchResult(rows, figures(load, rates, full, step_rounds, seed, seed_rounds), knobs=knobs, repeats=epochs)


def accuracy(model: nn.Module, X: np.ndarray, y: np.ndarray, device: torch.device) -> float:
    """Return the fraction of rows of X that `model` classifies as y."""
    model.eval()
    with torch.no_grad():
        pred = model(move_to(torch.from_numpy(X), device)).argmax(1).cpu().numpy()
    model.train()
    return float((pred == y).mean())


def train_and_evaluate(
    loader: Iterable[Any], data: dict[str, Any], epochs: int, device: torch.device, seed: int = 0
) -> list[float]:
    """Train a fresh MLP (same initial weights for every loader) for `epochs`; return validation accuracy per epoch."""
    torch.manual_seed(seed)
    model = MLP(otto_csv.NUM_FEATURES, len(otto_csv.CLASSES)).to(device)
    step = train_step(model, torch.optim.Adam(model.parameters(), 5e-4), device)
    scores = []
    for _ in range(epochs):
        for x, y in loader:
            step(x, y)
        scores.append(accuracy(model, data["X_val"], data["y_val"], device))
    return scores
