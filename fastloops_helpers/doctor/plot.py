"""Draw a Diagnosis: the recorded timeline above bars of where each batch's time went.

`diagnosis` imports this module, never the other way round: `d` is a `Diagnosis`, typed `Any` here so that the
two modules form no import circle.

Explained in notebooks/15_is_my_loop_input_bound.ipynb.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..measure.timeline import STAGE_COLORS, draw_lanes


def draw(d: Any, title: str = "", until: float | None = None) -> Figure:
    """Return a figure: the timeline's lanes (up to `until` seconds) and per-batch time, live vs step alone."""
    df = d.timeline.frame()
    lanes = _lanes(df)
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(9, 0.45 * len(lanes) + 3.4), gridspec_kw={"height_ratios": [max(len(lanes), 1), 1.6]}
    )
    top.axvline(d.window_start, color="black", lw=0.8, ls="--", label="measured from here")
    draw_lanes(top, df if until is None else df[df.start < until], lanes, "seconds since diagnose started")
    _bars(bottom, d)
    top.set_title(title or f"{d.verdict}: waits {d.wait_share:.0%}, headspace {d.headspace:.2g}x", fontsize=10)
    fig.tight_layout()
    return fig


def _lanes(df: pd.DataFrame) -> list[str]:
    return sorted(df.lane.unique(), key=lambda s: (not s.startswith("worker"), s.startswith("main: loop"), s))


def _bars(ax: Axes, d: Any) -> None:
    per_batch = 1e3 / d.samples_per_s * (d.samples / d.batches)  # ms per batch, live
    parts = {"wait": d.wait_share, "copy": d.copy_share, "step": d.step_share}
    left = 0.0
    for stage, share in parts.items():
        if share > 0:
            ax.barh(0, share * per_batch, left=left, color=STAGE_COLORS[stage], label=stage)
            left += share * per_batch
    ax.barh(0, max(per_batch - left, 0.0), left=left, color="#dddddd", label="other")
    alone = 1e3 / d.replay_samples_per_s * (d.samples / d.batches)
    ax.barh(1, alone, color=STAGE_COLORS["step"])
    ax.annotate(f"{d.headspace:.2g}x headspace", (alone, 1), xytext=(4, 0), textcoords="offset points", va="center")
    ax.set_yticks([0, 1], ["live loop", "step alone\n(cached batches)"])
    ax.invert_yaxis()
    ax.set_xlabel("ms per batch (mean)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
