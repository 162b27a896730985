# %% [markdown] slideshow={"slide_type": "slide"}
# # 08 · Read and decode faster
#
# | | |
# |---|---|
# | **Question** | How fast does this machine read a data file from RAM and from disk, how fast do the installed JPEG decoders decode, and which numpy/torch conversions copy? |
# | **Seeds** | 002: "Read faster" (fast hardware, the storage ladder), "Fast decoding libjpeg-turbo", "Copy between numpy and pytorch", "Faster model: TensorRT" |
# | **GPU** | optional: TensorRT needs an NVIDIA GPU; without one we measure the nearest step this machine can run |
# | **Run time** | smoke ~20 s · workshop ~2 min · full ~5 min |
#
# Before a batch can be collated, every sample is read from storage and decoded. Seed 002 ranks storage from
# RAM down to the internet and recommends libjpeg-turbo for decoding. Here we measure both on this machine, then
# check the seed's table of which numpy/torch conversions copy and which share memory.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
import time
import warnings

import numpy as np
import pandas as pd
import torch

from fastloops_helpers import config, measure
from fastloops_helpers.data import decoders, storage
from fastloops_helpers.measure import plots

print(config.describe())
print(measure.hardware_line())
# numpy 2 asks torch's __array__ for a `copy` keyword it does not take yet; the result is still a copy
warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy keyword")

# %% slideshow={"slide_type": "subslide"}
file_mb = config.size("readdecode.file_mb")  # data file size: bigger averages out noise, costs disk and time
n_images = config.size("readdecode.images")  # JPEGs per size and decoder: more gives steadier rates
sizes_px = (128, 512)                         # two image sizes: a thumbnail and an ImageNet-like photo
figures, rows = {}, []

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. Storage: the page cache vs a cold read
#
# A file read a second time usually comes from the page cache (RAM the kernel keeps for recently read files),
# so a "disk" benchmark that reads a file twice measures RAM. To see the device, we read with `O_DIRECT`, which
# bypasses the cache; where the file system refuses it, we ask the kernel to drop the file's pages
# (`posix_fadvise(DONTNEED)`) and say so. **Prediction:** the page cache reads at a few GB/s (one core's
# copy rate, notebook 00); the cold read at whatever the device gives, from ~100 MB/s (HDD, network disk) to a
# few GB/s (NVMe). On a cloud VM the "disk" is often a network volume, and the host may cache it too.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
path = storage.write_file(config.data_dir() / f"readtest-{file_mb}mb.bin", file_mb)
cached = float(np.median([storage.read_cached(path) for _ in range(3)]))
cold_runs = [storage.read_cold(path) for _ in range(2)]
cold, method = float(np.median([r[0] for r in cold_runs])), cold_runs[0][1]
print(f"{file_mb} MB file | cold read by: {method}")
print(f"page cache: {cached:,.0f} MB/s | cold: {cold:,.0f} MB/s | ratio {cached / cold:.1f}x")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
ladder = pd.DataFrame(storage.LADDER, columns=["storage", "typical_mb_per_s"])
measured = pd.DataFrame([{"storage": "this machine: page cache", "typical_mb_per_s": cached},
                         {"storage": f"this machine: cold ({method.split(',')[0]})", "typical_mb_per_s": cold}])
table = pd.concat([measured, ladder], ignore_index=True).sort_values("typical_mb_per_s", ascending=False)
fig = plots.bars(table, "typical_mb_per_s", "storage", log=True, unit="MB/s",
                 title="Sequential read: measured here vs the seed's ladder (typical values)")
plots.save(fig, "08_read_and_decode-storage")
table.round(0)

# %% [markdown] slideshow={"slide_type": "subslide"}
# The ladder's rows are typical datasheet values, not measurements; the two rows marked "this machine" are.
# Where does the cold read fall on the ladder? That is the storage class this machine's data lives on. An
# epoch over a data set that fits in RAM reads from the page cache from the second epoch on, whatever the
# disk; one that does not fit reads at the cold rate every epoch, and then the disk, not the loader, sets the
# pace: at 100 MB/s, an ImageNet epoch (~140 GB) takes about 25 minutes to read.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. JPEG decoding: which library, how fast
#
# Seed 002 recommends libjpeg-turbo, which Pillow's wheels bundle since Pillow 9. We decode the same JPEGs with
# every decoder installed here, one image at a time on one core. **Prediction:** all of them wrap
# libjpeg-turbo, so they land within a small factor of each other; the differences are per-call overhead
# (visible on small images) and colour conversion; decode time grows with the pixel count, about 16x from
# 128 px to 512 px.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
found, missing = decoders.find_decoders()
print("Pillow uses libjpeg-turbo:", decoders.pillow_uses_turbo())
print("decoders found:", ", ".join(found))
for name, why in missing.items():
    print(f"not available: {name} ({why})")

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
blobs = {px: decoders.encode_jpegs(n_images, px) for px in sizes_px}
dec_rows = [{"decoder": name, "px": px, "img_per_s": decoders.images_per_second(fn, blobs[px])}
            for px in sizes_px for name, fn in measure.progress(found.items(), desc=f"{px} px")]
