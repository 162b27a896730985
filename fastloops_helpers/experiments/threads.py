"""Threads or processes: DataLoader workers, SPDL, torchdata.nodes and ThreadLoader on decode-every-epoch work.

Explained in notebooks/14_threads_or_processes.ipynb.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import torch
from torch.utils.data import DataLoader

from .. import config, measure
from ..data.jpeg_folder import ImageFolder, synthetic_imagefolder
from ..load import transforms as T
from ..load.thread_loader import ThreadLoader
from ..measure import timeline
from ..measure.clock import now
from ..measure.stats import HIGH, LOW
from . import BenchResult
from . import imagefolder as imf

RESIZE, CROP = 256, 224
FREE_THREADED_PENALTY = (0.05, 0.10)  # 3.14t's single-thread slowdown (claims: ft_single_thread_penalty_pct)
ONE_THREAD = "one thread"  # head_to_head's name for one thread fetching samples (the limit's numerator)
FFMPEG_NOTE = "spdl.io's decoders need FFmpeg 6+ (Debian 12 ships 5.1): SPDL runs the same Pillow function here"


class Decode:
    """One PIL image -> resize the shorter side, center crop, uint8 CHW tensor (picklable, no state)."""

    def __call__(self, img: Any) -> torch.Tensor:
        return T.ValSampleTransform(RESIZE, CROP).precompute(img)


def dataset(scale: str | None = None) -> ImageFolder:
    """Return the synthetic ImageFolder's train split at `scale` (default: the active one), decoding every access."""
    return ImageFolder(synthetic_imagefolder(scale) / "train", transform=Decode())


def tree_cpu_s() -> float:
    """Return the user + system CPU seconds of this process and its live children."""
    procs = [psutil.Process()] + psutil.Process().children(recursive=True)
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system + (t.children_user + t.children_system if p is procs[0] else 0.0)
        except psutil.Error:
            pass
    return total


def tree_pss_mb() -> float:
    """Return the summed proportional set size (PSS) of this process and its children, in MB."""
    total = 0
    for p in [psutil.Process()] + psutil.Process().children(recursive=True):
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            pass
    return total / 1e6


def epoch_stats(make: Callable[[], Iterable[Any]], epochs: int) -> dict[str, float]:
    """Run `epochs` timed epochs of the loader `make()` returns (after one warm-up); return rates, CPU and PSS.

    `pss_mb` is the memory of every process while the loader runs; `added_pss_mb` is that less the process
    tree's PSS just before the loader was made: what loading cost beyond what the process already held (memory
    an earlier loader left allocated is not counted again).
    """
    before, base = _child_pids(), tree_pss_mb()
    loader = make()
    sum(1 for _ in loader)
    rates, cpu, pss, first = [], [], [], []
    for _ in range(epochs):
        images, it, c0, mid = 0, iter(loader), tree_cpu_s(), None
        with measure.Timer() as t:
            with measure.Timer() as f:
                images += len(next(it)[0])
            for k, (x, _) in enumerate(it):
                images += len(x)
                if k == 2:
                    mid = tree_pss_mb()
        rates.append(images / t.seconds)
        cpu.append((tree_cpu_s() - c0) / images)
        pss.append(mid if mid is not None else tree_pss_mb())
        first.append(f.seconds)
    del it, loader
    _reap(before)
    return {
        "img_per_s": measure.median(rates),
        "cpu_s_per_img": measure.median(cpu),
        "pss_mb": max(pss),
        "added_pss_mb": max(pss) - base,
        "first_batch_s": measure.median(first),
    }


def _child_pids() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _reap(before: set[int], timeout: float = 5.0) -> None:
    """Collect the loader just dropped and wait for the processes it started, so the next baseline is clean."""
    gc.collect()
    started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    psutil.wait_procs(started, timeout=timeout)


