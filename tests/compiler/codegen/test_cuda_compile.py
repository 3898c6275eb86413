"""Every op with a CUDA kernel, placed on a GPU, emits CUDA that nvcc compiles for sm_90.

One graph holds a case (or several) per op, so the whole module is one nvcc run. The test
fails when an op gains a CUDA kernel without a case here. Skipped only where nvcc is absent;
it needs no GPU (running the kernels is the job of tests/runtime/test_cuda_runtime.py).
"""
from __future__ import annotations

import concurrent.futures
import os
import re

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.cuda_build import build_cuda_module, find_nvcc
from compiler.codegen.cuda_emitter import emit_cuda
from compiler.codegen.cuda_kernels import ops_with_cuda_kernels
from compiler.ir.op_registry import get_op
from compiler.options import PipelineOptions
from compiler.passes.partition import split_by_device
from compiler.step import make_step_graph, optimize
from runtime.dtypes import DType

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc (the CUDA compiler) is not "
                                "installed; the generated CUDA cannot be compiled here")


def _elementwise_cases(t):
    """One node per elementwise op (inputs typed from its signature, of one static shape),
    plus broadcasting over a dynamic dim and a device data error."""
    made = []
    for name in ops_with_cuda_kernels():
        op = get_op(name)
        if op.extra.get("c_expr") is None:
            continue
        if name == "Cast":
            made.append(fl.apply_op("Cast", [t["x"]], {"DstT": DType.i32}))
            made.append(fl.apply_op("Cast", [t["x64"]], {"DstT": DType.f32, "Truncate": True}))
            # f16 and bf16 are bits on the GPU: converted by helpers, moved as they are
            for src, dst in (("h", DType.f32), ("x", DType.f16), ("x64", DType.f16),
                             ("x64", DType.bf16), ("hb", DType.f16), ("h", DType.bf16),
                             ("hb", DType.i32), ("is", DType.u64), ("is", DType.bf16)):
                made.append(fl.apply_op("Cast", [t[src]], {"DstT": dst}))
            made.append(fl.transpose(fl.apply_op("Cast", [t["is"]], {"DstT": DType.u16})))
            continue
        allowed = op.attrs["T"].allowed if "T" in op.attrs else ()
        dtype = next((d for d in (DType.f32, DType.i32, DType.bool) if d in allowed), None)
        first = {DType.f32: t["xs"], DType.i32: t["is"], DType.bool: t["bs"]}
        other = {DType.f32: t["xs2"], DType.i32: t["is2"], DType.bool: t["bs2"]}
        inputs = []
        for k, arg in enumerate(op.inputs):
            src = first if k == 0 else other
            if arg.number_attr:
                inputs.append([first[dtype], other[dtype]])
            elif arg.dtype is not None:
                inputs.append(src[arg.dtype])
            else:
                inputs.append(src[dtype])
        made.append(fl.apply_op(name, inputs, {}))
    made.append(fl.apply_op("Mul", [t["x"], t["y"]], {}))                 # broadcast, dynamic
    made.append(fl.apply_op("FloorDiv", [t["i"], t["i"]], {}))            # a device data error
    made.append(fl.apply_op("Fused", [[t["x"], t["y"]]], {"expr": "Relu(AddV2(Mul($0, $1), $0))"}))
    return made


