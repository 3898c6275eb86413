"""Helpers shared by the C lowerings of the array ops: values that are ints at compile time or
C expressions (int64_t) read at run time, the module's array helper functions
(``array_support.c.j2``), shape-like inputs read as C, run-time allocation and dim checks, and
copies of boxes of elements that move contiguous runs with memcpy (``array_copy.c.j2``).
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Union

import numpy as np

from compiler.codegen.kernel_context import KernelContext, TensorRef, product
from compiler.ir.construct import constant_value
from compiler.ops.array.common import _input_name, _normalize_axis

Value = Union[int, str]          # a compile-time int, or a C expression (int64_t) read at run time


def _support(kc: KernelContext) -> None:
    """Make the array helper functions (``array_support.c.j2``) part of the module, once."""
    code = kc.render("array_support.c.j2")
    kc.module.add_global(code)


def _c(v: Value) -> str:
    """A Value as C: ints as literals (INT64_C when large), expressions as they are."""
    if isinstance(v, str):
        return v
    if -2**31 < v < 2**31:
        return str(v)
    return f"INT64_C({v})" if v != -2**63 else "INT64_MIN"


def _is_int(*values) -> bool:
    return all(isinstance(v, int) for v in values)


def _dim(ref: TensorRef, k: int) -> Value:
    """Dim ``k`` of a tensor: an int when static, else a C expression."""
    d = ref.shape[k]
    return int(d) if d is not None else ref.dim(k)


def _add(terms: Sequence[Value]) -> Value:
    """Sum of Values, folding ints."""
    const = sum(t for t in terms if isinstance(t, int))
    symbolic = [t for t in terms if isinstance(t, str)]
    if not symbolic:
        return const
    parts = symbolic + ([_c(const)] if const else [])
    return parts[0] if len(parts) == 1 else "(" + " + ".join(parts) + ")"


def _mul(terms: Sequence[Value]) -> Value:
    """Product of Values, folding ints (an int when all are)."""
    if all(isinstance(t, int) for t in terms):
        return math.prod(terms)
    return product([_c(t) for t in terms])


def _elements(kc: KernelContext, i: int, count: Optional[int] = None) -> List[Value]:
    """Elements of shape-like input ``i`` (flattened): ints if constant, else C expressions.

    ``count`` is the number of elements the op needs; a tensor whose size is not static is
    checked against it at run time.
    """
    v = constant_value(kc.node.inputs[i])
    if v is not None:
        return [int(x) for x in np.reshape(v, -1)]
    ref = kc.inputs[i]
    if ref.static:
        n = math.prod(ref.shape)
    elif count is not None:
        kc.check_dims_equal(ref.size, str(count),
                            f"input {_input_name(kc.node, i)} must have {count} elements")
        n = count
    else:
        raise kc.error(f"the C backend needs the length of input "
                       f"{_input_name(kc.node, i)} known at compile time")
    return [f"((int64_t){ref.data}[{k}])" for k in range(n)]


def _constant_axis(kc: KernelContext, i: int, rank: int) -> int:
    """A constant axis input, normalized; the C backend needs it known at compile time."""
    v = constant_value(kc.node.inputs[i])
    if v is None:
        raise kc.static_error(f"the C backend needs input {_input_name(kc.node, i)} to be a "
                              "constant (the data layout depends on it)")
    return _normalize_axis(int(np.reshape(v, -1)[0]), rank)


def _int64_array(values: Sequence[Value]) -> str:
    """A C compound literal ``(const int64_t[]){...}`` (never empty)."""
    return "(const int64_t[]){" + (", ".join(_c(v) for v in values) or "0") + "}"


def _check_alloc(kc: KernelContext, factors: Sequence[Value], itemsize: int) -> None:
    """Run-time check that a tensor with these dim factors can be sized (see _check_fits)."""
    if _is_int(*factors):
        return
    _support(kc)
    kc.check(f"flowc_arr_dims_ok({len(factors)}, {_int64_array(factors)}, {itemsize})",
             "the output shape is too large (its byte size overflows int64)")


def _contiguous_strides(dims: Sequence[Value]) -> List[Value]:
    return [_mul(list(dims[k + 1:])) if dims[k + 1:] else 1 for k in range(len(dims))]


def _emit_copy(kc: KernelContext, dims: Sequence[Value], src: TensorRef, src_base: Value,
               src_strides: Sequence[Value], dst: TensorRef, dst_base: Value,
               dst_strides: Sequence[Value]) -> str:
    """C that copies a box of ``dims`` elements from ``src`` to ``dst`` (``array_copy.c.j2``).

    Trailing dims that are contiguous in both buffers are merged into one memcpy per row.
    """
    dims, src_strides, dst_strides = list(dims), list(src_strides), list(dst_strides)
    run: List[Value] = []
    while dims and src_strides[-1] == _mul(run) and dst_strides[-1] == _mul(run):
        run.insert(0, dims.pop())
        src_strides.pop()
        dst_strides.pop()
    count = _mul(list(dims) + run) if dims or run else 1
    if count == 0:
        return "/* nothing to copy */"
    return kc.render("array_copy.c.j2", ctype=src.ctype, src=src.data, dst=dst.data,
                     src_base=_c(src_base), dst_base=_c(dst_base),
                     dims=[_c(d) for d in dims], run=_c(_mul(run) if run else 1),
                     src_offset=_offset(src_strides), dst_offset=_offset(dst_strides),
                     count="positive" if isinstance(count, int) and count > 0 else _c(count))


def _offset(strides: Sequence[Value]) -> str:
    terms = []
    for k, s in enumerate(strides):
        if s == 0:
            continue
        terms.append(f"i{k}" if s == 1 else f"i{k} * {_c(s)}")
    return " + ".join(terms) or "0"


def _representative_dims(refs: Sequence[TensorRef], skip: Optional[int] = None) -> List[Value]:
    """Per dim, a static size from any of ``refs`` if one has it, else the first one's."""
    dims: List[Value] = []
    for k in range(refs[0].rank):
        static = [r.shape[k] for r in refs if r.shape[k] is not None]
        dims.append(int(static[0]) if static and k != skip else _dim(refs[0], k))
    return dims