def spdl_loader(ds: ImageFolder, batch_size: int, threads: int) -> Iterable[Any]:
    """Return an iterable whose each pass runs SPDL's thread pipeline over `ds` in order."""
    from spdl.pipeline import PipelineBuilder

    class Epochs:
        def __iter__(self) -> Any:
            # spdl's PipelineBuilder() infers no item types, and notebook 14 shows it so: hence the ignores
            p = (
                PipelineBuilder()  # type: ignore[var-annotated]
                .add_source(range(len(ds)))  # type: ignore[arg-type]  # the indices, in order
                # samples on `threads` threads
                .pipe(ds.__getitem__, concurrency=threads, output_order="input")  # type: ignore[arg-type]
                .aggregate(batch_size)  # lists of batch_size samples
                .pipe(torch.utils.data.default_collate)  # one batch of tensors
                .add_sink(3)  # at most 3 batches waiting
                .build(num_threads=threads)
            )  # the asyncio loop's thread pool
            with p.auto_stop():
                yield from p

    return Epochs()


def nodes_loader(ds: ImageFolder, batch_size: int, workers: int, method: str) -> Iterable[Any]:
    """Return an iterable whose each pass runs torchdata.nodes' ParallelMapper (threads or processes)."""
    import torchdata.nodes as tn

    class Epochs:
        def __iter__(self) -> Any:
            gc.collect()  # shut the last epoch's workers down here, not in a forked child that inherits them
            node = tn.ParallelMapper(
                tn.IterableWrapper(range(len(ds))), ds.__getitem__, num_workers=workers, method=method, in_order=True
            )  # samples on threads or processes, in order
            node = tn.Batcher(node, batch_size, drop_last=False)  # lists of batch_size samples
            yield from tn.Loader(tn.Mapper(node, torch.utils.data.default_collate))

    return Epochs()


def configurations(
    ds: ImageFolder, batch_size: int, threads: int, workers: int
) -> dict[str, Callable[[], Iterable[Any]]]:
    """Return {pipeline name: a function making its loader}; optional packages missing are left out.

    The DataLoader runs with 0 to `workers` worker processes, every thread pipeline with `threads` threads.
    """
    configs: dict[str, Callable[[], Iterable[Any]]] = {}
    for w in range(workers + 1):  # worker processes (0: in this process), started once and kept between epochs
        configs[f"DataLoader, {w} workers (fork)"] = partial(
            DataLoader, ds, batch_size, num_workers=w, persistent_workers=w > 0
        )
    configs[f"ThreadLoader, {threads} threads"] = lambda: ThreadLoader(ds, batch_size, threads=threads)
    if _has("spdl.pipeline"):
        configs[f"SPDL pipeline, {threads} threads"] = lambda: spdl_loader(ds, batch_size, threads)
    if _has("torchdata.nodes"):
        configs[f"torchdata.nodes, {threads} threads"] = lambda: nodes_loader(ds, batch_size, threads, "thread")
        configs[f"torchdata.nodes, {workers} processes"] = lambda: nodes_loader(ds, batch_size, workers, "process")
    configs["memmap + BatchLoader (notebook 09)"] = lambda: imf.memmap_loader(imf.prepare().train, "train", batch_size)
    return configs


def skipped() -> dict[str, str]:
    """Return {optional pipeline: why it is skipped here}."""
    out = {"spdl.io decoders": FFMPEG_NOTE}
    for mod, extra in (("spdl.pipeline", "spdl-core"), ("torchdata.nodes", "torchdata")):
        if not _has(mod):
            out[mod] = f"not installed: pip install '.[threads]' (needs {extra})"
    return out


def _has(module: str) -> bool:
    try:
        __import__(module)
        return True
    except Exception:  # noqa: BLE001 - ImportError or a broken native library
        return False


def start_workers(ds: Any, batch_size: int, workers: int, method: str) -> Iterator[Any]:
    """Start a `workers`-worker DataLoader under start `method` and take its first batch; return the running iterator.

    What `startup` times for each start method. Explained in notebooks/14_threads_or_processes.ipynb (section 4).
    """
    batches = iter(DataLoader(ds, batch_size, num_workers=workers, multiprocessing_context=method))
    next(batches)  # the workers start here: a fresh process each, then one batch of decodes
    return batches


def startup(
    ds: ImageFolder,
    batch_size: int,
    workers: int,
    methods: tuple[str, ...] = ("fork", "forkserver", "spawn"),
    start: Callable[[Any, int, int, str], Iterator[Any]] = start_workers,
) -> list[dict[str, Any]]:
    """Return, per start method, the seconds `start` takes (by default a fresh `workers`-worker DataLoader's first
    batch) and the PSS of this process and its workers just after."""
    size = len(pickle.dumps(ds))
    rows = []
    for m in methods:
        with measure.Timer() as t:
            batches = start(ds, batch_size, workers, m)
        rows.append(
            {
                "start_method": m,
                "workers": workers,
                "first_batch_s": t.seconds,
                "pickled_bytes": size,
                "pss_mb": tree_pss_mb(),
            }
        )
        del batches
    return rows


