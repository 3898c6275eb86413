"""The C run path of a compiled step (``runtime/csrc/flowc_fastcall.c``), built on first use.

``Executable.call`` spends most of a small step's time in Python: filling the feed structs
through cffi, the cffi call itself, and wrapping each fetched buffer. The extension does that
work in one C call. It is compiled once per Python version and source text with the system C
compiler against this Python's and numpy's headers, and cached beside the compiled modules
(``FLOWC_CACHE_DIR``, default ``~/.cache/flowc``). Where it cannot be built (no compiler, no
Python headers) or ``FLOWC_FASTCALL=0`` is set, ``load()`` returns None and the cffi path is
used: both give the same results (tests/runtime/test_fastcall.py). With ``FLOWC_SANITIZE`` set
it is built with those sanitizers, as the compiled modules are (``runtime/sanitize.py``).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from typing import Optional

import numpy as np

from runtime import sanitize

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "flowc_fastcall.c")
HEADER = os.path.join(os.path.dirname(SOURCE), "flowc_rt.h")
_lock = threading.Lock()
_loaded: list = []                       # [module or None] once load() has run
build_error: Optional[str] = None        # why the extension is not in use, when it is not


def _cache_dir() -> str:
    base = os.environ.get("FLOWC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                              "flowc")
    return os.path.join(base, "fastcall")


def _compiler() -> Optional[str]:
    for cc in (os.environ.get("CC"), sysconfig.get_config_var("CC"), "cc", "gcc"):
        if cc and shutil.which(cc.split()[0]):
            return cc.split()[0]
    return None


def _build(path: str, extra_flags: tuple = ()) -> None:
    cc = _compiler()
    if cc is None:
        raise OSError("no C compiler found")
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise OSError(f"Python.h is not in {include} (install the Python headers)")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(fd)
    try:
        cmd = [cc, "-O2", "-shared", "-fPIC", "-std=gnu11", *extra_flags, f"-I{include}",
               f"-I{np.get_include()}", f"-I{os.path.dirname(SOURCE)}", SOURCE, "-o", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise OSError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()}")
        os.replace(tmp, path)               # atomic: a concurrent builder's copy is the same
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _import(path: str):
    loader = importlib.machinery.ExtensionFileLoader("flowc_fastcall", path)
    spec = importlib.util.spec_from_file_location("flowc_fastcall", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def load():
    """The extension module (its ``call``), or None when it cannot be used here."""
    if _loaded:
        return _loaded[0]
    global build_error
    with _lock:
        if _loaded:
            return _loaded[0]
        module = None
        if os.environ.get("FLOWC_FASTCALL", "1") == "0":
            build_error = "FLOWC_FASTCALL=0"
        else:
            try:
                sanitizers = sanitize.from_environ()
                sanitize.check_loadable(sanitizers)
                flags = sanitize.compile_flags(sanitizers)
                digest = hashlib.sha256(sys.version.encode() + np.__version__.encode()
                                        + " ".join(flags).encode())
                for source in (SOURCE, HEADER):
                    with open(source, "rb") as f:
                        digest.update(f.read())
                key = digest.hexdigest()[:24]
                suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
                path = os.path.join(_cache_dir(), f"flowc_fastcall-{key}{suffix}")
                if not os.path.exists(path):
                    _build(path, flags)
                module = _import(path)
            except (OSError, ImportError, sanitize.SanitizerError) as e:
                build_error = str(e)
        _loaded.append(module)
        return module
