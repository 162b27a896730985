"""Turn a diagnosed loop's figures into a verdict and knobs ranked by the gain each is expected to bring.

Every rule reads measured figures (`Figures`), states its threshold as a constant below, predicts the gain with
one line of arithmetic, and names the notebook that explains the knob. Explained in
notebooks/15_is_my_loop_input_bound.ipynb.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

INPUT_BOUND_WAIT = 0.5  # the loop waits for data at least half of the wall time: loading sets the pace
INPUT_BOUND_HEADSPACE = 2.0  # or free loading would at least double the throughput
COMPUTE_BOUND_WAIT = 0.1  # compute-bound needs waits under a tenth of the wall time ...
COMPUTE_BOUND_HEADSPACE = 1.25  # ... and free loading to gain under 25 %; anything between is "balanced"
IN_MEMORY_SAMPLE_S = 50e-6  # a per-sample fetch under 50 us does no decoding: the data is already in memory
DECODE_SAMPLE_S = 1e-3  # a per-sample fetch over 1 ms decodes or reads a file: precompute it once
FIRST_BATCH_FACTOR = 3.0  # a first batch slower than 3 steady batches is a start-up (worker spawn) cost
BATCHED_SPEEDUP = 10.0  # assumed loading speed-up of a batched fetch or a memmap (notebooks 02, 09 measure it)
MIN_GAIN = 1.02  # a knob expected to gain under 2 % is not worth listing


@dataclass
class Figures:
    """What the rules read: per-batch seconds and the loader's knobs (None where unknown)."""

    batch_s: float  # mean seconds per batch of the live loop (1 / batches per second)
    step_s: float  # seconds per batch of the step alone over cached batches (the replay)
    wait_share: float
    headspace: float
    batch_size: float  # mean samples per batch
    first_batch_s: float
    p50_s: float
    epoch_start_s: float = 0.0  # median first-batch wait over the epochs seen (restarts included)
    load_s: float | None = None  # seconds one worker (or the main thread) spends fetching + collating a batch
    fetch_per_sample_s: float | None = None
    is_dataloader: bool = False
    num_workers: int | None = None
    persistent_workers: bool | None = None
    has_getitems: bool | None = None
    epoch_batches: int | None = None
    cores: int = 1
    cuda_step: bool = False  # the step ran CUDA work
    pageable: bool = False  # and the batches arrived in pageable (not pinned) host memory
    transfer_s: float | None = None  # seconds to copy one batch from pageable memory to the GPU


@dataclass
class Recommendation:
    """One knob to turn: what, the measured figure behind it, the expected throughput gain, where it is explained."""

    knob: str
    because: str
    gain: float
    notebook: str  # the notebooks that explain it, by number (notebooks/NN_*.ipynb)
    details: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"{self.knob} (~{self.gain:.2g}x, notebook {self.notebook}): {self.because}"


def verdict(wait_share: float, headspace: float) -> str:
    """Return "input-bound", "balanced" or "compute-bound" from the wait share and the headspace.

    Explained in notebooks/15_is_my_loop_input_bound.ipynb.
    """
    if wait_share >= INPUT_BOUND_WAIT or headspace >= INPUT_BOUND_HEADSPACE:
        return "input-bound"
    if wait_share < COMPUTE_BOUND_WAIT and headspace < COMPUTE_BOUND_HEADSPACE:
        return "compute-bound"
    return "balanced"


def recommend(f: Figures) -> list[Recommendation]:
    """Return the knobs that apply to `f`, ranked by expected gain (largest first).

    Explained in notebooks/15_is_my_loop_input_bound.ipynb.
    """
    rules = (_more_workers, _batched_fetch, _precompute, _thread_prefetch, _persistent_workers, _pinned_copy)
    found = [r for rule in rules if (r := rule(f)) is not None and r.gain >= MIN_GAIN]
    if not found and verdict(f.wait_share, f.headspace) == "compute-bound":
        found.append(
            Recommendation(
                "speed up the step (the loader keeps up)",
                f"the loop waits {f.wait_share:.0%} of the time; free loading would gain {f.headspace:.2f}x",
                1.0,
                "05",
            )
        )
    return sorted(found, key=lambda r: -r.gain)


def _loading_matters(f: Figures) -> bool:
    return f.wait_share >= COMPUTE_BOUND_WAIT or f.headspace >= COMPUTE_BOUND_HEADSPACE


