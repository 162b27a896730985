"""A chain of pointwise ops, eager vs torch.compile (inductor), and the memory traffic that predicts the gain.

Explained in notebooks/05_fusion.ipynb.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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

    The first call (tracing, code generation, the C++ compiler) is timed on its own: a one-off cost.
    Explained in notebooks/05_fusion.ipynb.
    """
    fn = torch.compile(chain, dynamic=True)  # one compile for every size: static shapes recompile per size
    x = torch.randn(n, device=device)
    try:
        with measure.Timer(device) as first_call:
            ok = torch.allclose(fn(x), chain(x), atol=1e-5)
    except Exception as exc:  # missing compiler or headers surface as many exception types
        return None, float("nan"), f"torch.compile unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    if not ok:
        return None, first_call.seconds, "torch.compile gave different values: using eager only"
    return fn, first_call.seconds, f"inductor on {torch.device(device).type}"


def per_call(fns: dict[str, Callable[[torch.Tensor], Any]], n: int, device: torch.device | str = "cpu",
             repeat: int | None = None) -> dict[str, list[float]]:
    """Return {name: seconds per call, per round} of each `fn(x)` on `n` float32 elements, interleaved."""
    x = torch.randn(n, device=device)
    inner = max(1, 2**18 // n)  # small tensors: many calls per round so the clock can see them
    return measure.per_call({k: (lambda f=f: f(x)) for k, f in fns.items()}, number=inner, repeat=repeat,
                            device=device)


def sweep(sizes: list[int], compiled: Callable | None, bandwidth_gb_s: float,
          device: torch.device | str = "cpu", repeat: int | None = None) -> list[dict[str, Any]]:
    """Time eager (and compiled) `chain` per size, interleaved; add the bandwidth-bound floors. One row per size.

    `speedup` is the median over rounds of eager/compiled. Explained in notebooks/05_fusion.ipynb.
    """
    rows = []
    for n in measure.progress(sizes, desc="sizes"):
        moved = traffic_bytes(n)
        fns = {"eager": chain} | ({"compiled": compiled} if compiled is not None else {})
        seconds = per_call(fns, n, device, repeat)
        row = {"n": n, "mib": n * 4 / 2**20, "eager_s": measure.median(seconds["eager"]),
               "eager_floor_s": moved["eager"] / (bandwidth_gb_s * 1e9),
               "fused_floor_s": moved["fused"] / (bandwidth_gb_s * 1e9)}
        if compiled is not None:
            row["compiled_s"] = measure.median(seconds["compiled"])
            row["speedup"] = measure.ratio(seconds, "eager", "compiled")
        rows.append(row)
    return rows
