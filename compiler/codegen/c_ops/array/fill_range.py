"""The C lowering of Fill, ZerosLike, OnesLike (``array_fill.c.j2``), OneHot
(``array_one_hot.c.j2``) and Range (``array_range.c.j2``), with TensorFlow's checks of their
run-time arguments."""
from __future__ import annotations

from typing import List, Tuple

from compiler.codegen.c_ops.array.common import (Value, _c, _check_alloc, _elements, _mul,
                                                 _support, _values)
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.array.common import INT64_MAX
from compiler.ops.array.fill_range import _one_hot_axis, _scalar


def _fill_dims(kc: KernelContext, checks: bool) -> List[Value]:
    out = kc.out
    dims = _elements(kc, 0, out.rank)
    if checks:
        for d in dims:
            if isinstance(d, str):
                kc.check(f"{d} >= 0", "Dimension %lld must be >= 0", f"(long long){d}")
        _check_alloc(kc, dims, out.dtype.itemsize)
    return dims


def _fill_c(kc: KernelContext) -> str:
    kc.check_scalar(1, "value")
    _fill_dims(kc, checks=True)
    return kc.render("array_fill.c.j2", value=f"{kc.inputs[1].data}[0]")


set_c_kernel("Fill", _fill_c,
             lambda kc: [[_c(d) for d in _fill_dims(kc, checks=False)]])


def _like(name: str, value: int) -> None:
    set_c_kernel(name, lambda kc: kc.render("array_fill.c.j2",
                                            value=kc.literal(value, kc.out.dtype)),
                 lambda kc: [kc.inputs[0].dims])


_like("ZerosLike", 0)
_like("OnesLike", 1)


def _one_hot_plan(kc: KernelContext, checks: bool) -> Tuple[int, Value]:
    indices = kc.inputs[0]
    kc.check_scalar(1, "depth")             # before depth is read (the output dims read it)
    depth = _elements(kc, 1, 1)[0]
    if checks:
        if isinstance(depth, str):
            kc.check(f"{depth} >= 0", "depth must be non-negative, got: %lld",
                     f"(long long){depth}")
        _check_alloc(kc, _values(indices) + [depth], kc.out.dtype.itemsize)
    return _one_hot_axis(kc.attr("axis"), indices.rank), depth


def _one_hot_c_dims(kc: KernelContext) -> List[List[str]]:
    a, depth = _one_hot_plan(kc, checks=False)
    dims = kc.inputs[0].dims
    return [dims[:a] + [_c(depth)] + dims[a:]]


def one_hot_value_checks(kc: KernelContext) -> None:
    """on_value and off_value are read as one value each (shared with the CUDA kernel)."""
    kc.check_scalar(2, "on_value")
    kc.check_scalar(3, "off_value")


def _one_hot_c(kc: KernelContext) -> str:
    indices, on, off = kc.inputs[0], kc.inputs[2], kc.inputs[3]
    a, _ = _one_hot_plan(kc, checks=True)
    one_hot_value_checks(kc)
    dims = _values(indices)
    return kc.render("array_one_hot.c.j2", indices=indices, on=f"{on.data}[0]",
                     off=f"{off.data}[0]", prefix=_c(_mul(dims[:a])), depth=kc.out.dim(a),
                     suffix=_c(_mul(dims[a:])))


set_c_kernel("OneHot", _one_hot_c, _one_hot_c_dims)


def range_operands(kc: KernelContext) -> List[str]:
    """start, limit and delta as host C expressions: a literal for a constant input, else the
    input's first element (on the GPU, the emitter's host copy of it: ``host_inputs``)."""
    out = []
    for i, x in enumerate(kc.inputs):
        value = kc.input_value(i)
        out.append(kc.literal(_scalar(value), kc.out.dtype) if value is not None
                   else f"{x.data}[0]")
    return out


def _range_c_dims(kc: KernelContext) -> List[List[str]]:
    start, limit, delta = range_operands(kc)
    dtype = kc.out.dtype
    if dtype.is_integer:
        count = f"flowc_arr_range_count_int((int64_t){start}, (int64_t){limit}, (int64_t){delta})"
    else:
        count = f"flowc_arr_range_count_{dtype.ir_name}({start}, {limit}, {delta})"
    return [[count]]


def range_checks(kc: KernelContext) -> str:
    """TensorFlow's checks of start, limit and delta as run-time checks; the element count."""
    _support(kc)
    for i, name in enumerate(("start", "limit", "delta")):
        if kc.input_value(i) is None:       # read as one value: it must have one
            kc.check_scalar(i, name)
    start, limit, delta = range_operands(kc)
    out = kc.out
    integer = out.dtype.is_integer
    fmt, cast = ("%lld", "(long long)") if integer else ("%g", "(double)")
    kc.check(f"{delta} != 0", f"Requires delta != 0: {fmt}", f"{cast}{delta}")
    bounds = (f"{cast}{start}", f"{cast}{limit}")
    kc.check(f"!({delta} > 0) || {start} <= {limit}",
             f"Requires start <= limit when delta > 0: {fmt}/{fmt}", *bounds)
    kc.check(f"{delta} > 0 || {start} >= {limit}",
             f"Requires start >= limit when delta < 0: {fmt}/{fmt}", *bounds)
    count = _range_c_dims(kc)[0][0]
    kc.check(f"{count} >= 0", f"Requires ((limit - start) / delta) <= {INT64_MAX}")
    return count


def _range_c(kc: KernelContext) -> str:
    count = range_checks(kc)
    _check_alloc(kc, [count], kc.out.dtype.itemsize)
    start, _, delta = range_operands(kc)
    return kc.render("array_range.c.j2", start=start, delta=delta,
                     integer=kc.out.dtype.is_integer)


set_c_kernel("Range", _range_c, _range_c_dims)
