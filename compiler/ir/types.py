"""Tensor types: a dtype and a shape whose dims (or rank) may be unknown."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from runtime.dtypes import DType, as_dtype

Dim = Optional[int]            # None: unknown dimension
Shape = Optional[tuple]        # None: unknown rank; else a tuple of Dim


def normalize_shape(shape) -> Shape:
    """Turn a user-given shape (list, tuple, None, -1 or None for unknown dims) into a Shape."""
    if shape is None:
        return None
    if isinstance(shape, int):
        shape = (shape,)
    if hasattr(shape, "as_list") and hasattr(shape, "rank"):   # a TensorShape (TF's or dsl's)
        if shape.rank is None:
            return None
        shape = shape.as_list()
    dims = []
    for d in shape:
        if d is not None and not isinstance(d, int) and hasattr(d, "value"):   # a Dimension
            d = d.value
        if d is None or (isinstance(d, (int,)) and not isinstance(d, bool) and d == -1):
            dims.append(None)
        else:
            d = int(d)
            if d < 0:
                raise ValueError(f"negative dimension {d} in shape {list(shape)}")
            dims.append(d)
    return tuple(dims)


def _is_normal(dims: tuple) -> bool:
    """Whether ``normalize_shape`` keeps these dims as they are (shape functions return
    normal shapes, and a build makes a type per node)."""
    for d in dims:
        if d is not None and (type(d) is not int or d < 0):
            return False
    return True


def shape_str(shape: Shape) -> str:
    if shape is None:
        return "[*]"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


@dataclass(frozen=True, init=False)
class TensorType:
    dtype: DType
    shape: Shape = None

    def __init__(self, dtype: DType, shape: Shape = None):
        # by hand, not the dataclass's: a build makes a type per node
        if type(dtype) is not DType:
            dtype = as_dtype(dtype)
        if type(shape) is not tuple or not _is_normal(shape):
            shape = normalize_shape(shape)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "shape", shape)

    @property
    def rank(self) -> Optional[int]:
        return None if self.shape is None else len(self.shape)

    @property
    def is_fully_defined(self) -> bool:
        return self.shape is not None and all(d is not None for d in self.shape)

    @property
    def num_elements(self) -> Optional[int]:
        if not self.is_fully_defined:
            return None
        n = 1
        for d in self.shape:
            n *= d
        return n

    def is_compatible_with(self, other: "TensorType") -> bool:
        return self.dtype == other.dtype and shapes_compatible(self.shape, other.shape)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(self.dtype, shape)

    def __str__(self) -> str:
        if self.dtype is DType.resource:
            return "resource"
        return f"{self.dtype.ir_name}{shape_str(self.shape)}"


def shapes_compatible(a: Shape, b: Shape) -> bool:
    if a is None or b is None:
        return True
    if len(a) != len(b):
        return False
    return all(x is None or y is None or x == y for x, y in zip(a, b))


def merge_shapes(a: Shape, b: Shape) -> Shape:
    """The most specific shape compatible with both (raises ValueError if incompatible)."""
    if a is None:
        return b
    if b is None:
        return a
    if not shapes_compatible(a, b):
        raise ValueError(f"shapes {shape_str(a)} and {shape_str(b)} are incompatible")
    return tuple(x if x is not None else y for x, y in zip(a, b))


def broadcast_shapes(shapes: Sequence[Shape]) -> Shape:
    """numpy broadcasting over partially known shapes (raises ValueError if incompatible)."""
    if len(shapes) == 2:                  # the usual case, in short: equal shapes, or a scalar
        a, b = shapes
        if a is not None and b is not None:
            if not b or a == b:
                return tuple(a)
            if not a:
                return tuple(b)
    if any(s is None for s in shapes):
        return None
    distinct = {tuple(s) for s in shapes if len(s)}
    if len(distinct) <= 1:                # scalars and one shape (the usual case): that shape
        return distinct.pop() if distinct else ()
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ValueError("shapes " + " and ".join(shape_str(s) for s in shapes)
                             + " cannot be broadcast together")
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def resource_type() -> TensorType:
    return TensorType(DType.resource, ())


def types_of(dtypes: Iterable) -> list:
    return [TensorType(d) for d in dtypes]
