"""The gradient of ``GRUBlockCell`` (``compiler/ops/gru_block.py``), as TensorFlow's contrib
``gru_ops.py`` builds it: ``GRUBlockCellGrad`` gives ``d_x``, ``d_h_prev`` and the gradients
of the two pre-activations, from which two products and two bias sums give the weights' and
biases' gradients::

    d_w_ru = [x, h_prev]^T @ d_r_bar_u_bar           d_b_ru = sum of d_r_bar_u_bar over rows
    d_w_c = [x, h_prev * r]^T @ d_c_bar              d_b_c = sum of d_c_bar over rows

TensorFlow's gradient reads only the gradient of ``h`` and drops those of the outputs
``r``, ``u`` and ``c``. flowc's adds them when a loss uses them (a graph whose loss uses only
``h``, the usual one, is TensorFlow's): they enter the pre-activations' gradients by the
chain rule, through the same products (``_extra_terms``).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from dsl.grad._util import need_rank
from dsl.gradients import GradientShapeError, NotDifferentiable, RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor, static_shape

Grads = List[Optional[Tensor]]


def _op(name: str, *inputs, **attrs):
    return apply_op(name, list(inputs), attrs)


def _matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False):
    return _op("MatMul", a, b, transpose_a=transpose_a, transpose_b=transpose_b)


def _concat(a: Tensor, b: Tensor) -> Tensor:
    return _op("ConcatV2", [a, b], np.int32(1))


def _one_minus(t: Tensor) -> Tensor:
    return _op("Sub", np.array(1, t.dtype.np), t)


def _cell_size(op: Operation) -> int:
    for t, axis in ((op.inputs[1], 1), (op.inputs[3], 1), (op.inputs[5], 0)):
        shape = static_shape(t)
        if shape is not None and shape[axis] is not None:
            return int(shape[axis])
    raise GradientShapeError(f"the gradient of GRUBlockCell '{op.name}' through its outputs r, "
                             "u or c needs the cell size to be known")


def _split_columns(op: Operation, t: Tensor) -> List[Tensor]:
    """``t`` [B, I + C] as its first I columns and its last C."""
    need_rank(op, t)
    sizes = np.array([-1, _cell_size(op)], np.int64)
    return list(_op("SplitV", t, sizes, np.int32(1), num_split=2))


def _extra_terms(op: Operation, d_r: Tensor, d_u: Tensor, d_c: Tensor):
    """What the gradients of the outputs r, u and c add to d_x, d_h_prev, d_c_bar and
    d_r_bar_u_bar (each a zero tensor where nothing uses that output)."""
    _, h_prev, w_ru, w_c, _, _ = op.inputs
    r, u, c, _ = op.outputs
    e_c_bar = _op("Mul", d_c, _one_minus(_op("Mul", c, c)))
    e_u_bar = _op("Mul", d_u, _op("Mul", u, _one_minus(u)))
    e_x2, e_hr = _split_columns(op, _matmul(e_c_bar, w_c, transpose_b=True))
    e_r_bar = _op("Mul", _op("AddV2", _op("Mul", e_hr, h_prev), d_r),
                  _op("Mul", r, _one_minus(r)))
    e_ru = _concat(e_r_bar, e_u_bar)
    e_x1, e_h1 = _split_columns(op, _matmul(e_ru, w_ru, transpose_b=True))
    return (_op("AddV2", e_x1, e_x2), _op("AddV2", e_h1, _op("Mul", e_hr, r)), e_c_bar, e_ru)


@RegisterGradient("GRUBlockCell")
def _gru_block_cell_grad(op: Operation, d_r: Optional[Tensor], d_u: Optional[Tensor],
                         d_c: Optional[Tensor], d_h: Optional[Tensor]) -> Grads:
    from dsl.array_ops import zeros_like
    x, h_prev, w_ru, w_c, b_ru, b_c = op.inputs
    r, u, c, h = op.outputs
    grads = list(_op("GRUBlockCellGrad", x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c,
                     zeros_like(h) if d_h is None else d_h))
    if any(g is not None for g in (d_r, d_u, d_c)):
        extra = _extra_terms(op, *(zeros_like(t) if g is None else g
                                   for t, g in zip((r, u, c), (d_r, d_u, d_c))))
        grads = [_op("AddV2", a, b) for a, b in zip(grads, extra)]
    d_x, d_h_prev, d_c_bar, d_r_bar_u_bar = grads
    d_w_ru = _matmul(_concat(x, h_prev), d_r_bar_u_bar, transpose_a=True)
    d_b_ru = _op("BiasAddGrad", d_r_bar_u_bar)
    d_w_c = _matmul(_concat(x, _op("Mul", h_prev, r)), d_c_bar, transpose_a=True)
    d_b_c = _op("BiasAddGrad", d_c_bar)
    return [d_x, d_h_prev, d_w_ru, d_w_c, d_b_ru, d_b_c]


NotDifferentiable("GRUBlockCellGrad")
