"""TensorFlow's default values of op attrs, for the GraphDef importer.

A GraphDef names every attr of every node, also those at their default, and TensorFlow keeps
adding attrs to old ops (``MatMul.grad_a``, ``BatchMatMulV2.grad_x``, ``VarHandleOp
.allowed_devices``, ``FusedBatchNormV3.exponential_avg_factor``, ...). Where flowc's op does not
declare such an attr, a node may still be imported when the attr holds TensorFlow's default:
then the node means what flowc's op computes. Any other value is refused by name, since flowc
would silently compute something else.

``TF_ATTR_DEFAULTS`` holds, per op, the defaults from TensorFlow's op registrations
(``REGISTER_OP`` in ``tensorflow/core/ops/*.cc``; ``core/ops/ops.pbtxt``) for the ops flowc has
or is likely to meet next to them. It lists each op's defaulted attrs beyond its type attrs,
including some flowc's op does declare (those are then read by flowc's op, never looked up here),
so the table stays right when an op definition changes. Attrs without a TensorFlow default
(``strides``, ``num_args``, ``send_device_incarnation``) are not in it: they are refused unless
flowc's op declares them.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

_CONV = {"use_cudnn_on_gpu": True, "explicit_paddings": [], "data_format": "NHWC",
         "dilations": [1, 1, 1, 1]}
_DEPTHWISE = {"explicit_paddings": [], "data_format": "NHWC", "dilations": [1, 1, 1, 1]}
_BATCH_NORM = {"epsilon": 0.0001, "exponential_avg_factor": 1.0, "data_format": "NHWC",
               "is_training": True}
_ACCUMULATOR = {"container": "", "shared_name": "", "reduction_type": "MEAN"}
_SEEDS = {"seed": 0, "seed2": 0}
_REDUCE = {"keep_dims": False}
_SEND_RECV = {"client_terminated": False}
_LSTM_BLOCK = {"forget_bias": 1.0, "cell_clip": 3.0, "use_peephole": False}
_LRN = {"depth_radius": 5, "bias": 1.0, "alpha": 1.0, "beta": 0.5}
_FTRL = {"use_locking": False, "multiply_linear_by_lr": False}
_SPARSE_SEGMENT = {"sparse_gradient": False}

TF_ATTR_DEFAULTS: Dict[str, Dict[str, Any]] = {
    # math_ops.cc
    "MatMul": {"transpose_a": False, "transpose_b": False, "grad_a": False, "grad_b": False},
    "BatchMatMulV2": {"adj_x": False, "adj_y": False, "grad_x": False, "grad_y": False},
    "Cast": {"Truncate": False},
    "Equal": {"incompatible_shape_error": True},
    "NotEqual": {"incompatible_shape_error": True},
    "Sum": _REDUCE, "Mean": _REDUCE, "Max": _REDUCE, "Min": _REDUCE, "Prod": _REDUCE,
    "All": _REDUCE, "Any": _REDUCE,
    "SparseSegmentSum": _SPARSE_SEGMENT, "SparseSegmentMean": _SPARSE_SEGMENT,
    "SparseSegmentSqrtN": _SPARSE_SEGMENT, "SparseSegmentSumWithNumSegments": _SPARSE_SEGMENT,
    "SparseSegmentMeanWithNumSegments": _SPARSE_SEGMENT,
    "SparseSegmentSqrtNWithNumSegments": _SPARSE_SEGMENT,
    "DenseBincount": {"binary_output": False},
    # nn_ops.cc
    "Conv2D": _CONV, "Conv2DBackpropInput": _CONV, "Conv2DBackpropFilter": _CONV,
    "_FusedConv2D": {**_CONV, "fused_ops": [], "epsilon": 0.0001, "leakyrelu_alpha": 0.2,
                     "filter_format": "HWIO", "num_host_args": 0},
    "DepthwiseConv2dNative": _DEPTHWISE, "DepthwiseConv2dNativeBackpropInput": _DEPTHWISE,
    "DepthwiseConv2dNativeBackpropFilter": _DEPTHWISE,
    "MaxPool": {"explicit_paddings": [], "data_format": "NHWC"},
    "MaxPoolGrad": {"explicit_paddings": [], "data_format": "NHWC"},
    "MaxPoolGradGrad": {"data_format": "NHWC"},
    "AvgPool": {"data_format": "NHWC"}, "AvgPoolGrad": {"data_format": "NHWC"},
    "BiasAdd": {"data_format": "NHWC"}, "BiasAddGrad": {"data_format": "NHWC"},
    "FusedBatchNorm": _BATCH_NORM, "FusedBatchNormV2": _BATCH_NORM,
    "FusedBatchNormV3": _BATCH_NORM,
    "LRN": _LRN, "LRNGrad": _LRN,
    # array_ops.cc
    "Placeholder": {"shape": None},
    "Squeeze": {"squeeze_dims": []},
    "Pack": {"axis": 0}, "Unpack": {"axis": 0},
    "OneHot": {"axis": -1},
    "GatherV2": {"batch_dims": 0},
    "StridedSlice": {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0,
                     "shrink_axis_mask": 0},
    "MatrixDiagV3": {"align": "RIGHT_LEFT"}, "MatrixDiagPartV3": {"align": "RIGHT_LEFT"},
    "MatrixSetDiagV3": {"align": "RIGHT_LEFT"},
    # sparse_ops.cc
    "SparseToDense": {"validate_indices": True},
    "SparseTensorDenseMatMul": {"adjoint_a": False, "adjoint_b": False},
    "SparseReduceSum": _REDUCE,
    # random_ops.cc, candidate_sampling_ops.cc
    "RandomStandardNormal": _SEEDS, "RandomUniform": _SEEDS, "RandomUniformInt": _SEEDS,
    "TruncatedNormal": _SEEDS, "UniformCandidateSampler": _SEEDS,
    "LogUniformCandidateSampler": _SEEDS, "RandomShuffle": _SEEDS,
    # rnn_ops.cc (the gradient ops' use_peephole has no default)
    "LSTMBlockCell": _LSTM_BLOCK, "BlockLSTM": _LSTM_BLOCK,
    "BlockLSTMV2": {"cell_clip": 0.0, "use_peephole": False},
    # resource_variable_ops.cc
    "VarHandleOp": {"container": "", "shared_name": "", "debug_name": "", "allowed_devices": []},
    "AssignVariableOp": {"validate_shape": False},
    "ResourceGather": {"batch_dims": 0, "validate_indices": True},
    # data_flow_ops.cc
    "FIFOQueueV2": {"shapes": [], "capacity": -1, "container": "", "shared_name": ""},
    "PaddingFIFOQueueV2": {"shapes": [], "capacity": -1, "container": "", "shared_name": ""},
    "RandomShuffleQueueV2": {"shapes": [], "capacity": -1, "min_after_dequeue": 0, "seed": 0,
                             "seed2": 0, "container": "", "shared_name": ""},
    "QueueEnqueueV2": {"timeout_ms": -1}, "QueueEnqueueManyV2": {"timeout_ms": -1},
    "QueueDequeueV2": {"timeout_ms": -1}, "QueueDequeueManyV2": {"timeout_ms": -1},
    "QueueDequeueUpToV2": {"timeout_ms": -1},
    "QueueCloseV2": {"cancel_pending_enqueues": False},
    "ConditionalAccumulator": _ACCUMULATOR, "SparseConditionalAccumulator": _ACCUMULATOR,
    "StackV2": {"stack_name": ""}, "StackPushV2": {"swap_memory": False},
    # rnn_ops.cc: the fused GRU cell has no attr but its type T
    "GRUBlockCell": {}, "GRUBlockCellGrad": {},
    # training_ops.cc
    "ApplyAdadelta": {"use_locking": False}, "ResourceApplyAdadelta": {"use_locking": False},
    "ApplyFtrl": _FTRL, "ResourceApplyFtrl": _FTRL, "ApplyFtrlV2": _FTRL,
    "ResourceApplyFtrlV2": _FTRL,
    # control_flow_ops.cc, sendrecv_ops.cc
    "Enter": {"is_constant": False, "parallel_iterations": 10},
    "_Send": _SEND_RECV, "_Recv": _SEND_RECV,
}


def tf_attr_default(op: str, attr: str) -> Tuple[bool, Any]:
    """(True, TensorFlow's default of ``op.attr``), or (False, None) when it has none here."""
    defaults = TF_ATTR_DEFAULTS.get(op)
    if defaults is None or attr not in defaults:
        return False, None
    return True, defaults[attr]


def holds_tf_default(op: str, attr: str, value: Any) -> bool:
    """Whether ``value`` (an attr as the importer reads it) is TensorFlow's default of
    ``op.attr``. Floats compare at float32 precision (AttrValue stores ``f`` as a float)."""
    known, default = tf_attr_default(op, attr)
    return known and _same(value, default)


def _same(value: Any, default: Any) -> bool:
    if default is None:
        return value is None
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool) and value == default
    if isinstance(default, float):
        return isinstance(value, (int, float)) and math.isclose(value, default, rel_tol=1e-6)
    if isinstance(default, list):
        return (isinstance(value, (list, tuple)) and len(value) == len(default)
                and all(_same(v, d) for v, d in zip(value, default)))
    return type(value) is type(default) and value == default


def format_attr_value(value: Any) -> str:
    """An attr value as a GraphDef user reads it: ``true``, ``3``, ``"SAME"``, ``[1, 2]``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr_value(v) for v in value) + "]"
    if value is None:
        return "<unknown shape>"
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def default_note(op: str, attr: str) -> Optional[str]:
    """``TensorFlow's default: <value>`` for an attr with a default here, else None."""
    known, default = tf_attr_default(op, attr)
    return f"default {format_attr_value(default)}" if known else None
