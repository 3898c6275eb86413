"""Random tensors: RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike and
Bernoulli, drawn from flowc's Philox streams (TensorFlow's generator, ``fl.random_uniform``
and ``fl.random_normal``). ONNX leaves the generator to the backend, so the numbers agree
with other backends (and the node tests' numpy-drawn expectations) in distribution only.

ONNX's ``seed`` is a float: an integral one is the op seed as it is, any other its float32
bits. Without one, the op gets flowc's derived seed (distinct per op, the same every build).
Bernoulli gives 1 with probability p (``uniform < p``), as its definition and the reference
(numpy's ``binomial``) do.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

import dsl as fl
from dsl.onnx.dtypes import flowc_dtype
from dsl.onnx.values import binary, index_const, shape_i64


def _seed(ctx) -> Optional[int]:
    seed = ctx.attr("seed", None)
    if seed is None:
        return None
    seed = float(seed)
    if seed.is_integer() and abs(seed) < 2**62:
        return int(seed)
    return int(np.float32(seed).view(np.uint32))


def _dtype(ctx, default):
    elem = ctx.attr("dtype", None)
    if elem is None:
        return default
    dtype = flowc_dtype(elem)
    if dtype is None or not dtype.is_floating:
        raise ctx.error(f"dtype {elem} is not a flowc float type")
    return dtype


def _shape_attr(ctx):
    return index_const([int(d) for d in ctx.attr("shape")])


def _uniform(ctx, shape, dtype):
    return fl.random_uniform(shape, float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0)),
                             dtype=dtype, seed=_seed(ctx))


def _normal(ctx, shape, dtype):
    return fl.random_normal(shape, float(ctx.attr("mean", 0.0)), float(ctx.attr("scale", 1.0)),
                            dtype=dtype, seed=_seed(ctx))


def lower_random_uniform(ctx):
    return _uniform(ctx, _shape_attr(ctx), _dtype(ctx, fl.float32))


def lower_random_normal(ctx):
    return _normal(ctx, _shape_attr(ctx), _dtype(ctx, fl.float32))


def _like_dtype(ctx, x):
    return _dtype(ctx, x.dtype if x.dtype.is_floating else fl.float32)


def lower_random_uniform_like(ctx):
    x = ctx.input(0)
    return _uniform(ctx, shape_i64(x), _like_dtype(ctx, x))


def lower_random_normal_like(ctx):
    x = ctx.input(0)
    return _normal(ctx, shape_i64(x), _like_dtype(ctx, x))


def lower_bernoulli(ctx):
    p = ctx.input(0)
    if not p.dtype.is_floating:
        raise ctx.error(f"the probabilities must be floats, got {p.dtype}")
    elem = ctx.attr("dtype", None)
    dtype = p.dtype if elem is None else flowc_dtype(elem)
    if dtype is None:
        raise ctx.error(f"dtype {elem} is not a flowc element type")
    u = fl.random_uniform(shape_i64(p), dtype=p.dtype, seed=_seed(ctx))
    return fl.cast(binary("Less", u, p), dtype)


LOWERINGS = {
    "RandomUniform": [(1, None, lower_random_uniform)],
    "RandomNormal": [(1, None, lower_random_normal)],
    "RandomUniformLike": [(1, None, lower_random_uniform_like)],
    "RandomNormalLike": [(1, None, lower_random_normal_like)],
    "Bernoulli": [(15, None, lower_bernoulli)],
}
