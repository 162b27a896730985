"""Import an optional dependency, or say which extra of the package brings it.

The core install (`pip install fastloops-helpers`) needs only torch, numpy, pandas and a few small libraries;
each optional piece names its extra: `require("webdataset", "stream")` raises
`ImportError: webdataset is not installed: pip install 'fastloops-helpers[stream]'`.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str) -> ModuleType:
    """Return the imported `module`, or raise an ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise ImportError(
            f"{top} is not installed: pip install 'fastloops-helpers[{extra}]' "
            f"(from a checkout: pip install -e '.[{extra}]')"
        ) from exc
