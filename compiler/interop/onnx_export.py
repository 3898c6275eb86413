"""flowc IR -> ONNX (``flowc export MODEL --format onnx``), for the ops that map back.

The exported graph is the model's step graph after ``prune``, ``infer-shapes`` and
``fold-constants`` (so seeded initializers are constants): Placeholders become graph inputs
(unknown dims as named symbolic dims), fetches the graph outputs, constants initializers.
Layout: flowc's convolutions and pools are NHWC as in TensorFlow; ONNX's are NCHW, so each is
wrapped in two Transposes (as tf2onnx does before its optimizer removes the pairs).

Each flowc op maps through one function of ``_EXPORTERS`` (opset 17). A graph with ops that have
no ONNX form is refused with one error listing them all with counts; variables are refused
unless a checkpoint gives their values (``flowc export --checkpoint``: they become
initializers, ``compiler/freeze.py``). The step is an inference step unless the model's
``training`` switch is on (``--training``): dropout leaves it.
"""
from __future__ import annotations

import collections
from typing import Callable, Dict, List, Optional

import numpy as np

from compiler.ir.graph import Graph, Node, Output
from runtime.dtypes import DType
from runtime.errors import FlowcError

OPSET = 17


class OnnxExportError(FlowcError):
    """A graph, or part of it, that has no ONNX form."""


def _onnx():
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError as e:
        raise OnnxExportError(f"exporting ONNX needs the onnx package ({e}); install it with: "
                              "pip install 'flowc[onnx]'") from None
    return onnx, helper, numpy_helper


_ONNX_DTYPE = {DType.f32: 1, DType.u8: 2, DType.i8: 3, DType.u16: 4, DType.i16: 5, DType.i32: 6,
               DType.i64: 7, DType.bool: 9, DType.f16: 10, DType.f64: 11, DType.u32: 12,
               DType.u64: 13, DType.bf16: 16}


class _Exporter:
    def __init__(self, graph: Graph, feeds: List[Output], fetches: List[Output],
                 fetch_names: List[str]):
        self.onnx, self.helper, self.numpy_helper = _onnx()
        self.graph, self.feeds, self.fetches, self.fetch_names = graph, feeds, fetches, fetch_names
        self.nodes: list = []
        self.initializers: list = []
        self.names: Dict[Output, str] = {}
        self.constants: Dict[Output, np.ndarray] = {}
        self._fresh = 0

    # --- naming and helpers -------------------------------------------------------------
    def name(self, out: Output) -> str:
        return self.names[out]

    def fresh(self, base: str) -> str:
        self._fresh += 1
        return f"{base}__{self._fresh}"

    def const_input(self, value: np.ndarray, base: str) -> str:
        name = self.fresh(base)
        self.initializers.append(self.numpy_helper.from_array(np.asarray(value), name))
        return name

    def const_of(self, n: Node, i: int, what: str) -> np.ndarray:
        out = n.inputs[i]
        if out not in self.constants:
            raise OnnxExportError(f"node '{n.name}' ({n.op}): its {what} must be a constant to "
                                  f"export to ONNX (it comes from '{out.node.name}')")
        return self.constants[out]

    def emit(self, op: str, inputs: List[str], outputs: List[str], **attrs) -> None:
        self.nodes.append(self.helper.make_node(op, inputs, outputs, name=self.fresh(op), **attrs))

    def value_info(self, name: str, out: Output):
        shape = None if out.shape is None else [d if d is not None else f"{name}_d{k}"
                                                 for k, d in enumerate(out.shape)]
        return self.helper.make_tensor_value_info(name, _ONNX_DTYPE[out.dtype], shape)

    # --- the graph ------------------------------------------------------------------------
    def run(self, graph_name: str):
        self._check()
        for k, f in enumerate(self.feeds):
            self.names[f] = f.node.name
        inputs = [self.value_info(self.names[f], f) for f in self.feeds]
        for n in self.graph:
            if n.op == "Placeholder" and n.output(0) in self.names:
                continue
            if n.op == "Const":
                value = np.asarray(n.attrs["value"])
                self.constants[n.output(0)] = value
                self.names[n.output(0)] = n.name
                self.initializers.append(self.numpy_helper.from_array(value, n.name))
                continue
            for o in n.outputs:
                self.names[o] = n.name if o.index == 0 else f"{n.name}:{o.index}"
            _EXPORTERS[n.op](self, n)
        outputs = []
        for name, f in zip(self.fetch_names, self.fetches):
            src = self.names[f]
            if src != name:
                self.emit("Identity", [src], [name])
            outputs.append(self.value_info(name, f))
        g = self.helper.make_graph(self.nodes, graph_name, inputs, outputs, self.initializers)
        model = self.helper.make_model(g, opset_imports=[self.helper.make_opsetid("", OPSET)],
                                       producer_name="flowc")
        self.onnx.checker.check_model(model)
        return model

    def _check(self) -> None:
        missing = collections.Counter()
        state = collections.Counter()
        for n in self.graph:
            if n.op in ("VarHandleOp", "ReadVariableOp", "AssignVariableOp"):
                state[n.op] += 1
            elif n.op not in _EXPORTERS and n.op not in ("Const", "Placeholder"):
                missing[n.op] += 1
        lines = []
        if state:
            lines.append("  variables have no ONNX form: bake the trained weights in as "
                         "constants with --checkpoint PREFIX_OR_DIR ("
                         + ", ".join(f"{op} x{c}" for op, c in sorted(state.items())) + ")")
        if missing:
            lines.append(f"  {len(missing)} op(s) without an ONNX export ("
                         f"{sum(missing.values())} node(s)): "
                         + ", ".join(f"{op} x{c}" for op, c in sorted(missing.items())))
        if lines:
            raise OnnxExportError("cannot export this graph to ONNX:\n" + "\n".join(lines))


