"""Creating ops from Python: ``apply_op`` (what every builder function calls), constants,
placeholders, and ``fl.raw_ops.<OpName>`` for every registered op with TensorFlow's input and
attr names."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np

from compiler.errors import OpError
from compiler.ir.construct import make_node
from compiler.ir.location import caller_location
from compiler.ir.types import normalize_shape
from compiler.ops.registry import get_op, has_op, all_ops, OpDef
from dsl.context import get_default_graph
from dsl.tensor import Operation, Tensor
from runtime.dtypes import DType, as_dtype


def _infer_dtype(value) -> DType:
    arr = np.asarray(value)
    if arr.dtype.kind == "b":
        return DType.bool
    if arr.dtype.kind in "iu":
        if arr.size and (arr.max() > 2**31 - 1 or arr.min() < -2**31):
            return DType.i64
        return DType.i32
    if arr.dtype.kind == "f":
        return DType.f32 if arr.dtype != np.float64 or not isinstance(value, np.ndarray) else DType.f64
    raise TypeError(f"cannot convert {type(value).__name__} ({arr.dtype}) to a tensor")


def _to_array(value, dtype: DType, what: str = "value") -> np.ndarray:
    if isinstance(value, np.ndarray) and value.dtype == dtype.np:
        return value
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise TypeError(f"{what} {value!r} cannot be converted to a {dtype} tensor")
    if dtype.is_integer and arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise TypeError(f"{what} {value!r} is not exactly representable as {dtype}")
    if dtype.is_integer and arr.size:
        info = np.iinfo(dtype.np)
        if arr.min() < info.min or arr.max() > info.max:
            raise TypeError(f"{what} {value!r} is out of range for {dtype}")
    return np.array(arr, dtype=dtype.np)


def constant(value, dtype=None, shape=None, name: Optional[str] = None) -> Tensor:
    """A constant tensor (``tf.constant``); ``shape`` broadcasts a scalar or reshapes."""
    dt = as_dtype(dtype) if dtype is not None else (
        DType.from_numpy(value.dtype) if isinstance(value, np.ndarray) else _infer_dtype(value))
    arr = _to_array(value, dt)
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        arr = np.broadcast_to(arr, shape).copy() if arr.size == 1 else arr.reshape(shape)
    return apply_op("Const", [], {"value": arr, "dtype": dt}, name=name or "Const")


def placeholder(dtype, shape=None, name: Optional[str] = None) -> Tensor:
    """A value fed at run time (``tf.placeholder``); ``None`` dims are unknown."""
    return apply_op("Placeholder", [], {"dtype": as_dtype(dtype), "shape": normalize_shape(shape)},
                    name=name or "Placeholder")


def placeholder_with_default(input, shape, name: Optional[str] = None) -> Tensor:
    x = convert_to_tensor(input)
    return apply_op("PlaceholderWithDefault", [x], {"dtype": x.dtype, "shape": normalize_shape(shape)},
                    name=name or "PlaceholderWithDefault")


def convert_to_tensor(value, dtype=None, name: Optional[str] = None) -> Tensor:
    """Tensors pass through (dtype checked); Python and numpy values become constants."""
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype != as_dtype(dtype):
            raise TypeError(f"tensor {value.name} is {value.dtype}, expected {as_dtype(dtype)}")
        return value
    if isinstance(value, Operation):
        raise TypeError(f"operation '{value.name}' has no value; use one of its outputs")
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        from dsl.array_ops import stack
        return stack(list(value), name=name)
    return constant(value, dtype=dtype, name=name)


def _scoped_name(base: str) -> str:
    g = get_default_graph()
    scope = g.current_name_scope
    return f"{scope}/{base}" if scope else base


def apply_op(op_name: str, inputs: Sequence[Any], attrs: Optional[Dict[str, Any]] = None,
             name: Optional[str] = None):
    """Add an op to the default graph; returns a Tensor, a list of Tensors, or an Operation.

    ``inputs`` has one entry per input arg (a list for list args); non-tensors are converted to
    constants of the dtype the signature implies (so ``x + 1`` and ``reshape(x, [2, -1])``
    work as in TensorFlow).
    """
    op = get_op(op_name)
    attrs = dict(attrs or {})
    g = get_default_graph()
    loc = caller_location()
    if len(inputs) != len(op.inputs):
        raise OpError(f"{op_name} takes {len(op.inputs)} inputs "
                      f"({', '.join(a.name for a in op.inputs)}), got {len(inputs)}", None, loc)
    # Known type attrs: explicit attrs first, then tensor inputs.
    known: Dict[str, DType] = {k: as_dtype(v) for k, v in attrs.items()
                              if k in op.attrs and op.attrs[k].kind == "type"}
    for arg, value in zip(op.inputs, inputs):
        vals = value if arg.is_list else [value]
        if arg.type_attr and arg.type_attr not in known:
            for v in vals:
                if isinstance(v, Tensor):
                    known[arg.type_attr] = v.dtype
                    break
    flat_inputs = []
    for arg, value in zip(op.inputs, inputs):
        if arg.is_list:
            if isinstance(value, Tensor) or not isinstance(value, (list, tuple)):
                raise OpError(f"input '{arg.name}' of {op_name} must be a list of tensors", None, loc)
            vals = list(value)
        else:
            vals = [value]
        converted = []
        for v in vals:
            if isinstance(v, Tensor):
                if v.graph is not g:
                    raise OpError(f"tensor {v.name} is from another graph than the default graph", None, loc)
                converted.append(v.output)
                continue
            dt = arg.dtype
            if dt is None and arg.type_attr:
                dt = known.get(arg.type_attr)
                if dt is None:
                    a = op.attrs[arg.type_attr]
                    dt = a.default if a.has_default else None
            if dt is None:
                dt = _infer_dtype(v)
                if arg.type_attr:
                    known[arg.type_attr] = dt
            try:
                c = constant(v, dtype=dt)
            except TypeError as e:
                raise OpError(f"input '{arg.name}' of {op_name}: {e}", None, loc) from None
            converted.append(c.output)
        flat_inputs.append(converted if arg.is_list else converted[0])
    node = make_node(g, op_name, flat_inputs, attrs, name=_scoped_name(name or op_name),
                     control_inputs=g.current_control_inputs(), device=g.current_device,
                     location=loc)
    if node.num_outputs == 0:
        return Operation(node)
    if len(op.outputs) == 1 and not op.outputs[0].is_list:
        return Tensor(node.output(0))
    return [Tensor(o) for o in node.outputs]


class _RawOps:
    """``fl.raw_ops.MatMul(a=x, b=y, transpose_b=True)``: every registered op by its name."""

    def __getattr__(self, op_name: str):
        if not has_op(op_name):
            raise AttributeError(f"no op named '{op_name}' is registered")
        op = get_op(op_name)

        def call(*args, name: Optional[str] = None, **kwargs):
            if len(args) > len(op.inputs):
                raise OpError(f"{op_name} takes at most {len(op.inputs)} positional inputs")
            inputs = list(args)
            for arg in op.inputs[len(args):]:
                if arg.name not in kwargs:
                    raise OpError(f"{op_name} needs input '{arg.name}'")
                inputs.append(kwargs.pop(arg.name))
            return apply_op(op_name, inputs, kwargs, name=name)

        call.__name__ = op_name
        call.__doc__ = _signature_doc(op)
        return call

    def __dir__(self):
        return sorted(all_ops())


def _signature_doc(op: OpDef) -> str:
    ins = ", ".join(a.name for a in op.inputs)
    attrs = ", ".join(f"{a.name}: {a.kind}" for a in op.attrs.values())
    return f"{op.name}({ins}) attrs: {attrs}\n{op.doc}"


raw_ops = _RawOps()
