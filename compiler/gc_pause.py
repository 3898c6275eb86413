"""Pausing Python's cyclic garbage collector while a model is parsed and built, and while a step
is compiled (``compiler/master.py``): both allocate many objects that live on."""
from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

# Pauses overlap (a build parses inside a build; two threads build models at once): the
# collector is disabled by the first to start and restored by the last to end, under one lock,
# so no pause ends another's early and no two threads freeze and unfreeze at once.
_lock = threading.Lock()
_active = 0
_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Parsing and building allocate hundreds of thousands of objects (syntax tree, nodes),
    none garbage until the build ends: the cyclic collector would scan them again and again
    (more than half the time of parsing a 5,000-line model), so it waits until the end.

    At the end, what was allocated meanwhile is still in the youngest generation, and the
    first allocation after ``gc.enable()`` would scan all of it at once (tens of milliseconds
    for a 5,000-line model). The graph outlives the build, so these objects go straight to the
    oldest generation instead (``freeze`` then ``unfreeze`` moves them there without a scan),
    where a full collection finds any garbage among them, as it would for any old object.
    That is skipped when someone else froze objects (``unfreeze`` would release theirs too)."""
    global _active, _was_enabled
    with _lock:
        if _active == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _was_enabled:
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()
