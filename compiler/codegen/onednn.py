"""oneDNN as the engine of large forward convolutions in the generated C, found the way
scipy-openblas32 is for MatMul: the ``onednn-cpu-gomp`` wheel (the library, built with GNU
OpenMP, so it shares libgomp with flowc's parallel loops) and ``onednn-devel-cpu-gomp`` (its
headers) install into this Python's prefix (``lib/libdnnl.so.3``, ``include/oneapi/dnnl``).

``FLOWC_ONEDNN_ROOT`` names another prefix holding both, or ``0`` for none. Where neither is
found, convolutions keep flowc's own kernels (im2col + OpenBLAS, or the direct kernel), so
oneDNN is an optional speed-up, never a requirement. Which convolutions use it is decided per
shape by ``compiler/codegen/c_ops/conv_engine.py``.

The ``onednn`` wheel of the same project (2026.x) is not used: it is the SYCL build and needs
Intel's DPC++ and OpenCL runtimes and TBB (``libsycl.so``, hundreds of MB) to load.
"""
from __future__ import annotations

import functools
import glob
import os
import re
import site
import sys
from typing import Optional, Tuple

from compiler.options import setting

HEADER = os.path.join("include", "oneapi", "dnnl", "dnnl.h")
VERSION_HEADER = os.path.join("include", "oneapi", "dnnl", "dnnl_version.h")
LIBRARY = os.path.join("lib", "libdnnl.so.3")
MIN_MAJOR = 3                            # the C API generation the helpers are written for


def _prefixes() -> Tuple[str, ...]:
    """Where pip puts a wheel's data files: this Python's prefix, its base, the user's."""
    user = getattr(site, "USER_BASE", None)
    return tuple(p for p in (sys.prefix, sys.base_prefix, user) if p)


def version_of(prefix: str) -> Optional[Tuple[int, int, int]]:
    """oneDNN's (major, minor, patch) from ``prefix``'s dnnl_version.h, or None."""
    try:
        with open(os.path.join(prefix, VERSION_HEADER), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    parts = [re.search(rf"#define DNNL_VERSION_{k}\s+(\d+)", text) for k in
             ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        return None
    return tuple(int(m.group(1)) for m in parts)      # type: ignore[return-value]


def _usable(prefix: str) -> bool:
    version = version_of(prefix)
    return (os.path.isfile(os.path.join(prefix, HEADER))
            and os.path.isfile(os.path.join(prefix, LIBRARY))
            and version is not None and version[0] >= MIN_MAJOR)


@functools.lru_cache(maxsize=None)
def _find(root: str) -> Optional[str]:
    if root:
        if root == "0":
            return None
        return os.path.abspath(root) if _usable(root) else None
    for prefix in _prefixes():
        if _usable(prefix):
            return os.path.abspath(prefix)
    return None


def onednn_prefix() -> Optional[str]:
    """The prefix of a usable oneDNN (headers, library, C API 3.x), or None."""
    return _find(setting("FLOWC_ONEDNN_ROOT").strip())


def available() -> bool:
    return onednn_prefix() is not None


def onednn_flags() -> tuple:
    """Include and link flags of the oneDNN found (``()`` when none)."""
    prefix = onednn_prefix()
    if prefix is None:
        return ()
    libdir = os.path.join(prefix, "lib")
    return (f"-I{os.path.join(prefix, 'include')}", os.path.join(prefix, LIBRARY),
            f"-Wl,-rpath,{libdir}")


def onednn_tag() -> str:
    """What the generated code depends on (for cache keys): the prefix and version found, or
    '' when none is: a step compiled with oneDNN is not served once it is gone, and the
    other way round."""
    prefix = onednn_prefix()
    if prefix is None:
        return ""
    libs = sorted(glob.glob(os.path.join(prefix, "lib", "libdnnl.so*")))
    sizes = [os.path.getsize(p) for p in libs if os.path.isfile(p)]
    return f"onednn={prefix}:{version_of(prefix)}:{sizes}"
