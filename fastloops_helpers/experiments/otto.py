"""FFCV vs DataLoader vs the helpers' loader on Otto with the seed's MLP: load-only and full-step times."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from .. import config, measure
from ..data import ffcv_io, otto
from ..load.batch_loader import BatchLoader
from ..models import MLP
from . import BenchResult

SKIP = 2  # batches per epoch left out of step timings: worker start-up and pipeline fill (the seed skips 11)
Step = Callable[[torch.Tensor, torch.Tensor], Any]


def batch_times(loader: Iterable[Any], epochs: int, step: Step | None = None, skip: int = SKIP,
                device: torch.device | None = None, limit: int | None = None) -> list[float]:
    """Return the seconds between consecutive batches (loading plus `step`), over `epochs` epochs.

    As in seed 003: the clock runs from one batch's end to the next's, so it counts everything the loop
    waits for; the first batch's clock starts before the epoch's iterator is made (worker start-up
    included). The first `skip` batches of each epoch are left out (0 keeps the whole epoch: the
    honest throughput), and an epoch stops after `limit` timed batches. Explained in notebooks/10_ffcv_otto.ipynb.
    """
    times: list[float] = []
    for _ in range(epochs):
        last = time.perf_counter()
        batches = iter(loader)
        for i, (x, y) in enumerate(batches):
            if step is not None:
                step(x, y)
            measure.sync(device)
            now = time.perf_counter()
            if i >= skip:
                times.append(now - last)
            last = now
            if limit is not None and i >= skip + limit - 1:
                break
        getattr(batches, "close", lambda: None)()  # stop a generator or FFCV's reader thread early
    if not times:
        raise ValueError(f"no batch timed: each epoch needs more than {skip + 1} batches; use more data")
    return times


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device) -> Step:
    """Return a function that runs one training step (forward, loss, backward, optimizer step) on a batch."""
    loss_fn = nn.CrossEntropyLoss()

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True).flatten()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x.float()), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def prepare(rows: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Load (or generate) Otto, split it, and write the training rows as `.beton` when ffcv is here."""
    rows = config.size("otto.rows") if rows is None else rows
    X, y, X_val, y_val = otto.load_otto(rows, seed=seed)
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
        loaders["FFCV"] = ffcv_io.table_loader(data["beton"], batch_size, num_workers=1, order="random",
                                               device=device, seed=seed, drop_last=True)
    loaders["DataLoader"] = torch.utils.data.DataLoader(
        otto.OttoRows(data["X"], data["y"]), batch_size=batch_size, shuffle=True, num_workers=1,
        pin_memory=cuda, drop_last=True, generator=torch.Generator().manual_seed(seed))
    tensors = (torch.from_numpy(data["X"]).to(device), torch.from_numpy(data["y"]).to(device))
    loaders["helpers"] = BatchLoader(tensors, batch_size=batch_size, shuffle=True, drop_last=True, seed=seed)
    return loaders


def compare(loaders: dict[str, Any], epochs: int, step_factory: Callable[[], Step] | None,
            device: torch.device, desc: str = "", skip: int = SKIP) -> dict[str, list[float]]:
    """Warm each loader up for one epoch, then time `epochs` epochs of each, taking turns epoch by epoch.

    Taking turns spreads any change in the machine's load (other programs) over all loaders alike.
    """
    steps = {name: step_factory() if step_factory is not None else None for name in loaders}
    out: dict[str, list[float]] = {name: [] for name in loaders}
    for name, loader in loaders.items():
        batch_times(loader, 1, steps[name], device=device)  # warm-up: numba compiles FFCV's pipeline here
    for _ in measure.progress(range(epochs), desc=desc, total=epochs):
        for name, loader in loaders.items():
            out[name] += batch_times(loader, 1, steps[name], skip=skip, device=device)
    return out


def table(times: dict[str, list[float]], batch_size: int, baseline: str = "DataLoader") -> pd.DataFrame:
    """Summarise per-batch times as the seed does (mean, median, p95, uplift %) plus samples/s.

    Samples/s divides by the mean, not the median: a loader that gathers several batches at once and then
    hands out views has a tiny median and an occasional slow batch; only the mean counts both.
    """
    t = measure.summarize(times, baseline=baseline if baseline in times else None)
    t["samples_per_s"] = batch_size / t["mean"]
    return t


def mlp_factory(device: torch.device, seed: int = 0) -> Callable[[], Step]:
    """Return a factory of fresh MLP training steps (same initial weights each time), Adam lr 5e-4 as the seed."""
    def factory() -> Step:
        torch.manual_seed(seed)
        model = MLP(otto.NUM_FEATURES, len(otto.CLASSES)).to(device)
        return train_step(model, torch.optim.Adam(model.parameters(), 5e-4), device)
    return factory


def run() -> BenchResult:
    """Measure load-only and full-step batch times of FFCV, DataLoader and the helpers on Otto."""
    device, batch_size, epochs = config.device(), config.size("otto.batch_size"), config.size("otto.epochs")
    data = prepare()
    loaders = make_loaders(data, batch_size, device)
    load = table(compare(loaders, epochs, None, device, "load only", skip=0), batch_size)  # whole epochs
    full = table(compare(loaders, epochs, mlp_factory(device), device, "full step"), batch_size)
    rows = [{"loader": name, "phase": phase, **{k: float(v) for k, v in t.loc[name].items()}}
            for phase, t in (("load", load), ("step", full)) for name in t.index]
    rate = load["samples_per_s"]
    figures = {f"{n.lower()}_load_samples_per_s": float(rate[n]) for n in load.index}
    figures.update({f"{n.lower()}_step_ms": float(full.loc[n, "median"] * 1e3) for n in full.index})
    figures["helpers_over_dataloader_load"] = float(rate["helpers"] / rate["DataLoader"])
    if "FFCV" in rate:
        figures["helpers_over_ffcv_load"] = float(rate["helpers"] / rate["FFCV"])
        figures["ffcv_over_dataloader_load"] = float(rate["FFCV"] / rate["DataLoader"])
    knobs = {"rows": len(data["X"]) + len(data["X_val"]), "train_rows": len(data["X"]),
             "batch_size": batch_size, "epochs": epochs, "skip": SKIP, "device": str(device),
             "ffcv": data["beton"] is not None, "threads": torch.get_num_threads()}
    return BenchResult(rows, figures, knobs=knobs, repeats=epochs)


def accuracy(model: nn.Module, X: np.ndarray, y: np.ndarray, device: torch.device) -> float:
    """Return the fraction of rows of X that `model` classifies as y."""
    model.eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(X).to(device)).argmax(1).cpu().numpy()
    model.train()
    return float((pred == y).mean())


def train_and_evaluate(loader: Iterable[Any], data: dict[str, Any], epochs: int, device: torch.device,
                       seed: int = 0) -> list[float]:
    """Train a fresh MLP (same initial weights for every loader) for `epochs`; return validation accuracy per epoch."""
    torch.manual_seed(seed)
    model = MLP(otto.NUM_FEATURES, len(otto.CLASSES)).to(device)
    step = train_step(model, torch.optim.Adam(model.parameters(), 5e-4), device)
    scores = []
    for _ in range(epochs):
        for x, y in loader:
            step(x, y)
        scores.append(accuracy(model, data["X_val"], data["y_val"], device))
    return scores
