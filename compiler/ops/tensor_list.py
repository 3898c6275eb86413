"""TensorFlow's ``TensorList*`` ops on dense lists, as XLA compiles them (tf2xla's list kernels).

In TensorFlow a list is a ``variant`` handle to a vector of tensors. flowc has dense tensors
only, so a list of ``n`` elements of shape ``E`` *is* the tensor ``[n, *E]``: the list ops keep
TensorFlow's names, inputs and attrs, and their ``handle`` inputs and outputs are that dense
tensor (of ``element_dtype``). A list that flows through a loop is a loop variable like any
other tensor. ``compiler/interop/graphdef.py`` imports TensorFlow 2's lists this way.

What differs from TensorFlow, as in XLA:

- Every element of a list has one shape. A list made with an element shape that is not fully
  known (``TensorListReserve`` with ``[-1, 4]``) starts with zero-size elements (the unknown dims
  are 0, TensorFlow's *uninitialized* elements); its first ``TensorListSetItem`` or
  ``TensorListPushBack`` gives all its elements the item's shape, the others zeros. Later
  items of another shape are an error naming the node. The rank must be known when the list
  is made (the importer infers it from the list's first item, as XLA does).
- ``max_num_elements`` of ``EmptyTensorList`` is not a buffer size: a list grows as it is
  pushed to (each push copies the list).

Out-of-range indices are errors with TensorFlow's messages, in the reference kernels here and
in the generated C (``compiler/codegen/c_ops/tensor_list.py``). Gradients:
``dsl/grad/tensor_list_grad.py``.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ir.types import TensorType, merge_shapes, shape_str
from compiler.ops.array.common import (_check_scalar_input, _partial_vector, _reference,
                                       _scalar_value)

Shape = Optional[tuple]


# --- shapes ----------------------------------------------------------------------------------
def element_shape_of(ctx, i: int) -> Shape:
    """The element shape that shape-like input ``i`` describes, as far as it is known: None
    for an unknown rank (a scalar ``-1``, or a vector of unknown length), else a tuple with
    None for each dim given as ``-1`` or unknown."""
    s = ctx.input_shape(i)
    v = ctx.input_value(i)
    if v is not None:
        if np.ndim(v) == 0:
            if int(v) >= 0:
                raise ctx.error(f"an element shape must be a vector or -1, got {int(v)}")
            return None
        if np.ndim(v) != 1:
            raise ctx.error(f"an element shape must be a vector, got shape {list(np.shape(v))}")
        return tuple(None if int(d) < 0 else int(d) for d in np.reshape(v, -1))
    if s is None or len(s) != 1:
        return None
    known = _partial_vector(ctx, i)
    if known is None:
        return None if s[0] is None else (None,) * s[0]
    return tuple(None if d is None or d < 0 else d for d in known)


def _merge(ctx, a: Shape, b: Shape, what: str) -> Shape:
    try:
        return merge_shapes(a, b)
    except ValueError:
        raise ctx.error(f"{what}: {shape_str(a)} is not compatible with {shape_str(b)}") from None


def _list_shape(ctx, i: int = 0):
    """(number of elements, element shape) of list input ``i`` (None where unknown)."""
    s = ctx.input_shape(i)
    if s is None:
        return None, None
    if len(s) == 0:
        raise ctx.error("a TensorList is a tensor of rank >= 1 (its elements along dim 0), "
                        "got a scalar")
    return s[0], tuple(s[1:])


def _with_item(ctx, elem: Shape, item: Shape) -> Shape:
    """The element shape of a list after an item was put in it: the item's (a list of zero-size
    elements takes the item's shape), which must fit the list's element shape."""
    if elem is None or item is None:
        return item if item is not None else elem
    if 0 in elem:
        return item
    return _merge(ctx, elem, item, "the item's shape does not match the list's element shape")


def _join(n, elem: Shape) -> Shape:
    return None if elem is None else (n,) + tuple(elem)


def _out(ctx, shape: Shape, i: int = 0) -> TensorType:
    return TensorType(ctx.output_dtype(i), shape)


def _reserve_shape(ctx):
    _check_scalar_input(ctx, 1)
    n = _scalar_value(ctx, 1)
    if n is not None and n < 0:
        raise ctx.error(f"The num_elements to reserve must be a non negative number, but got {n}")
    return [_out(ctx, _join(n, element_shape_of(ctx, 0)))]


def _empty_shape(ctx):
    _check_scalar_input(ctx, 1)
    return [_out(ctx, _join(0, element_shape_of(ctx, 0)))]


def _from_tensor_shape(ctx):
    t = ctx.input_shape(0)
    if t is not None and len(t) == 0:
        raise ctx.error("TensorListFromTensor needs a tensor of rank >= 1, got a scalar")
    elem = element_shape_of(ctx, 1)
    if t is None:
        return [_out(ctx, _join(None, elem))]
    return [_out(ctx, (t[0],) + _merge(ctx, tuple(t[1:]), elem,
                                      "the tensor's elements do not match element_shape"))]


def _stack_shape(ctx):
    n, elem = _list_shape(ctx)
    want = ctx.attr("num_elements")
    if want != -1:
        n = _merge(ctx, (n,), (want,), "num_elements does not match the list's length")[0]
    elem = _merge(ctx, elem, element_shape_of(ctx, 1),
                  "the list's elements do not match element_shape")
    return [_out(ctx, _join(n, elem))]


def _get_item_shape(ctx):
    _check_scalar_input(ctx, 1)
    _, elem = _list_shape(ctx)
    return [_out(ctx, _merge(ctx, elem, element_shape_of(ctx, 2),
                             "the list's elements do not match element_shape"))]


def _set_item_shape(ctx):
    _check_scalar_input(ctx, 1)
    n, elem = _list_shape(ctx)
    index = _scalar_value(ctx, 1)
    if ctx.attr("resize_if_index_out_of_bounds"):
        n = None if n is None or index is None else max(n, index + 1)
    return [_out(ctx, _join(n, _with_item(ctx, elem, ctx.input_shape(2))))]


def _length_shape(ctx):
    _list_shape(ctx)
    return [TensorType(ctx.output_dtype(0), ())]


def _element_shape_shape(ctx):
    _, elem = _list_shape(ctx)
    return [TensorType(ctx.output_dtype(0), (None if elem is None else len(elem),))]


def _push_back_shape(ctx):
    n, elem = _list_shape(ctx)
    return [_out(ctx, _join(None if n is None else n + 1,
                            _with_item(ctx, elem, ctx.input_shape(1))))]


def _pop_back_shape(ctx):
    n, elem = _list_shape(ctx)
    if n == 0:
        raise ctx.error("Trying to pop from an empty list.")
    item = _merge(ctx, elem, element_shape_of(ctx, 1),
                  "the list's elements do not match element_shape")
    return [_out(ctx, _join(None if n is None else n - 1, elem)), _out(ctx, item, 1)]


def _gather_shape(ctx):
    _, elem = _list_shape(ctx)
    ind = ctx.input_shape(1)
    elem = _merge(ctx, elem, element_shape_of(ctx, 2),
                  "the list's elements do not match element_shape")
    return [_out(ctx, None if ind is None or elem is None else tuple(ind) + tuple(elem))]


def _scatter_rows(ctx, tensor, i_indices: int):
    """The element shape of a scatter's rows (``tensor`` without its dim 0), checking that
    ``tensor`` has one row per index."""
    ind = ctx.input_shape(i_indices)
    if tensor is None:
        return None
    if len(tensor) == 0:
        raise ctx.error("the tensor to scatter must have rank >= 1, got a scalar")
    if ind is not None and len(ind) != 1:
        raise ctx.error(f"indices must be a vector, got shape {shape_str(ind)}")
    if ind is not None and ind[0] is not None and tensor[0] is not None and ind[0] != tensor[0]:
        raise ctx.error(f"Invalid number of rows in input tensor. Expected: {ind[0]} "
                        f"Actual: {tensor[0]}")
    return tuple(tensor[1:])


def _scatter_length(ctx, i_indices: int, base):
    """A scatter's list length when the indices (and ``base``, the least length) are known."""
    indices = ctx.input_value(i_indices)
    if indices is None or base is None:
        return None
    return max([base] + [int(i) + 1 for i in np.reshape(indices, -1)])


