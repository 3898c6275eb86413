"""TensorFlow's fused GRU cell ops, ``GRUBlockCell`` and its gradient ``GRUBlockCellGrad``
(``tf.contrib.rnn.GRUBlockCell``; TensorFlow's ``core/ops/rnn_ops.cc``), one time step each.

``GRUBlockCell(x [B, I], h_prev [B, C], w_ru [I + C, 2C], w_c [I + C, C], b_ru [2C],
b_c [C])`` -> ``r, u, c, h``, each [B, C]::

    [r_bar, u_bar] = [x, h_prev] @ w_ru + b_ru       r = sigmoid(r_bar), u = sigmoid(u_bar)
    c = tanh([x, h_prev * r] @ w_c + b_c)            h = u * (h_prev - c) + c

``GRUBlockCellGrad(x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, d_h)`` -> ``d_x [B, I],
d_h_prev [B, C], d_c_bar [B, C], d_r_bar_u_bar [B, 2C]``: the gradients of ``h`` (only of
``h``, as TensorFlow's kernel) with respect to the cell's inputs and to its two
pre-activations; the weights' and biases' gradients are products of these that the python
gradient adds (``dsl/grad/gru_block_grad.py``)::

    d_c_bar = d_h * (1 - u) * (1 - c * c)            d_u_bar = d_h * (h_prev - c) * u * (1 - u)
    [d_x2, d_hr] = d_c_bar @ w_c^T                   d_r_bar = d_hr * h_prev * r * (1 - r)
    [d_x1, d_h1] = [d_r_bar, d_u_bar] @ w_ru^T
    d_x = d_x1 + d_x2                                d_h_prev = d_h1 + d_hr * r + d_h * u

TensorFlow registers both for float32 only; flowc also takes float64 (the gradient checks
run in it). The shape checks are TensorFlow's kernel's, with its words, made when the shapes
are known: by the shape function at graph time, else by the kernels at run time.
The C lowering is ``compiler/codegen/c_ops/gru_block.py``.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op

_FORWARD_INPUTS = ("x", "h_prev", "w_ru", "w_c", "b_ru", "b_c")
_GRAD_INPUTS = _FORWARD_INPUTS + ("r", "u", "c", "d_h")
_RANKS = {"x": 2, "h_prev": 2, "w_ru": 2, "w_c": 2, "b_ru": 1, "b_c": 1, "r": 2, "u": 2,
          "c": 2, "d_h": 2}

Dims = Optional[Sequence[Optional[int]]]


def rank_error(names: Sequence[str], shapes: Sequence[Dims]) -> Optional[str]:
    """TensorFlow's message for the first input of known rank that has the wrong one."""
    for name, shape in zip(names, shapes):
        if shape is not None and len(shape) != _RANKS[name]:
            return f"Rank of {name} must be {_RANKS[name]}, got {len(shape)}"
    return None


def _add(a: Optional[int], b: Optional[int]) -> Optional[int]:
    return None if a is None or b is None else a + b


def _twice(a: Optional[int]) -> Optional[int]:
    return None if a is None else 2 * a


def dim_rules(names: Sequence[str], shapes: Sequence[Sequence[Optional[int]]]
              ) -> List[Tuple[Optional[int], Optional[int], str]]:
    """The kernel's dimension checks of inputs of the right ranks: (actual, expected, what),
    ``what`` in TensorFlow's words; None where a dim is not known."""
    s = dict(zip(names, shapes))
    batch, inp, cell = s["x"][0], s["x"][1], s["h_prev"][1]
    rules = [(s["h_prev"][0], batch, "h_prev.dims(0) != batch_size"),
             (s["w_ru"][0], _add(inp, cell), "w_ru.dim_size(0) != input_size + cell_size"),
             (s["w_ru"][1], _twice(cell), "w_ru.dim_size(1) != cell_size * 2"),
             (s["w_c"][0], _add(inp, cell), "w_c.dim_size(0) != input_size + cell_size"),
             (s["w_c"][1], cell, "w_c.dim_size(1) != cell_size"),
             (s["b_ru"][0], _twice(cell), "b_ru.dim_size(0) != cell_size * 2"),
             (s["b_c"][0], cell, "b_c.dim_size(0) != cell_size")]
    for name in ("r", "u", "c", "d_h"):
        if name in s:
            rules += [(s[name][0], batch, f"{name}.dims(0) != batch_size"),
                      (s[name][1], cell, f"{name}.dims(1) != cell_size")]
    return rules


