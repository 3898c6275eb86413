"""Checking fed values against what a placeholder declares (used by every backend).

Rules: an array of exactly the placeholder's dtype passes as it is. Otherwise the value is
converted when that keeps its kind and its values: ints into a float placeholder, f64 into
f32 and i64 into i32 (when every value fits) are fine; floats into an int placeholder, bools
into a numeric one (and the reverse), strings and objects are FeedErrors. A bf16 placeholder
also takes 2-byte void arrays as bf16 bits (what ``np.load`` gives for a saved bfloat16 array).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from runtime.dtypes import DType, numpy_kind
from runtime.errors import FeedError


def _shape_text(shape) -> str:
    if shape is None:
        return "[*]"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


class FeedCheck:
    """A precomputed check of one feed: call it with a value, get a C-contiguous array."""

    __slots__ = ("name", "dtype", "np_dtype", "shape", "static_shape", "rank", "scalar_type",
                 "takes_floats", "keep_scalars")

    def __init__(self, name: str, dtype: DType, shape: Optional[Sequence[Optional[int]]],
                 keep_scalars: bool = False):
        self.name = name
        self.dtype = dtype
        self.np_dtype = dtype.np
        self.shape = None if shape is None else tuple(shape)
        self.rank = None if shape is None else len(self.shape)
        fully = self.shape is not None and all(d is not None for d in self.shape)
        self.static_shape = self.shape if fully else None
        self.scalar_type = self.np_dtype.type         # np.float32 for f32: fed as it is
        self.takes_floats = dtype.is_floating         # a Python float converts without checks
        # A numpy scalar of exactly the dtype passes as it is (no rank-0 array is made) for
        # callers that take one: the compiled step's run path (runtime/module.py). Not an
        # ml_dtypes bfloat16 scalar: numpy's C API does not read its value, so it becomes a
        # rank-0 array.
        self.keep_scalars = keep_scalars and dtype is not DType.bf16

    def __call__(self, value) -> np.ndarray:
        t = type(value)
        if t is np.ndarray and value.dtype is self.np_dtype and value.flags.c_contiguous:
            arr = value                                   # the fast path: nothing to convert
        elif t is self.scalar_type:
            arr = value if self.keep_scalars else np.array(value, self.np_dtype)
        elif t is float and self.takes_floats:
            arr = np.array(value, self.np_dtype)          # a scalar: a rank-0 array, no checks
        else:
            arr = self.convert(value)
        if arr.shape != self.static_shape and self.shape is not None:
            if arr.ndim != self.rank or any(d is not None and d != a
                                            for d, a in zip(self.shape, arr.shape)):
                raise FeedError(f"feed for '{self.name}' has shape {list(arr.shape)} but the "
                                f"placeholder has shape {_shape_text(self.shape)}")
        return arr

    def convert(self, value) -> np.ndarray:
        """``value`` as a C-contiguous array of the feed's dtype, or a FeedError saying why."""
        name, dtype = self.name, self.dtype
        if isinstance(value, (np.ndarray, np.generic)):
            arr = np.asarray(value)
        else:
            try:
                arr = np.asarray(value)
            except (ValueError, TypeError) as e:
                raise FeedError(f"feed for '{name}' is not a tensor: {e}") from None
            if arr.dtype.kind in "fO" and dtype.is_integer and _python_ints(value):
                try:                    # ints numpy reads as floats (above 2**63): exact
                    return np.array(value, dtype=self.np_dtype)
                except OverflowError:
                    raise FeedError(f"feed for '{name}' holds a value out of range for "
                                    f"{dtype}") from None
        src = arr.dtype
        if dtype is DType.bf16 and src.kind == "V" and src.itemsize == 2 and not src.names:
            # the bits of bf16 values as numpy's .npy format keeps them (a 2-byte void)
            return np.ascontiguousarray(arr).view(self.np_dtype)
        kind = numpy_kind(src)
        if kind not in "biuf":
            raise FeedError(f"feed for '{name}' is not numeric ({_describe(value, src)}); "
                            f"the placeholder is {dtype}")
        if dtype.is_bool != (kind == "b"):
            raise FeedError(f"feed for '{name}' has dtype {src} but the placeholder is {dtype}"
                            + ("" if dtype.is_bool else "; booleans do not feed numbers"))
        if dtype.is_integer and kind == "f":
            raise FeedError(f"feed for '{name}' holds floats ({src}) but the placeholder is "
                            f"{dtype}; cast it first if truncation is intended")
        if dtype.is_integer and kind in "iu" and arr.size and \
                not np.can_cast(src, self.np_dtype, casting="safe"):
            info = np.iinfo(self.np_dtype)
            lo, hi = arr.min(), arr.max()
            if lo < info.min or hi > info.max:
                bad = lo if lo < info.min else hi
                raise FeedError(f"feed for '{name}' holds {bad}, which is out of range for "
                                f"{dtype}")
        return np.asarray(arr, dtype=self.np_dtype, order="C")


def _python_ints(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_python_ints(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool)


def _describe(value, src: np.dtype) -> str:
    if src.kind == "O":
        return f"a {type(value).__name__}"
    return str(src)


def check_feed(name: str, value, dtype: DType, shape: Optional[Sequence[Optional[int]]]) -> np.ndarray:
    """Return ``value`` as a C-contiguous array of ``dtype``; raise FeedError naming ``name``."""
    return FeedCheck(name, dtype, shape)(value)