def _scatter_shape(ctx):
    elem = _scatter_rows(ctx, ctx.input_shape(0), 1)
    elem = _merge(ctx, elem, element_shape_of(ctx, 2),
                  "the tensor's rows do not match element_shape")
    base = 0
    if ctx.op.name == "TensorListScatterV2":
        _check_scalar_input(ctx, 3)
        n = _scalar_value(ctx, 3)
        base = None if n is None else max(n, 0)
    return [_out(ctx, _join(_scatter_length(ctx, 1, base), elem))]


def _scatter_existing_shape(ctx):
    n, elem = _list_shape(ctx)
    rows = _scatter_rows(ctx, ctx.input_shape(1), 2)
    return [_out(ctx, _join(_scatter_length(ctx, 2, n), _with_item(ctx, elem, rows)))]


def _resize_shape(ctx):
    _check_scalar_input(ctx, 1)
    _, elem = _list_shape(ctx)
    size = _scalar_value(ctx, 1)
    if size is not None and size < 0:
        raise ctx.error(f"TensorListSlice expects size to be non-negative. Got: {size}")
    return [_out(ctx, _join(size, elem))]


# --- reference kernels -----------------------------------------------------------------------
def _scalar(a: np.ndarray, what: str) -> int:
    if np.size(a) != 1:
        raise ValueError(f"{what} must be a scalar, got shape {list(np.shape(a))}")
    return int(np.reshape(a, -1)[0])


