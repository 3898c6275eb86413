"""Arrays of tensors (TensorFlow 1.x's ``TensorArrayV3`` family): what a loop writes one
element per iteration into and reads back as one stacked tensor after it (``tf.TensorArray``,
``dynamic_rnn``'s outputs, an ONNX ``Loop``'s or ``Scan``'s scan outputs).

``TensorArrayV3`` makes a new array of ``size`` elements each time it runs (its handle lives
for the step) and a *flow* scalar; every op that writes takes a flow and returns the next one,
so a read made from a later flow runs after the writes (the ordering TensorFlow gets from
dataflow alone). Each element is written once (a second write is an error, as in
TensorFlow); a read of an element not written gives zeros when ``element_shape`` is fully
known, and is an error otherwise; with ``clear_after_read`` an element can be read once.
``dynamic_size`` lets writes past the end grow the array. ``TensorArrayGatherV3`` stacks
elements (all of one shape) into one tensor, ``TensorArrayScatterV3`` writes the rows of one.
``TensorArrayGradV3`` gives an array's gradient array (one per ``source``, made on first use
with the array's size and element shape), in which writes to one element add up
(``dsl/grad/tensor_array_grad.py``).

The handle's element shape reaches reads through ``Enter``/``Switch``/``Identity`` (the
TensorArray's ``element_shape`` attr): a read's static shape is the array's element shape.
The C arrays are in ``compiler/codegen/c_ops/tensor_array.py``.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.graph import Output
from compiler.ir.op_registry import register_op
from compiler.ir.types import TensorType, Shape, merge_shapes, shape_str, shapes_compatible
from runtime.dtypes import DType

# ops a handle passes through unchanged on its way from TensorArrayV3 to a read
_HANDLE_FORWARDING = ("Enter", "Identity", "Switch", "Merge", "Exit", "NextIteration")


class PyTensorArray:
    """The interpreter's TensorArray: a list of owned copies (None: not written)."""

    def __init__(self, name: str, size: int, dtype: DType, element_shape: Shape,
                 dynamic_size: bool, clear_after_read: bool, identical_element_shapes: bool):
        self.name, self.dtype = name, dtype
        self.element_shape = element_shape
        self.dynamic_size, self.clear_after_read = dynamic_size, clear_after_read
        self.identical_element_shapes = identical_element_shapes
        self.elems: List[Optional[np.ndarray]] = [None] * size
        self.cleared: List[bool] = [False] * size
        self.closed = False
        self.aggregate = False             # a gradient array: writes to one index add up
        self.grads: Dict[str, "PyTensorArray"] = {}

    def __repr__(self) -> str:
        return f"PyTensorArray({self.name!r}, size {len(self.elems)})"


def tensor_array_node(handle: Output):
    """The ``TensorArrayV3`` node a handle comes from (through Enter/Switch/Identity/...), or
    None when it cannot be told statically."""
    seen = set()
    out = handle
    while out.node not in seen:
        seen.add(out.node)
        if out.node.op == "TensorArrayV3" and out.index == 0:
            return out.node
        if out.node.op == "TensorArrayGradV3" and out.index == 0:   # same dtype and shape
            out = out.node.inputs[0]
            continue
        if out.node.op not in _HANDLE_FORWARDING or not out.node.inputs:
            return None
        out = out.node.inputs[0]
    return None


def _array_attrs(ctx):
    """(dtype, element_shape) of the array input 0 comes from, or (None, None) if unknown."""
    node = ctx.node
    if node is None or not node.inputs:
        return None, None
    ta = tensor_array_node(node.inputs[0])
    if ta is None:
        return None, None
    return ta.attrs.get("dtype"), ta.attrs.get("element_shape")


# --- shape functions -----------------------------------------------------------------------
def _scalar(ctx, i: int, what: str) -> None:
    s = ctx.input_shape(i)
    if s is not None and len(s) != 0:
        raise ctx.error(f"{what} must be a scalar, got shape {list(s)}")


def _vector(ctx, i: int, what: str) -> None:
    s = ctx.input_shape(i)
    if s is not None and len(s) != 1:
        raise ctx.error(f"{what} must be a vector, got shape {list(s)}")


def _flow_shape(ctx):
    return [TensorType(DType.f32, ())]


def _check_handle(ctx, what: str = "handle") -> None:
    if ctx.input_dtype(0) is not DType.resource:
        raise ctx.error(f"input 0 ({what}) must be a TensorArray handle (resource), got "
                        f"{ctx.input_dtype(0)}")


