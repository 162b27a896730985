"""A chain of pointwise ops, eager vs torch.compile (inductor), and the memory traffic that predicts the gain.

Explained in notebooks/05_fusion.ipynb.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from .. import config, measure
from . import BenchResult

# Eager: every op reads its inputs from memory and writes its output back. sin(x): 1 read + 1 write,
# cos(x): 1 + 1, a * b: 2 + 1, sigmoid(x): 1 + 1, d * x: 2 + 1, c + e: 2 + 1  -> 15 tensor-sized passes.
# Fused into one kernel: read x once, write the result once -> 2 passes.
EAGER_PASSES = 15
FUSED_PASSES = 2


def chain(x: torch.Tensor) -> torch.Tensor:
    """Return sin(x) * cos(x) + sigmoid(x) * x: six pointwise ops, the slide's kind.

    Explained in notebooks/05_fusion.ipynb.
    """
    return x.sin() * x.cos() + torch.sigmoid(x) * x


def compile_chain(fn: Callable = chain, dynamic: bool = True) -> Callable:
    """Return `fn` compiled by inductor; nothing is compiled until the first call.

    Explained in notebooks/05_fusion.ipynb.
    """
    # dynamic=True: one compiled kernel for every length; False specialises (and recompiles) per length
    return torch.compile(fn, dynamic=dynamic)


def traffic_bytes(n: int, element_bytes: int = 4) -> dict[str, int]:
    """Return the bytes moved through memory by the eager chain and by a single fused kernel, for `n` elements.

    Explained in notebooks/05_fusion.ipynb.
    """
    return {"eager": EAGER_PASSES * n * element_bytes, "fused": FUSED_PASSES * n * element_bytes}


def first_call(
    compiled: Callable,
    eager: Callable = chain,
    n: int = 4096,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> tuple[Callable | None, float, str]:
    """Call `compiled` once (tracing, code generation, the C++ compiler) and check it against `eager`.

    Return (compiled or None when it fails or disagrees, seconds of that first call, a note): a one-off cost,
    timed on its own. Explained in notebooks/05_fusion.ipynb.
    """
    x = torch.randn(n, device=device, dtype=dtype)
    try:
        with measure.Timer(device) as timer:
            out = compiled(x)
    except Exception as exc:  # missing compiler or headers surface as many exception types
        return None, float("nan"), f"torch.compile unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    if x.device.type != "meta" and not torch.allclose(out, eager(x), atol=1e-5):  # meta tensors hold no values
        return None, timer.seconds, "torch.compile gave different values: using eager only"
    return compiled, timer.seconds, f"inductor on {torch.device(device).type}"


def per_call(
    fns: dict[str, Callable[[torch.Tensor], Any]],
    n: int,
    repeat: int,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    warmup: int = 1,
) -> dict[str, list[float]]:
    """Return {name: seconds per call, per round} of each `fn(x)` on `n` elements of `dtype`, interleaved."""
    x = torch.randn(n, device=device, dtype=dtype)
    inner = max(1, 2**18 // n)  # small tensors: many calls per round so the clock can see them
    return measure.per_call(
        {k: partial(f, x) for k, f in fns.items()}, number=inner, repeat=repeat, warmup=warmup, device=device
    )


def sweep(
    sizes: list[int],
    eager: Callable,
    compiled: Callable | None,
    repeat: int,
    bandwidth_gb_s: float | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> list[dict[str, Any]]:
    """Time `eager` (and `compiled`) per size, interleaved; one row per size.

    `speedup` is the median over rounds of eager/compiled. With `bandwidth_gb_s`, each row also gets the
    bandwidth-bound floors of the eager and the fused chain. Explained in notebooks/05_fusion.ipynb.
    """
    element_bytes = torch.empty(0, dtype=dtype).element_size()
    rows = []
    for n in measure.progress(sizes, desc="sizes"):
        fns = {"eager": eager} | ({"compiled": compiled} if compiled is not None else {})
        seconds = per_call(fns, n, repeat, device, dtype)
        row = {"n": n, "mib": n * element_bytes / 2**20, "eager_s": measure.median(seconds["eager"])}
        if bandwidth_gb_s is not None:
            moved = traffic_bytes(n, element_bytes)
            row |= {
                "eager_floor_s": moved["eager"] / (bandwidth_gb_s * 1e9),
                "fused_floor_s": moved["fused"] / (bandwidth_gb_s * 1e9),
            }
        if compiled is not None:
            row["compiled_s"] = measure.median(seconds["compiled"])
            row["speedup"] = measure.ratio(seconds, "eager", "compiled")
        rows.append(row)
    return rows


def figures(rows: list[dict[str, Any]], compile_s: float, device: torch.device | str = "cpu") -> dict[str, float]:
    """Return the figures the notebook and the benchmark report: compile time, speed-ups and times at both ends.

    Measured on a device other than the CPU, every name ends with its type (`fusion_speedup_largest_cuda`):
    a GPU's speed-up is another figure than the CPU's, which the claims registry reads.
    """
    suffix = "" if torch.device(device).type == "cpu" else f"_{torch.device(device).type}"
    found = {"compile_s": compile_s}
    if rows:  # the medians behind the speed-ups (which are medians of per-round ratios, from the same rounds)
        found |= {"fusion_eager_largest_s": rows[-1]["eager_s"], "fusion_eager_smallest_s": rows[0]["eager_s"]}
    if rows and "speedup" in rows[0]:
        found |= {
            "fusion_speedup_largest": float(rows[-1]["speedup"]),
            "fusion_speedup_smallest": float(rows[0]["speedup"]),
            "fusion_compiled_largest_s": rows[-1]["compiled_s"],
            "fusion_compiled_smallest_s": rows[0]["compiled_s"],
        }
    return {key + suffix: value for key, value in found.items()}


def run(scale: str) -> BenchResult:
    """Compile the chain once (dynamic shapes), then time eager against compiled at the scale's sizes.

    Both run on `config.device()`: a GPU machine measures its GPU (figures named with `_cuda`).
    """
    sizes, repeat, device = list(config.size("fusion.sizes", scale)), config.size("repeat", scale), config.device()
    compiled, compile_s, note = first_call(compile_chain(chain, dynamic=True), chain, device=device)
    rows = sweep(sizes, chain, compiled, repeat, device=device)
    knobs = {
        "sizes": sizes,
        "dynamic": True,
        "dtype": "float32",
        "device": str(device),
        "compiled": compiled is not None,
        "note": note,
    }
    return BenchResult(rows, figures(rows, compile_s, device), knobs=knobs, repeats=repeat)
