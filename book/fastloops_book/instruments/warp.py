"""The warp: `make test`'s instrument that scales every duration the library's clock returns, one factor per contender.

`make test` sets FASTLOOPS_WARP to an integer seed (unset or empty: off) and puts `site/` on the PYTHONPATH, so each
process it starts installs `scale` as the clock's one hook (`measure.clock.set_scaling`). Every ratio of two
contenders then moves by at least STEP (> WIDE): a cell that nbval compares and whose output changes depends on a
timing margin narrower than WIDE, and belongs in an `nbval-ignore-output` cell (CONTRIBUTING.md, "What nbval
compares"). Absolute readings (`clock.now()`) stay real, so deadlines, budgets and the store's throttle keep real
time. No cell names a contender: the warp keys on what the clock already hands it.

How factors are chosen (powers of STEP, from zlib.crc32 of the seed and a key, stable across processes):
- the contenders of one `interleaved` call are ranked in a seeded order and given distinct exponents from LEVELS,
  centred (2 keys: 1/4 and 4, a 16x move; up to 5 keys: every two differ by at least STEP);
- a timing alone (a `Timer`, `measure(fn)`, `elapsed`) is keyed by its site (file name and line) and by what is
  timed there: the function given to `measure`, and the plain arguments (names, sizes, counts, functions) of the
  function that times. Distinct keys at one site take distinct exponents in the order they first come, so the
  contenders that one loop times one by one (notebook 16's readers) move apart, while every pass of one contender
  keeps one factor (its median scales, its spread stays honest);
- a timing inside an interleaved contender takes that contender's factor (the clock sees to it);
- a timing made under a solution cell (its first line is the solution marker) is not warped: an exercise's
  answer asserts on what it measured.
"""

from __future__ import annotations

import linecache
import os
import zlib
from collections.abc import Hashable, Iterable, Sequence
from types import FrameType
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)

ENV = "FASTLOOPS_WARP"
WIDE = 3.0  # the margin a compared verdict must hold by ("wide" in CONTRIBUTING.md and book/fastloops_book/claims/)
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


def _hash(*parts: object) -> int:
    return zlib.crc32(repr((SEED, *parts)).encode())


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
    if len(keys) == 1:  # an interleaved call of one contender is a timing alone, and always moved
        return {keys[0]: STEP ** ALONE[_hash("alone", keys[0]) % len(ALONE)]}
    ranked = sorted(keys, key=lambda k: (_hash("rank", k), repr(k)))
    return {k: STEP**e for k, e in zip(ranked, exponents(len(keys)))}


SOLUTION_FIRST_LINE = "# Solution: try the exercise first"  # every solution cell starts so (fastloops_book.notebooks)
ALONE = tuple(e for e in LEVELS if e)  # a timing alone is always moved
_sites: dict[tuple[str, int], dict[Any, int]] = {}  # per site, the exponent of each key seen there


def plain(value: Any) -> Any:
    """Return `value` as a stable key part: a number or string as it is, a tuple part by part, a function by its
    name, anything else by its type's name (an object's repr may hold its address, which differs per run)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    name = getattr(value, "__qualname__", None)
    if callable(value) and isinstance(name, str):
        return f"{getattr(value, '__module__', '')}.{name}"
    return type(value).__qualname__


def site_key(frame: FrameType, fn: Any = None) -> tuple[tuple[str, int], Any]:
    """Return (site, what) for a timing alone made at `frame`: what is `fn`'s name and closure, and the plain
    arguments of the function running at `frame`."""
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount] + code.co_freevars
    seen = tuple((n, plain(frame.f_locals[n])) for n in names if n in frame.f_locals)
    what: Any = tuple(kv for kv in seen if kv[1] is not None)
    if fn is not None:  # and what the function reads: its closure and the plain globals it names (a cell's loop)
        cells = tuple(plain(c.cell_contents) for c in getattr(fn, "__closure__", None) or () if _full(c))
        names = getattr(getattr(fn, "__code__", None), "co_names", ())
        found = getattr(fn, "__globals__", {})
        read = tuple((n, plain(found[n])) for n in names if n in found and plain(found[n]) is not None)
        what = (plain(fn), cells, read, what)
    return (os.path.basename(code.co_filename), frame.f_lineno), what


def _full(cell: Any) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:  # a cell not filled yet
        return False
    return True


def alone(site: tuple[str, int], what: Any) -> float:
    """Return the factor of a timing alone: distinct keys at one site get distinct exponents, first come first."""
    keys = _sites.setdefault(site, {})
    if what not in keys:
        order = sorted(ALONE, key=lambda e: _hash("site", site, e))
        keys[what] = order[len(keys) % len(order)]
    return STEP ** keys[what]


def in_solution(frame: FrameType | None) -> bool:
    """Return whether `frame`, or a frame that called it, runs a solution cell (its source's first line)."""
    while frame is not None:
        if linecache.getline(frame.f_code.co_filename, 1).rstrip("\n") == SOLUTION_FIRST_LINE:
            return True
        frame = frame.f_back
    return False


def scale(contenders: Sequence[Any], frame: FrameType) -> list[float]:
    """The clock's hook: a factor per contender timed together, or one for a timing alone made at `frame`."""
    if SEED is None or in_solution(frame):
        return [1.0] * max(1, len(contenders))
    if not contenders or (len(contenders) == 1 and callable(contenders[0])):
        return [alone(*site_key(frame, contenders[0] if contenders else None))]
    found = factors(contenders)
    return [found[k] for k in contenders]


def install() -> None:
    """Hand `scale` to the library's clock when a seed is set (FASTLOOPS_WARP); leave the clock alone otherwise."""
    if SEED is not None:
        from fastloops_helpers.measure import clock

        clock.set_scaling(scale)
