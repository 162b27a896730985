"""When the data no longer fits: shards streamed from a loopback object store, their speed, shuffle quality,
rank splits, resume and bad input, against the local memmap.

Explained in notebooks/16_when_data_no_longer_fits.ipynb.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch

from .. import config, measure
from ..data import memmap, shards, store
from ..data.jpeg_folder import write_synthetic_imagefolder
from ..load import stream
from ..load.batch_loader import BatchLoader
from ..measure import timeline, warp
from ..measure.input_bound import diagnose
from ..teach.quasi_random import batch_class_entropy
from . import BenchResult, store_ceiling

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # only loopback is contacted, whatever gets imported
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CLASSES = 10
SOURCE_PX, QUALITY = 400, 85  # ~40 KB per synthetic JPEG
TAIL = 0.1  # the share of an epoch's batches that counts as its tail
PROFILES = ("local-nvme", "same-region", "cross-region")
READERS = ("webdataset tar", "pyarrow Parquet", "datasets streaming")
LEFT_OUT = {
    "Ray Data": "its local cluster (GCS, raylet, metrics agent, workers) took tens of seconds to start and tens of "
    "seconds per tiny epoch on 2 busy cores, far beyond the notebook's budget; the same Parquet shards "
    "read with ray.data.read_parquet(urls, filesystem=PyFileSystem(FSSpecHandler(HTTPFileSystem())))",
    "mosaicml-streaming 0.13": "requires numpy<2.2; this project pins numpy 2.4",
    "litdata": "requires torchvision, which this project does not install",
}


# ------------------------------------------------------------------------------------------------ the data
@dataclass
class Data:
    """The same images four ways: shards in two layouts, and the decoded pixels in a memmap (and a .beton)."""

    layouts: dict[str, shards.Shards]
    images: memmap.ImageData | None = None
    beton: Path | None = None

    @property
    def sorted(self) -> shards.Shards:
        """Return the class-sorted shard set (the worst case for a shuffle buffer)."""
        return self.layouts["sorted"]


def make_data(images: int, n_shards: int, layouts: Sequence[str] = shards.LAYOUTS) -> Data:
    """Write (once) the synthetic ImageFolder of `images` JPEGs and its shards in `layouts` (default both)."""
    folder = config.data_dir() / f"stream-imagefolder-{images}"
    write_synthetic_imagefolder(
        folder, images, CLASSES, classes=[f"class{i}" for i in range(CLASSES)], size=SOURCE_PX, quality=QUALITY
    )
    root = config.data_dir() / f"stream-shards-{images}-{n_shards}"
    samples: list[tuple[bytes, int]] | None = None
    written = {}
    for layout in layouts:
        try:
            written[layout] = _current(shards.load(root / layout), images, n_shards)
        except (FileNotFoundError, ValueError):
            samples = samples or shards.jpeg_samples(folder / "train")
            written[layout] = shards.write_shards(samples, root / layout, n_shards, layout)
    return Data(written)


def _current(found: shards.Shards, images: int, n_shards: int) -> shards.Shards:
    if found.samples != images or len(found.names) != n_shards:
        raise ValueError("stale shard set")
    return found


class _Decoded(torch.utils.data.Dataset):
    """The shards' JPEGs decoded to px x px (the memmap's writer reads it once)."""

    def __init__(self, samples: list[tuple[bytes, int]], px: int) -> None:
        self.samples, self.px = samples, px

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        jpg, label = self.samples[i]
        return torch.from_numpy(stream.decode_jpeg(jpg, self.px)).permute(2, 0, 1).contiguous(), label


def add_baselines(data: Data, px: int, with_ffcv: bool = True) -> Data:
    """Decode every image once to px x px into a memmap (notebook 09), and a raw-pixel FFCV .beton if ffcv imports."""
    src = data.sorted
    folder = config.data_dir() / f"stream-imagefolder-{src.samples}"
    key = {"source": folder.name, "px": px, "decoder": "draft+bilinear"}
    root = config.data_dir() / f"stream-memmap-{src.samples}-{px}px"
    try:
        data.images = memmap.load_memmap(root)
        if memmap.read_meta(root)["key"] != key:
            raise ValueError("stale")
    except (FileNotFoundError, ValueError):
        rows = shards.jpeg_samples(folder / "train")
        data.images = memmap.precompute(
            _Decoded(rows, px), root, "numpy", key=key, num_workers=0, desc="decode once into a memmap"
        )
    from ..data import ffcv_io

    if with_ffcv and ffcv_io.have_ffcv():
        path = root.with_suffix(".beton")
        if not path.exists():
            ffcv_io.write_image_beton(path, data.images.images.permute(0, 2, 3, 1).numpy(), data.images.labels.numpy())
        data.beton = path
    return data


# ------------------------------------------------------------------------------------------------ readers
def reader(name: str, s: store.Store, who: str, src: shards.Shards, ahead: int) -> Iterable[stream.Sample]:
    """Return reader `name`'s sample source over the shards of `src` served by `s`, its bytes counted as `who`."""
    counts = [len(x) for x in src.labels]
    if name == "webdataset tar":
        return stream.TarStream([s.url(who, f) for f in src.files(".tar")], retries=2, expected=counts)
    if name == "pyarrow Parquet":
        return stream.ParquetStream([s.url(who, f) for f in src.files(".parquet")], ahead=ahead, expected=counts)
    if name == "datasets streaming":
        return stream.HFStream([s.url(who, f) for f in src.files(".parquet")], expected=counts)
    raise ValueError(f"unknown reader {name!r}; use one of {', '.join(READERS)}")