def _check_written_dtype(ctx, dtype: DType) -> None:
    want, _ = _array_attrs(ctx)
    if want is not None and want != dtype:
        raise ctx.error(f"TensorArray dtype is {want} but the op is trying to write dtype {dtype}")


def _array_shape(ctx):
    _scalar(ctx, 0, "size")
    return [TensorType(DType.resource, ()), TensorType(DType.f32, ())]


def _write_shape(ctx):
    _check_handle(ctx)
    _scalar(ctx, 1, "index")
    _scalar(ctx, 3, "flow_in")
    _check_written_dtype(ctx, ctx.input_dtype(2))
    _, element_shape = _array_attrs(ctx)
    if not shapes_compatible(element_shape, ctx.input_shape(2)):
        raise ctx.error(f"the value's shape {shape_str(ctx.input_shape(2))} is incompatible with "
                        f"the TensorArray's element shape {shape_str(element_shape)}")
    return _flow_shape(ctx)


def _read_shape(ctx):
    _check_handle(ctx)
    _scalar(ctx, 1, "index")
    _scalar(ctx, 2, "flow_in")
    _, element_shape = _array_attrs(ctx)
    return [TensorType(ctx.attr("dtype"), element_shape)]


def _gathered_element_shape(ctx) -> Shape:
    _, element_shape = _array_attrs(ctx)
    try:
        return merge_shapes(ctx.attr("element_shape"), element_shape)
    except ValueError:
        raise ctx.error(f"element_shape {shape_str(ctx.attr('element_shape'))} is incompatible "
                        f"with the TensorArray's {shape_str(element_shape)}") from None


def _gather_shape(ctx):
    _check_handle(ctx)
    _vector(ctx, 1, "indices")
    _scalar(ctx, 2, "flow_in")
    element = _gathered_element_shape(ctx)
    idx = ctx.input_shape(1)
    n = idx[0] if idx is not None and len(idx) == 1 else None
    return [TensorType(ctx.attr("dtype"), None if element is None else (n,) + tuple(element))]


def _scatter_shape(ctx):
    _check_handle(ctx)
    _vector(ctx, 1, "indices")
    _scalar(ctx, 3, "flow_in")
    _check_written_dtype(ctx, ctx.input_dtype(2))
    value, idx = ctx.input_shape(2), ctx.input_shape(1)
    if value is not None and len(value) == 0:
        raise ctx.error("value must have at least one dimension (one row per index)")
    if value is not None and idx is not None and None not in (value[0], idx[0]) \
            and value[0] != idx[0]:
        raise ctx.error(f"Expected len(indices) == values.shape[0], but saw: {idx[0]} vs. "
                        f"{value[0]}")
    _, element_shape = _array_attrs(ctx)
    if value is not None and not shapes_compatible(element_shape, tuple(value[1:])):
        raise ctx.error(f"the rows' shape {shape_str(tuple(value[1:]))} is incompatible with "
                        f"the TensorArray's element shape {shape_str(element_shape)}")
    return _flow_shape(ctx)


def _grad_shape(ctx):
    _check_handle(ctx)
    _scalar(ctx, 1, "flow_in")
    return [TensorType(DType.resource, ()), TensorType(DType.f32, ())]


def _size_shape(ctx):
    _check_handle(ctx)
    _scalar(ctx, 1, "flow_in")
    return [TensorType(DType.i32, ())]


def _close_shape(ctx):
    _check_handle(ctx)
    return []


# --- reference kernels ---------------------------------------------------------------------
def _array_of(ctx, handle) -> PyTensorArray:
    h = handle[()] if isinstance(handle, np.ndarray) else handle
    if not isinstance(h, PyTensorArray):
        raise ExecutionError("input 0 is not a TensorArray handle (made by TensorArrayV3)",
                             ctx.node)
    if h.closed:
        raise ExecutionError(f"TensorArray {h.name} has already been closed.", ctx.node)
    return h


def _fully_defined(shape: Shape) -> bool:
    return shape is not None and all(d is not None for d in shape)