# --- per-op exporters -------------------------------------------------------------------------
_EXPORTERS: Dict[str, Callable[[_Exporter, Node], None]] = {}


def _exports(*ops):
    def register(fn):
        for op in ops:
            _EXPORTERS[op] = fn
        return fn
    return register


_SAME_NAME = {"Identity": "Identity", "Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh",
              "Exp": "Exp", "Log": "Log", "Sqrt": "Sqrt", "Neg": "Neg", "Abs": "Abs",
              "Floor": "Floor", "Ceil": "Ceil", "Reciprocal": "Reciprocal", "Erf": "Erf",
              "Sin": "Sin", "Cos": "Cos", "Sign": "Sign", "LogicalNot": "Not",
              "Add": "Add", "AddV2": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div",
              "Maximum": "Max", "Minimum": "Min", "Pow": "Pow", "Equal": "Equal",
              "Less": "Less", "Greater": "Greater", "LessEqual": "LessOrEqual",
              "GreaterEqual": "GreaterOrEqual", "LogicalAnd": "And", "LogicalOr": "Or",
              "BiasAdd": "Add", "Softplus": "Softplus", "StopGradient": "Identity",
              "Select": "Where", "SelectV2": "Where"}


@_exports(*_SAME_NAME)
def _same(e: _Exporter, n: Node) -> None:
    if n.op == "BiasAdd" and n.attrs.get("data_format", "NHWC") != "NHWC":
        raise OnnxExportError(f"node '{n.name}' (BiasAdd): only data_format NHWC exports")
    if n.op == "Select":
        c, t = n.inputs[0].type.shape, n.inputs[1].type.shape
        if c is None or t is None:
            raise OnnxExportError(f"node '{n.name}' (Select): its ranks must be known")
        if len(c) == 1 and len(t) > 1:           # a row per element: [n] -> [n, 1, ...]
            rows = e.fresh(n.name + "/rows")
            axes = np.arange(1, len(t), dtype=np.int64)
            e.emit("Unsqueeze", [e.name(n.inputs[0]), e.const_input(axes, n.name + "/axes")],
                   [rows])
            e.emit("Where", [rows, e.name(n.inputs[1]), e.name(n.inputs[2])],
                   [e.name(n.output(0))])
            return
    e.emit(_SAME_NAME[n.op], [e.name(i) for i in n.inputs], [e.name(n.output(0))])


