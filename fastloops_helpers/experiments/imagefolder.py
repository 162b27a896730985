"""ImageFolder + DataLoader vs a precomputed memmap + batched transforms: images per second, train and val."""

from __future__ import annotations

import os
import warnings
from collections.abc import Hashable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch.utils.data import DataLoader

from .. import config, measure
from ..data import memmap
from ..data.jpeg_folder import ImageFolder, synthetic_imagefolder
from ..load import transforms
from ..load.batch_loader import BatchLoader
from ..teach import tutorial_transforms

RESIZE, CROP = 256, 224  # the tutorial's sizes: train stores 256 x 256 and crops 224 per epoch
SPLITS = ("train", "val")
ONE_PROCESS = "memmap, one process"  # the helpers' memmap loader: BatchLoader in one process, batched transforms
TUTORIAL = "tutorial: tensorclass + Collate"  # the tutorial's memmap loader: DataLoader over its tensorclass
BEST_MEMMAP, BEST_DATALOADER = "best memmap loader", "best DataLoader + ImageFolder"  # head_to_head's contenders
# the two ways the sweep spreads the one-process memmap loader over cores: (figure word, name in a verdict)
READ = "read the file's bytes"  # per_image_costs' i/o-only timing, kept out of its table
PARALLEL = {
    "memmap + DataLoader workers": ("workers", "multiple worker processes"),
    "memmap + threads": ("threads", "multiple threads"),
}


def sample_transform(split: str) -> Any:
    """Return the per-sample pipeline of `split` (decode-side, for DataLoader + ImageFolder)."""
    if split == "train":
        return transforms.TrainSampleTransform(RESIZE, CROP)
    return transforms.ValSampleTransform(RESIZE, CROP)


def batch_transform(split: str, num_threads: int = 1) -> transforms.OnImages:
    """Return the batched transform of `split` for a loader: stored uint8 batch -> (normalised floats, labels).

    Train crops 224 at a random offset and flips half the images; val only normalises (its crop is stored).
    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    train = split == "train"
    fused = transforms.CropFlipNormalize(CROP if train else None, 0.5 if train else 0.0, num_threads=num_threads)
    return transforms.OnImages(fused)


@dataclass
class Prepared:
    """The image folder and its memmaps, ready to load."""

    folder: Path
    train: memmap.ImageData
    val: memmap.ImageData


def prepare(folder: Path | None = None, backend: str = "tensordict", num_workers: int = 2) -> Prepared:
    """Return the ImageFolder in `folder` and its train/val memmaps, writing what is missing.

    Without a folder, the synthetic one of the active scale (`synthetic_imagefolder()`).
    """
    folder = synthetic_imagefolder() if folder is None else Path(folder)
    data = {}
    for split in SPLITS:
        tf = sample_transform(split)
        key = {"source": str(folder / split), "resize": RESIZE, "crop": CROP, "split": split}
        root = config.data_dir() / f"memmap-{folder.name}" / f"{split}-{backend}"
        data[split] = memmap.precompute(
            ImageFolder(folder / split, transform=tf.precompute),
            root,
            backend,
            key=key,
            num_workers=num_workers,
            desc=f"precompute {split}",
        )
    return Prepared(folder, data["train"], data["val"])


def dataloader(folder: Path, split: str, batch_size: int, num_workers: int) -> DataLoader:
    """Return the baseline: DataLoader over ImageFolder with per-sample decoding and transforms."""
    ds = ImageFolder(folder / split, transform=sample_transform(split))
    return DataLoader(
        ds, batch_size=batch_size, shuffle=split == "train", num_workers=num_workers, persistent_workers=num_workers > 0
    )


def memmap_loader(
    data: memmap.ImageData, split: str, batch_size: int, num_workers: int = 0, num_threads: int = 1
) -> Any:
    """Return a loader of normalised batches from a memmap: BatchLoader in-process, DataLoader with workers.

    The loader applies the batched transform to each whole batch; `num_threads` > 1 splits each batch's
    transform over threads of this process (numpy releases the GIL).
    """
    if num_workers == 0:
        # the tensorclass's fields as a dict: BatchLoader gathers them with np.take, or yields views in order
        fields = {"images": data.images, "labels": data.labels}
        return BatchLoader(
            fields, batch_size, shuffle=split == "train", seed=0, transform=batch_transform(split, num_threads)
        )
    # each worker gathers a whole batch with one __getitems__ call and transforms it (collate_fn)
    return DataLoader(
        memmap.MemmapDataset(data),
        batch_size=batch_size,
        shuffle=split == "train",
        num_workers=num_workers,
        collate_fn=batch_transform(split),
        persistent_workers=True,
    )


def tutorial_loader(
    data: memmap.ImageData,
    split: str,
    batch_size: int,
    device: torch.device | str = "cpu",
    transform: torch.nn.Module | None = None,
) -> Any:
    """Return the tutorial's loader over a memmap: a DataLoader over its tensorclass, `Collate` per batch.

    One process, as in the tutorial; the tensorclass gathers each batch with one indexing call. `transform` is
    the tutorial's batched transform, which runs in this process: notebook 09 passes its cells' own modules.
    By default train applies the tutorial's normalise, gather crop and masked-fill flip
    (`tutorial_train_transform`) and val only its normalisation (`InvAffine`), so that every loader of the
    sweep yields the same normalised floats.
    """
    tensorclass = tutorial_transforms.ImageNetData(images=data.images, targets=data.labels, batch_size=[len(data)])  # type: ignore[arg-type, call-arg]
    if transform is None:
        train = split == "train"
        transform = tutorial_transforms.tutorial_train_transform(CROP) if train else tutorial_transforms.InvAffine()
    collate = tutorial_transforms.Collate(transform, device)
    return DataLoader(tensorclass, batch_size=batch_size, shuffle=split == "train", collate_fn=collate)  # type: ignore[arg-type]


def batch_images(batch: Any) -> int:
    """Return how many images a loader's batch holds: an (images, labels) pair or a tensorclass batch."""
    return len(batch[0]) if isinstance(batch, (tuple, list)) else len(batch)