def _capped(f: Figures, predicted_batch_s: float) -> float:
    """Return the gain of going from the live batch time to `predicted_batch_s`, at most the headspace."""
    return min(f.headspace, f.batch_s / max(predicted_batch_s, 1e-12))


def _more_workers(f: Figures) -> Recommendation | None:
    if not (f.is_dataloader and f.num_workers is not None and f.num_workers < f.cores and _loading_matters(f)):
        return None
    load = f.load_s if f.load_s is not None else f.batch_s - f.step_s
    predicted = max(f.step_s, load / f.cores)  # c workers load c batches at once, the step stays the floor
    return Recommendation(
        f"num_workers={f.cores} (now {f.num_workers})",
        f"waiting {f.wait_share:.0%} of the time; a batch takes {load * 1e3:.3g} ms to load "
        f"and {f.step_s * 1e3:.3g} ms to step, and {f.cores} cores can load {f.cores} at once",
        _capped(f, predicted),
        "07",
        {"load_s": load, "predicted_batch_s": predicted},
    )


def _batched_fetch(f: Figures) -> Recommendation | None:
    per = f.fetch_per_sample_s
    if not (
        f.is_dataloader and not f.has_getitems and per is not None and per < IN_MEMORY_SAMPLE_S and _loading_matters(f)
    ):
        return None
    predicted = f.step_s + (f.batch_s - f.step_s) / BATCHED_SPEEDUP  # the exposed loading, batched
    return Recommendation(
        "fetch whole batches: `__getitems__` or BatchLoader",
        f"each sample is fetched by its own `__getitem__` call ({per * 1e6:.3g} us, no decoding: "
        f"in-memory data), {f.batch_size:.0f} calls per batch",
        _capped(f, predicted),
        "02, 03",
        {"predicted_batch_s": predicted},
    )


def _precompute(f: Figures) -> Recommendation | None:
    per = f.fetch_per_sample_s
    if per is None or per < DECODE_SAMPLE_S or not _loading_matters(f):
        return None
    predicted = f.step_s + (f.batch_s - f.step_s) / BATCHED_SPEEDUP  # the exposed loading, decoded once
    return Recommendation(
        "decode once into a memmap (or decode in threads)",
        f"each sample takes {per * 1e3:.3g} ms to fetch (decoding), {per * f.batch_size * 1e3:.3g} ms per batch",
        _capped(f, predicted),
        "09, 14",
        {"predicted_batch_s": predicted},
    )


def _thread_prefetch(f: Figures) -> Recommendation | None:
    if f.is_dataloader or not _loading_matters(f):
        return None
    load = f.batch_s - f.step_s
    predicted = max(f.step_s, load)  # a background thread overlaps loading with the step
    return Recommendation(
        "load ahead in a background thread: ThreadPrefetcher(loader)",
        f"the loader runs in the loop's thread: {load * 1e3:.3g} ms per batch before each {f.step_s * 1e3:.3g} ms step",
        _capped(f, predicted),
        "07",
        {"predicted_batch_s": predicted},
    )


def _persistent_workers(f: Figures) -> Recommendation | None:
    if not (f.is_dataloader and f.num_workers and not f.persistent_workers and f.epoch_batches):
        return None
    start = max(f.first_batch_s, f.epoch_start_s)
    if start < FIRST_BATCH_FACTOR * f.p50_s:
        return None
    epoch = start + (f.epoch_batches - 1) * f.p50_s
    saved = start - f.p50_s  # start-up every epoch, gone after the first with persistent workers
    return Recommendation(
        "persistent_workers=True",
        f"an epoch's first batch takes {start:.3g} s, {start / f.p50_s:.0f}x a steady "
        f"batch, and every epoch of {f.epoch_batches} batches pays it again",
        epoch / (epoch - saved),
        "07",
        {"epoch_s": epoch},
    )


def _pinned_copy(f: Figures) -> Recommendation | None:
    if not (f.cuda_step and f.pageable and f.transfer_s):
        return None
    # the copy overlaps the step on a side stream: the batch keeps the rest, but never less than the copy itself
    predicted = max(f.batch_s - f.transfer_s, f.transfer_s, 1e-9)
    return Recommendation(
        "pin_memory=True and CUDAPrefetcher (copy the next batch during this step)",
        f"batches arrive in pageable memory; copying one to the GPU takes "
        f"{f.transfer_s * 1e3:.3g} ms of each {f.batch_s * 1e3:.3g} ms batch",
        f.batch_s / predicted,
        "06, 07",
        {"predicted_batch_s": predicted},
    )
