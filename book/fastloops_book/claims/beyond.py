"""The claims of notebooks 14 to 16 (papers and docs beyond the seeds): threads or processes, the input-bound
diagnosis, streaming shards.

Each row is a `Claim` (book/fastloops_book/claims/claim.py); `fastloops_book.claims.CLAIMS` joins the registries.
Explained in notebooks/13_conclusion.ipynb.
"""

from __future__ import annotations

from .claim import (
    HF_SHUFFLE_SOURCE,
    HF_WDS_SOURCE,
    N14,
    N15,
    N16,
    SPDL,
    SPDL_SOURCE,
    TORCH_THREADS_SOURCE,
    WDS_SHARDING_SOURCE,
    Claim,
)

ROWS: tuple[Claim, ...] = (
    # 14: threads vs processes
    Claim(
        "spdl_imagenet_faster_pct",
        SPDL,
        "SPDL's thread pipeline iterates ImageNet faster than the DataLoader",
        "74 % faster",
        N14,
        needs="published",
        unit=" %",
        source=SPDL_SOURCE,
    ),
    Claim(
        "spdl_cpu_saving_pct",
        SPDL,
        "... with less CPU",
        "38 % less CPU",
        N14,
        needs="published",
        unit=" %",
        source=SPDL_SOURCE,
    ),
    Claim(
        "spdl_memory_saving_gb",
        SPDL,
        "... and less memory",
        "50 GB less memory",
        N14,
        needs="published",
        unit=" GB",
        source=SPDL_SOURCE,
    ),
    Claim(
        "ft_thread_workers_disk",
        "PyTorch",
        "DataLoader thread workers with the GIL load images from disk slower "
        "than process workers; on free-threaded 3.14t about as fast",
        "about 30 % slower with the GIL, comparable on 3.14t",
        N14,
        needs="published",
        source=TORCH_THREADS_SOURCE,
    ),
    Claim(
        "ft_thread_workers_memory",
        "PyTorch",
        "DataLoader thread workers use less memory than process workers (data in memory), at comparable throughput",
        "2-3x less memory",
        N14,
        needs="published",
        source=TORCH_THREADS_SOURCE,
    ),
    Claim(
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
    Claim(
        "diagnose_input_bound_found",
        "project",
        "diagnose calls the per-sample ImageFolder DataLoader input-bound",
        "",
        N15,
    ),
    Claim(
        "diagnose_headspace_over_spdl_cache",
        "project",
        "diagnose's headspace agrees with SPDL's CacheDataLoader",
        "",
        N15,
        at_least=0.8,
        at_most=1.25,
    ),
    # 16: when the data no longer fits (streaming shards from a loopback store)
    Claim(
        "stream_hf_webdataset_shard_gb",
        "Hugging Face",
        "WebDataset shards on the Hugging Face Hub are large tar files",
        "each shard is often ~1GB",
        N16,
        needs="published",
        source=HF_WDS_SOURCE,
    ),
    Claim(
        "stream_wds_openimages_shards",
        "WebDataset",
        "WebDataset's sharding example streams OpenImages from object storage as large shards, mixed by a small buffer",
        "554 shards of about 1 Gbyte each, .shuffle(100)",
        N16,
        needs="published",
        source=WDS_SHARDING_SOURCE,
    ),
    Claim(
        "stream_hf_shuffle_buffer_default",
        "Hugging Face",
        "`datasets` streaming shuffles the shard order and samples from a buffer",
        "buffer_size=1000 by default",
        N16,
        needs="published",
        source=HF_SHUFFLE_SOURCE,
    ),
    Claim(
        "stream_ranks_exactly_once",
        "project",
        "splitting whole shards over 2 ranks reads every sample exactly once per epoch",
        "",
        N16,
    ),
    Claim(
        "stream_resume_parquet_exact",
        "project",
        "the Parquet stream resumed from its saved position gives the same remaining samples",
        "",
        N16,
    ),
    Claim(
        "stream_bad_shards_named",
        "project",
        "a cut, missing or unreachable shard stops every reader with its URL, or is skipped and counted",
        "",
        N16,
    ),
    Claim(
        "stream_entropy_small_buffer_over_full",
        "project",
        "a one-batch buffer leaves class-sorted shards poorly "
        "mixed (class-mix entropy per batch over a full shuffle's)",
        "",
        N16,
        at_most=0.7,
    ),
    Claim(
        "stream_entropy_large_buffer_over_full",
        "project",
        "a buffer of many shards mixes class-sorted shards almost like a full shuffle",
        "",
        N16,
        at_least=0.9,
    ),
    Claim(
        "stream_best_over_memmap",
        "project",
        "the memmap of decoded pixels loads far faster than any stream that decodes",
        "",
        N16,
        at_most=0.5,
    ),
    Claim(
        "stream_wire_efficiency",
        "project",
        "the best reader uses most of the same-region bandwidth its connections get (decoding off)",
        "",
        N16,
        at_least=0.8,
    ),
    Claim(
        "stream_wire_efficiency_vs_profile",
        "project",
        "the best reader moves at least 0.8 of the same-region profile's bandwidth (rounds beside the store's ceiling)",
        "",
        N16,
        at_least=0.8,
    ),
    Claim(
        "stream_shuffle_buffer_cost",
        "project",
        "the large shuffle buffer costs little throughput (img/s without it over with it)",
        "",
        N16,
        at_most=1.25,
    ),
)
