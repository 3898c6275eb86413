"""TensorFlow-named ``broadcast_to``, ``linspace`` (``lin_space``) and ``meshgrid``, built over
ops as TensorFlow 1.x builds them (``meshgrid``: reshapes times ones)."""
from __future__ import annotations

from typing import List, Optional

from dsl.array_ops import _as_index, ones, reshape, size
from dsl.context import name_scope
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor

__all__ = ["broadcast_to", "linspace", "lin_space", "meshgrid"]


def broadcast_to(input, shape, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """``input`` broadcast to ``shape`` (numpy's rules), as a new tensor (BroadcastTo)."""
    return apply_op("BroadcastTo", [convert_to_tensor(input), _as_index(shape)],
                    name=name or "BroadcastTo")


def linspace(start, stop, num, name: Optional[str] = None) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop``, both included (LinSpace;
    start and stop are floats)."""
    if isinstance(stop, Tensor) and not isinstance(start, Tensor):
        start = convert_to_tensor(start, dtype=stop.dtype)
    start = convert_to_tensor(start)
    stop = convert_to_tensor(stop, dtype=start.dtype)
    return apply_op("LinSpace", [start, stop, _as_index(num)], name=name or "LinSpace")


lin_space = linspace


def meshgrid(*args, **kwargs) -> List[Tensor]:
    """N-D coordinate grids from N 1-D tensors (``tf.meshgrid``): ``indexing="xy"``
    (Cartesian, the first two outputs' dims swapped) or ``"ij"`` (matrix indexing)."""
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        key = list(kwargs.keys())[0]
        raise TypeError(f"'{key}' is an invalid keyword argument for this function")
    if indexing not in ("xy", "ij"):
        raise ValueError("indexing parameter must be either 'xy' or 'ij'")
    with name_scope(name):
        ndim = len(args)
        s0 = (1,) * ndim
        if not ndim:
            return []
        args = [convert_to_tensor(x) for x in args]
        output = [reshape(x, s0[:i] + (-1,) + s0[i + 1:]) for i, x in enumerate(args)]
        shapes = [size(x) for x in args]
        if indexing == "xy" and ndim > 1:
            output[0] = reshape(output[0], (1, -1) + (1,) * (ndim - 2))
            output[1] = reshape(output[1], (-1, 1) + (1,) * (ndim - 2))
            shapes[0], shapes[1] = shapes[1], shapes[0]
        mult_fact = ones(shapes, args[0].dtype)
        return [x * mult_fact for x in output]
