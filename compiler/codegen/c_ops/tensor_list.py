"""The C lowering of the dense TensorList ops (``compiler/ops/tensor_list.py``).

A list is the tensor ``[n, *E]``; its element ``i`` is the row of ``E`` elements at ``i * row``.
``TensorListFromTensor`` and ``TensorListStack`` are views (no code beyond their checks). A list
of zero-size elements (made before its element shape was known) takes the shape of its first
item: the ops that put an item in a list size their output from the item then. Indices are
checked before anything is written, with TensorFlow's messages.
"""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import Value, _c, _check_alloc, _elements
from compiler.codegen.kernel_context import KernelContext, TensorRef, product
from compiler.ir.op_registry import set_c_kernel


def _scalar(kc: KernelContext, i: int, name: str) -> str:
    kc.check_scalar(i, name)
    return f"((int64_t){kc.inputs[i].data}[0])"


def _bytes(ref: TensorRef, count: str) -> str:
    return f"(size_t)({count}) * sizeof({ref.ctype})"


def _zero(ref: TensorRef) -> str:
    return f"if ({ref.size} > 0) memset({ref.var}.data, 0, {_bytes(ref, ref.size)});"


def _element_dims(kc: KernelContext, i: int, rank: int) -> List[Value]:
    """A new list's element dims from shape input ``i``: an unknown dim (-1) is 0."""
    dims = _elements(kc, i, rank)
    return [max(d, 0) if isinstance(d, int) else f"({d} < 0 ? 0 : {d})" for d in dims]


def _check_element_shape(kc: KernelContext, lst: TensorRef, i: int, what: str) -> None:
    """Run-time checks that the list's dynamic element dims fit element_shape input ``i``
    (the shape function checked the static ones)."""
    ref = kc.inputs[i]
    if ref.rank == 0 or (ref.static and ref.shape[0] != lst.rank - 1):
        return                                 # -1: any shape (a length mismatch: static error)
    for k, d in enumerate(_elements(kc, i, lst.rank - 1)):
        if lst.shape[k + 1] is not None and isinstance(d, int):
            continue
        kc.check(f"{_c(d)} < 0 || {_c(d)} == {lst.dim(k + 1)}",
                 f"{what}: dim {k} of the list's elements is %lld, element_shape says %lld",
                 f"(long long)({lst.dim(k + 1)})", f"(long long)({_c(d)})")


def _item_dims(lst: TensorRef, item: TensorRef, skip: int = 0) -> List[str]:
    """The element dims of a list after ``item`` (without its first ``skip`` dims: the rows
    of a scatter) was put in it: the item's if the list's elements have no data yet, else the
    list's (checked equal to the item's)."""
    dims = item.dims[skip:]
    if lst.size == "0":
        return dims
    return [lst.dim(k + 1) if lst.shape[k + 1] is not None
            else f"({lst.size} == 0 ? {d} : {lst.dim(k + 1)})" for k, d in enumerate(dims)]


def _check_item(kc: KernelContext, lst: TensorRef, item: TensorRef, verb: str,
                skip: int = 0) -> None:
    if lst.rank - 1 != item.rank - skip:
        raise kc.error(f"the item has rank {item.rank - skip}, the list's elements rank "
                       f"{lst.rank - 1}")
    for k in range(item.rank - skip):
        a, b = lst.dim(k + 1), item.dim(k + skip)
        if a == b:
            continue
        kc.check(f"{lst.size} == 0 || {a} == {b}",
                 f"Tried to {verb} a tensor with incompatible shape at a list index. Item "
                 "element shape: dim %d is %lld, list element shape: %lld",
                 str(k), f"(long long)({b})", f"(long long)({a})")