def _element_dims(spec: np.ndarray) -> List[int]:
    """The dims of a new list's elements: an unknown dim (-1) is 0 until the first item."""
    if np.ndim(spec) == 0:
        raise ValueError("the element shape of a TensorList needs a known rank in flowc "
                         "(TensorFlow's -1): give the list an element_shape")
    return [max(int(d), 0) for d in np.reshape(spec, -1)]


def _check_element_shape(elem: Sequence[int], spec: np.ndarray, what: str) -> None:
    if np.ndim(spec) == 0:
        return
    want = [int(d) for d in np.reshape(spec, -1)]
    if len(want) != len(elem) or any(w >= 0 and w != d for w, d in zip(want, elem)):
        raise ValueError(f"{what}: the list's element shape {list(elem)} is not compatible "
                         f"with element_shape {want}")


def _put(lst: np.ndarray, n: int, item: np.ndarray, what: str) -> np.ndarray:
    """A list of ``n`` elements holding ``lst``'s (a list of zero-size elements takes the
    item's shape) into which ``item`` will be written."""
    if lst.size == 0:
        return np.zeros((n,) + item.shape, dtype=lst.dtype)
    if lst.shape[1:] != item.shape:
        raise ValueError(f"Tried to {what} a tensor with incompatible shape at a list index. "
                         f"Item element shape: {list(item.shape)} list shape: "
                         f"{list(lst.shape[1:])}")
    out = np.zeros((n,) + lst.shape[1:], dtype=lst.dtype)
    out[:min(n, lst.shape[0])] = lst[:n]
    return out


@_reference
def _reserve_kernel(ctx, element_shape, num_elements):
    n = _scalar(num_elements, "num_elements")
    if n < 0:
        raise ValueError(f"The num_elements to reserve must be a non negative number, but got {n}")
    return np.zeros([n] + _element_dims(element_shape), dtype=ctx.out_dtype())


@_reference
def _empty_kernel(ctx, element_shape, max_num_elements):
    _scalar(max_num_elements, "max_num_elements")
    return np.zeros([0] + _element_dims(element_shape), dtype=ctx.out_dtype())


@_reference
def _from_tensor_kernel(ctx, tensor, element_shape):
    if tensor.ndim == 0:
        raise ValueError("TensorListFromTensor needs a tensor of rank >= 1, got a scalar")
    _check_element_shape(tensor.shape[1:], element_shape, "TensorListFromTensor")
    return tensor


@_reference
def _stack_kernel(ctx, lst, element_shape):
    want = ctx.attrs["num_elements"]
    if want != -1 and want != lst.shape[0]:
        raise ValueError(f"Operation expected a list with {want} elements but got a list with "
                         f"{lst.shape[0]} elements.")
    _check_element_shape(lst.shape[1:], element_shape, "TensorListStack")
    return lst


def _index(index: np.ndarray, n: int, verb: str) -> int:
    i = _scalar(index, "index")
    if not 0 <= i < n:
        raise ValueError(f"Trying to {verb} element {i} in a list with {n} elements.")
    return i


@_reference
def _get_item_kernel(ctx, lst, index, element_shape):
    i = _index(index, lst.shape[0], "access")
    _check_element_shape(lst.shape[1:], element_shape, "TensorListGetItem")
    return lst[i].copy()


@_reference
def _set_item_kernel(ctx, lst, index, item):
    n = lst.shape[0]
    i = _scalar(index, "index")
    if ctx.attrs["resize_if_index_out_of_bounds"] and i >= n:
        n = i + 1
    i = _index(index, n, "modify")
    out = _put(lst, n, item, "set")
    out[i] = item
    return out


@_reference
def _length_kernel(ctx, lst):
    return np.array(lst.shape[0], dtype=np.int32)


