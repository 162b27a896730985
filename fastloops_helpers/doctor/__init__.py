"""The loop doctor: is my loop input-bound, how much would free loading gain, and which knob to turn first?

`diagnose(loader, step)` runs the loop (`timed_loop`), turns what it timed into figures and a verdict
(`diagnosis`), ranks the knobs (`advice`) and draws the timeline (`plot`). It sits above `measure` and `load`:
neither imports it. Explained in notebooks/15_is_my_loop_input_bound.ipynb.
"""

from .diagnosis import BUSY, Diagnosis, diagnose
from .timed_loop import LoopError

__all__ = ["diagnose", "Diagnosis", "LoopError", "BUSY"]