def _other_cases(t):
    x, y, i, m = t["x"], t["y"], t["i"], t["m"]
    made = [fl.nn.bias_add(x, y), fl.matmul(x, m), fl.matmul(x, x, transpose_b=True),
            fl.matmul(m, x, transpose_a=True, transpose_b=True),
            fl.matmul(t["i2"], t["i2"]),
            fl.apply_op("BatchMatMulV2", [t["x3"], m], {}),
            fl.apply_op("BatchMatMulV2", [t["x3"], t["x3"]], {"adj_y": True})]
    for op in ("Sum", "Mean", "Prod", "Max", "Min"):
        made.append(fl.apply_op(op, [x, fl.constant([0])], {}))
        made.append(fl.apply_op(op, [t["x3"], fl.constant([0, 2])], {"keep_dims": True}))
    made.append(fl.apply_op("Sum", [i, fl.constant([1])], {}))
    for op in ("Sum", "Mean", "Max"):                 # few outputs of many elements: two passes
        made.append(fl.apply_op(op, [fl.zeros([3, 70_000]), fl.constant([1])], {}))
    for op in ("All", "Any"):
        made.append(fl.apply_op(op, [t["b"], fl.constant([1])], {}))
    for op in ("ArgMax", "ArgMin"):
        made.append(fl.apply_op(op, [x, fl.constant(1)], {"output_type": DType.i32}))
        made.append(fl.apply_op(op, [t["x3"], fl.constant(1)], {}))
    made += [fl.apply_op("L2Loss", [x], {}), fl.apply_op("BiasAddGrad", [x], {}),
             fl.apply_op("BiasAddGrad", [t["x4"]], {"data_format": "NCHW"}),
             fl.nn.softmax(x), fl.nn.log_softmax(x)]
    made += fl.apply_op("SoftmaxCrossEntropyWithLogits", [x, fl.nn.softmax(x)], {})
    made += fl.apply_op("SparseSoftmaxCrossEntropyWithLogits", [x, t["labels"]], {})
    v = fl.Variable(np.ones((16, 16), np.float32), name="v")
    vi = fl.Variable(np.ones((16, 16), np.int32), name="vi")
    h = v.handle if hasattr(v, "handle") else v._handle
    hi = vi.handle if hasattr(vi, "handle") else vi._handle
    rows = t["labels"]
    made += [fl.apply_op("ReadVariableOp", [h], {"dtype": DType.f32}),
             fl.apply_op("ResourceGather", [h, rows], {"dtype": DType.f32}),
             fl.apply_op("VarIsInitializedOp", [h], {})]
    for op in ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"):
        made.append(fl.apply_op(op, [h, m], {}))
    made.append(fl.apply_op("AssignAddVariableOp", [hi, t["i2"]], {}))
    # the fused products the fuse-updates pass makes on a GPU
    made += [fl.apply_op("_MatMulBiasAdd", [x, m, y], {}),
             fl.apply_op("_MatMulBiasAdd", [x, t["x2"], y], {"transpose_a": True}),
             fl.apply_op("_MatMulBiasAdd", [t["x2"], m, y], {"transpose_b": True})]
    made.append(fl.apply_op("_MatMulAssignSub", [h, x, t["x2"], fl.constant(0.5)],
                            {"transpose_a": True}))
    for op in ("ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterUpdate"):
        made.append(fl.apply_op(op, [h, rows, fl.zeros_like(x)], {}))
    made.append(fl.apply_op("ResourceScatterUpdate", [h, rows, fl.constant(1.0)], {}))
    # the fused sparse SGD step (fuse-updates)
    made.append(fl.apply_op("_ResourceScatterSubScaled", [h, rows, x, fl.constant(0.25)], {}))
    return made + _batch_norm_cases(t)


def _batch_norm_cases(t):
    """Fused batch normalization: training (empty statistics; a moving-average factor),
    inference, NCHW, the gradients in both modes, and the V1 and V2 forms."""
    x4 = t["x4"]                                              # NHWC [2, 3, 4, 5]
    c5 = fl.constant(np.linspace(0.5, 1.5, 5, dtype=np.float32))
    c3 = fl.constant(np.linspace(-1.0, 1.0, 3, dtype=np.float32))
    empty = fl.constant(np.zeros(0, np.float32))
    bn = fl.apply_op("FusedBatchNormV3", [x4, c5, c5 * 0.5, empty, empty], {"epsilon": 0.001})
    made = list(bn)
    made += fl.apply_op("FusedBatchNormV3", [x4, c5, c5, c5, c5 + 1.0],
                        {"exponential_avg_factor": 0.3})
    made += fl.apply_op("FusedBatchNormV3", [x4, c3, c3, c3, c3 + 2.0],
                        {"data_format": "NCHW", "is_training": False})
    made += fl.apply_op("FusedBatchNormGradV3", [x4 * 2.0, x4, c5, bn[3], bn[4], bn[5]], {})
    made += fl.apply_op("FusedBatchNormGradV3", [x4, x4, c3, c3, c3 + 2.0, bn[5]],
                        {"data_format": "NCHW", "is_training": False})
    made += fl.apply_op("FusedBatchNorm", [x4, c5, c5, c5, c5 + 1.0], {"is_training": False})
    made += fl.apply_op("FusedBatchNormV2", [x4, c5, c5, empty, empty], {})
    made += fl.apply_op("FusedBatchNormGrad", [x4, x4, c5, bn[3], bn[4]], {})
    made += fl.apply_op("FusedBatchNormGradV2", [x4, x4, c5, c5, c5 + 1.0],
                        {"is_training": False})
    return made


