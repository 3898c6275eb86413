"""Candidate samplers: UniformCandidateSampler and LogUniformCandidateSampler, TensorFlow's ops
for sampled losses (``fl.nn.sampled_softmax_loss``).

Inputs ``true_classes`` int64 [batch, num_true]; attrs ``num_true``, ``num_sampled``,
``unique``, ``range_max``, ``seed``, ``seed2``. Outputs:
- ``sampled_candidates`` int64 [num_sampled], classes in [0, range_max);
- ``true_expected_count`` f32 [batch, num_true] and ``sampled_expected_count`` f32
  [num_sampled]: how many times the sampler is expected to draw each class in one run.

Distributions (TensorFlow's ``range_sampler.cc``):
- uniform: ``P(c) = 1 / range_max``, a draw is ``bits64 % range_max``;
- log-uniform (Zipfian): ``P(c) = log((c + 2) / (c + 1)) / log(range_max + 1)``, a draw is
  ``(floor(exp(u * log(range_max + 1))) - 1) % range_max`` for a uniform double ``u``.

With ``unique=False`` the run makes ``num_sampled`` draws; with ``unique=True`` it draws until
it has ``num_sampled`` distinct classes (kept in the order first drawn), so ``num_sampled <=
range_max`` is required. The expected count of a class of probability ``p`` after ``num_tries``
draws is TensorFlow's ``ExpectedCountHelper``: ``p * num_sampled`` when ``num_tries ==
num_sampled`` (always so without ``unique``), else ``-expm1(num_tries * log1p(-p))`` (the
probability it was drawn at least once). A true class outside ``[0, range_max)`` is an error.

Random bits are Philox-4x32-10 (``compiler/ops/random.py``) keyed by ``(seed, seed2)``: draw
``k`` of a run takes 64 bits, words ``2 (k % 2)`` and ``2 (k % 2) + 1`` of the block at the
run's stream offset plus ``k // 2``. Each run reserves ``num_sampled * 256`` blocks of the node's
stream (a unique run that needs more draws reads on into the next run's blocks, as TensorFlow's
sampler does), so each run draws new candidates. The numpy reference and the generated C use
the same bits, the same integer arithmetic and the C library's ``exp``/``log``, so they draw the
same candidates; the expected counts agree to rounding.

The ops are ``stateful=True`` (never merged or folded) and have no gradient.
"""
from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import TensorType, shape_str
from compiler.ops.random import BLOCKS_PER_OUTPUT, _u64_to_double, philox
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType

_libm_exp = np.frompyfunc(math.exp, 1, 1)       # the C library's exp, as the C kernel calls it
_UNIQUE_FIRST_CHUNK = 64