@_reference
def _element_shape_kernel(ctx, lst):
    return np.array(lst.shape[1:], dtype=ctx.out_dtype())


@_reference
def _push_back_kernel(ctx, lst, item):
    n = lst.shape[0] + 1
    out = _put(lst, n, item, "push")
    out[n - 1] = item
    return out


@_reference
def _pop_back_kernel(ctx, lst, element_shape):
    if lst.shape[0] == 0:
        raise ValueError("Trying to pop from an empty list.")
    _check_element_shape(lst.shape[1:], element_shape, "TensorListPopBack")
    return lst[:-1].copy(), lst[-1].copy()


@_reference
def _gather_kernel(ctx, lst, indices, element_shape):
    flat = indices.reshape(-1).astype(np.int64)
    for i in flat:
        if not 0 <= i < lst.shape[0]:
            raise ValueError(f"Trying to access element {i} in a list with {lst.shape[0]} "
                             "elements.")
    _check_element_shape(lst.shape[1:], element_shape, "TensorListGather")
    return lst[flat].reshape(indices.shape + lst.shape[1:])


def _scatter_into(lst: np.ndarray, tensor: np.ndarray, indices: np.ndarray) -> np.ndarray:
    flat = indices.reshape(-1).astype(np.int64)
    if tensor.ndim == 0:
        raise ValueError("the tensor to scatter must have rank >= 1, got a scalar")
    if flat.size != tensor.shape[0]:
        raise ValueError(f"Invalid number of rows in input tensor. Expected: {flat.size} "
                         f"Actual: {tensor.shape[0]}")
    for i in flat:
        if i < 0:
            raise ValueError(f"Trying to scatter on a negative index: {i}")
    n = max([lst.shape[0]] + [int(i) + 1 for i in flat])
    out = _put(lst, n, np.zeros(tensor.shape[1:], tensor.dtype), "scatter")
    for k, i in enumerate(flat):          # a repeated index: the last row wins
        out[i] = tensor[k]
    return out


@_reference
def _scatter_kernel(ctx, tensor, indices, element_shape, num_elements=None):
    n = 0 if num_elements is None else max(_scalar(num_elements, "num_elements"), 0)
    _check_element_shape(tensor.shape[1:], element_shape, "TensorListScatter")
    empty = np.zeros((n,) + tensor.shape[1:], dtype=tensor.dtype)
    return _scatter_into(empty, tensor, indices)


@_reference
def _scatter_existing_kernel(ctx, lst, tensor, indices):
    return _scatter_into(lst, tensor, indices)


@_reference
def _resize_kernel(ctx, lst, size):
    n = _scalar(size, "size")
    if n < 0:
        raise ValueError(f"TensorListSlice expects size to be non-negative. Got: {n}")
    out = np.zeros((n,) + lst.shape[1:], dtype=lst.dtype)
    out[:min(n, lst.shape[0])] = lst[:n]
    return out


# --- the ops -----------------------------------------------------------------------------------
_SHAPE_TYPE = "shape_type: {i32, i64} = i32"
_ELEMENT = "element_dtype: {all}"

register_op("TensorListReserve", inputs=["element_shape: shape_type", "num_elements: i32"],
            outputs=["handle: element_dtype"], attrs=[_ELEMENT, _SHAPE_TYPE],
            shape=_reserve_shape, kernel=_reserve_kernel, group="source",
            doc="A list of num_elements elements (zeros; zero-size while their shape is not "
                "known): the dense tensor [num_elements, *element_shape].")

register_op("EmptyTensorList", inputs=["element_shape: shape_type", "max_num_elements: i32"],
            outputs=["handle: element_dtype"], attrs=[_ELEMENT, _SHAPE_TYPE],
            shape=_empty_shape, kernel=_empty_kernel, group="source",
            doc="A list with no elements: the dense tensor [0, *element_shape].")

register_op("TensorListFromTensor", inputs=["tensor: element_dtype", "element_shape: shape_type"],
            outputs=["output_handle: element_dtype"], attrs=[_ELEMENT, _SHAPE_TYPE],
            shape=_from_tensor_shape, kernel=_from_tensor_kernel, c_alias=0, group="movement",
            doc="The list of tensor's slices along dim 0: tensor itself (a view).")

register_op("TensorListStack", inputs=["input_handle: element_dtype", "element_shape: i32"],
            outputs=["tensor: element_dtype"], attrs=[_ELEMENT, "num_elements: int = -1"],
            shape=_stack_shape, kernel=_stack_kernel, c_alias=0, group="movement",
            doc="The list's elements stacked along a new dim 0: the list itself (a view).")

