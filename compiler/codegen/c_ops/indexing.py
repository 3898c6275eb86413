"""The C lowering of the N-dimensional indexing ops (``compiler/ops/indexing.py``): GatherNd,
ScatterNd, the TensorScatter family and ReverseSequence.

Every index (and every sequence length) is checked before the output is allocated, so a bad
one fails the step with an error naming it and nothing is written. The index depth ``Q`` (the
last dim of ``indices``) must be known at compile time: it decides the layout. Integer sums
and products are computed in unsigned arithmetic, so their wrap-around has no undefined
behaviour.
"""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import _elements
from compiler.codegen.kernel_context import KernelContext, TensorRef, product, shape_printf
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.indexing import SCATTERS
from runtime.dtypes import DType

_UNSIGNED = {DType.i32: "uint32_t", DType.i64: "uint64_t"}


def _depth(kc: KernelContext, indices: TensorRef, rank: int) -> int:
    q = indices.shape[-1] if indices.rank else None
    if q is None:
        raise kc.static_error("the C backend needs the last dim of indices (the index depth) "
                              "known at compile time")
    if q > rank:
        raise kc.error(f"index innermost dimension length must be <= rank {rank}; saw: {q}")
    return q


def _check_indices(kc: KernelContext, indices: TensorRef, dims: List[str], q: int,
                   shape_of: TensorRef = None) -> None:
    """A run-time check, before anything is allocated or written, that every row of Q
    coordinates lies inside ``dims`` (the indexed tensor's dims)."""
    if q == 0:
        return
    lead = indices.rank - 1
    position = ["(long long)r" if lead == 1 else
                f"(long long)((r / {product(indices.dims[k + 1:lead]) or '1'}) % {indices.dim(k)})"
                for k in range(lead)]
    where = ",".join("%lld" for _ in position)
    values = [f"(long long)ix[r * {q} + {j}]" for j in range(q)]
    fmt, shape_args = shape_printf(shape_of) if shape_of is not None else (
        "[" + ", ".join("%lld" for _ in dims) + "]", [f"(long long)({d})" for d in dims])
    fail = kc.fail(f"indices[{where}] = [" + ", ".join("%lld" for _ in values)
                   + f"] does not index into shape {fmt}", *position, *values, *shape_args)
    bounds = ", ".join(dims[:q])
    kc.checks.append("\n".join([
        "{",
        f"    const {indices.ctype} *ix = {indices.data};",
        f"    const int64_t bounds[{q}] = {{{bounds}}};",
        f"    for (int64_t r = 0; r < {product(indices.dims[:-1])}; r++) {{",
        f"        for (int j = 0; j < {q}; j++) {{",
        "            const int64_t v = (int64_t)ix[r * " + str(q) + " + j];",
        f"            if (v < 0 || v >= bounds[j]) {fail}",
        "        }",
        "    }",
        "}"]))


def _row_offset(q: int, dims: List[str]) -> str:
    """C: the element offset of index row ``r`` in a tensor of ``dims``."""
    terms = [f"(int64_t)ix[r * {q} + {j}] * {product(dims[j + 1:]) or '1'}" for j in range(q)]
    return " + ".join(terms) or "0"


# --- GatherNd ----------------------------------------------------------------------------------
def _gather_nd_dims(kc: KernelContext) -> List[List[str]]:
    params, indices = kc.inputs
    q = _depth(kc, indices, params.rank)
    return [indices.dims[:-1] + params.dims[q:]]


def _gather_nd_c(kc: KernelContext) -> str:
    params, indices = kc.inputs
    out = kc.out
    q = _depth(kc, indices, params.rank)
    _check_indices(kc, indices, params.dims, q, params)
    inner = params.dim_product(q)
    return "\n".join([
        f"const {indices.ctype} *ix = {indices.data};",
        f"const {params.ctype} *p = {params.data};",
        f"{out.ctype} *o = {out.data};",
        f"const int64_t inner = {inner};",
        f"for (int64_t r = 0; r < {product(indices.dims[:-1])} && inner > 0; r++) {{",
        f"    const int64_t at = {_row_offset(q, params.dims)};",
        f"    memcpy(o + r * inner, p + at, (size_t)inner * sizeof({out.ctype}));",
        "}",
        "(void)ix; (void)p;"])


set_c_kernel("GatherNd", _gather_nd_c, _gather_nd_dims)


# --- scatters ----------------------------------------------------------------------------------
def _combine(kind: str, dtype: DType, ctype: str) -> str:
    """C: the new value of ``d`` (the output element) given the update ``s``."""
    if kind == "update":
        return "s"
    if kind in ("max", "min"):
        op = ">" if kind == "max" else "<"
        if dtype.is_floating:
            return f"(s != s || s {op} d) ? s : d"          # NaN propagates (np.maximum)
        return f"s {op} d ? s : d"
    sym = {"add": "+", "sub": "-", "mul": "*"}[kind]
    if dtype.is_bool:
        return {"add": "d || s", "sub": "d && !s", "mul": "d && s"}[kind]
    if dtype in _UNSIGNED:
        u = _UNSIGNED[dtype]
        return f"({ctype})(({u})d {sym} ({u})s)"
    return f"({ctype})(d {sym} s)"