def connections(name: str, ahead: int) -> int:
    """Return how many requests reader `name` keeps in flight: curl and `datasets` one, ParquetStream `ahead` + 1."""
    return ahead + 1 if name == "pyarrow Parquet" else 1


def suffix(name: str) -> str:
    """Return the shard format reader `name` reads."""
    return ".tar" if name == "webdataset tar" else ".parquet"


def available_bytes_s(profile: str, conns: int) -> float:
    """Return the bandwidth the profile gives `conns` connections: per connection times conns, capped in all."""
    p = store.profile(profile)
    return min(p.total_bytes_s, p.per_connection_bytes_s * conns)


def predicted_bytes_s(profile: str, conns: int, shard_bytes: float, cycles: int = 200) -> float:
    """Predict the most bytes/s `conns` connections get from the profile, each GETting whole shards in turn.

    Each connection waits the latency, then moves one shard at its share of the bandwidth: the per-connection
    rate, or the total shared by the k connections moving bytes at that moment, whichever is less. Where k
    connections at the per-connection rate never exceed the total, that is conns x shard / (latency + shard /
    per-connection rate); otherwise the total binds whenever enough transfers overlap, and the connections are
    followed event by event (started a latency apart / conns, so none starts in step) for `cycles` shards each.
    """
    p = store.profile(profile)
    per_shard_s = p.latency_s + shard_bytes / p.per_connection_bytes_s
    if conns * p.per_connection_bytes_s <= p.total_bytes_s:
        return conns * shard_bytes / per_shard_s
    waiting: list[float | None] = [p.latency_s * (i + 1) / conns for i in range(conns)]  # latency left, or None
    left = [0.0] * conns  # bytes left of the shard a connection moves
    clock, moved = 0.0, 0.0
    while moved < cycles * conns * shard_bytes:
        moving = [i for i in range(conns) if waiting[i] is None]
        rate = min(p.per_connection_bytes_s, p.total_bytes_s / len(moving)) if moving else 0.0
        step = min([w for w in waiting if w is not None] + [left[i] / rate for i in moving])
        clock += step
        for i in range(conns):
            w = waiting[i]
            if w is not None:
                waiting[i] = w - step if w - step > 1e-12 else None
                left[i] = shard_bytes if waiting[i] is None else left[i]
            elif i in moving:
                left[i] -= rate * step
                if left[i] <= 1e-6:
                    moved, waiting[i] = moved + shard_bytes, p.latency_s
    return moved / clock


def cpu_seconds(exclude: int) -> float:
    """Return the CPU seconds of this process, its finished children and its live ones, except process `exclude`."""
    me = psutil.Process()
    t = me.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for p in me.children(recursive=True):
        try:
            if p.pid != exclude and exclude not in {a.pid for a in p.parents()}:
                c = p.cpu_times()
                total += c.user + c.system
        except psutil.Error:
            pass
    return total