def one_thread_rate(ds: ImageFolder, images: int, repeat: int) -> float:
    """Return one thread's images/s (read, decode, resize, crop) over `images` samples spread over `ds`.

    Times `repeat` passes after one warm-up and returns the median pass's rate. Times the cores, it is the limit
    every parallel pipeline is compared with. Explained in notebooks/14_threads_or_processes.ipynb (section 2).
    """
    picks = _picks(ds, images)
    seconds = measure.measure(partial(_fetch, ds, picks), repeat=repeat, warmup=1)
    return len(picks) / measure.median(seconds)


def head_to_head(
    configs: dict[str, Callable[[], Iterable[Any]]],
    best_dataloader: str,
    ds: ImageFolder,
    limit_images: int,
    rounds: int,
) -> dict[str, list[float]]:
    """Time the ThreadLoader, the best DataLoader and SPDL's pipeline against each other in interleaved rounds.

    Each round runs one epoch of the ThreadLoader of `configs`, of `best_dataloader` (a name in `configs`, chosen
    from a sweep first) and of SPDL's pipeline when `configs` has one, and one thread over `limit_images` samples,
    in a new random order. Returns {name: images/s per round} ("one thread" for the last), so that each ratio can
    be taken per round (`round_ratios`). Explained in notebooks/14_threads_or_processes.ipynb (section 3).
    """
    names = [thread_name(configs), best_dataloader, *[n for n in configs if n.startswith("SPDL")]]
    before, picks = _child_pids(), _picks(ds, limit_images)
    loaders = {name: configs[name]() for name in names}
    fns: dict[str, Callable[[], Any]] = {name: measure.drain(loader) for name, loader in loaders.items()}
    fns[ONE_THREAD] = partial(_fetch, ds, picks)
    images = {name: len(ds) for name in names} | {ONE_THREAD: len(picks)}
    seconds = measure.interleaved(fns, repeat=rounds, warmup=1, shuffle=True)
    del fns, loaders
    _reap(before)  # stop the DataLoader's persistent workers before anything else is measured
    return {name: [images[name] / s for s in values] for name, values in seconds.items()}


def round_ratios(rates: dict[str, list[float]], cores: int) -> dict[str, list[float]]:
    """Return the per-round ratios the targets check, from `head_to_head`'s images/s per round.

    ThreadLoader over the best DataLoader, over SPDL (when timed), over the limit (one thread's rate in the
    same round times `cores`) and over one thread (its speed-up, which `gil_prediction` predicts). Their medians
    and 95 % intervals are `figures`' (`measure.verdict` reads them).
    """
    tl = thread_name(rates)
    dl = next(n for n in rates if n.startswith("DataLoader"))
    out = {
        "helpers_threads_over_dataloader_best": measure.ratios(rates, tl, dl),
        "helpers_threads_over_limit": [t / (o * cores) for t, o in zip(rates[tl], rates[ONE_THREAD])],
        "helpers_threads_speedup": measure.ratios(rates, tl, ONE_THREAD),
    }
    spdl = next((n for n in rates if n.startswith("SPDL")), None)
    if spdl is not None:
        out["helpers_threads_over_spdl"] = measure.ratios(rates, tl, spdl)
    return out


