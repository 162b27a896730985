"""show_code renders package code from the live object: what runs is what is shown."""

import inspect
import textwrap

import pytest

from fastloops_book import source
from fastloops_book.source import show_code
from fastloops_helpers.load.batch_loader import BatchLoader
from fastloops_helpers.load.prefetch import ThreadPrefetcher


def test_a_method_is_shown_from_its_live_source_with_where_it_lives():
    shown = show_code(BatchLoader.__iter__)
    (listing,) = shown.listings
    assert listing.source == textwrap.dedent(inspect.getsource(BatchLoader.__iter__)).rstrip() + "\n"
    assert listing.title == "fastloops_helpers.load.batch_loader.BatchLoader.__iter__"
    assert listing.path == "fastloops_helpers/load/batch_loader.py"
    lines = (source.Path(source.__file__).parents[2] / listing.path).read_text().splitlines()
    assert lines[listing.line - 1].strip().startswith("def __iter__")
    html = shown._repr_html_()
    assert "<details open>" in html and 'href="../fastloops_helpers/load/batch_loader.py"' in html
    assert repr(shown).splitlines()[1] == "def __iter__(self) -> Iterator[Any]:"


def test_a_long_listing_starts_folded():
    long = show_code(ThreadPrefetcher)
    assert long.listings[0].source.count("\n") > source.FOLD_LINES
    assert "<details>" in long._repr_html_()


def test_an_edit_to_the_package_shows_at_the_next_render(monkeypatch):
    monkeypatch.setattr(source.inspect, "getsourcelines", lambda f: (["def f():\n", "    return 2  # edited\n"], 7))
    assert show_code(BatchLoader.__iter__).listings[0].source == "def f():\n    return 2  # edited\n"


def test_only_package_objects_and_no_values():
    def mine():
        return 1

    with pytest.raises(ValueError, match="define it in a cell"):
        show_code(mine)
    with pytest.raises(TypeError, match="functions, methods, properties and classes"):
        show_code(3)
    with pytest.raises(TypeError, match="at least one"):
        show_code()
