"""Shape and array ops: Reshape, Transpose, ConcatV2, Split, SplitV, Slice, StridedSlice, Pack,
Unpack, Squeeze, ExpandDims, Tile, Pad, Fill, ZerosLike, OnesLike, OneHot, Range, GatherV2.

Names, inputs, attrs and semantics follow TensorFlow's raw ops. Shape-like inputs (``shape``,
``perm``, ``begin``, ...) are tensors: shape functions read them when they are constants and
give unknown dims otherwise; the C kernels read them from the tensor's data at run time where
the output's dims depend on them (Reshape, Fill, Range, Slice, StridedSlice, Tile, Pad,
OneHot, SplitV) and need them constant where only the axis layout does (Transpose's ``perm``,
the ``axis`` of ConcatV2, Split, SplitV, GatherV2 and ExpandDims's ``dim``).

Reshape, ExpandDims and Squeeze are views (no copy). Copies move contiguous runs with memcpy
(``array_copy.c.j2``). Bad data never reaches undefined behaviour: out-of-range indices and
sizes give TensorFlow's defined result or an error naming the node, in the reference kernels
and in generated C alike.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from compiler.codegen.kernel_context import KernelContext, TensorRef, product
from compiler.errors import ExecutionError
from compiler.ir.construct import constant_value
from compiler.ir.graph import Output
from compiler.ir.types import merge_shapes, shape_str
from compiler.ir.op_registry import register_op

Dim = Optional[int]
Value = Union[int, str]          # a compile-time int, or a C expression (int64_t) read at run time

INT64_MAX = 2**63 - 1


# =========================================================================================
# Shared helpers: shapes, values, errors
# =========================================================================================
def _reference(fn: Callable) -> Callable:
    """Wrap a numpy kernel so that a ValueError becomes an ExecutionError naming the node."""
    def kernel(ctx, *arrays):
        try:
            return fn(ctx, *arrays)
        except ValueError as e:
            raise ExecutionError(str(e), ctx.node) from None
    kernel.__name__ = fn.__name__
    kernel.__doc__ = fn.__doc__
    return kernel


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` in row-major order (0-d arrays stay 0-d, unlike np.ascontiguousarray)."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else a.copy(order="C")


def _normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in [-rank, rank) made non-negative; ValueError naming ``what`` otherwise."""
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for a tensor of rank {rank} "
                         f"(expected [{-rank}, {rank}))")
    return axis + rank if axis < 0 else axis


def _input_name(node, i: int) -> str:
    """The signature name of flat input ``i`` of ``node`` (list args span several inputs)."""
    start = 0
    for arg in node.op_def.inputs:
        if arg.number_attr:
            n = node.attrs[arg.number_attr]
        elif arg.type_list_attr:
            n = len(node.attrs[arg.type_list_attr])
        else:
            n = 1
        if i < start + n:
            return arg.name
        start += n
    return f"input {i}"


def _num_elements(shape) -> Dim:
    if shape is None or any(d is None for d in shape):
        return None
    return math.prod(shape)


def _vector_value(ctx, i: int) -> Optional[List[int]]:
    """The elements of constant input ``i`` as ints (None when not a constant)."""
    v = ctx.input_value(i)
    return None if v is None else [int(x) for x in np.reshape(v, -1)]


def _partial_vector(ctx, i: int) -> Optional[List[Optional[int]]]:
    """Elements of 1-D input ``i`` known at compile time, None for the others (see
    ``_partial_elements``)."""
    v = _vector_value(ctx, i)
    if v is not None:
        return v
    return _partial_elements(ctx.node.inputs[i])


def _partial_elements(out: Output, depth: int = 0) -> Optional[List[Optional[int]]]:
    """The elements of a 1-D int tensor known at compile time (None for the others), or None
    when not even its length is known: a constant, the Shape of a partially known tensor, a
    Pack of scalars, a Cast, a ConcatV2 of such vectors, or a plain 1-D StridedSlice of one
    (TensorFlow's ``constant_value_as_shape``: ``reshape(x, concat([shape(x)[:1], [16]], 0))``
    keeps the static 16)."""
    v = constant_value(out)
    if v is not None:
        return [int(x) for x in np.reshape(v, -1)] if np.ndim(v) == 1 else None
    src = out.node
    if depth > 16 or out.type.rank != 1:
        return None
    if src.op == "Shape" and src.inputs and src.inputs[0].shape is not None:
        return list(src.inputs[0].shape)
    if src.op == "Pack" and all(o.type.rank == 0 for o in src.inputs):
        values = [constant_value(o) for o in src.inputs]
        return [None if v is None else int(v) for v in values]
    if src.op == "Cast" and src.inputs and src.inputs[0].dtype.is_integer:
        return _partial_elements(src.inputs[0], depth + 1)
    if src.op == "ConcatV2" and len(src.inputs) >= 3:
        axis = constant_value(src.inputs[-1])
        if axis is None or int(np.reshape(axis, -1)[0]) not in (0, -1):
            return None
        joined: List[Optional[int]] = []
        for part in src.inputs[:-1]:
            elements = _partial_elements(part, depth + 1)
            if elements is None:
                n = part.shape[0] if part.shape is not None and len(part.shape) == 1 else None
                if n is None:
                    return None
                elements = [None] * n
            joined += elements
        return joined
    if src.op == "StridedSlice" and not any(src.attrs.get(m, 0) for m in (
            "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")):
        bounds = [constant_value(o) for o in src.inputs[1:4]]
        whole = _partial_elements(src.inputs[0], depth + 1)
        if whole is None or any(b is None or np.size(b) != 1 for b in bounds):
            return None
        begin, end, stride = (int(np.reshape(b, -1)[0]) for b in bounds)
        if stride == 0:
            return None
        return whole[slice(None if src.attrs.get("begin_mask", 0) & 1 else begin,
                           None if src.attrs.get("end_mask", 0) & 1 else end, stride)]
    return None


def _scalar_value(ctx, i: int) -> Optional[int]:
    """Constant scalar (or one-element) input ``i`` as an int, checked; None when unknown."""
    v = ctx.input_value(i)
    if v is None:
        return None
    if np.size(v) != 1:
        raise ctx.error(f"input {_input_name(ctx.node, i)} must be a scalar, got shape "
                        f"{list(np.shape(v))}")
    return int(np.reshape(v, -1)[0])


def _vector_length(ctx, i: int) -> Dim:
    """Length of 1-D input ``i`` if known; error if its rank is known and not 1."""
    s = ctx.input_shape(i)
    if s is None:
        v = ctx.input_value(i)
        return None if v is None else int(np.size(v))
    if len(s) != 1:
        raise ctx.error(f"input {_input_name(ctx.node, i)} must be 1-D, got shape {shape_str(s)}")
    return s[0]