def _scatter_body(kc: KernelContext, indices: TensorRef, updates: TensorRef, out: TensorRef,
                  dims: List[str], q: int, kind: str, start: str) -> str:
    """C: out starts as ``start`` ("copy" of input 0, or "zero"), then the updates apply.
    ``dims`` are the output's dims as C that the checks (run before the output is sized) may
    read."""
    lead = indices.rank - 1
    for k in range(lead):
        kc.check_dims_equal(updates.dim(k), indices.dim(k),
                            f"updates dim {k} must equal indices dim {k}")
    if updates.rank - lead != out.rank - q:
        raise kc.error(f"updates must have rank {lead + out.rank - q} (indices.shape[:-1] + "
                       f"tensor.shape[{q}:]), got {updates.rank}")
    for k in range(q, out.rank):
        kc.check_dims_equal(updates.dim(lead + k - q), dims[k],
                            f"updates dim {lead + k - q} must equal tensor dim {k}")
    _check_indices(kc, indices, dims, q)
    inner = out.dim_product(q)
    size = f"(size_t){out.size} * sizeof({out.ctype})"
    first = (f"if ({out.size} > 0) memcpy({out.data}, {kc.inputs[0].data}, {size});"
             if start == "copy" else f"if ({out.size} > 0) memset({out.data}, 0, {size});")
    combine = _combine(kind, out.dtype, out.ctype)
    return "\n".join([
        first,
        f"const {indices.ctype} *ix = {indices.data};",
        f"const {out.ctype} *u = {updates.data};",
        f"{out.ctype} *o = {out.data};",
        f"const int64_t inner = {inner};",
        f"for (int64_t r = 0; r < {product(indices.dims[:-1])} && inner > 0; r++) {{",
        f"    {out.ctype} *dst = o + ({_row_offset(q, out.dims)});",
        f"    const {out.ctype} *src = u + r * inner;",
        "    for (int64_t e = 0; e < inner; e++) {",
        f"        const {out.ctype} d = dst[e], s = src[e];",
        f"        dst[e] = {combine};",
        "        (void)d;",
        "    }",
        "}",
        "(void)ix; (void)u; (void)o;"])


def _tensor_scatter_c(kind: str):
    def emit(kc: KernelContext) -> str:
        tensor, indices, updates = kc.inputs
        q = _depth(kc, indices, tensor.rank)
        return _scatter_body(kc, indices, updates, kc.out, tensor.dims, q, kind, "copy")
    return emit


for _name, (_kind, _) in SCATTERS.items():
    set_c_kernel(_name, _tensor_scatter_c(_kind), lambda kc: [kc.inputs[0].dims])


def _scatter_nd_dims(kc: KernelContext) -> List[List[str]]:
    out = kc.out
    values = _elements(kc, 2, out.rank)
    dims = []
    for k, v in enumerate(values):
        if isinstance(v, int):
            dims.append(str(v))
        else:
            kc.check(f"{v} >= 0", f"shape[{k}] = %lld is negative", f"(long long){v}")
            dims.append(v)
    return [dims]


def _scatter_nd_c(kc: KernelContext) -> str:
    indices, updates, _ = kc.inputs
    q = _depth(kc, indices, kc.out.rank)
    dims = [d if d is not None else e for d, e in
            zip((str(x) if x is not None else None for x in kc.out.shape), _scatter_nd_dims(kc)[0])]
    return _scatter_body(kc, indices, updates, kc.out, dims, q, "add", "zero")


set_c_kernel("ScatterNd", _scatter_nd_c, _scatter_nd_dims)


# --- ReverseSequence ---------------------------------------------------------------------------
def _reverse_sequence_c(kc: KernelContext) -> str:
    x, lengths = kc.inputs
    out = kc.out
    seq, batch = kc.attr("seq_dim"), kc.attr("batch_dim")
    if not (0 <= seq < x.rank and 0 <= batch < x.rank) or seq == batch:
        raise kc.error(f"seq_dim {seq} and batch_dim {batch} must be distinct dims of a "
                       f"rank-{x.rank} input")
    kc.check_dims_equal(lengths.dim(0), x.dim(batch),
                        "len(seq_lengths) must equal input.dims(batch_dim)")
    limit = x.dim(seq)
    kc.checks.append("\n".join([
        "{",
        f"    const {lengths.ctype} *len = {lengths.data};",
        f"    for (int64_t b = 0; b < {lengths.dim(0)}; b++) {{",
        f"        if ((int64_t)len[b] < 0 || (int64_t)len[b] > {limit}) "
        + kc.fail("seq_lengths[%lld] = %lld is not in [0, %lld]", "(long long)b",
                  "(long long)len[b]", f"(long long)({limit})"),
        "    }",
        "}"]))
    rank = x.rank
    return "\n".join([
        f"const {lengths.ctype} *len = {lengths.data};",
        f"const {x.ctype} *src = {x.data};",
        f"{out.ctype} *dst = {out.data};",
        f"const int64_t total = {x.size}, stride = {x.stride(seq) or '1'};",
        f"const int64_t dims[{rank}] = {{{', '.join(x.dims)}}};",
        f"int64_t at[{rank}] = {{0}};",
        "for (int64_t i = 0; i < total; i++) {",
        f"    const int64_t s = at[{seq}], n = (int64_t)len[at[{batch}]];",
        "    dst[i] = src[s < n ? i + (n - 1 - 2 * s) * stride : i];",
        f"    for (int d = {rank - 1}; d >= 0; d--) {{ if (++at[d] < dims[d]) break; at[d] = 0; }}",
        "}",
        "(void)len; (void)src;"])


set_c_kernel("ReverseSequence", _reverse_sequence_c, lambda kc: [kc.inputs[0].dims])
