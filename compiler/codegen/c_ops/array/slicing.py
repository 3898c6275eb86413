"""The C lowering of Slice and StridedSlice: a strided copy of a box of the input, its bounds
resolved (TensorFlow's rules) and checked at run time where they are not constants."""
from __future__ import annotations

from typing import List, Tuple

from compiler.codegen.c_ops.array.common import (Value, _add, _c, _contiguous_strides, _dim,
                                                 _elements, _emit_copy, _is_int, _mul,
                                                 _support, _values)
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.array.slicing import (_SliceAxis, _dense_spec, _slice_dim, _ss_inputs,
                                        _ss_resolve)


def _slice_plan(kc: KernelContext, checks: bool) -> Tuple[List[Value], List[Value]]:
    """Per dim, the begin and size of the box (C expressions where not static)."""
    x = kc.inputs[0]
    begins = _elements(kc, 1, x.rank)
    sizes = _elements(kc, 2, x.rank)
    out_b: List[Value] = []
    out_z: List[Value] = []
    for k in range(x.rank):
        d, b, z = _dim(x, k), begins[k], sizes[k]
        if _is_int(d, b, z):
            b, z = _slice_dim(d, b, z, k)
        else:
            if checks:
                kc.check(f"{_c(b)} >= 0 && {_c(b)} <= {_c(d)}",
                         f"Expected begin[{k}] in [0, %lld], but got %lld",
                         f"(long long){_c(d)}", f"(long long){_c(b)}")
            if z == -1:
                z = f"({_c(d)} - {_c(b)})"
            elif isinstance(z, str):
                z = f"({z} == -1 ? {_c(d)} - {_c(b)} : {z})"
            if checks:
                kc.check(f"{_c(z)} >= 0 && {_c(z)} <= {_c(d)} - {_c(b)}",
                         f"Expected size[{k}] in [0, %lld], but got %lld",
                         f"(long long)({_c(d)} - {_c(b)})", f"(long long){_c(z)}")
        out_b.append(b)
        out_z.append(z)
    return out_b, out_z


def _slice_c_dims(kc: KernelContext) -> List[List[str]]:
    return [[_c(z) for z in _slice_plan(kc, checks=False)[1]]]


def _slice_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    begins, _ = _slice_plan(kc, checks=True)
    x_strides = _contiguous_strides(_values(x))
    base = _add([_mul([b, s]) for b, s in zip(begins, x_strides)])
    dims = _values(out)
    return _emit_copy(kc, dims, x, base, x_strides, out, 0, _contiguous_strides(dims))


set_c_kernel("Slice", _slice_c, _slice_c_dims)


def _ss_axis_c(kc: KernelContext, dim: Value, b: Value, e: Value, s: Value, ax: _SliceAxis,
               k: int, checks: bool) -> Tuple[Value, Value]:
    """(start, count) of one input dim as C expressions, with the run-time checks it needs."""
    if _is_int(dim, b, e, s):
        return _ss_resolve(dim, b, e, s, ax, k)
    _support(kc)
    if checks and isinstance(s, str):
        kc.check(f"{s} != 0", f"strides[{k}] must be non-zero")
    if ax.shrink:
        if checks and isinstance(s, str):
            kc.check(f"{s} > 0", "only stride 1 allowed on non-range indexing.")
        if checks:
            kc.check(f"{_c(b)} >= -({_c(dim)}) && {_c(b)} < {_c(dim)}",
                     f"slice index %lld of dimension {k} out of bounds.", f"(long long){_c(b)}")
        return f"({_c(b)} < 0 ? {_c(b)} + {_c(dim)} : {_c(b)})", 1
    start = f"flowc_arr_ss_bound({_c(b)}, {_c(dim)}, {_c(s)}, {int(ax.begin_masked)}, 0)"
    end = f"flowc_arr_ss_bound({_c(e)}, {_c(dim)}, {_c(s)}, {int(ax.end_masked)}, 1)"
    return start, f"flowc_arr_ss_count({start}, {end}, {_c(s)})"


def _strided_slice_plan(kc: KernelContext, checks: bool):
    """Per input dim (start, count, stride) and the output dims' input dims (see _dense_spec)."""
    x = kc.inputs[0]
    n = kc.inputs[1].shape[0] if kc.inputs[1].rank == 1 else None
    if n is None:
        raise kc.static_error("the C backend needs the length of begin known at compile time")
    axes, final = _dense_spec(n, x.rank, kc.attrs)
    values = [_elements(kc, i, n) for i in (1, 2, 3)]
    plan = []
    for j, ax in enumerate(axes):
        b, e, s = _ss_inputs(values, ax)
        start, count = _ss_axis_c(kc, _dim(x, j), b, e, s, ax, j, checks)
        plan.append((start, count, s))
    return plan, final


def _strided_slice_c_dims(kc: KernelContext) -> List[List[str]]:
    plan, final = _strided_slice_plan(kc, checks=False)
    return [["1" if j is None else _c(plan[j][1]) for j in final]]


def _strided_slice_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    plan, final = _strided_slice_plan(kc, checks=True)
    x_strides = _contiguous_strides(_values(x))
    base = _add([_mul([start, stride]) for (start, _, _), stride in zip(plan, x_strides)])
    kept = [(k, j) for k, j in enumerate(final) if j is not None]
    dims = [_dim(out, k) for k, _ in kept]
    src_strides = [_mul([_used_step(plan[j][2], count), x_strides[j]])
                   for count, (_, j) in zip(dims, kept)]
    return _emit_copy(kc, dims, x, base, src_strides, out, 0, _contiguous_strides(dims))


def _used_step(step: Value, count: Value) -> Value:
    """The stride that moves between output elements: 0 where a dim yields one element (a
    huge stride that is never taken must not overflow step * row size)."""
    if isinstance(count, int):
        return step if count > 1 else 0
    if step in (1, -1):
        return step
    return f"({count} > 1 ? {_c(step)} : 0)"


set_c_kernel("StridedSlice", _strided_slice_c, _strided_slice_c_dims)
