"""Knobs set from outside a notebook, one way for every runner: a Python literal, checked against its default.

`bench --set KNOB=VALUE`, `gpu-check` and the tests give a knob as text. The runner assigns it right after the
notebook's defaults cell, where the default is known, as nanoGPT's configurator does: the text is read with
`ast.literal_eval` (text that is no literal stays a string), and its type must be the default's (an int passes
where a float is the default; a default of None takes anything). A wrong one stops the notebook with one line
that names the knob, the value and the type expected.
"""

from __future__ import annotations

import ast

EXIT = 3  # the exit code of a script stopped by a bad knob, its one line printed


class KnobError(ValueError):
    """A knob's value is not of its default's type."""


def parse(text: str) -> object:
    """Return `text` as a Python literal, or as the string itself when it is none ("cuda", "abc")."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def checked(name: str, default: object, text: str) -> object:
    """Return knob `name`'s value read from `text`; raise KnobError unless it has the type of `default`."""
    value = parse(text)
    same = type(value) is type(default) or (type(default) is float and type(value) is int)
    if default is None or same:
        return value
    raise KnobError(
        f"knob {name}={text!r}: expected {type(default).__name__} (its default is {default!r}), "
        f"got {type(value).__name__}"
    )


def assignments(knobs: dict[str, str]) -> list[str]:
    """Return the lines that set `knobs` after a defaults cell, each read and checked where the default is known."""
    lines = ["from fastloops_book.knobs import checked as _checked_knob"] if knobs else []
    return lines + [
        f"{name} = _checked_knob({name!r}, {name}, {text!r})  # set from outside" for name, text in knobs.items()
    ]
