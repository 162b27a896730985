import json
import subprocess
import sys

import pytest

from fastloops_helpers import experiments as bench
from fastloops_helpers.experiments import bandwidth


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "fastloops_helpers.bench", *args],
                          capture_output=True, text=True, env=env, timeout=300)


def test_list_names_each_benchmark_with_its_description():
    out = _cli("--list")
    assert out.returncode == 0
    assert "bandwidth" in out.stdout and "Memory copy bandwidth" in out.stdout
    assert set(bench.available()) >= {"bandwidth"}


def test_run_writes_the_documented_json(tmp_path):
    out = _cli("bandwidth", "--scale", "smoke", "--out", str(tmp_path / "bw.json"))
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "bw.json").read_text())
    assert set(doc) == {"name", "provenance", "rows", "figures"}
    assert doc["name"] == "bench-bandwidth" and doc["provenance"]["scale"] == "smoke"
    assert {"hardware", "versions", "scale", "knobs", "repeats"} <= set(doc["provenance"])
    assert len(doc["rows"]) == 6 and doc["figures"]["copy_gb_per_s_ram"] > 0
    assert "copy_gb_per_s_ram = " in out.stdout and "size_mb" in out.stdout


def test_unknown_benchmark_and_scale_are_rejected():
    out = _cli("nope", "--scale", "smoke")
    assert out.returncode != 0 and "unknown benchmark 'nope'; available: " in out.stderr
    out = _cli("bandwidth", "--scale", "huge")
    assert out.returncode != 0 and "invalid choice: 'huge'" in out.stderr


def test_copy_bandwidth_counts_bytes_and_rejects_unknown_library():
    gbps = bandwidth.copy_bandwidth(2**20, "numpy", repeat=2)
    assert 0.1 < gbps < 10_000  # physically plausible for a 1 MiB buffer on any machine
    with pytest.raises(ValueError, match="'torch' or 'numpy'"):
        bandwidth.copy_bandwidth(2**20, "jax")
