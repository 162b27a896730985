"""JPEG decoders that may be installed (Pillow, simplejpeg, PyTurboJPEG, jpeg4py, OpenCV, torchvision), behind one call.

Each decoder takes the bytes of a JPEG file and returns an RGB uint8 array of shape (H, W, 3). Each factory
(`_pillow`, ...) returns a named function, not a lambda, so that notebook 08's liveness check slows what it times.
`batch_decoder` decodes a whole list where the step runs: nvJPEG on a CUDA device, Pillow standing in on a CPU.
Explained in notebooks/08_read_and_decode.ipynb.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .. import measure

Decoder = Callable[[bytes], np.ndarray]
BatchDecoder = Callable[[Sequence[torch.Tensor]], list[torch.Tensor]]  # files' bytes -> (3, H, W) uint8 images


def _pillow() -> Decoder:
    from PIL import Image

    def decode(data: bytes) -> np.ndarray:
        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))

    return decode


def _simplejpeg() -> Decoder:
    import simplejpeg

    def decode(data: bytes) -> np.ndarray:
        return simplejpeg.decode_jpeg(data, colorspace="RGB")

    return decode


def _turbojpeg() -> Decoder:
    from turbojpeg import TJPF_RGB, TurboJPEG

    jpeg = TurboJPEG()  # raises if the system libturbojpeg is missing or too old for this wrapper

    def decode(data: bytes) -> np.ndarray:
        return jpeg.decode(data, pixel_format=TJPF_RGB)

    return decode


def _jpeg4py() -> Decoder:
    import jpeg4py

    if not _jpeg4py_works(jpeg4py):
        raise RuntimeError("jpeg4py cannot load libturbojpeg (apt install libturbojpeg0)")

    def decode(data: bytes) -> np.ndarray:
        return jpeg4py.JPEG(np.frombuffer(data, np.uint8)).decode()

    return decode


def _jpeg4py_works(jpeg4py: Any) -> bool:
    tiny = encode_jpegs(1, 8)[0]
    return jpeg4py.JPEG(np.frombuffer(tiny, np.uint8)).decode().shape == (8, 8, 3)


def _opencv() -> Decoder:
    import cv2

    cv2.setNumThreads(1)  # one image per call: compare single-threaded decoders

    def decode(data: bytes) -> np.ndarray:
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)  # None only for bytes that are not an image
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)  # type: ignore[arg-type]

    return decode


def _torchvision() -> Decoder:
    import torch
    from torchvision.io import decode_jpeg

    def decode(data: bytes) -> np.ndarray:
        return decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8)).permute(1, 2, 0).numpy()

    return decode


def batch_decoder(device: str | torch.device = "cpu") -> BatchDecoder:
    """Return a function that decodes a list of JPEG files' bytes (1-D uint8 CPU tensors) into RGB (3, H, W) uint8
    tensors on `device`.

    On a CUDA device: torchvision's `decode_jpeg` on the whole list, one batched call into nvJPEG (its successor
    is torchcodec). On a CPU: Pillow, image by image, the stand-in with the same contract.
    """
    device = torch.device(device)
    if device.type == "cpu":
        pillow = _pillow()

        def decode_on_cpu(blobs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
            return [torch.from_numpy(np.array(pillow(b.numpy().tobytes()))).permute(2, 0, 1) for b in blobs]

        return decode_on_cpu
    try:
        from torchvision.io import ImageReadMode, decode_jpeg
    except Exception as exc:  # missing, or a wheel built for another torch
        raise RuntimeError(f"decoding on {device} needs torchvision built for this torch (nvJPEG): {exc}") from exc

    def decode_on_gpu(blobs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return decode_jpeg(list(blobs), mode=ImageReadMode.RGB, device=device)

    return decode_on_gpu


CANDIDATES = {
    "Pillow": _pillow,
    "simplejpeg": _simplejpeg,
    "PyTurboJPEG": _turbojpeg,
    "jpeg4py": _jpeg4py,
    "OpenCV": _opencv,
    "torchvision": _torchvision,
}


def find_decoders() -> tuple[dict[str, Decoder], dict[str, str]]:
    """Return ({name: decoder} for those that work here, {name: why not} for the others)."""
    found, missing = {}, {}
    for name, make in CANDIDATES.items():
        try:
            found[name] = make()
        except Exception as exc:  # ImportError, or a wrapper that cannot load its C library
            missing[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    return found, missing


def encode_jpegs(count: int, px: int, quality: int = 90, seed: int = 0) -> list[bytes]:
    """Return `count` seeded photo-like JPEGs of `px` x `px`, encoded in memory."""
    from .jpeg_folder import synthetic_image

    blobs = []
    for i in range(count):
        buf = io.BytesIO()
        synthetic_image(np.random.default_rng([seed, i]), px, px, i % 2).save(buf, format="JPEG", quality=quality)
        blobs.append(buf.getvalue())
    return blobs


def images_per_second(decode: Decoder, blobs: Sequence[bytes], repeat: int = 3) -> float:
    """Decode every blob `repeat` times after one warm-up pass; return the best pass's images per second.

    A best-of on purpose: the peak speed of a decoder, with the busy machine's slow passes left out.
    """
    seconds = measure.measure(lambda: [decode(b) for b in blobs], repeat=repeat, warmup=1)
    return len(blobs) / measure.best_of(seconds)


def decode_rates(found: dict[str, Decoder], blobs: Sequence[bytes], repeat: int = 3) -> dict[str, float]:
    """Return {decoder: best pass's images per second}, the decoders' passes interleaved (A B C, A B C, ...).

    Explained in notebooks/08_read_and_decode.ipynb.
    """
    passes = {name: (lambda d=decode: [d(b) for b in blobs]) for name, decode in found.items()}
    seconds = measure.interleaved(passes, repeat=repeat, warmup=1)
    return {name: len(blobs) / measure.best_of(s) for name, s in seconds.items()}


def agreement(a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """Return (mean, max) absolute difference between two decodes of the same JPEG."""
    if a.shape != b.shape:
        raise ValueError(f"decoded shapes differ: {a.shape} vs {b.shape}")
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return float(diff.mean()), int(diff.max())
