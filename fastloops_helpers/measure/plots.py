"""The bar charts and line plots the notebooks share, saved beside the JSON results.

Explained in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from .. import config


def bars(
    table: pd.DataFrame,
    value: str,
    label: str,
    baseline: str | None = None,
    log: bool = False,
    title: str = "",
    unit: str = "",
    xlabel: str = "",
) -> Figure:
    """Draw horizontal bars of `value` per `label`, each annotated with its ratio to `baseline`.

    The x axis reads `xlabel`, else the column name in words with `unit` ("ms per epoch (ms)" reads better
    as xlabel="ms per epoch, log scale"). Explained in notebooks/01_the_question.ipynb.
    """
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(table) + 1.2))
    ax.barh(table[label].astype(str), table[value], color="#4c72b0")
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    words = value.replace("_", " ")
    ax.set_xlabel(xlabel or (f"{words} ({unit})" if unit else words))
    ax.set_title(title)
    if baseline is not None:
        base = float(table.loc[table[label] == baseline, value].iloc[0])
        for y, v in enumerate(table[value]):
            ratio = v / base
            label = f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.2g}x"  # 222x, not 2.2e+02x
            ax.annotate(label, (v, y), xytext=(3, 0), textcoords="offset points", va="center")
    fig.tight_layout()
    return fig


def lines(
    table: pd.DataFrame,
    x: str,
    y: str,
    hue: str,
    logx: bool = True,
    logy: bool = True,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
) -> Figure:
    """Draw one line of `y` against `x` per value of `hue` (a sweep as data -> a plot)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, part in table.groupby(hue, sort=False):
        ax.plot(part[x], part[y], marker="o", label=str(name))
    ax.set_xscale("log" if logx else "linear")
    ax.set_yscale("log" if logy else "linear")
    ax.set_xlabel(xlabel or x.replace("_", " "))
    ax.set_ylabel(ylabel or y.replace("_", " "))
    if logy:  # a log axis spanning little more than a decade crowds minor labels: label only the decades
        ax.yaxis.set_minor_formatter(NullFormatter())
    if logx:
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_title(title)
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def save(fig: Figure, name: str) -> Path:
    """Save `fig` as results/NAME.png (the report embeds it) and return the path."""
    path = config.results_dir() / f"{name}.png"
    fig.savefig(path, dpi=110)
    return path
