"""Random tensors (`fl.random_uniform`, `fl.random_normal`, ...) from counter-based Philox streams.

Seeds follow TF1's rule for a graph without a graph-level seed: an explicit op ``seed`` gives
the op attrs ``seed = 87654321`` (TF's DEFAULT_GRAPH_SEED) and ``seed2 = seed``, so the numbers
are TensorFlow's for the same call. Without a seed, TF would draw a nondeterministic one;
here the op gets ``seed = 87654321`` and ``seed2`` = the number of nodes already in the graph,
so a program builds the same numbers every time and distinct ops draw distinct streams.
Every run of a step draws the same numbers (see ``compiler/ops/random.py``).
"""
from __future__ import annotations

from typing import Optional, Tuple

from dsl.array_ops import _as_index
from dsl.context import get_default_graph
from dsl.math_ops import add, multiply, subtract
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor
from runtime.dtypes import DType, as_dtype

__all__ = ["random_uniform", "random_normal", "truncated_normal", "multinomial", "op_seeds",
           "DEFAULT_GRAPH_SEED", "set_random_seed", "random_crop",
           "random_shuffle"]

DEFAULT_GRAPH_SEED = 87654321


def set_random_seed(seed: Optional[int]) -> None:
    """The default graph's seed (``tf.set_random_seed``): random ops made afterwards take it
    as their ``seed`` attr instead of TensorFlow's DEFAULT_GRAPH_SEED (None: back to that)."""
    get_default_graph().seed = None if seed is None else int(seed)


def op_seeds(seed: Optional[int]) -> Tuple[int, int]:
    """The (seed, seed2) attrs of a new random op for the op-level ``seed`` (None: derived),
    under the graph's seed (``set_random_seed``) if it has one."""
    g = get_default_graph()
    graph_seed = getattr(g, "seed", None)
    first = DEFAULT_GRAPH_SEED if graph_seed is None else graph_seed
    if seed is not None:
        return first, int(seed)
    return first, sum(1 for _ in g)


def _float_dtype(dtype) -> DType:
    dtype = as_dtype(dtype)
    if dtype not in (DType.f32, DType.f64):
        raise TypeError(f"random floats must be float32 or float64, got {dtype}")
    return dtype


def _source(op: str, shape, dtype: DType, seed: Optional[int]) -> Tensor:
    s, s2 = op_seeds(seed)
    return apply_op(op, [_as_index(shape)], {"dtype": dtype, "seed": s, "seed2": s2}, name=op)


def random_uniform(shape, minval=0, maxval=None, dtype=DType.f32, seed: Optional[int] = None,
                   name: Optional[str] = None) -> Tensor:
    """Uniform numbers in [minval, maxval) (floats: maxval 1 by default), as tf.random.uniform."""
    dtype = as_dtype(dtype)
    if dtype in (DType.i32, DType.i64):
        if maxval is None:
            raise ValueError(f"random_uniform of {dtype} needs maxval")
        s, s2 = op_seeds(seed)
        lo = convert_to_tensor(minval, dtype=dtype)
        hi = convert_to_tensor(maxval, dtype=dtype)
        return apply_op("RandomUniformInt", [_as_index(shape), lo, hi],
                        {"seed": s, "seed2": s2}, name=name or "random_uniform")
    dtype = _float_dtype(dtype)
    rnd = _source("RandomUniform", shape, dtype, seed)
    lo = convert_to_tensor(minval, dtype=dtype)
    hi = convert_to_tensor(1 if maxval is None else maxval, dtype=dtype)
    return add(multiply(rnd, subtract(hi, lo)), lo, name=name or "random_uniform")


def random_normal(shape, mean=0.0, stddev=1.0, dtype=DType.f32, seed: Optional[int] = None,
                  name: Optional[str] = None) -> Tensor:
    """Normal numbers with ``mean`` and ``stddev``, as tf.random.normal."""
    dtype = _float_dtype(dtype)
    rnd = _source("RandomStandardNormal", shape, dtype, seed)
    return add(multiply(rnd, convert_to_tensor(stddev, dtype=dtype)),
               convert_to_tensor(mean, dtype=dtype), name=name or "random_normal")


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=DType.f32, seed: Optional[int] = None,
                     name: Optional[str] = None) -> Tensor:
    """Normals within two stddevs of ``mean`` (others redrawn), as tf.random.truncated_normal."""
    dtype = _float_dtype(dtype)
    rnd = _source("TruncatedNormal", shape, dtype, seed)
    return add(multiply(rnd, convert_to_tensor(stddev, dtype=dtype)),
               convert_to_tensor(mean, dtype=dtype), name=name or "truncated_normal")


def multinomial(logits, num_samples, seed: Optional[int] = None, name: Optional[str] = None,
                output_dtype=None) -> Tensor:
    """``num_samples`` class indices per row of ``logits`` [batch, num_classes], drawn from
    ``softmax(logits[b])`` (TF1's ``tf.multinomial``; int64 unless ``output_dtype``)."""
    logits = convert_to_tensor(logits)
    out = DType.i64 if output_dtype is None else as_dtype(output_dtype)
    if out not in (DType.i32, DType.i64):
        raise TypeError(f"output_dtype must be int32 or int64, got {out}")
    s, s2 = op_seeds(seed)
    return apply_op("Multinomial", [logits, convert_to_tensor(num_samples, dtype=DType.i32)],
                    {"seed": s, "seed2": s2, "output_dtype": out}, name=name or "multinomial")


def categorical(logits, num_samples, dtype=None, seed: Optional[int] = None,
                name: Optional[str] = None) -> Tensor:
    """``tf.random.categorical``: ``multinomial`` with the output type named ``dtype``."""
    return multinomial(logits, num_samples, seed=seed, name=name or "categorical",
                       output_dtype=dtype)


def random_crop(value, size, seed: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    """``tf.random_crop``: a slice of ``value`` of shape ``size`` (one entry per dim) at an
    offset drawn uniformly among those that fit. A ``size`` larger than ``value`` is a
    ValueError when both are known while building, else the Slice's error at run time."""
    import numpy as np
    from dsl.array_ops import shape as shape_of, slice as slice_
    from dsl.math_ops import floormod, maximum
    value = convert_to_tensor(value)
    if not isinstance(size, Tensor) and value.shape.ndims is not None:
        want = [int(v) for v in np.reshape(np.asarray(size), -1)]
        have = value.shape.as_list()
        if len(want) != len(have):
            raise ValueError(f"random_crop: size {want} must have one entry per dim of the "
                             f"value's shape {have}")
        if any(h is not None and h < w for h, w in zip(have, want)):
            raise ValueError(f"Need value.shape >= size, got {have} {want}")
    size = _as_index(size, DType.i32)
    shape = shape_of(value)
    one = convert_to_tensor(np.int32(1))
    limit = maximum(add(subtract(shape, size), one), one)
    offset = floormod(random_uniform(shape_of(shape), dtype=DType.i32, maxval=2 ** 31 - 1,
                                     seed=seed), limit)
    return slice_(value, offset, size, name=name or "random_crop")


def random_shuffle(value, seed: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    """The rows of ``value`` (dim 0) in a random order, new each run (tf.random_shuffle)."""
    s, s2 = op_seeds(seed)
    return apply_op("RandomShuffle", [value], {"seed": s, "seed2": s2},
                    name=name or "RandomShuffle")
