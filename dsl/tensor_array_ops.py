"""``fl.TensorArray`` (TensorFlow 1.x's ``tf.TensorArray``): an array of tensors a loop writes
one element per iteration into, read back as one stacked tensor after it.

A ``TensorArray`` object is a handle plus a *flow*: every write returns a new object with the
next flow, and a read made from it runs after that write (TensorFlow's rule; the ops are in
``compiler/ops/tensor_array.py``). ``fl.while_loop`` takes TensorArrays among its loop
variables (their flows are what the loop carries)::

    ta = fl.TensorArray(fl.float32, size=0, dynamic_size=True)
    _, ta = fl.while_loop(lambda i, ta: i < n, lambda i, ta: (i + 1, ta.write(i, f(i))), [0, ta])
    ys = ta.stack()                      # [n, ...]

Each element is written once; with ``clear_after_read`` (the default) it is read once.
``infer_shape`` (the default) takes the element shape from the first write, so later reads
and ``stack`` know it.
"""
from __future__ import annotations

from typing import Optional

from compiler.ir.types import merge_shapes, normalize_shape, shape_str
from compiler.ops.tensor_array import tensor_array_node
from dsl.context import name_scope
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Operation, Tensor, static_shape
from runtime.dtypes import DType, as_dtype

__all__ = ["TensorArray"]


class TensorArray:
    """``tf.TensorArray`` (TensorFlow 1.x graph mode)."""

    def __init__(self, dtype, size=None, dynamic_size: Optional[bool] = None,
                 clear_after_read: Optional[bool] = None,
                 tensor_array_name: Optional[str] = None, handle=None, flow=None,
                 infer_shape: bool = True, element_shape=None,
                 colocate_with_first_write_call: bool = True, name: Optional[str] = None):
        self._dtype = as_dtype(dtype)
        self._infer_shape = infer_shape
        self._element_shape = normalize_shape(_dims(element_shape))
        self._dynamic_size = bool(dynamic_size)
        if handle is not None:
            if flow is None:
                raise ValueError("a TensorArray made from a handle needs its flow too")
            self._handle, self._flow = convert_to_tensor(handle), convert_to_tensor(flow)
            return
        if size is None:
            raise ValueError("a TensorArray needs a size (0 with dynamic_size=True to grow)")
        attrs = {"dtype": self._dtype, "element_shape": self._element_shape,
                 "dynamic_size": self._dynamic_size,
                 "clear_after_read": True if clear_after_read is None else bool(clear_after_read),
                 "identical_element_shapes": bool(infer_shape),
                 "tensor_array_name": tensor_array_name or ""}
        with name_scope(name or "TensorArray"):
            self._handle, self._flow = apply_op(
                "TensorArrayV3", [convert_to_tensor(size, dtype=DType.i32)], attrs,
                name="TensorArrayV3")

    # --- what it is ---------------------------------------------------------------------
    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def handle(self) -> Tensor:
        return self._handle

    @property
    def flow(self) -> Tensor:
        """The scalar that orders the array's reads after its writes."""
        return self._flow

    @property
    def element_shape(self):
        return self._element_shape

    @property
    def dynamic_size(self) -> bool:
        return self._dynamic_size

    def _with_flow(self, flow) -> "TensorArray":
        ta = TensorArray(self._dtype, handle=self._handle, flow=flow,
                         infer_shape=self._infer_shape, element_shape=self._element_shape,
                         dynamic_size=self._dynamic_size)
        return ta

    def _learn(self, shape) -> None:
        """With ``infer_shape``, what a write shows of the element shape is the array's: kept
        here for ``stack``, and on the ``TensorArrayV3`` node (its ``element_shape``), whose
        reads' shapes come from it (``tf.TensorArray`` sets each read's shape so)."""
        if not self._infer_shape:
            return
        try:
            self._element_shape = merge_shapes(self._element_shape, shape)
        except ValueError:
            raise ValueError(f"the value's shape {shape_str(shape)} is incompatible with the "
                             f"TensorArray's element shape {shape_str(self._element_shape)} "
                             "(written before)") from None
        node = tensor_array_node(self._handle.output)
        if node is not None and node.attrs.get("identical_element_shapes"):
            node.attrs["element_shape"] = merge_shapes(node.attrs.get("element_shape"),
                                                       self._element_shape)

    def identity(self) -> "TensorArray":
        return self._with_flow(apply_op("Identity", [self._flow]))

    # --- writes: each returns the TensorArray with the next flow --------------------------
    def write(self, index, value, name: Optional[str] = None) -> "TensorArray":
        """Element ``index`` := ``value`` (each element is written once)."""
        value = convert_to_tensor(value, dtype=self._dtype)
        flow = apply_op("TensorArrayWriteV3", [self._handle, _index(index), value, self._flow],
                        name=name or "TensorArrayWrite")
        ta = self._with_flow(flow)
        ta._learn(static_shape(value))
        return ta

    def scatter(self, indices, value, name: Optional[str] = None) -> "TensorArray":
        """Element ``indices[k]`` := ``value[k]``."""
        value = convert_to_tensor(value, dtype=self._dtype)
        flow = apply_op("TensorArrayScatterV3",
                        [self._handle, _index(indices), value, self._flow],
                        name=name or "TensorArrayScatter")
        ta = self._with_flow(flow)
        if static_shape(value) is not None:
            ta._learn(tuple(static_shape(value)[1:]))
        return ta

    def unstack(self, value, name: Optional[str] = None) -> "TensorArray":
        """Element k := ``value[k]`` for every row of ``value``."""
        value = convert_to_tensor(value, dtype=self._dtype)
        from dsl.array_ops import range as fl_range, shape as fl_shape
        with name_scope(name or "TensorArrayUnstack"):
            rows = fl_shape(value, out_type=DType.i32)[0]
            return self.scatter(fl_range(0, rows), value)

    # --- reads ----------------------------------------------------------------------------
    def read(self, index, name: Optional[str] = None) -> Tensor:
        """Element ``index`` (zeros if never written and the element shape is fully known)."""
        return apply_op("TensorArrayReadV3", [self._handle, _index(index), self._flow],
                        {"dtype": self._dtype}, name=name or "TensorArrayRead")

    def gather(self, indices, name: Optional[str] = None) -> Tensor:
        """Elements ``indices`` stacked: ``[len(indices), *element_shape]``."""
        return apply_op("TensorArrayGatherV3", [self._handle, _index(indices), self._flow],
                        {"dtype": self._dtype, "element_shape": self._element_shape},
                        name=name or "TensorArrayGather")

    def stack(self, name: Optional[str] = None) -> Tensor:
        """All elements stacked: ``[size, *element_shape]``."""
        from dsl.array_ops import range as fl_range
        with name_scope(name or "TensorArrayStack"):
            return self.gather(fl_range(0, self.size()))

    def size(self, name: Optional[str] = None) -> Tensor:
        return apply_op("TensorArraySizeV3", [self._handle, self._flow],
                        name=name or "TensorArraySize")

    def close(self, name: Optional[str] = None) -> Operation:
        return apply_op("TensorArrayCloseV3", [self._handle], name=name or "TensorArrayClose")


def _dims(shape):
    if shape is None:
        return None
    dims = getattr(shape, "dims", shape)
    return None if dims is None else [None if d is None else int(d) for d in dims]


def _index(index) -> Tensor:
    t = convert_to_tensor(index)
    if t.dtype is not DType.i32:
        from dsl.math_ops import cast
        t = cast(t, DType.i32)
    return t

