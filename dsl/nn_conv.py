"""`fl.nn` convolution and pooling: conv2d, max_pool, avg_pool (NHWC)."""
from __future__ import annotations

__all__: list = []
