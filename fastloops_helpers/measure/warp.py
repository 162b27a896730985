"""The warp: a test switch that scales every duration `measure` returns by one seeded factor per contender.

`make test` sets the environment variable FASTLOOPS_WARP to an integer seed (unset or empty: off). With it on,
`Timer.seconds`, `measure`, `interleaved`, `interleaved_until_steady`, `per_call` and `elapsed` return real
durations multiplied by a factor that depends only on the seed and the contender, so every ratio of two
contenders moves by at least STEP (> WIDE). A cell that nbval compares and whose output then changes depends on
a timing margin narrower than WIDE: it belongs in an `nbval-ignore-output` cell (CONTRIBUTING.md, "What nbval
compares"). Absolute readings (`clock.now()`) stay real, so time never runs backwards and deadlines, budgets and
the store's throttle keep real time. The seed is read at import, so forked and spawned workers see it too.

How factors are chosen (all powers of STEP, from zlib.crc32 of the seed and a contender, stable across processes):
- the keys of one `interleaved` call are ranked in a seeded order and given distinct exponents from LEVELS,
  centred (2 keys: 1/4 and 4, a 16x move; up to 5 keys: every two differ by at least STEP);
- a contender timed alone (a `Timer`, a `measure` call, a one-key `interleaved`) gets 1/STEP or STEP (a 16x
  move when two differ; two such contenders get the same factor half the time): by the name passed as
  `contender=`, else by its call site (file name and line). A site, not a creation count: every pass of a loop
  that repeats one contender gets the same factor (its median scales, its spread stays honest), and a timer
  added elsewhere, or a budget loop that runs more passes, leaves every other site's factor as it was. So a loop
  timing several contenders at one site gives them one factor: name them (`Timer(contender=name)`,
  `measure(fn, contender=name)`) or time them together with `interleaved`.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Hashable, Iterable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

ENV = "FASTLOOPS_WARP"
WIDE = 3.0  # the margin a compared verdict must hold by ("wide" in CONTRIBUTING.md and book/claims/)
STEP = 4.0  # the ratio between neighbouring factors: more than WIDE
LEVELS = (-2, -1, 0, 1, 2)  # exponents of STEP: factors from 1/16 to 16


def _read_seed(value: str | None) -> int | None:
    """Return the integer seed in `value` (FASTLOOPS_WARP), None when unset or empty."""
    if value is None or not value.strip():
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{ENV} must be an integer seed (or unset), got {value!r}") from None


SEED: int | None = _read_seed(os.environ.get(ENV))  # read once, at import (workers import it too)


def active() -> bool:
    """Return whether durations are warped in this process."""
    return SEED is not None


def _hash(*parts: object) -> int:
    return zlib.crc32(repr((SEED, *parts)).encode())


def factor(contender: Hashable) -> float:
    """Return the factor of a contender timed alone: STEP or 1/STEP, from the seed and the contender's repr."""
    if SEED is None:
        return 1.0
    return STEP if _hash("alone", contender) % 2 else 1 / STEP


def exponents(n: int) -> list[int]:
    """Return `n` exponents of STEP for `n` contenders timed together: distinct up to 5, centred on 0.

    >>> exponents(2), exponents(3), exponents(4)
    ([-1, 1], [-1, 0, 1], [-2, -1, 1, 2])
    """
    if n <= len(LEVELS):
        levels = LEVELS if n % 2 else tuple(e for e in LEVELS if e)
        drop = (len(levels) - n) // 2
        return list(levels[drop : drop + n])
    return [LEVELS[i % len(LEVELS)] for i in range(n)]


def factors(keys: Iterable[K]) -> dict[K, float]:
    """Return {key: factor} for the contenders of one interleaved call (all 1.0 when the warp is off)."""
    keys = list(keys)
    if SEED is None:
        return {k: 1.0 for k in keys}
    if len(keys) == 1:
        return {keys[0]: factor(keys[0])}
    ranked = sorted(keys, key=lambda k: (_hash("rank", k), repr(k)))
    return {k: STEP**e for k, e in zip(ranked, exponents(len(keys)))}


def site_factor(depth: int = 1) -> float:
    """Return the factor of a contender named by its call site: `depth` frames above the caller of this function.

    The site is the file's name (a notebook cell's file is named by a hash of its source) and the line.
    """
    if SEED is None:
        return 1.0
    frame = sys._getframe(depth + 1)
    return factor(("site", os.path.basename(frame.f_code.co_filename), frame.f_lineno))