class _Ids:
    """Fresh reader names for the store's byte counters: one per pass, so each pass's bytes are its own."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, name: str) -> str:
        self.n += 1
        return f"{name.split()[0]}-{self.n}"


_ids = _Ids()


def wire_epoch(name: str, s: store.Store, src: shards.Shards, batch_size: int, ahead: int) -> dict[str, Any]:
    """Read one epoch of reader `name` with decoding off; return img/s, first batch, bytes, CPU and wire figures."""
    who = _ids(name)
    with measure.Timer(contender=("setup", name)) as setup:  # one contender per reader, for the warp
        source = reader(name, s, who, src, ahead)
    cpu0 = cpu_seconds(s.process.pid)
    with measure.Timer(contender=("epoch", name)) as t:
        it = iter(stream.Batches(source, batch_size, px=0, decode=False))
        with measure.Timer(contender=("first batch", name)) as first:
            n = len(next(it)[1])
        n += sum(len(y) for _, y in it)
    cpu = cpu_seconds(s.process.pid) - cpu0
    got = s.bytes_read().get(who, 0)
    conns = connections(name, ahead)
    return {
        "reader": name,
        "profile": s.profile.name,
        "images": n,
        "setup_s": setup.seconds,
        "read_img_per_s": n / t.seconds,
        "first_batch_s": first.seconds,
        "MB_per_s": got / t.seconds / 1e6,
        "read_amplification": got / src.nbytes(suffix(name)),
        "read_cpu_ms_per_img": cpu / n * 1e3,
        "connections": conns,
        "wire_efficiency": got / t.seconds / available_bytes_s(s.profile.name, conns),
        "predicted_MB_per_s": predicted_bytes_s(s.profile.name, conns, src.nbytes(suffix(name)) / len(src.names)) / 1e6,
    }


def decode_pass(
    make: Callable[[], Iterable[Any]], images: int, exclude: int, log: list[dict[str, float]]
) -> Callable[[], int]:
    """Return a function that takes `images` images from a fresh `make()` loader and logs its seconds and CPU seconds.

    The seconds (`s`, unwarped) are the loader's alone: the two CPU readings, a walk over the process tree that
    takes milliseconds on a busy machine, are left out of them (`readers_table` rates from these).
    """

    def one() -> int:
        cpu0, n = cpu_seconds(exclude), 0
        start = measure.now()
        for _, y in make():
            n += len(y)
            if n >= images:
                break
        seconds = measure.now() - start
        log.append({"images": n, "cpu_s": cpu_seconds(exclude) - cpu0, "s": seconds})
        return n

    return one


def local_loaders(data: Data, batch_size: int) -> dict[str, Callable[[], Iterable[Any]]]:
    """Return the local baselines: the memmap of decoded pixels (BatchLoader, shuffled) and the .beton if written."""
    out: dict[str, Callable[[], Iterable[Any]]] = {}
    if data.images is None:
        return out
    side = int(data.images.images.shape[-1])
    loader = BatchLoader((data.images.images, data.images.labels), batch_size, shuffle=True, seed=0)
    out["memmap (local, decoded)"] = lambda: loader
    if data.beton is not None:
        from ..data import ffcv_io

        beton = ffcv_io.image_loader(
            data.beton, batch_size, num_workers=1, order="random", size=side, ratio=1.0, drop_last=False
        )
        out["FFCV .beton (local, decoded)"] = lambda: beton
    return out


def readers_table(
    data: Data, profile: str, batch_size: int, px: int, threads: int, decode_images: int, ahead: int, rounds: int
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Measure every reader at `profile`: an epoch with decoding off, then `rounds` interleaved decoding passes.

    Each decoding pass takes `decode_images` images from a new epoch of the reader (first batch included; the
    `datasets` reader is set up once, its set-up time is in the rows), decoded on `threads` threads to px x px;
    the local baselines take as many. Returns the rows and the per-round seconds.
    """
    src = data.sorted
    with store.serve(src.folder, profile) as s:
        rows = {n: wire_epoch(n, s, src, batch_size, ahead) for n in READERS}
        logs: dict[str, list[dict[str, float]]] = {}
        passes = {}
        hf = reader("datasets streaming", s, _ids("datasets"), src, ahead)  # set up once, as a training loop would

        def epoch_of(n: str) -> Callable[[], Iterable[Any]]:
            def make() -> Iterable[Any]:
                source = hf if n == "datasets streaming" else reader(n, s, _ids(n), src, ahead)
                return stream.Batches(source, batch_size, px, threads)

            return make

        for name in READERS:
            logs[name] = []
            passes[name] = decode_pass(epoch_of(name), decode_images, s.process.pid, logs[name])
        for name, local in local_loaders(data, batch_size).items():
            logs[name] = []
            passes[name] = decode_pass(local, decode_images, s.process.pid, logs[name])
            rows[name] = {"reader": name, "profile": "local"}
        measure.interleaved(passes, repeat=rounds, warmup=1 if data.beton is not None else 0, shuffle=True)
    factors = warp.factors(passes)  # as interleaved warps its own timings (off unless FASTLOOPS_WARP is set)
    seconds = {name: [d["s"] * factors[name] for d in logs[name][-rounds:]] for name in passes}
    for name, row in rows.items():
        done = logs[name][-rounds:]
        row["img_per_s"] = done[0]["images"] / measure.median(seconds[name])
        row["cpu_ms_per_img"] = 1e3 * measure.median([d["cpu_s"] / d["images"] for d in done])
    return list(rows.values()), seconds