def _picks(ds: ImageFolder, images: int) -> range:
    return range(0, len(ds), max(1, len(ds) // images))[:images]


def _fetch(ds: ImageFolder, picks: Iterable[int]) -> list[Any]:
    return [ds[i] for i in picks]


GIL_N = 2  # threads and processes of the GIL-share rounds: the fewest that contend, and every machine has them


def gil_rounds(ds: Any, images: int, rounds: int, n: int = GIL_N) -> dict[str, list[float]]:
    """Time the same per-sample work on one thread, `n` threads, `n` forked processes and an `n`-worker
    DataLoader, interleaved over `rounds`; return {contender: images/s per round}.

    Threads and processes run `ds[i]` over the same `images` samples in chunks and keep nothing, so the two
    differ only in the GIL; the DataLoader adds what a loader pays to ship samples back (pickling, shared
    memory, collate). Explained in notebooks/14_threads_or_processes.ipynb (section 1).
    """
    picks = list(_picks(ds, images))
    size = max(1, len(picks) // (4 * n))
    chunks = [picks[i : i + size] for i in range(0, len(picks), size)]
    context = multiprocessing.get_context("fork")
    subset = torch.utils.data.Subset(ds, picks)
    with ThreadPoolExecutor(n) as pool, context.Pool(n, _pool_start, (ds,)) as procs:
        loader = DataLoader(subset, 8, num_workers=n, persistent_workers=True)
        fns: dict[str, Callable[[], Any]] = {
            ONE_THREAD: partial(_fetch, ds, picks),
            f"{n} threads": lambda: list(pool.map(partial(_fetch, ds), chunks)),
            f"{n} processes": lambda: procs.map(_pool_fetch, chunks, chunksize=1),
            f"DataLoader, {n} workers": measure.drain(loader),
        }
        seconds = measure.interleaved(fns, repeat=rounds, warmup=1, shuffle=True)
        del fns, loader
    return {name: [len(picks) / s for s in values] for name, values in seconds.items()}


_POOL_DS: Any = None  # the dataset of a gil_rounds process, inherited through fork


def _pool_start(ds: Any) -> None:
    global _POOL_DS
    _POOL_DS = ds
    torch.set_num_threads(1)  # as in DataLoader workers


def _pool_fetch(chunk: list[int]) -> int:
    for i in chunk:
        _POOL_DS[i]
    return len(chunk)


def gil_shares(rates: dict[str, list[float]], n: int = GIL_N) -> dict[str, list[float]]:
    """Return, per round of `gil_rounds`, the GIL-held share s of a sample and the DataLoader's overhead o.

    Amdahl's law with s the share of one sample's time that holds the GIL: `n` threads speed up by
    1 / (s + (1 - s) / n) where `n` processes doing the same work speed up n-fold (both on the same cores), so
    processes over threads = 1 + (n - 1) s, and s = (processes / threads - 1) / (n - 1). The DataLoader's
    per-sample overhead is o = processes / DataLoader - 1. Explained in notebooks/14_threads_or_processes.ipynb.
    """
    procs, thr, dl = rates[f"{n} processes"], rates[f"{n} threads"], rates[f"DataLoader, {n} workers"]
    return {
        "gil_share": [(p / t - 1) / (n - 1) for p, t in zip(procs, thr)],
        "dataloader_overhead": [p / d - 1 for p, d in zip(procs, dl)],
    }


def amdahl(share: float, n: float) -> float:
    """Return the speed-up of `n` threads when `share` of each sample's time holds the GIL (1 / share as n grows)."""
    return 1 / (max(share, 0.0) + (1 - max(share, 0.0)) / n)


def crossover_cores(share: float, overhead: float) -> float:
    """Return the core count above which processes (speed-up C / (1 + overhead)) beat threads (`amdahl`).

    C / (1 + o) > 1 / (s + (1 - s) / C) holds when s C + 1 - s > 1 + o, so when C > 1 + o / s; infinite at
    s <= 0 (nothing holds the GIL: threads never lose), 1 at o <= 0 (processes pay nothing: they never lose).
    """
    if share <= 0:
        return float("inf")
    return 1 + max(overhead, 0.0) / share


def gil_prediction(shares: dict[str, list[float]], cores: int) -> dict[str, float]:
    """Return the GIL share, the thread cap, the predicted speed-up on `cores` and the crossover, with intervals.

    Each comes from the median of `gil_shares`' per-round values; an interval maps the share's (and the
    overhead's) 95 % interval through the same monotone formula.
    """
    s, o = shares["gil_share"], shares["dataloader_overhead"]
    (s_lo, s_hi), (o_lo, o_hi) = measure.median_interval(s), measure.median_interval(o)
    sm, om = measure.median(s), measure.median(o)
    out = measure.interval_figures("gil_share", s) | measure.interval_figures("dataloader_overhead", o)
    cap = {"": sm, LOW: s_hi, HIGH: s_lo}
    out |= {f"threads_cap_speedup{k}": 1 / v if v > 0 else float("inf") for k, v in cap.items()}
    out |= {f"threads_predicted_speedup{k}": amdahl(v, cores) for k, v in cap.items()}
    out |= {
        "processes_overtake_cores": crossover_cores(sm, om),
        "processes_overtake_cores" + LOW: crossover_cores(s_hi, o_lo),
        "processes_overtake_cores" + HIGH: crossover_cores(s_lo, o_hi),
    }
    return out


REFERENCE = (
    "helpers_threads_over_dataloader_best",
    "helpers_threads_over_limit",
    "helpers_threads_speedup",
    "gil_share",
    "threads_predicted_speedup",
    "processes_overtake_cores",
)


def reference_runs(folder: Path) -> pd.DataFrame:
    """Return one row per `bench threads` run saved as `folder/<run>/bench-threads.json` (other machines' runs,
    committed): its hardware, cores and the figures of `REFERENCE`, each as "median (low to high)", "" if absent."""
    rows = []
    for path in sorted(folder.glob("*/bench-threads.json")):
        doc = json.loads(path.read_text())
        figs, prov = doc["figures"], doc["provenance"]
        row = {"run": path.parent.name, "hardware": prov["hardware"].split(" | ")[0], "cores": prov["knobs"]["cores"]}
        rows.append(row | {key: _with_interval(figs, key) for key in REFERENCE})
    return pd.DataFrame(rows, columns=["run", "hardware", "cores", *REFERENCE]).set_index("run")


def _with_interval(figs: dict[str, float], key: str) -> str:
    if key not in figs:
        return ""
    low, high = figs.get(key + LOW), figs.get(key + HIGH)
    return f"{figs[key]:.3g}" + ("" if low is None else f" ({low:.3g} to {high:.3g})")


def run(scale: str) -> BenchResult:
    """Measure the GIL-held share, every pipeline, the head-to-head rounds and the start methods at `scale`."""
    s, cores = config.sizes("threads", scale), os.cpu_count() or 1
    k = dict(
        batch_size=s["batch_size"],
        epochs=s["epochs"],
        threads=s["threads_per_core"] * cores,
        workers=cores,
        limit_images=s["limit_images"],
        rounds=s["rounds"],
        gil_images=s["gil_images"],
    )
    ds, bs = dataset(scale), k["batch_size"]
    with measure.torch_threads(1):  # as in DataLoader workers: intra-op threads would fight the loaders' threads
        gil = gil_prediction(gil_shares(gil_rounds(ds, k["gil_images"], k["rounds"])), cores)
        configs = configurations(ds, bs, k["threads"], k["workers"])
        rows = [
            {"pipeline": name, **epoch_stats(make, k["epochs"])}
            for name, make in measure.progress(configs.items(), desc="pipelines")
        ]
        rates = head_to_head(configs, best_dataloader(rows), ds, k["limit_images"], k["rounds"])
        starts = startup(ds, bs, k["workers"])
    return BenchResult(
        rows,
        figures(rows, rates, starts, gil, cores),
        knobs={"images": len(ds), "cores": cores, **k, "skipped": skipped()},
        repeats=k["rounds"],
    )


def figures(
    rows: list[dict[str, Any]],
    rates: dict[str, list[float]],
    starts: list[dict[str, Any]],
    gil: dict[str, float],
    cores: int,
) -> dict[str, float]:
    """Return the flat figures the targets check, with `gil` (from `gil_prediction`) among them.

    Rates and their ratios come from the head-to-head rounds (`rates`, from `head_to_head`), each ratio as the
    median of its per-round ratios with its 95 % interval (`<key>_ci_low`, `<key>_ci_high`); memory and CPU come
    from the sweep's `rows`, where each pipeline ran alone.
    """
    dl_best, tl = next(r for r in rows if r["pipeline"] == best_dataloader(rows)), _thread_row(rows)
    out = {
        "limit_img_per_s": measure.median(rates[ONE_THREAD]) * cores,
        "threadloader_img_per_s": measure.median(rates[thread_name(rates)]),
        "dataloader_best_img_per_s": measure.median(rates[dl_best["pipeline"]]),
        "helpers_threads_pss_over_dataloader_best": tl["pss_mb"] / dl_best["pss_mb"],
        "helpers_threads_cpu_over_dataloader_best": tl["cpu_s_per_img"] / dl_best["cpu_s_per_img"],
        "pickled_dataset_bytes": starts[0]["pickled_bytes"],
        **memory_split(rows),
    }
    for key, ratios in round_ratios(rates, cores).items():
        out.update(measure.interval_figures(key, ratios))
    for s in starts:
        out[f"first_batch_s_{s['start_method']}"] = s["first_batch_s"]
        out[f"helpers_threads_pss_over_dataloader_{s['start_method']}"] = tl["pss_mb"] / s["pss_mb"]
    return out | gil


def memory_split(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Split the PSS of the thread loader and the best DataLoader into the process before them and what each adds.

    Both totals hold the same process B (interpreter, torch, the caller's state), so their ratio is
    (B + t) / (B + d): it reaches 0.5 only if the workers add d >= B + 2t. Explained in
    notebooks/14_threads_or_processes.ipynb (section 3).
    """
    dl_best, tl = next(r for r in rows if r["pipeline"] == best_dataloader(rows)), _thread_row(rows)
    base, t, d = tl["pss_mb"] - tl["added_pss_mb"], tl["added_pss_mb"], dl_best["added_pss_mb"]
    return {
        "pss_baseline_mb": base,
        "threadloader_added_pss_mb": t,
        "dataloader_best_added_pss_mb": d,
        "helpers_threads_added_pss_over_dataloader_best": t / d,
        "dataloader_added_pss_for_half_total_mb": base + 2 * t,
    }


def best_dataloader(rows: list[dict[str, Any]]) -> str:
    """Return the name of the DataLoader configuration with the most images/s in a sweep's `rows`."""
    return max((r for r in rows if r["pipeline"].startswith("DataLoader")), key=lambda r: r["img_per_s"])["pipeline"]


def thread_name(names: Iterable[str]) -> str:
    """Return the ThreadLoader's name among pipeline `names`."""
    return next(n for n in names if n.startswith("ThreadLoader"))


def _thread_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in rows if r["pipeline"] == thread_name(r["pipeline"] for r in rows))


def free_threaded_prediction(limit: float, measured: float) -> dict[str, float]:
    """Predict the thread loader on a free-threaded build: every stage parallel, so the limit less the penalty.

    Explained in notebooks/14_threads_or_processes.ipynb (section 6).
    """
    least, most = sorted(FREE_THREADED_PENALTY)
    low, high = limit * (1 - most), limit * (1 - least)
    return {"low_img_per_s": low, "high_img_per_s": high, "gain_low": low / measured, "gain_high": high / measured}


class _TimedSamples:
    """Wrap a dataset so each sample's fetch is recorded with the name of the thread that ran it."""

    def __init__(self, ds: Any) -> None:
        self.ds, self.lock = ds, threading.Lock()
        self.events: list[tuple[str, str, float, float]] = []  # (lane, stage, start, end)

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, index: int) -> Any:
        start = now()
        x = self.ds[index]
        with self.lock:
            self.events.append(
                (threading.current_thread().name.replace("ThreadLoader_", "thread "), "fetch", start, now())
            )
        return x

    def collate(self, samples: list[Any]) -> timeline.TimedBatch:
        start = now()
        data = torch.utils.data.default_collate(samples)
        with self.lock:
            events, self.events = self.events, []
        return timeline.TimedBatch(data, events + [("main: collate", "collate", start, now())])


def timelines(
    ds: ImageFolder, batch_size: int, threads: int, workers: int, step_s: float, batches: int
) -> dict[str, timeline.Timeline]:
    """Record `batches` batches of a `threads`-thread ThreadLoader and of a `workers`-worker DataLoader, each batch
    followed by a step that sleeps `step_s` seconds."""
    timed = _TimedSamples(ds)
    step = timeline.gpu_like_step(step_s)
    out = {
        f"ThreadLoader, {threads} threads": timeline.record(
            ThreadLoader(timed, batch_size, threads=threads, collate=timed.collate), step, max_batches=batches
        )
    }
    tds, tc = timeline.instrument(ds)
    out[f"DataLoader, {workers} workers"] = timeline.record(
        DataLoader(tds, batch_size, num_workers=workers, collate_fn=tc), step, max_batches=batches
    )
    return out