def _array_cases(t):
    x, i, m, rows = t["x"], t["i"], t["m"], t["labels"]
    made = []
    made += [fl.ones_like(x), fl.fill([3, 4], fl.constant(2.0)),
             fl.apply_op("Fill", [fl.constant([2, 5]), fl.constant(True)], {}),
             fl.shape(x), fl.size(x), fl.rank(t["x3"]),
             fl.transpose(t["x3"], [2, 0, 1]), fl.slice(x, [1, 2], [-1, 5]),
             fl.tile(x, [2, 3]), fl.concat([x, t["x2"], fl.zeros_like(x)], axis=1),
             fl.concat([t["x3"], t["x3"]], axis=0), fl.stack([x, t["x2"]], axis=1),
             fl.gather(m, rows), fl.gather(t["x3"], rows, axis=2),
             fl.reshape(x, [-1]), fl.reshape(x, fl.shape(x) * fl.constant([1, 1])),
             fl.squeeze(fl.expand_dims(x, 1), [1]), fl.identity(x), fl.stop_gradient(x),
             fl.apply_op("Snapshot", [x], {}),
             fl.placeholder_with_default(t["m"], [16, 16]),
             fl.pad(x, [[1, 2], [0, 3]]), x[1:, ::-2], t["x4"][0, ..., 1],
             t["x4"][:, None, 1:3, :], x[::3, 5], *fl.split(t["x3"], 2, axis=2),
             *fl.split(x, [3, 13], axis=1), *fl.unstack(t["x3"], axis=0),
             fl.one_hot(rows, 10), fl.one_hot(rows, 3, on_value=5, off_value=-1),
             fl.apply_op("UnsortedSegmentSum", [x, rows, fl.constant(4)], {}),
             fl.apply_op("UnsortedSegmentSum", [t["i"], rows, fl.constant(4)], {}),
             fl.apply_op("Range", [fl.constant(1), fl.size(rows), fl.constant(2)], {}),
             fl.apply_op("Range", [fl.constant(0.5), fl.cast(fl.size(rows), fl.float32),
                                   fl.constant(0.25)], {}),
             *fl.dynamic_partition(x, rows, 4), *fl.dynamic_partition(t["x3"], t["i2x3"], 3),
             fl.dynamic_stitch([rows, rows * 2 + 1], [x, x * 2.0]),
             fl.dynamic_stitch([t["i2x3"]], [t["x3"]])]
    for dtype in (DType.f32, DType.f64):
        made += [fl.random_uniform([5, 7], dtype=dtype, seed=1),
                 fl.random_normal([5, 7], dtype=dtype, seed=2),
                 fl.truncated_normal([5, 7], dtype=dtype, seed=3)]
    for dtype in (DType.i32, DType.i64):
        made.append(fl.apply_op("RandomUniformInt", [fl.constant([9]), fl.constant(-3, dtype),
                                                     fl.constant(40, dtype)], {"seed": 4}))
    return made + _conv_cases(t) + _image_cases(t)