def best_over_memmap_rounds(rows: list[dict[str, Any]], seconds: dict[str, list[float]]) -> list[float]:
    """Return, per interleaved round, the best streaming reader's img/s over the memmap's (same images per pass)."""
    best, local = best_reader(rows), next(r["reader"] for r in rows if r["reader"].startswith("memmap"))
    return [m / b for b, m in zip(seconds[best], seconds[local])]


def best_reader(rows: list[dict[str, Any]]) -> str:
    """Return the streaming reader that reads fastest with decoding off (decoding is the same code for all)."""
    return max((r for r in rows if r["reader"] in READERS), key=lambda r: r["read_img_per_s"])["reader"]


def ceiling_rounds(data: Data, name: str, profile: str, batch_size: int, ahead: int, rounds: int) -> dict[str, Any]:
    """Time raw GETs of whole shards (as many in flight as reader `name` keeps) against `name`'s epochs, interleaved."""
    src = data.sorted
    with store.serve(src.folder, profile) as s:
        urls = [s.url("raw", f) for f in src.files(suffix(name))]
        conns = connections(name, ahead)
        out = store_ceiling.against_reader(
            s.process.pid, urls, conns, lambda: wire_epoch(name, s, src, batch_size, ahead)["MB_per_s"] * 1e6, rounds
        )
    return {**out, "available_bytes_s": available_bytes_s(profile, conns)}


def profile_sweep(data: Data, name: str, profiles: Sequence[str], batch_size: int, ahead: int) -> list[dict[str, Any]]:
    """Read one epoch of reader `name` (decoding off) at each bandwidth profile."""
    rows = []
    for p in profiles:
        with store.serve(data.sorted.folder, p) as s:
            rows.append(wire_epoch(name, s, data.sorted, batch_size, ahead))
    return rows


# ------------------------------------------------------------------------------------------------ shuffle
def epoch_labels(
    shard_labels: Sequence[Sequence[int]], buffer: int, at_once: int, seed: int = 0, epoch: int = 0
) -> np.ndarray:
    """Return an epoch's label order from the labels alone: the readers' shard order, interleave and buffer."""
    per_shard = [[{"cls": c} for c in labels] for labels in shard_labels]
    return np.array([s["cls"] for s in stream.shuffled(per_shard, buffer, at_once, seed, epoch)])


def entropy(labels: np.ndarray, batch_size: int, tail: float = 0.0) -> float:
    """Return the mean class-mix entropy (bits) of the full batches, or of the last `tail` share of them."""
    full = len(labels) // batch_size
    first = full - max(1, round(full * tail)) if tail else 0
    return batch_class_entropy(labels, np.arange(first * batch_size, full * batch_size), batch_size, CLASSES)


def predicted_entropy(
    samples_per_shard: float, buffer: int, at_once: int, batch_size: int, layout: str, full: float
) -> float:
    """Predict a batch's class-mix entropy: log2 of the classes expected among the shards its window spans.

    A sample waits `buffer` reads in the buffer on average, so a batch drawn from it spans about
    2 * buffer + batch_size reads; with `at_once` shards interleaved that is about
    at_once + reads / samples_per_shard shards. Class-sorted shards each hold about one class, in random order,
    so m shards hold CLASSES * (1 - (1 - 1/CLASSES)^m) classes; the entropy cannot pass the full shuffle's.
    """
    if layout == "shuffled":
        return full
    m = at_once + (2 * buffer + batch_size) / samples_per_shard
    distinct = CLASSES * (1 - (1 - 1 / CLASSES) ** m)
    return min(full, math.log2(max(distinct, 1.0)))


