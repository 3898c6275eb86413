"""fl.gradients: every registered gradient function against central finite differences (in
float64, with the interpreter), plus the traversal itself (multi-path sums, grad_ys,
stop_gradient, unconnected xs, integer tensors, errors, overrides) and compiled runs."""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np
import pytest

import dsl as fl
from compiler.ir.op_registry import has_op
from dsl.gradients import _registry as GRADIENT_REGISTRY
from dsl.gradients import registered_gradients
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op
f64 = fl.float64


class Inputs:
    """Makes float64 placeholders for a case and remembers their values."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.feeds: Dict[fl.Tensor, np.ndarray] = {}
        self.variables: Dict[fl.Variable, fl.Tensor] = {}    # variable -> its initial value

    def __call__(self, value) -> fl.Tensor:
        value = np.asarray(value, dtype=np.float64)
        t = fl.placeholder(f64, value.shape, name=f"x{len(self.feeds)}")
        self.feeds[t] = value
        return t

    def var(self, *shape) -> fl.Variable:
        """A float64 variable initialized from a fed placeholder (the finite differences move
        the placeholder and re-run the initializer)."""
        init = self.n(*shape)
        v = fl.Variable(init, name=f"v{len(self.variables)}")
        self.variables[v] = init
        return v

    def n(self, *shape) -> fl.Tensor:
        """Values in ±[0.2, 1.2]: away from the kinks at 0."""
        signs = self.rng.choice([-1.0, 1.0], size=shape)
        return self(signs * self.rng.uniform(0.2, 1.2, size=shape))

    def pos(self, *shape) -> fl.Tensor:
        return self(self.rng.uniform(0.5, 2.0, size=shape))

    def frac(self, *shape) -> fl.Tensor:
        """Values away from integers and halves (for Floor, Ceil, Round)."""
        whole = self.rng.integers(-3, 3, size=shape)
        return self(whole + self.rng.choice([0.2, 0.3, 0.7], size=shape))


Builder = Callable[[Inputs], object]


def _list(t: fl.Tensor) -> fl.Tensor:
    return fl.raw_ops.TensorListFromTensor(tensor=t, element_shape=[-1])


def _stacked(lst: fl.Tensor) -> fl.Tensor:
    return fl.raw_ops.TensorListStack(input_handle=lst, element_shape=-1, element_dtype=f64)


def _batch_norm(p: "Inputs", op: str) -> list:
    stats = {"mean": fl.constant(np.array([0.3, -0.2, 0.1])),
             "variance": fl.constant(np.array([0.5, 1.5, 2.0]))}
    empty = {"mean": fl.constant(np.zeros(0)), "variance": fl.constant(np.zeros(0))}
    fn = getattr(fl.raw_ops, op)
    train = fn(x=p.n(2, 3, 2, 3), scale=p.n(3), offset=p.n(3), epsilon=0.01,
               **(stats if op == "FusedBatchNorm" else empty))[0]
    infer = fn(x=p.n(2, 3, 2, 2), scale=p.n(3), offset=p.n(3), epsilon=0.01, is_training=False,
               data_format="NCHW", **stats)[0]
    return [train, infer]


def _sp(p: "Inputs", indices, dense_shape) -> fl.SparseTensor:
    """A SparseTensor with fed float64 values, one per index row."""
    return fl.SparseTensor(indices, p.n(len(indices)), dense_shape)


# One entry per op with a gradient function: builds a graph using that op from placeholders.
CASES: Dict[str, Builder] = {
    "Neg": lambda p: fl.negative(p.n(2, 3)),
    "Abs": lambda p: fl.abs(p.n(2, 3)),
    "Sign": lambda p: fl.sign(p.n(2, 3)),
    "Floor": lambda p: fl.floor(p.frac(2, 3)),
    "Ceil": lambda p: fl.ceil(p.frac(2, 3)),
    "Round": lambda p: fl.round(p.frac(2, 3)),
    "Exp": lambda p: fl.exp(p.n(2, 3)),
    "Log": lambda p: fl.log(p.pos(2, 3)),
    "Log1p": lambda p: fl.log1p(p.pos(2, 3)),
    "Sqrt": lambda p: fl.sqrt(p.pos(2, 3)),
    "Rsqrt": lambda p: fl.rsqrt(p.pos(2, 3)),
    "Square": lambda p: fl.square(p.n(2, 3)),
    "Reciprocal": lambda p: fl.reciprocal(p.pos(2, 3)),
    "Tanh": lambda p: fl.tanh(p.n(2, 3)),
    "Sigmoid": lambda p: fl.sigmoid(p.n(2, 3)),
    "Relu": lambda p: fl.nn.relu(p.n(2, 3)),
    "Relu6": lambda p: fl.nn.relu6(p([[-0.5, 0.5, 3.0], [5.5, 6.5, -2.0]])),
    "Elu": lambda p: fl.nn.elu(p.n(2, 3)),
    "Softplus": lambda p: fl.nn.softplus(p.n(2, 3)),
    "Sin": lambda p: fl.sin(p.n(2, 3) * 2.0),
    "Cos": lambda p: fl.cos(p.n(2, 3) * 2.0),
    "Tan": lambda p: fl.tan(p.n(2, 3)),
    "Asin": lambda p: fl.asin(p.n(2, 3) * 0.7),
    "Acos": lambda p: fl.acos(p.n(2, 3) * 0.7),
    "Atan": lambda p: fl.atan(p.n(2, 3) * 2.0),
    "Sinh": lambda p: fl.sinh(p.n(2, 3)),
    "Cosh": lambda p: fl.cosh(p.n(2, 3)),
    "Asinh": lambda p: fl.asinh(p.n(2, 3) * 2.0),
    "Acosh": lambda p: fl.acosh(p.pos(2, 3) + 1.0),
    "Atanh": lambda p: fl.atanh(p.n(2, 3) * 0.7),
    "Erf": lambda p: fl.erf(p.n(2, 3)),
    "Erfc": lambda p: fl.erfc(p.n(2, 3)),
    "Expm1": lambda p: fl.expm1(p.n(2, 3)),
    "Atan2": lambda p: fl.atan2(p.n(2, 3), p.n(3)),
    "Lgamma": lambda p: fl.lgamma(p.n(2, 3) * 3.0),
    "Digamma": lambda p: fl.digamma(p.n(2, 3) * 3.0),
    "Polygamma": lambda p: fl.polygamma(fl.constant(np.array([1.0, 2.0, 3.0])), p.pos(2, 3)),
    "Zeta": lambda p: fl.zeta(fl.constant(np.array([2.0, 3.5, 5.0])), p.pos(2, 3)),
    "Igamma": lambda p: fl.igamma(fl.constant(np.array([0.5, 1.5, 3.0])), p.pos(2, 3)),
    "Igammac": lambda p: fl.igammac(fl.constant(np.array([0.5, 1.5, 3.0])), p.pos(2, 3)),
    "Betainc": lambda p: [
        fl.betainc(fl.constant(np.full((2, 3), 1.5)), 2.5, p(p.rng.uniform(0.2, 0.8, (2, 3)))),
        fl.betainc(fl.constant(np.array([0.7, 2.0, 4.0])), fl.constant(np.array([3.0, 1.2, 2.0])),
                   p(0.4))],
    "Erfinv": lambda p: fl.erfinv(p(p.rng.uniform(-0.9, 0.9, (2, 3)))),
    "Ndtri": lambda p: fl.ndtri(p(p.rng.uniform(0.05, 0.95, (2, 3)))),
    "BesselI0e": lambda p: fl.bessel_i0e(p.n(2, 3) * 3.0),
    "BesselI1e": lambda p: fl.bessel_i1e(p.n(2, 3) * 3.0),
    "Softsign": lambda p: fl.nn.softsign(p.n(2, 3) * 2.0),
    "Selu": lambda p: fl.nn.selu(p.n(2, 3)),
    "LeakyRelu": lambda p: [fl.nn.leaky_relu(p.n(2, 3)), fl.nn.leaky_relu(p.n(3), alpha=1.5)],
    "Cumsum": lambda p: (lambda x: [fl.cumsum(x, 1), fl.cumsum(x, 0, exclusive=True),
                                    fl.cumsum(x, -1, reverse=True)])(p.n(2, 3)),
    "Cumprod": lambda p: (lambda x: [fl.cumprod(x, 1), fl.cumprod(x, 0, exclusive=True),
                                     fl.cumprod(x, -1, exclusive=True, reverse=True)])(
        p.n(2, 3)),
    "Cast": lambda p: fl.cast(fl.cast(p.n(2, 3), fl.float32), f64),
    "Identity": lambda p: fl.identity(p.n(2, 3)),
    "Snapshot": lambda p: fl.raw_ops.Snapshot(input=p.n(2, 3)),
    "Print": lambda p: (lambda x: fl.Print(x, [x], "x: ", first_n=1))(p.n(2, 3)),
    "PlaceholderWithDefault": lambda p: fl.placeholder_with_default(p.n(2, 3), [2, 3]),
    "AddN": lambda p: (lambda a, b: fl.add_n([a, b, a]))(p.n(2, 3), p.n(2, 3)),
    "Add": lambda p: fl.raw_ops.Add(x=p.n(2, 3), y=p.n(3)),
    "AddV2": lambda p: p.n(2, 1) + p.n(1, 3),
    "Sub": lambda p: p.n(2, 3) - p.n(),
    "Mul": lambda p: p.n(2, 1, 3) * p.n(4, 1),
    "RealDiv": lambda p: p.n(2, 3) / p.pos(2, 1),
    "Maximum": lambda p: fl.maximum(p.n(2, 3), p.n(3)),
    "Minimum": lambda p: fl.minimum(p.n(2, 3), p.n(3)),
    "Pow": lambda p: fl.pow(p.pos(2, 3), p.n(3)),
    "SquaredDifference": lambda p: fl.squared_difference(p.n(2, 3), p.n(2, 3)),
    "FloorMod": lambda p: fl.floormod(p.n(2, 3) * 3.0, p.pos(3)),
    "SelectV2": lambda p: fl.where(fl.constant([[True], [False]]), p.n(2, 3), p.n(3)),
    "Select": lambda p: [fl.where(fl.constant([True, False, True]), p.n(3, 2), p.n(3, 2)),
                         fl.raw_ops.Select(condition=fl.constant([[True, False]]), x=p.n(1, 2),
                                           y=p.n(1, 2))],
    "Gather": lambda p: fl.raw_ops.Gather(params=p.n(4, 3), indices=fl.constant([[2, 0], [2, 3]])),
    "Sum": lambda p: fl.reduce_sum(p.n(2, 3, 4), axis=[0, 2]),
    "Mean": lambda p: fl.reduce_mean(p.n(2, 3), axis=1, keepdims=True),
    "Max": lambda p: fl.reduce_max(p.n(2, 3), axis=1),
    "Min": lambda p: fl.reduce_min(p.n(2, 3), axis=0),
    "Prod": lambda p: fl.reduce_prod(p([[1.5, -0.5, 2.0], [0.0, 1.5, -2.0], [0.0, 3.0, 0.0]]),
                                     axis=1),
    "MatMul": lambda p: (lambda a, b: [fl.matmul(a, b), fl.matmul(a, a, transpose_b=True),
                                       fl.matmul(b, b, transpose_a=True),
                                       fl.matmul(b, a, transpose_a=True, transpose_b=True)])(
        p.n(2, 3), p.n(3, 4)),
    "BatchMatMulV2": lambda p: (lambda a, b, c: [fl.matmul(a, b), fl.matmul(a, c, adjoint_a=True),
                                                 fl.matmul(c, a, adjoint_b=True)])(
        p.n(2, 2, 3), p.n(3, 4), p.n(1, 2, 3)),
    "BiasAdd": lambda p: [fl.nn.bias_add(p.n(2, 3, 4), p.n(4)),
                          fl.nn.bias_add(p.n(2, 3, 2), p.n(3), data_format="NCHW")],
    "Softmax": lambda p: fl.nn.softmax(p.n(2, 4)),
    "LRN": lambda p: fl.nn.lrn(p.n(2, 2, 1, 6), depth_radius=2, bias=1.5, alpha=0.3, beta=0.75),
    "LogSoftmax": lambda p: fl.nn.log_softmax(p.n(2, 4)),
    "Reshape": lambda p: fl.reshape(p.n(2, 3), [3, 2]),
    "ExpandDims": lambda p: fl.expand_dims(p.n(2, 3), 1),
    "Squeeze": lambda p: fl.squeeze(p.n(2, 1, 3), axis=1),
    "Transpose": lambda p: fl.transpose(p.n(2, 3, 4), [1, 2, 0]),
    "ReverseV2": lambda p: fl.reverse(p.n(2, 3, 4), [0, 2]),
    "TensorListFromTensor": lambda p: _stacked(_list(p.n(3, 2))),
    "TensorListStack": lambda p: _stacked(_list(p.n(3, 2))),
    "TensorListGetItem": lambda p: fl.raw_ops.TensorListGetItem(
        input_handle=_list(p.n(3, 2)), index=1, element_shape=[-1], element_dtype=f64),
    "TensorListSetItem": lambda p: _stacked(fl.raw_ops.TensorListSetItem(
        input_handle=_list(p.n(3, 2)), index=2, item=p.n(2))),
    "TensorListPushBack": lambda p: _stacked(fl.raw_ops.TensorListPushBack(
        input_handle=_list(p.n(3, 2)), tensor=p.n(2))),
    "TensorListPopBack": lambda p: [_stacked(x) if k == 0 else x for k, x in enumerate(
        fl.raw_ops.TensorListPopBack(input_handle=_list(p.n(3, 2)), element_shape=[-1],
                                     element_dtype=f64))],
    "TensorListGather": lambda p: fl.raw_ops.TensorListGather(
        input_handle=_list(p.n(4, 2)), indices=[0, 2, 0], element_shape=[-1], element_dtype=f64),
    "TensorListResize": lambda p: _stacked(fl.raw_ops.TensorListResize(
        input_handle=_list(p.n(3, 2)), size=5)),
    "TensorListScatter": lambda p: _stacked(fl.raw_ops.TensorListScatter(
        tensor=p.n(2, 3), indices=[3, 1], element_shape=[-1])),
    "TensorListScatterV2": lambda p: _stacked(fl.raw_ops.TensorListScatterV2(
        tensor=p.n(2, 3), indices=[0, 2], element_shape=[3], num_elements=4)),
    "TensorListScatterIntoExistingList": lambda p: _stacked(
        fl.raw_ops.TensorListScatterIntoExistingList(input_handle=_list(p.n(3, 2)),
                                                     tensor=p.n(2, 2), indices=[4, 1])),
    "ConcatV2": lambda p: fl.concat([p.n(2, 1), p.n(2, 3)], axis=-1),
    "Split": lambda p: (lambda parts: [parts[0], parts[2]])(fl.split(p.n(2, 6), 3, axis=1)),
    "SplitV": lambda p: fl.split(p.n(2, 6), [1, 2, 3], axis=1),
    "Pack": lambda p: fl.stack([p.n(2, 3), p.n(2, 3)], axis=1),
    "Unpack": lambda p: fl.unstack(p.n(3, 2), axis=1),
    "Slice": lambda p: fl.slice(p.n(3, 4), [1, 1], [2, -1]),
    "StridedSlice": lambda p: (lambda x: [x[1:, ::2], x[0, ::-1]])(p.n(3, 4)),
    "Tile": lambda p: fl.tile(p.n(2, 3), [2, 1]),
    "Pad": lambda p: fl.pad(p.n(2, 3), [[1, 0], [0, 2]]),
    "SpaceToBatchND": lambda p: A("SpaceToBatchND", [p.n(1, 3, 4, 2), [2, 2], [[1, 0], [0, 2]]]),
    "BatchToSpaceND": lambda p: A("BatchToSpaceND", [p.n(4, 2, 3, 1), [2, 2], [[1, 0], [0, 1]]]),
    "IdentityN": lambda p: [y * y for y in A("IdentityN", [[p.n(2, 3), p.n(4)]])],
    "GatherV2": lambda p: fl.gather(p.n(4, 3), [0, 2, 0]),
    "InplaceUpdate": lambda p: fl.raw_ops.InplaceUpdate(x=p.n(4, 3), i=fl.constant([2, 0]),
                                                        v=p.n(2, 3)),
    "InplaceAdd": lambda p: fl.raw_ops.InplaceAdd(x=p.n(4, 3), i=fl.constant([1, 3, 1]),
                                                  v=p.n(3, 3)),
    "InplaceSub": lambda p: fl.raw_ops.InplaceSub(x=p.n(4, 3), i=fl.constant([3]), v=p.n(1, 3)),
    "DynamicPartition": lambda p: [
        fl.reshape(part, shape) for part, shape in zip(
            fl.dynamic_partition(p.n(5, 2), fl.constant([1, 0, 2, 1, 0], dtype=fl.int32), 3),
            ([2, 2], [2, 2], [1, 2]))],
    "DynamicStitch": lambda p: fl.dynamic_stitch(
        [fl.constant([0, 3], dtype=fl.int32), fl.constant([[1], [2]], dtype=fl.int32)],
        [p.n(2, 3), p.n(2, 1, 3)]),
    "ReadVariableOp": lambda p: fl.tanh(p.var(2, 3)) * p.var(3),
    "ResourceGather": lambda p: (lambda v: v.sparse_read([2, 0, 2]) * 3.0 + v.sparse_read([[1]]))(
        p.var(4, 3)),
    "Fill": lambda p: fl.fill([2, 3], p.n()),
    "UnsortedSegmentSum": lambda p: fl.raw_ops.UnsortedSegmentSum(
        data=p.n(4, 2), segment_ids=fl.constant([2, 0, -1, 2]), num_segments=3),
    "SegmentSum": lambda p: fl.segment_sum(p.n(4, 2), fl.constant([0, 0, 2, 2])),
    "SegmentMean": lambda p: fl.segment_mean(p.n(4, 2), fl.constant([0, 0, 0, 2])),
    "SegmentMax": lambda p: fl.segment_max(p([[1.0, 0.5], [0.3, 0.5], [0.7, -0.2]]),
                                           fl.constant([0, 0, 1])),
    "SegmentMin": lambda p: fl.segment_min(p.n(4, 2), fl.constant([0, 1, 1, 3])),
    "SegmentProd": lambda p: fl.segment_prod(p([[0.5, 0.0], [2.0, 0.0], [0.0, 1.5], [-0.7, 0.9]]),
                                             fl.constant([0, 0, 0, 1])),
    "UnsortedSegmentMax": lambda p: fl.unsorted_segment_max(
        p([[1.0, 0.5], [0.3, 0.5], [0.7, -0.2], [0.4, 0.6]]), fl.constant([1, 1, 0, -1]), 2),
    "UnsortedSegmentMin": lambda p: fl.unsorted_segment_min(p.n(4, 2), fl.constant([1, 0, -1, 1]),
                                                            2),
    "UnsortedSegmentProd": lambda p: fl.unsorted_segment_prod(
        p([[0.5, 0.0], [2.0, 0.0], [0.0, 1.5], [-0.7, 0.9]]), fl.constant([1, -1, 1, 1]), 2),
    "SparseSegmentSum": lambda p: fl.sparse_segment_sum(p.n(4, 2), fl.constant([3, 0, 3]),
                                                        fl.constant([0, 0, 2])),
    "SparseSegmentMean": lambda p: fl.sparse_segment_mean(p.n(4, 2), fl.constant([3, 0, 3]),
                                                          fl.constant([0, 0, 2])),
    "SparseSegmentSqrtN": lambda p: fl.sparse_segment_sqrt_n(p.n(4, 2), fl.constant([3, 0, 1]),
                                                             fl.constant([0, 0, 1])),
    "SparseSegmentSumWithNumSegments": lambda p: fl.sparse_segment_sum(
        p.n(4, 2), fl.constant([1, 2]), fl.constant([0, 2]), num_segments=4),
    "SparseSegmentMeanWithNumSegments": lambda p: fl.sparse_segment_mean(
        p.n(4, 2), fl.constant([1, 2, 1]), fl.constant([1, 1, 2]), num_segments=3),
    "SparseSegmentSqrtNWithNumSegments": lambda p: fl.sparse_segment_sqrt_n(
        p.n(3, 2), fl.constant([0, 2, 2]), fl.constant([0, 0, 0]), num_segments=2),
    "L2Loss": lambda p: fl.nn.l2_loss(p.n(2, 3)),
    "SoftmaxCrossEntropyWithLogits": lambda p: fl.raw_ops.SoftmaxCrossEntropyWithLogits(
        features=p.n(2, 3), labels=p([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])),
    "SparseSoftmaxCrossEntropyWithLogits": lambda p: fl.raw_ops.SparseSoftmaxCrossEntropyWithLogits(
        features=p.n(3, 4), labels=fl.constant([3, 0, 1])),
    "Conv2D": lambda p: (lambda x, f: [fl.nn.conv2d(x, f, strides=2, padding="SAME"),
                                       fl.nn.conv2d(x, f, strides=1, padding="VALID")])(
        p.n(1, 5, 4, 2), p.n(3, 2, 2, 3)) + [
        # grouped (Keras' Conv2D(groups=2)): input depth 4 = 2 groups of the filter's 2
        fl.nn.conv2d(p.n(1, 4, 3, 4), p.n(2, 2, 2, 4), strides=1, padding="SAME")],
    "DepthwiseConv2dNative": lambda p: (lambda x, f: [
        fl.nn.depthwise_conv2d(x, f, [1, 2, 2, 1], "SAME"),
        fl.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "VALID", rate=[1, 2])])(
        p.n(1, 5, 4, 2), p.n(3, 2, 2, 3)),
    # fused batch normalization: y only (the statistics outputs are not differentiated, as in
    # TensorFlow), training (batch statistics) and inference (given ones, NCHW)
    "FusedBatchNorm": lambda p: _batch_norm(p, "FusedBatchNorm"),
    "FusedBatchNormV2": lambda p: _batch_norm(p, "FusedBatchNormV2"),
    "FusedBatchNormV3": lambda p: _batch_norm(p, "FusedBatchNormV3"),
    "MaxPool": lambda p: fl.nn.max_pool(p(np.random.default_rng(5).permutation(32).reshape(
        1, 4, 4, 2) * 0.1), ksize=2, strides=1, padding="SAME"),
    "AvgPool": lambda p: fl.nn.avg_pool(p.n(1, 5, 4, 2), ksize=3, strides=2, padding="SAME"),
    "GatherNd": lambda p: fl.gather_nd(p.n(3, 2, 4), [[[0, 1], [2, 0]], [[0, 1], [1, 1]]]),
    "ScatterNd": lambda p: fl.scatter_nd([[1], [3], [1]], p.n(3, 2), [4, 2]),
    "SparseToDense": lambda p: [
        fl.sparse_to_dense([[0, 1], [1, 0], [2, 2]], [3, 3], p.n(3), p.n()),
        fl.sparse_to_dense([1, 3], [5], p.n(), p.n())],
    "SparseTensorDenseMatMul": lambda p: [
        fl.sparse_tensor_dense_matmul(_sp(p, [[0, 1], [2, 0], [0, 1]], [3, 2]), p.n(2, 4)),
        fl.sparse_tensor_dense_matmul(_sp(p, [[1, 0], [0, 2]], [2, 3]), p.n(2, 2),
                                      adjoint_a=True, adjoint_b=True)],
    "SparseReduceSum": lambda p: [
        fl.sparse.reduce_sum(_sp(p, [[0, 1, 0], [1, 0, 1], [1, 2, 1]], [2, 3, 2]), axis=[0, 2]),
        fl.sparse.reduce_sum(_sp(p, [[0, 1], [1, 0]], [2, 3]), axis=-1, keepdims=True)],
    "SparseReorder": lambda p: fl.sparse.reorder(
        _sp(p, [[1, 0], [0, 2], [0, 1]], [2, 3])).values * fl.constant([1.0, 2.0, 3.0], f64),
    "SparseAdd": lambda p: fl.reshape(fl.sparse.add(
        _sp(p, [[0, 1], [1, 0], [1, 2]], [2, 3]), _sp(p, [[0, 0], [1, 0], [1, 1]], [2, 3])).values,
        [5]),
    "SparseTensorDenseAdd": lambda p: fl.sparse.add(
        _sp(p, [[0, 1], [1, 0], [0, 1]], [2, 3]), p.n(2, 3)),
    "TensorScatterUpdate": lambda p: fl.tensor_scatter_nd_update(p.n(4, 2), [[1], [3]], p.n(2, 2)),
    "TensorScatterAdd": lambda p: fl.tensor_scatter_nd_add(p.n(4, 2), [[1, 0], [1, 0]], p.n(2)),
    "TensorScatterSub": lambda p: fl.tensor_scatter_nd_sub(p.n(4, 2), [[2], [0]], p.n(2, 2)),
    # values 0.1 apart: the finite differences change no comparison
    "TensorScatterMax": lambda p: fl.tensor_scatter_nd_max(
        p(np.arange(8).reshape(4, 2) * 0.1), [[1], [3]], p(np.array([[0.55, 0.05], [0.25, 0.95]]))),
    "TensorScatterMin": lambda p: fl.tensor_scatter_nd_min(
        p(np.arange(8).reshape(4, 2) * 0.1), [[1, 1], [2, 0]], p(np.array([0.15, 0.45]))),
    "ReverseSequence": lambda p: fl.reverse_sequence(p.n(3, 4, 2), [4, 0, 2], seq_axis=1,
                                                     batch_axis=0),
    "TopKV2": lambda p: fl.nn.top_k(p(np.random.default_rng(8).permutation(12).reshape(3, 4) * 0.1),
                                    k=2)[0],
    "Einsum": lambda p: (lambda a, b, c: [fl.einsum("bij,bjk->bik", a, b),
                                          fl.einsum("ij,kj->ik", a[0], c),
                                          fl.einsum("...ij,j->...i", a, c[0]),
                                          fl.einsum("bij->j", a),
                                          fl.einsum("aij,bjk->abk", a[:1], b),
                                          fl.einsum("...ij,...jk->...ik", a[:1], b)])(
        p.n(2, 3, 4), p.n(2, 4, 2), p.n(3, 4)),
    "_DFT": lambda p: (lambda x, r: [
        fl.apply_op("_DFT", [x, fl.constant(np.int64(6))], {"axis": 1}),
        fl.apply_op("_DFT", [x, fl.constant(np.int64(4))], {"axis": 1, "onesided": True}),
        fl.apply_op("_DFT", [x, fl.constant(np.int64(7))], {"axis": 0, "inverse": True}),
        fl.apply_op("_DFT", [x, fl.constant(np.int64(8))],
                    {"axis": 1, "inverse": True, "onesided": True}),
        fl.apply_op("_DFT", [x, fl.constant(np.int64(5))],
                    {"axis": 1, "inverse": True, "onesided": True}),
        fl.apply_op("_DFT", [r, fl.constant(np.int64(5))], {"axis": 0, "onesided": True})])(
        p.n(3, 5, 2), p.n(4, 1)),
    "_GridSample": lambda p: (lambda x, g, g3, x3: [
        fl.apply_op("_GridSample", [x, g], {"mode": mode, "padding_mode": padding,
                                            "align_corners": align})
        for mode, padding, align in (("linear", "zeros", False), ("cubic", "border", True),
                                     ("linear", "reflection", False),
                                     ("cubic", "reflection", True),
                                     ("nearest", "zeros", False))] + [
        fl.apply_op("_GridSample", [x3, g3], {"padding_mode": "border"})])(
        p.n(1, 2, 4, 5), p(np.random.default_rng(3).uniform(-1.3, 1.3, (1, 3, 2, 2))),
        p(np.random.default_rng(4).uniform(-0.9, 0.9, (1, 2, 2, 2, 3))), p.n(1, 1, 3, 2, 4)),
    "_RoiAlign": lambda p: (lambda x, rois, idx: [
        fl.apply_op("_RoiAlign", [x, rois, idx], {"mode": mode, "output_height": 2,
                                                  "output_width": 3, "sampling_ratio": ratio,
                                                  "half_pixel": half})
        for mode, ratio, half in (("avg", 2, True), ("avg", 0, False), ("max", 2, True))])(
        p.n(2, 2, 6, 5), fl.constant(np.array([[0.3, 0.6, 3.7, 4.2], [-1.2, 1.1, 2.4, 6.5],
                                               [1.5, 0.2, 2.1, 1.3]])),
        fl.constant(np.array([1, 0, 1], np.int64))),
    # every output in the loss: h through GRUBlockCellGrad, r, u and c by flowc's extra terms
    "GRUBlockCell": lambda p: list(fl.apply_op("GRUBlockCell", [
        p.n(2, 3), p.n(2, 2), p.n(5, 4), p.n(5, 2), p.n(4), p.n(2)])),
    # the fused LSTM ops: TF's gradients flow through the cell state and h outputs (the gate
    # outputs are internals the gradient ops read), so the loss takes those two
    "LSTMBlockCell": lambda p: [o for k, o in enumerate(fl.apply_op("LSTMBlockCell", [
        p.n(2, 3), p.n(2, 2), p.n(2, 2), p.n(5, 8), p.n(2), p.n(2), p.n(2), p.n(8)],
        {"use_peephole": True})) if k in (1, 6)],
    "BlockLSTM": lambda p: [o for k, o in enumerate(fl.apply_op("BlockLSTM", [
        fl.constant(np.int64(3)), p.n(3, 2, 3), p.n(2, 2), p.n(2, 2), p.n(5, 8), p.n(2),
        p.n(2), p.n(2), p.n(8)], {"use_peephole": True})) if k in (1, 6)],
    "BlockLSTMV2": lambda p: [o for k, o in enumerate(fl.apply_op("BlockLSTMV2", [
        fl.constant(np.int64(2)), p.n(3, 2, 3), p.n(2, 2), p.n(2, 2), p.n(5, 8), p.n(2),
        p.n(2), p.n(2), p.n(8)], {"use_peephole": True})) if k in (1, 6)],
    "MatrixDeterminant": lambda p: fl.matrix_determinant(p.n(2, 3, 3)),
    "MatrixInverse": lambda p: (lambda a: [fl.matrix_inverse(a),
                                           fl.matrix_inverse(a, adjoint=True)])(
        p(np.eye(3) * 2.0 + np.random.default_rng(9).uniform(-0.5, 0.5, (2, 3, 3)))),
    "MatrixBandPart": lambda p: [fl.matrix_band_part(p.n(2, 3, 4), 1, 0),
                                 fl.linalg.band_part(p.n(4, 3), -1, 1)],
    "MatrixDiag": lambda p: fl.raw_ops.MatrixDiag(diagonal=p.n(2, 3)),
    "MatrixDiagV2": lambda p: fl.raw_ops.MatrixDiagV2(diagonal=p.n(2, 3), k=[-1, 0], num_rows=-1,
                                                      num_cols=-1, padding_value=0.0),
    "MatrixDiagV3": lambda p: [fl.matrix_diag(p.n(3), k=1),
                               fl.linalg.diag(p.n(2, 3), k=(-1, 0), num_cols=4)],
    "MatrixDiagPart": lambda p: fl.raw_ops.MatrixDiagPart(input=p.n(2, 3, 4)),
    "MatrixDiagPartV2": lambda p: fl.raw_ops.MatrixDiagPartV2(input=p.n(3, 4), k=[-1, 1],
                                                              padding_value=0.0),
    "MatrixDiagPartV3": lambda p: [fl.matrix_diag_part(p.n(3, 4), k=(-1, 1)),
                                   fl.trace(p.n(2, 3, 3))],
    "MatrixSetDiag": lambda p: fl.raw_ops.MatrixSetDiag(input=p.n(2, 3, 4), diagonal=p.n(2, 3)),
    "MatrixSetDiagV2": lambda p: fl.raw_ops.MatrixSetDiagV2(input=p.n(3, 4), diagonal=p.n(2, 3),
                                                            k=[0, 1]),
    "MatrixSetDiagV3": lambda p: [fl.matrix_set_diag(p.n(4, 3), p.n(2, 3), k=(-1, 0)),
                                  fl.eye(2, 3, batch_shape=[2], dtype=f64) * p.n(2, 2, 3)],
    "BroadcastTo": lambda p: [fl.broadcast_to(p.n(3, 1), [2, 3, 4]),
                              fl.broadcast_to(p.n(4), [3, 4])],
    "Diag": lambda p: fl.diag(p.n(2, 2)),
    "DiagPart": lambda p: fl.diag_part(p.n(3, 3)),
    # control flow (fl.cond): the taken branch's gradient flows, the other input gets zeros
    "Switch": lambda p: (lambda x, y: fl.cond(fl.constant(True), lambda: fl.tanh(x * y),
                                              lambda: x + 1.0))(p.n(2, 3), p.n(2, 3)),
    "Merge": lambda p: (lambda x, y: fl.cond(fl.constant(False), lambda: x * y,
                                             lambda: fl.square(x)))(p.n(2, 3), p.n(3)),
    # gradient ops (second derivatives)
    "ReluGrad": lambda p: fl.raw_ops.ReluGrad(gradients=p.n(2, 3), features=p.n(2, 3)),
    "Relu6Grad": lambda p: fl.raw_ops.Relu6Grad(gradients=p.n(2, 3),
                                                features=p([[-0.5, 0.5, 3.0], [5.5, 6.5, -2.0]])),
    "EluGrad": lambda p: fl.raw_ops.EluGrad(gradients=p.n(2, 3), outputs=p.n(2, 3) * 0.5),
    "SoftplusGrad": lambda p: fl.raw_ops.SoftplusGrad(gradients=p.n(2, 3), features=p.n(2, 3)),
    "SigmoidGrad": lambda p: fl.raw_ops.SigmoidGrad(y=p.pos(2, 3) * 0.4, dy=p.n(2, 3)),
    "TanhGrad": lambda p: fl.raw_ops.TanhGrad(y=p.n(2, 3) * 0.8, dy=p.n(2, 3)),
    "SqrtGrad": lambda p: fl.raw_ops.SqrtGrad(y=p.pos(2, 3), dy=p.n(2, 3)),
    "RsqrtGrad": lambda p: fl.raw_ops.RsqrtGrad(y=p.pos(2, 3), dy=p.n(2, 3)),
    "ReciprocalGrad": lambda p: fl.raw_ops.ReciprocalGrad(y=p.pos(2, 3), dy=p.n(2, 3)),
    "SoftsignGrad": lambda p: fl.raw_ops.SoftsignGrad(gradients=p.n(2, 3), features=p.n(2, 3)),
    "SeluGrad": lambda p: fl.raw_ops.SeluGrad(gradients=p.n(2, 3), outputs=p.n(2, 3)),
    # every coordinate rule (align_corners, half_pixel_centers), up and down; bilinear's
    # output is float32 whatever the image (a larger step, EPS), nearest keeps float64
    "ResizeBilinear": lambda p: (lambda x: [fl.cast(fl.apply_op(
        "ResizeBilinear", [x, hw], {"align_corners": ac, "half_pixel_centers": hp}), f64)
        for ac, hp in ((False, False), (True, False), (False, True))
        for hw in ([5, 4], [2, 2])])(p.n(1, 3, 3, 2)),
    "ResizeNearestNeighbor": lambda p: (lambda x: [fl.apply_op(
        "ResizeNearestNeighbor", [x, hw], {"align_corners": ac, "half_pixel_centers": hp})
        for ac, hp in ((False, False), (True, False), (False, True))
        for hw in ([5, 4], [2, 2])])(p.n(1, 3, 3, 2)),
    "LeakyReluGrad": lambda p: fl.raw_ops.LeakyReluGrad(gradients=p.n(2, 3),
                                                        features=p.n(2, 3), alpha=0.3),
    "BiasAddGrad": lambda p: fl.raw_ops.BiasAddGrad(out_backprop=p.n(2, 3, 4)),
    "Conv2DBackpropInput": lambda p: [fl.nn.conv2d_backprop_input(
        [1, 5, 4, 2], p.n(3, 2, 2, 3), p.n(1, 3, 2, 3), strides=2, padding="SAME"),
        fl.nn.conv2d_backprop_input(                        # grouped: 3 groups
            [1, 3, 3, 3], p.n(2, 2, 1, 3), p.n(1, 2, 2, 3), strides=2, padding="SAME")],
    "Conv2DBackpropFilter": lambda p: [fl.nn.conv2d_backprop_filter(
        p.n(1, 5, 4, 2), [3, 2, 2, 3], p.n(1, 3, 2, 3), strides=2, padding="SAME"),
        fl.nn.conv2d_backprop_filter(                       # grouped: 2 groups
            p.n(1, 3, 3, 4), [2, 2, 2, 4], p.n(1, 2, 2, 4), strides=1, padding="VALID")],
    "DepthwiseConv2dNativeBackpropInput": lambda p: fl.nn.depthwise_conv2d_native_backprop_input(
        [1, 5, 4, 2], p.n(3, 2, 2, 3), p.n(1, 3, 2, 6), [1, 2, 2, 1], "SAME"),
    "DepthwiseConv2dNativeBackpropFilter": lambda p: fl.nn.depthwise_conv2d_native_backprop_filter(
        p.n(1, 5, 4, 2), [3, 2, 2, 3], p.n(1, 3, 2, 6), [1, 2, 2, 1], "SAME"),
    "AvgPoolGrad": lambda p: fl.raw_ops.AvgPoolGrad(
        orig_input_shape=fl.constant([1, 5, 4, 2]), grad=p.n(1, 3, 2, 2), ksize=[1, 3, 3, 1],
        strides=[1, 2, 2, 1], padding="SAME"),
    # distinct inputs 0.1 apart: the finite differences do not move any window's maximum
    "MaxPoolGrad": lambda p: (lambda x: fl.raw_ops.MaxPoolGrad(
        orig_input=x, orig_output=fl.nn.max_pool(x, 3, 2, "SAME"), grad=p.n(1, 3, 2, 2),
        ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME"))(
        p(np.random.default_rng(6).permutation(40).reshape(1, 5, 4, 2) * 0.1)),
    "MaxPoolGradGrad": lambda p: (lambda x: fl.raw_ops.MaxPoolGradGrad(
        orig_input=x, orig_output=fl.nn.max_pool(x, 3, 2, "SAME"), grad=p.n(1, 5, 4, 2),
        ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME"))(
        p(np.random.default_rng(7).permutation(40).reshape(1, 5, 4, 2) * 0.1)),
    # TensorArrays: writes and scatters gathered; an element read twice (its gradients add up)
    "TensorArrayWriteV3": lambda p: fl.TensorArray(f64, size=2).write(0, p.n(2, 3)).write(
        1, p.n(2, 3)).gather([0, 1]),
    "TensorArrayGatherV3": lambda p: fl.TensorArray(f64, size=3, element_shape=[2]).scatter(
        [2, 0], p.n(2, 2)).gather([1, 2, 0]),
    "TensorArrayScatterV3": lambda p: fl.TensorArray(f64, size=2).scatter(
        [1, 0], p.n(2, 3)).gather([0, 1]),
    "TensorArrayReadV3": lambda p: (lambda ta: [ta.read(1), ta.read(1) * ta.read(0)])(
        fl.TensorArray(f64, size=2, clear_after_read=False).scatter([0, 1], p.n(2, 3))),
}

# the float32 round trip needs a larger step (ResizeBilinear is linear in its image: exact)
EPS = {"Cast": 1e-2, "ResizeBilinear": 0.5}


def numeric_gradient(loss: fl.Tensor, feeds: Dict[fl.Tensor, np.ndarray], x: fl.Tensor,
                     eps: float, init=None) -> np.ndarray:
    """Central differences of ``loss`` w.r.t. ``x``, run with the interpreter (``init``, when
    given, runs first: the variables take their values from the feeds)."""
    out = np.zeros_like(feeds[x])
    with fl.Session(graph=loss.graph, backend="interpreter") as s:
        for k in np.ndindex(*out.shape):
            values = []
            for step in (eps, -eps):
                moved = dict(feeds)
                moved[x] = feeds[x].copy()
                moved[x][k] += step
                if init is not None:
                    s.run(init, moved)
                values.append(s.run(loss, moved))
            out[k] = (values[0] - values[1]) / (2 * eps)
    return out


def weighted_loss(ys, rng: np.random.Generator) -> fl.Tensor:
    """sum_k sum(y_k * W_k) with fixed random weights, so every output element matters."""
    terms = [fl.reduce_sum(y * fl.constant(rng.uniform(0.5, 1.5, size=y.shape)))
             for y in (ys if isinstance(ys, list) else [ys])]
    return fl.add_n(terms) if len(terms) > 1 else terms[0]


def test_every_registered_gradient_has_a_test_case():
    """Gradients registered for ops (not override-only names like GradTestTripleRelu)."""
    with_fn = {op for op, fn in registered_gradients().items() if fn is not None and has_op(op)}
    assert sorted(with_fn - set(CASES)) == [], "gradient functions without a test case"
    assert sorted(set(CASES) - with_fn) == [], "test cases for ops without a gradient function"


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_gradient_matches_finite_differences(op_type):
    if not has_op(op_type):
        pytest.skip(f"op {op_type} is not registered")
    rng = np.random.default_rng(sum(map(ord, op_type)))
    g = fl.Graph()
    with g.as_default():
        p = Inputs(rng)
        ys = CASES[op_type](p)
        assert op_type in {n.op for n in g}, f"the case for {op_type} does not use it"
        loss = weighted_loss(ys, rng)
        xs = list(p.feeds)
        if op_type == "GatherV2" and not has_op("UnsortedSegmentSum"):
            with pytest.raises(fl.MissingGradientError, match="UnsortedSegmentSum"):
                fl.gradients(loss, xs)
            return
        wrt = [next((v for v, i in p.variables.items() if i is x), x) for x in xs]
        grads = fl.gradients(loss, wrt)
        grads = [gr.to_dense() if isinstance(gr, fl.IndexedSlices) else gr for gr in grads]
        init = fl.global_variables_initializer() if p.variables else None
    assert all(gr is not None for gr in grads)
    with fl.Session(graph=g, backend="interpreter") as s:
        if init is not None:
            s.run(init, p.feeds)
        got = s.run(grads, p.feeds)
    for x, gx in zip(xs, got):
        want = numeric_gradient(loss, p.feeds, x, EPS.get(op_type, 1e-6), init)
        assert gx.shape == p.feeds[x].shape and gx.dtype == np.float64
        np.testing.assert_allclose(gx, want, rtol=1e-5, atol=1e-6, err_msg=f"{op_type} d/d{x.name}")


def _run(g, fetches, feeds):
    with fl.Session(graph=g, backend="interpreter") as s:
        return s.run(fetches, feeds)


def test_partial_gradients_of_several_paths_are_summed_with_addn(graph):
    x = fl.placeholder(f64, [3], name="x")
    y = fl.reduce_sum(x * fl.tanh(x)) + fl.reduce_sum(x * 2.0)
    (gx,) = fl.gradients(y, [x])
    assert gx.op.type == "AddN" and len(gx.op.inputs) == 3 and gx.name.startswith("gradients/")
    xv = np.array([0.1, -0.4, 0.7])
    want = np.tanh(xv) + xv * (1 - np.tanh(xv) ** 2) + 2
    np.testing.assert_allclose(_run(graph, gx, {x: xv}), want, rtol=1e-12)


def test_several_ys_and_grad_ys(graph):
    x = fl.placeholder(f64, [2], name="x")
    y1, y2 = x * 3.0, fl.square(x)
    xv = np.array([1.0, -2.0])
    (g_sum,) = fl.gradients([y1, y2], x)
    (g_w,) = fl.gradients([y1, y2], [x], grad_ys=[fl.constant([1.0, 10.0], dtype=f64),
                                                    fl.constant([0.5, 0.5], dtype=f64)])
    got_sum, got_w = _run(graph, [g_sum, g_w], {x: xv})
    np.testing.assert_allclose(got_sum, 3 + 2 * xv)
    np.testing.assert_allclose(got_w, np.array([1.0, 10.0]) * 3 + 0.5 * 2 * xv)
    with pytest.raises(ValueError, match="grad_ys"):
        fl.gradients([y1, y2], x, grad_ys=[None])


def test_stop_gradient_op_and_stop_gradients_argument(graph):
    x = fl.placeholder(f64, [2], name="x")
    a = x * 2.0
    y = fl.reduce_sum(x * fl.stop_gradient(a)) + fl.reduce_sum(a)
    (g_op,) = fl.gradients(y, x)
    (g_arg,) = fl.gradients(y, x, stop_gradients=[a])
    g_a, g_x = fl.gradients(y, [a, x], stop_gradients=[a])
    xv = np.array([1.5, -1.0])
    got_op, got_arg, got_a, got_x = _run(graph, [g_op, g_arg, g_a, g_x], {x: xv})
    np.testing.assert_allclose(got_op, 2 * xv + 2)       # d/dx of x*const + 2x
    np.testing.assert_allclose(got_arg, 2 * xv)          # a is a constant: only x*a's x
    np.testing.assert_allclose(got_a, 1.0)               # d y / d a through reduce_sum(a)
    np.testing.assert_allclose(got_x, got_arg)


def test_unconnected_and_integer_xs_get_none(graph):
    x = fl.placeholder(f64, [2], name="x")
    other = fl.placeholder(f64, [2], name="other")
    i = fl.placeholder(fl.int32, [2], name="i")
    y = fl.reduce_sum(x * fl.cast(i, f64))
    gx, g_other, g_i = fl.gradients(y, [x, other, i])
    assert g_other is None and g_i is None
    np.testing.assert_allclose(_run(graph, gx, {x: np.ones(2), i: np.array([3, 4], np.int32)}),
                               [3.0, 4.0])
    assert fl.gradients(fl.argmax(x, axis=0), [x]) == [None]
    assert fl.gradients(fl.cast(fl.cast(x, fl.int32), f64), [x]) == [None]   # through integers


def test_gradient_ops_are_built_under_the_gradients_name_scope(graph):
    x = fl.placeholder(f64, [2, 3], name="x")
    y = fl.reduce_sum(fl.nn.softmax(fl.matmul(x, fl.constant(np.ones((3, 2))))))
    before = {n.name for n in graph}
    fl.gradients(y, x)
    fl.gradients(y, x, name="second")
    new = [n.name for n in graph if n.name not in before]
    assert new and all(name.split("/")[0] in ("gradients", "second") for name in new), new


def test_missing_gradient_is_an_error_naming_op_node_and_path(graph, monkeypatch):
    monkeypatch.delitem(GRADIENT_REGISTRY, "Log1p")    # as if never registered
    x = fl.placeholder(f64, [2], name="x")
    h = fl.tanh(x, name="h")
    odd = fl.log1p(h, name="odd")
    y = fl.reduce_sum(fl.exp(odd, name="e"), name="y")
    with pytest.raises(fl.MissingGradientError) as info:
        fl.gradients(y, x)
    err = info.value
    assert isinstance(err, LookupError) and isinstance(err, FlowcError)
    msg = str(err)
    assert "'Log1p'" in msg and "'odd'" in msg
    assert "y -> e -> odd -> h -> x" in msg
    # not on a path to the xs asked for: no error
    assert fl.gradients(y, [odd])[0] is not None


@fl.RegisterGradient("GradTestTripleRelu")
def _triple_relu_grad(op, g):
    return [g * 3.0]


def test_gradient_override_map(graph):
    x = fl.placeholder(f64, [3], name="x")
    plain = fl.nn.relu(x)
    with graph.gradient_override_map({"Relu": "GradTestTripleRelu"}):
        overridden = fl.nn.relu(x)
        with graph.gradient_override_map({"Relu": "Identity"}):
            inner = fl.nn.relu(x)
        other = fl.exp(x)                     # not in the map: its own gradient
    xv = np.array([-1.0, 0.5, 2.0])
    grads = [fl.gradients(fl.reduce_sum(y), x)[0] for y in (plain, overridden, inner, other)]
    got = _run(graph, grads, {x: xv})
    np.testing.assert_allclose(got[0], [0, 1, 1])
    np.testing.assert_allclose(got[1], [3, 3, 3])
    np.testing.assert_allclose(got[2], [1, 1, 1])
    np.testing.assert_allclose(got[3], np.exp(xv))
    with graph.gradient_override_map({"Relu": "NoSuchGradient"}):
        bad = fl.nn.relu(x)
    with pytest.raises(fl.MissingGradientError, match="NoSuchGradient"):
        fl.gradients(bad, x)
    with pytest.raises(TypeError, match="op type names"):
        with graph.gradient_override_map({"Relu": fl.nn.relu}):
            pass


def test_register_gradient_twice_is_an_error():
    with pytest.raises(KeyError, match="Relu"):
        fl.RegisterGradient("Relu")(lambda op, g: [g])
    with pytest.raises(KeyError, match="Relu"):
        fl.NotDifferentiable("Relu")


def test_broadcasting_along_unknown_dims_is_resolved_at_run_time(graph):
    x = fl.placeholder(f64, [None, 3], name="x")
    b = fl.placeholder(f64, [None, 3], name="b")
    c = fl.placeholder(f64, [3], name="c")        # known: a vector broadcasts along dim 0
    y = fl.reduce_sum(x * b) + fl.reduce_sum(x * c)
    gx, gb, gc = fl.gradients(y, [x, b, c])
    xv, bv, cv = np.arange(6.0).reshape(2, 3), np.array([[1.0, -1.0, 2.0]]), np.ones(3)
    for xv_, bv_ in ((xv, bv), (bv, xv), (xv, xv + 1)):  # b broadcast, x broadcast, neither
        got_x, got_b, got_c = _run(graph, [gx, gb, gc], {x: xv_, b: bv_, c: cv})
        bx = np.broadcast_to(bv_, np.broadcast_shapes(xv_.shape, bv_.shape))
        xb = np.broadcast_to(xv_, bx.shape)
        np.testing.assert_allclose(got_x, bx.sum(axis=0, keepdims=True) + cv if xv_.shape[0] == 1
                                   else bx + cv)
        np.testing.assert_allclose(got_b, xb.sum(axis=0, keepdims=True) if bv_.shape[0] == 1
                                   else xb)
        np.testing.assert_allclose(got_c, xv_.sum(axis=0))
    # an unknown rank: the broadcast and reduced axes are found when the step runs
    u = fl.placeholder(f64, None, name="unknown_rank")
    gu, gc2 = fl.gradients(fl.reduce_sum(u * c), [u, c])
    gr, = fl.gradients(fl.reduce_sum(u, axis=[0]), u)
    got_u, got_c2, got_r = _run(graph, [gu, gc2, gr], {u: xv, c: cv})
    np.testing.assert_allclose(got_u, np.broadcast_to(cv, xv.shape))
    np.testing.assert_allclose(got_c2, xv.sum(axis=0))
    np.testing.assert_allclose(got_r, np.ones_like(xv))


def test_gradients_of_a_network_compiled_equal_the_interpreter(graph, rng):
    x = fl.placeholder(fl.float32, [None, 5], name="x")
    labels = fl.placeholder(fl.float32, [None, 3], name="labels")
    w1 = fl.placeholder(fl.float32, [5, 4], name="w1")
    b1 = fl.placeholder(fl.float32, [4], name="b1")
    w2 = fl.placeholder(fl.float32, [4, 3], name="w2")
    h = fl.nn.relu(fl.nn.bias_add(fl.matmul(x, w1), b1))
    h = fl.concat([fl.sigmoid(h[:, :2]), fl.tanh(h[:, 2:])], axis=1)
    logp = fl.nn.log_softmax(fl.matmul(h, w2))
    loss = -fl.reduce_mean(fl.reduce_sum(labels * logp, axis=1)) + fl.reduce_sum(fl.square(w1))
    grads = fl.gradients(loss, [w1, b1, w2, x])
    feeds = {x: rng.standard_normal((6, 5)).astype(np.float32),
             labels: np.eye(3, dtype=np.float32)[rng.integers(0, 3, 6)],
             w1: rng.standard_normal((5, 4)).astype(np.float32),
             b1: rng.standard_normal(4).astype(np.float32),
             w2: rng.standard_normal((4, 3)).astype(np.float32)}
    check_against_interpreter(graph, {f"g{k}": t for k, t in enumerate(grads)}, feeds,
                              rtol=1e-4, atol=1e-5)


def test_gradients_of_array_and_reduction_ops_compiled_equal_the_interpreter(graph, rng):
    x = fl.placeholder(fl.float64, [3, 4], name="x")
    parts = fl.split(x, [1, 3], axis=1)
    y = (fl.reduce_prod(fl.tile(parts[0], [1, 2]), axis=1) + fl.reduce_max(parts[1], axis=1)
         + fl.reduce_sum(fl.pad(fl.transpose(x)[1:3, ::2], [[1, 1], [0, 0]])))
    z = fl.reduce_sum(fl.stack(fl.unstack(x, axis=0)[:2]) * fl.reshape(x[:2], [2, 4]))
    grads = fl.gradients([y, z], [x]) + fl.gradients(z, x, grad_ys=fl.constant(2.0, dtype=f64))
    check_against_interpreter(graph, {"g0": grads[0], "g1": grads[1]},
                              {x: rng.uniform(0.5, 2.0, (3, 4))})


def test_gradients_of_a_small_convnet_compiled_equal_the_interpreter(graph, rng):
    if not all(has_op(op) for op in ("Conv2D", "MaxPool", "SparseSoftmaxCrossEntropyWithLogits")):
        pytest.skip("conv, pool or cross-entropy ops are not registered")
    x = fl.placeholder(fl.float32, [None, 6, 6, 1], name="x")
    labels = fl.placeholder(fl.int32, [None], name="labels")
    f = fl.placeholder(fl.float32, [3, 3, 1, 2], name="f")
    w = fl.placeholder(fl.float32, [18, 3], name="w")
    h = fl.nn.max_pool(fl.nn.relu(fl.nn.conv2d(x, f, strides=1, padding="SAME")), ksize=2,
                       strides=2, padding="VALID")
    logits = fl.matmul(fl.reshape(h, [-1, 18]), w)
    loss = (fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                           logits=logits))
            + 0.01 * fl.nn.l2_loss(w))
    gf, gw = fl.gradients(loss, [f, w])
    feeds = {x: rng.standard_normal((3, 6, 6, 1)).astype(np.float32),
             labels: np.array([0, 2, 1], np.int32),
             f: rng.standard_normal((3, 3, 1, 2)).astype(np.float32),
             w: rng.standard_normal((18, 3)).astype(np.float32)}
    check_against_interpreter(graph, {"gf": gf, "gw": gw}, feeds, rtol=1e-4, atol=1e-5)
