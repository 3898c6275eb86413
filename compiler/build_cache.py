"""Where compiled things are cached on disk (``FLOWC_CACHE_DIR`` or ``~/.cache/flowc``), and
how a built shared object enters the cache: a compiled module ``<key>.so`` counts as cached
only beside a ``<key>.so.sha256`` stamp of its contents, written last, so a build cut short or
a damaged file is built again; a source the compiler rejected is kept under ``failed/``."""
from __future__ import annotations

import os
import shutil
from typing import Optional

from runtime.artifact import sha256_file
from compiler.options import setting


def cache_root() -> str:
    d = setting("FLOWC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "flowc")
    os.makedirs(d, exist_ok=True)
    return d


def artifact_cache_dir() -> str:
    d = os.path.join(cache_root(), "artifacts")
    os.makedirs(d, exist_ok=True)
    return d


def cached_digest(so: str) -> Optional[str]:
    """The SHA-256 of ``so`` where it is in the cache, whole (its stamp names its contents'
    hash), else None."""
    stamp = so + ".sha256"
    if not (os.path.exists(so) and os.path.exists(stamp)):
        return None
    with open(stamp) as f:
        digest = f.read().strip()
    return digest if digest == sha256_file(so) else None


def is_cached(so: str) -> bool:
    """``so`` is in the cache, whole: its stamp names its contents' hash."""
    return cached_digest(so) is not None


def publish(built: str, so: str) -> str:
    """Move the freshly built ``built`` to ``so`` and stamp it (both atomic renames); the
    SHA-256 of its contents."""
    digest = sha256_file(built)
    os.replace(built, so)
    stamp = so + ".sha256"
    with open(stamp + ".tmp", "w") as f:
        f.write(digest)
    os.replace(stamp + ".tmp", stamp)
    return digest


def keep_failed_source(src: str, key: str) -> str:
    """A copy of a source the compiler rejected, under the cache's ``failed/`` (its path)."""
    kept = os.path.join(cache_root(), "failed", key + os.path.splitext(src)[1])
    os.makedirs(os.path.dirname(kept), exist_ok=True)
    shutil.copy(src, kept)
    return kept
