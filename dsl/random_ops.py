"""Random tensors (`fl.random_uniform`, `fl.random_normal`, ...) from counter-based Philox streams."""
from __future__ import annotations

__all__: list = []
