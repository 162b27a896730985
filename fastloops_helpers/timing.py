"""Timers that synchronise CUDA, repeated measurements, summaries, provenance and saved results.

Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from . import config

T = TypeVar("T")
TIMING_PREFIX = "[timing]"  # nbval masks exactly this: tests/sanitize.cfg
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt}"  # no rate or ETA, so stored outputs stay stable
VERSIONED = ("torch", "numpy", "tensordict", "tensorflow-cpu", "ffcv", "Pillow")


def sync(device: torch.device | str | None = None) -> None:
    """Wait for queued CUDA work so that a clock read after it is honest."""
    dev = torch.device(device) if device is not None else None
    if (dev is None or dev.type == "cuda") and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize(dev if dev is not None and dev.type == "cuda" else None)


class Timer:
    """Time a block with `perf_counter`, synchronising CUDA before both clock reads.

    >>> with Timer() as t:
    ...     _ = sum(range(1000))
    >>> t.seconds > 0
    True
    """

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.device = device
        self.seconds = float("nan")

    def __enter__(self) -> Timer:
        sync(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        sync(self.device)
        self.seconds = time.perf_counter() - self._start


def measure(fn: Callable[[], Any], repeat: int | None = None, warmup: int | None = None,
            device: torch.device | str | None = None) -> list[float]:
    """Call `fn` `warmup` times untimed, then `repeat` times timed; return the seconds of each."""
    repeat = config.size("repeat") if repeat is None else repeat
    warmup = config.size("warmup") if warmup is None else warmup
    if repeat < 1 or warmup < 0:
        raise ValueError(f"need repeat >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}")
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        with Timer(device) as t:
            fn()
        samples.append(t.seconds)
    return samples


def summarize(samples: Mapping[str, Sequence[float]], baseline: str | None = None) -> pd.DataFrame:
    """Tabulate mean, median, p95 and min per name, and uplift % of the median against `baseline`.

    Uplift follows seed 003: (x - baseline) / baseline * 100, so -90 means 90 % less time.
    """
    rows = {}
    for name, values in samples.items():
        v = np.asarray(values, dtype=float)
        if v.size == 0:
            raise ValueError(f"no samples for {name!r}")
        rows[name] = {"mean": v.mean(), "median": np.median(v), "p95": np.quantile(v, 0.95), "min": v.min()}
    table = pd.DataFrame.from_dict(rows, orient="index")
    if baseline is not None:
        if baseline not in table.index:
            raise KeyError(f"baseline {baseline!r} is not among {list(table.index)}")
        base = table.loc[baseline, "median"]
        table["uplift_%"] = (table["median"] - base) / base * 100
    return table


def show(label: str, seconds: float) -> None:
    """Print one timing with the fixed prefix that tests/sanitize.cfg masks."""
    print(f"{TIMING_PREFIX} {label}: {seconds:.4g} s")


def progress(iterable: Iterable[T], desc: str = "", total: int | None = None, **kw: Any) -> Iterable[T]:
    """Wrap `iterable` in a text progress bar whose final line is the same on every run."""
    return tqdm(iterable, desc=desc, total=total, bar_format=BAR_FORMAT, file=sys.stderr,
                mininterval=0.5, ascii=True, **kw)


def versions() -> dict[str, str | None]:
    """Return the installed versions of python and the packages that shape the figures."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for dist in VERSIONED:
        try:
            found[dist.removesuffix("-cpu").lower()] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist.removesuffix("-cpu").lower()] = None
    return found


def cpu_name() -> str:
    """Return the CPU model name (from /proc/cpuinfo on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_name() -> str | None:
    """Return the GPU's name, memory and CUDA version, or None without one."""
    if not torch.cuda.is_available():
        return None
    p = torch.cuda.get_device_properties(0)
    return f"{p.name} ({p.total_memory / 2**30:.0f} GiB, CUDA {torch.version.cuda}, x{torch.cuda.device_count()})"


def hardware_line() -> str:
    """Return one line describing this machine and the software versions."""
    import psutil

    ram = psutil.virtual_memory().total / 2**30
    cores = f"{psutil.cpu_count(logical=False) or '?'}c/{os.cpu_count()}t"
    gpu = gpu_name() or "no GPU"
    soft = ", ".join(f"{k} {v}" for k, v in versions().items() if v)
    return f"{cpu_name()} ({cores}), {ram:.0f} GiB RAM, {gpu} | {soft}"


def provenance(knobs: Mapping[str, Any] | None = None, repeats: int | None = None) -> dict[str, Any]:
    """Return what a saved result needs to be read later: machine, versions, scale, knobs, repeats."""
    return {"hardware": hardware_line(), "versions": versions(), "scale": config.scale(),
            "device": str(config.device()), "knobs": dict(knobs or {}), "repeats": repeats,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def save_results(name: str, figures: Mapping[str, float], rows: Sequence[Mapping[str, Any]] = (),
                 knobs: Mapping[str, Any] | None = None, repeats: int | None = None,
                 path: str | Path | None = None) -> Path:
    """Write `{"name", "provenance", "rows", "figures"}` as JSON (default results/NAME.json)."""
    out = Path(path) if path is not None else config.results_dir() / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"name": name, "provenance": provenance(knobs, repeats),
           "rows": [dict(r) for r in rows], "figures": {k: float(v) for k, v in figures.items()}}
    out.write_text(json.dumps(doc, indent=2, default=_jsonable) + "\n")
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, (torch.device, torch.dtype, Path)):
        return str(value)
    raise TypeError(f"cannot save {type(value).__name__} as JSON: convert it to a number or string first")