def images_per_second(loader: Any, repeat: int, warmup: int = 1, contender: Hashable | None = None) -> dict[str, float]:
    """Time whole epochs of `loader`; return images/s from the median epoch and the epoch's median and p95 s.

    The one definition of images/s in the project's image experiments. `contender` names the loader for the warp
    (`measure/warp.py`): loaders compared across calls each need their own.
    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    counted = []

    def epoch() -> None:
        counted.append(sum(batch_images(batch) for batch in loader))

    seconds = measure.measure(epoch, repeat=repeat, warmup=warmup, contender=contender)
    return {
        "images_per_s": counted[-1] / measure.median(seconds),
        "epoch_s": measure.median(seconds),
        "epoch_s_p95": measure.p95(seconds),
    }


def configurations(workers: list[int]) -> list[tuple[str, int, int]]:
    """Return the sweep's (pipeline, num_workers, num_threads) configurations."""
    configs = [("DataLoader + ImageFolder", w, 1) for w in workers] + [(TUTORIAL, 0, 1), (ONE_PROCESS, 0, 1)]
    configs += [("memmap + threads", 0, w) for w in workers if w > 1]
    return configs + [("memmap + DataLoader workers", w, 1) for w in workers if w > 0]


def sweep(
    prep: Prepared,
    split: str,
    workers: list[int],
    batch_size: int,
    repeat: int,
    tutorial: torch.nn.Module | None = None,
) -> list[dict[str, Any]]:
    """Measure every loader configuration of `split`; return one row each.

    `tutorial` is the batched transform of the tutorial's loader (`tutorial_loader`; default the package's).

    Configurations run one after another, not interleaved: a persistent worker of one configuration would
    prefetch its next epoch while another configuration's epoch is timed.
    """
    rows = []
    for pipeline, w, threads in measure.progress(configurations(workers), desc=f"{split} loaders"):
        with warnings.catch_warnings():  # more workers than cores is part of the sweep, not a mistake here
            warnings.filterwarnings("ignore", message=".*worker processes in total.*")
            loader = make_loader(prep, split, pipeline, w, threads, batch_size, tutorial)
            timed = images_per_second(loader, repeat, contender=(split, pipeline, w, threads))
        del loader  # stop persistent workers before the next configuration
        rows.append(
            {
                "split": split,
                "pipeline": pipeline,
                "num_workers": w,
                "num_threads": threads,
                "batch_size": batch_size,
                **timed,
            }
        )
    return rows


