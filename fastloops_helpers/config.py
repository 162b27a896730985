"""The scale profile, the device choice, and where data and results live.

Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

SCALES = ("smoke", "workshop", "full")  # the columns of SIZES; "gpu" (GPU_SCALE, make gpu-check) picks among them
PROFILES = (*SCALES, "gpu")  # every name FASTLOOPS_SCALE takes
DEFAULT_SCALE = "workshop"

# One table of named sizes: name -> (smoke, workshop, full).
# smoke: CI, every notebook under a minute on 2 cores; workshop: a few minutes on a laptop;
# full: the seeds' own sizes. Notebooks and benchmarks read these through `size(name)`.
# The table is aligned by hand (columns, trailing comments): the formatter leaves it alone.
# fmt: off
SIZES: dict[str, tuple[Any, Any, Any]] = {
    # measurement
    "repeat": (3, 7, 15),                          # timed repeats after warm-up
    "warmup": (1, 2, 3),                           # untimed runs first (caches, allocator, JIT)
    "copy_mb": (32, 256, 1024),                    # buffer size for the copy-bandwidth benchmark
    # notebook 01-03: the index-only loops of the slide
    "loops.epochs": (2, 5, 1000),                  # epochs per loop
    "loops.samples": (30_000, 300_000, 300_000),   # dataset length
    "loops.batch_size": (300, 300, 300),           # the slide's batch size
    "loops.worker_epochs": (1, 2, 1000),           # epochs for the slow loops (DataLoader per sample, tf.data)
    # notebook 02's sweep of batch sizes
    "getitem.batch_sizes": ((1, 10, 100, 1000), (1, 3, 10, 30, 100, 300, 1000, 3000),
                            (1, 3, 10, 30, 100, 300, 1000, 3000, 10000)),
    "getitem.features": (93, 93, 93),              # row width of the float matrix (Otto's 93 features)
    "getitem.rows": (10_000, 60_000, 300_000),     # rows in notebook 02's DataLoader comparison (per-sample is slow)
    "getitem.samples": (2_000, 20_000, 100_000),   # samples fetched per timed repeat of the sweep (more: steadier)
    "gather.rows": (30_000, 300_000, 300_000),     # benchmark `gather`: rows of the float32 matrix
    "gather.features": (93, 93, 93),               # its columns (Otto's 93 features)
    "gather.batch_size": (1024, 1024, 1024),       # rows per shuffled batch
    "gather.epochs": (2, 5, 20),                   # timed epochs per gather primitive
    # notebooks 10 (FFCV on Otto) and 11 (FFCV on CIFAR-10), benchmarks `otto` and `cifar` (seed 003)
    "otto.rows": (8_000, 61_878, 61_878),          # rows of the (synthetic) train.csv; the real one has 61,878
    "otto.batch_size": (1024, 1024, 1024),         # the seed's batch size
    "otto.epochs": (6, 6, 10),                     # timed rounds (one epoch per loader), after one warm-up epoch
    "otto.train_epochs": (2, 6, 20),               # epochs of the short training run per loader
    "otto.seed_rows": (4_096, 39_601, 39_601),     # seed 003's protocol: its X_num_train.npy has 39,601 rows
    "otto.seed_batch_size": (128, 1024, 1024),     # its batch; smoke keeps more than its 11 skipped batches per epoch
    "otto.seed_epochs": (10, 10, 10),              # its 10 epochs (cheap: forward + loss only)
    "cifar.train": (1_280, 6_400, 50_000),         # training images (CIFAR-10 has 50,000)
    "cifar.test": (256, 1_000, 10_000),            # test images (CIFAR-10 has 10,000)
    "cifar.batch_size": (128, 128, 128),           # the seed's batch size
    "cifar.steps": (6, 8, 100),                    # timed full training steps per loader (the model is slow)
    "cifar.epochs": (6, 9, 9),                     # load-only rounds (one epoch of each loader), after a warm-up
    "cifar.wrn": ((10, 1), (16, 2), (28, 10)),     # WideResNet (depth, widen_factor): WRN-28-10 only at full
    # notebook 09 (precompute + memmap): the synthetic ants/bees ImageFolder and its benchmark
    "imagefolder.train": (32, 244, 244),           # train JPEGs (the tutorial's subset has 244)
    "imagefolder.val": (24, 153, 153),             # val JPEGs (the tutorial's subset has 153)
    "imagefolder.px": (320, 500, 500),             # typical longer side; smaller decodes faster
    "imagefolder.batch_size": (8, 32, 32),         # larger batches amortise per-batch overhead
    "imagefolder.repeat": (1, 2, 5),               # timed epochs per configuration in the sweep (decoding is slow)
    "imagefolder.rounds": (6, 6, 12),              # rounds of the best memmap and best DataLoader loaders (ratios)
    "imagefolder.workers": ((0, 2), (0, 1, 2, 4), (0, 1, 2, 4, 8)),  # num_workers swept per pipeline
    "imagefolder.memory_images": (256, 2048, 8192),  # 256 x 256 images in the resident-memory demo (192 KiB each)
    # notebooks 07 (DataLoader anatomy) and 08 (read and decode), benchmark `workers`
    "anatomy.px": (64, 128, 224),                  # decoded images are resized to px x px before collate
    "anatomy.batch_size": (8, 16, 32),             # images per batch in the loader experiments
    "anatomy.step_ms": (10, 60, 60),               # stand-in GPU step per batch (the CPU is free meanwhile)
    "anatomy.ladder_rounds": (3, 6, 10),           # rounds of the num_workers ladder (one epoch of each per round)
    "anatomy.memory_mb": (16, 128, 512),           # dataset size in the worker-memory experiment
    "anatomy.memory_workers": ((0, 2), (0, 1, 2, 4), (0, 1, 2, 4, 8)),  # worker counts for it
    "readdecode.file_mb": (64, 512, 2048),         # data file for the page-cache vs cold read
    "readdecode.images": (12, 60, 300),            # JPEGs decoded per size and decoder
    # notebook 15 (is my loop input-bound?): diagnose's batch counts, benchmark `diagnose`
    "diagnose.batches": (8, 24, 60),               # measured batches per loop: more gives steadier shares
    "diagnose.warmup": (2, 3, 5),                  # batches run first and left out (worker start, caches)
    "diagnose.replay": (4, 8, 16),                 # cached batches replayed through the step alone (headspace)
    # notebook 12 (DDP with torchrun): the Otto MLP trained by 2 processes
    "ddp.rows": (4_001, 61_878, 61_878),           # Otto rows; smoke's odd split shows DistributedSampler's padding
    "ddp.epochs": (2, 4, 20),                      # epochs per run (each run also starts 2 processes)
    "ddp.batch_size": (256, 512, 512),             # per rank: the global batch is this x world size (1024 = the seed's)
    "ddp.world_size": (2, 2, 2),                   # processes (ranks); gloo on the CPU, nccl on GPUs
    # notebooks 04 (fast shuffle), 05 (fusion), 06 (device moves); benchmarks `shuffle` and `devices`
    "shuffle.sizes": ((10**4, 10**5, 10**6), (10**5, 10**6, 10**7), (10**5, 10**6, 10**7, 10**8)),  # N swept
    "shuffle.n_headline": (2**22, 2**26, 2**26),   # N of the headline speedup (2^26 is the target's)
    "shuffle.group_size": (1024, 1024, 1024),      # grouped_permutation's group size for the speed figures
    "shuffle.repeat": (2, 3, 5),                   # timed permutations per method and N (2^26 takes seconds)
    "shuffle.group_sizes": ((8, 64, 512), (16, 128, 1024, 4096), (16, 128, 1024, 8192)),  # speed-vs-quality sweep
    "shuffle.quality_n": (4_000, 30_000, 60_000),  # samples of the class-sorted data set (10 classes)
    "shuffle.train_epochs": (2, 3, 5),             # epochs of the short training run per order
    "fusion.sizes": ((2**10, 2**16, 2**20), (2**10, 2**14, 2**18, 2**22, 2**24),
                     (2**10, 2**14, 2**18, 2**22, 2**26)),  # elements per tensor
    "devices.rounds": (5, 15, 30),                 # interleaved timing rounds per method (medians over rounds)
    "devices.block_ms": (2, 10, 20),               # calls per round are chosen to fill about this many ms
    # interleaved rounds of the benchmarks whose ratios targets check: more rounds, steadier medians
    "loops.rounds": (5, 21, 1000),                 # rounds of the vectorised loops (numpy, helpers, ...): ms each
    "loops.pair_rounds": (9, 9, 1000),             # DataLoader (no workers) vs helpers: 9+ leave outliers out
    "gather.rounds": (3, 15, 30),                  # rounds of the gather primitives and the helpers' loader
    "threads.batch_size": (8, 32, 32),             # images per batch in notebook 14's pipelines
    "threads.epochs": (1, 1, 3),                   # timed epochs per pipeline in the sweep (after one warm-up epoch)
    "threads.threads_per_core": (2, 2, 2),         # threads per core of the thread pipelines (I/O overlaps decode)
    "threads.limit_images": (8, 64, 244),          # images timed on one thread for the physical limit
    "threads.gil_images": (8, 244, 244),           # images per GIL-share round (one thread, 2 threads, 2 processes)
    "threads.rounds": (6, 6, 12),                  # rounds of ThreadLoader, best DataLoader, SPDL, one thread (ratios)
    "threads.sweep_s": (4, 20, 120),               # seconds notebook 14's sweep may take: sizes its epoch
    # notebook 15's section 9: JPEGs into ResNet-50 (a stand-in on a CPU)
    "jpeg.batch_size": (8, 16, 64),                # images per step: the folder holds 2 x cores + 1 batches
    "jpeg.rounds": (3, 6, 6),                      # rounds of blocks per loader (6: the fewest that bound an interval)
    # notebook 16 (when the data no longer fits): shards streamed from a loopback store, benchmark `streaming`
    "stream.images": (320, 4_000, 40_000),         # ~40 KB synthetic JPEGs (10 classes), sharded in two layouts
    "stream.shards": (8, 64, 640),                 # shards per layout: ~2.5 MB each at workshop
    "stream.batch_size": (32, 64, 64),             # images per batch
    "stream.px": (64, 64, 96),                     # decoded side (the memmap stores px x px pixels)
    "stream.decode_threads": (2, 2, 8),            # threads decoding each batch's JPEGs
    "stream.decode_images": (96, 768, 8_192),      # images each decoding pass takes per reader and round
    "stream.rounds": (3, 6, 15),                   # interleaved rounds (6+ gives a 95 % interval of the median)
    "stream.ceiling_rounds": (3, 12, 15),          # rounds of raw GETs against the best reader (under a second each)
    "stream.ahead": (4, 15, 15),                   # Parquet shards fetched ahead: requests in flight - 1 (16 keep
    #                                                the same-region profile 0.98 busy: notebook 16's predicted_bytes_s)
    "stream.small_buffer": (32, 64, 64),           # the small shuffle buffer: one batch
    "stream.large_buffer": (256, 1_000, 10_000),   # the large one: a quarter of the workshop data set
    "stream.diagnose_batches": (6, 16, 40),        # batches diagnose measures on the stream-fed training step
}
# fmt: on
# The gpu scale: one short run of every notebook on a GPU machine (make gpu-check). Workshop sizes for the
# GPU parts with the seed's model; smoke sizes for the parts that time the CPU alone, whose costs do not
# shrink with a GPU (decoding, sweeps of workers and threads, the store). Keys: a size's name or its prefix.
GPU_SCALE = {
    **dict.fromkeys(("loops", "getitem", "gather", "shuffle", "imagefolder", "anatomy", "readdecode"), "smoke"),
    **dict.fromkeys(("threads", "stream", "ddp"), "smoke"),  # ddp: one GPU puts both ranks on the CPU (gloo)
    "cifar.wrn": "full",  # WRN-28-10, the seed's model
    "jpeg": "full",  # ResNet-50's batch of 64 and 6 rounds
    "threads.sweep_s": "workshop",  # 16 workers' 2 batches each fit it
    **dict.fromkeys(("cifar.epochs", "cifar.steps"), "smoke"),  # 6 rounds: the fewest that bound an interval
}


def profile(name: str, scale_name: str) -> str:
    """Return the column of SIZES that size `name` takes at `scale_name` (the gpu scale picks one per size)."""
    by_prefix = GPU_SCALE.get(name.split(".")[0], "workshop")
    return GPU_SCALE.get(name, by_prefix) if scale_name == "gpu" else scale_name


def scale(value: str | None = None) -> str:
    """Return the active scale profile (FASTLOOPS_SCALE), rejecting unknown names."""
    name = (value if value is not None else os.environ.get("FASTLOOPS_SCALE", DEFAULT_SCALE)).strip().lower()
    if name not in PROFILES:
        raise ValueError(
            f"unknown scale {name!r}: use one of {', '.join(PROFILES)} (set FASTLOOPS_SCALE or pass --scale)"
        )
    return name


def size(name: str, scale_name: str | None = None) -> Any:
    """Return the named size for the active (or given) scale profile."""
    if name not in SIZES:
        raise KeyError(f"no size named {name!r} in config.SIZES; known: {', '.join(sorted(SIZES))}")
    return SIZES[name][SCALES.index(profile(name, scale(scale_name)))]


def sizes(prefix: str, scale_name: str | None = None) -> dict[str, Any]:
    """Return every size whose name starts with `prefix.`, keyed by the rest of the name."""
    return {k[len(prefix) + 1 :]: size(k, scale_name) for k in SIZES if k.startswith(prefix + ".")}


def device(value: str | None = None) -> torch.device:
    """Return the compute device: FASTLOOPS_DEVICE if set, else CUDA when available, else CPU."""
    name = value if value is not None else os.environ.get("FASTLOOPS_DEVICE", "")
    if not name:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"FASTLOOPS_DEVICE={name!r} is not a torch device (try 'cpu' or 'cuda:0')") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"FASTLOOPS_DEVICE={name!r} asks for CUDA, but torch sees no GPU here; unset it or use 'cpu'")
    return dev


def project_root() -> Path:
    """Return the checkout's root (where pyproject.toml is), else the working directory."""
    here = Path(__file__).resolve().parents[1]
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def data_dir() -> Path:
    """Return the folder for generated and cached data sets (FASTLOOPS_DATA, default data/)."""
    return _folder("FASTLOOPS_DATA", "data")