# --- the draws --------------------------------------------------------------------------------
def _draw_words(start: int, count: int, seed: int, seed2: int,
                offset: int) -> Tuple[np.ndarray, np.ndarray]:
    """The two 32-bit words of draws ``start .. start + count - 1`` (first word, second)."""
    k = np.arange(start, start + count, dtype=np.uint64)
    blocks = philox(k // np.uint64(2), seed, seed2, offset)
    col = (2 * (k % np.uint64(2))).astype(np.int64)
    rows = np.arange(count)
    return blocks[rows, col], blocks[rows, col + 1]


def _uniform_draws(words, range_max: int) -> np.ndarray:
    a, b = (w.astype(np.uint64) for w in words)
    return ((a | (b << np.uint64(32))) % np.uint64(range_max)).astype(np.int64)


def _log_uniform_draws(words, range_max: int) -> np.ndarray:
    u = _u64_to_double(words[0], words[1])
    e = np.asarray(_libm_exp(u * math.log(range_max + 1.0)), np.float64)
    return (e.astype(np.int64) - 1) % range_max


def _uniform_prob(classes: np.ndarray, range_max: int) -> np.ndarray:
    return np.full(classes.shape, 1.0 / range_max)


def _log_uniform_prob(classes: np.ndarray, range_max: int) -> np.ndarray:
    c = classes.astype(np.float64)
    return np.log((c + 2.0) / (c + 1.0)) / math.log(range_max + 1.0)


def _expected_count(p: np.ndarray, num_sampled: int, num_tries: int) -> np.ndarray:
    if num_tries == num_sampled:
        return p * num_sampled
    return -np.expm1(num_tries * np.log1p(-p))


def _sample(draw, attrs, offset: int) -> Tuple[np.ndarray, int]:
    """(candidates, num_tries) of one run."""
    n, seed, seed2 = attrs["num_sampled"], attrs["seed"], attrs["seed2"]
    if not attrs["unique"]:
        return draw(_draw_words(0, n, seed, seed2, offset)), n
    values = np.zeros(0, np.int64)
    chunk = max(2 * n, _UNIQUE_FIRST_CHUNK)
    while True:
        values = np.concatenate([values, draw(_draw_words(len(values), chunk, seed, seed2,
                                                          offset))])
        distinct, first = np.unique(values, return_index=True)
        if len(distinct) >= n:
            order = np.sort(first)[:n]
            return values[order], int(order[-1]) + 1
        chunk *= 2


# --- shapes and reference kernels ------------------------------------------------------------
def _shape_fn(ctx) -> List[TensorType]:
    num_true, n, range_max = ctx.attr("num_true"), ctx.attr("num_sampled"), ctx.attr("range_max")
    if ctx.attr("unique") and n > range_max:
        raise ctx.error(f"unique=True needs num_sampled <= range_max, got num_sampled = {n} > "
                        f"range_max = {range_max}")
    shape = ctx.input_shape(0)
    batch = None
    if shape is not None:
        if len(shape) != 2:
            raise ctx.error(f"true_classes must be a matrix [batch, num_true], got shape "
                            f"{shape_str(shape)}")
        if shape[1] is not None and shape[1] != num_true:
            raise ctx.error(f"true_classes has {shape[1]} columns, but num_true = {num_true}")
        batch = shape[0]
    return [TensorType(DType.i64, (n,)), TensorType(DType.f32, (batch, num_true)),
            TensorType(DType.f32, (n,))]


def _check_true_classes(ctx, true_classes: np.ndarray) -> None:
    num_true, range_max = ctx.attrs["num_true"], ctx.attrs["range_max"]
    if true_classes.ndim != 2 or true_classes.shape[1] != num_true:
        raise ExecutionError(f"true_classes must be [batch, {num_true}], got shape "
                             f"{list(true_classes.shape)}", ctx.node)
    bad = (true_classes < 0) | (true_classes >= range_max)
    if np.any(bad):
        i = int(np.argmax(bad.reshape(-1)))
        raise ExecutionError(f"true_classes[{i // num_true}, {i % num_true}] = "
                             f"{int(true_classes.reshape(-1)[i])} is not in [0, {range_max})",
                             ctx.node)


def _reference(draw, prob):
    def kernel(ctx, true_classes: np.ndarray) -> List[np.ndarray]:
        _check_true_classes(ctx, true_classes)
        attrs, n, range_max = ctx.attrs, ctx.attrs["num_sampled"], ctx.attrs["range_max"]
        offset = 0
        if ctx.state is not None and hasattr(ctx.state, "reserve"):
            offset = ctx.state.reserve(ctx.node.name, n * BLOCKS_PER_OUTPUT)
        sampled, tries = _sample(lambda w: draw(w, range_max), attrs, offset)
        true_count = _expected_count(prob(true_classes, range_max), n, tries)
        sampled_count = _expected_count(prob(sampled, range_max), n, tries)
        return [sampled, true_count.astype(np.float32), sampled_count.astype(np.float32)]
    return kernel


_SAMPLERS = (("UniformCandidateSampler", _uniform_draws, _uniform_prob,
              "Samples classes uniformly from [0, range_max)."),
             ("LogUniformCandidateSampler", _log_uniform_draws, _log_uniform_prob,
              "Samples classes from [0, range_max) with P(c) = log((c+2)/(c+1)) / "
              "log(range_max+1)."))

for _name, _draw, _prob, _doc in _SAMPLERS:
    register_op(_name, inputs=["true_classes: i64"],
                outputs=["sampled_candidates: i64", "true_expected_count: f32",
                         "sampled_expected_count: f32"],
                attrs=["num_true: int >= 1", "num_sampled: int >= 1", "unique: bool",
                       "range_max: int >= 1", "seed: int = 0", "seed2: int = 0"],
                shape=_shape_fn, kernel=_reference(_draw, _prob), group="source",
                stateful=True, doc=_doc)
