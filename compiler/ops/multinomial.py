"""``Multinomial`` (TF's ``tf.random.categorical`` / ``tf.multinomial``): ``num_samples`` class
indices per row of ``logits`` [batch, num_classes], drawn with probabilities
``softmax(logits[b])``, on the same Philox streams as the other random ops
(``compiler/ops/random.py``).

TensorFlow's CPU algorithm: per row, the maximum of the finite logits, then a running sum of
``exp(double(logit) - max)`` over the finite logits (non-finite ones add nothing) as an
unnormalized CDF; each sample is the upper bound of ``u * total`` in it, ``u`` a uniform double
from two 32-bit Philox words (TF's ``SimplePhilox::RandDouble``). Draw ``k`` (row-major over
[batch, num_samples]) takes words ``2 (k % 2)`` and ``2 (k % 2) + 1`` of the block at the run's
stream offset plus ``k // 2``, as one TF worker shard reads them; a run reserves
``batch * ceil4(num_samples) * 256`` blocks (TF's ``ReserveRandomOutputs``). A row whose logits
are all ``-inf`` (or non-finite) has total 0 and samples ``num_classes``, as TF's kernel does.

The exponentials are the C library's ``exp`` in both backends, so the compiled C kernel
(``compiler/codegen/c_ops/multinomial.py``) draws the same indices as the reference.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import TensorType, shape_str
from compiler.ops.random import _u64_to_double, _seeds, philox

_libm_exp = np.frompyfunc(math.exp, 1, 1)       # the C library's exp, as the C kernel calls it


def reserved_outputs(batch: int, num_samples: int) -> int:
    """The outputs a run reserves in the node's stream (TF rounds samples up to 4)."""
    return batch * ((num_samples + 3) // 4 * 4)


def _multinomial_shape(ctx):
    logits = ctx.input_shape(0)
    if logits is not None and len(logits) != 2:
        raise ctx.error(f"logits should be a matrix, got shape {shape_str(logits)}")
    ns = ctx.input_shape(1)
    if ns is not None and len(ns) != 0:
        raise ctx.error(f"num_samples should be a scalar, got shape {shape_str(ns)}")
    if logits is not None and logits[1] == 0:
        raise ctx.error("num_classes should be positive, got 0")
    value = ctx.input_value(1)
    n = None
    if value is not None:
        n = int(np.reshape(value, -1)[0])
        if n < 0:
            raise ctx.error(f"num_samples should be nonnegative, got {n}")
    batch = None if logits is None else logits[0]
    return [TensorType(ctx.attr("output_dtype"), (batch, n))]


def _multinomial_kernel(ctx, logits: np.ndarray, num_samples: np.ndarray) -> np.ndarray:
    if logits.ndim != 2:
        raise ExecutionError(f"logits should be a matrix, got shape {list(logits.shape)}",
                             ctx.node)
    if num_samples.ndim != 0:
        raise ExecutionError(f"num_samples should be a scalar, got shape "
                             f"{list(num_samples.shape)}", ctx.node)
    batch, classes = logits.shape
    n = int(num_samples)
    if n < 0:
        raise ExecutionError(f"num_samples should be nonnegative, got {n}", ctx.node)
    if classes <= 0:
        raise ExecutionError(f"num_classes should be positive, got {classes}", ctx.node)
    out_np = ctx.attrs["output_dtype"].np
    if batch * n == 0:
        return np.zeros((batch, n), out_np)
    seed, seed2, offset = _seeds(ctx, reserved_outputs(batch, n))
    k = np.arange(batch * n, dtype=np.uint64)
    blocks = philox(k // np.uint64(2), seed, seed2, offset)
    col = (2 * (k % np.uint64(2))).astype(np.int64)
    rows = np.arange(batch * n)
    u = _u64_to_double(blocks[rows, col], blocks[rows, col + 1]).reshape(batch, n)
    out = np.empty((batch, n), np.int64)
    for b in range(batch):
        row = logits[b]
        finite = np.isfinite(row)
        # The maximum in the logits' own type (TF starts from the type's lowest value).
        top = row[finite].max() if finite.any() else np.finfo(np.float64).min \
            if row.dtype.kind == "f" else np.iinfo(row.dtype).min
        shifted = row.astype(np.float64) - np.float64(top)
        terms = np.where(finite, np.asarray(_libm_exp(shifted), np.float64), 0.0)
        cdf = np.cumsum(terms)                  # sequential, as the C loop adds
        out[b] = np.searchsorted(cdf, u[b] * cdf[-1], side="right")
    return out.astype(out_np)


register_op("Multinomial", inputs=["logits: T", "num_samples: i32"],
            outputs=["output: output_dtype"],
            attrs=["seed: int = 0", "seed2: int = 0",
                   "T: {f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16}",
                   "output_dtype: {i32, i64} = i64"],
            shape=_multinomial_shape, kernel=_multinomial_kernel, group="source",
            stateful=True,
            doc="``num_samples`` class indices per row of ``logits``, drawn from "
                "``softmax(logits[b])`` (TF's CPU algorithm on Philox).")
