"""Read and decode: storage against the seed's ladder, decoders side by side, what a copy costs, GPU-only steps.

Explained in notebooks/08_read_and_decode.ipynb.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .. import measure
from ..data import decoders, storage

RATE = "read rate (MB/s)"
SOURCES = {"measured here": "#c44e52", "typical (datasheets)": "#8c8c8c"}


def storage_table(cached: float, cold: float, method: str) -> pd.DataFrame:
    """Return the seed's storage ladder with this machine's two measured rows, fastest first."""
    measured = [("this machine: page cache", cached), (f"this machine: cold ({method.split(',')[0]})", cold)]
    rows = [{"storage": s, RATE: v, "source": "measured here"} for s, v in measured]
    rows += [{"storage": s, RATE: v, "source": "typical (datasheets)"} for s, v in storage.LADDER]
    return pd.DataFrame(rows).sort_values(RATE, ascending=False).reset_index(drop=True)


def storage_figure(table: pd.DataFrame) -> Figure:
    """Draw the ladder as bars on a log axis, measured rows in their own colour."""
    fig, ax = plt.subplots(figsize=(7, 0.42 * len(table) + 1.3))
    ax.barh(table.storage, table[RATE], color=[SOURCES[s] for s in table.source])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("sequential read (MB/s, log scale)")
    ax.set_title("Sequential read: measured here vs the seed's ladder")
    ax.legend(handles=[Patch(color=c, label=s) for s, c in SOURCES.items()], loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def decoder_figure(rates: pd.DataFrame, baseline: str = "Pillow") -> Figure:
    """Draw images/s per decoder, one panel per image size, each bar labelled with its ratio to `baseline`."""
    sizes = list(rates.columns)
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 0.45 * len(rates) + 1.4))
    for ax, px in zip(np.atleast_1d(axes), sizes):
        col = rates[px].sort_values()
        ax.barh(col.index, col.values, color="#4c72b0")
        for y, v in enumerate(col.values):
            ax.annotate(
                f"{v / rates.loc[baseline, px]:.2f}x",
                (v, y),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
        ax.set_xlabel("images per second (best pass)")
        ax.set_title(f"{px} x {px} px")
        ax.margins(x=0.2)
    fig.suptitle(f"JPEG decoding on one core (ratio to {baseline})")
    fig.tight_layout()
    return fig


def decode_scaling(decode: decoders.Decoder, sizes_px: tuple[int, ...], count: int, quality: int = 90) -> pd.DataFrame:
    """Return per size: pixels, compressed kB per image and seconds per decoded image (best pass)."""
    rows = []
    for px in sizes_px:
        blobs = decoders.encode_jpegs(count, px, quality)
        rows.append(
            {
                "px": px,
                "pixels": px * px,
                "kb_per_image": np.mean([len(b) for b in blobs]) / 1e3,
                "s_per_image": 1 / decoders.images_per_second(decode, blobs, contender=("decode", px)),
            }
        )
    return pd.DataFrame(rows)


def fixed_and_per_pixel(scaling: pd.DataFrame) -> tuple[float, float]:
    """Fit seconds per image = fixed + per_pixel x pixels (least squares); return (fixed, per_pixel)."""
    per_pixel, fixed = np.polyfit(scaling.pixels, scaling.s_per_image, 1)
    return float(fixed), float(per_pixel)


def copy_parts(nbytes: int, repeat: int = 7) -> dict[str, float]:
    """Time what `torch.tensor(a)` of an `nbytes` array does, in parts (seconds, one torch thread).

    `torch_tensor`: the conversion; `copy_into_existing`: the same bytes into memory touched before;
    `first_touch_torch`: fresh torch memory written once (page faults); `numpy_array`: `np.array(a)`,
    whose large allocations numpy backs with transparent huge pages when the kernel allows it.
    """
    a = np.ones(nbytes // 4, np.float32)
    dst = torch.empty(len(a))

    def torch_tensor() -> torch.Tensor:  # the conversion: fresh memory, then the copy
        return torch.tensor(a)

    def copy_into_existing() -> torch.Tensor:  # the copy alone, into memory written before
        return dst.copy_(torch.from_numpy(a))

    def first_touch_torch() -> torch.Tensor:  # fresh memory alone, written once: a page fault per page
        return torch.empty(len(a)).fill_(0)

    def numpy_array() -> np.ndarray:  # numpy's copy, into huge pages where the kernel allows them
        return np.array(a)

    with measure.torch_threads(1):  # one thread, as notebook 00's copy rate; more wait on each other when busy
        parts = [torch_tensor, copy_into_existing, first_touch_torch, numpy_array]
        s = measure.interleaved({f.__name__: f for f in parts}, repeat=repeat, warmup=1)
    return {name: measure.median(v) for name, v in s.items()}


def transparent_hugepages() -> str:
    """Return the kernel's transparent huge page mode ("always", "madvise", "never"), or "unknown"."""
    path = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not path.exists():
        return "unknown"
    text = path.read_text()
    return text[text.index("[") + 1 : text.index("]")] if "[" in text else text.strip()