@_exports("Rsqrt", "Square", "Relu6")
def _composed(e: _Exporter, n: Node) -> None:
    x, y = e.name(n.inputs[0]), e.name(n.output(0))
    if n.op == "Rsqrt":
        t = e.fresh(n.name + "/sqrt")
        e.emit("Sqrt", [x], [t])
        e.emit("Reciprocal", [t], [y])
    elif n.op == "Square":
        e.emit("Mul", [x, x], [y])
    else:
        dt = n.inputs[0].dtype.np
        e.emit("Clip", [x, e.const_input(np.array(0, dt), "zero"),
                        e.const_input(np.array(6, dt), "six")], [y])


@_exports("Softmax", "LogSoftmax")
def _softmax(e: _Exporter, n: Node) -> None:
    e.emit(n.op, [e.name(n.inputs[0])], [e.name(n.output(0))], axis=-1)


@_exports("MatMul")
def _matmul(e: _Exporter, n: Node) -> None:
    a, b = e.name(n.inputs[0]), e.name(n.inputs[1])
    if n.attrs.get("transpose_a") or n.attrs.get("transpose_b"):
        e.emit("Gemm", [a, b], [e.name(n.output(0))], transA=int(bool(n.attrs["transpose_a"])),
               transB=int(bool(n.attrs["transpose_b"])))
    else:
        e.emit("MatMul", [a, b], [e.name(n.output(0))])


@_exports("Reshape")
def _reshape(e: _Exporter, n: Node) -> None:
    shape = e.const_of(n, 1, "shape").astype(np.int64)
    e.emit("Reshape", [e.name(n.inputs[0]), e.const_input(shape, n.name + "/shape")],
           [e.name(n.output(0))])


@_exports("Transpose")
def _transpose(e: _Exporter, n: Node) -> None:
    perm = [int(p) for p in e.const_of(n, 1, "perm")]
    e.emit("Transpose", [e.name(n.inputs[0])], [e.name(n.output(0))], perm=perm)


@_exports("Cast")
def _cast(e: _Exporter, n: Node) -> None:
    e.emit("Cast", [e.name(n.inputs[0])], [e.name(n.output(0))], to=_ONNX_DTYPE[n.attrs["DstT"]])


@_exports("ArgMax", "ArgMin")
def _argmax(e: _Exporter, n: Node) -> None:
    axis = int(e.const_of(n, 1, "axis"))
    out = e.name(n.output(0))
    raw = out if n.attrs.get("output_type", DType.i64) is DType.i64 else e.fresh(n.name + "/i64")
    e.emit(n.op, [e.name(n.inputs[0])], [raw], axis=axis, keepdims=0)
    if raw != out:
        e.emit("Cast", [raw], [out], to=_ONNX_DTYPE[n.attrs["output_type"]])


_REDUCE = {"Sum": "ReduceSum", "Mean": "ReduceMean", "Max": "ReduceMax", "Min": "ReduceMin",
           "Prod": "ReduceProd"}


@_exports(*_REDUCE)
def _reduce(e: _Exporter, n: Node) -> None:
    axes = [int(a) for a in np.atleast_1d(e.const_of(n, 1, "reduction axes"))]
    keep = int(bool(n.attrs.get("keep_dims", False)))
    x, y = e.name(n.inputs[0]), e.name(n.output(0))
    if n.op == "Sum":                                 # opset 13+: axes as an input
        e.emit("ReduceSum", [x, e.const_input(np.array(axes, np.int64), n.name + "/axes")], [y],
               keepdims=keep)
    else:
        e.emit(_REDUCE[n.op], [x], [y], axes=axes, keepdims=keep)


