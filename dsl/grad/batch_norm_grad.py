"""Gradients of fused batch normalization (FusedBatchNorm, V2, V3), as TensorFlow's
``_BaseFusedBatchNormGrad``: the matching ``FusedBatchNormGrad*`` op with the forward op's
epsilon, data_format and is_training. In training it reads the batch statistics the forward
op saved (its reserve spaces); in inference the population mean and variance it was given.
Only ``y`` is differentiated (its statistics outputs are not, as in TensorFlow), and the mean
and variance inputs get no gradient."""
from __future__ import annotations

from typing import List, Optional

from dsl.gradients import RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

Grads = List[Optional[Tensor]]

_GRAD_OP = {"FusedBatchNorm": "FusedBatchNormGrad", "FusedBatchNormV2": "FusedBatchNormGradV2",
            "FusedBatchNormV3": "FusedBatchNormGradV3"}


def _fused_batch_norm_grad(op: Operation, g_y: Optional[Tensor], *unused) -> Grads:
    if g_y is None:
        return [None] * 5
    x, scale = op.inputs[0], op.inputs[1]
    attrs = {k: op.get_attr(k) for k in ("epsilon", "data_format", "is_training")}
    if attrs["is_training"]:
        saved = [op.outputs[3], op.outputs[4]]
    else:
        saved = [op.inputs[3], op.inputs[4]]
    if op.type == "FusedBatchNormV3":
        saved.append(op.outputs[5])
    dx, d_scale, d_offset = apply_op(_GRAD_OP[op.type], [g_y, x, scale] + saved, attrs)[:3]
    return [dx, d_scale, d_offset, None, None]


for _op in _GRAD_OP:
    RegisterGradient(_op)(_fused_batch_norm_grad)
