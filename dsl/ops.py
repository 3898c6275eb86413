"""Creating ops from Python: ``apply_op`` (what every builder function calls), constants,
placeholders, and ``fl.raw_ops.<OpName>`` for every registered op with TensorFlow's input and
attr names."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from compiler.errors import OpError
from compiler.ir.construct import make_node
from compiler.ir.graph import Output
from compiler.ir.location import caller_location
from compiler.ir.types import TensorType, normalize_shape
from compiler.ir.op_registry import get_op, has_op, all_ops, OpDef
from dsl.context import PendingOp, device_for, get_default_graph
from dsl.raw_op_names import PYTHON_NAMES
from dsl.tensor import Operation, Tensor
from runtime.dtypes import DType, as_dtype, numpy_kind


_CONST = get_op("Const")


def _infer_dtype(value) -> DType:
    """TensorFlow's rule: Python floats are f32, ints i32 (i64 when too big), bools bool;
    numpy arrays and scalars keep their dtype."""
    if isinstance(value, (np.ndarray, np.generic)):
        try:
            return DType.from_numpy(value.dtype)
        except TypeError as e:
            raise TypeError(f"cannot convert a numpy {value.dtype} value to a tensor: {e}") from None
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as e:
        raise TypeError(f"cannot convert {value!r} to a tensor: {e}") from None
    kind = arr.dtype.kind
    if kind == "b":
        return DType.bool
    if kind in "iu":
        if arr.size and (arr.max() > 2**31 - 1 or arr.min() < -2**31):
            return DType.i64
        return DType.i32
    if kind == "f":
        return DType.f32
    if kind == "O" and _all_ints(value):
        raise TypeError(f"cannot convert {value!r} to a tensor: an integer is out of range for i64")
    raise TypeError(f"cannot convert {type(value).__name__} {value!r} to a tensor")


def _all_ints(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_all_ints(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool)


def _to_array(value, dtype: DType, what: str = "value") -> np.ndarray:
    """``value`` as an array of ``dtype``; TypeError when that would change a value."""
    if isinstance(value, np.ndarray) and value.dtype == dtype.np:
        return value
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as e:
        raise TypeError(f"{what} {value!r} cannot be converted to a {dtype} tensor: {e}") from None
    kind = numpy_kind(arr.dtype)
    if kind not in "biuf":
        if kind == "O" and _all_ints(value):
            raise TypeError(f"{what} {value!r} is out of range for {dtype}")
        raise TypeError(f"{what} {value!r} cannot be converted to a {dtype} tensor")
    if dtype.is_bool != (kind == "b"):
        raise TypeError(f"{what} {value!r} cannot be converted to a {dtype} tensor"
                        + ("" if dtype.is_bool else " (booleans are not numbers)"))
    if dtype.is_integer and kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise TypeError(f"{what} {value!r} is not exactly representable as {dtype}")
    if dtype.is_integer and arr.size:
        info = np.iinfo(dtype.np)
        if arr.min() < info.min or arr.max() > info.max:
            raise TypeError(f"{what} {value!r} is out of range for {dtype}")
    if dtype.is_floating and kind in "iuf" and arr.size:
        with np.errstate(over="ignore", invalid="ignore"):
            out = arr.astype(dtype.np)
        if np.any(np.isinf(out) & np.isfinite(arr)):
            raise TypeError(f"{what} {value!r} is out of range for {dtype}")
        return out
    return np.array(arr, dtype=dtype.np)


# Python scalars that become these dtypes exactly, without numpy's general conversion (a
# model has thousands of ``x * 0.5``): the largest magnitude each takes as is.
_F32_MAX = float(np.finfo(np.float32).max)
_SCALAR_LIMITS = {DType.f32: _F32_MAX, DType.f64: float("inf")}
_INT_LIMITS = {DType.i32: 2**31 - 1, DType.i64: 2**63 - 1}


def _scalar_array(value, dtype: Optional[DType]) -> Optional[np.ndarray]:
    """``value`` (a Python bool, int or float) as a 0-d array of ``dtype`` (None: the
    inferred one) when that is exact and in range, else None (the general path decides)."""
    kind = type(value)
    if kind is float:
        dtype = dtype or DType.f32
        limit = _SCALAR_LIMITS.get(dtype)
        if limit is not None and (abs(value) <= limit or value != value):
            return np.array(value, dtype=dtype.np)
    elif kind is int:
        dtype = dtype or DType.i32
        limit = _INT_LIMITS.get(dtype)
        if limit is not None and -limit - 1 <= value <= limit:
            return np.array(value, dtype=dtype.np)
        if dtype in _SCALAR_LIMITS and abs(value) <= 2**24:       # exact in f32 and f64
            return np.array(value, dtype=dtype.np)
    elif kind is bool and (dtype is None or dtype is DType.bool):
        return np.array(value, dtype=np.bool_)
    return None


def constant(value, dtype=None, shape=None, name: Optional[str] = None) -> Tensor:
    """A constant tensor (``tf.constant``); ``shape`` broadcasts a scalar or reshapes."""
    dt = as_dtype(dtype) if dtype is not None else None
    arr = _scalar_array(value, dt)
    if arr is not None:
        dt = dt or DType.from_numpy(arr.dtype)
    else:
        dt = dt or _infer_dtype(value)
        arr = _to_array(value, dt)
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        if arr.size == 1:
            arr = np.broadcast_to(arr.reshape(()), shape).copy()
        elif arr.size == int(np.prod(shape)):
            arr = arr.reshape(shape)
        else:
            raise ValueError(f"constant with {arr.size} elements cannot have shape {list(shape)}")
    if isinstance(value, np.ndarray) and np.may_share_memory(arr, value):
        arr = np.array(arr, order="C")           # later changes to the user's array do not leak in
    # a Const's type is its value's: no shape function to run (a model makes thousands)
    return _add_op(get_default_graph(), _CONST, [], {"value": arr, "dtype": dt}, name or "Const",
                   caller_location(), [TensorType(dt, arr.shape)])


def placeholder(dtype, shape=None, name: Optional[str] = None) -> Tensor:
    """A value fed at run time (``tf.placeholder``); ``None`` dims are unknown."""
    return apply_op("Placeholder", [], {"dtype": as_dtype(dtype), "shape": normalize_shape(shape)},
                    name=name or "Placeholder")


def placeholder_with_default(input, shape, name: Optional[str] = None) -> Tensor:
    """Its ``input`` unless fed (``tf.placeholder_with_default``)."""
    x = convert_to_tensor(input)
    return apply_op("PlaceholderWithDefault", [x], {"dtype": x.dtype, "shape": normalize_shape(shape)},
                    name=name or "PlaceholderWithDefault")


def convert_to_tensor(value, dtype=None, name: Optional[str] = None) -> Tensor:
    """Tensors pass through (dtype checked); Python and numpy values become constants;
    variables (and sparse IndexedSlices) give their value."""
    if type(value) is not Tensor and hasattr(value, "_as_graph_tensor"):
        value = value._as_graph_tensor(dtype)
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


def _graph_value(v):
    """Variables in op inputs stand for their value (lists too)."""
    if hasattr(v, "_as_graph_tensor"):
        return v._as_graph_tensor()
    if isinstance(v, (list, tuple)) and any(hasattr(x, "_as_graph_tensor") for x in v):
        return [x._as_graph_tensor() if hasattr(x, "_as_graph_tensor") else x for x in v]
    return v


def _op_name(g, name: str) -> Tuple[str, bool]:
    """The full name of a new op and whether it is exact (a name ending in '/', as in TF)."""
    if name.endswith("/"):
        return name[:-1], True
    scope = g.current_name_scope
    return (f"{scope}/{name}" if scope else name), False


def apply_op(op_name: str, inputs: Sequence[Any], attrs: Optional[Dict[str, Any]] = None,
             name: Optional[str] = None):
    """Add an op to the default graph; returns a Tensor, a list of Tensors, or an Operation.

    ``inputs`` has one entry per input arg (a list for list args); non-tensors are converted to
    constants of the dtype the signature implies (so ``x + 1`` and ``reshape(x, [2, -1])``
    work as in TensorFlow).
    """
    op = get_op(op_name)
    attrs = dict(attrs) if attrs else {}
    g = get_default_graph()
    loc = caller_location()
    op_inputs = op.inputs
    if len(inputs) != len(op_inputs):
        raise OpError(f"{op_name} takes {len(op_inputs)} inputs "
                      f"({', '.join(a.name for a in op_inputs) or 'none'}), got {len(inputs)}",
                      None, loc)
    flat_inputs = _plain_inputs(op, inputs, g, loc)
    if flat_inputs is None:
        flat_inputs = _converted_inputs(op, inputs, attrs, g, loc)
    return _add_op(g, op, flat_inputs, attrs, name, loc)


def _plain_inputs(op: OpDef, inputs: Sequence[Any], g, loc) -> Optional[list]:
    """The inputs' outputs when each is a tensor of ``g`` for a one-tensor arg (the usual
    case, in short: nothing to convert); None when any needs ``_converted_inputs``."""
    flat = []
    for arg, value in zip(op.inputs, inputs):
        if type(value) is not Tensor or arg.is_list:
            return None
        out = value.output
        if out.node.graph is not g:
            raise OpError(f"tensor {value.name} is from another graph than the default graph",
                          None, loc)
        flat.append(out)
    return flat


def _converted_inputs(op: OpDef, inputs: Sequence[Any], attrs: Dict[str, Any], g, loc) -> list:
    """The inputs as outputs of ``g``: variables give their value, Python and numpy values
    become constants of the dtype the signature implies (one entry per arg, lists for list
    args)."""
    op_name, op_inputs = op.name, op.inputs
    # Known type attrs: explicit attrs first, then tensor inputs.
    known: Dict[str, DType] = {}
    for k, v in attrs.items():
        a = op.attrs.get(k)
        if a is not None and a.kind == "type":
            try:
                known[k] = as_dtype(v)
            except (TypeError, ValueError) as e:
                raise OpError(f"attr {k} of {op_name}: {e}", None, loc) from None
    # a variable stands for its value, or for its handle where the op takes a resource
    inputs = [v if type(v) is Tensor else
              v.handle if arg.dtype is DType.resource and hasattr(v, "_as_graph_tensor")
              else _graph_value(v) for arg, v in zip(op_inputs, inputs)]
    for arg, value in zip(op_inputs, inputs):
        if arg.type_attr and arg.type_attr not in known:
            if type(value) is Tensor:
                known[arg.type_attr] = value.output.dtype
                continue
            vals = value if arg.is_list and isinstance(value, (list, tuple)) else [value]
            for v in vals:
                if isinstance(v, Tensor):
                    known[arg.type_attr] = v.dtype
                    break
    flat_inputs = []
    for arg, value in zip(op_inputs, inputs):
        if type(value) is Tensor and not arg.is_list:
            out = value.output
            if out.node.graph is not g:
                raise OpError(f"tensor {value.name} is from another graph than the default "
                              "graph", None, loc)
            flat_inputs.append(out)
            continue
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
                    raise OpError(f"tensor {v.name} is from another graph than the default graph",
                                  None, loc)
                converted.append(v.output)
                continue
            if isinstance(v, Operation):
                raise OpError(f"input '{arg.name}' of {op_name}: operation '{v.name}' has no value; "
                              "use one of its outputs", None, loc)
            dt = arg.dtype
            if dt is None and arg.type_attr:
                dt = known.get(arg.type_attr)
                if dt is None:
                    a = op.attrs[arg.type_attr]
                    dt = a.default if a.has_default else None
            if dt is None:
                try:
                    dt = _infer_dtype(v)
                except TypeError as e:
                    raise OpError(f"input '{arg.name}' of {op_name}: {e}", None, loc) from None
                if arg.type_attr:
                    known[arg.type_attr] = dt
            try:
                c = constant(v, dtype=dt)
            except (TypeError, ValueError) as e:
                raise OpError(f"input '{arg.name}' of {op_name}: {e}", None, loc) from None
            converted.append(c.output)
        flat_inputs.append(converted if arg.is_list else converted[0])
    return flat_inputs


def _add_op(g, op: OpDef, flat_inputs: list, attrs: Dict[str, Any], name: Optional[str], loc,
            output_types: Optional[List[TensorType]] = None):
    """The node for ``op`` on ``flat_inputs`` in ``g``, under the current name scope, device,
    colocation and control-dependency blocks; its result as ``apply_op`` returns it.
    ``output_types``: known already (else the op's shape function gives them)."""
    op_name = op.name
    if g._colocation_stack and g._colocation_stack[-1] and "_class" not in attrs:
        attrs["_class"] = list(g._colocation_stack[-1])
    full_name, exact = _op_name(g, name or op_name)
    control = g.current_control_inputs(_input_nodes(flat_inputs)) if g._control_stack else []
    dev = device_for(g, PendingOp(op_name, full_name, attrs)) if g._device_stack else ""
    if exact and g.get(full_name) is not None:
        raise OpError(f"an op named '{full_name}' already exists", None, loc)
    node = make_node(g, op_name, flat_inputs, attrs, name=full_name, exact_name=exact,
                     control_inputs=control, device=dev, location=loc, output_types=output_types)
    g._record_created(node)
    if not node.output_types:
        return Operation(node)
    if len(op.outputs) == 1 and not op.outputs[0].is_list:
        return Tensor(Output(node, 0))
    return [Tensor(o) for o in node.outputs]


def _input_nodes(flat_inputs: list) -> list:
    nodes = []
    for value in flat_inputs:
        if isinstance(value, list):
            nodes.extend(o.node for o in value)
        else:
            nodes.append(value.node)
    return nodes


class _RawOps:
    """``fl.raw_ops.MatMul(a=x, b=y, transpose_b=True)``: every registered op by its name."""

    def __getattr__(self, op_name: str):
        if not has_op(op_name):
            raise AttributeError(f"no op named '{op_name}' is registered")
        op = get_op(op_name)

        def call(*args, name: Optional[str] = None, **kwargs):
            kwargs = _graph_keywords(op_name, kwargs)
            if len(args) > len(op.inputs):
                raise OpError(f"{op_name} takes at most {len(op.inputs)} positional inputs",
                              None, caller_location())
            inputs = list(args)
            for arg in op.inputs[:len(args)]:
                if arg.name in kwargs:
                    raise OpError(f"{op_name} got input '{arg.name}' twice (by position and by "
                                  "name)", None, caller_location())
            for arg in op.inputs[len(args):]:
                if arg.name not in kwargs:
                    python = PYTHON_NAMES.get(op_name, {}).get(arg.name)
                    also = f" (GraphDef name '{arg.name}')" if python else ""
                    raise OpError(f"{op_name} needs input '{python or arg.name}'{also}", None,
                                  caller_location())
                inputs.append(kwargs.pop(arg.name))
            return apply_op(op_name, inputs, kwargs, name=name)

        call.__name__ = op_name
        call.__doc__ = _signature_doc(op)
        return call

    def __dir__(self):
        return sorted(all_ops())


def _graph_keywords(op_name: str, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """``kwargs`` with TensorFlow's Python keyword names (``axis`` of ``Sum``) turned into the
    GraphDef names the op registry uses (``reduction_indices``); both are accepted."""
    renames = PYTHON_NAMES.get(op_name)
    if not renames:
        return kwargs
    out = dict(kwargs)
    for graph, python in renames.items():
        if python in out:
            if graph in out:
                raise OpError(f"{op_name} got '{python}' and '{graph}': they name the same "
                              f"argument (TensorFlow's Python name and its GraphDef name)",
                              None, caller_location())
            out[graph] = out.pop(python)
    return out


def _signature_doc(op: OpDef) -> str:
    renames = PYTHON_NAMES.get(op.name, {})
    ins = ", ".join(renames.get(a.name, a.name) for a in op.inputs)
    attrs = ", ".join(f"{renames.get(a.name, a.name)}: {a.kind}" for a in op.attrs.values())
    return f"{op.name}({ins}) attrs: {attrs}\n{op.doc}"


raw_ops = _RawOps()