def entropy_sweep(
    data: Data, batch_size: int, buffers: Sequence[int], at_once: Sequence[int], seed: int = 0
) -> list[dict[str, Any]]:
    """Return the class-mix entropy per batch (whole epoch and its tail) per layout, buffer and shards at once."""
    labels = np.array([c for shard in data.sorted.labels for c in shard])
    full = entropy(labels[np.random.default_rng(seed).permutation(len(labels))], batch_size)
    rows = []
    for layout, src in data.layouts.items():
        per_shard = src.samples / len(src.names)
        for k in at_once:
            for b in buffers:
                order = epoch_labels(src.labels, b, k, seed)
                rows.append(
                    {
                        "layout": layout,
                        "buffer": b,
                        "shards_at_once": k,
                        "entropy_bits": entropy(order, batch_size),
                        "tail_bits": entropy(order, batch_size, TAIL),
                        "predicted_bits": predicted_entropy(per_shard, b, k, batch_size, layout, full),
                        "full_shuffle_bits": full,
                    }
                )
    return rows


def reader_follows_labels(data: Data, buffer: int, seed: int = 0) -> bool:
    """Whether the Parquet reader, given the same shard order and buffer, yields the labels `epoch_labels` says."""
    src = data.sorted
    with store.serve(src.folder, "unthrottled") as s:
        urls = [s.url(_ids("order"), src.files(".parquet")[i]) for i in stream.shard_order(len(src.names), seed, 0)]
        got = [int(x["cls"]) for x in stream.ShuffleBuffer(stream.ParquetStream(urls), buffer, seed)]
    return got == epoch_labels(src.labels, buffer, 1, seed).tolist()


def buffer_cost(data: Data, profile: str, buffer: int, batch_size: int, ahead: int, rounds: int) -> dict[str, Any]:
    """Time epochs (decoding off) of the Parquet reader with no buffer and with a `buffer`-sample one, in turns."""
    src = data.sorted
    first: dict[int, list[float]] = {0: [], buffer: []}
    with store.serve(src.folder, profile) as s:

        def epoch(size: int) -> Callable[[], None]:
            def one() -> None:
                samples = stream.ShuffleBuffer(reader("pyarrow Parquet", s, _ids("buffer"), src, ahead), size)
                with measure.Timer(contender=("first batch", size)) as t:
                    it = iter(stream.Batches(samples, batch_size, px=0, decode=False))
                    next(it)
                first[size].append(t.seconds)
                for _ in it:
                    pass

            return one

        seconds = measure.interleaved(
            {"no buffer": epoch(0), "buffer": epoch(buffer)}, repeat=rounds, warmup=0, shuffle=True
        )
    ratios = [b / a for a, b in zip(seconds["no buffer"], seconds["buffer"])]  # img/s without over img/s with
    return {
        "ratios": ratios,
        "first_batch_s_no_buffer": measure.median(first[0]),
        "first_batch_s_buffer": measure.median(first[buffer]),
        "img_per_s_no_buffer": src.samples / measure.median(seconds["no buffer"]),
        "img_per_s_buffer": src.samples / measure.median(seconds["buffer"]),
    }


# ------------------------------------------------------------------------------------------------ ranks
def ranks(data: Data, world_size: int, profile: str, ahead: int) -> list[dict[str, Any]]:
    """Read one epoch on each of `world_size` ranks (in this process) by several splits; count what each saw."""
    src = data.sorted
    files, n = src.files(".parquet"), src.samples
    rows = []
    with store.serve(src.folder, profile) as s:

        def count(
            split: str,
            per_rank: Callable[[int, str], Iterable[stream.Sample]],
            detail: str,
            who: str,
            expected: int = n,
        ) -> None:
            keys = [x["key"] for rank in range(world_size) for x in per_rank(rank, who)]
            distinct = len(set(keys))
            rows.append(
                {
                    "split": split,
                    "how": detail,
                    "samples_read": len(keys),
                    "distinct": distinct,
                    "exactly_once": distinct == expected == len(keys),
                    "duplicates": len(keys) - distinct,
                    "missing": expected - distinct,
                    "bytes_over_data": s.bytes_read().get(who, 0) / src.nbytes(".parquet"),
                }
            )

        def hf(urls: list[str]) -> Callable[[int, str], Iterable[stream.Sample]]:
            base = stream.HFStream(urls)  # one load_dataset; each rank takes its share of it
            return lambda r, who: base.for_rank(r, world_size)

        who = _ids("split")
        count(
            "split_shards (ParquetStream)",
            lambda r, w: stream.ParquetStream(
                stream.split_shards([s.url(w, f) for f in files], r, world_size), ahead=ahead
            ),
            "whole shards per rank: every world_size-th shard",
            who,
        )
        who = _ids("split")
        count(
            "split_dataset_by_node (datasets)",
            hf([s.url(who, f) for f in files]),
            "shards divide evenly: whole shards per rank",
            who,
        )
        odd = files[:-1] if len(files) % world_size == 0 else files  # one shard short: no even split
        who = _ids("split")
        count(
            "split_dataset_by_node, odd shard count",
            hf([s.url(who, f) for f in odd]),
            f"{len(odd)} shards: every rank reads every shard, keeps 1 sample in {world_size}",
            who,
            sum(len(x) for x in src.labels[: len(odd)]),
        )
        who = _ids("split")
        count(
            "no split (each rank reads all)",
            lambda r, w: stream.ParquetStream([s.url(w, f) for f in files], ahead=ahead),
            "the mistake: every rank reads every shard",
            who,
        )
    return rows