@_exports("ConcatV2")
def _concat(e: _Exporter, n: Node) -> None:
    axis = int(e.const_of(n, len(n.inputs) - 1, "axis"))
    e.emit("Concat", [e.name(i) for i in n.inputs[:-1]], [e.name(n.output(0))], axis=axis)


@_exports("Squeeze")
def _squeeze(e: _Exporter, n: Node) -> None:
    dims = list(n.attrs.get("squeeze_dims") or [])
    if not dims:
        shape = n.inputs[0].shape
        if shape is None or any(d is None for d in shape):
            raise OnnxExportError(f"node '{n.name}' (Squeeze): squeezing every size-1 dim of a "
                                  "partly unknown shape has no ONNX form; name squeeze_dims")
        dims = [k for k, d in enumerate(shape) if d == 1]
    e.emit("Squeeze", [e.name(n.inputs[0]), e.const_input(np.array(dims, np.int64), "axes")],
           [e.name(n.output(0))])


@_exports("ExpandDims")
def _expand_dims(e: _Exporter, n: Node) -> None:
    axis = np.array([int(e.const_of(n, 1, "axis"))], np.int64)
    e.emit("Unsqueeze", [e.name(n.inputs[0]), e.const_input(axis, "axes")], [e.name(n.output(0))])


def _nhwc(n: Node) -> None:
    if n.attrs.get("data_format", "NHWC") != "NHWC":
        raise OnnxExportError(f"node '{n.name}' ({n.op}): only data_format NHWC exports")


def _pads(n: Node, kh: int, kw: int) -> dict:
    padding = n.attrs["padding"]
    if padding == "SAME":
        return {"auto_pad": "SAME_UPPER"}             # TensorFlow's SAME: the extra pad after
    if padding == "VALID":
        return {"auto_pad": "VALID"}
    raise OnnxExportError(f"node '{n.name}' ({n.op}): padding {padding} does not export")


def _to_nchw(e: _Exporter, x: str, base: str) -> str:
    t = e.fresh(base + "/nchw")
    e.emit("Transpose", [x], [t], perm=[0, 3, 1, 2])
    return t


def _to_nhwc(e: _Exporter, t: str, out: str) -> None:
    e.emit("Transpose", [t], [out], perm=[0, 2, 3, 1])


@_exports("Conv2D")
def _conv2d(e: _Exporter, n: Node) -> None:
    _nhwc(n)
    strides, dil = n.attrs["strides"], n.attrs.get("dilations", [1, 1, 1, 1])
    kernel = e.const_of(n, 1, "filter")                # [kh, kw, in, out] -> [out, in, kh, kw]
    w = e.const_input(np.ascontiguousarray(kernel.transpose(3, 2, 0, 1)), n.name + "/W")
    x = _to_nchw(e, e.name(n.inputs[0]), n.name)
    y = e.fresh(n.name + "/conv")
    e.emit("Conv", [x, w], [y], strides=[int(strides[1]), int(strides[2])],
           dilations=[int(dil[1]), int(dil[2])], kernel_shape=list(kernel.shape[:2]),
           **_pads(n, *kernel.shape[:2]))
    _to_nhwc(e, y, e.name(n.output(0)))


@_exports("MaxPool", "AvgPool")
def _pool(e: _Exporter, n: Node) -> None:
    _nhwc(n)
    k, s = n.attrs["ksize"], n.attrs["strides"]
    if k[0] != 1 or k[3] != 1 or s[0] != 1 or s[3] != 1:
        raise OnnxExportError(f"node '{n.name}' ({n.op}): pooling over batch or channels does "
                              "not export")
    x = _to_nchw(e, e.name(n.inputs[0]), n.name)
    y = e.fresh(n.name + "/pool")
    e.emit("MaxPool" if n.op == "MaxPool" else "AveragePool", [x], [y],
           kernel_shape=[int(k[1]), int(k[2])], strides=[int(s[1]), int(s[2])],
           **_pads(n, int(k[1]), int(k[2])))
    _to_nhwc(e, y, e.name(n.output(0)))


