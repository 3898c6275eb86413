"""Checking fed values against what a placeholder declares (used by every backend)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from runtime.dtypes import DType
from runtime.errors import FeedError


def _shape_text(shape) -> str:
    if shape is None:
        return "[*]"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def check_feed(name: str, value, dtype: DType, shape: Optional[Sequence[Optional[int]]]) -> np.ndarray:
    """Return ``value`` as a C-contiguous array of ``dtype``; raise FeedError naming ``name``.

    Python scalars and lists are converted; arrays must have a dtype that converts without
    changing kind (float data into an int placeholder is an error, f64 into f32 is fine).
    """
    if isinstance(value, np.ndarray) or np.isscalar(value) and isinstance(value, np.generic):
        arr = np.asarray(value)
        src = arr.dtype
        ok = src == dtype.np or np.can_cast(src, dtype.np, casting="same_kind") and \
            not (dtype.is_integer and src.kind == "f") and not (dtype.is_bool and src.kind != "b") \
            and not (src.kind == "b" and not dtype.is_bool)
        if not ok:
            raise FeedError(f"feed for '{name}' has dtype {src} but the placeholder is {dtype}")
        arr = np.asarray(arr, dtype=dtype.np, order="C")
    else:
        try:
            probe = np.asarray(value)
        except (ValueError, TypeError) as e:
            raise FeedError(f"feed for '{name}' is not a tensor: {e}") from None
        if probe.dtype == object or probe.dtype.kind in "USV":
            raise FeedError(f"feed for '{name}' is not numeric ({probe.dtype}); the placeholder is {dtype}")
        if dtype.is_integer and probe.dtype.kind == "f":
            raise FeedError(f"feed for '{name}' holds floats but the placeholder is {dtype}")
        if dtype.is_bool and probe.dtype.kind != "b":
            raise FeedError(f"feed for '{name}' is not boolean but the placeholder is {dtype}")
        arr = np.asarray(probe, dtype=dtype.np, order="C")
    if shape is not None:
        if arr.ndim != len(shape) or any(d is not None and d != a for d, a in zip(shape, arr.shape)):
            raise FeedError(f"feed for '{name}' has shape {list(arr.shape)} but the placeholder "
                            f"has shape {_shape_text(shape)}")
    return arr
