"""The optional packages are imported where they are used: `import fastloops_helpers` works on a bare torch machine.

A GPU machine without network may have torch and little else; the package must still import there, and a piece
that needs an extra must say which one (fastloops_helpers/extras.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from hidden import CORE, hide  # tests/hidden.py

from fastloops_helpers.data import memmap

ROOT = Path(__file__).resolve().parents[1]
# every optional package of an extra that some module imports (module names, not distributions)
OPTIONAL = (
    "tensordict optree tensorflow ffcv jax spdl torchdata webdataset datasets pyarrow fsspec aiohttp "
    "simplejpeg turbojpeg jpeg4py tree numba cv2"
).split()


def python(code: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run `code` in a fresh interpreter; return its output, failing the test with it if it failed."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_without_tensordict_and_optree_the_package_imports_and_memmap_names_its_extra(tmp_path):
    written, new = tmp_path / "numpy-memmap", tmp_path / "new"
    memmap.write_memmap([(torch.zeros(3, 2, 2, dtype=torch.uint8), 1)], written, backend="numpy")
    out = python(
        f"""
        import importlib, pkgutil, sys
        import torch
        import fastloops_helpers as fh
        from fastloops_helpers.data import memmap
        assert "tensordict" not in sys.modules and "optree" not in sys.modules, "imported by the package"
        modules = [m.name for m in pkgutil.walk_packages(fh.__path__, "fastloops_helpers.")]
        for name in modules:
            importlib.import_module(name)  # not one module needs them to import
        def image_data():
            from fastloops_helpers.data.memmap import ImageData
        attempts = {{
            "memmap.ImageData": lambda: memmap.ImageData,
            "from memmap import ImageData": image_data,
            "load_memmap": lambda: fh.load_memmap({str(written)!r}),
            "write_memmap": lambda: fh.write_memmap([(torch.zeros(2, dtype=torch.uint8), 0)], {str(new)!r}),
        }}
        for what, attempt in attempts.items():
            try:
                attempt()
            except ImportError as exc:
                assert "tensordict is not installed: pip install 'fastloops-helpers[trees]'" in str(exc), exc
            else:
                sys.exit(f"{{what}} ran without tensordict")
        print("imported", len(modules), "modules")
        """,
        env=hide(tmp_path / "shim", "tensordict", "optree"),
        cwd=tmp_path,
    )
    assert out.startswith("imported ") and int(out.split()[1]) > 40  # every library module (the book is not one)
    assert not new.exists()  # write_memmap refused before decoding or writing anything


def test_importing_the_package_imports_no_optional_package():
    """In a fresh interpreter (with the optional packages installed), none is imported unless used."""
    out = python(
        f"""
        import sys
        import {", ".join(CORE)}
        by_core = set(sys.modules)  # pandas imports pyarrow when it is installed: not the package's doing
        import fastloops_helpers, fastloops_book.gpu_check, fastloops_helpers.experiments.imagefolder
        optional = {OPTIONAL!r}
        print(sorted(m for m in set(sys.modules) - by_core if m.split(".")[0] in optional))
        """,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.strip() == "[]", f"imported by `import fastloops_helpers`: {out}"
