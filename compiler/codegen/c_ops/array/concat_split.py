"""The C lowering of ConcatV2, Split, SplitV, Pack and Unpack: copies along one axis (memcpy
of whole rows), with the run-time checks of dims that are not static."""
from __future__ import annotations

from typing import List, Tuple

from compiler.codegen.c_ops.array.common import (Value, _add, _c, _check_same_dims,
                                                 _constant_axis, _dim, _elements,
                                                 _emit_axis_copies, _is_int, _mul,
                                                 _representative_dims, _values)
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.array.common import _normalize_axis
from compiler.ops.array.concat_split import _split_sizes


def _concat_plan(kc: KernelContext):
    values = kc.inputs[:-1]
    a = _constant_axis(kc, len(values), values[0].rank)
    return values, a, _representative_dims(values, skip=a)


def _concat_c_dims(kc: KernelContext) -> List[List[str]]:
    values, a, dims = _concat_plan(kc)
    dims[a] = _add([_dim(v, a) for v in values])
    return [[_c(d) for d in dims]]


def concat_checks(kc: KernelContext):
    """The run-time checks that the inputs agree outside the axis (C and GPU kernels);
    (values, axis, dims)."""
    values, a, dims = _concat_plan(kc)
    _check_same_dims(kc, values, dims, "ConcatOp : Dimensions of inputs should match", skip=a)
    return values, a, dims


def _concat_c(kc: KernelContext) -> str:
    values, a, dims = concat_checks(kc)
    return _emit_axis_copies(kc, kc.out, values, [_dim(v, a) for v in values], _dim(kc.out, a),
                             _mul(dims[:a]), _mul(dims[a + 1:]), into_whole=True)


set_c_kernel("ConcatV2", _concat_c, _concat_c_dims)


def _split_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[1]
    a = _constant_axis(kc, 0, x.rank)
    n = kc.attr("num_split")
    dims = x.dims
    dims[a] = f"({x.dim(a)} / {n})"
    return [list(dims) for _ in range(n)]


def check_even_split(kc: KernelContext, x, a: int, n: int) -> None:
    """A run-time check that Split's dynamic dim ``a`` of ``x`` divides into ``n`` (shared by
    the C and CUDA kernels; a static dim was checked by the shape function)."""
    if x.shape[a] is None:
        kc.check(f"{x.dim(a)} % {n} == 0", "Number of ways to split should evenly divide the "
                 f"split dimension, but got split_dim {a} (size = %lld) and num_split {n}",
                 f"(long long){x.dim(a)}")


def _split_c(kc: KernelContext) -> str:
    x = kc.inputs[1]
    a = _constant_axis(kc, 0, x.rank)
    n = kc.attr("num_split")
    check_even_split(kc, x, a, n)
    dims = _values(x)
    return _emit_axis_copies(kc, x, kc.outputs, [_dim(o, a) for o in kc.outputs], _dim(x, a),
                             _mul(dims[:a]), _mul(dims[a + 1:]), into_whole=False)


set_c_kernel("Split", _split_c, _split_c_dims)


def _split_v_plan(kc: KernelContext, checks: bool) -> Tuple[int, List[Value]]:
    """The axis and each output's size along it (C expressions resolving the -1)."""
    x = kc.inputs[0]
    a = _constant_axis(kc, 2, x.rank)
    sizes = _elements(kc, 1, kc.attr("num_split"))
    dim = _dim(x, a)
    if _is_int(dim, *sizes):
        return a, _split_sizes(sizes, dim)
    if checks:
        for k, v in enumerate(sizes):
            if isinstance(v, str):
                kc.check(f"{v} >= -1", f"Split size at index {k} must be >= 0. Got: %lld",
                         f"(long long){v}")
                kc.check(f"{v} <= {_c(dim)}", f"Split size at index {k} is %lld, more than the "
                         "size of the split dimension (%lld)", f"(long long){v}",
                         f"(long long){_c(dim)}")
        maybe_unknown = [v for v in sizes if v == -1 or isinstance(v, str)]
        if len(maybe_unknown) > 1:
            kc.check(" + ".join(f"({_c(v)} == -1)" for v in maybe_unknown) + " <= 1",
                     "There can only be one -1 in the input.")
    known = _add([f"({v} == -1 ? 0 : {v})" if isinstance(v, str) else (0 if v == -1 else v)
                  for v in sizes])
    maybe_unknown = [v for v in sizes if v == -1 or isinstance(v, str)]
    has_unknown = " || ".join(f"{_c(v)} == -1" for v in maybe_unknown) or "0"
    if checks:
        kc.check(f"({has_unknown}) ? {_c(known)} <= {_c(dim)} : {_c(known)} == {_c(dim)}",
                 "Determined shape must either match input shape along split_dim exactly if fully "
                 "specified, or be less than the size of the input along split_dim if not fully "
                 "specified.  Got: %lld", f"(long long){_c(known)}")
    resolved: List[Value] = []
    for v in sizes:
        if isinstance(v, int) and v != -1:
            resolved.append(v)
        else:
            resolved.append(f"({_c(v)} == -1 ? {_c(dim)} - {_c(known)} : {_c(v)})")
    return a, resolved


def _split_v_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    a, sizes = _split_v_plan(kc, checks=False)
    return [x.dims[:a] + [_c(d)] + x.dims[a + 1:] for d in sizes]


def _split_v_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    a, _ = _split_v_plan(kc, checks=True)
    dims = _values(x)
    return _emit_axis_copies(kc, x, kc.outputs, [_dim(o, a) for o in kc.outputs], _dim(x, a),
                             _mul(dims[:a]), _mul(dims[a + 1:]), into_whole=False)


set_c_kernel("SplitV", _split_v_c, _split_v_c_dims)


def _pack_c_dims(kc: KernelContext) -> List[List[str]]:
    dims = _representative_dims(kc.inputs)
    a = _normalize_axis(kc.attr("axis"), len(dims) + 1)
    return [[_c(d) for d in dims[:a] + [len(kc.inputs)] + dims[a:]]]


def pack_checks(kc: KernelContext):
    """The run-time checks that every input has one shape (C and GPU kernels); its dims."""
    dims = _representative_dims(kc.inputs)
    _check_same_dims(kc, kc.inputs, dims, "Shapes of all inputs must match")
    return dims


def _pack_c(kc: KernelContext) -> str:
    dims = pack_checks(kc)
    a = _normalize_axis(kc.attr("axis"), len(dims) + 1)
    n = len(kc.inputs)
    return _emit_axis_copies(kc, kc.out, kc.inputs, [1] * n, n, _mul(dims[:a]), _mul(dims[a:]),
                             into_whole=True)


set_c_kernel("Pack", _pack_c, _pack_c_dims)


def _unpack_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    a = _normalize_axis(kc.attr("axis"), x.rank)
    return [x.dims[:a] + x.dims[a + 1:] for _ in kc.outputs]


def _unpack_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    num = kc.attr("num")
    a = _normalize_axis(kc.attr("axis"), x.rank)
    if x.shape[a] is None:
        kc.check(f"{x.dim(a)} == {num}", f"Dimension {a} has size %lld but num is {num}",
                 f"(long long){x.dim(a)}")
    dims = _values(x)
    return _emit_axis_copies(kc, x, kc.outputs, [1] * num, num, _mul(dims[:a]), _mul(dims[a + 1:]),
                             into_whole=False)


set_c_kernel("Unpack", _unpack_c, _unpack_c_dims)