def _check_scalar_input(ctx, i: int) -> None:
    s = ctx.input_shape(i)
    if s is not None and len(s) != 0 and not (len(s) == 1 and s[0] in (1, None)):
        raise ctx.error(f"input {_input_name(ctx.node, i)} must be a scalar, got shape "
                        f"{shape_str(s)}")


def _check_fits(factors: Sequence[int], itemsize: int) -> None:
    """The C kernels' allocation rule: every prefix product of the dims, in bytes, fits int64."""
    p = itemsize
    for f in factors:
        if f < 0:
            raise ValueError(f"dimension {f} is negative")
        p *= f
        if p > INT64_MAX:
            raise ValueError("the output shape is too large (its byte size overflows int64)")


# =========================================================================================
# Shared helpers: C code generation
# =========================================================================================
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
        raise kc.error(f"the C backend needs input {_input_name(kc.node, i)} to be a "
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


# =========================================================================================
# Reshape, ExpandDims, Squeeze: views of their input (c_alias=0, no copy)
# =========================================================================================
def _check_reshape_request(request: Sequence[int]) -> Optional[int]:
    """Validate sizes (>= 0, or a single -1); returns the index of the -1 or None."""
    unknown = None
    for k, r in enumerate(request):
        if r == -1:
            if unknown is not None:
                raise ValueError(f"Only one input size may be -1, not both {unknown} and {k}")
            unknown = k
        elif r < 0:
            raise ValueError(f"Size {k} must be non-negative, not {r}")
    return unknown


def _reshape_dims(request: Sequence[int], in_shape: Sequence[int]) -> Tuple[int, ...]:
    """TensorFlow's Reshape rule: one -1 is inferred, leaving zero sizes out of the inference."""
    unknown = _check_reshape_request(request)
    has_zero = 0 in request
    total = math.prod(in_shape)
    out = list(request)
    if unknown is not None:
        known = math.prod(r for r in request if r > 0)
        count = math.prod(d for d in in_shape if d > 0 or not has_zero)
        in_zero = has_zero and 0 in in_shape
        missing = count // known
        if not in_zero and missing * known != count:
            raise ValueError(f"Input to reshape is a tensor with {total} values, but the "
                             f"requested shape requires a multiple of {known}")
        out[unknown] = missing
    if math.prod(out) != total:
        raise ValueError(f"Input to reshape is a tensor with {total} values, but the requested "
                         f"shape has {math.prod(out)}")
    return tuple(out)


def _reshape_shape(ctx):
    n = _vector_length(ctx, 1)
    request = _partial_vector(ctx, 1)
    if request is None:
        return [None if n is None else (None,) * n]
    in_shape = ctx.input_shape(0)
    if None not in request and _num_elements(in_shape) is not None:
        return [_reshape_dims(request, in_shape)]
    _check_reshape_request([r for r in request if r is not None])
    return [tuple(None if r is None or r == -1 else r for r in request)]


@_reference
def _reshape_kernel(ctx, x, shape):
    if shape.ndim != 1:
        raise ValueError(f"shape must be a vector, got shape {list(shape.shape)}")
    return x.reshape(_reshape_dims([int(v) for v in shape], x.shape))


def _reshape_c_dims(kc: KernelContext) -> List[List[str]]:
    """Output dims resolved at run time by ``flowc_arr_reshape_*`` (checks the request too)."""
    x, out = kc.inputs[0], kc.out
    request = _elements(kc, 1, out.rank)
    for k, r in enumerate(request):
        if isinstance(r, str):
            kc.check(f"{r} >= -1", f"Size {k} must be non-negative, not %lld", f"(long long){r}")
    maybe_unknown = [r for r in request if r == -1 or isinstance(r, str)]
    if len(maybe_unknown) > 1 and any(isinstance(r, str) for r in request):
        kc.check(" + ".join(f"({_c(r)} == -1)" for r in maybe_unknown) + " <= 1",
                 "Only one input size may be -1")
    _support(kc)
    args = f"{len(request)}, {_int64_array(request)}, {x.rank}, {_int64_array(_values(x))}"
    fmt = "[" + ", ".join("%lld" for _ in request) + "]"
    kc.check(f"flowc_arr_reshape_resolve({args}, (int64_t[{max(len(request), 1)}]){{0}}) == 0",
             f"Input to reshape is a tensor with %lld values, but the requested shape {fmt} "
             "does not fit it", f"(long long)({x.size})", *[f"(long long){_c(r)}" for r in request])
    return [[str(r) if isinstance(r, int) and r >= 0 else f"flowc_arr_reshape_dim({args}, {k})"
             for k, r in enumerate(request)]]


def _values(ref: TensorRef) -> List[Value]:
    return [_dim(ref, k) for k in range(ref.rank)]


register_op("Reshape", inputs=["tensor: T", "shape: Tshape"], outputs=["output: T"],
            attrs=["T: {all}", "Tshape: {i32, i64} = i32"], shape=_reshape_shape,
            kernel=_reshape_kernel, c_output_dims=_reshape_c_dims, c_alias=0, group="movement",
            doc="The tensor with a new shape (a view); one size may be -1 (inferred).")


def _expand_dims_shape(ctx):
    _check_scalar_input(ctx, 1)
    s = ctx.input_shape(0)
    axis = _scalar_value(ctx, 1)
    if s is None:
        return [None]
    if axis is None:
        return [(None,) * (len(s) + 1)]
    a = _normalize_axis(axis, len(s) + 1, "dim")
    return [s[:a] + (1,) + s[a:]]


@_reference
def _expand_dims_kernel(ctx, x, dim):
    if dim.size != 1:
        raise ValueError(f"dim must be a scalar, got shape {list(dim.shape)}")
    return np.expand_dims(x, _normalize_axis(int(dim.reshape(-1)[0]), x.ndim + 1, "dim"))


def _expand_dims_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    a = _constant_axis(kc, 1, x.rank + 1)
    return [x.dims[:a] + ["1"] + x.dims[a:]]


register_op("ExpandDims", inputs=["input: T", "dim: Tdim"], outputs=["output: T"],
            attrs=["T: {all}", "Tdim: {i32, i64} = i32"], shape=_expand_dims_shape,
            kernel=_expand_dims_kernel, c_output_dims=_expand_dims_c_dims, c_alias=0,
            group="movement", doc="Inserts a dim of size 1 at index ``dim`` (a view).")


def _squeeze_axes(dims: Sequence[int], rank: int) -> List[int]:
    return sorted({_normalize_axis(a, rank, "squeeze dim") for a in dims})


def _squeeze_shape(ctx):
    s = ctx.input_shape(0)
    dims = ctx.attr("squeeze_dims")
    if s is None:
        return [None]
    if not dims:
        if any(d is None for d in s):
            return [None]            # which dims are 1 is known only at run time
        return [tuple(d for d in s if d != 1)]
    axes = _squeeze_axes(dims, len(s))
    for a in axes:
        if s[a] is not None and s[a] != 1:
            raise ctx.error(f"Can not squeeze dim[{a}], expected a dimension of 1, got {s[a]}")
    return [tuple(d for k, d in enumerate(s) if k not in axes)]


@_reference
def _squeeze_kernel(ctx, x):
    dims = ctx.attrs["squeeze_dims"]
    if not dims:
        return np.squeeze(x)
    axes = _squeeze_axes(dims, x.ndim)
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"Can not squeeze dim[{a}], expected a dimension of 1, got "
                             f"{x.shape[a]}")
    return np.squeeze(x, axis=tuple(axes))


