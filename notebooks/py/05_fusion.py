# %% [markdown] slideshow={"slide_type": "slide"}
# # 05 · Operator fusion: what does `torch.compile` save on pointwise chains?
#
# | | |
# |---|---|
# | **Question** | How much faster is a chain of pointwise ops (sin, cos, sigmoid, add, mul) when compiled into one kernel, and can we predict the gain from memory traffic? |
# | **Seeds** | 000/001 "Other tips": *Fuse operator* |
# | **GPU** | optional: the chain is also compiled for CUDA when a GPU is present |
# | **Optional** | torch.compile: the compiled chains are skipped where inductor cannot build |
# | **Run time** | <!-- run-time --> workshop ~56 s (measured on AMD EPYC, 2 cores, 2026-12-03) |
#
# In eager PyTorch each pointwise op is its own kernel: it reads its inputs from memory and writes a full-size
# result back, and the next op reads that result again. A compiler that fuses the chain into one kernel reads
# the input once and writes the output once. The slide says fusion "reduces memory access and kernel launch
# times"; here we count the bytes, predict the gain, and measure it.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import pandas as pd
import torch

from fastloops_helpers import config, measure
from fastloops_book import claims
from fastloops_book.source import show_code
from fastloops_helpers.experiments import bandwidth
from fastloops_helpers.measure import plots

print(config.describe())
print(measure.hardware_line())

# %% slideshow={"slide_type": "subslide"} tags=["defaults", "nbval-ignore-output"]
sizes = list(config.size("fusion.sizes"))  # elements per tensor: from cache-resident to far larger than cache
dtype = torch.float32                      # element type: float64 doubles every byte moved, and every floor
repeat = config.size("repeat")             # interleaved rounds per size: more steadies the medians, costs time
dynamic = True                             # one compile serves every size; False recompiles for each new size
bandwidth_mb = 256                         # buffer for the copy-bandwidth yardstick (larger than any cache)
print("sizes (MiB):", [n * dtype.itemsize / 2**20 for n in sizes])

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. The chain, and counting its bytes
#
# The slide names the kind of op that fuses (elementwise add and multiply, `sin`, `cos`, `sigmoid`) but shows no
# code. Here is the chain this notebook times: six pointwise ops, each of which eager PyTorch runs as its own
# kernel. The cell is the lesson's source, and the benchmark
# (`python -m fastloops_book.bench fusion`) runs this notebook, so it times this cell too:

# %% slideshow={"slide_type": "-"}
def chain(x: torch.Tensor) -> torch.Tensor:
    """Return sin(x) * cos(x) + sigmoid(x) * x: six pointwise ops, the slide's kind."""
    return x.sin() * x.cos() + torch.sigmoid(x) * x


# %% [markdown] slideshow={"slide_type": "-"}
# Eager, each op reads one or two tensors and writes one: 15 tensor-sized passes over memory in all. Fused, one
# kernel reads `x` and writes the result: 2 passes.
# The count per op, and `traffic_bytes`, which turns passes into bytes:

# %% slideshow={"slide_type": "subslide"}
# sin(x): 1 read + 1 write, cos(x): 1 + 1, a * b: 2 + 1, sigmoid(x): 1 + 1, d * x: 2 + 1, c + e: 2 + 1
EAGER_PASSES = 15
FUSED_PASSES = 2  # one kernel: read x once, write the result once


def traffic_bytes(n: int, element_bytes: int = 4) -> dict[str, int]:
    """Return the bytes moved through memory by the eager chain and by one fused kernel, for `n` elements."""
    return {"eager": EAGER_PASSES * n * element_bytes, "fused": FUSED_PASSES * n * element_bytes}


# %% slideshow={"slide_type": "-"}
print(f"eager passes: {EAGER_PASSES}, fused passes: {FUSED_PASSES}, "
      f"bound on the gain when memory-bound: {EAGER_PASSES / FUSED_PASSES:.1f}x")