# ------------------------------------------------------------------------------------------------ resume
def resume(data: Data, stop_after: int, n_shards: int, profile: str) -> list[dict[str, Any]]:
    """Stop each reader after `stop_after` samples of the first `n_shards` shards, resume, compare the rest."""
    src = data.sorted
    files = list(range(n_shards))
    counts = [len(src.labels[i]) for i in files]
    rows = []
    with store.serve(src.folder, profile) as s:

        def urls(who: str, suffix_: str) -> list[str]:
            return [s.url(who, src.names[i] + suffix_) for i in files]

        def check(name: str, make: Callable[[str], Any], stateful: bool, needs: str) -> None:
            whole = [x["key"] for x in make(_ids(name))]
            first = make(_ids(name))
            it = iter(first)
            head = [next(it)["key"] for _ in range(stop_after)]
            state = first.state_dict() if stateful else None
            it.close()
            who = _ids(name)
            again = make(who)
            if stateful:
                again.load_state_dict(state)
                rest = [x["key"] for x in again]
            else:  # no saved position: read from the start and drop what was seen
                rest = [x["key"] for x in again][stop_after:]
            rows.append(
                {
                    "reader": name,
                    "same_remaining": head + rest == whole,
                    "needs": needs,
                    "resumed_bytes_over_rest": s.bytes_read().get(who, 0)
                    / max(1, _rest_bytes(src, files, suffix(name), stop_after, counts)),
                }
            )

        check(
            "pyarrow Parquet",
            lambda who: stream.ParquetStream(urls(who, ".parquet"), ahead=1),
            True,
            "state_dict(): (shard, sample); the next shard is fetched again",
        )
        check(
            "datasets streaming",
            lambda who: stream.HFStream(urls(who, ".parquet")),
            True,
            "IterableDataset.state_dict() (a shuffle buffer's contents are not saved)",
        )
        check(
            "webdataset tar",
            lambda who: stream.TarStream(urls(who, ".tar"), expected=counts),
            False,
            "no state_dict: re-read from the start and skip what was seen",
        )
    return rows


def _rest_bytes(src: shards.Shards, files: list[int], suf: str, stop_after: int, counts: list[int]) -> float:
    """Return the bytes of the samples after `stop_after`, counted as whole-shard shares."""
    total = sum((src.folder / (src.names[i] + suf)).stat().st_size for i in files)
    return total * (1 - stop_after / sum(counts))


# ------------------------------------------------------------------------------------------------ bad input
def bad_input(data: Data, n_shards: int = 3) -> list[dict[str, Any]]:
    """Feed each reader a truncated shard, a listed shard the store lacks, and a store that goes away.

    Every case must end in a `ShardError` naming the shard's URL, or, where the reader offers to skip, read the
    other shards whole and count the lost samples (`clear` says whether it did).
    """
    src = data.sorted
    work = config.data_dir() / "stream-bad-input"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    names = src.names[:n_shards]
    for name in names:
        for suf in (".tar", ".parquet"):
            shutil.copyfile(src.folder / (name + suf), work / (name + suf))
    for suf in (".tar", ".parquet"):  # the second shard cut in half
        path = work / (names[1] + suf)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    counts = [len(x) for x in src.labels[:n_shards]]
    makers = {
        "webdataset tar": lambda us, skip: stream.TarStream(us, retries=0, expected=counts[: len(us)]),
        "pyarrow Parquet": lambda us, skip: stream.ParquetStream(us, ahead=0, skip=skip, expected=counts[: len(us)]),
        "datasets streaming": lambda us, skip: stream.HFStream(us, expected=counts[: len(us)], skip=skip),
    }
    rows: list[dict[str, Any]] = []
    import datasets

    level = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # its log line repeats what the ShardError says
    try:
        for reader_name, make in makers.items():
            rows += _bad_cases(reader_name, make, work, src, names, counts)
    finally:
        datasets.logging.set_verbosity(level)
    return rows