dec = pd.DataFrame(dec_rows).pivot(index="decoder", columns="px", values="img_per_s")
dec["ratio_to_Pillow_512"] = dec[512] / dec.loc["Pillow", 512]
dec.round(1)

# %% [markdown] slideshow={"slide_type": "subslide"}
# Do they agree? A JPEG decoder may use a different inverse DCT or chroma upsampling, so pixels can differ by
# a few levels without either being wrong. We compare each decoder with Pillow on every image.

# %% slideshow={"slide_type": "-"}
agree = []
for px in sizes_px:
    reference = [found["Pillow"](b) for b in blobs[px]]
    for name, fn in found.items():
        diffs = [decoders.agreement(ref, fn(b)) for ref, b in zip(reference, blobs[px])]
        agree.append({"decoder": name, "px": px, "mean_abs_diff": max(d[0] for d in diffs),
                      "max_abs_diff": max(d[1] for d in diffs)})
agree = pd.DataFrame(agree)
within = bool((agree.mean_abs_diff < 1.0).all() and (agree.max_abs_diff <= 32).all())
print("all decoders agree with Pillow within JPEG tolerance (mean < 1 level, max <= 32):", within)


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. numpy ↔ torch: which conversions copy
#
# Seed 002's table says `torch.tensor(a)` and `np.array(t)` copy, while `torch.from_numpy(a)` and `t.numpy()`
# share memory. A claim about sharing is easy to check: change one side and look at the other. We add the two
# `as` variants, which share when they can.

# %% slideshow={"slide_type": "subslide"}
def shares(make, source):
    """Return True if writing to `source` shows through in `make(source)`."""
    out = make(source)
    source[0] = 99
    return bool(out[0] == 99)


conversions = {
    "torch.tensor(a)": (lambda a: torch.tensor(a), "numpy"),
    "torch.from_numpy(a)": (lambda a: torch.from_numpy(a), "numpy"),
    "torch.as_tensor(a)": (lambda a: torch.as_tensor(a), "numpy"),
    "np.array(t)": (lambda t: np.array(t), "torch"),
    "t.numpy()": (lambda t: t.numpy(), "torch"),
    "np.asarray(t)": (lambda t: np.asarray(t), "torch"),
}
copy_table = pd.DataFrame([
    {"conversion": name, "direction": f"{src} -> {'torch' if src == 'numpy' else 'numpy'}",
     "shares memory": shares(fn, np.zeros(4, np.float32) if src == "numpy" else torch.zeros(4))}
    for name, (fn, src) in conversions.items()]).set_index("conversion")
copy_table

# %% [markdown] slideshow={"slide_type": "subslide"}
# What sharing saves: converting a big array costs a copy through RAM when it copies and nothing when it
# shares. **Prediction:** the copy runs at about the RAM copy rate of notebook 00; the shared view is
# microseconds, independent of size.

# %% slideshow={"slide_type": "-"} tags=["nbval-ignore-output"]
big = np.ones(16 * 2**20, np.float32)  # 64 MiB
for name in ("torch.tensor(a)", "torch.from_numpy(a)"):
    seconds = float(np.median(measure.measure(lambda: conversions[name][0](big), repeat=5, warmup=1)))
    measure.show(f"{name} of 64 MiB", seconds)
    rows.append({"conversion": name, "seconds_64mib": seconds})

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. TensorRT: the seed's last step
#
# TensorRT compiles a trained network for one NVIDIA GPU: it fuses layers, picks the fastest kernel for each
# shape, and can run in FP16 or INT8; `torch_tensorrt` wraps the engine back into a torch module. It needs an
# NVIDIA GPU and the TensorRT libraries, so it cannot run here. The nearest step this machine can take is
# the same idea on the CPU: `torch.compile` (inductor) traces the model, fuses operations and generates
# kernels for this CPU, after inference mode has removed autograd's bookkeeping. **Prediction:** inference
# mode saves a little on a small model; compiling saves more where many small operations can be fused, and
# costs tens of seconds once.

