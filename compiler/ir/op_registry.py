"""The op registry: one ``OpDef`` per op, public so user packages can add their own ops.

An op is declared once with TensorFlow-style signature strings::

    register_op("MatMul",
                inputs=["a: T", "b: T"], outputs=["product: T"],
                attrs=["transpose_a: bool = false", "transpose_b: bool = false",
                       "T: {f32, f64, i32, i64}"],
                shape=matmul_shape, kernel=matmul_kernel, c_kernel=emit_matmul)

``shape`` computes output types from partially known input types (a ``ShapeContext``),
``kernel`` is the numpy reference implementation (the oracle, handed a ``ReferenceContext``).

The registry sits on the IR floor; target code sits above it. A target's lowering of an op
(``c_kernel``/``c_output_dims`` for C, ``cuda_kernel`` for CUDA) is attached from the codegen
floor (``compiler/codegen/c_ops/``, ``compiler/codegen/cuda_kernels.py``) with ``set_c_kernel``
and ``register_cuda_kernel``; the passes read those slots (does this op have a GPU kernel?)
without importing codegen. A user package above every floor may pass ``c_kernel=`` to
``register_op`` directly (see ``compiler.codegen.user_templates.c_template``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from compiler.errors import OpError, ShapeError
from compiler.ir.types import TensorType, normalize_shape
from runtime.dtypes import DType, as_dtype

REQUIRED = object()

# The type groups an op's type attr may name, as TensorFlow's kernels take them: ``float`` is
# TF's half, bfloat16, float and double (an op computes f16/bf16 in f32 where its kernel has no
# half arithmetic: ``computes_half_in_f32`` below and the ``legalize-types`` pass); ``int`` the
# signed and unsigned integers; ``signed`` what has a sign (Neg, Abs, Sign: TF's
# {half, bfloat16, float, double, int8, int16, int32, int64}).
HALF_TYPES = (DType.f16, DType.bf16)
FLOAT_TYPES = (DType.f32, DType.f64) + HALF_TYPES
UNSIGNED_TYPES = (DType.u8, DType.u16, DType.u32, DType.u64)
INT_TYPES = (DType.i8, DType.i16, DType.i32, DType.i64) + UNSIGNED_TYPES
SIGNED_TYPES = FLOAT_TYPES + (DType.i8, DType.i16, DType.i32, DType.i64)
NUMERIC_TYPES = FLOAT_TYPES + INT_TYPES
ALL_TYPES = NUMERIC_TYPES + (DType.bool,)
INDEX_TYPES = (DType.i32, DType.i64)

TYPE_GROUPS = {"float": FLOAT_TYPES, "int": INT_TYPES, "signed": SIGNED_TYPES,
               "numeric": NUMERIC_TYPES, "all": ALL_TYPES, "index": INDEX_TYPES,
               "realnumber": NUMERIC_TYPES}

ATTR_KINDS = {"type", "int", "float", "bool", "string", "shape", "tensor",
              "list(int)", "list(float)", "list(type)", "list(shape)", "list(string)", "list(bool)",
              "func", "any"}


@dataclass(frozen=True)
class ArgDef:
    """An input or output: a fixed dtype, a type attr (``T``), or ``N * T`` repeated."""
    name: str
    type_attr: Optional[str] = None
    dtype: Optional[DType] = None
    number_attr: Optional[str] = None
    type_list_attr: Optional[str] = None
    # a list of tensors (``N * T`` or a type list); a field, as every node built reads it
    is_list: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "is_list",
                           self.number_attr is not None or self.type_list_attr is not None)


@dataclass(frozen=True)
class AttrDef:
    name: str
    kind: str
    default: Any = REQUIRED
    allowed: Optional[Tuple] = None
    minimum: Optional[int] = None

    @property
    def has_default(self) -> bool:
        return self.default is not REQUIRED


@dataclass
class OpDef:
    name: str
    inputs: List[ArgDef]
    outputs: List[ArgDef]
    attrs: Dict[str, AttrDef]
    shape_fn: Optional[Callable] = None
    kernel: Optional[Callable] = None
    c_kernel: Optional[Callable] = None
    c_output_dims: Optional[Callable] = None
    c_alias: Optional[int] = None           # output 0 is a view of input i (no copy)
    gradient: Optional[Callable] = None
    cuda_kernel: Optional[Any] = None        # a ``CudaKernel``, set by ``register_cuda_kernel``
    group: str = "other"                    # elementwise | reduce | movement | matmul | source | other
    stateful: bool = False
    commutative: bool = False
    is_control_flow: bool = False
    is_communication: bool = False
    doc: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def elementwise(self) -> bool:
        return self.group == "elementwise"

    def attr_default(self, name: str):
        a = self.attrs[name]
        return a.default

    def input_arg_index(self, name: str) -> int:
        for i, a in enumerate(self.inputs):
            if a.name == name:
                return i
        raise KeyError(name)


_REGISTRY: Dict[str, OpDef] = {}


def get_op(name: str, node=None) -> OpDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise OpError(f"unknown op '{name}'", node) from None


def has_op(name: str) -> bool:
    return name in _REGISTRY


def all_ops() -> Dict[str, OpDef]:
    return dict(_REGISTRY)


def has_gpu_kernel(node) -> bool:
    """Whether ``node`` can run on a GPU: its op has a CUDA kernel that supports this node
    (the kernel's ``supports(node)``; a reshape's GPU kernel wants its shape constant)."""
    if not has_op(node.op):
        return False
    kernel = _REGISTRY[node.op].cuda_kernel
    return kernel is not None and (kernel.supports is None or bool(kernel.supports(node)))


# --- signature strings ------------------------------------------------------------------
_ARG_RE = re.compile(r"^\s*(\w+)\s*:\s*(?:(\w+)\s*\*\s*)?(\w+)\s*$")
_ATTR_RE = re.compile(r"^\s*(\w+)\s*:\s*(.+?)\s*(?:(?<![<>])=\s*(.+?))?\s*$")


def _parse_arg(text: str) -> ArgDef:
    m = _ARG_RE.match(text)
    if not m:
        raise ValueError(f"bad arg spec {text!r}; expected 'name: T', 'name: N * T' or 'name: f32'")
    name, number, typ = m.groups()
    try:
        dt = DType.parse(typ)
        return ArgDef(name, dtype=dt, number_attr=number)
    except ValueError:
        return ArgDef(name, type_attr=typ, number_attr=number)


def _list_typed(arg: ArgDef, attr_defs: Dict[str, "AttrDef"]) -> ArgDef:
    """``values: Tlist`` where ``Tlist`` is a ``list(type)`` attr is a list of tensors."""
    a = attr_defs.get(arg.type_attr) if arg.type_attr else None
    if a is not None and a.kind == "list(type)" and arg.number_attr is None:
        return ArgDef(arg.name, type_list_attr=arg.type_attr)
    return arg


def _parse_default(kind: str, text: str):
    t = text.strip()
    if kind == "bool":
        return {"true": True, "false": False}[t.lower()]
    if kind == "int":
        return int(t)
    if kind == "float":
        return float(t)
    if kind == "string":                       # "text" or 'text' (so '' is the empty string)
        if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
            return t[1:-1]
        return t
    if kind == "type":
        return DType.parse(t)
    if kind == "shape":
        return None if t in ("unknown", "None", "[*]") else normalize_shape(
            [None if x.strip() in ("?", "-1") else int(x) for x in t.strip("[]").split(",") if x.strip()])
    if kind.startswith("list("):
        inner = kind[5:-1]
        body = t.strip("[]").strip()
        return [_parse_default(inner, x) for x in body.split(",")] if body else []
    if kind == "tensor":
        return None
    raise ValueError(f"no default syntax for kind {kind}")


def _parse_attr(text: str) -> AttrDef:
    m = _ATTR_RE.match(text)
    if not m:
        raise ValueError(f"bad attr spec {text!r}")
    name, kind, default = m.groups()
    allowed = None
    minimum = None
    if kind.startswith("{"):
        names = [x.strip() for x in kind.strip("{}").split(",") if x.strip()]
        types: List[DType] = []
        for n in names:
            if n in TYPE_GROUPS:
                types.extend(TYPE_GROUPS[n])
            else:
                types.append(DType.parse(n))
        allowed = tuple(dict.fromkeys(types))
        kind = "type"
    elif kind.startswith("list({") or kind == "list(type)":
        kind = "list(type)"
    elif ">=" in kind:
        kind, _, mn = kind.partition(">=")
        kind = kind.strip()
        minimum = int(mn)
    if kind not in ATTR_KINDS:
        raise ValueError(f"unknown attr kind {kind!r} in {text!r}")
    value = REQUIRED if default is None else _parse_default(kind, default)
    if allowed is not None and value is not REQUIRED and value not in allowed:
        raise ValueError(f"default {value} of attr {name} is not one of its allowed types")
    return AttrDef(name, kind, value, allowed, minimum)


def register_op(name: str, *, inputs: Sequence[str] = (), outputs: Sequence[str] = (),
                attrs: Sequence[str] = (), shape: Optional[Callable] = None,
                kernel: Optional[Callable] = None, c_kernel: Optional[Callable] = None,
                c_output_dims: Optional[Callable] = None, c_alias: Optional[int] = None,
                group: str = "other", stateful: bool = False, commutative: bool = False,
                is_control_flow: bool = False, is_communication: bool = False,
                doc: str = "", replace: bool = False, **extra) -> OpDef:
    """Register an op. Raises if the name is taken unless ``replace=True``."""
    if name in _REGISTRY and not replace:
        raise OpError(f"op '{name}' is already registered")
    attr_defs = {a.name: a for a in map(_parse_attr, attrs)}
    in_args = [_list_typed(_parse_arg(s), attr_defs) for s in inputs]
    out_args = [_list_typed(_parse_arg(s), attr_defs) for s in outputs]
    op = OpDef(name, in_args, out_args, attr_defs,
               shape, kernel, c_kernel, c_output_dims, c_alias, None, None, group, stateful, commutative,
               is_control_flow, is_communication, doc, dict(extra))
    for arg in op.inputs + op.outputs:
        for ref in (arg.type_attr, arg.number_attr, arg.type_list_attr):
            if ref is not None and ref not in attr_defs:
                raise ValueError(f"op {name}: arg {arg.name} refers to undeclared attr {ref}")
        if arg.number_attr and attr_defs[arg.number_attr].kind != "int":
            raise ValueError(f"op {name}: arg {arg.name} repeats by {arg.number_attr}, "
                             f"which is not an int attr")
        if arg.type_attr and attr_defs[arg.type_attr].kind != "type":
            raise ValueError(f"op {name}: arg {arg.name} is typed by {arg.type_attr}, "
                             f"which is not a type attr")
    _REGISTRY[name] = op
    return op


def set_c_kernel(name: str, c_kernel: Optional[Callable], c_output_dims: Optional[Callable] = None,
                 **c_facts) -> OpDef:
    """Attach (or replace) the C lowering of an already registered op: its emitter, the C
    expressions of its dynamic output dims, and facts the C code generator reads from
    ``OpDef.extra`` (``c_expr``, ``c_owns_outputs``, ``c_in_place``, ``c_release``, ...).
    Called from the codegen floor (``compiler/codegen/c_ops/``) and by user packages."""
    op = get_op(name)
    op.c_kernel = c_kernel
    if c_output_dims is not None:
        op.c_output_dims = c_output_dims
    op.extra.update(c_facts)
    return op


# --- f16/bf16: stored as such, computed in f32 ----------------------------------------
def half_native(op: OpDef) -> bool:
    """Whether ``op``'s kernels take f16/bf16 values as they are stored: it moves, holds or
    converts them without arithmetic (Identity, Reshape, ConcatV2, Const, variables, queues,
    control flow, Cast). Declared with ``register_op(..., half_native=True)``; every target's
    lowering of such an op must take 2-byte floats. Any other op computes f16/bf16 in f32."""
    return op.extra.get("half_native", False)


def f32_type_attrs(op: OpDef, attrs: Dict[str, Any]) -> Dict[str, Any]:
    """``attrs`` with every f16/bf16 type attr (and list(type) entry) made f32: the attrs
    of the f32 node that computes a half node."""
    out = dict(attrs)
    for name, a in op.attrs.items():
        v = out.get(name)
        if a.kind == "type" and isinstance(v, DType) and v.is_half:
            out[name] = DType.f32
        elif a.kind == "list(type)" and isinstance(v, list) and any(
                isinstance(t, DType) and t.is_half for t in v):
            out[name] = [DType.f32 if isinstance(t, DType) and t.is_half else t for t in v]
    return out


def computes_half_in_f32(node, op: Optional[OpDef] = None) -> bool:
    """Whether ``node`` has f16/bf16 inputs, outputs or type attrs and an op that is not
    ``half_native``: it computes in f32 (the reference kernel on f32 values, the compiled
    code after ``legalize-types`` put casts around it)."""
    op = op or get_op(node.op, node)
    if op.extra.get("half_native", False):
        return False
    for t in node.output_types:
        if t.dtype.is_half:
            return True
    for o in node.inputs:
        if o.node.output_types[o.index].dtype.is_half:
            return True
    for name, a in op.attrs.items():
        v = node.attrs.get(name)
        if a.kind == "type" and isinstance(v, DType) and v.is_half:
            return True
        if a.kind == "list(type)" and isinstance(v, list) and any(
                isinstance(t, DType) and t.is_half for t in v):
            return True
    return False


# --- attribute checking ----------------------------------------------------------------
def coerce_attr(op: OpDef, name: str, value, node=None):
    """Convert a user-given attr value to the canonical Python form for its kind."""
    a = op.attrs.get(name)
    if a is None:
        if name.startswith("_"):
            return value                      # internal/extension attrs pass through
        raise OpError(f"op {op.name} has no attr '{name}'; attrs are: {', '.join(op.attrs) or 'none'}", node)
    k = a.kind
    try:
        if k == "type":
            v = value if type(value) is DType else as_dtype(value)
            if a.allowed is not None and v not in a.allowed:
                raise OpError(f"attr {name}={v} is not allowed for {op.name}; allowed: "
                              f"{', '.join(map(str, a.allowed))}", node)
            return v
        if k == "int":
            v = _int64(_strict_int(value), op, name, node)
            if a.minimum is not None and v < a.minimum:
                raise OpError(f"attr {name}={v} must be >= {a.minimum}", node)
            return v
        if k == "float":
            return _strict_float(value)
        if k == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError
            return bool(value)
        if k == "string":
            if isinstance(value, bytes):
                value = value.decode()
            if not isinstance(value, str):
                raise TypeError
            return value
        if k == "shape":
            return normalize_shape(value) if value is not None else None
        if k == "tensor":
            arr = np.asarray(value)
            DType.from_numpy(arr.dtype)           # TypeError for dtypes flowc lacks
            return arr
        if k.startswith("list(") and k != "list(shape)" and isinstance(value, (str, bytes)):
            raise TypeError
        if k == "list(int)":
            return [_int64(_strict_int(x), op, name, node) for x in _as_list(value)]
        if k == "list(float)":
            return [_strict_float(x) for x in _as_list(value)]
        if k == "list(type)":
            return [as_dtype(x) for x in _as_list(value)]
        if k == "list(shape)":
            return [normalize_shape(x) if x is not None else None for x in _as_list(value)]
        if k == "list(string)":
            return [x.decode() if isinstance(x, bytes) else x if isinstance(x, str) else _raise_type()
                    for x in _as_list(value)]
        if k == "list(bool)":
            return [bool(x) if isinstance(x, (bool, np.bool_)) else _raise_type()
                    for x in _as_list(value)]
        return value
    except OpError:
        raise
    except (TypeError, ValueError):
        raise OpError(f"attr {name} of {op.name} must be a {k}, got {value!r}", node) from None


def _int64(v: int, op: OpDef, name: str, node) -> int:
    """An int attr is an int64, as TensorFlow's ``AttrValue.i`` (``1e39`` is an int, not one)."""
    if not -2 ** 63 <= v < 2 ** 63:
        raise OpError(f"attr {name} of {op.name} is out of range: {v:.6g} is not an int64", node)
    return v