def _array_kernel(ctx, size):
    size = int(np.asarray(size))
    if size < 0:
        raise ExecutionError(f"Size should be >= 0, got {size}", ctx.node)
    name = ctx.attrs.get("tensor_array_name") or ctx.node.name
    ta = PyTensorArray(name, size, ctx.attrs["dtype"], ctx.attrs.get("element_shape"),
                       ctx.attrs.get("dynamic_size", False),
                       ctx.attrs.get("clear_after_read", True),
                       ctx.attrs.get("identical_element_shapes", False))
    return [np.array(ta, dtype=object), np.float32(0)]


def _write(ctx, ta: PyTensorArray, index: int, value: np.ndarray) -> None:
    if index < 0 or (index >= len(ta.elems) and not ta.dynamic_size):
        raise ExecutionError(f"Tried to write to index {index} but array is not resizeable and "
                             f"size is: {len(ta.elems)}" if index >= 0 else
                             f"Tried to write to index {index} but array size is: "
                             f"{len(ta.elems)}", ctx.node)
    if index >= len(ta.elems):
        grow = index + 1 - len(ta.elems)
        ta.elems.extend([None] * grow)
        ta.cleared.extend([False] * grow)
    if ta.aggregate and ta.elems[index] is not None:
        if ta.elems[index].shape != value.shape:
            raise ExecutionError(f"Could not aggregate to TensorArray index {index} because the "
                                 f"existing shape is {list(ta.elems[index].shape)} but the new "
                                 f"input shape is {list(value.shape)}", ctx.node)
        ta.elems[index] = (ta.elems[index] + value).astype(ta.dtype.np)
        return
    if ta.elems[index] is not None or ta.cleared[index]:
        raise ExecutionError(f"Could not write to TensorArray index {index} because it has "
                             "already been written to.", ctx.node)
    if not shapes_compatible(ta.element_shape, value.shape):
        raise ExecutionError(f"Could not write to TensorArray index {index} because the value "
                             f"shape is {list(value.shape)} which is incompatible with the "
                             f"TensorArray's inferred element shape: "
                             f"{shape_str(ta.element_shape)}", ctx.node)
    if ta.identical_element_shapes:
        ta.element_shape = tuple(value.shape)
    ta.elems[index] = np.array(value, dtype=ta.dtype.np, copy=True)


def _read(ctx, ta: PyTensorArray, index: int) -> np.ndarray:
    if index < 0 or index >= len(ta.elems):
        raise ExecutionError(f"Tried to read from index {index} but array size is: "
                             f"{len(ta.elems)}", ctx.node)
    if ta.cleared[index]:
        raise ExecutionError(f"Could not read index {index} twice because it was cleared after "
                             "a previous read (perhaps try setting clear_after_read = false?)",
                             ctx.node)
    value = ta.elems[index]
    if value is None:
        if not _fully_defined(ta.element_shape):
            raise ExecutionError(f"Could not read from TensorArray index {index}: it has not "
                                 "been written to, and the element shape "
                                 f"{shape_str(ta.element_shape)} is not fully defined (with a "
                                 "fully defined element_shape, a read gives zeros)", ctx.node)
        return np.zeros(ta.element_shape, dtype=ta.dtype.np)
    if ta.clear_after_read:
        ta.elems[index] = None
        ta.cleared[index] = True
    return value


def _write_kernel(ctx, handle, index, value, flow_in):
    ta = _array_of(ctx, handle)
    _write(ctx, ta, int(np.asarray(index)), np.asarray(value))
    return [np.asarray(flow_in)]


def _read_kernel(ctx, handle, index, flow_in):
    ta = _array_of(ctx, handle)
    return [_read(ctx, ta, int(np.asarray(index))).astype(ctx.out_dtype(0), copy=False)]


def _gather_kernel(ctx, handle, indices, flow_in):
    ta = _array_of(ctx, handle)
    indices = np.asarray(indices).reshape(-1)
    if indices.size == 0:
        try:
            shape = merge_shapes(ctx.attrs.get("element_shape"), ta.element_shape)
        except ValueError:
            shape = None
        if not _fully_defined(shape):
            raise ExecutionError(f"TensorArray has size zero, but element shape "
                                 f"{shape_str(shape)} is not fully defined. Currently only "
                                 "static shapes are supported when packing zero-size "
                                 "TensorArrays.", ctx.node)
        return [np.zeros((0,) + tuple(shape), dtype=ctx.out_dtype(0))]
    values = [_read(ctx, ta, int(i)) for i in indices]
    for k, v in enumerate(values[1:], 1):
        if v.shape != values[0].shape:
            raise ExecutionError(f"TensorArray has inconsistent shapes. Index {indices[0]} has "
                                 f"shape: {list(values[0].shape)} but index {indices[k]} has "
                                 f"shape: {list(v.shape)}", ctx.node)
    return [np.stack(values).astype(ctx.out_dtype(0), copy=False)]