def _image_cases(t):
    """Image resizing and its gradients (each coordinate rule, up and down, a size the host
    reads off the GPU, integer and f64 images), SpaceToBatchND/BatchToSpaceND (2-D blocks
    with paddings and crops, a 1-D block over a fed dim) and IdentityN."""
    x4 = t["x4"]                                              # NHWC [2, 3, 4, 5]
    x64 = fl.reshape(t["x64"], [-1, 2, 4, 2])                 # f64 [6, 2, 4, 2] when fed 6
    flags = ({}, {"align_corners": True}, {"half_pixel_centers": True})
    made = []
    for size in ([5, 7], [2, 3]):
        for f in flags:
            made += [fl.apply_op("ResizeBilinear", [x4, fl.constant(size)], f),
                     fl.apply_op("ResizeNearestNeighbor", [x4, fl.constant(size)], f)]
    grown = fl.shape(x4)[1:3] * 2 - 1                        # [5, 7], read on the host
    made += [fl.apply_op("ResizeBilinear", [fl.cast(x4 * 4.0, fl.int32), grown], {}),
             fl.apply_op("ResizeBilinear", [x64, fl.constant([3, 5])],
                         {"half_pixel_centers": True}),
             fl.apply_op("ResizeNearestNeighbor", [x64, grown], {"half_pixel_centers": True}),
             fl.apply_op("ResizeNearestNeighbor",
                         [fl.reshape(t["h"], [-1, 4, 2, 2]), fl.constant([3, 3])], {})]
    for f in flags:
        up = fl.apply_op("ResizeBilinear", [x4, fl.constant([5, 7])], f)
        made += [fl.apply_op("ResizeBilinearGrad", [up * 0.5, x4], f),
                 fl.apply_op("ResizeBilinearGrad", [x4[:, :2, :3, :], x4], f),
                 fl.apply_op("ResizeNearestNeighborGrad", [up, fl.constant([3, 4])], f),
                 fl.apply_op("ResizeNearestNeighborGrad", [x4, fl.constant([5, 7])], f),
                 fl.apply_op("ResizeNearestNeighborGrad", [x4, fl.constant([2, 3])], f)]
    made += [fl.apply_op("ResizeBilinearGrad",
                         [fl.apply_op("ResizeBilinear", [x64, fl.constant([3, 5])], {}), x64],
                         {}),
             fl.apply_op("ResizeNearestNeighborGrad", [x64, grown], {"align_corners": True}),
             fl.apply_op("ResizeNearestNeighborGrad", [fl.cast(x4 * 40.0, fl.int8),
                                                       fl.constant([2, 2])], {}),
             fl.apply_op("ResizeNearestNeighborGrad", [fl.cast(x4 * 9.0, fl.int32),
                                                       fl.constant([2, 3])],
                         {"half_pixel_centers": True})]
    for half in (t["h"], t["hb"]):                 # f16, bf16: computed in f32 (legalize-types)
        h4 = fl.reshape(half, [-1, 4, 2, 2])
        up = fl.apply_op("ResizeBilinear", [fl.cast(h4, fl.float32), fl.constant([3, 5])], {})
        made += [fl.apply_op("ResizeBilinearGrad", [up, h4], {}),
                 fl.apply_op("ResizeNearestNeighborGrad", [h4, fl.constant([2, 3])], {})]
    s2b = fl.space_to_batch_nd(x4, [2, 2], [[1, 0], [0, 2]])             # [8, 2, 3, 5]
    s2b1 = fl.space_to_batch_nd(t["x3"], [2], [[1, 1]])                  # fed dim 1
    made += [s2b, s2b1, fl.space_to_batch_nd(fl.cast(x4, fl.int32), [3, 1], [[0, 0], [1, 1]]),
             fl.batch_to_space_nd(s2b, [2, 2], [[1, 0], [0, 2]]),
             fl.batch_to_space_nd(s2b, [2, 1], [[0, 1], [1, 0]]),
             fl.batch_to_space_nd(s2b1, [2], [[1, 1]]),
             *fl.identity_n([x4, t["i"], t["h"]])]
    return made