def gpu_copy_rows(nbytes: int, repeat: int = 10) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Time a pinned host-to-GPU copy on a side stream with torch and with PyCUDA; return (rows, {way: why skipped}).

    Needs a CUDA GPU; PyCUDA also needs `pip install pycuda` (built against the CUDA toolkit: nvcc, headers).
    Explained in notebooks/08_read_and_decode.ipynb.
    """
    if not torch.cuda.is_available():
        return [], {"torch stream copy": "no CUDA GPU", "PyCUDA memcpy_htod_async": "no CUDA GPU"}
    ways, skipped = {"torch stream copy": _torch_copy(nbytes)}, {}
    try:
        ways["PyCUDA memcpy_htod_async"] = _pycuda_copy(nbytes)
    except ImportError as exc:
        skipped["PyCUDA memcpy_htod_async"] = f"{exc} (pip install pycuda: it builds against the CUDA toolkit)"
    rows = []
    for name, fn in ways.items():
        t = measure.median(measure.measure(fn, repeat=repeat, warmup=2, contender=name))
        rows.append({"way": name, "mb": nbytes / 2**20, "ms": t * 1e3, "gb_per_s": nbytes / t / 1e9})
    return rows, skipped


def _torch_copy(nbytes: int) -> Any:
    host = torch.empty(nbytes // 4, pin_memory=True)
    device = torch.empty(nbytes // 4, device="cuda")
    stream = torch.cuda.Stream()

    def copy() -> None:
        with torch.cuda.stream(stream):
            device.copy_(host, non_blocking=True)  # returns at once; the DMA runs on `stream`
        stream.synchronize()

    return copy


def _pycuda_copy(nbytes: int) -> Any:
    import pycuda.driver as cuda

    cuda.init()
    context = cuda.Device(torch.cuda.current_device()).retain_primary_context()  # torch's context, not a new one
    context.push()
    host = cuda.pagelocked_empty(nbytes // 4, np.float32)  # pinned, as the DMA engine needs
    device = cuda.mem_alloc(host.nbytes)
    stream = cuda.Stream()

    def copy() -> None:
        cuda.memcpy_htod_async(device, host, stream)  # the seed's call: returns at once
        stream.synchronize()

    def copy_in_context() -> None:
        context.push()
        copy()
        context.pop()

    context.pop()
    return copy_in_context


def tensorrt_rows(model: torch.nn.Module, x: torch.Tensor, repeat: int = 20) -> tuple[list[dict[str, Any]], str]:
    """Compile `model` with torch_tensorrt (FP16) and time it against eager on the GPU; return (rows, why not).

    Needs an NVIDIA GPU and `pip install torch-tensorrt` matching the installed torch (it brings TensorRT).
    Explained in notebooks/08_read_and_decode.ipynb.
    """
    if not torch.cuda.is_available():
        return [], "needs an NVIDIA GPU"
    try:
        import torch_tensorrt
    except ImportError:
        return [], "torch_tensorrt is not installed (pip install torch-tensorrt matching this torch)"
    model, x = model.cuda().eval(), x.cuda()
    with measure.Timer("cuda") as build:
        engine = torch_tensorrt.compile(model, ir="dynamo", inputs=[x], enabled_precisions={torch.half})
    rows = [{"way": "TensorRT build (once)", "ms": build.seconds * 1e3}]
    with torch.inference_mode():
        for name, fn in {"eager (GPU)": lambda: model(x), "TensorRT engine, FP16": lambda: engine(x)}.items():
            seconds = measure.measure(fn, repeat=repeat, device="cuda", contender=name)
            rows.append({"way": name, "ms": measure.median(seconds) * 1e3})
    return rows, ""