@_exports("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def _batch_norm(e: _Exporter, n: Node) -> None:
    """Inference-mode batch normalization as ONNX BatchNormalization (NCHW: NHWC inputs go
    through Transposes); the statistics outputs repeat the given mean and variance."""
    if n.attrs.get("is_training", True):
        raise OnnxExportError(f"node '{n.name}' ({n.op}): batch normalization in training mode "
                              "(batch statistics) does not export; export the model in "
                              "inference mode")
    fmt = n.attrs.get("data_format", "NHWC")
    if fmt not in ("NHWC", "NCHW"):
        raise OnnxExportError(f"node '{n.name}' ({n.op}): data_format {fmt} does not export")
    x, scale, offset, mean, var = (e.name(i) for i in n.inputs)
    out = e.name(n.output(0))
    eps = float(n.attrs.get("epsilon", 1e-4))
    if fmt == "NHWC":
        y = e.fresh(n.name + "/bn")
        e.emit("BatchNormalization", [_to_nchw(e, x, n.name), scale, offset, mean, var], [y],
               epsilon=eps)
        _to_nhwc(e, y, out)
    else:
        e.emit("BatchNormalization", [x, scale, offset, mean, var], [out], epsilon=eps)
    for k, src in ((1, mean), (2, var), (3, mean), (4, var)):
        e.emit("Identity", [src], [e.name(n.output(k))])
    if len(n.outputs) == 6:                          # V3's reserve_space_3: a scalar 0
        zero = e.const_input(np.zeros((), n.output(5).dtype.np), n.name + "/zero")
        e.emit("Identity", [zero], [e.name(n.output(5))])


def export_onnx(graph: Graph, feeds: List[Output], fetches: List[Output],
                fetch_names: List[str], graph_name: str = "flowc"):
    """The ``onnx.ModelProto`` of ``graph`` computing ``fetches`` from ``feeds`` (checked with
    ``onnx.checker``)."""
    return _Exporter(graph, list(feeds), list(fetches), list(fetch_names)).run(graph_name)


EXPORT_PASSES = ("prune", "infer-shapes", "fold-constants")


def export_model_onnx(model, path: str, checkpoint: Optional[str] = None) -> int:
    """Export a loaded model's step graph (see the module docstring) to ``path``; node count.
    ``checkpoint`` (a prefix or a folder): the variables the step reads become initializers
    of their values there (``flowc export --checkpoint``)."""
    import os
    from compiler.freeze import checkpoint_values, freeze_variables, variables_of
    from compiler.passes.manager import PassManager
    from compiler.options import PipelineOptions
    from compiler.step import make_step_graph
    step = make_step_graph(model.graph, model.feed_outputs(), model.fetches, model.targets)
    if checkpoint:
        PassManager(PipelineOptions(passes=("prune",))).run(step.graph)
        variables = variables_of(step.graph)
        if variables:
            freeze_variables(step.graph, checkpoint_values(checkpoint, variables, model.path),
                             variables, keep_reads=False)
    PassManager(PipelineOptions(passes=EXPORT_PASSES)).run(step.graph)
    retvals = sorted((n for n in step.graph if n.op == "_Retval"), key=lambda r: r.attrs["index"])
    fetches = [r.inputs[0] for r in retvals]
    for r in retvals:
        step.graph.erase_node(r)
    feeds = [p.output(0) for p in step.feeds]
    model_proto = export_onnx(step.graph, feeds, fetches, list(model.fetch_names),
                              graph_name=step.graph.name)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(model_proto.SerializeToString())
    os.replace(tmp, path)
    return len(model_proto.graph.node)
