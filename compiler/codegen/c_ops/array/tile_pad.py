"""The C lowering of Tile (``array_tile.c.j2``) and Pad (a zero fill, then a copy)."""
from __future__ import annotations

from typing import List, Tuple

from compiler.codegen.c_ops.array.common import (Value, _add, _c, _check_alloc,
                                                 _contiguous_strides, _elements, _emit_copy,
                                                 _is_int, _mul, _values)
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _tile_multiples(kc: KernelContext, checks: bool) -> List[Value]:
    x = kc.inputs[0]
    multiples = _elements(kc, 1, x.rank)
    if checks:
        for k, m in enumerate(multiples):
            if isinstance(m, str):
                kc.check(f"{m} >= 0", f"Expected multiples[{k}] >= 0, but got %lld",
                         f"(long long){m}")
        _check_alloc(kc, [f for pair in zip(_values(x), multiples) for f in pair], x.dtype.itemsize)
    return multiples


def _tile_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    return [[_c(_mul([d, m])) for d, m in zip(_values(x), _tile_multiples(kc, checks=False))]]


def _tile_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    multiples = _tile_multiples(kc, checks=True)
    return kc.render("array_tile.c.j2", input=x, dims=x.dims, multiples=[_c(m) for m in multiples],
                     out_strides=[_c(s) for s in _contiguous_strides(_values(out))])


set_c_kernel("Tile", _tile_c, _tile_c_dims)


def _pad_plan(kc: KernelContext, checks: bool) -> List[Tuple[Value, Value]]:
    """(before, after) per dim, checked non-negative and small enough to add up safely."""
    x = kc.inputs[0]
    flat = _elements(kc, 1, 2 * x.rank)
    pairs = list(zip(flat[0::2], flat[1::2]))
    if checks:
        for before, after in pairs:
            if not _is_int(before, after):
                kc.check(f"{_c(before)} >= 0 && {_c(after)} >= 0",
                         "Paddings must be non-negative: %lld %lld",
                         f"(long long){_c(before)}", f"(long long){_c(after)}")
                kc.check(f"{_c(before)} <= INT64_MAX / 4 && {_c(after)} <= INT64_MAX / 4",
                         "Paddings are too large: %lld %lld",
                         f"(long long){_c(before)}", f"(long long){_c(after)}")
        _check_alloc(kc, [_add([d, a, b]) for d, (a, b) in zip(_values(x), pairs)],
                     x.dtype.itemsize)
    return pairs


def _pad_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    pairs = _pad_plan(kc, checks=False)
    return [[_c(_add([d, a, b])) for d, (a, b) in zip(_values(x), pairs)]]


def _pad_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    pairs = _pad_plan(kc, checks=True)
    out_strides = _contiguous_strides(_values(out))
    base = _add([_mul([before, s]) for (before, _), s in zip(pairs, out_strides)])
    clear = (f"if ({out.size} > 0) memset({out.data}, 0, (size_t)({out.size}) * "
             f"sizeof({out.ctype}));")
    dims = _values(x)
    return clear + "\n" + _emit_copy(kc, dims, x, 0, _contiguous_strides(dims), out, base,
                                     out_strides)


set_c_kernel("Pad", _pad_c, _pad_c_dims)