def _conv_cases(t):
    x4 = t["x4"]                                              # NHWC [2, 3, 4, 5]
    f = fl.constant(np.ones((3, 3, 5, 2), np.float32)) * fl.reduce_sum(t["y"])
    window = {"strides": [1, 2, 1, 1], "padding": "SAME"}
    y = fl.nn.conv2d(x4, f, strides=[1, 2, 1, 1], padding="SAME")
    dy = fl.ones_like(y)
    made = [y, fl.apply_op("Conv2DBackpropInput", [fl.constant([2, 3, 4, 5]), f, dy], window),
            fl.apply_op("Conv2DBackpropFilter", [x4, fl.constant([3, 3, 5, 2]), dy], window),
            fl.nn.conv2d(x4, f, strides=[1, 1, 1, 1], padding="VALID", dilations=[1, 1, 2, 1])]
    pool = {"ksize": [1, 2, 2, 1], "strides": [1, 1, 2, 1], "padding": "VALID"}
    mp = fl.apply_op("MaxPool", [x4], pool)
    ap = fl.apply_op("AvgPool", [x4], dict(pool, padding="SAME"))
    made += [mp, ap, fl.apply_op("MaxPoolGrad", [x4, mp, fl.ones_like(mp)], pool),
             fl.apply_op("MaxPoolGradGrad", [x4, mp, x4 * 2.0], pool),
             fl.apply_op("AvgPoolGrad", [fl.constant([2, 3, 4, 5]), fl.ones_like(ap)],
                         dict(pool, padding="SAME")),
             # the fused forms the fuse-conv pass makes on a GPU
             fl.apply_op("_FusedConv2D", [x4, f, [t["y"][:2]]],
                         dict(window, fused_ops=["BiasAdd", "Relu"])),
             fl.apply_op("_FusedConv2D", [x4, f, [t["y"][:2]]],
                         {"strides": [1, 1, 1, 1], "padding": "VALID",
                          "fused_ops": ["BiasAdd"]}),
             fl.apply_op("_FusedConv2D", [x4, f, [t["y"][:2], y * 0.5]],
                         dict(window, fused_ops=["BiasAdd", "Add", "Relu6"])),
             fl.apply_op("_FusedConv2D", [x4, f, [t["y"][:2]]],
                         dict(window, fused_ops=["BiasAdd", "LeakyRelu"], leakyrelu_alpha=0.1)),
             fl.apply_op("_MaxPoolReluGrad", [x4, mp, x4[:, :2, :2, :] * 3.0], pool)]
    # grouped (TensorFlow's groups: input depth 6 = 2 groups of the filter's 3 in-channels),
    # plain and fused, with a stride and a dilation
    x6 = fl.concat([x4, x4[..., :1]], 3)
    fg = fl.constant(np.ones((2, 3, 3, 4), np.float32)) * fl.reduce_sum(t["y"])
    gwin = {"strides": [1, 1, 2, 1], "padding": "SAME", "dilations": [1, 2, 1, 1]}
    yg = fl.apply_op("Conv2D", [x6, fg], gwin)
    made += [yg, fl.apply_op("_FusedConv2D", [x6, fg, [t["y"][:4], yg * 0.5]],
                             dict(gwin, fused_ops=["BiasAdd", "Add", "Relu"]))]
    dyg = fl.ones_like(yg) * 0.5
    made += [fl.apply_op("Conv2DBackpropInput", [fl.constant([2, 3, 4, 6]), fg, dyg], gwin),
             fl.apply_op("Conv2DBackpropFilter", [x6, fl.constant([2, 3, 3, 4]), dyg], gwin)]
    # depthwise: multiplier 2 with a stride, multiplier 1 dilated and VALID; backprops with
    # constant sizes and with sizes the host reads from the GPU (a Shape of a GPU tensor)
    fd = fl.constant(np.ones((3, 2, 5, 2), np.float32)) * fl.reduce_sum(t["y"])
    dwin = {"strides": [1, 2, 1, 1], "padding": "SAME"}
    yd = fl.apply_op("DepthwiseConv2dNative", [x4, fd], dwin)
    dyd = fl.ones_like(yd) * 0.5
    made += [yd, fl.apply_op("_FusedDepthwiseConv2dNative", [x4, fd, [t["y"][:10], yd * 2.0]],
                             dict(dwin, fused_ops=["BiasAdd", "Add", "Elu"])),
             fl.apply_op("DepthwiseConv2dNative", [x4, fd[:, :, :, :1]],
                             {"strides": [1, 1, 1, 1], "padding": "VALID",
                              "dilations": [1, 1, 2, 1]}),
             fl.apply_op("DepthwiseConv2dNativeBackpropInput", [fl.constant([2, 3, 4, 5]), fd, dyd],
                         dwin),
             fl.apply_op("DepthwiseConv2dNativeBackpropInput", [fl.shape(x4 * 1.0), fd, dyd],
                         dwin),
             fl.apply_op("DepthwiseConv2dNativeBackpropFilter",
                         [x4, fl.constant([3, 2, 5, 2]), dyd], dwin)]
    return made


# The cases in three graphs: three modules, built by three nvcc processes at once.
CASE_GROUPS = ("_elementwise_cases", "_other_cases", "_array_cases")


def build_case_graph(group: str):
    """A graph, its feeds and the outputs of one group of cases, all requested on GPU:0."""
    g = fl.Graph()
    with g.as_default(), fl.device("/device:GPU:0"):
        t = {"x": fl.placeholder(fl.float32, [None, 16], name="x"),
             "x2": fl.placeholder(fl.float32, [None, 16], name="x2"),
             **{f"{k}{j}": fl.placeholder(dtype, [8, 16], name=f"{k}{j}")
                for k, dtype in (("xs", fl.float32), ("is", fl.int32), ("bs", DType.bool))
                for j in ("", "2")},
             "i3": fl.placeholder(fl.int32, [None, 16], name="i3"),
             "b2": fl.placeholder(DType.bool, [None, 16], name="b2"),
             "y": fl.placeholder(fl.float32, [16], name="y"),
             "x64": fl.placeholder(fl.float64, [None, 16], name="x64"),
             "h": fl.placeholder(fl.float16, [None, 16], name="h"),
             "hb": fl.placeholder(fl.bfloat16, [None, 16], name="hb"),
             "i": fl.placeholder(fl.int32, [None, 16], name="i"),
             "i2": fl.placeholder(fl.int32, [16, 16], name="i2"),
             "b": fl.placeholder(DType.bool, [None, 16], name="b"),
             "m": fl.placeholder(fl.float32, [16, 16], name="m"),
             "x3": fl.placeholder(fl.float32, [2, None, 16], name="x3"),
             "x4": fl.placeholder(fl.float32, [2, 3, 4, 5], name="x4"),
             "labels": fl.placeholder(fl.int32, [None], name="labels"),
             "i2x3": fl.placeholder(fl.int32, [2, None], name="i2x3")}
        cases = globals()[group](t)
        outs = [c for c in cases if hasattr(c, "output")]
        ops = [c for c in cases if not hasattr(c, "output")]
    return g, list(t.values()), outs, ops