# --- TensorListReserve, EmptyTensorList ----------------------------------------------------------
def _reserve_dims(kc: KernelContext, checks: bool) -> List[Value]:
    n = _elements(kc, 1, 1)[0]
    if checks and isinstance(n, str):
        kc.check(f"{n} >= 0", "The num_elements to reserve must be a non negative number, but "
                 "got %lld", f"(long long){n}")
    dims = [n] + _element_dims(kc, 0, kc.out.rank - 1)
    if checks:
        _check_alloc(kc, dims, kc.out.dtype.itemsize)
    return dims


def _reserve_c(kc: KernelContext) -> str:
    _reserve_dims(kc, checks=True)
    return _zero(kc.out)


def _empty_c(kc: KernelContext) -> str:
    kc.check_scalar(1, "max_num_elements")
    return "/* a list of no elements */"


set_c_kernel("TensorListReserve", _reserve_c,
             lambda kc: [[_c(d) for d in _reserve_dims(kc, checks=False)]])
set_c_kernel("EmptyTensorList", _empty_c,
             lambda kc: [["0"] + [_c(d) for d in _element_dims(kc, 0, kc.out.rank - 1)]])


# --- TensorListFromTensor, TensorListStack (views) ------------------------------------------------
def _from_tensor_dims(kc: KernelContext) -> List[List[str]]:
    _check_element_shape(kc, kc.inputs[0], 1, "TensorListFromTensor")
    return [kc.inputs[0].dims]


def _stack_dims(kc: KernelContext) -> List[List[str]]:
    lst = kc.inputs[0]
    want = kc.attr("num_elements")
    if want != -1 and lst.shape[0] is None:
        kc.check(f"{lst.dim(0)} == {want}", f"Operation expected a list with {want} elements but "
                 "got a list with %lld elements.", f"(long long)({lst.dim(0)})")
    _check_element_shape(kc, lst, 1, "TensorListStack")
    return [lst.dims]


set_c_kernel("TensorListFromTensor", None, _from_tensor_dims)
set_c_kernel("TensorListStack", None, _stack_dims)


# --- reading elements --------------------------------------------------------------------------
def _in_range(kc: KernelContext, index: str, n: str, verb: str) -> None:
    kc.check(f"{index} >= 0 && {index} < {n}",
             f"Trying to {verb} element %lld in a list with %lld elements.",
             f"(long long){index}", f"(long long)({n})")


def _get_item_c(kc: KernelContext) -> str:
    lst, out = kc.inputs[0], kc.out
    index = _scalar(kc, 1, "index")
    _in_range(kc, index, lst.dim(0), "access")
    _check_element_shape(kc, lst, 2, "TensorListGetItem")
    return (f"if ({out.size} > 0) memcpy({out.var}.data, {lst.data} + {index} * {out.size}, "
            f"{_bytes(out, out.size)});")


set_c_kernel("TensorListGetItem", _get_item_c, lambda kc: [kc.inputs[0].dims[1:]])


def _gather_c(kc: KernelContext) -> str:
    lst, ind, out = kc.inputs[0], kc.inputs[1], kc.out
    _check_element_shape(kc, lst, 2, "TensorListGather")
    row = lst.dim_product(1)
    bad = kc.fail("Trying to access element %lld in a list with %lld elements.",
                  "(long long)i", f"(long long)({lst.dim(0)})")
    return "\n".join([
        f"const int32_t *idx = {ind.data};",
        f"for (int64_t k = 0; k < {ind.size}; k++) {{",
        "    int64_t i = idx[k];",
        f"    if (i < 0 || i >= {lst.dim(0)}) {bad}",
        "}",
        f"if ({row} > 0) for (int64_t k = 0; k < {ind.size}; k++)",
        f"    memcpy({out.data} + k * {row}, {lst.data} + (int64_t)idx[k] * {row}, "
        f"{_bytes(out, row)});"])


set_c_kernel("TensorListGather", _gather_c,
             lambda kc: [kc.inputs[1].dims + kc.inputs[0].dims[1:]])


