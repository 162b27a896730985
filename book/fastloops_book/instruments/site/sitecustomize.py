"""Read by every Python process that starts with this folder on its PYTHONPATH (the book's test runs set it).

When FASTLOOPS_WARP holds a seed, or a liveness run lists what it slowed, the instruments are installed as soon as
the library is imported; otherwise nothing is imported and nothing changes.
"""

import os

if os.environ.get("FASTLOOPS_WARP", "").strip() or os.environ.get("FASTLOOPS_LIVENESS_SLOWED"):
    from fastloops_book.instruments import hooks

    hooks.after_import("fastloops_helpers", hooks.install)