def _check_shapes(ctx, names: Sequence[str]) -> List[Dims]:
    shapes = [ctx.input_shape(i) for i in range(len(names))]
    message = rank_error(names, shapes)
    if message:
        raise ctx.error(message)
    if all(sh is not None for sh in shapes):
        for actual, want, what in dim_rules(names, shapes):
            if actual is not None and want is not None and actual != want:
                raise ctx.error(f"{what}: {actual} vs. {want}")
    return shapes


def _batch_and_cell(shapes: Sequence[Dims]) -> Tuple[Optional[int], Optional[int]]:
    """The batch size and cell size the known dims give (x's rows or h_prev's; h_prev's
    columns or the candidate weights' or bias's)."""
    x, h, w_c, b_c = shapes[0], shapes[1], shapes[3], shapes[5]
    batch = next((d for d in (x and x[0], h and h[0]) if d is not None), None)
    cell = next((d for d in (h and h[1], w_c and w_c[1], b_c and b_c[0]) if d is not None),
                None)
    return batch, cell


def _gru_shape(ctx) -> list:
    batch, cell = _batch_and_cell(_check_shapes(ctx, _FORWARD_INPUTS))
    return [(batch, cell)] * 4


def _gru_grad_shape(ctx) -> list:
    shapes = _check_shapes(ctx, _GRAD_INPUTS)
    batch, cell = _batch_and_cell(shapes)
    x, w_ru = shapes[0], shapes[2]
    inp = x[1] if x is not None else None
    return [(batch, inp), (batch, cell), (batch, cell),
            (batch, w_ru[1] if w_ru is not None else _twice(cell))]


def _check_values(ctx, names: Sequence[str], arrays) -> Tuple[int, int, int]:
    shapes = [a.shape for a in arrays]
    message = rank_error(names, shapes)
    if message:
        raise ExecutionError(message, ctx.node)
    for actual, want, what in dim_rules(names, shapes):
        if actual != want:
            raise ExecutionError(f"{what}: {actual} vs. {want}", ctx.node)
    return shapes[0][0], shapes[0][1], shapes[1][1]


def _sigmoid(v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-v))


def _gru_ref(ctx, x, h_prev, w_ru, w_c, b_ru, b_c):
    _, _, cell = _check_values(ctx, _FORWARD_INPUTS, (x, h_prev, w_ru, w_c, b_ru, b_c))
    r_u_bar = np.concatenate([x, h_prev], axis=1) @ w_ru + b_ru
    r, u = _sigmoid(r_u_bar[:, :cell]), _sigmoid(r_u_bar[:, cell:])
    c = np.tanh(np.concatenate([x, h_prev * r], axis=1) @ w_c + b_c)
    h = u * (h_prev - c) + c
    return [v.astype(x.dtype) for v in (r, u, c, h)]


def _gru_grad_ref(ctx, x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, d_h):
    _, inp, _ = _check_values(ctx, _GRAD_INPUTS, (x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, d_h))
    one = x.dtype.type(1)
    d_c_bar = d_h * (one - u) * (one - c * c)
    d_u_bar = d_h * (h_prev - c) * u * (one - u)
    d_x2_hr = d_c_bar @ w_c.T
    d_hr = d_x2_hr[:, inp:]
    d_r_bar = d_hr * h_prev * r * (one - r)
    d_r_bar_u_bar = np.concatenate([d_r_bar, d_u_bar], axis=1)
    d_x1_h1 = d_r_bar_u_bar @ w_ru.T
    d_x = d_x1_h1[:, :inp] + d_x2_hr[:, :inp]
    d_h_prev = d_x1_h1[:, inp:] + d_hr * r + d_h * u
    return [v.astype(x.dtype) for v in (d_x, d_h_prev, d_c_bar, d_r_bar_u_bar)]


register_op("GRUBlockCell", inputs=[f"{n}: T" for n in _FORWARD_INPUTS],
            outputs=["r: T", "u: T", "c: T", "h: T"], attrs=["T: {f32, f64}"],
            shape=_gru_shape, kernel=_gru_ref, group="other",
            doc="One step of a GRU cell (TensorFlow's fused GRUBlockCell): the reset and "
                "update gates r, u, the candidate c and the new state h.")

register_op("GRUBlockCellGrad", inputs=[f"{n}: T" for n in _GRAD_INPUTS],
            outputs=["d_x: T", "d_h_prev: T", "d_c_bar: T", "d_r_bar_u_bar: T"],
            attrs=["T: {f32, f64}"], shape=_gru_grad_shape, kernel=_gru_grad_ref, group="other",
            doc="The gradient of GRUBlockCell's h with respect to x, h_prev and the candidate's "
                "and gates' pre-activations (TensorFlow's GRUBlockCellGrad).")