register_op("TensorListGetItem",
            inputs=["input_handle: element_dtype", "index: i32", "element_shape: Tshape"],
            outputs=["item: element_dtype"],
            attrs=[_ELEMENT, "Tshape: {i32, i64} = i32"],
            shape=_get_item_shape, kernel=_get_item_kernel, group="movement",
            doc="Element index of the list (out of range: an error).")

register_op("TensorListSetItem",
            inputs=["input_handle: element_dtype", "index: i32", "item: element_dtype"],
            outputs=["output_handle: element_dtype"],
            attrs=[_ELEMENT, "resize_if_index_out_of_bounds: bool = false"],
            shape=_set_item_shape, kernel=_set_item_kernel, group="other",
            doc="The list with element index replaced by item (out of range: an error, or the "
                "list grows to index + 1 with resize_if_index_out_of_bounds).")

register_op("TensorListLength", inputs=["input_handle: element_dtype"], outputs=["length: i32"],
            attrs=[_ELEMENT], shape=_length_shape, kernel=_length_kernel, group="other",
            doc="The number of elements of the list (element_dtype is flowc's: TensorFlow's "
                "variant handle needs no type).")

register_op("TensorListElementShape", inputs=["input_handle: element_dtype"],
            outputs=["element_shape: shape_type"], attrs=[_ELEMENT, _SHAPE_TYPE],
            shape=_element_shape_shape, kernel=_element_shape_kernel, group="other",
            doc="The shape of the list's elements.")

register_op("TensorListPushBack", inputs=["input_handle: element_dtype", "tensor: element_dtype"],
            outputs=["output_handle: element_dtype"], attrs=[_ELEMENT],
            shape=_push_back_shape, kernel=_push_back_kernel, group="other",
            doc="The list with tensor appended (a copy of the list, one element longer).")

register_op("TensorListPopBack", inputs=["input_handle: element_dtype", "element_shape: i32"],
            outputs=["output_handle: element_dtype", "tensor: element_dtype"], attrs=[_ELEMENT],
            shape=_pop_back_shape, kernel=_pop_back_kernel, group="other",
            doc="The list without its last element, and that element (empty: an error).")

register_op("TensorListGather",
            inputs=["input_handle: element_dtype", "indices: i32", "element_shape: i32"],
            outputs=["values: element_dtype"], attrs=[_ELEMENT],
            shape=_gather_shape, kernel=_gather_kernel, group="movement",
            doc="The elements at indices, stacked (out of range: an error).")

register_op("TensorListResize", inputs=["input_handle: element_dtype", "size: i32"],
            outputs=["output_handle: element_dtype"], attrs=[_ELEMENT],
            shape=_resize_shape, kernel=_resize_kernel, group="other",
            doc="The list cut or padded with zeros to size elements.")

register_op("TensorListScatter",
            inputs=["tensor: element_dtype", "indices: i32", "element_shape: shape_type"],
            outputs=["output_handle: element_dtype"], attrs=[_ELEMENT, _SHAPE_TYPE],
            shape=_scatter_shape, kernel=_scatter_kernel, group="other",
            doc="A list of max(indices) + 1 elements: row k of tensor at indices[k], zeros "
                "elsewhere.")

register_op("TensorListScatterV2",
            inputs=["tensor: element_dtype", "indices: i32", "element_shape: shape_type",
                    "num_elements: i32"],
            outputs=["output_handle: element_dtype"], attrs=[_ELEMENT, _SHAPE_TYPE],
            shape=_scatter_shape, kernel=_scatter_kernel, group="other",
            doc="TensorListScatter with at least num_elements elements.")

register_op("TensorListScatterIntoExistingList",
            inputs=["input_handle: element_dtype", "tensor: element_dtype", "indices: i32"],
            outputs=["output_handle: element_dtype"], attrs=[_ELEMENT],
            shape=_scatter_existing_shape, kernel=_scatter_existing_kernel, group="other",
            doc="The list with row k of tensor at indices[k] (grown to max(indices) + 1).")

LIST_OPS = ("TensorListReserve", "EmptyTensorList", "TensorListFromTensor", "TensorListStack",
            "TensorListGetItem", "TensorListSetItem", "TensorListLength",
            "TensorListElementShape", "TensorListPushBack", "TensorListPopBack",
            "TensorListGather", "TensorListResize", "TensorListScatter", "TensorListScatterV2",
            "TensorListScatterIntoExistingList")
