"""Pausing Python's cyclic garbage collector while a model is parsed and built."""
from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Parsing and building allocate hundreds of thousands of objects (syntax tree, nodes),
    none garbage until the build ends: the cyclic collector would scan them again and again
    (more than half the time of parsing a 5,000-line model), so it waits until the end."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