def _scatter_kernel(ctx, handle, indices, value, flow_in):
    ta = _array_of(ctx, handle)
    indices = np.asarray(indices).reshape(-1)
    value = np.asarray(value)
    if value.ndim == 0 or value.shape[0] != indices.size:
        raise ExecutionError(f"Expected len(indices) == values.shape[0], but saw: "
                             f"{indices.size} vs. {value.shape[0] if value.ndim else 0}",
                             ctx.node)
    for k, i in enumerate(indices):
        _write(ctx, ta, int(i), value[k])
    return [np.asarray(flow_in)]


def _grad_kernel(ctx, handle, flow_in):
    ta = _array_of(ctx, handle)
    source = ctx.attrs["source"]
    if source not in ta.grads:
        grad = PyTensorArray(f"{ta.name}@{source}", len(ta.elems), ta.dtype, ta.element_shape,
                             False, True, ta.identical_element_shapes)
        grad.aggregate = True
        ta.grads[source] = grad
    return [np.array(ta.grads[source], dtype=object), np.asarray(flow_in)]


def _size_kernel(ctx, handle, flow_in):
    return [np.int32(len(_array_of(ctx, handle).elems))]


def _close_kernel(ctx, handle):
    ta = _array_of(ctx, handle)
    ta.elems = [None] * len(ta.elems)
    ta.closed = True
    return []


# --- registrations ---------------------------------------------------------------------------
register_op("TensorArrayV3", inputs=["size: i32"], outputs=["handle: resource", "flow: f32"],
            attrs=["dtype: type", "element_shape: shape = [*]", "dynamic_size: bool = false",
                   "clear_after_read: bool = true", "identical_element_shapes: bool = false",
                   'tensor_array_name: string = ""'],
            shape=_array_shape, kernel=_array_kernel, stateful=True, group="source",
            doc="A new array of size dtype tensors (for this step) and its first flow.")

register_op("TensorArrayWriteV3",
            inputs=["handle: resource", "index: i32", "value: T", "flow_in: f32"],
            outputs=["flow_out: f32"], attrs=["T: type"],
            shape=_write_shape, kernel=_write_kernel, c_alias=3, stateful=True,
            doc="Copies value into element index (written once) and forwards the flow.")

register_op("TensorArrayReadV3", inputs=["handle: resource", "index: i32", "flow_in: f32"],
            outputs=["value: dtype"], attrs=["dtype: type"],
            shape=_read_shape, kernel=_read_kernel, stateful=True,
            doc="Element index (zeros if not written and the element shape is fully known).")

register_op("TensorArrayGatherV3", inputs=["handle: resource", "indices: i32", "flow_in: f32"],
            outputs=["value: dtype"], attrs=["dtype: type", "element_shape: shape = [*]"],
            shape=_gather_shape, kernel=_gather_kernel, stateful=True,
            doc="The elements at indices stacked into one tensor (they must share a shape).")

register_op("TensorArrayScatterV3",
            inputs=["handle: resource", "indices: i32", "value: T", "flow_in: f32"],
            outputs=["flow_out: f32"], attrs=["T: type"],
            shape=_scatter_shape, kernel=_scatter_kernel, c_alias=3, stateful=True,
            doc="Writes row k of value into element indices[k]; forwards the flow.")

register_op("TensorArrayGradV3", inputs=["handle: resource", "flow_in: f32"],
            outputs=["grad_handle: resource", "flow_out: f32"], attrs=["source: string"],
            shape=_grad_shape, kernel=_grad_kernel, stateful=True,
            doc="The gradient array of handle for source (made on first use: the array's size "
                "and element shape; writes to one index add up), and the flow.")

register_op("TensorArraySizeV3", inputs=["handle: resource", "flow_in: f32"],
            outputs=["size: i32"],
            shape=_size_shape, kernel=_size_kernel, stateful=True,
            doc="The number of elements (a dynamic array grows with its writes).")

register_op("TensorArrayCloseV3", inputs=["handle: resource"], outputs=[],
            shape=_close_shape, kernel=_close_kernel, stateful=True,
            doc="Drops the elements; later ops on the array are errors.")