def results_dir() -> Path:
    """Return the folder for saved figures and JSON results (FASTLOOPS_RESULTS, default results/)."""
    return _folder("FASTLOOPS_RESULTS", "results")


def _folder(env: str, default: str) -> Path:
    # relative to the project root, not the working directory (a notebook's kernel runs in notebooks/)
    path = project_root() / (os.environ.get(env) or default)
    path.mkdir(parents=True, exist_ok=True)
    return path


def describe() -> str:
    """Return one line naming the scale, the device and how to change them."""
    return (
        f"scale={scale()} (FASTLOOPS_SCALE: {'|'.join(SCALES)}), device={device()} "
        f"(FASTLOOPS_DEVICE), data={rel(data_dir())}, results={rel(results_dir())}"
    )


def rel(path: str | Path) -> str:
    """Return `path` as printed in a notebook: relative to the project root, else to $FASTLOOPS_DATA or ~.

    Stored outputs must not show the machine's absolute paths. Explained in notebooks/00_setup.ipynb.
    """
    path = Path(path).expanduser().absolute()
    anchors = [(project_root().absolute(), "")]
    anchors += [
        (Path(os.environ[env]).expanduser().absolute(), f"${env}")
        for env in ("FASTLOOPS_DATA", "FASTLOOPS_RESULTS")
        if os.environ.get(env)
    ]
    anchors.append((Path.home().absolute(), "~"))
    for root, label in anchors:
        if path == root or root in path.parents:
            inner = path.relative_to(root).as_posix()
            if not label:
                return inner if inner != "." else "."
            return label if inner == "." else f"{label}/{inner}"
    return path.name  # outside every known folder: the name alone carries no machine detail