assert traffic_bytes(1000, 8) == {"eager": EAGER_PASSES * 8000, "fused": FUSED_PASSES * 8000}  # passes x bytes

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
pd.DataFrame([{"n": n, **{k: v / 2**20 for k, v in traffic_bytes(n, dtype.itemsize).items()}}
              for n in sizes]).rename(
    columns={"eager": "eager MiB moved", "fused": "fused MiB moved"})

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Prediction.** Dividing those bytes by this machine's copy bandwidth (notebook 00's copy, below, timed by
# `bandwidth.copy_bandwidth`) gives a floor for each version's time. When the tensors are far larger than the
# caches, the eager chain should take at least its floor, and more: each of its six ops allocates a fresh full-size
# output, and for large tensors the allocator hands out new pages that the kernel zeroes on first touch, one more
# write pass per op: (15 + 6) / 15, about 1.4x the floor, so we predict 1-1.5x. Fusion should then gain up to 15 / 2
# = 7.5x, less where the arithmetic (sin and cos are not cheap) becomes the limit of the fused kernel. When the
# tensors fit in cache, memory traffic is cheap and the gain should shrink; for tiny tensors the fixed cost per call
# (Python dispatch per op eager, guard checks for the compiled function) dominates.

# %% slideshow={"slide_type": "subslide"}
# the yardstick: notebook 00's copy of one buffer into another (read + write counted)
show_code(bandwidth.torch_copy)

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
bw = bandwidth.copy_bandwidth(bandwidth_mb * 2**20, repeat=repeat)
print(f"copy bandwidth (RAM): {bw:.1f} GB/s")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Compiling, timed on its own
#
# The fused version is the same function handed to `torch.compile`. With `dynamic=True` it is traced once for
# any length, so one compilation serves every size below (with `dynamic=False` each new size would compile
# again). Nothing is compiled until the first call:

# %% slideshow={"slide_type": "-"}
def compile_chain(fn: Callable = chain, dynamic: bool = True) -> Callable:
    """Return `fn` compiled by inductor; nothing is compiled until the first call."""
    # dynamic=True: one compiled kernel for every length; False specialises (and recompiles) per length
    return torch.compile(fn, dynamic=dynamic)


# %% [markdown] slideshow={"slide_type": "-"}
# The first call pays for tracing, code generation and the C++ compiler; later calls do not. `first_call`
# times that call on its own with `measure.Timer` (a one-off cost, not part of the per-call figures) and checks
# its result against the eager chain; where no compiler works it returns `None` and the notebook goes on with
# eager numbers only.

# %% slideshow={"slide_type": "subslide"}
def first_call(compiled: Callable, eager: Callable = chain, n: int = 4096, device: torch.device | str = "cpu",
               dtype: torch.dtype = torch.float32) -> tuple[Callable | None, float, str]:
    """Call `compiled` once, timed on its own, and check it against `eager`: (compiled or None, seconds, note)."""
    x = torch.randn(n, device=device, dtype=dtype)
    try:
        with measure.Timer(device) as timer:
            out = compiled(x)
    except Exception as exc:  # missing compiler or headers surface as many exception types
        return None, float("nan"), f"torch.compile unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    if x.device.type != "meta" and not torch.allclose(out, eager(x), atol=1e-5):  # meta tensors hold no values
        return None, timer.seconds, "torch.compile gave different values: using eager only"
    return compiled, timer.seconds, f"inductor on {torch.device(device).type}"


# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
compiled, compile_s, note = first_call(compile_chain(chain, dynamic=dynamic), chain, dtype=dtype)
print(note)
measure.show("first call of the compiled chain (compile included)", compile_s)

# %% slideshow={"slide_type": "subslide"}
print("compiled:", "yes" if compiled is not None else "no, eager numbers only")
# first_call's own check, on stand-ins: one that agrees with eager is kept, one that differs or fails is not
assert first_call(chain, chain, n=64)[0] is chain and first_call(lambda x: x + 1, chain, n=64)[0] is None
assert math.isnan(first_call(lambda x: 1 / 0, chain, n=8)[1])


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. Eager against fused, from cache-sized to RAM-sized
#
# `per_call` times functions of one tensor interleaved, many calls per round for the small ones, so that a
# busy moment of the machine hits every contender alike:

