"""The slides' one-liners that move a nested `xs` to a device: torch's pytree, optree, dm-tree, TensorDict,
`torch.save` + `torch.load(map_location)`, and JAX's `device_put`, each as a function of `(xs, device)`.

Teaching replicas of seeds 000/001 ("PyTree", "Tensordict", "optree", "IO", "JAX"); the helpers' way is
`load.move.move_to`. Explained in notebooks/06_device_moves.ipynb.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import optree
import torch
from tensordict import TensorDict
from torch.utils._pytree import tree_map

try:
    import tree as dm_tree  # optional: pip install dm-tree
except ImportError:
    dm_tree = None


def pytree_move(xs: Any, device: torch.device | str) -> Any:
    """Move every tensor with torch's own pytree (the slide's "PyTree")."""
    return tree_map(lambda x: x.to(device), xs)


def optree_move(xs: Any, device: torch.device | str) -> Any:
    """Move every tensor with optree, whose tree walk is written in C++."""
    return optree.tree_map(lambda x: x.to(device), xs)


def dm_tree_move(xs: Any, device: torch.device | str) -> Any:
    """Move every tensor with DeepMind's tree (dm-tree)."""
    return dm_tree.map_structure(lambda x: x.to(device), xs)


def tensordict_move(xs: Any, device: torch.device | str) -> Any:
    """Build a TensorDict from the nested dict, then move it in one call."""
    return TensorDict.from_dict(xs).to(device)


def torch_save_move(xs: Any, device: torch.device | str) -> Any:
    """Serialise into memory, then load onto `device` (the slide's "IO")."""
    temp = io.BytesIO()
    torch.save(xs, temp)
    temp.seek(0)
    return torch.load(temp, map_location=device, weights_only=True)


def jax_via_numpy(xs: Any, device: Any) -> Any:
    """Convert torch tensors to numpy arrays, then `jax.device_put` the whole tree."""
    import jax  # optional: pip install jax

    return jax.device_put(jax.tree_util.tree_map(np.asarray, xs), device)


def jax_via_dlpack(xs: Any, device: Any) -> Any:
    """Hand torch's buffers to JAX through DLPack, then `jax.device_put` the whole tree."""
    import jax

    return jax.device_put(jax.tree_util.tree_map(jax.dlpack.from_dlpack, xs), device)


def jax_device_put(jax_xs: Any, device: Any) -> Any:
    """Put a tree of JAX arrays on `device` in one call (the slide's "JAX")."""
    import jax

    return jax.device_put(jax_xs, device)


def jax_tree_map_device_put(jax_xs: Any, device: Any) -> Any:
    """Put a tree of JAX arrays on `device` one leaf at a time."""
    import jax

    return jax.tree_util.tree_map(lambda a: jax.device_put(a, device), jax_xs)