def make_loader(
    prep: Prepared,
    split: str,
    pipeline: str,
    num_workers: int,
    num_threads: int,
    batch_size: int,
    tutorial: torch.nn.Module | None = None,
) -> Any:
    """Return the loader of one sweep configuration (a `configurations` triple) over `split`.

    `tutorial` is the tutorial loader's batched transform (default the package's); other pipelines ignore it.
    """
    if pipeline.startswith("DataLoader"):
        return dataloader(prep.folder, split, batch_size, num_workers)
    if pipeline == TUTORIAL:
        return tutorial_loader(getattr(prep, split), split, batch_size, transform=tutorial)
    return memmap_loader(getattr(prep, split), split, batch_size, num_workers, num_threads)


def best_rows(rows: list[dict[str, Any]], split: str) -> dict[str, dict[str, Any]]:
    """Return the sweep's rows of `split` that `head_to_head` times: the memmap and the DataLoader + ImageFolder
    configurations with the most images/s (BEST_MEMMAP, BEST_DATALOADER) and the one-process loader (ONE_PROCESS)."""
    part = [r for r in rows if r["split"] == split]
    return {
        BEST_MEMMAP: max((r for r in part if r["pipeline"].startswith("memmap")), key=lambda r: r["images_per_s"]),
        BEST_DATALOADER: max(
            (r for r in part if r["pipeline"].startswith("DataLoader")), key=lambda r: r["images_per_s"]
        ),
        ONE_PROCESS: next(r for r in part if r["pipeline"] == ONE_PROCESS),
    }


def head_to_head(
    prep: Prepared, split: str, rows: list[dict[str, Any]], batch_size: int, rounds: int
) -> dict[str, list[float]]:
    """Time the sweep's best memmap loader, its best DataLoader + ImageFolder and the one-process memmap loader
    against each other in interleaved rounds.

    The configurations are chosen from the sweep's `rows` of `split` first (`best_rows`); each round then runs one
    epoch of each, in a new random order, after one warm-up epoch each. Returns {name: images/s per round} for
    BEST_MEMMAP, BEST_DATALOADER and ONE_PROCESS (the best memmap loader's rounds when it is the one process):
    `speedup_ratios` takes the ratios per round. Explained in notebooks/09_precompute_memmap.ipynb.
    """
    return _race(prep, split, best_rows(rows, split), batch_size, rounds)


def parallel_rows(rows: list[dict[str, Any]], split: str) -> dict[str, dict[str, Any]]:
    """Return the sweep's one-process memmap row of `split` and, for each way to spread that loader over cores
    (`PARALLEL`: worker processes, threads), its configuration with the most images/s."""
    part = [r for r in rows if r["split"] == split]
    chosen = {ONE_PROCESS: next(r for r in part if r["pipeline"] == ONE_PROCESS)}
    for way in PARALLEL:
        found = [r for r in part if r["pipeline"] == way]
        chosen.update({way: max(found, key=lambda r: r["images_per_s"])} if found else {})
    return chosen


