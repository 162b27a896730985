"""The seeds' claims, each tied to a figure a notebook or benchmark saves, and the checklist they support.

Explained in notebooks/13_conclusion.ipynb.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Claim:
    """One claim of a seed, the saved figure that tests it here, and the threshold it must pass."""

    seed: str
    claim: str
    seed_figure: str
    sources: tuple[str, ...]  # saved result names to look in, first found wins
    figure: str               # a key of that result's "figures", or "a/b" for a ratio of two keys
    threshold: float          # the claim holds here when figure >= threshold (<= when lower_is_better)
    gpu: bool = False         # the seed measured it on a GPU, and the effect needs one
    lower_is_better: bool = False


CLAIMS = (
    Claim("000/001", "one batched fetch of 100 items beats 100 single fetches stacked",
          "122 µs vs 3.42 µs (36x)", ("02_getitem_cost", "bench-getitem"), "slide_100_speedup", 10),
    Claim("000/001", "a per-sample DataLoader loop is far slower than batched indexing",
          "the slide's opening question", ("bench-loops", "01_the_question"), "dataloader_nw0_over_helpers", 10),
    Claim("000/001", "the helpers' loader is as fast as the numpy loop (epoch time ratio)",
          "numpy is the slide's fastest loop", ("bench-loops", "01_the_question"), "helpers_over_numpy", 1.0,
          lower_is_better=True),
    Claim("000/001", "a grouped permutation is much cheaper than a full one for a big index",
          "plot p4/p5 (no number)", ("bench-shuffle", "04_fast_shuffle"), "grouped_speedup_2p26", 3),
    Claim("000/001", "fusing a pointwise chain saves time when the data is larger than cache",
          "plot p6 (no number)", ("05_fusion",), "speedup_largest", 1.2),
    Claim("002", "DataLoader workers hide per-sample JPEG decoding (2 workers vs 0)",
          "timeline diagrams", ("07_dataloader_anatomy",), "ladder_img_per_s_2/ladder_img_per_s_0", 1.3),
    Claim("003", "FFCV loads Otto batches much faster than a per-sample DataLoader",
          "0.82 ms vs 28.9 ms load-only on CIFAR (-97 %)", ("bench-otto", "10_ffcv_otto"),
          "ffcv_over_dataloader_load", 3),
    Claim("003", "the helpers' loader loads Otto at least as fast as FFCV",
          "(the helpers' own target)", ("bench-otto", "10_ffcv_otto"), "helpers_over_ffcv_load", 1.0),
    Claim("003", "a full Otto MLP step with FFCV is much faster than with DataLoader",
          "0.95 ms vs 10.4 ms on a GPU (-91 %)", ("10_ffcv_otto",), "dataloader_step_ms/ffcv_step_ms", 3, gpu=True),
    Claim("003", "with a heavy WRN the full-step gap shrinks (overlap on the GPU)",
          "25.8 ms vs 29.1 ms (-11 %)", ("bench-cifar", "11_ffcv_cifar"), "dataloader_step_over_ffcv_step", 1.0,
          gpu=True),
    Claim("004", "memmap + batched transforms beat ImageFolder + DataLoader on val",
          "20,452 vs 669 fps on CPU (31x)", ("bench-imagefolder", "09_precompute_memmap"), "memmap_val_speedup", 20),
    Claim("004", "memmap + batched transforms beat ImageFolder + DataLoader on train",
          "1,646 vs 1,017 fps on CPU (1.6x)", ("bench-imagefolder", "09_precompute_memmap"),
          "memmap_train_speedup", 1.6),
    Claim("001/002", "DDP on shards trains the same weights as one process on the global batch",
          "DDP as the automatic solution", ("12_scaling_out",), "ddp_matches_single", 1),
)

# What to do first in a real training loop: each item with the figure that measures its payoff here.
CHECKLIST = (
    ("Fetch whole batches (batched indexing, `__getitems__`), never one sample per call",
     ("02_getitem_cost", "bench-getitem"), "slide_100_speedup"),
    ("Replace a per-sample DataLoader over in-memory tensors by a batched loader (BatchLoader)",
     ("bench-loops", "01_the_question"), "dataloader_nw0_over_helpers"),
    ("Decode and resize once, store uint8 in a memmap, apply batched transforms (val)",
     ("bench-imagefolder", "09_precompute_memmap"), "memmap_val_speedup"),
    ("Same for training with random crops and flips done on the batch",
     ("bench-imagefolder", "09_precompute_memmap"), "memmap_train_speedup"),
    ("Shuffle huge indexes with grouped permutations",
     ("bench-shuffle", "04_fast_shuffle"), "grouped_speedup_2p26"),
    ("Use DataLoader workers when each sample needs real CPU work (decoding)",
     ("bench-workers",), "speedup_best_vs_0"),
    ("Fuse pointwise chains with torch.compile",
     ("05_fusion",), "speedup_largest"),
)


def load_figures(folder: Path) -> dict[str, dict]:
    """Return {result name: saved document} for every result JSON in `folder`."""
    found = {}
    for path in sorted(Path(folder).glob("*.json")):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and {"name", "provenance", "figures"} <= doc.keys():
            found[doc["name"]] = doc
    return found


def lookup(docs: dict[str, dict], sources: tuple[str, ...], figure: str) -> tuple[float | None, str | None, dict]:
    """Return (value, result name, provenance) of the first source that saved `figure` ("a/b": a ratio)."""
    keys = figure.split("/")
    for name in sources:
        figures = docs.get(name, {}).get("figures", {})
        if all(k in figures for k in keys):
            value = float(figures[keys[0]]) / float(figures[keys[1]]) if len(keys) == 2 else float(figures[keys[0]])
            return value, name, docs[name]["provenance"]
    return None, None, {}


def status(claim: Claim, value: float | None, provenance: dict) -> str:
    """Say whether the claim is reproduced here, not reproduced, unmeasured, or needs a GPU."""
    if value is None:
        return "not measured"
    if claim.gpu and not str(provenance.get("device", "")).startswith("cuda"):
        return "needs a GPU"
    holds = value <= claim.threshold if claim.lower_is_better else value >= claim.threshold
    return "reproduced" if holds else "not reproduced here"


def evaluate(folder: Path) -> pd.DataFrame:
    """Return one row per claim: the seed's figure, the measured one, its source and the status."""
    docs = load_figures(folder)
    rows = []
    for c in CLAIMS:
        value, source, prov = lookup(docs, c.sources, c.figure)
        rows.append({"seed": c.seed, "claim": c.claim, "seed figure": c.seed_figure,
                     "measured": value, "figure": c.figure,
                     "needed": f"{'<=' if c.lower_is_better else '>='} {c.threshold:g}",
                     "source": source or "-", "status": status(c, value, prov)})
    return pd.DataFrame(rows)


def checklist(folder: Path) -> pd.DataFrame:
    """Return the checklist ordered by the payoff measured here (largest first; unmeasured last)."""
    docs = load_figures(folder)
    rows = [{"do this": advice, "payoff here (x)": lookup(docs, sources, figure)[0], "figure": figure}
            for advice, sources, figure in CHECKLIST]
    table = pd.DataFrame(rows).sort_values("payoff here (x)", ascending=False, na_position="last")
    return table.reset_index(drop=True)
