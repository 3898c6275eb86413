"""Gradients of TensorFlow's fused LSTM ops (``compiler/ops/lstm_block.py``), as TensorFlow's
python gradients: ``BlockLSTM``'s is one ``BlockLSTMGrad`` (``BlockLSTMV2``'s one
``BlockLSTMGradV2``) fed the gradients of ``cs`` and ``h``; ``LSTMBlockCell``'s is
``LSTMBlockCellGrad`` for the cell state, gates and peepholes plus the matmul pieces:
``xh_grad = dicfo @ w^T`` split into ``x`` and ``h_prev``, ``w_grad = [x, h_prev]^T @ dicfo``,
``b_grad = BiasAddGrad(dicfo)``. Only ``cs`` and ``h`` are differentiated (the gate outputs
are not, as in TensorFlow), and ``seq_len_max`` gets none. Like TensorFlow, the gradient does
not see ``cell_clip``."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from dsl.gradients import NotDifferentiable, RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor, static_shape
from runtime.dtypes import DType

Grads = List[Optional[Tensor]]

_BLOCK_GRAD = {"BlockLSTM": "BlockLSTMGrad", "BlockLSTMV2": "BlockLSTMGradV2"}


def _or_zeros(g: Optional[Tensor], like: Tensor) -> Tensor:
    return g if g is not None else apply_op("ZerosLike", [like])


@RegisterGradient("LSTMBlockCell")
def _lstm_block_cell_grad(op: Operation, *grads: Optional[Tensor]) -> Grads:
    x, cs_prev, h_prev, w, wci, wcf, wco, b = op.inputs
    i, cs, f, o, ci, co, h = op.outputs
    cs_grad, h_grad = grads[1], grads[6]
    if cs_grad is None and h_grad is None:
        return [None] * 8
    cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad = apply_op(
        "LSTMBlockCellGrad",
        [x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co,
         _or_zeros(cs_grad, cs), _or_zeros(h_grad, h)],
        {"use_peephole": op.get_attr("use_peephole")})
    xh_grad = apply_op("MatMul", [dicfo, w], {"transpose_b": True})
    x_shape = static_shape(x)
    if x_shape is not None and x_shape[1] is not None:     # static: the split's shapes known
        sizes = np.array([x_shape[1], -1], np.int32)
    else:
        input_size = apply_op("Slice", [apply_op("Shape", [x], {"out_type": DType.i32}),
                                        np.array([1], np.int32), np.array([1], np.int32)])
        sizes = apply_op("ConcatV2", [[input_size, np.array([-1], np.int32)], 0])
    x_grad, h_prev_grad = apply_op("SplitV", [xh_grad, sizes, 1], {"num_split": 2})
    xh = apply_op("ConcatV2", [[x, h_prev], 1])
    w_grad = apply_op("MatMul", [xh, dicfo], {"transpose_a": True})
    b_grad = apply_op("BiasAddGrad", [dicfo])
    return [x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad, wco_grad, b_grad]


def _block_lstm_grad(op: Operation, *grads: Optional[Tensor]) -> Grads:
    seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b = op.inputs
    i, cs, f, o, ci, co, h = op.outputs
    cs_grad, h_grad = grads[1], grads[6]
    if cs_grad is None and h_grad is None:
        return [None] * 9
    outs = apply_op(_BLOCK_GRAD[op.type],
                    [seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b,
                     i, cs, f, o, ci, co, h, _or_zeros(cs_grad, cs), _or_zeros(h_grad, h)],
                    {"use_peephole": op.get_attr("use_peephole")})
    return [None] + list(outs)


for _op in _BLOCK_GRAD:
    RegisterGradient(_op)(_block_lstm_grad)
for _op in ("LSTMBlockCellGrad", "BlockLSTMGrad", "BlockLSTMGradV2"):
    NotDifferentiable(_op)