def placed_step(g, feeds, fetches, targets):
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches],
                           [getattr(o, "node", o) for o in targets])
    # No constant folding or simplification: every case stays the op it is.
    pm = optimize(step, PipelineOptions(devices=(CPU0, GPU0),
                                        disable=("fold-constants", "simplify")))
    return step, pm


def _gpu_module(step):
    parts = split_by_device(step.graph)
    g = parts[GPU0]
    feeds = sorted((n for n in g if n.op == "Placeholder"), key=lambda n: n.name)
    retvals = sorted((n for n in g if n.op == "_Retval"), key=lambda n: n.attrs["index"])
    for k, r in enumerate(retvals):
        r.attrs["index"] = k
    return g, emit_cuda(g, feeds, retvals)


@pytest.fixture(scope="module")
def case_steps():
    steps = []
    for group in CASE_GROUPS:
        g, feeds, outs, ops = build_case_graph(group)
        steps.append(placed_step(g, feeds, outs, ops)[0])
    return steps


def test_every_cuda_kernel_has_a_case_and_stays_on_the_gpu(case_steps):
    covered = {n.op for step in case_steps for n in step.graph if n.assigned_device == GPU0}
    # A step graph never holds a PlaceholderWithDefault: fed, it is the step's Placeholder;
    # unfed, an Identity of its default (compiler/step.py). Its kernel serves IR run as is.
    covered.add("PlaceholderWithDefault")
    missing = set(ops_with_cuda_kernels()) - covered
    assert not missing, f"ops with CUDA kernels but no case on the GPU: {sorted(missing)}"
    on_cpu = [f"{n.name} ({n.op})" for step in case_steps for n in step.graph
              if n.assigned_device != GPU0]
    assert not on_cpu, f"cases that fell back to the CPU: {on_cpu}"


@needs_nvcc
def test_every_op_kernel_compiles_with_nvcc(case_steps, tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    modules = [_gpu_module(step)[1] for step in case_steps]
    with concurrent.futures.ThreadPoolExecutor(len(modules)) as pool:
        builds = list(pool.map(lambda m: build_cuda_module(m.source, "sm_90", name="cases"),
                               modules))
    for module, built in zip(modules, builds):
        assert not built.cached
        for kind in ("fatbin", "ptx", "cubin"):
            assert os.path.getsize(built.files[kind]) > 0
        kernels = set(re.findall(r"__global__ void __launch_bounds__\(FLOWC_BLOCK\) (\w+)\(",
                                 module.source))
        with open(built.files["ptx"]) as f:
            ptx_entries = set(re.findall(r"\.entry (\w+)\(", f.read()))
        assert kernels and kernels <= ptx_entries
    again = build_cuda_module(modules[0].source, "sm_90", name="cases")
    assert again.cached and again.key == builds[0].key


def _fake_cublas(folder, major):
    (folder / "include").mkdir(parents=True)
    (folder / "lib").mkdir()
    (folder / "include" / "cublas_v2.h").write_text('#include "cublas_api.h"\n')
    (folder / "include" / "cublas_api.h").write_text(f"#define CUBLAS_VER_MAJOR {major}\n")
    (folder / "lib" / f"libcublas.so.{major}").write_text("")
    return folder


@needs_nvcc
def test_cublas_is_found_beside_the_toolkit_in_its_home_or_not_at_all(tmp_path, monkeypatch):
    """FLOWC_CUBLAS_HOME (or the nvidia-cublas wheel) of nvcc's CUDA major version; another
    major version is not taken; FLOWC_CUDA_CUBLAS=0 turns cuBLAS off."""
    from compiler.codegen.cuda_build import (_cuda_major, cublas_home, cublas_link_flags,
                                             require_nvcc)
    nvcc = require_nvcc()
    major = _cuda_major(nvcc)
    if cublas_home(nvcc) == "":
        pytest.skip("this toolkit has cuBLAS itself")
    good = _fake_cublas(tmp_path / "good", major)
    other = _fake_cublas(tmp_path / "other", int(major) + 1)
    try:
        for home, env, want in ((good, {}, str(good)), (other, {}, None),
                                (good, {"FLOWC_CUDA_CUBLAS": "0"}, None)):
            monkeypatch.setenv("FLOWC_CUBLAS_HOME", str(home))
            monkeypatch.setenv("FLOWC_CUDA_CUBLAS", env.get("FLOWC_CUDA_CUBLAS", "1"))
            monkeypatch.setattr("sys.path", [])      # no wheel on the path
            monkeypatch.setattr("site.getsitepackages", lambda: [])
            monkeypatch.setattr("site.getusersitepackages", lambda: str(tmp_path / "none"))
            cublas_home.cache_clear()
            assert cublas_home(nvcc) == (os.path.realpath(want) if want else None), home
        monkeypatch.setenv("FLOWC_CUDA_CUBLAS", "1")
        monkeypatch.setenv("FLOWC_CUBLAS_HOME", str(good))
        cublas_home.cache_clear()
        flags = cublas_link_flags(nvcc)
        assert f"-I{os.path.realpath(good)}/include" in flags
        assert f"-l:libcublas.so.{major}" in flags
    finally:
        cublas_home.cache_clear()


@needs_nvcc
def test_matrix_products_link_against_cublas_where_it_is_found(tmp_path, monkeypatch):
    """The cuBLAS branch of MatMul and of the fused products compiles against cuBLAS's own
    header and links against its library: every symbol resolves when the module is loaded
    (no GPU needed for that). Skipped where no cuBLAS is found (FLOWC_CUBLAS_HOME names
    one, e.g. the nvidia-cublas wheel's nvidia/cu13)."""
    import ctypes
    import subprocess
    from compiler.codegen.cuda_build import cublas_available, require_nvcc
    if not cublas_available(require_nvcc()):
        pytest.skip("no cuBLAS for this nvcc (set FLOWC_CUBLAS_HOME to test the cuBLAS path)")
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 64], name="x")
        y = fl.placeholder(fl.int32, [None], name="y")
        xd = fl.placeholder(fl.float64, [8, 8], name="xd")
        w = fl.Variable(np.full((64, 10), 0.01, np.float32), name="w")
        b = fl.Variable(np.zeros(10, np.float32), name="b")
        loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=fl.matmul(x, w) + b))
        train = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
        d = fl.matmul(xd, xd, transpose_b=True)
    step = make_step_graph(g, [x.output, y.output, xd.output], [loss.output, d.output],
                           [getattr(train, "node", train)])
    optimize(step, PipelineOptions(devices=(CPU0, GPU0), default_device=GPU0))
    assert {"MatMul", "_MatMulBiasAdd", "_MatMulAssignSub"} <= {n.op for n in step.graph}
    module = emit_cuda(step.graph, step.feeds, step.retvals)
    built = build_cuda_module(module.source, "sm_90", name="cublas")
    needed = subprocess.run(["readelf", "-d", built.path], capture_output=True, text=True).stdout
    assert "libcublas.so" in needed
    ctypes.CDLL(built.path, mode=os.RTLD_LOCAL | os.RTLD_NOW)