def _bad_cases(
    reader_name: str,
    make: Callable[[list[str], bool], Any],
    work: Path,
    src: shards.Shards,
    names: list[str],
    counts: list[int],
) -> list[dict[str, Any]]:
    """Run reader `reader_name` through the bad-input cases."""
    suf, rows = suffix(reader_name), []
    with store.serve(work, "unthrottled") as s:
        cut = [s.url("bad", n + suf) for n in names]
        rows.append(_attempt("truncated shard", reader_name, lambda: make(cut, False), cut[1]))
        if reader_name != "webdataset tar":  # webdataset has no skip mode that counts what it lost
            rows.append(
                _attempt(
                    "truncated shard, skip",
                    reader_name,
                    lambda: make(cut, True),
                    "",
                    lost=(counts[1], sum(counts) - counts[1]),
                )
            )
        gone = [s.url("bad", names[0] + suf), s.url("bad", "shard-99999" + suf)]
        rows.append(_attempt("shard missing from the store", reader_name, lambda: make(gone, False), gone[1]))
    s = store.serve(src.folder, "unthrottled")  # stopped by _attempt after the first sample
    away = [s.url("bad", n + suf) for n in names]
    rows.append(_attempt("store went away mid-epoch", reader_name, lambda: make(away, False), "", stop=s))
    return rows