# %% slideshow={"slide_type": "subslide"} tags=["nbval-ignore-output"]
print("torch_tensorrt installed:", __import__("importlib").util.find_spec("torch_tensorrt") is not None,
      "| CUDA GPU:", torch.cuda.is_available())
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3, padding=1),
                            torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).eval()
x = torch.randn(32, 3, 64, 64)
infer = {"eager, autograd on": lambda: model(x)}
infer["eager, inference_mode"] = lambda: torch.inference_mode()(model)(x)
if config.scale() != "smoke":
    compiled = torch.compile(model)
    with torch.inference_mode(), measure.Timer() as build:
        expected, got = model(x), compiled(x)
    measure.show("torch.compile, first call (compile included)", build.seconds)
    assert torch.allclose(expected, got, atol=1e-4)
    infer["torch.compile, inference_mode"] = lambda: torch.inference_mode()(compiled)(x)
else:
    print("torch.compile skipped at smoke scale (it takes 10-60 s to compile); run at workshop to see it")
inf = measure.summarize({k: measure.measure(f) for k, f in infer.items()}, baseline="eager, autograd on")
inf[["median", "uplift_%"]].round(4)

# %% [markdown] slideshow={"slide_type": "subslide"}
# On a GPU, `torch_tensorrt.compile(model, inputs=[...], enabled_precisions={torch.half})` is the call that
# turns the same model into a TensorRT engine; the exercise below says what to compare it with.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Takeaway
#
# The page cache is faster than the cold read (the measured ratio is printed above), so a data set that fits
# in RAM is read at memory speed from its second epoch. The decoders installed here all use libjpeg-turbo and
# agree on the pixels; their speeds differ by per-call overhead and colour handling more than by the decoder.
# `torch.from_numpy` and `.numpy()` share memory, `torch.tensor` and `np.array` copy, exactly as the seed says.
# TensorRT needs an NVIDIA GPU; on the CPU the nearest step is inference mode plus `torch.compile`.

# %% slideshow={"slide_type": "skip"} tags=["nbval-ignore-output"]
figures.update({"read_mb_per_s_cached": cached, "read_mb_per_s_cold": cold, "cached_over_cold": cached / cold})
figures.update({f"decode_img_per_s_{name}_{px}px": v for (name, px), v in
                pd.DataFrame(dec_rows).set_index(["decoder", "px"]).img_per_s.items()})
figures.update({f"infer_s_{k}": v for k, v in inf["median"].items()})
path = measure.save_results("08_read_and_decode", figures, rows=dec_rows + rows,
                           knobs={"file_mb": file_mb, "images": n_images, "sizes_px": sizes_px, "cold_method": method},
                           repeats=3)
print("saved", path.name)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Reproduction check
#
# Seed 002 claims: storage speed matters (RAM beats the disk), Pillow >= 9 decodes with libjpeg-turbo, and the
# copy/share table above. Here: the page cache reads at least 1.5x faster than the cold read (when the cold read
# really bypassed the cache), Pillow reports libjpeg-turbo, and every row of the table matches the seed's.

# %% slideshow={"slide_type": "subslide"}
seed_table = {"torch.tensor(a)": False, "torch.from_numpy(a)": True, "np.array(t)": False, "t.numpy()": True}
if method == "O_DIRECT":
    print("page cache faster than a cold read (> 1.5x):", cached / cold > 1.5)
else:
    print("cold read could not bypass the page cache reliably here; storage check not made")
print("Pillow decodes with libjpeg-turbo:", decoders.pillow_uses_turbo())
print("numpy/torch copy table as in the seed:",
      all(copy_table.loc[k, "shares memory"] == v for k, v in seed_table.items()))
print("decoders agree on pixels:", within)
print("TensorRT step:", "a GPU is here: see exercise 3" if torch.cuda.is_available() else "needs an NVIDIA GPU; none here")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# 1. Set `file_mb` larger than this machine's free RAM (see notebook 00) and use `storage.read_cached`. Does the
#    "cached" rate fall to the cold one? Why?
# 2. Encode the images with `quality=50` in `decoders.encode_jpegs` and re-run section 2. Which decoder gains most?
# 3. On a machine with an NVIDIA GPU, `pip install torch-tensorrt` and compare `torch_tensorrt.compile(model,
#    inputs=[x.cuda()], enabled_precisions={torch.half})` with the eager model on the GPU.
