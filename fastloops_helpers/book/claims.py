"""The one registry of the seeds' figures and of every threshold a reproduction check uses.

Usage in a notebook's `## Reproduction check` (the cell nbval compares):

    from fastloops_helpers.book import claims
    claims.check("slide_100_speedup", figures)        # looks up the claim's figure in the dict you save
    claims.check("slide_100_speedup", single / batched)  # or pass the measured value itself
    claims.check("memmap_val_same_batches", torch.equal(a, b))   # a yes/no claim
    claims.check("pinned_copy_speedup", None, why="no GPU here")  # not measured, and why

Each call prints one line, e.g.
`[claim] slide_100_speedup: measured 24.1x (single run), needs >= 5x: reproduced (seed 000/001: 122 µs vs 3.42 µs
(36x))`, or with "(95 % interval LOW to HIGH)" for per-round ratios; tests/sanitize.cfg masks only the number after
"measured", so nbval compares the verdict.
`claims.holds(name, value)` returns the verdict as a bool without printing; `claims.quote(name)` returns the
seed's figure for a printed sentence. Never write a seed figure or a threshold in a notebook: add or change
the row in CLAIMS below. A claim's `figure` is the name the notebook saves (results/NN_name.json through
`measure.save_results`); "a/b" is the ratio of two saved figures. One name, one number: a claim reads the figure
saved under its own name when there is one (`check` refuses figures that hold both). REPORT.md and notebook 13
read the same rows.

Explained in notebooks/13_conclusion.ipynb.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..measure.stats import HIGH, LOW, decide

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


def _c(name: str, seed: str, claim: str, seed_figure: str, notebook: str, **kw: Any) -> Claim:
    return Claim(name, seed, claim, seed_figure, notebook, **kw)


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

CLAIMS: tuple[Claim, ...] = (
    # 00: the tools the later checks rely on (no seed figure)
    _c(
        "timer_sleep_ratio",
        "project",
        "the timer is honest: a 50 ms sleep measures as 50 ms",
        "",
        N00,
        at_least=0.9,
        at_most=4.0,
    ),
    _c(
        "cache_over_ram_copy",
        "project",
        "copying from cache is at least about as fast as from RAM",
        "",
        N00,
        figure="copy_gb_per_s_cache/copy_gb_per_s_ram",
        at_least=0.8,
    ),
    # 01: the slide's opening question
    _c(
        "dataloader_nw0_over_numpy",
        "000/001",
        "the numpy loop beats the per-sample DataLoader (no workers)",
        "the slide's opening question",
        N01,
        at_least=10,
    ),
    _c(
        "dataloader_workers_over_numpy",
        "000/001",
        "the numpy loop beats the DataLoader with workers",
        "the slide's opening question",
        N01,
        at_least=10,
    ),
    _c(
        "dataloader_nw0_over_helpers",
        "000/001",
        "a batched loader beats the per-sample DataLoader",
        "the slide's opening question",
        N01,
        at_least=10,
    ),
    _c(
        "helpers_over_numpy",
        "project",
        "the helpers' loader is as fast as the numpy loop (epoch time ratio)",
        "numpy is the slide's fastest loop",
        N01,
        at_most=1.0,
    ),
    # 02: __getitem__ cost
    _c(
        "slide_100_speedup",
        "000/001",
        "one batched fetch of 100 items beats 100 single fetches stacked",
        "122 µs vs 3.42 µs (36x)",
        N02,
        at_least=5,
    ),
    _c(
        "getitems_collate_speedup",
        "000/001",
        "`__getitems__` with a pass-through collate beats the per-sample DataLoader",
        "",
        N02,
        at_least=3,
    ),
    # 03: a custom loader
    _c(
        "index_only_custom_over_dataloader",
        "000/001",
        "a custom loader beats DataLoader on the index-only task",
        "",
        N03,
        figure="index_only_DataLoader_ms/index_only_slide_FastDataloader_ms",
        at_least=10,
    ),
    _c(
        "index_only_batchloader_over_dataloader",
        "000/001",
        "BatchLoader beats DataLoader on the index-only task",
        "",
        N03,
        figure="index_only_DataLoader_ms/index_only_BatchLoader_ms",
        at_least=10,
    ),
    _c(
        "matrix_batchloader_over_dataloader",
        "000/001",
        "BatchLoader beats DataLoader on the float matrix",
        "",
        N03,
        figure="93_DataLoader_ms/93_BatchLoader_ms",
        at_least=3,
    ),
    _c(
        "matrix_batchloader_over_slide_loader",
        "project",
        "BatchLoader beats the slide's loader on the matrix",
        "",
        N03,
        figure="93_slide_FastDataloader_ms/93_BatchLoader_ms",
        at_least=1.0,
    ),
    # 04: shuffling
    _c(
        "slide_grouped_speedup_headline",
        "000/001",
        "the slide's grouped permutation, as written, is much cheaper than a full one for a big index",
        "plot p4/p5 (no number)",
        N04,
        at_least=2,
    ),
    _c(
        "grouped_speedup_headline",
        "project",
        "the helpers' grouped permutation (a few inner shuffles shared by the groups) is much cheaper than a full one",
        "",
        N04,
        at_least=2,
    ),
    _c("grouped_entropy_largest_over_full", "project", "class-sized groups ruin the class mix", "", N04, at_most=0.5),
    _c(
        "quasi_random_entropy_min_over_full",
        "project",
        "FFCV's quasi-random order keeps the class mix",
        "",
        N04,
        at_least=0.9,
    ),
    _c(
        "quasi_random_replica_matches_ffcv",
        "project",
        "the replica of QUASI_RANDOM mixes classes as FFCV's own Loader does (class-mix entropy, FFCV over replica)",
        "",
        N04,
        figure="quasi_ffcv_entropy_bits/quasi_replica_entropy_bits",
        at_least=0.95,
        at_most=1.05,
    ),
    # 05: fusion
    _c(
        "fusion_speedup_largest",
        "000/001",
        "fusing a pointwise chain saves time when the data is larger than cache",
        "plot p6 (no number)",
        N05,
        at_least=1.5,
    ),
    # 06: moving nested data
    _c(
        "move_to_over_fastest",
        "000/001",
        "the helpers' move_to is as fast as the slide's ways to move nested data",
        "",
        N06,
        at_most=1.5,
    ),
    _c(
        "jax_device_put_moves_all",
        "000/001",
        "`jax.device_put` puts any nested structure on a device",
        "jax.device_put (no number)",
        N06,
    ),
    _c(
        "pinned_copy_speedup",
        "002",
        "pinned host memory copies to the GPU faster than pageable memory",
        "pin_memory=True (no number)",
        N06,
        at_least=1.2,
        needs="gpu",
    ),
    # 07: DataLoader anatomy
    _c(
        "workers2_over_workers0",
        "002",
        "DataLoader workers hide per-sample JPEG decoding (2 workers vs 0)",
        "timeline diagrams",
        N07,
        at_least=1.3,
    ),
    _c("workers2_parallelism", "002", "two workers load batches in parallel", "timeline diagrams", N07, at_least=1.2),
    _c(
        "thread_prefetch_overlap_share",
        "002",
        "a prefetch thread loads while the step runs",
        "timeline diagrams",
        N07,
        at_least=0.5,
    ),
    _c(
        "list_copy_share_per_worker",
        "002",
        "under fork each worker copies a list of Python objects it reads",
        "",
        N07,
        at_least=0.4,
    ),
    _c(
        "fast_collate_speedup",
        "002",
        "collating uint8 images and converting the whole batch once beats per-sample conversion + default_collate",
        "Fast collate (no number)",
        N07,
        at_least=1.3,
    ),
    _c("broken_images_dropped", "002", "collate can drop broken images (only they are dropped)", "", N07),
    _c("seed_worker_fixes_rng", "002", "a dataset-owned RNG repeats across workers; seed_worker fixes it", "", N07),
    _c(
        "process_prefetcher_speedup",
        "002",
        "one loader process sacrificed into a prefetcher process hides loading behind the step",
        "Prefetching Implementation #2 (no number)",
        N07,
        figure="process_prefetch_speedup",
        at_least=1.2,
    ),
    # 08: read and decode
    _c(
        "cached_over_cold",
        "002",
        "storage speed matters: the page cache reads faster than a cold read",
        "",
        N08,
        at_least=1.5,
    ),
    _c("pillow_uses_turbo", "002", "Pillow >= 9 decodes with libjpeg-turbo", "", N08),
    _c("copy_table_as_seed", "002", "numpy/torch copy semantics are as the seed's table says", "", N08),
    _c("decoders_agree", "002", "the JPEG decoders agree on the pixels", "", N08),
    _c(
        "jpeg4py_agrees",
        "002",
        "jpeg4py decodes JPEGs with libjpeg-turbo, like the other decoders",
        "jpeg.JPEG(img).decode() (no number)",
        N08,
    ),
    _c(
        "pycuda_htod_async",
        "002",
        "PyCUDA's memcpy_htod_async copies to the GPU on a stream",
        "cuda.memcpy_htod_async (no number)",
        N08,
        needs="gpu",
    ),
    _c(
        "tensorrt_speedup",
        "002",
        "a TensorRT engine runs the model faster than eager PyTorch",
        "",
        N08,
        at_least=1.0,
        needs="gpu",
    ),
    # 09: precompute + memmap (seed 004, the tensordict tutorial)
    _c(
        "memmap_train_speedup",
        "004",
        "memmap + batched transforms beat ImageFolder + DataLoader on train",
        "1,646 vs 1,017 fps on CPU (1.6x)",
        N09,
        at_least=1.5,
    ),
    _c(
        "memmap_val_speedup",
        "004",
        "memmap + batched transforms beat ImageFolder + DataLoader on val",
        "20,452 vs 669 fps on CPU (31x)",
        N09,
        at_least=5,
    ),
    _c("memmap_val_same_batches", "004", "both val pipelines produce the same batches", "", N09),
    _c(
        "tutorial_imagenet_a100_speedup",
        "004",
        "on ImageNet with an A100 the tutorial's pipeline loads about 10x faster than torch + torchvision",
        "10x speedup in data-loading",
        N09,
        figure="memmap_train_one_process_speedup",
        at_least=10,
        needs="gpu",
        source="the tensordict tutorial, ImageNet on an A100",
    ),
    _c(
        "tutorial_workers_even_better",
        "004",
        "the memmap loader gets even better with multiple workers loading batches from the memory-mapped array",
        "",
        N09,
        figure="memmap_train_workers_over_one_process",
        at_least=1.0,
    ),
    _c(
        "tutorial_io_rather_than_transforms",
        "004",
        "much of the DataLoader's overhead is i/o (reading and decoding the images) rather than the transforms",
        "",
        N09,
        figure="decode_over_transforms",
        at_least=1.0,
    ),
    # 10: FFCV on Otto (seed 003)
    _c(
        "otto_ffcv_over_dataloader_load",
        "003",
        "FFCV loads Otto batches much faster than a per-sample DataLoader (load only: the seed infers "
        "a loading bottleneck from its forward + loss times)",
        "no load-only figure for Otto (its Otto loops time forward + loss behind the loader)",
        N10,
        at_least=3,
    ),
    _c(
        "otto_helpers_over_ffcv_load",
        "project",
        "the helpers' loader loads Otto at least as fast as FFCV",
        "",
        N10,
        at_least=1.0,
    ),
    _c(
        "otto_helpers_over_dataloader_load",
        "project",
        "the helpers' loader loads Otto far faster than DataLoader",
        "",
        N10,
        at_least=10,
    ),
    _c("otto_val_acc_spread", "project", "every loader trains to the same accuracy", "", N10, at_most=0.03, unit=""),
    _c("otto_val_acc_over_majority", "project", "the MLP beats the majority class", "", N10, at_least=0.05, unit=""),
    _c(
        "otto_dataloader_step_over_ffcv_step",
        "003",
        "an Otto MLP step is much faster behind FFCV than behind DataLoader; the project's step (forward, "
        "loss, backward, Adam) is not the seed's (forward + loss), which otto_seed_protocol_uplift_pct replays",
        "0.95 ms vs 10.4 ms mean per batch on a GPU (-91 %), forward + loss only (no backward)",
        N10,
        at_least=3,
        needs="gpu",
    ),
    _c(
        "otto_seed_protocol_uplift_pct",
        "003",
        "seed 003's protocol (forward + loss, no shuffle, 39,601 rows, "
        "batch 1024, 1 worker, pinned, batches 0-10 of each epoch skipped (`if i > 10`, 11 batches)): "
        "FFCV's median step uplift over DataLoader",
        "-91 % (median uplift, on a GPU)",
        N10,
        at_most=-50,
        unit=" %",
        needs="gpu",
    ),
    # 11: FFCV on CIFAR-10 (seed 003)
    _c(
        "cifar_ffcv_over_dataloader_load",
        "003",
        "FFCV's load-only step is far faster than DataLoader's on CIFAR-10",
        "0.82 ms vs 28.9 ms load-only (-97 %)",
        N11,
        figure="ffcv_over_dataloader_load",
        at_least=3,
    ),
    _c(
        "cifar_step_gain_over_load_gain",
        "003",
        "the full WRN step gains much less than loading alone",
        "-11 % full step vs -97 % load-only",
        N11,
        figure="dataloader_step_over_ffcv_step/ffcv_over_dataloader_load",
        at_most=0.5,
    ),
    _c(
        "cifar_helpers_over_dataloader_load",
        "project",
        "the helpers load CIFAR far faster than DataLoader",
        "",
        N11,
        figure="helpers_over_dataloader_load",
        at_least=3,
    ),
    _c(
        "cifar_dataloader_load_share_pct",
        "003",
        "the WRN dominates the step: loading is under half of it",
        "",
        N11,
        at_most=50,
        unit=" %",
    ),
    _c(
        "cifar_dataloader_step_over_ffcv_step",
        "003",
        "with a heavy WRN the full-step gap shrinks (overlap on the GPU)",
        "25.8 ms vs 29.1 ms (-11 %)",
        N11,
        figure="dataloader_step_over_ffcv_step",
        at_least=1.0,
        needs="gpu",
    ),
    _c(
        "cifar_helpers_over_ffcv_load",
        "project",
        "the helpers' on-the-fly CIFAR path loads at least as fast as FFCV's decoder",
        "",
        N11,
        figure="helpers_over_ffcv_load",
        at_least=1.0,
    ),
    _c(
        "cifar_seed_protocol_load_uplift_pct",
        "003",
        "seed 003's protocol as written (one pass each, DataLoader unshuffled, first 11 batches left out): FFCV's "
        "median load-only batch time is far below the DataLoader's",
        "-97 % (0.80 ms vs 28.8 ms median, load only)",
        N11,
        at_most=-67,
        unit=" %",
    ),
    _c(
        "cifar_seed_protocol_full_uplift_pct",
        "003",
        "seed 003's protocol as written, WRN-28-10 forward + loss behind each batch: FFCV's median batch is faster "
        "than the DataLoader's, by far less than load-only",
        "-12 % (25.4 ms vs 29.0 ms median, forward + loss; -11 % of the mean)",
        N11,
        at_least=-50,
        at_most=0,
        unit=" %",
        needs="gpu",
    ),
    # 12: scaling out
    _c(
        "ddp_matches_single",
        "000/001",
        "DDP on shards trains the same weights as one process on the global batch",
        "DDP as the automatic solution",
        N12,
    ),
    _c("shards_ok", "000/001", "DistributedSampler's shards are disjoint and cover the data", "", N12),
    _c(
        "dataparallel_speedup",
        "000/001",
        "DataParallel splits each batch over the GPUs of one process",
        "Use DataParallel (no number)",
        N12,
        at_least=1.2,
        needs="gpu",
    ),
    # 14: threads vs processes
    _c(
        "spdl_imagenet_faster_pct",
        SPDL,
        "SPDL's thread pipeline iterates ImageNet faster than the DataLoader",
        "74 % faster",
        N14,
        needs="published",
        unit=" %",
        source=SPDL_SOURCE,
    ),
    _c(
        "spdl_cpu_saving_pct",
        SPDL,
        "... with less CPU",
        "38 % less CPU",
        N14,
        needs="published",
        unit=" %",
        source=SPDL_SOURCE,
    ),
    _c(
        "spdl_memory_saving_gb",
        SPDL,
        "... and less memory",
        "50 GB less memory",
        N14,
        needs="published",
        unit=" GB",
        source=SPDL_SOURCE,
    ),
    _c(
        "ft_thread_workers_disk",
        "PyTorch",
        "DataLoader thread workers with the GIL load images from disk slower "
        "than process workers; on free-threaded 3.14t about as fast",
        "about 30 % slower with the GIL, comparable on 3.14t",
        N14,
        needs="published",
        source=TORCH_THREADS_SOURCE,
    ),
    _c(
        "ft_thread_workers_memory",
        "PyTorch",
        "DataLoader thread workers use less memory than process workers (data in memory), at comparable throughput",
        "2-3x less memory",
        N14,
        needs="published",
        source=TORCH_THREADS_SOURCE,
    ),
    _c(
        "ft_single_thread_penalty_pct",
        "CPython",
        "the free-threaded build runs single-threaded code slower",
        "roughly 5-10 % on 3.14",
        N14,
        needs="published",
        unit=" %",
        source="Python 3.14 What's New, free-threaded CPython",
    ),
    # 15: diagnose
    _c(
        "diagnose_input_bound_found",
        "project",
        "diagnose calls the per-sample ImageFolder DataLoader input-bound",
        "",
        N15,
    ),
    _c(
        "diagnose_headspace_over_spdl_cache",
        "project",
        "diagnose's headspace agrees with SPDL's CacheDataLoader",
        "",
        N15,
        at_least=0.8,
        at_most=1.25,
    ),
    # 16: when the data no longer fits (streaming shards from a loopback store)
    _c(
        "stream_hf_webdataset_shard_gb",
        "Hugging Face",
        "WebDataset shards on the Hugging Face Hub are large tar files",
        "each shard is often ~1GB",
        N16,
        needs="published",
        source=HF_WDS_SOURCE,
    ),
    _c(
        "stream_wds_openimages_shards",
        "WebDataset",
        "WebDataset's sharding example streams OpenImages from object storage as large shards, mixed by a small buffer",
        "554 shards of about 1 Gbyte each, .shuffle(100)",
        N16,
        needs="published",
        source=WDS_SHARDING_SOURCE,
    ),
    _c(
        "stream_hf_shuffle_buffer_default",
        "Hugging Face",
        "`datasets` streaming shuffles the shard order and samples from a buffer",
        "buffer_size=1000 by default",
        N16,
        needs="published",
        source=HF_SHUFFLE_SOURCE,
    ),
    _c(
        "stream_ranks_exactly_once",
        "project",
        "splitting whole shards over 2 ranks reads every sample exactly once per epoch",
        "",
        N16,
    ),
    _c(
        "stream_resume_parquet_exact",
        "project",
        "the Parquet stream resumed from its saved position gives the same remaining samples",
        "",
        N16,
    ),
    _c(
        "stream_bad_shards_named",
        "project",
        "a cut, missing or unreachable shard stops every reader with its URL, or is skipped and counted",
        "",
        N16,
    ),
    _c(
        "stream_entropy_small_buffer_over_full",
        "project",
        "a one-batch buffer leaves class-sorted shards poorly "
        "mixed (class-mix entropy per batch over a full shuffle's)",
        "",
        N16,
        at_most=0.7,
    ),
    _c(
        "stream_entropy_large_buffer_over_full",
        "project",
        "a buffer of many shards mixes class-sorted shards almost like a full shuffle",
        "",
        N16,
        at_least=0.9,
    ),
    _c(
        "stream_best_over_memmap",
        "project",
        "the memmap of decoded pixels loads far faster than any stream that decodes",
        "",
        N16,
        at_most=0.5,
    ),
    _c(
        "stream_wire_efficiency",
        "project",
        "the best reader uses most of the same-region bandwidth its connections get (decoding off)",
        "",
        N16,
        at_least=0.8,
    ),
    _c(
        "stream_wire_efficiency_vs_profile",
        "project",
        "the best reader moves at least 0.8 of the same-region profile's bandwidth (rounds beside the store's ceiling)",
        "",
        N16,
        at_least=0.8,
    ),
    _c(
        "stream_shuffle_buffer_cost",
        "project",
        "the large shuffle buffer costs little throughput (img/s without it over with it)",
        "",
        N16,
        at_most=1.25,
    ),
)


@dataclass(frozen=True)
class Target:
    """A benchmark's target on a quiet machine (stricter than a notebook's busy-machine check)."""

    benchmark: str  # result name, "bench-NAME"
    figure: str  # a figure of that benchmark's JSON ("a/b": a ratio)
    at_least: float | None = None
    at_most: float | None = None
    unit: str = "x"

    def needed(self) -> str:
        """Return the target in words: ">= 3 GB/s"."""
        op, bound = (">=", self.at_least) if self.at_least is not None else ("<=", self.at_most)
        return f"{op} {bound:g}{self.unit}"

    def met(self, value: float | None) -> bool | None:
        """Return whether `value` meets the target (None when not measured)."""
        if value is None or value != value:
            return None
        return (self.at_least is None or value >= self.at_least) and (self.at_most is None or value <= self.at_most)

    def verdict(self, figures: Mapping[str, Any]) -> str:
        """Return "met", "missed", "a tie on this machine" (from a saved interval) or "not run"."""
        value = value_of(figures, self.figure)
        if value is None or value != value:
            return "not run"
        low, high = saved_interval(figures, self.figure) or (value, value)
        return decide(low, high, *_bounds(self))


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
            f"no claim named {name!r} in fastloops_helpers.book.claims.CLAIMS; add a row there "
            f"(known: {', '.join(sorted(_BY_NAME))})"
        )
    return _BY_NAME[name]


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


def _rounds(measured: Any) -> bool:
    return isinstance(measured, (list, tuple)) or getattr(measured, "ndim", 0) == 1


def _measured(claim: Claim, measured: Any) -> float | None:
    if isinstance(measured, Mapping):
        if claim.key != claim.name and claim.name in measured:
            raise ValueError(
                f"the figures hold {claim.name!r}, but claim {claim.name!r} reads {claim.key!r}: one name, one "
                f"number. Save the figure under one name, or drop the claim's figure= in book/claims.py"
            )
        return value_of(measured, claim.key)
    if measured is None:
        return None
    if _rounds(measured):
        from ..measure import median

        return median(measured)
    return float(bool(measured)) if isinstance(measured, bool) else float(measured)


def _interval(claim: Claim, measured: Any) -> tuple[float, float] | None:
    """Return the 95 % interval of the measured ratio, from per-round ratios or saved _ci figures (else None)."""
    if _rounds(measured):
        from ..measure import median_interval

        return median_interval(measured)
    return saved_interval(measured, claim.key) if isinstance(measured, Mapping) else None


def interval(name: str, measured: Any) -> tuple[float, float] | None:
    """Return the 95 % interval of claim `name`'s measured ratio, when per-round ratios or a saved one exist."""
    return _interval(get(name), measured)


def _bounds(claim: Claim | Target) -> tuple[float, float]:
    """Return the span the claim's (or target's) figure must lie within: (-inf, at_most) for "at most"."""
    lo = claim.at_least if claim.at_least is not None else float("-inf")
    return lo, claim.at_most if claim.at_most is not None else float("inf")


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
    low, high = _interval(c, measured) or (v, v)  # a single run decides by its value alone: never a tie
    return {"met": REPRODUCED, "missed": NOT_REPRODUCED}.get(decide(low, high, *_bounds(c)), TIE)


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
        got = f"measured {v:.3g}{c.unit} ({how_measured(_interval(c, measured))})"
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
    from .. import config  # lazy: claims is read by the report without torch's device logic

    return str(config.device())
