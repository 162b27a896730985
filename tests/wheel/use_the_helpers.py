"""A short real loop with the helpers installed from the wheel alone (run by tests/test_wheel.py, not by pytest)."""

import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

import fastloops_helpers as fh

assert "site-packages" in fh.__file__, f"imported from the checkout, not the wheel: {fh.__file__}"
extras = [name for name in ("tensordict", "optree") if importlib.util.find_spec(name)]
assert not extras, f"the core install brought {extras}: they belong to the `trees` extra"
with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp) / "folder"
    for label, name in enumerate(("ants", "bees")):
        (root / name).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(np.full((20, 24, 3), 40 * i + label, np.uint8)).save(root / name / f"{i}.jpg")

    def to_uint8(img):
        """Decode to a fixed-size uint8 CHW tensor."""
        return torch.from_numpy(np.asarray(img.convert("RGB").resize((16, 16)))).permute(2, 0, 1).contiguous()

    folder = fh.ImageFolder(root, transform=to_uint8)
    seen = [y.tolist() for _, y in fh.ThreadLoader(folder, batch_size=4, threads=2, shuffle=True, seed=0)]
    assert sorted(sum(seen, [])) == [0] * 6 + [1] * 6, seen

    try:  # the data sets are tensorclasses: tensordict comes with the `trees` extra, not the core
        fh.write_memmap(folder, Path(tmp) / "memmap", backend="numpy")
    except ImportError as exc:
        assert "fastloops-helpers[trees]" in str(exc), exc
        assert not (Path(tmp) / "memmap").exists(), "write_memmap wrote before it found tensordict missing"
        print("missing extra:", exc)
    else:
        sys.exit("write_memmap ran without tensordict installed")

    X, y = torch.randn(100, 8), torch.arange(100)
    loader = fh.BatchLoader((X, y), batch_size=32, shuffle=True, seed=1)
    rows = torch.cat([fh.move_to(b, "cpu")[1] for b in loader])
    assert sorted(rows.tolist()) == list(range(100))
    model = torch.nn.Linear(8, 2)
    report = fh.diagnose(loader, lambda b: model(b[0]).sum().backward(), batches=4, warmup=1, replay=2, repeat=1)
    assert isinstance(report, fh.Diagnosis), report

try:
    list(fh.tar_samples(["http://127.0.0.1:9/shard.tar"]))
except ImportError as exc:
    assert "fastloops-helpers[stream]" in str(exc), exc
    print("missing extra:", exc)
else:
    sys.exit("tar_samples ran without webdataset installed")
print("wheel ok", fh.__version__)