def _squeeze_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    dims = kc.attr("squeeze_dims")
    if not dims:
        axes = [k for k in range(x.rank) if x.shape[k] == 1]
    else:
        axes = _squeeze_axes(dims, x.rank)
    for a in axes:
        if x.shape[a] is None:
            kc.check(f"{x.dim(a)} == 1",
                     f"Can not squeeze dim[{a}], expected a dimension of 1, got %lld",
                     f"(long long){x.dim(a)}")
    return [[x.dim(k) for k in range(x.rank) if k not in axes]]


register_op("Squeeze", inputs=["input: T"], outputs=["output: T"],
            attrs=["T: {all}", "squeeze_dims: list(int) = []"], shape=_squeeze_shape,
            kernel=_squeeze_kernel, c_output_dims=_squeeze_c_dims, c_alias=0, group="movement",
            doc="Removes dims of size 1: those listed in ``squeeze_dims``, or all (a view).")


# =========================================================================================
# Transpose
# =========================================================================================
def _check_perm(perm: Sequence[int], rank: int) -> None:
    if len(perm) != rank:
        raise ValueError(f"transpose expects a vector of size {rank}. But input(1) is a vector "
                         f"of size {len(perm)}")
    seen = set()
    for d in perm:
        if not 0 <= d < rank:
            raise ValueError(f"{d} is out of range [0 .. {rank})")
        if d in seen:
            raise ValueError(f"{d} is duplicated in the input.")
        seen.add(d)


def _transpose_shape(ctx):
    s = ctx.input_shape(0)
    n = _vector_length(ctx, 1)
    perm = _vector_value(ctx, 1)
    rank = len(s) if s is not None else n
    if rank is None:
        return [None]
    if perm is None:
        if n is not None and n != rank:
            raise ctx.error(f"transpose expects a vector of size {rank}. But input(1) is a "
                            f"vector of size {n}")
        return [(None,) * rank]
    _check_perm(perm, rank)
    return [tuple(None if s is None else s[p] for p in perm)]


@_reference
def _transpose_kernel(ctx, x, perm):
    perm = [int(p) for p in perm.reshape(-1)]
    _check_perm(perm, x.ndim)
    return _contiguous(np.transpose(x, perm))


def _constant_perm(kc: KernelContext) -> List[int]:
    v = constant_value(kc.node.inputs[1])
    if v is None:
        raise kc.error("the C backend needs a constant perm for Transpose")
    return [int(p) for p in np.reshape(v, -1)]


def _transpose_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    return [[x.dim(p) for p in _constant_perm(kc)]]


def _transpose_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    perm = _constant_perm(kc)
    dims = [_dim(x, p) for p in perm]
    x_strides = _contiguous_strides(_values(x))
    return _emit_copy(kc, dims, x, 0, [x_strides[p] for p in perm],
                      out, 0, _contiguous_strides(dims))


register_op("Transpose", inputs=["x: T", "perm: Tperm"], outputs=["y: T"],
            attrs=["T: {all}", "Tperm: {i32, i64} = i32"], shape=_transpose_shape,
            kernel=_transpose_kernel, c_kernel=_transpose_c, c_output_dims=_transpose_c_dims,
            group="movement", doc="Permutes the dims: output dim k is input dim perm[k].")


# =========================================================================================
# ConcatV2, Split, SplitV, Pack, Unpack: copies along one axis (memcpy of whole rows)
# =========================================================================================
def _merged_shape(ctx, shapes: Sequence, what: str):
    """The most specific shape compatible with all ``shapes`` (error naming the first misfit)."""
    merged = None
    for i, s in enumerate(shapes):
        try:
            merged = merge_shapes(merged, s)
        except ValueError:
            raise ctx.error(f"{what}: shape of input {i} {shape_str(s)} does not match "
                            f"{shape_str(merged)}") from None
    return merged


def _concat_shape(ctx):
    n = ctx.attr("N")
    shapes = [ctx.input_shape(i) for i in range(n)]
    _check_scalar_input(ctx, n)
    axis = _scalar_value(ctx, n)
    ranks = {len(s) for s in shapes if s is not None}
    if len(ranks) > 1:
        raise ctx.error(f"ConcatV2 inputs must have the same rank, got shapes "
                        f"{', '.join(shape_str(s) for s in shapes)}")
    if not ranks:
        return [None]
    rank = ranks.pop()
    if rank == 0:
        raise ctx.error("Can't concatenate scalars (use tf.stack instead)")
    if axis is None:
        return [(None,) * rank]
    a = _normalize_axis(axis, rank)
    known = [s for s in shapes if s is not None]
    others = [s[:a] + (None,) + s[a + 1:] for s in known]
    out = list(_merged_shape(ctx, others, "ConcatV2 inputs must match except along the axis"))
    sizes = [s[a] for s in shapes if s is not None]
    out[a] = sum(sizes) if len(sizes) == n and None not in sizes else None
    return [tuple(out)]


@_reference
def _concat_kernel(ctx, *arrays):
    values, axis = arrays[:-1], arrays[-1]
    rank = values[0].ndim
    if rank == 0:
        raise ValueError("Can't concatenate scalars (use tf.stack instead)")
    a = _normalize_axis(int(axis.reshape(-1)[0]), rank)
    def others(v):
        return v.shape[:a] + v.shape[a + 1:]

    for i, v in enumerate(values):
        if v.ndim != rank or others(v) != others(values[0]):
            raise ValueError(f"ConcatOp : Dimensions of inputs should match: shape[0] = "
                             f"{list(values[0].shape)} vs. shape[{i}] = {list(v.shape)}")
    return np.concatenate(values, axis=a)


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