def parallel_rounds(
    prep: Prepared, split: str, rows: list[dict[str, Any]], batch_size: int, rounds: int
) -> dict[str, list[float]]:
    """Time the one-process memmap loader against its fastest worker-process and threaded configurations
    (`parallel_rows`) in interleaved rounds; return {pipeline: images/s per round}.

    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    return _race(prep, split, parallel_rows(rows, split), batch_size, rounds)


def _race(
    prep: Prepared, split: str, chosen: dict[str, dict[str, Any]], batch_size: int, rounds: int
) -> dict[str, list[float]]:
    """Time each distinct sweep row of `chosen` ({name: row}) for one epoch per round, in a new random order each
    round after one warm-up epoch; return {name: images/s per round} (names that share a row share its list)."""
    timed: dict[str, dict[str, Any]] = {}
    for name, r in chosen.items():
        timed.update({} if any(r is t for t in timed.values()) else {name: r})
    with warnings.catch_warnings():  # more workers than cores may win the sweep
        warnings.filterwarnings("ignore", message=".*worker processes in total.*")
        loaders = {
            name: make_loader(prep, split, r["pipeline"], r["num_workers"], r["num_threads"], batch_size)
            for name, r in timed.items()
        }
        counted: dict[str, int] = {}
        fns = {name: partial(_epoch, loader, counted, name) for name, loader in loaders.items()}
        seconds = measure.interleaved(fns, repeat=rounds, warmup=1, shuffle=True)
    del fns, loaders  # stop persistent workers
    rates = {name: [counted[name] / s for s in values] for name, values in seconds.items()}
    return {name: next(rates[t] for t, tr in timed.items() if tr is r) for name, r in chosen.items()}


def _epoch(loader: Any, counted: dict[str, int], name: str) -> None:
    counted[name] = sum(batch_images(batch) for batch in loader)


def speedup_ratios(rates: dict[str, list[float]], memmap: str = BEST_MEMMAP) -> list[float]:
    """Return the `memmap` loader's images/s over the best DataLoader's, per round of `head_to_head`."""
    return measure.ratios(rates, memmap, BEST_DATALOADER)


def round_figures(split: str, rates: dict[str, list[float]]) -> dict[str, float]:
    """Return `memmap_<split>_speedup` and `memmap_<split>_one_process_speedup` from `head_to_head`'s rounds
    (median and 95 % interval each) and the two best loaders' images/s (median over the rounds)."""
    return {
        **measure.interval_figures(f"memmap_{split}_speedup", speedup_ratios(rates)),
        **measure.interval_figures(f"memmap_{split}_one_process_speedup", speedup_ratios(rates, ONE_PROCESS)),
        f"memmap_{split}_images_per_s": measure.median(rates[BEST_MEMMAP]),
        f"dataloader_{split}_images_per_s": measure.median(rates[BEST_DATALOADER]),
    }


def parallel_figures(split: str, rates: dict[str, list[float]]) -> dict[str, float]:
    """Return each way's images/s over the one process's per round of `parallel_rounds` (median and 95 % interval,
    `memmap_<split>_<workers|threads>_over_one_process`) and the median images/s of each contender."""
    figures = {f"memmap_{split}_one_process_images_per_s": measure.median(rates[ONE_PROCESS])}
    for way, (short, _) in PARALLEL.items():
        if way in rates:
            key = f"memmap_{split}_{short}"
            figures |= measure.interval_figures(f"{key}_over_one_process", measure.ratios(rates, way, ONE_PROCESS))
            figures[f"{key}_images_per_s"] = measure.median(rates[way])
    return figures


def parallel_verdicts(figures: dict[str, float], split: str, chosen: dict[str, dict[str, Any]]) -> list[str]:
    """Return one line per way of `parallel_figures`: faster than, slower than or a tie with the one process,
    as the saved ratio's 95 % interval says, with both rates and the configuration (`parallel_rows`)."""
    lines = []
    for way, (short, words) in PARALLEL.items():
        key = f"memmap_{split}_{short}_over_one_process"
        if key not in figures:
            continue
        low, high = figures[key + measure.stats.LOW], figures[key + measure.stats.HIGH]
        word = {"met": "faster than", "missed": "slower than"}.get(measure.stats.decide(low, high, 1.0), "a tie with")
        knob, rate = f"{short}={chosen[way]['num_' + short]}", figures[f"memmap_{split}_{short}_images_per_s"]
        lines.append(
            f"{words} ({knob}): {word} one process on this machine ({rate:.0f} vs "
            f"{figures[f'memmap_{split}_one_process_images_per_s']:.0f} images/s; ratio {figures[key]:.2f}, "
            f"95 % interval {low:.2f} to {high:.2f})"
        )
    return lines