def _length_c(kc: KernelContext) -> str:
    return f"{kc.out.data}[0] = (int32_t)({kc.inputs[0].dim(0)});"


def _element_shape_c(kc: KernelContext) -> str:
    lst, out = kc.inputs[0], kc.out
    return "\n".join(f"{out.data}[{k}] = ({out.ctype})({lst.dim(k + 1)});"
                     for k in range(lst.rank - 1)) or "/* elements are scalars */"


set_c_kernel("TensorListLength", _length_c)
set_c_kernel("TensorListElementShape", _element_shape_c)


# --- writing elements --------------------------------------------------------------------------
def _copy_rows(lst: TensorRef, out: TensorRef, rows: str) -> str:
    """``out`` (zeroed first) takes the first ``rows`` elements of ``lst``, unless ``lst``'s
    elements have no data yet."""
    row = out.dim_product(1)
    return "\n".join([
        _zero(out),
        f"if ({lst.size} > 0 && {rows} > 0) memcpy({out.var}.data, {lst.var}.data, "
        f"{_bytes(out, product([rows, row]))});"])


def _put(item: TensorRef, out: TensorRef, index: str) -> str:
    row = out.dim_product(1)
    return (f"if ({row} > 0) memcpy({out.data} + {index} * {row}, {item.data}, "
            f"{_bytes(out, row)});")


def _set_item_n(kc: KernelContext, index: str) -> str:
    n = kc.inputs[0].dim(0)
    if kc.attr("resize_if_index_out_of_bounds"):
        return f"({index} >= {n} ? {index} + 1 : {n})"
    return n


def _set_item_c(kc: KernelContext) -> str:
    lst, item, out = kc.inputs[0], kc.inputs[2], kc.out
    index = _scalar(kc, 1, "index")
    _in_range(kc, index, _set_item_n(kc, index), "modify")
    _check_item(kc, lst, item, "set")
    rows = f"({lst.dim(0)} < {out.dim(0)} ? {lst.dim(0)} : {out.dim(0)})"
    return _copy_rows(lst, out, rows) + "\n" + _put(item, out, index)


def _set_item_dims(kc: KernelContext) -> List[List[str]]:
    lst, item = kc.inputs[0], kc.inputs[2]
    index = _scalar(kc, 1, "index")
    return [[_set_item_n(kc, index)] + _item_dims(lst, item)]


set_c_kernel("TensorListSetItem", _set_item_c, _set_item_dims)


def _push_back_c(kc: KernelContext) -> str:
    lst, item, out = kc.inputs[0], kc.inputs[1], kc.out
    _check_item(kc, lst, item, "push")
    return _copy_rows(lst, out, lst.dim(0)) + "\n" + _put(item, out, lst.dim(0))


set_c_kernel("TensorListPushBack", _push_back_c,
             lambda kc: [[f"({kc.inputs[0].dim(0)} + 1)"]
                         + _item_dims(kc.inputs[0], kc.inputs[1])])


def _pop_back_c(kc: KernelContext) -> str:
    lst, rest, last = kc.inputs[0], kc.outputs[0], kc.outputs[1]
    kc.check(f"{lst.dim(0)} > 0", "Trying to pop from an empty list.")
    _check_element_shape(kc, lst, 1, "TensorListPopBack")
    row = lst.dim_product(1)
    return "\n".join([
        f"if ({rest.size} > 0) memcpy({rest.var}.data, {lst.var}.data, "
        f"{_bytes(rest, rest.size)});",
        f"if ({row} > 0) memcpy({last.var}.data, {lst.data} + ({lst.dim(0)} - 1) * {row}, "
        f"{_bytes(last, row)});"])


set_c_kernel("TensorListPopBack", _pop_back_c,
             lambda kc: [[f"({kc.inputs[0].dim(0)} - 1)"] + kc.inputs[0].dims[1:],
                         kc.inputs[0].dims[1:]])


