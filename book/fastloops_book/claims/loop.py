"""The claims of notebooks 00 to 06 (seeds 000/001 and 002): the tools, the slide's question, `__getitem__`,
a custom loader, shuffling, fusion, device moves.

Each row is a `Claim` (book/fastloops_book/claims/claim.py); `fastloops_book.claims.CLAIMS` joins the registries.
Explained in notebooks/13_conclusion.ipynb.
"""

from __future__ import annotations

from .claim import N00, N01, N02, N03, N04, N05, N06, Claim

ROWS: tuple[Claim, ...] = (
    # 00: the tools the later checks rely on (no seed figure)
    Claim(
        "timer_sleep_ratio",
        "project",
        "the timer is honest: a 50 ms sleep measures as 50 ms",
        "",
        N00,
        at_least=0.9,
        at_most=4.0,
    ),
    Claim(
        "cache_over_ram_copy",
        "project",
        "copying from cache is at least about as fast as from RAM",
        "",
        N00,
        figure="copy_gb_per_s_cache/copy_gb_per_s_ram",
        at_least=0.8,
    ),
    # 01: the slide's opening question
    Claim(
        "dataloader_nw0_over_numpy",
        "000/001",
        "the numpy loop beats the per-sample DataLoader (no workers)",
        "the slide's opening question",
        N01,
        at_least=10,
    ),
    Claim(
        "dataloader_workers_over_numpy",
        "000/001",
        "the numpy loop beats the DataLoader with workers",
        "the slide's opening question",
        N01,
        at_least=10,
    ),
    Claim(
        "dataloader_nw0_over_helpers",
        "000/001",
        "a batched loader beats the per-sample DataLoader",
        "the slide's opening question",
        N01,
        at_least=10,
    ),
    Claim(
        "helpers_over_numpy",
        "project",
        "the helpers' loader is as fast as the numpy loop (epoch time ratio)",
        "numpy is the slide's fastest loop",
        N01,
        at_most=1.0,
    ),
    # 02: __getitem__ cost
    Claim(
        "slide_100_speedup",
        "000/001",
        "one batched fetch of 100 items beats 100 single fetches stacked",
        "122 µs vs 3.42 µs (36x)",
        N02,
        at_least=5,
    ),
    Claim(
        "getitems_collate_speedup",
        "000/001",
        "`__getitems__` with a pass-through collate beats the per-sample DataLoader",
        "",
        N02,
        at_least=3,
    ),
    # 03: a custom loader
    Claim(
        "index_only_custom_over_dataloader",
        "000/001",
        "a custom loader beats DataLoader on the index-only task",
        "",
        N03,
        figure="index_only_DataLoader_ms/index_only_slide_FastDataloader_ms",
        at_least=10,
    ),
    Claim(
        "index_only_batchloader_over_dataloader",
        "000/001",
        "BatchLoader beats DataLoader on the index-only task",
        "",
        N03,
        figure="index_only_DataLoader_ms/index_only_BatchLoader_ms",
        at_least=10,
    ),
    Claim(
        "matrix_batchloader_over_dataloader",
        "000/001",
        "BatchLoader beats DataLoader on the float matrix",
        "",
        N03,
        figure="93_DataLoader_ms/93_BatchLoader_ms",
        at_least=3,
    ),
    Claim(
        "matrix_batchloader_over_slide_loader",
        "project",
        "BatchLoader beats the slide's loader on the matrix",
        "",
        N03,
        figure="93_slide_FastDataloader_ms/93_BatchLoader_ms",
        at_least=1.0,
    ),
    # 04: shuffling
    Claim(
        "slide_grouped_speedup_headline",
        "000/001",
        "the slide's grouped permutation, as written, is much cheaper than a full one for a big index",
        "plot p4/p5 (no number)",
        N04,
        at_least=2,
    ),
    Claim(
        "grouped_speedup_headline",
        "project",
        "the helpers' grouped permutation (a few inner shuffles shared by the groups) is much cheaper than a full one",
        "",
        N04,
        at_least=2,
    ),
    Claim(
        "grouped_entropy_largest_over_full", "project", "class-sized groups ruin the class mix", "", N04, at_most=0.5
    ),
    Claim(
        "quasi_random_entropy_min_over_full",
        "project",
        "FFCV's quasi-random order keeps the class mix",
        "",
        N04,
        at_least=0.9,
    ),
    Claim(
        "quasi_random_replica_matches_ffcv",
        "project",
        "the replica of QUASI_RANDOM mixes classes as FFCV's own Loader does at a batch of 2, where 4 pages are "
        "open and a full shuffle mixes more (class-mix entropy, FFCV over replica)",
        "",
        N04,
        figure="quasi_ffcv_entropy_bits_small_batch/quasi_replica_entropy_bits_small_batch",
        at_least=0.97,
        at_most=1.03,
    ),
    # 05: fusion
    Claim(
        "fusion_speedup_largest",
        "000/001",
        "fusing a pointwise chain saves time when the data is larger than cache",
        "plot p6 (no number)",
        N05,
        at_least=1.5,
    ),
    # 06: moving nested data
    Claim(
        "move_to_over_fastest",
        "000/001",
        "the helpers' move_to is as fast as the slide's ways to move nested data",
        "",
        N06,
        at_most=1.5,
    ),
    Claim(
        "jax_device_put_moves_all",
        "000/001",
        "`jax.device_put` puts any nested structure on a device",
        "jax.device_put (no number)",
        N06,
    ),
    Claim(
        "pinned_copy_speedup",
        "002",
        "pinned host memory copies to the GPU faster than pageable memory",
        "pin_memory=True (no number)",
        N06,
        at_least=1.2,
        needs="gpu",
    ),
)