def _fake_cudnn(site_dir, cuda_major):
    """A cuDNN wheel's layout: nvidia/cudnn/{include,lib} beside its dist-info, which names
    the CUDA major version it is for."""
    home = site_dir / "nvidia" / "cudnn"
    (home / "include").mkdir(parents=True)
    (home / "lib").mkdir()
    (home / "include" / "cudnn.h").write_text("#define CUDNN_MAJOR 9\n")
    (home / "lib" / "libcudnn.so.9").write_text("")
    (site_dir / f"nvidia_cudnn_cu{cuda_major}-9.0.0.dist-info").mkdir()
    return home


@needs_nvcc
def test_cudnn_is_found_in_its_home_or_wheel_of_the_toolkits_major_version_or_not_at_all(
        tmp_path, monkeypatch):
    """FLOWC_CUDNN_HOME or the nvidia-cudnn-cu<major> wheel on the path; a wheel of another
    CUDA major version is not taken; FLOWC_CUDA_CUDNN=0 turns cuDNN off, and
    FLOWC_CUDA_CONV=generated keeps it out of the build; a bad FLOWC_CUDA_CONV is an error."""
    from compiler.codegen.cuda_build import (_cuda_major, cudnn_available, cudnn_home,
                                             cudnn_link_flags, nvcc_flags, require_nvcc)
    from compiler.errors import BuildError
    nvcc = require_nvcc()
    major = _cuda_major(nvcc)
    if cudnn_home(nvcc) == "":
        pytest.skip("this toolkit has cuDNN itself")
    good = _fake_cudnn(tmp_path / "good", major)
    other = _fake_cudnn(tmp_path / "other", int(major) + 1)
    monkeypatch.setattr("site.getsitepackages", lambda: [])
    monkeypatch.setattr("site.getusersitepackages", lambda: str(tmp_path / "none"))
    monkeypatch.delenv("FLOWC_CUDA_CONV", raising=False)
    try:
        for home, path, env, want in ((good, [], {}, good), (other, [], {}, None),
                                      (None, [str(tmp_path / "good")], {}, good),
                                      (None, [str(tmp_path / "other")], {}, None),
                                      (good, [], {"FLOWC_CUDA_CUDNN": "0"}, None)):
            if home is None:
                monkeypatch.delenv("FLOWC_CUDNN_HOME", raising=False)
            else:
                monkeypatch.setenv("FLOWC_CUDNN_HOME", str(home))
            monkeypatch.setenv("FLOWC_CUDA_CUDNN", env.get("FLOWC_CUDA_CUDNN", "1"))
            monkeypatch.setattr("sys.path", path)
            cudnn_home.cache_clear()
            assert cudnn_home(nvcc) == (os.path.realpath(want) if want else None), (home, path)
        monkeypatch.setenv("FLOWC_CUDA_CUDNN", "1")
        monkeypatch.setenv("FLOWC_CUDNN_HOME", str(good))
        cudnn_home.cache_clear()
        flags = cudnn_link_flags(nvcc)
        assert f"-I{os.path.realpath(good)}/include" in flags
        assert f"-Xlinker" in flags and "-l:libcudnn.so.9" in flags
        assert "-DFLOWC_CUDNN_ALWAYS=0" in nvcc_flags("sm_90", False, cudnn=True)
        monkeypatch.setenv("FLOWC_CUDA_CONV", "cudnn")
        assert "-DFLOWC_CUDNN_ALWAYS=1" in nvcc_flags("sm_90", False, cudnn=True)
        monkeypatch.setenv("FLOWC_CUDA_CONV", "generated")
        assert not cudnn_available(nvcc) and cudnn_link_flags(nvcc) == []
        monkeypatch.setenv("FLOWC_CUDA_CONV", "fastest")
        with pytest.raises(BuildError, match="FLOWC_CUDA_CONV must be one of auto, cudnn, "
                                             "generated, not 'fastest'"):
            cudnn_available(nvcc)
    finally:
        cudnn_home.cache_clear()


