"""The loops notebook 01 times are built from the slide's code it is given: its cells', every name required."""

import pytest

from fastloops_helpers.experiments import loops
from fastloops_helpers.teach import slide_code


def test_the_loops_are_built_from_the_slide_code_given(slide):
    made = []

    def numpy_epoch(n, batch_size):  # as a student's edited cell would be
        made.append((n, batch_size))
        return slide["numpy_epoch"](n, batch_size)

    found = loops.slide_loops(600, 30, 0, slide | {"numpy_epoch": numpy_epoch}, with_tf=False)
    assert made == [(600, 30)] and found["numpy"]() == 20
    assert found["python"]() == found["dataloader_nw0"]() == found["slide_fast_dataloader"]() == 20


def test_a_slide_with_a_name_missing_or_unknown_is_refused(slide):
    with pytest.raises(ValueError, match=r"missing \['numpy_epoch'\], unknown \['numpy_loop'\]"):
        renamed = {("numpy_loop" if k == "numpy_epoch" else k): v for k, v in slide.items()}
        loops.slide_loops(600, 30, 0, renamed, with_tf=False)


def test_loader_epoch_counts_the_batches_of_any_loader():
    assert slide_code.loader_epoch([[1, 2], [3]])() == 2