def _attempt(
    case: str,
    reader_name: str,
    make: Callable[[], Any],
    culprit: str,
    stop: store.Store | None = None,
    lost: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Run one bad-input case; return what it raised or counted, and whether that is the clear outcome."""
    got, error, source = 0, "", None
    try:
        source = make()
        it = iter(source)
        if stop is not None:  # one sample, then the store stops
            next(it)
            got = 1
            stop.stop()
        for _ in it:
            got += 1
    except stream.ShardError as exc:
        error = str(exc)
    finally:
        if stop is not None:
            stop.stop()
    counted = getattr(source, "lost", None)
    if lost is not None:
        clear = not error and counted == lost[0] and got == lost[1]
    else:  # the culprit's URL, or (store gone) some shard's URL on the store
        named = culprit in error if culprit else re.search(r"http://127\.0\.0\.1:\d+/bad/shard-", error) is not None
        clear = bool(error) and named
    error = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", error)  # a new ephemeral port every run
    return {
        "case": case,
        "reader": reader_name,
        "outcome": error.split(" (")[0] if error else f"skipped: {counted} samples counted lost",
        "samples_read": got,
        "clear": clear,
    }


# ------------------------------------------------------------------------------------------------ timeline
def timed_parquet(
    s: store.Store, src: shards.Shards, batch_size: int, px: int, threads: int, ahead: int
) -> stream.Batches:
    """Return decoded Parquet batches whose shard fetches and decodes are recorded for the timeline."""
    rec = stream.Recorder()
    samples = stream.ParquetStream([s.url(_ids("timeline"), f) for f in src.files(".parquet")], ahead=ahead)
    samples.fetch = rec.timed(stream.fetch_parquet)
    return stream.Batches(samples, batch_size, px, threads, recorder=rec)


def stream_timeline(
    data: Data, profile: str, batch_size: int, px: int, threads: int, ahead: int, batches: int, step_s: float
) -> timeline.Timeline:
    """Record `batches` decoded Parquet batches, each followed by a step that sleeps `step_s` (a GPU stand-in)."""
    with store.serve(data.sorted.folder, profile) as s:
        return timeline.record(
            timed_parquet(s, data.sorted, batch_size, px, threads, ahead),
            timeline.gpu_like_step(step_s),
            max_batches=batches,
        )


def small_model(px: int) -> tuple[torch.nn.Module, Callable[[Any], None]]:
    """Return a small CNN and its training step on (uint8 images, labels) batches."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, CLASSES),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch: Any) -> None:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(model(x.float().div_(255)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return model, step


def diagnose_stream(data: Data, profile: str, batch_size: int, px: int, threads: int, ahead: int, batches: int) -> Any:
    """Run `diagnose` (notebook 15) on a small CNN's training step fed by the decoded Parquet stream."""
    _, step = small_model(px)
    with store.serve(data.sorted.folder, profile) as s:
        return diagnose(
            timed_parquet(s, data.sorted, batch_size, px, threads, ahead),
            step,
            batches=batches,
            warmup=2,
            replay=min(8, batches),
        )


# ------------------------------------------------------------------------------------------------ figures
def figures(
    rows: list[dict[str, Any]],
    seconds: dict[str, list[float]],
    sweep: list[dict[str, Any]],
    entropies: list[dict[str, Any]],
    small: int,
    large: int,
    cost: dict[str, Any],
    rank_rows: list[dict[str, Any]],
    resume_rows: list[dict[str, Any]] | None = None,
    bad: list[dict[str, Any]] | None = None,
    ceiling: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Return the flat figures `bench streaming` saves (and the notebook prints)."""
    best = best_reader(rows)
    by = {r["reader"]: r for r in rows}
    local = next(n for n in by if n.startswith("memmap"))
    per_round = best_over_memmap_rounds(rows, seconds)
    same = (
        next(r for r in sweep if r["profile"] == "same-region")
        if any(r["profile"] == "same-region" for r in sweep)
        else by[best]
    )

    def h(buffer: int) -> float:
        return next(
            r["entropy_bits"]
            for r in entropies
            if r["layout"] == "sorted" and r["buffer"] == buffer and r["shards_at_once"] == 1
        )

    full = entropies[0]["full_shuffle_bits"]
    split = rank_rows[0]
    out = {
        **measure.interval_figures("stream_best_over_memmap", per_round),
        "stream_wire_efficiency": same["wire_efficiency"],
        "stream_entropy_small_buffer_over_full": h(small) / full,
        "stream_entropy_large_buffer_over_full": h(large) / full,
        **measure.interval_figures("stream_shuffle_buffer_cost", cost["ratios"]),
        "stream_ranks_exactly_once": float(split["exactly_once"]),
        "stream_ranks_duplicates": float(split["duplicates"]),
        "stream_best_img_per_s": by[best]["img_per_s"],
        "stream_memmap_img_per_s": by[local]["img_per_s"],
        "stream_best_read_amplification": by[best]["read_amplification"],
    }
    for r in sweep:
        out[f"stream_wire_efficiency_{r['profile']}"] = r["wire_efficiency"]
    for r in resume_rows or []:
        out[f"stream_resume_exact_{r['reader'].split()[0]}"] = float(r["same_remaining"])
    if resume_rows:
        out["stream_resume_parquet_exact"] = out["stream_resume_exact_pyarrow"]
    if bad:
        out["stream_bad_shards_named"] = float(all(r["clear"] for r in bad))
    if ceiling:
        out.update(store_ceiling.figures(ceiling, ceiling["available_bytes_s"]))
    return out


def run(scale: str) -> BenchResult:
    """Measure every reader, the profiles for the best one, shuffle quality, its cost and the rank split."""
    k = config.sizes("stream", scale)
    data = add_baselines(make_data(k["images"], k["shards"]), k["px"])
    rows, seconds = readers_table(
        data, "same-region", k["batch_size"], k["px"], k["decode_threads"], k["decode_images"], k["ahead"], k["rounds"]
    )
    best = best_reader(rows)
    sweep = profile_sweep(data, best, PROFILES, k["batch_size"], k["ahead"])
    buffers = (0, k["small_buffer"], k["large_buffer"])
    entropies = entropy_sweep(data, k["batch_size"], buffers, (1, 4))
    cost = buffer_cost(data, "same-region", k["large_buffer"], k["batch_size"], k["ahead"], k["rounds"])
    rank_rows = ranks(data, 2, "same-region", k["ahead"])
    resume_rows = resume(data, k["batch_size"] + 3, 4, "same-region")
    bad = bad_input(data)
    ceiling = ceiling_rounds(data, best, "same-region", k["batch_size"], k["ahead"], k["ceiling_rounds"])
    small, large = k["small_buffer"], k["large_buffer"]
    figs = figures(rows, seconds, sweep, entropies, small, large, cost, rank_rows, resume_rows, bad, ceiling)
    return BenchResult(
        rows + sweep + entropies + rank_rows + resume_rows + bad,
        figs,
        knobs={**k, "profile": "same-region", "best_reader": best, "left_out": LEFT_OUT},
        repeats=k["rounds"],
    )