register_op("ConcatV2", inputs=["values: N * T", "axis: Tidx"], outputs=["output: T"],
            attrs=["N: int >= 2", "T: {all}", "Tidx: {i32, i64} = i32"], shape=_concat_shape,
            kernel=_concat_kernel, c_kernel=_concat_c, c_output_dims=_concat_c_dims,
            group="movement", doc="Concatenates ``values`` along ``axis``.")


def _split_shape(ctx):
    n = ctx.attr("num_split")
    _check_scalar_input(ctx, 0)
    axis = _scalar_value(ctx, 0)
    s = ctx.input_shape(1)
    if s is None:
        return [None] * n
    if axis is None:
        return [(None,) * len(s)] * n
    a = _normalize_axis(axis, len(s))
    d = s[a]
    if d is not None and d % n:
        raise ctx.error(f"Number of ways to split should evenly divide the split dimension, but "
                        f"got split_dim {a} (size = {d}) and num_split {n}")
    return [s[:a] + (None if d is None else d // n,) + s[a + 1:]] * n


@_reference
def _split_kernel(ctx, axis, x):
    n = ctx.attrs["num_split"]
    a = _normalize_axis(int(axis.reshape(-1)[0]), x.ndim)
    if x.shape[a] % n:
        raise ValueError(f"Number of ways to split should evenly divide the split dimension, but "
                         f"got split_dim {a} (size = {x.shape[a]}) and num_split {n}")
    return [_contiguous(p) for p in np.split(x, n, axis=a)]


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


register_op("Split", inputs=["axis: i32", "value: T"], outputs=["output: num_split * T"],
            attrs=["num_split: int >= 1", "T: {all}"], shape=_split_shape, kernel=_split_kernel,
            c_kernel=_split_c, c_output_dims=_split_c_dims, group="movement",
            doc="Splits ``value`` along ``axis`` into ``num_split`` equal parts.")


def _split_sizes(sizes: Sequence[int], dim: Dim) -> List[Dim]:
    """SplitV's sizes with the -1 resolved (None where ``dim`` is unknown); ValueError if bad."""
    unknown = [k for k, v in enumerate(sizes) if v == -1]
    if len(unknown) > 1:
        raise ValueError("There can only be one -1 in the input.")
    for k, v in enumerate(sizes):
        if v < -1:
            raise ValueError(f"Split size at index {k} must be >= 0. Got: {v}")
    known = sum(v for v in sizes if v != -1)
    if dim is None:
        return [None if v == -1 else v for v in sizes]
    if (known > dim) if unknown else (known != dim):
        raise ValueError("Determined shape must either match input shape along split_dim exactly "
                         "if fully specified, or be less than the size of the input along "
                         f"split_dim if not fully specified.  Got: {known}")
    return [dim - known if v == -1 else v for v in sizes]


def _split_v_shape(ctx):
    n = ctx.attr("num_split")
    length = _vector_length(ctx, 1)
    if length is not None and length != n:
        raise ctx.error(f"size_splits has {length} elements but num_split is {n}")
    _check_scalar_input(ctx, 2)
    sizes = _vector_value(ctx, 1)
    axis = _scalar_value(ctx, 2)
    s = ctx.input_shape(0)
    if s is None:
        return [None] * n
    if axis is None:
        return [(None,) * len(s)] * n
    a = _normalize_axis(axis, len(s))
    resolved = [None] * n if sizes is None else _split_sizes(sizes, s[a])
    return [s[:a] + (d,) + s[a + 1:] for d in resolved]


@_reference
def _split_v_kernel(ctx, x, size_splits, axis):
    n = ctx.attrs["num_split"]
    if size_splits.size != n:
        raise ValueError(f"size_splits has {size_splits.size} elements but num_split is {n}")
    a = _normalize_axis(int(axis.reshape(-1)[0]), x.ndim)
    sizes = _split_sizes([int(v) for v in size_splits.reshape(-1)], x.shape[a])
    offsets = np.cumsum([0] + sizes)
    return [_contiguous(np.take(x, np.arange(offsets[k], offsets[k + 1]), axis=a))
            for k in range(n)]


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


register_op("SplitV", inputs=["value: T", "size_splits: Tlen", "axis: i32"],
            outputs=["output: num_split * T"],
            attrs=["num_split: int >= 1", "T: {all}", "Tlen: {i32, i64} = i64"],
            shape=_split_v_shape, kernel=_split_v_kernel, c_kernel=_split_v_c,
            c_output_dims=_split_v_c_dims, group="movement",
            doc="Splits ``value`` along ``axis`` into parts of ``size_splits`` (one may be -1).")


def _pack_shape(ctx):
    n = ctx.attr("N")
    merged = _merged_shape(ctx, [ctx.input_shape(i) for i in range(n)],
                           "Shapes of all inputs must match")
    if merged is None:
        return [None]
    a = _normalize_axis(ctx.attr("axis"), len(merged) + 1)
    return [merged[:a] + (n,) + merged[a:]]


@_reference
def _pack_kernel(ctx, *values):
    for i, v in enumerate(values):
        if v.shape != values[0].shape:
            raise ValueError(f"Shapes of all inputs must match: values[0].shape = "
                             f"{list(values[0].shape)} != values[{i}].shape = {list(v.shape)}")
    return np.stack(values, axis=_normalize_axis(ctx.attrs["axis"], values[0].ndim + 1))


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


register_op("Pack", inputs=["values: N * T"], outputs=["output: T"],
            attrs=["N: int >= 1", "T: {all}", "axis: int = 0"], shape=_pack_shape,
            kernel=_pack_kernel, c_kernel=_pack_c, c_output_dims=_pack_c_dims, group="movement",
            doc="Stacks N tensors of one shape along a new dim ``axis``.")


def _unpack_shape(ctx):
    num = ctx.attr("num")
    s = ctx.input_shape(0)
    if s is None:
        return [None] * num
    a = _normalize_axis(ctx.attr("axis"), len(s))
    if s[a] is not None and s[a] != num:
        raise ctx.error(f"Dimension {a} has size {s[a]} but num is {num}")
    return [s[:a] + s[a + 1:]] * num


@_reference
def _unpack_kernel(ctx, x):
    num = ctx.attrs["num"]
    a = _normalize_axis(ctx.attrs["axis"], x.ndim)
    if x.shape[a] != num:
        raise ValueError(f"Dimension {a} has size {x.shape[a]} but num is {num}")
    return [_contiguous(np.take(x, i, axis=a)) for i in range(num)]


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


register_op("Unpack", inputs=["value: T"], outputs=["output: num * T"],
            attrs=["num: int >= 0", "T: {all}", "axis: int = 0"], shape=_unpack_shape,
            kernel=_unpack_kernel, c_kernel=_unpack_c, c_output_dims=_unpack_c_dims,
            group="movement", doc="Unstacks dim ``axis`` of ``value`` into ``num`` tensors.")


# =========================================================================================
# Slice, StridedSlice: a box (with strides) of the input
# =========================================================================================
def _slice_dim(dim: int, begin: int, size: int, k: int) -> Tuple[int, int]:
    """(begin, size) of input dim ``k`` after TensorFlow's checks; size -1 means to the end."""
    if size == -1:
        size = dim - begin
    if not 0 <= begin <= dim:
        raise ValueError(f"Expected begin[{k}] in [0, {dim}], but got {begin}")
    if not 0 <= size <= dim - begin:
        raise ValueError(f"Expected size[{k}] in [0, {dim - begin}], but got {size}")
    return begin, size


def _slice_shape(ctx):
    s = ctx.input_shape(0)
    lengths = {n for n in (_vector_length(ctx, 1), _vector_length(ctx, 2)) if n is not None}
    if s is not None:
        lengths.add(len(s))
    if len(lengths) > 1:
        raise ctx.error(f"Expected begin and size arguments to be 1-D tensors of size "
                        f"{'the input rank' if s is None else len(s)}, got "
                        f"{shape_str(ctx.input_shape(1))} and {shape_str(ctx.input_shape(2))}")
    if not lengths:
        return [None]
    rank = lengths.pop()
    begin, size = _partial_vector(ctx, 1), _partial_vector(ctx, 2)
    out: List[Dim] = []
    for k in range(rank):
        d = None if s is None else s[k]
        b = None if begin is None else begin[k]
        z = None if size is None else size[k]
        if z is not None and z < -1:
            raise ctx.error(f"Expected size[{k}] in [0, ...], but got {z}")
        if d is not None and b is not None and z is not None:
            out.append(_slice_dim(d, b, z, k)[1])
        elif d is not None and b is not None and not 0 <= b <= d:
            raise ctx.error(f"Expected begin[{k}] in [0, {d}], but got {b}")
        else:
            out.append(None if z is None or z == -1 else z)
    return [tuple(out)]


@_reference
def _slice_kernel(ctx, x, begin, size):
    if begin.shape != (x.ndim,) or size.shape != (x.ndim,):
        raise ValueError(f"Expected begin and size arguments to be 1-D tensors of size {x.ndim}, "
                         f"but got shapes {list(begin.shape)} and {list(size.shape)} instead.")
    index = []
    for k in range(x.ndim):
        b, z = _slice_dim(x.shape[k], int(begin[k]), int(size[k]), k)
        index.append(slice(b, b + z))
    return _contiguous(x[tuple(index)])


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


register_op("Slice", inputs=["input: T", "begin: Index", "size: Index"], outputs=["output: T"],
            attrs=["T: {all}", "Index: {i32, i64}"], shape=_slice_shape, kernel=_slice_kernel,
            c_kernel=_slice_c, c_output_dims=_slice_c_dims, group="movement",
            doc="The box of ``size`` elements from ``begin`` (size -1: to the end of the dim).")


@dataclass(frozen=True)
class _SliceAxis:
    """One input dim of a StridedSlice once the ellipsis is expanded (TensorFlow's dense spec).

    ``sparse`` indexes begin/end/strides; None for dims the ellipsis covers (whole range).
    """
    sparse: Optional[int]
    begin_masked: bool
    end_masked: bool
    shrink: bool


def _dense_spec(n: int, rank: int, attrs) -> Tuple[List[_SliceAxis], List[Optional[int]]]:
    """Expand StridedSlice's sparse spec of ``n`` entries over an input of ``rank`` dims.

    Returns one _SliceAxis per input dim and, per output dim, the input dim it comes from
    (None for a new axis of size 1; shrunk dims have no output dim).
    """
    ellipsis, new_axis = attrs["ellipsis_mask"], attrs["new_axis_mask"]
    if ellipsis & (ellipsis - 1):
        raise ValueError("Multiple ellipses in slice spec not allowed")
    entries, seen, new_after = n, False, 0
    for i in range(n):
        if seen and new_axis >> i & 1:
            new_after += 1
        if ellipsis >> i & 1:
            seen = True
    if not seen:
        ellipsis |= 1 << n
        entries += 1
    axes: List[_SliceAxis] = []
    final: List[Optional[int]] = []
    for i in range(entries):
        if ellipsis >> i & 1:
            stop = min(rank - (entries - i) + 1 + new_after, rank)
            while len(axes) < stop:
                final.append(len(axes))
                axes.append(_SliceAxis(None, True, True, False))
        elif new_axis >> i & 1:
            final.append(None)
        else:
            if len(axes) == rank:
                raise ValueError(f"Index out of range using input dim {len(axes)}; input has "
                                 f"only {rank} dims")
            shrink = bool(attrs["shrink_axis_mask"] >> i & 1)
            if not shrink:
                final.append(len(axes))
            axes.append(_SliceAxis(i, bool(attrs["begin_mask"] >> i & 1),
                                   bool(attrs["end_mask"] >> i & 1), shrink))
    return axes, final


def _ss_count(start: int, end: int, stride: int) -> int:
    n = end - start
    if n == 0 or (n < 0) != (stride < 0):
        return 0
    q, r = abs(n) // abs(stride), abs(n) % abs(stride)
    return q + (1 if r else 0)


def _ss_resolve(dim: int, b: int, e: int, s: int, ax: _SliceAxis, k: int) -> Tuple[int, int]:
    """(start, count) of input dim ``k`` for begin b, end e, stride s: TensorFlow's rules."""
    if s == 0:
        raise ValueError(f"strides[{k}] must be non-zero")
    if ax.shrink:
        if s <= 0:
            raise ValueError("only stride 1 allowed on non-range indexing.")
        x = b + dim if b < 0 else b
        if not 0 <= x < dim:
            raise ValueError(f"slice index {x} of dimension {k} out of bounds.")
        return x, 1
    lo, hi = (0, dim) if s > 0 else (-1, dim - 1)

    def canonical(x: int, masked: bool, c: int) -> int:
        if masked:
            return lo if (s > 0) == (c == 0) else hi
        x = x + dim if x < 0 else x
        return min(max(x, lo), hi)

    start, end = canonical(b, ax.begin_masked, 0), canonical(e, ax.end_masked, 1)
    return start, _ss_count(start, end, s)


def _ss_size(dim: Dim, b: Optional[int], e: Optional[int], s: Optional[int],
             ax: _SliceAxis, k: int) -> Dim:
    """The output size of input dim ``k`` from what is known at compile time (None: unknown)."""
    if s == 0 or (ax.shrink and s is not None and s <= 0):
        _ss_resolve(0, 0, 0, s, ax, k)                      # raises
    if ax.shrink:
        if dim is not None and b is not None:
            _ss_resolve(dim, b, 0, 1, ax, k)                # checks the index
        return 1
    if dim is None or s is None:
        return None
    if (b is None and not ax.begin_masked) or (e is None and not ax.end_masked):
        return None
    return _ss_resolve(dim, b or 0, e or 0, s, ax, k)[1]


def _ss_inputs(values: Sequence[Optional[Sequence]], ax: _SliceAxis) -> Tuple:
    """(begin, end, stride) of one axis from begin/end/strides values (None when unknown)."""
    if ax.sparse is None:
        return 0, 0, 1
    return tuple(None if v is None else v[ax.sparse] for v in values)


def _strided_slice_shape(ctx):
    s = ctx.input_shape(0)
    lengths = {n for n in (_vector_length(ctx, i) for i in (1, 2, 3)) if n is not None}
    if len(lengths) > 1:
        raise ctx.error("begin, end and strides must all have the same length")
    if s is None or not lengths:
        return [None]
    axes, final = _dense_spec(lengths.pop(), len(s), ctx.attrs)
    values = [_partial_vector(ctx, i) for i in (1, 2, 3)]
    sizes = [_ss_size(s[j], *_ss_inputs(values, ax), ax, j) for j, ax in enumerate(axes)]
    return [tuple(1 if j is None else sizes[j] for j in final)]


@_reference
def _strided_slice_kernel(ctx, x, begin, end, strides):
    if not (begin.ndim == end.ndim == strides.ndim == 1 and begin.size == end.size == strides.size):
        raise ValueError("begin, end and strides must be 1-D and of the same length")
    axes, final = _dense_spec(begin.size, x.ndim, ctx.attrs)
    values = [[int(v) for v in t] for t in (begin, end, strides)]
    index, sizes = [], []
    for j, ax in enumerate(axes):
        b, e, s = _ss_inputs(values, ax)
        start, count = _ss_resolve(x.shape[j], b, e, s, ax, j)
        sizes.append(count)
        if ax.shrink:
            index.append(start)
        elif count == 0:
            index.append(slice(0, 0))
        else:
            stop = start + count * s
            index.append(slice(start, None if stop < 0 else stop, s))
    result = _contiguous(x[tuple(index)])
    return result.reshape([1 if j is None else sizes[j] for j in final])


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
        raise kc.error("the C backend needs the length of begin known at compile time")
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


register_op("StridedSlice", inputs=["input: T", "begin: Index", "end: Index", "strides: Index"],
            outputs=["output: T"],
            attrs=["T: {all}", "Index: {i32, i64}", "begin_mask: int = 0", "end_mask: int = 0",
                   "ellipsis_mask: int = 0", "new_axis_mask: int = 0", "shrink_axis_mask: int = 0"],
            shape=_strided_slice_shape, kernel=_strided_slice_kernel, c_kernel=_strided_slice_c,
            c_output_dims=_strided_slice_c_dims, group="movement",
            doc="numpy-style basic indexing: begin:end:stride per dim, with masks for omitted "
                "bounds, an ellipsis, new axes and shrunk (integer-indexed) dims.")


# =========================================================================================
# Tile, Pad
# =========================================================================================
def _tile_shape(ctx):
    s = ctx.input_shape(0)
    n = _vector_length(ctx, 1)
    if s is not None and n is not None and n != len(s):
        raise ctx.error(f"Expected multiples argument to be a vector of length {len(s)} but got "
                        f"length {n}")
    rank = len(s) if s is not None else n
    multiples = _partial_vector(ctx, 1)
    if rank is None:
        return [None]
    if multiples is None:
        return [(None,) * rank]
    for k, m in enumerate(multiples):
        if m is not None and m < 0:
            raise ctx.error(f"Expected multiples[{k}] >= 0, but got {m}")
    dims = (None,) * rank if s is None else s
    return [tuple(0 if m == 0 else None if d is None or m is None else d * m
                  for d, m in zip(dims, multiples))]


@_reference
def _tile_kernel(ctx, x, multiples):
    m = [int(v) for v in multiples.reshape(-1)]
    if multiples.ndim != 1 or len(m) != x.ndim:
        raise ValueError(f"Expected multiples argument to be a vector of length {x.ndim} but got "
                         f"shape {list(multiples.shape)}")
    for k, v in enumerate(m):
        if v < 0:
            raise ValueError(f"Expected multiples[{k}] >= 0, but got {v}")
    _check_fits([f for pair in zip(x.shape, m) for f in pair], x.dtype.itemsize)
    return np.tile(x, m) if x.ndim else x.copy()


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


register_op("Tile", inputs=["input: T", "multiples: Tmultiples"], outputs=["output: T"],
            attrs=["T: {all}", "Tmultiples: {i32, i64} = i32"], shape=_tile_shape,
            kernel=_tile_kernel, c_kernel=_tile_c, c_output_dims=_tile_c_dims, group="movement",
            doc="Repeats the input multiples[k] times along each dim k.")


def _pad_shape(ctx):
    s = ctx.input_shape(0)
    ps = ctx.input_shape(1)
    if ps is not None and (len(ps) != 2 or ps[1] not in (None, 2)):
        raise ctx.error(f"paddings must be a matrix with 2 columns, got shape {shape_str(ps)}")
    rows = None if ps is None else ps[0]
    if s is not None and rows is not None and rows != len(s):
        raise ctx.error(f"The first dimension of paddings must be the rank of inputs "
                        f"{shape_str(ps)}, input shape {shape_str(s)}")
    rank = len(s) if s is not None else rows
    paddings = _vector_value(ctx, 1)
    if rank is None:
        return [None]
    if paddings is None:
        return [(None,) * rank]
    pairs = list(zip(paddings[0::2], paddings[1::2]))
    for before, after in pairs:
        if before < 0 or after < 0:
            raise ctx.error(f"Paddings must be non-negative: {before} {after}")
    dims = (None,) * rank if s is None else s
    return [tuple(None if d is None else d + a + b for d, (a, b) in zip(dims, pairs))]


@_reference
def _pad_kernel(ctx, x, paddings):
    if paddings.shape != (x.ndim, 2):
        raise ValueError(f"paddings must be a matrix of shape [{x.ndim}, 2], got "
                         f"{list(paddings.shape)}")
    pairs = [(int(a), int(b)) for a, b in paddings]
    for before, after in pairs:
        if before < 0 or after < 0:
            raise ValueError(f"Paddings must be non-negative: {before} {after}")
    _check_fits([d + a + b for d, (a, b) in zip(x.shape, pairs)], x.dtype.itemsize)
    return np.pad(x, pairs) if x.ndim else x.copy()


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


register_op("Pad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
            attrs=["T: {all}", "Tpaddings: {i32, i64} = i32"], shape=_pad_shape,
            kernel=_pad_kernel, c_kernel=_pad_c, c_output_dims=_pad_c_dims, group="movement",
            doc="Pads with zeros: paddings[k] = [before, after] elements around dim k.")


# =========================================================================================
# Fill, ZerosLike, OnesLike, OneHot, Range: new tensors
# =========================================================================================
def _shape_from_dims_input(ctx, i: int):
    """The output shape that the 1-D dims input ``i`` describes, as far as it is known."""
    n = _vector_length(ctx, i)
    dims = _partial_vector(ctx, i)
    if dims is None:
        return None if n is None else (None,) * n
    for d in dims:
        if d is not None and d < 0:
            raise ctx.error(f"Dimension {d} must be >= 0")
    return tuple(dims)


def _fill_shape(ctx):
    _check_scalar_input(ctx, 1)
    return [_shape_from_dims_input(ctx, 0)]


@_reference
def _fill_kernel(ctx, dims, value):
    if dims.ndim != 1:
        raise ValueError(f"dims must be a vector, got shape {list(dims.shape)}")
    if value.ndim != 0:
        raise ValueError(f"value must be a scalar, got shape {list(value.shape)}")
    shape = [int(d) for d in dims]
    for d in shape:
        if d < 0:
            raise ValueError(f"Dimension {d} must be >= 0")
    _check_fits(shape, value.dtype.itemsize)
    return np.full(shape, value, dtype=value.dtype)


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
    _fill_dims(kc, checks=True)
    return kc.render("array_fill.c.j2", value=f"{kc.inputs[1].data}[0]")


register_op("Fill", inputs=["dims: index_type", "value: T"], outputs=["output: T"],
            attrs=["T: {all}", "index_type: {i32, i64} = i32"], shape=_fill_shape,
            kernel=_fill_kernel, c_kernel=_fill_c,
            c_output_dims=lambda kc: [[_c(d) for d in _fill_dims(kc, checks=False)]],
            group="other", doc="A tensor of shape ``dims`` with every element ``value``.")


def _like(name: str, value: int, np_fn: Callable) -> None:
    register_op(name, inputs=["x: T"], outputs=["y: T"], attrs=["T: {all}"],
                shape=lambda ctx: [ctx.input_shape(0)], kernel=lambda ctx, x: np_fn(x),
                c_kernel=lambda kc: kc.render("array_fill.c.j2",
                                              value=kc.literal(value, kc.out.dtype)),
                c_output_dims=lambda kc: [kc.inputs[0].dims], group="other",
                doc=f"A tensor of {value}s with the shape and dtype of ``x``.")


_like("ZerosLike", 0, np.zeros_like)
_like("OnesLike", 1, np.ones_like)


def _one_hot_axis(axis: int, rank: int) -> int:
    if not -1 <= axis <= rank:
        raise ValueError(f"Expected axis to be -1 or between [0, {rank}]. But received: {axis}")
    return rank if axis == -1 else axis


def _one_hot_shape(ctx):
    for i in (1, 2, 3):
        _check_scalar_input(ctx, i)
    depth = _scalar_value(ctx, 1)
    if depth is not None and depth < 0:
        raise ctx.error(f"depth must be non-negative, got: {depth}")
    s = ctx.input_shape(0)
    if s is None:
        return [None]
    a = _one_hot_axis(ctx.attr("axis"), len(s))
    return [s[:a] + (depth,) + s[a:]]


@_reference
def _one_hot_kernel(ctx, indices, depth, on_value, off_value):
    for name, v in (("depth", depth), ("on_value", on_value), ("off_value", off_value)):
        if v.ndim != 0:
            raise ValueError(f"{name} must be a scalar, got shape {list(v.shape)}")
    depth = int(depth)
    if depth < 0:
        raise ValueError(f"depth must be non-negative, got: {depth}")
    a = _one_hot_axis(ctx.attrs["axis"], indices.ndim)
    _check_fits(list(indices.shape) + [depth], on_value.dtype.itemsize)
    ids = np.expand_dims(indices.astype(np.int64), a)
    positions = np.arange(depth).reshape([depth if k == a else 1 for k in range(indices.ndim + 1)])
    return np.where(ids == positions, on_value, off_value).astype(on_value.dtype)


def _one_hot_plan(kc: KernelContext, checks: bool) -> Tuple[int, Value]:
    indices = kc.inputs[0]
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


def _one_hot_c(kc: KernelContext) -> str:
    indices, on, off = kc.inputs[0], kc.inputs[2], kc.inputs[3]
    a, _ = _one_hot_plan(kc, checks=True)
    dims = _values(indices)
    return kc.render("array_one_hot.c.j2", indices=indices, on=f"{on.data}[0]",
                     off=f"{off.data}[0]", prefix=_c(_mul(dims[:a])), depth=kc.out.dim(a),
                     suffix=_c(_mul(dims[a:])))


register_op("OneHot", inputs=["indices: TI", "depth: i32", "on_value: T", "off_value: T"],
            outputs=["output: T"],
            attrs=["axis: int = -1", "T: {all}", "TI: {u8, i8, i32, i64} = i64"],
            shape=_one_hot_shape, kernel=_one_hot_kernel, c_kernel=_one_hot_c,
            c_output_dims=_one_hot_c_dims, group="other",
            doc="One-hot vectors of ``depth`` along ``axis``; indices outside [0, depth) give "
                "all off_value.")


def _range_count(start, limit, delta) -> int:
    """Range's element count, TensorFlow's rules (computed in the element type for floats)."""
    if delta == 0:
        raise ValueError(f"Requires delta != 0: {delta}")
    if delta > 0:
        if not start <= limit:
            raise ValueError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    elif not start >= limit:
        raise ValueError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if isinstance(start, (int, np.integer)):
        span, step = abs(int(limit) - int(start)), abs(int(delta))
        count = -(-span // step)
    else:
        with np.errstate(all="ignore"):
            n = np.ceil(np.abs((limit - start) / delta))
        if not (n >= 0 and float(n) < 2.0**63):
            raise ValueError(f"Requires ((limit - start) / delta) <= {INT64_MAX}")
        count = int(n)
    if count > INT64_MAX:
        raise ValueError(f"Requires ((limit - start) / delta) <= {INT64_MAX}")
    return count


def _scalar(v: np.ndarray):
    """A numpy scalar of the array's dtype (ints as Python ints)."""
    x = v.reshape(-1)[0]
    return int(x) if v.dtype.kind in "iu" else x


def _range_shape(ctx):
    for i in range(3):
        _check_scalar_input(ctx, i)
    values = [ctx.input_value(i) for i in range(3)]
    if any(v is None for v in values):
        return [(None,)]
    return [(_range_count(*[_scalar(v) for v in values]),)]


@_reference
def _range_kernel(ctx, start, limit, delta):
    for name, v in (("start", start), ("limit", limit), ("delta", delta)):
        if v.ndim != 0:
            raise ValueError(f"{name} must be a scalar, got shape {list(v.shape)}")
    s, l, d = _scalar(start), _scalar(limit), _scalar(delta)
    count = _range_count(s, l, d)
    _check_fits([count], start.dtype.itemsize)
    if start.dtype.kind in "iu":
        with np.errstate(all="ignore"):
            values = np.int64(s) + np.arange(count, dtype=np.int64) * np.int64(d)
        return values.astype(start.dtype)
    steps = np.arange(count, dtype=np.int64).astype(start.dtype)
    return start.reshape(()) + steps * delta.reshape(())


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


register_op("Range", inputs=["start: Tidx", "limit: Tidx", "delta: Tidx"], outputs=["output: Tidx"],
            attrs=["Tidx: {f32, f64, i32, i64} = i32"], shape=_range_shape, kernel=_range_kernel,
            c_kernel=_range_c, c_output_dims=_range_c_dims, group="other",
            doc="start, start + delta, ... up to (not including) limit.")


# =========================================================================================
# GatherV2
# =========================================================================================
def _gather_dims(params_rank: int, indices_rank: int, axis: int,
                 batch_dims: int) -> Tuple[int, int]:
    """Normalized (axis, batch_dims) for GatherV2, with TensorFlow's range checks."""
    bd = batch_dims + indices_rank if batch_dims < 0 else batch_dims
    if not 0 <= bd <= indices_rank:
        raise ValueError(f"Expected batch_dims in the range [{-indices_rank}, {indices_rank}], "
                         f"but got {batch_dims}")
    a = _normalize_axis(axis, params_rank)
    if a < bd:
        raise ValueError(f"batch_dims ({batch_dims}) must be less than or equal to axis ({axis})")
    return a, bd


def _gather_shape(ctx):
    _check_scalar_input(ctx, 2)
    p, ind = ctx.input_shape(0), ctx.input_shape(1)
    axis = _scalar_value(ctx, 2)
    if p is None or ind is None:
        return [None]
    if axis is None:
        return [(None,) * max(len(p) + len(ind) - 1 - max(ctx.attr("batch_dims"), 0), 0)]
    a, bd = _gather_dims(len(p), len(ind), axis, ctx.attr("batch_dims"))
    batch = _merged_shape(ctx, [p[:bd], ind[:bd]], "params and indices batch dims must match")
    return [batch + p[bd:a] + ind[bd:] + p[a + 1:]]


def _index_text(flat: int, shape: Sequence[int]) -> str:
    return "indices[" + ",".join(str(int(i)) for i in np.unravel_index(flat, shape)) + "]"


@_reference
def _gather_kernel(ctx, params, indices, axis):
    if axis.size != 1:
        raise ValueError(f"axis must be a scalar, got shape {list(axis.shape)}")
    a, bd = _gather_dims(params.ndim, indices.ndim, int(axis.reshape(-1)[0]),
                         ctx.attrs["batch_dims"])
    if params.shape[:bd] != indices.shape[:bd]:
        raise ValueError(f"params.shape[:{bd}] {list(params.shape[:bd])} should equal "
                         f"indices.shape[:{bd}] {list(indices.shape[:bd])}")
    limit = params.shape[a]
    flat = indices.reshape(-1).astype(np.int64)
    bad = np.nonzero((flat < 0) | (flat >= limit))[0]
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"{_index_text(k, indices.shape)} = {flat[k]} is not in [0, {limit})")
    batch = math.prod(params.shape[:bd])
    outer = math.prod(params.shape[bd:a])
    inner = math.prod(params.shape[a + 1:])
    p = params.reshape(batch, outer, limit, inner)
    ids = flat.reshape(batch, -1) if batch else flat.reshape(0, 0)
    rows = p[np.arange(batch)[:, None, None], np.arange(outer)[None, :, None], ids[:, None, :]]
    out_shape = params.shape[:a] + indices.shape[bd:] + params.shape[a + 1:]
    return _contiguous(rows).reshape(out_shape)


def _gather_plan(kc: KernelContext) -> Tuple[int, int]:
    p, ind = kc.inputs[0], kc.inputs[1]
    try:
        a = _constant_axis(kc, 2, p.rank)
        return _gather_dims(p.rank, ind.rank, a, kc.attr("batch_dims"))
    except ValueError as e:
        raise kc.error(str(e)) from None


def _gather_c_dims(kc: KernelContext) -> List[List[str]]:
    p, ind = kc.inputs[0], kc.inputs[1]
    a, bd = _gather_plan(kc)
    return [p.dims[:a] + ind.dims[bd:] + p.dims[a + 1:]]


def _gather_c(kc: KernelContext) -> str:
    p, ind = kc.inputs[0], kc.inputs[1]
    a, bd = _gather_plan(kc)
    for k in range(bd):
        if p.shape[k] is None or ind.shape[k] is None:
            kc.check_dims_equal(p.dim(k), ind.dim(k),
                                f"params and indices batch dim {k} must match")
    pdims, idims = _values(p), _values(ind)
    istrides = _contiguous_strides(idims)
    position = [f"(long long)n" if ind.rank == 1 else
                f"(long long)((n / {_c(s)}) % {_c(d)})" for s, d in zip(istrides, idims)]
    limit = _c(pdims[a])
    bad = kc.fail("indices[" + ",".join("%lld" for _ in position) + "] = %lld is not in [0, %lld)",
                  *position, "(long long)idx[n]", f"(long long){limit}")
    return kc.render("array_gather.c.j2", params=p, indices=ind, num_indices=ind.size,
                     bad_index=bad, limit=limit, batch=_c(_mul(pdims[:bd])),
                     outer=_c(_mul(pdims[bd:a])), inner=_c(_mul(pdims[a + 1:])),
                     count=_c(_mul(idims[bd:])))


register_op("GatherV2", inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
            outputs=["output: Tparams"],
            attrs=["batch_dims: int = 0", "Tparams: {all}", "Tindices: {i32, i64}",
                   "Taxis: {i32, i64}"],
            shape=_gather_shape, kernel=_gather_kernel, c_kernel=_gather_c,
            c_output_dims=_gather_c_dims, group="movement",
            doc="Slices of ``params`` along ``axis`` at ``indices`` (out of range: an error).")
