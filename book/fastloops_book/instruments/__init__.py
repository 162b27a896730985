"""The test runs' instruments, kept out of the library: the warp (`make test`) and the slowdown (liveness).

`site/sitecustomize.py`, on the PYTHONPATH the runs set, installs them in every Python process they start: nbval's
kernels, a benchmark's script, DataLoader's spawned workers, torchrun's ranks. No lesson code and no library module
names them; the library's clock has one hook for them (`measure.clock.set_scaling`).
"""