@needs_nvcc
def test_convolutions_link_against_cudnn_where_it_is_found(tmp_path, monkeypatch):
    """A CNN training step (Conv2D fused with its bias and ReLU, a grouped Conv2D with a
    stride, both gradients of each) compiles for sm_90 against cuDNN's own header with its
    calls in, links against libcudnn, and loads with every symbol resolved (no GPU needed);
    no convolution has run, so it has no choices to report. Skipped where no cuDNN is found
    (FLOWC_CUDNN_HOME names one, e.g. the nvidia-cudnn-cu13 wheel's nvidia/cudnn)."""
    import ctypes
    import subprocess
    from compiler.codegen.cuda_build import cudnn_available, require_nvcc
    monkeypatch.delenv("FLOWC_CUDA_CONV", raising=False)
    if not cudnn_available(require_nvcc()):
        pytest.skip("no cuDNN for this nvcc (set FLOWC_CUDNN_HOME to test the cuDNN path)")
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 8, 8, 6], name="x")
        f1 = fl.Variable(np.full((3, 3, 6, 8), 0.01, np.float32), name="f1")
        b1 = fl.Variable(np.zeros(8, np.float32), name="b1")
        f2 = fl.Variable(np.full((3, 3, 4, 8), 0.01, np.float32), name="f2")   # 2 groups
        h = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(x, f1, strides=[1, 1, 1, 1],
                                                   padding="SAME"), b1))
        h2 = fl.apply_op("Conv2D", [h, f2], {"strides": [1, 2, 2, 1], "padding": "VALID"})
        loss = fl.reduce_mean(h2 * h2)
        train = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
    step = make_step_graph(g, [x.output], [loss.output], [getattr(train, "node", train)])
    optimize(step, PipelineOptions(devices=(CPU0, GPU0), default_device=GPU0))
    assert {"_FusedConv2D", "Conv2D", "Conv2DBackpropInput",
            "Conv2DBackpropFilter"} <= {n.op for n in step.graph}
    module = emit_cuda(step.graph, step.feeds, step.retvals)
    for call in ("cudnnConvolutionForward", "cudnnConvolutionBackwardData",
                 "cudnnConvolutionBackwardFilter", "cudnnFindConvolutionForwardAlgorithmEx"):
        assert call in module.source
    built = build_cuda_module(module.source, "sm_90", name="cudnn")
    needed = subprocess.run(["readelf", "-d", built.path], capture_output=True, text=True).stdout
    assert "libcudnn.so" in needed
    lib = ctypes.CDLL(built.path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
    lib.flowc_cuda_conv_choices.restype = ctypes.c_char_p
    assert lib.flowc_cuda_conv_choices() == b""