def speedups(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Return best memmap over best DataLoader images/s per split, the one-process ratios, and the rates."""
    figures = {}
    for split in [s for s in SPLITS if any(r["split"] == s for r in rows)]:
        part = [r for r in rows if r["split"] == split]
        base = max(r["images_per_s"] for r in part if r["pipeline"].startswith("DataLoader"))
        best = max(r["images_per_s"] for r in part if r["pipeline"].startswith("memmap"))
        one = next(r["images_per_s"] for r in part if r["pipeline"] == ONE_PROCESS)
        figures.update(
            {
                f"memmap_{split}_speedup": best / base,
                f"memmap_{split}_one_process_speedup": one / base,
                f"dataloader_{split}_images_per_s": base,
                f"memmap_{split}_images_per_s": best,
            }
        )
        tutorial = [r["images_per_s"] for r in part if r["pipeline"] == TUTORIAL]
        if tutorial:
            figures.update(
                {
                    f"tutorial_{split}_images_per_s": tutorial[0],
                    f"memmap_{split}_one_process_over_tutorial": one / tutorial[0],
                }
            )
    return figures


def per_image_costs(folder: Path, split: str, batch_size: int, n: int = 32, repeat: int = 7) -> pd.DataFrame:
    """Time each stage of the per-sample pipeline per image, and the rate each running total predicts.

    Stages, each the code the DataLoader + ImageFolder pipeline runs: open + decode (the dataset's loader), the
    sample transform's `precompute` (resize to tensor; for val also the center crop: what a store keeps), its
    `per_epoch` part (crop, flip, normalise) and DataLoader's collate (stacking the float images), each on one
    thread as in a DataLoader worker, in interleaved rounds. `attrs` holds, per round, open + decode over the
    three later stages together (`decode_over_transforms_rounds`), and the ms per image of reading the files'
    bytes alone (`read_ms_per_image`), the part of open + decode that is i/o. Explained in
    notebooks/09_precompute_memmap.ipynb.
    """
    ds, tf = ImageFolder(folder / split), sample_transform(split)
    paths = [p for p, _ in ds.samples[:n]]
    decoded = [ds.loader(p) for p in paths]
    stored = [tf.precompute(im) for im in decoded]
    samples = [tf(im) for im in decoded[:batch_size]]
    stages = {
        "open + decode": (lambda: [ds.loader(p) for p in paths], len(paths)),
        "precompute (resize, to uint8 tensor)": (lambda: [tf.precompute(im) for im in decoded], len(paths)),
        "per epoch (crop, flip, normalise)": (lambda: [tf.per_epoch(x) for x in stored], len(paths)),
        "collate (stack the floats)": (lambda: torch.stack(samples), len(samples)),
        READ: (lambda: [Path(p).read_bytes() for p in paths], len(paths)),
    }
    with measure.torch_threads(1):  # one thread per stage, as in a DataLoader worker (a busy machine stalls torch)
        seconds = measure.interleaved({stage: fn for stage, (fn, _) in stages.items()}, repeat=repeat, warmup=2)
    per_image = {stage: [s / count for s in seconds[stage]] for stage, (_, count) in stages.items()}
    read = per_image.pop(READ)
    table = pd.DataFrame([{"stage": k, "ms_per_image": measure.median(v) * 1e3} for k, v in per_image.items()])
    table["predicted_images_per_s"] = 1e3 / table["ms_per_image"].cumsum()
    decode, *later = per_image.values()
    table.attrs["decode_over_transforms_rounds"] = [d / sum(t) for d, *t in zip(decode, *later)]
    table.attrs["read_ms_per_image"] = measure.median(read) * 1e3
    return table


def stage_answer(costs: pd.DataFrame, figures: dict[str, float]) -> str:
    """Return what `per_image_costs`' table says of "i/o rather than the transforms": open + decode against the
    later stages together, as the saved `decode_over_transforms` ratio's 95 % interval says, and the largest stage."""
    low, high = (
        figures["decode_over_transforms" + measure.stats.LOW],
        figures["decode_over_transforms" + measure.stats.HIGH],
    )
    word = {"met": "open + decode dominates", "missed": "the transforms dominate"}.get(
        measure.stats.decide(low, high, 1.0), "open + decode and the transforms are a tie"
    )
    ms = costs.set_index("stage")["ms_per_image"]
    return (
        f"open + decode {ms.iloc[0]:.2f} ms per image (reading the file's bytes alone: "
        f"{costs.attrs['read_ms_per_image']:.3f} ms), the transforms and collate {ms.iloc[1:].sum():.2f} ms; ratio "
        f"{figures['decode_over_transforms']:.2f}, 95 % interval {low:.2f} to {high:.2f}: {word} on this machine; "
        f"largest single stage: {ms.idxmax()} ({ms.max() / ms.sum():.0%} of the per-image time)"
    )


def transform_costs(
    images: torch.Tensor, repeat: int, num_threads: int | None = None, tutorial: torch.nn.Sequential | None = None
) -> pd.DataFrame:
    """Time the tutorial's batched transforms beside the helpers' on one stored uint8 batch (interleaved).

    `tutorial` is the tutorial's chain (normalise, crop, flip; default `tutorial_train_transform(CROP)`): each of
    its three modules is also timed alone. Returns ms per image (median, p95) for each stage and for each whole
    train transform; `attrs` holds the tutorial's whole chain over the helpers' one-thread one, as the median
    (`tutorial_over_helpers`) and per round (`tutorial_over_helpers_rounds`).
    Explained in notebooks/09_precompute_memmap.ipynb.
    """
    threads = num_threads or len(os.sched_getaffinity(0))
    n, floats = len(images), transforms.normalize(images)
    cropped = transforms.random_crop(floats, CROP)
    whole = tutorial_transforms.tutorial_train_transform(CROP) if tutorial is None else tutorial
    inv, crop_g, flip_m = whole[0], whole[1], whole[2]
    one, several = transforms.CropFlipNormalize(CROP, 0.5), transforms.CropFlipNormalize(CROP, 0.5, num_threads=threads)
    fns = {
        ("normalise", "tutorial: InvAffine"): lambda: inv(images),
        ("normalise", "helpers: normalize"): lambda: transforms.normalize(images),
        ("crop", "tutorial: RandomCrop by gather"): lambda: crop_g(floats),
        ("crop", "helpers: random_crop"): lambda: transforms.random_crop(floats, CROP),
        ("flip", "tutorial: RandomHFlip by masked_fill"): lambda: flip_m(cropped),
        ("flip", "helpers: random_hflip"): lambda: transforms.random_hflip(cropped),
        ("all three", "tutorial: InvAffine, RandomCrop, RandomHFlip"): lambda: whole(images),
        ("all three", "helpers: CropFlipNormalize"): lambda: one(images),
        ("all three", f"helpers: CropFlipNormalize, {threads} threads"): lambda: several(images),
    }
    samples = measure.interleaved({" | ".join(k): fn for k, fn in fns.items()}, repeat=repeat, warmup=1)
    rows = [
        {
            "stage": stage,
            "transform": name,
            "ms_per_image": measure.median(samples[f"{stage} | {name}"]) / n * 1e3,
            "p95_ms_per_image": measure.p95(samples[f"{stage} | {name}"]) / n * 1e3,
        }
        for stage, name in fns
    ]
    table = pd.DataFrame(rows)
    rounds = measure.ratios(
        samples, "all three | tutorial: InvAffine, RandomCrop, RandomHFlip", "all three | helpers: CropFlipNormalize"
    )
    table.attrs["tutorial_over_helpers"] = measure.median(rounds)
    table.attrs["tutorial_over_helpers_rounds"] = rounds  # per round, for an interval (measure.predicted)
    return table