def _check_same_dims(kc: KernelContext, refs: Sequence[TensorRef], dims: Sequence[Value],
                     what: str, skip: Optional[int] = None) -> None:
    """Run-time checks that every ref has ``dims`` (except dim ``skip``) where not static."""
    for i, r in enumerate(refs):
        for k in range(r.rank):
            if k == skip or (r.shape[k] is not None and isinstance(dims[k], int)) \
                    or r.dim(k) == _c(dims[k]):
                continue
            kc.check(f"{r.dim(k)} == {_c(dims[k])}",
                     f"{what}: dim {k} of input {i} is %lld, expected %lld",
                     f"(long long)({r.dim(k)})", f"(long long)({_c(dims[k])})")


def _emit_axis_copies(kc: KernelContext, whole: TensorRef, parts: Sequence[TensorRef],
                      sizes: Sequence[Value], total: Value, outer: Value, inner: Value,
                      into_whole: bool) -> str:
    """Copies between ``whole`` (viewed as [outer, total, inner]) and ``parts`` (each
    [outer, size, inner], the sizes adding up to total): concatenation when ``into_whole``,
    splitting otherwise."""
    grouped = _grouped_axis_copies(kc, whole, parts, sizes, total, outer, inner, into_whole)
    if grouped is not None:
        return grouped
    codes = []
    offset: Value = 0
    whole_row = _mul([total, inner])
    for part, size in zip(parts, sizes):
        row = _mul([size, inner])
        base = _mul([offset, inner])
        part_side = (part, 0, [row, 1])
        whole_side = (whole, base, [whole_row, 1])
        src, dst = (part_side, whole_side) if into_whole else (whole_side, part_side)
        codes.append(_emit_copy(kc, [outer, row], *src, *dst))
        offset = _add([offset, size])
    return "\n".join(codes)


# Concatenations and splits of at least this many parts of one static size copy them in one
# loop over a table of the parts' pointers: a loop nest per part made a MobileNet's 192-way
# per-channel concatenations cost the C compiler seconds each.
GROUP_MIN_PARTS = 4


def _grouped_axis_copies(kc: KernelContext, whole: TensorRef, parts: Sequence[TensorRef],
                         sizes: Sequence[Value], total: Value, outer: Value, inner: Value,
                         into_whole: bool) -> Optional[str]:
    """``_emit_axis_copies`` of many parts of one static size as one loop over the parts (the
    same element copies, in the same order); None where that does not apply."""
    if len(parts) < GROUP_MIN_PARTS or not _is_int(total, outer, inner, *sizes) \
            or len(set(sizes)) != 1 or len({p.ctype for p in parts}) != 1:
        return None
    row = sizes[0] * inner
    if row == 0 or outer == 0:
        return "/* nothing to copy */"
    ctype = parts[0].ctype
    table = ", ".join(p.data for p in parts)
    part = TensorRef("flowc_part", parts[0].type, kc.target, kc.node, address="flowc_parts[p]")
    part_side = (part, 0, [row, 1])
    whole_side = (whole, f"p * {row}", [total * inner, 1])
    src, dst = (part_side, whole_side) if into_whole else (whole_side, part_side)
    copy = _emit_copy(kc, [outer, row], *src, *dst)
    body = "\n".join(("        " + line) if line else "" for line in copy.splitlines())
    qualifier = "const " if into_whole else ""
    return (f"{{\n    {qualifier}{ctype} *const flowc_parts[{len(parts)}] = {{{table}}};\n"
            f"    for (int64_t p = 0; p < {len(parts)}; p++) {{\n{body}\n    }}\n}}")


def _values(ref: TensorRef) -> List[Value]:
    return [_dim(ref, k) for k in range(ref.rank)]