# %% slideshow={"slide_type": "-"}
def per_call(fns: dict[str, Callable[[torch.Tensor], Any]], n: int, repeat: int, device: torch.device | str = "cpu",
             dtype: torch.dtype = torch.float32, warmup: int = 1) -> dict[str, list[float]]:
    """Return {name: seconds per call, per round} of each `fn(x)` on `n` elements of `dtype`, interleaved."""
    x = torch.randn(n, device=device, dtype=dtype)
    inner = max(1, 2**18 // n)  # small tensors: many calls per round so the clock can see them
    return measure.per_call({k: partial(f, x) for k, f in fns.items()}, number=inner, repeat=repeat, warmup=warmup,
                            device=device)


# %% [markdown] slideshow={"slide_type": "-"}
# `sweep` runs it at each size for the two functions above, `chain` and its compiled twin, and adds the
# bandwidth-bound floors; `speedup` is the median over rounds of eager / compiled.

# %% slideshow={"slide_type": "subslide"}
def sweep(sizes: list[int], eager: Callable, compiled: Callable | None, repeat: int,
          bandwidth_gb_s: float | None = None, device: torch.device | str = "cpu",
          dtype: torch.dtype = torch.float32) -> list[dict[str, Any]]:
    """Time `eager` (and `compiled`) per size, interleaved; one row per size, floors where a bandwidth is given."""
    element_bytes = torch.empty(0, dtype=dtype).element_size()
    rows = []
    for n in measure.progress(sizes, desc="sizes"):
        fns = {"eager": eager} | ({"compiled": compiled} if compiled is not None else {})
        seconds = per_call(fns, n, repeat, device, dtype)
        row = {"n": n, "mib": n * element_bytes / 2**20, "eager_s": measure.median(seconds["eager"])}
        if bandwidth_gb_s is not None:  # eager_floor_s, fused_floor_s: bytes moved at the copy rate
            row |= {f"{k}_floor_s": b / (bandwidth_gb_s * 1e9) for k, b in traffic_bytes(n, element_bytes).items()}
        if compiled is not None:
            row["compiled_s"] = measure.median(seconds["compiled"])
            row["speedup"] = measure.ratio(seconds, "eager", "compiled")
        rows.append(row)
    return rows


# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
rows = sweep(sizes, chain, compiled, repeat, bw, dtype=dtype)
assert [r["n"] for r in rows] == sizes  # one row per size; floors in the ratio of the passes counted:
assert all(math.isclose(r["eager_floor_s"] * FUSED_PASSES, r["fused_floor_s"] * EAGER_PASSES) for r in rows)
table = pd.DataFrame(rows)
table.assign(**{c: table[c] * 1e3 for c in table if c.endswith("_s")}).rename(
    columns=lambda c: c.replace("_s", "_ms")).round(3)

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
long = table.melt(id_vars="mib", value_vars=[c for c in table if c.endswith("_s")], var_name="what", value_name="seconds")
long["ns_per_element"] = long.seconds / (long.mib * 2**20 / dtype.itemsize) * 1e9
fig = plots.lines(long, x="mib", y="ns_per_element", hue="what", title="sin(x)*cos(x) + sigmoid(x)*x per element",
                  xlabel="tensor size (MiB)", ylabel="ns per element (floors: bandwidth-bound predictions)")
plots.save(fig, "05_fusion-sweep")
big = table.iloc[-1]
_ = measure.predicted(f"eager at {big.mib:.0f} MiB, x its floor", 1, 1.5, big.eager_s / big.eager_floor_s, "x")
if compiled is not None:
    print(f"largest size: compiled {big.compiled_s / big.fused_floor_s:.1f}x its floor")
    _ = measure.predicted(f"speed-up at {big.mib:.0f} MiB", float("-inf"), 7.5, big.speedup, "x")


# %% [markdown] slideshow={"slide_type": "subslide"}
# Read the plot from the right, where memory traffic should dominate. Where the eager chain lands well above
# the predicted range, the prediction missed on three counts it leaves out: a page fault costs more than zeroing its
# 4 KiB (a trip into the kernel per page, about 250 per MiB allocated and freed per op); sin and cos are
# evaluated to full precision element by element, which on a few cores is not free next to a memory pass; and the
# copy rate of section 1 (the yardstick notebook 00 uses too) was measured with warm, reused buffers. The compiled version usually stays above
# *its* floor too, because with only two passes left the sin and cos arithmetic becomes the limit; so the
# speed-up lands below what counting passes allows (the prediction above). On the left, small tensors pay per call: six
# dispatches eager, one guarded call compiled, so which one wins there depends on the machine and the size
# (the table above). The compiled kernel also starts its OpenMP threads on every call, even for tiny tensors,
# while eager PyTorch runs small tensors on one thread: on a machine busy with other work those threads wait for
# each other and the small compiled calls slow down (`torch.set_num_threads(1)` shows the difference).
# How much fusion saves at the largest size depends on the number of cores as well. On few cores each eager op
# is limited by its arithmetic spread over those cores, and fusing removes passes the cores would otherwise spend
# time on. On many cores each eager op (a hand-vectorised kernel on every core) reaches the memory bandwidth,
# while the fused kernel computes sin, cos and the sigmoid's exponential together for each element, so its
# arithmetic, and how well the compiler vectorised and spread it over threads for this CPU, becomes the limit: on
# a machine with many cores the compiled chain can come out no faster than eager, or slower, at the largest size.
# The speed-up printed above is this machine's, at `torch.get_num_threads()` threads.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. On a GPU
#
# On a GPU each eager op is also a kernel launch of a few microseconds, so fusion saves launches as well as
# memory traffic, and the same counting applies with the GPU's far higher memory bandwidth.

# %% [markdown] slideshow={"slide_type": "-"}
# The figures saved come from both ends of a sweep. A GPU's speed-up is another figure than the CPU's, which
# the claims registry reads, so measured off the CPU every name ends with the device type
# (`fusion_speedup_largest_cuda`):

# %% slideshow={"slide_type": "subslide"}
def fusion_figures(rows: list[dict[str, Any]], compile_s: float,
                   device: torch.device | str = "cpu") -> dict[str, float]:
    """Return the compile time, and the speed-ups and times at the smallest and largest sizes of `rows`."""
    suffix = "" if torch.device(device).type == "cpu" else f"_{torch.device(device).type}"
    found = {"compile_s": compile_s}
    if rows:  # the medians behind the speed-ups (which are medians of per-round ratios, from the same rounds)
        found |= {"fusion_eager_largest_s": rows[-1]["eager_s"], "fusion_eager_smallest_s": rows[0]["eager_s"]}
    if rows and "speedup" in rows[0]:
        found |= {"fusion_speedup_largest": float(rows[-1]["speedup"]),
                  "fusion_speedup_smallest": float(rows[0]["speedup"]),
                  "fusion_compiled_largest_s": rows[-1]["compiled_s"],
                  "fusion_compiled_smallest_s": rows[0]["compiled_s"]}
    return {key + suffix: value for key, value in found.items()}


assert set(fusion_figures(rows, 1.0, "cuda")) == {k + "_cuda" for k in fusion_figures(rows, 1.0)}

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
if torch.cuda.is_available():
    cuda_fn, cuda_compile_s, cuda_note = first_call(compile_chain(chain, dynamic=dynamic), chain,
                                                    device="cuda", dtype=dtype)
    measure.show("CUDA compile", cuda_compile_s)
    cuda_rows = sweep(sizes, chain, cuda_fn, repeat, device="cuda", dtype=dtype)  # no floors: bw is the CPU's
    print(pd.DataFrame(cuda_rows).filter(["mib", "eager_s", "compiled_s", "speedup"]).round(6).to_string(index=False))
    cuda_figures = fusion_figures(cuda_rows, cuda_compile_s, "cuda")  # fusion_speedup_largest_cuda, ...
else:
    cuda_rows, cuda_figures = [], {}
    print("no CUDA GPU here: skipped the GPU compile and sweep")

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
figures = fusion_figures(rows, compile_s) | {"fusion_copy_gb_per_s": bw} | cuda_figures
knobs = {"sizes": sizes, "dtype": str(dtype), "dynamic": dynamic, "bandwidth_mb": bandwidth_mb,
         "compiled": compiled is not None, "devices": ["cpu"] + (["cuda"] if cuda_rows else [])}
path = measure.save_results("05_fusion", figures, rows=rows + [dict(r, device="cuda") for r in cuda_rows],
                           knobs=knobs, repeats=repeat)
print("saved", path.name)
bench_keys = {"compile_s", "fusion_speedup_largest", "fusion_speedup_smallest", "fusion_eager_largest_s",
              "fusion_eager_smallest_s", "fusion_compiled_largest_s", "fusion_compiled_smallest_s"}
assert compiled is None or bench_keys <= set(figures), bench_keys - set(figures)  # what the benchmark reads

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# A pointwise chain run eagerly moves every intermediate through memory; for tensors larger than the caches that
# traffic puts a floor under its time, and counting passes (15 against 2 here) bounds how much fusion can save
# while memory is the limit. The floor is not the whole time: page faults on fresh outputs and the arithmetic of
# sin and cos add to it, and how far above its floor each version landed in this run is printed below.
# `torch.compile` delivers part of the saving on the CPU once its one-off compile time has been paid (printed in
# section 2); for tiny tensors it is the per-call overhead, not memory, that counts. This run's figures:

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
for key, value in figures.items():
    print(f"{key} = {value:.3g}")
print(f"largest size ({big.mib:.0f} MiB): eager {big.eager_s / big.eager_floor_s:.1f}x its traffic floor"
      + (f", compiled {big.compiled_s / big.fused_floor_s:.1f}x its floor" if compiled is not None else ""))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# The slide claims that fusing pointwise operations saves memory access and launch time. We check the speed-up of
# the compiled chain at the largest size measured (where memory traffic dominates) against the claims registry.
# At the smoke scale the largest tensor is only a few MiB, near the caches, where the margin is thin, so nbval
# does not compare this verdict; the next cell, which it compares, only says whether the compiler ran.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
if compiled is None:
    claims.check("fusion_speedup_largest", None, why="torch.compile is not available here")
else:
    claims.check("fusion_speedup_largest", figures)

# %% slideshow={"slide_type": "-"}
print("compiled chain checked against eager:", "yes" if compiled is not None else "no (torch.compile unavailable)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each solution calls the functions above with the notebook's defaults and changes none of its variables.

# %% [markdown] slideshow={"slide_type": "-"}
# **1.** A longer chain. Add two more pointwise ops, `tanh` and a multiply by `x`, in a new function built on
# `chain`, and compile it with `compile_chain`. *Predict on paper first,* by counting passes over memory as the
# chain above was counted: how many passes does eager make now, by what factor should its time grow, does the
# fused kernel's count change, and what becomes the bound on fusion's gain? Time both chains, eager and compiled,
# at the largest size, and count the tensor-sized outputs each call allocates (the profiler's memory count, which
# needs no clock). Which of your predictions hold? Where the compiled time grows although its traffic did
# not, what limits the fused kernel, and does the pass-count bound still say anything about its speed-up?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
from torch.profiler import ProfilerActivity, profile


def ex1_longer(x):
    return chain(x).tanh() * x


def ex1_outputs(fn, n):
    """Count the tensor-sized buffers one call of `fn` allocates (the profiler's own memory count, no clock)."""
    x = torch.randn(n, dtype=dtype)
    fn(x)  # warm: a compiled function allocates its workspace once
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn(x)
    return round(sum(max(e.self_cpu_memory_usage, 0) for e in prof.key_averages()) / x.nbytes, 2)


ex1_compiled, ex1_compile_s, ex1_note = first_call(compile_chain(ex1_longer, dynamic=dynamic), ex1_longer,
                                                   dtype=dtype)
print(f"longer chain: {ex1_note}, first call {ex1_compile_s:.1f} s")
ex1_fns = {"chain": chain, "longer": ex1_longer}
if compiled is not None and ex1_compiled is not None:
    ex1_fns |= {"chain compiled": compiled, "longer compiled": ex1_compiled}
ex1_t = per_call(ex1_fns, sizes[-1], repeat, dtype=dtype)  # all four interleaved, at the largest size
ex1_out = {ex1_name: ex1_outputs(ex1_fn, sizes[-1]) for ex1_name, ex1_fn in ex1_fns.items()}
for ex1_name in ex1_t:
    print(f"{ex1_name} at {sizes[-1] * dtype.itemsize / 2**20:.0f} MiB: {measure.median(ex1_t[ex1_name]) * 1e3:.2f} ms, "
          f"{ex1_out[ex1_name]:g} tensor-sized outputs per call")
ex1_eager = measure.ratio(ex1_t, "longer", "chain")
_ = measure.predicted("eager, longer over chain (20 / 15 passes)", 20 / 15 / 1.25, 20 / 15 * 1.25, ex1_eager, "x")
if "longer compiled" in ex1_t:
    ex1_fused = measure.ratio(ex1_t, "longer compiled", "chain compiled")
    ex1_gain = {k: measure.ratio(ex1_t, k, f"{k} compiled") for k in ("chain", "longer")}
    _ = measure.predicted("compiled, longer over chain (2 passes each: barely moves)",
                          float("-inf"), 1.25, ex1_fused, "x")
    ex1_q = ex1_gain["longer"] / ex1_gain["chain"]
    ex1_moved = "rose" if ex1_q > 1.1 else "fell" if ex1_q < 0.9 else "stayed within 10 %"
    print(f"speed-up of fusion: chain {ex1_gain['chain']:.2f}x (bound 7.5x), longer {ex1_gain['longer']:.2f}x "
          f"(bound 10x): it {ex1_moved} (medians of {repeat} rounds: a single run, no interval)")
    if ex1_fused > 1.25:
        print(f"the fused kernel writes one output either way, yet took {ex1_fused:.2f}x longer: tanh is arithmetic, "
              "so the kernel is compute-bound and the pass-count bound (10x) no longer limits its speed-up")
    elif ex1_fused < 0.8:
        print(f"the longer fused kernel took {ex1_fused:.2f}x the shorter one's time, though it does more: the rounds "
              "were disturbed (a busy machine); raise `repeat` and run it again")
    else:
        print("the fused kernel's time barely moved: it is still limited by its two passes over memory")
    print(f"eager grew {ex1_eager:.2f}x for 20 / 15 = 1.33x the passes: "
          f"{'as counting passes predicts (memory-bound)' if abs(ex1_eager / (20 / 15) - 1) <= 0.25 else 'not as counting passes predicts'}")
if "longer compiled" in ex1_out:  # one output per call, whatever the chain's length: fusion kept its traffic
    ex1_x = torch.randn(1000, dtype=dtype)
    assert ex1_out["longer compiled"] == ex1_out["chain compiled"] == 1, ex1_out
    assert torch.allclose(ex1_compiled(ex1_x), ex1_longer(ex1_x), atol=1e-5)
else:
    print("no compiler here: the fused half of the exercise was skipped")
# the traffic behind the eager prediction, counted without a clock: two more full-size outputs per call
assert ex1_out["longer"] == ex1_out["chain"] + 2, ex1_out

# %% [markdown] slideshow={"slide_type": "subslide"}
# **2.** Double precision. Run the sweep in float64 beside float32 (`sweep(..., dtype=torch.float64)`).
# Every size now moves twice the bytes. Look at the nanoseconds per element: which sizes move from "in cache"
# to "in RAM" (a jump in eager ns per element), and does the speed-up of fusion change where they do?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
ex2_rows = {str(t).removeprefix("torch."): sweep(sizes, chain, compiled, repeat, dtype=t)
            for t in (torch.float32, torch.float64)}
ex2_table = pd.concat({name: pd.DataFrame(r).set_index("n") for name, r in ex2_rows.items()}, axis=1)
for ex2_name in ex2_rows:
    ex2_table[(ex2_name, "eager ns/element")] = ex2_table[(ex2_name, "eager_s")] / ex2_table.index * 1e9
print(ex2_table.loc[:, (slice(None), ["mib", "eager ns/element", "speedup"])].round(2).to_string())
# the sweep's rows are single medians, one dtype after the other: at the largest size, time the two eager chains
# in the same interleaved rounds, on one thread (so that another program on a core slows both alike), and read
# the per-round ratio's interval
ex2_x = {name: torch.rand(max(sizes), dtype=t) for name, t in (("float32", torch.float32), ("float64", torch.float64))}
with measure.torch_threads(1):
    ex2_t = measure.interleaved({name: (lambda x=x: chain(x)) for name, x in ex2_x.items()}, repeat=6, warmup=1)
ex2_ratio = measure.ratios(ex2_t, "float64", "float32")
ex2_low, ex2_high = measure.median_interval(ex2_ratio)
print(f"largest size, one thread: float64's eager chain takes {measure.median(ex2_ratio):.2f}x float32's (95 % "
      f"interval {ex2_low:.2f} to {ex2_high:.2f}, 6 rounds): twice the bytes, half the values per vector instruction")
assert [r["mib"] for r in ex2_rows["float64"]] == [2 * r["mib"] for r in ex2_rows["float32"]]
assert ex2_low > 1.2, f"float64's chain is not clearly slower than float32's: its interval starts at {ex2_low:.2f}"

# %% [markdown] slideshow={"slide_type": "-"}
# **3.** Static shapes. Compile the chain with `dynamic=False` and with `dynamic=True`, and call each at
# `sizes[0]`, again at `sizes[0]`, then at `sizes[1]`. Count the graphs each one compiled (torch's compile
# statistics, `torch._dynamo.utils.counters`) and time each call. Look for what the new size costs: with static
# shapes the function is specialised to one length, so a new length is traced and compiled again, while a
# repeated length is a plain call; with dynamic shapes one graph serves both lengths. (Inductor keeps the code it
# generated in an on-disk cache, so a compile it has seen before, in an earlier run, can take much less time.)

# %% jupyter={"outputs_hidden": true, "source_hidden": true} slideshow={"slide_type": "skip"} tags=["solution", "nbval-ignore-output"]
# Solution: try the exercise first
from torch._dynamo.utils import counters  # torch's own compile statistics


def ex3_static(x):  # a function of its own: compiled code is cached per function, and `chain` has some already
    return chain(x)


def ex3_dynamic(x):
    return chain(x)


def ex3_graphs(fn, dynamic_shapes):
    compiled_fn = compile_chain(fn, dynamic=dynamic_shapes)
    before = counters["stats"]["unique_graphs"]
    seconds = [first_call(compiled_fn, chain, n=n, dtype=dtype)[1] for n in (sizes[0], sizes[0], sizes[1])]
    return counters["stats"]["unique_graphs"] - before, seconds


ex3 = {"dynamic=False": ex3_graphs(ex3_static, False), "dynamic=True": ex3_graphs(ex3_dynamic, True)}
for ex3_name, (ex3_count, ex3_s) in ex3.items():
    print(f"{ex3_name}: {ex3_count} graph(s) compiled; calls at n={sizes[0]}: first {ex3_s[0] * 1e3:.0f} ms, "
          f"again {ex3_s[1] * 1e3:.1f} ms; first at n={sizes[1]}: {ex3_s[2] * 1e3:.0f} ms")
ex3_ran = not any(math.isnan(s) for _, ex3_s in ex3.values() for s in ex3_s)
if ex3_ran:  # graphs counted by torch, not timed: a new length recompiles a static function only
    assert ex3["dynamic=False"][0] == 2 and ex3["dynamic=True"][0] == 1, ex3
else:
    print("the compiler did not run here: the graph counts were skipped")
