"""The loops notebook 01 times are built from the slide's code it is given (its cells'), else the package's."""

import pytest

from fastloops_helpers.experiments import loops
from fastloops_helpers.teach import slide_code


def test_the_loops_are_built_from_the_slide_code_given():
    made = []

    def numpy_epoch(n, batch_size):  # as a student's edited cell would be
        made.append((n, batch_size))
        return slide_code.numpy_epoch(n, batch_size)

    found = loops.slide_loops(600, 30, 0, with_tf=False, slide={"numpy_epoch": numpy_epoch})
    assert made == [(600, 30)] and found["numpy"]() == 20
    assert found["python"]() == found["dataloader_nw0"]() == found["slide_fast_dataloader"]() == 20
    assert loops.slide_code_of()["loader_epoch"] is slide_code.loader_epoch  # the benchmark's: the package's
    with pytest.raises(ValueError, match="slide takes the names"):
        loops.slide_loops(600, 30, 0, with_tf=False, slide={"numpy_loop": numpy_epoch})


def test_loader_epoch_counts_the_batches_of_any_loader():
    assert slide_code.loader_epoch([[1, 2], [3]])() == 2
