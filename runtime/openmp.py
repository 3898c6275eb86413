"""How the OpenMP threads of flowc's parallel loops wait between loops.

libgomp's threads spin (busy-wait) for a while after each parallel loop by default. A step
alternates its parallel loops with OpenBLAS calls, whose own threads then find every core
taken by a spinning OpenMP thread: with ``FLOWC_NUM_THREADS=2`` on two cores the MLP's
batch-1024 training step took 47 ms against 14 ms with the OpenMP threads sleeping instead
(``OMP_WAIT_POLICY=PASSIVE``). So before the first compiled module is loaded, flowc loads
libgomp with ``OMP_WAIT_POLICY=PASSIVE`` (it reads its settings when it loads) and then
restores the environment, so that other libraries loaded later (PyTorch's own OpenMP, say)
keep theirs. A user who sets ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` keeps that choice;
where libgomp was loaded before (by another library), its settings stay as they are.
"""
from __future__ import annotations

import ctypes
import os
import threading

_lock = threading.Lock()
_done = False


def load_libgomp_passive() -> None:
    """Load libgomp with passive waiting, once per process (see the module's docstring)."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        _done = True
        if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
            return
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        try:
            ctypes.CDLL("libgomp.so.1", mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass                            # no libgomp here: modules without OpenMP load
        finally:
            del os.environ["OMP_WAIT_POLICY"]
