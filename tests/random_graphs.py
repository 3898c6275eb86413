"""Seeded random dataflow graphs for differential tests (``tests/compiler/test_differential.py``).

``RandomGraph(rng, prefix, dtype).build(n_ops)`` adds to the current ``fl`` graph a few
placeholders of random static shapes (a dim of 0 now and then) and ``n_ops`` random ops over
them and over each other's results: elementwise unary and binary ops (with broadcasting both
ways), MatMul (either operand transposed), Sum/Mean/Max/Min over random axes (keep_dims or
not), Reshape, Transpose, ConcatV2, Slice, StridedSlice (negative strides, masks, shrinking
an axis) and GatherV2 with valid indices. Every shape is static; every op is chosen so that it
is valid for its operands' shapes, using the static shapes flowc infers. ``feeds`` holds a
value for each placeholder, ``sinks()`` the results no other op used (what a test fetches,
so that chains stay inside the graph for the passes to fuse).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

import dsl as fl

FLOAT_UNARY = ("negative", "abs", "tanh", "sigmoid", "relu", "square", "exp")
INT_UNARY = ("negative", "abs", "square")
FLOAT_BINARY = ("add", "subtract", "multiply", "maximum", "minimum", "squared_difference")
INT_BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
REDUCTIONS = (fl.reduce_sum, fl.reduce_mean, fl.reduce_max, fl.reduce_min)
KINDS = ("unary", "binary", "binary", "matmul", "reduce", "reshape", "transpose", "concat",
         "slice", "strided_slice", "gather")


def _unary(name: str, t):
    return fl.nn.relu(t) if name == "relu" else getattr(fl, name)(t)


class RandomGraph:
    """One random graph's placeholders, values and ops (see the module doc)."""

    def __init__(self, rng: np.random.Generator, prefix: str, dtype):
        self.rng = rng
        self.prefix = prefix
        self.dtype = dtype
        self.pool: List = []                   # every result, in order
        self.used: Dict[int, int] = {}         # id(tensor) -> how many ops read it
        self.feeds: Dict = {}                  # placeholder -> its value
        self.ops: List[str] = []               # what was built, for a failure's message

    # --- values ---------------------------------------------------------------------------
    def _dim(self) -> int:
        return 0 if self.rng.random() < 0.04 else int(self.rng.integers(1, 5))

    def _shape(self, rank: Optional[int] = None) -> tuple:
        rank = int(self.rng.integers(0, 4)) if rank is None else rank
        return tuple(self._dim() for _ in range(rank))

    def placeholder(self, shape, dtype=None, low=None, high=None):
        dtype = dtype or self.dtype
        p = fl.placeholder(dtype, list(shape), name=f"{self.prefix}/p{len(self.feeds)}")
        if dtype.is_floating:
            value = self.rng.uniform(-1.5, 1.5, size=shape).astype(dtype.np)
        else:
            value = self.rng.integers(-3 if low is None else low, 4 if high is None else high,
                                      size=shape).astype(dtype.np)
        self.feeds[p] = value
        return p

    def _operand(self, shape_ok=None):
        """A result from the pool (the later ones more likely) whose shape ``shape_ok``
        accepts, or None."""
        candidates = [t for t in self.pool if shape_ok is None or shape_ok(tuple(t.shape.as_list()))]
        if not candidates:
            return None
        weights = np.arange(1, len(candidates) + 1, dtype=np.float64)
        return candidates[int(self.rng.choice(len(candidates), p=weights / weights.sum()))]

    def _use(self, *tensors) -> None:
        for t in tensors:
            self.used[id(t)] = self.used.get(id(t), 0) + 1

    # --- ops ------------------------------------------------------------------------------
    def unary(self, t):
        names = FLOAT_UNARY if self.dtype.is_floating else INT_UNARY
        name = str(self.rng.choice(names))
        return name, _unary(name, t)

    def _broadcast_partner(self, shape: tuple) -> tuple:
        """A shape that broadcasts with ``shape`` (either way: a 1 on either side)."""
        out = []
        for d in shape:
            r = self.rng.random()
            out.append(1 if r < 0.3 else (int(self.rng.integers(1, 4)) if d == 1 and r < 0.45
                                          else d))
        if self.rng.random() < 0.3 and len(out) < 4:
            out = [int(self.rng.integers(1, 4))] + out
        while out and self.rng.random() < 0.2:
            out = out[1:]
        return tuple(out)

    def binary(self, a):
        names = FLOAT_BINARY if self.dtype.is_floating else INT_BINARY
        name = str(self.rng.choice(names))
        shape = tuple(a.shape.as_list())
        b = None
        if self.rng.random() < 0.4:
            b = self._operand(lambda s: _broadcasts(s, shape))
        if b is None:
            b = self.placeholder(self._broadcast_partner(shape))
        if self.rng.random() < 0.5:
            a, b = b, a
        self._use(b)
        return name, getattr(fl, name)(a, b)

    def matmul(self, a):
        shape = tuple(a.shape.as_list())
        if len(shape) != 2:
            size = int(np.prod(shape))
            last = shape[-1] if shape else 1
            rows = size // last if last else 0
            a = fl.reshape(a, [rows, last])
            shape = (rows, last)
        ta, tb = bool(self.rng.integers(2)), bool(self.rng.integers(2))
        if ta:
            a = fl.transpose(a)
        k = shape[1]
        n = int(self.rng.integers(1, 5))
        b = self.placeholder((n, k) if tb else (k, n))
        return f"matmul(ta={ta}, tb={tb})", fl.matmul(a, b, transpose_a=ta, transpose_b=tb)

    def reduce(self, a):
        rank = len(a.shape)
        fn = REDUCTIONS[int(self.rng.integers(len(REDUCTIONS)))]
        keep = bool(self.rng.integers(2))
        if rank == 0 or self.rng.random() < 0.15:
            axes = None
        else:
            count = int(self.rng.integers(1, rank + 1))
            axes = sorted(int(x) for x in self.rng.choice(rank, size=count, replace=False))
            axes = [x - rank if self.rng.random() < 0.3 else x for x in axes]
        return f"{fn.__name__}(axes={axes}, keep={keep})", fn(a, axis=axes, keepdims=keep)

    def reshape(self, a):
        size = int(np.prod(a.shape))
        rank = int(self.rng.integers(1, 5))
        if size == 0:
            shape = [0] + [int(self.rng.integers(1, 4)) for _ in range(rank - 1)]
            self.rng.shuffle(shape)
        else:
            shape = [1] * rank
            for p in _prime_factors(size):
                shape[int(self.rng.integers(rank))] *= p
            if self.rng.random() < 0.3:
                shape[int(self.rng.integers(rank))] = -1
        return f"reshape({shape})", fl.reshape(a, shape)

    def transpose(self, a):
        perm = [int(x) for x in self.rng.permutation(len(a.shape))]
        return f"transpose({perm})", fl.transpose(a, perm)

    def concat(self, a):
        shape = tuple(a.shape.as_list())
        if not shape:
            return None
        axis = int(self.rng.integers(len(shape)))
        parts = [a]
        for _ in range(int(self.rng.integers(1, 3))):
            other = shape[:axis] + (int(self.rng.integers(0, 4)),) + shape[axis + 1:]
            b = None
            if self.rng.random() < 0.4:
                b = self._operand(lambda s: len(s) == len(shape) and all(
                    x == y for k, (x, y) in enumerate(zip(s, shape)) if k != axis))
            b = b if b is not None else self.placeholder(other)
            self._use(b)
            parts.insert(int(self.rng.integers(len(parts) + 1)), b)
        if self.rng.random() < 0.3:
            axis -= len(shape)
        return f"concat(axis={axis}, n={len(parts)})", fl.concat(parts, axis)

    def slice(self, a):
        shape = tuple(a.shape.as_list())
        begin, size = [], []
        for d in shape:
            b = int(self.rng.integers(0, d + 1))
            begin.append(b)
            size.append(-1 if self.rng.random() < 0.25 else int(self.rng.integers(0, d - b + 1)))
        return f"slice({begin}, {size})", fl.slice(a, begin, size)

    def strided_slice(self, a):
        shape = tuple(a.shape.as_list())
        if not shape:
            return None
        begin, end, strides = [], [], []
        begin_mask = end_mask = shrink = 0
        for k, d in enumerate(shape):
            stride = int(self.rng.choice([1, 1, 2, 3, -1, -2]))
            if d > 0 and self.rng.random() < 0.15:         # one index: the axis goes away
                i = int(self.rng.integers(-d, d))
                begin.append(i)
                end.append(i + 1)                          # (TensorFlow reads begin only)
                strides.append(1)
                shrink |= 1 << k
                continue
            begin.append(int(self.rng.integers(-d - 1, d + 2)))
            end.append(int(self.rng.integers(-d - 1, d + 2)))
            strides.append(stride)
            if self.rng.random() < 0.2:
                begin_mask |= 1 << k
            if self.rng.random() < 0.2:
                end_mask |= 1 << k
        what = (f"strided_slice({begin}, {end}, {strides}, begin_mask={begin_mask}, "
                f"end_mask={end_mask}, shrink={shrink})")
        return what, fl.strided_slice(a, begin, end, strides, begin_mask=begin_mask,
                                      end_mask=end_mask, shrink_axis_mask=shrink)

    def gather(self, a):
        shape = tuple(a.shape.as_list())
        axes = [k for k, d in enumerate(shape) if d > 0]
        if not axes:
            return None
        axis = int(self.rng.choice(axes))
        ind_shape = self._shape(int(self.rng.integers(0, 3)))
        if self.rng.random() < 0.5:
            indices = self.placeholder(ind_shape, fl.int32, 0, shape[axis])
        else:
            indices = fl.constant(self.rng.integers(0, shape[axis], size=ind_shape)
                                  .astype(np.int32))
        if self.rng.random() < 0.3:
            axis -= len(shape)
        return f"gather(axis={axis})", fl.gather(a, indices, axis=axis)

    # --- the graph ------------------------------------------------------------------------
    def build(self, n_ops: int) -> "RandomGraph":
        for _ in range(int(self.rng.integers(1, 4))):
            self.pool.append(self.placeholder(self._shape()))
        while len(self.ops) < n_ops:
            kind = str(self.rng.choice(KINDS))
            a = self._operand()
            made = getattr(self, kind)(a)
            if made is None:
                continue
            what, t = made
            assert all(isinstance(d, int) for d in t.shape.as_list()), (what, t.shape)
            self._use(a)
            self.ops.append(f"{t.op.name} = {what} of {a.op.name}{a.shape.as_list()}")
            self.pool.append(t)
        return self

    def sinks(self) -> list:
        """The results no op of this graph reads (the last one at least)."""
        out = [t for t in self.pool[1:] if id(t) not in self.used]
        return out or [self.pool[-1]]


def _broadcasts(a: tuple, b: tuple) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b)))


def _prime_factors(n: int) -> List[int]:
    out, p = [], 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out
