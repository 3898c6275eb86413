"""Where compiled things are cached on disk (``FLOWC_CACHE_DIR`` or ``~/.cache/flowc``)."""
from __future__ import annotations

import os


def cache_root() -> str:
    d = os.environ.get("FLOWC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "flowc")
    os.makedirs(d, exist_ok=True)
    return d


def artifact_cache_dir() -> str:
    d = os.path.join(cache_root(), "artifacts")
    os.makedirs(d, exist_ok=True)
    return d