def _raise_type():
    raise TypeError


def _strict_float(x) -> float:
    if isinstance(x, (bool, np.bool_, str, bytes)):
        raise TypeError
    return float(x)


def _strict_int(x) -> int:
    if isinstance(x, (bool, np.bool_, str, bytes)):
        raise TypeError
    try:
        v = int(x)
    except OverflowError:                     # inf is not an integer
        raise TypeError from None
    if v != x:
        raise TypeError
    return v


def _as_list(value):
    if isinstance(value, np.ndarray):
        return value.reshape(-1).tolist()
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def output_dtypes(op: OpDef, attrs: Dict[str, Any]) -> List[DType]:
    """Per output tensor, the dtype the signature gives it with these attrs."""
    out: List[DType] = []
    for arg in op.outputs:
        if arg.type_list_attr:
            out.extend(attrs[arg.type_list_attr])
            continue
        dtype = arg.dtype if arg.dtype is not None else attrs[arg.type_attr]
        out.extend([dtype] * (attrs[arg.number_attr] if arg.number_attr else 1))
    return out


# --- contexts handed to shape functions and reference kernels ------------------------
class ShapeContext:
    """What a shape function sees: input types, attrs, and constant input values if known."""

    __slots__ = ("node", "_op", "input_types", "attrs", "_values")

    def __init__(self, node, input_types: Sequence[TensorType], attrs: Dict[str, Any],
                 input_values: Optional[Sequence[Optional[np.ndarray]]] = None,
                 op: Optional[OpDef] = None):
        self.node = node
        self._op = op
        self.input_types = input_types if type(input_types) is list else list(input_types)
        self.attrs = attrs
        # a sequence indexed on demand (it may compute each value when asked)
        self._values = input_values if input_values is not None else [None] * len(input_types)

    @property
    def op(self) -> OpDef:
        return self._op if self._op is not None else get_op(self.node.op, self.node)

    def attr(self, name: str):
        return self.attrs[name]

    def input_type(self, i: int) -> TensorType:
        return self.input_types[i]

    def input_shape(self, i: int):
        return self.input_types[i].shape

    def input_dtype(self, i: int) -> DType:
        return self.input_types[i].dtype

    def input_value(self, i: int) -> Optional[np.ndarray]:
        """The input's value if it is known at compile time (a constant), else None."""
        return self._values[i]

    def output_dtype(self, i: int = 0) -> DType:
        """The dtype the signature gives output ``i`` (list outputs counted one by one)."""
        dtypes = output_dtypes(self.op, self.attrs)
        if i >= len(dtypes):
            raise ShapeError(f"the shape function returned output {i}, but the signature of "
                             f"{self.op.name} gives {len(dtypes)} outputs", self.node)
        return dtypes[i]

    def error(self, message: str) -> ShapeError:
        return ShapeError(message, self.node)


class ReferenceContext:
    """What a numpy reference kernel sees: attrs, the node, and output types."""

    def __init__(self, node, attrs: Dict[str, Any], output_types: Sequence[TensorType], state=None):
        self.node = node
        self.attrs = attrs
        self.output_types = list(output_types)
        self.state = state                  # runtime resources (variables, queues), when any

    def out_dtype(self, i: int = 0) -> np.dtype:
        return self.output_types[i].dtype.np