def _resize_c(kc: KernelContext) -> str:
    lst, out = kc.inputs[0], kc.out
    size = _scalar(kc, 1, "size")
    kc.check(f"{size} >= 0", "TensorListSlice expects size to be non-negative. Got: %lld",
             f"(long long){size}")
    rows = f"({lst.dim(0)} < {out.dim(0)} ? {lst.dim(0)} : {out.dim(0)})"
    return _copy_rows(lst, out, rows)


set_c_kernel("TensorListResize", _resize_c,
             lambda kc: [[_scalar(kc, 1, "size")] + kc.inputs[0].dims[1:]])


# --- scatters ------------------------------------------------------------------------------------
_ROWS_HELPER = """\
/* TensorList scatters: the length of a list of at least n elements that takes every index
   (max(index) + 1), or -1 if an index is negative. */
static int64_t flowc_tl_rows(const int32_t *idx, int64_t count, int64_t n) {
    for (int64_t k = 0; k < count; k++) {
        if (idx[k] < 0) return -1;
        if ((int64_t)idx[k] + 1 > n) n = (int64_t)idx[k] + 1;
    }
    return n;
}"""


def _rows(kc: KernelContext, tensor: TensorRef, indices: TensorRef, base: str) -> str:
    """The output's length (C), after checks that there is one row per index and no index
    is negative."""
    kc.module.add_global(_ROWS_HELPER)
    kc.check_dims_equal(tensor.dim(0), indices.size, "Invalid number of rows in input tensor "
                        "(rows, indices)")
    rows = f"flowc_tl_rows({indices.data}, {indices.size}, {base})"
    kc.check(f"{rows} >= 0", "Trying to scatter on a negative index")
    return rows


def _scatter_base(kc: KernelContext) -> str:
    if kc.node.op == "TensorListScatterV2":
        n = _scalar(kc, 3, "num_elements")
        return f"({n} < 0 ? 0 : {n})"
    return "0"


def _scatter_rows_c(tensor: TensorRef, indices: TensorRef, out: TensorRef) -> str:
    row = out.dim_product(1)
    return (f"if ({row} > 0) for (int64_t k = 0; k < {indices.size}; k++)\n"
            f"    memcpy({out.data} + (int64_t){indices.data}[k] * {row}, "
            f"{tensor.data} + k * {row}, {_bytes(out, row)});")


def _scatter_c(kc: KernelContext) -> str:
    tensor, indices, out = kc.inputs[0], kc.inputs[1], kc.out
    _rows(kc, tensor, indices, _scatter_base(kc))
    _check_element_shape(kc, kc.out, 2, kc.node.op)
    return _zero(out) + "\n" + _scatter_rows_c(tensor, indices, out)


def _scatter_dims(kc: KernelContext) -> List[List[str]]:
    tensor, indices = kc.inputs[0], kc.inputs[1]
    return [[_rows(kc, tensor, indices, _scatter_base(kc))] + tensor.dims[1:]]


def _scatter_existing_c(kc: KernelContext) -> str:
    lst, tensor, indices, out = kc.inputs[0], kc.inputs[1], kc.inputs[2], kc.out
    _rows(kc, tensor, indices, lst.dim(0))
    _check_item(kc, lst, tensor, "scatter", skip=1)
    return _copy_rows(lst, out, lst.dim(0)) + "\n" + _scatter_rows_c(tensor, indices, out)


def _scatter_existing_dims(kc: KernelContext) -> List[List[str]]:
    lst, tensor, indices = kc.inputs
    return [[_rows(kc, tensor, indices, lst.dim(0))] + _item_dims(lst, tensor, skip=1)]


set_c_kernel("TensorListScatter", _scatter_c, _scatter_dims)
set_c_kernel("TensorListScatterV2", _scatter_c, _scatter_dims)
set_c_kernel("TensorListScatterIntoExistingList", _scatter_existing_c, _scatter_existing_dims)
