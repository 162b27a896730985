"""A chain of pointwise ops, eager vs torch.compile (inductor), and the memory traffic that predicts the gain.

Explained in notebooks/05_fusion.ipynb.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .. import measure

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


def traffic_bytes(n: int, element_bytes: int = 4) -> dict[str, int]:
    """Return the bytes moved through memory by the eager chain and by a single fused kernel, for `n` elements.

    Explained in notebooks/05_fusion.ipynb.
    """
    return {"eager": EAGER_PASSES * n * element_bytes, "fused": FUSED_PASSES * n * element_bytes}


def compile_chain(device: torch.device | str = "cpu", n: int = 4096) -> tuple[Callable | None, float, str]:
    """Compile `chain` once for any 1-D length (dynamic shapes); return (fn or None, compile seconds, note).

    Explained in notebooks/05_fusion.ipynb.
    """
    fn = torch.compile(chain, dynamic=True)  # one compile for every size: static shapes recompile per size
    x = torch.randn(n, device=device)
    start = time.perf_counter()
    try:
        ok = torch.allclose(fn(x), chain(x), atol=1e-5)
        measure.sync(device)
    except Exception as exc:  # missing compiler or headers surface as many exception types
        return None, float("nan"), f"torch.compile unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    seconds = time.perf_counter() - start
    if not ok:
        return None, seconds, "torch.compile gave different values: using eager only"
    return fn, seconds, f"inductor on {torch.device(device).type}"


def time_per_call(fn: Callable[[torch.Tensor], Any], n: int, device: torch.device | str = "cpu",
                  repeat: int | None = None) -> float:
    """Return the median seconds of one call of `fn` on `n` float32 elements (many calls per sample when small)."""
    x = torch.randn(n, device=device)
    inner = max(1, 2**18 // n)  # small tensors: time many calls per sample so the clock can see them
    samples = measure.measure(lambda: [fn(x) for _ in range(inner)], repeat=repeat, device=device)
    return float(np.median(samples)) / inner


def sweep(sizes: list[int], compiled: Callable | None, bandwidth_gb_s: float,
          device: torch.device | str = "cpu", repeat: int | None = None) -> list[dict[str, Any]]:
    """Time eager (and compiled) `chain` per size; add the bandwidth-bound predictions. One row per size.

    Explained in notebooks/05_fusion.ipynb.
    """
    rows = []
    for n in measure.progress(sizes, desc="sizes"):
        moved = traffic_bytes(n)
        row = {"n": n, "mib": n * 4 / 2**20, "eager_s": time_per_call(chain, n, device, repeat),
               "eager_floor_s": moved["eager"] / (bandwidth_gb_s * 1e9),
               "fused_floor_s": moved["fused"] / (bandwidth_gb_s * 1e9)}
        if compiled is not None:
            row["compiled_s"] = time_per_call(compiled, n, device, repeat)
            row["speedup"] = row["eager_s"] / row["compiled_s"]
        rows.append(row)
    return rows
