"""The C lowering of the sparse tensor ops (``compiler/ops/sparse_tensor.py``): SparseToDense,
SparseTensorDenseMatMul, SparseReduceSum, SparseReorder, SparseTensorDenseAdd and SparseReshape.

Every index row is checked against the dense shape before any output is allocated, so a bad
one fails the step with an error naming it and nothing is written. The rank of the sparse
tensor (the last dim of its indices) must be known at compile time. Integer sums are computed
in unsigned arithmetic, so their wrap-around has no undefined behaviour.
"""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import _elements
from compiler.codegen.kernel_context import KernelContext, TensorRef
from compiler.ir.construct import constant_value
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.sparse_tensor import reduced_axes
from runtime.dtypes import DType

_UNSIGNED = {DType.i8: "uint8_t", DType.i16: "uint16_t", DType.i32: "uint32_t",
             DType.i64: "uint64_t"}


def _add(dtype: DType, ctype: str, a: str, b: str) -> str:
    """C: a + b, wrapping for signed integers."""
    if dtype in _UNSIGNED:
        u = _UNSIGNED[dtype]
        return f"({ctype})(({u})({a}) + ({u})({b}))"
    if dtype.is_bool:
        return f"({a}) || ({b})"
    return f"({a}) + ({b})"


def _mul(dtype: DType, ctype: str, a: str, b: str) -> str:
    if dtype in _UNSIGNED:
        u = _UNSIGNED[dtype]
        return f"({ctype})(({u})({a}) * ({u})({b}))"
    return f"({a}) * ({b})"


def _rank(kc: KernelContext, indices: TensorRef) -> int:
    r = indices.shape[1] if indices.rank == 2 else None
    if r is None:
        raise kc.static_error("the C backend needs the rank of the sparse tensor (the last dim "
                              "of its indices) known at compile time")
    return r


def _dims(kc: KernelContext, i: int, rank: int) -> List[str]:
    """The dense shape (input ``i``) as C int64 expressions, each checked non-negative."""
    out = []
    for k, v in enumerate(_elements(kc, i, rank)):
        if isinstance(v, int):
            if v < 0:
                raise kc.error(f"dense shape must be non-negative, got {v} at {k}")
            out.append(str(v))
        else:
            kc.check(f"{v} >= 0", f"dense shape[{k}] = %lld is negative", f"(long long){v}")
            out.append(v)
    return out


def _check_rows(kc: KernelContext, ix: str, n: str, rank: int, dims: List[str],
                what: str) -> None:
    """A run-time check that each of the ``n`` rows of ``rank`` coordinates at ``ix`` lies
    inside ``dims``."""
    if rank == 0:
        return
    values = ", ".join("%lld" for _ in range(rank))
    shape = ", ".join("%lld" for _ in dims)
    fail = kc.fail(f"{what}[%lld] = [{values}] is out of bounds of the dense shape [{shape}]",
                   "(long long)r", *[f"(long long){ix}[r * {rank} + {j}]" for j in range(rank)],
                   *[f"(long long)({d})" for d in dims])
    kc.checks.append("\n".join([
        "{",
        f"    const int64_t bounds[{rank}] = {{{', '.join(dims)}}};",
        f"    for (int64_t r = 0; r < {n}; r++) {{",
        f"        for (int j = 0; j < {rank}; j++) {{",
        f"            const int64_t v = (int64_t){ix}[r * {rank} + j];",
        f"            if (v < 0 || v >= bounds[j]) {fail}",
        "        }",
        "    }",
        "}"]))


def _check_values(kc: KernelContext, indices: TensorRef, values: TensorRef, what: str) -> None:
    kc.check_dims_equal(values.dim(0), indices.dim(0),
                        f"{what} must have one entry per index row")


def _offset(ix: str, rank: int, dims: List[str], axes: List[int]) -> str:
    """C: the row-major offset of row ``r`` over ``axes`` of ``dims``."""
    expr = "0"
    for k in axes:
        expr = f"({expr}) * ({dims[k]}) + (int64_t){ix}[r * {rank} + {k}]"
    return expr


# --- SparseToDense -----------------------------------------------------------------------------
def _to_dense_dims(kc: KernelContext) -> List[List[str]]:
    return [_dims(kc, 1, kc.out.rank)]


def _to_dense_c(kc: KernelContext) -> str:
    indices, _, values, default = kc.inputs
    out = kc.out
    rank = out.rank
    dims = _to_dense_dims(kc)[0]
    if indices.rank == 2:
        if indices.shape[1] is not None and indices.shape[1] != rank:
            raise kc.error(f"sparse_indices has {indices.shape[1]} columns but output_shape has "
                           f"{rank} elements")
        kc.check_dims_equal(indices.dim(1), str(rank),
                            "sparse_indices columns must equal the output rank")
        n = indices.dim(0)
    elif indices.rank == 1 and rank == 1:
        n = indices.dim(0)
    elif indices.rank == 1:
        kc.check_dims_equal(indices.dim(0), str(rank),
                            "sparse_indices must have one entry per output dim")
        n = "1"
    else:
        n = "1"
    if values.rank == 1:
        kc.check_dims_equal(values.dim(0), n, "sparse_values must have one entry per index")
    elif values.rank != 0:
        raise kc.error("sparse_values must be a scalar or a vector")
    kc.check_scalar(3, "default_value")
    ix = f"((const {indices.ctype} *){indices.data})"
    _check_rows(kc, ix, n, rank, dims, "sparse_indices")
    if kc.attr("validate_indices") and rank > 0:
        prev = ", ".join(f"(long long){ix}[(r - 1) * {rank} + {j}]" for j in range(rank))
        cur = ", ".join(f"(long long){ix}[r * {rank} + {j}]" for j in range(rank))
        fmt = ", ".join("%lld" for _ in range(rank))
        kc.checks.append("\n".join([
            "{",
            f"    for (int64_t r = 1; r < {n}; r++) {{",
            "        int cmp = 0;",
            f"        for (int j = 0; j < {rank} && cmp == 0; j++) {{",
            f"            const int64_t a = (int64_t){ix}[(r - 1) * {rank} + j], "
            f"b = (int64_t){ix}[r * {rank} + j];",
            "            cmp = a < b ? -1 : (a > b ? 1 : 0);",
            "        }",
            "        if (cmp == 0) " + kc.fail(f"sparse_indices[%lld] = [{fmt}] is repeated",
                                               "(long long)r", *cur.split(", ")),
            "        if (cmp > 0) " + kc.fail(f"sparse_indices[%lld] = [{fmt}] is out of order "
                                              f"(after [{fmt}])", "(long long)r",
                                              *cur.split(", "), *prev.split(", ")),
            "    }",
            "}"]))
    value = "v[r]" if values.rank == 1 else "v[0]"
    return "\n".join([
        f"{out.ctype} *o = {out.data};",
        f"const {values.ctype} *v = {values.data};",
        f"const {out.ctype} d = {default.data}[0];",
        f"for (int64_t e = 0; e < {out.size}; e++) o[e] = d;",
        f"for (int64_t r = 0; r < {n}; r++) {{",
        f"    o[{_offset(ix, rank, dims, list(range(rank)))}] = {value};",
        "}",
        "(void)v;"])


set_c_kernel("SparseToDense", _to_dense_c, _to_dense_dims)


# --- SparseTensorDenseMatMul -------------------------------------------------------------------
def _matmul_dims(kc: KernelContext) -> List[List[str]]:
    b = kc.inputs[3]
    a = _dims(kc, 2, 2)
    rows = a[1] if kc.attr("adjoint_a") else a[0]
    return [[rows, b.dim(0) if kc.attr("adjoint_b") else b.dim(1)]]


def _matmul_c(kc: KernelContext) -> str:
    indices, values, _, b = kc.inputs
    out = kc.out
    adj_a, adj_b = kc.attr("adjoint_a"), kc.attr("adjoint_b")
    if _rank(kc, indices) != 2:
        raise kc.error("a_indices must be a matrix [N, 2]")
    a = _dims(kc, 2, 2)
    _check_values(kc, indices, values, "a_values")
    inner_a = a[0] if adj_a else a[1]
    inner_b = b.dim(1) if adj_b else b.dim(0)
    kc.check_dims_equal(inner_a, inner_b,
                        "cannot multiply A and B because inner dimension does not match")
    ix = f"((const {indices.ctype} *){indices.data})"
    _check_rows(kc, ix, indices.dim(0), 2, a, "a_indices")
    t, ct = out.dtype, out.ctype
    bval = f"bp[c * {b.dim(1)} + k]" if adj_b else f"bp[k * {b.dim(1)} + c]"
    row, k = ("ix[2 * r + 1]", "ix[2 * r]") if adj_a else ("ix[2 * r]", "ix[2 * r + 1]")
    return "\n".join([
        f"const {indices.ctype} *ix = {indices.data};",
        f"const {ct} *v = {values.data}, *bp = {b.data};",
        f"{ct} *o = {out.data};",
        f"const int64_t cols = {out.dim(1)};",
        f"for (int64_t e = 0; e < {out.size}; e++) o[e] = 0;",
        f"for (int64_t r = 0; r < {indices.dim(0)}; r++) {{",
        f"    const int64_t row = (int64_t){row}, k = (int64_t){k};",
        f"    const {ct} a = v[r];",
        f"    {ct} *dst = o + row * cols;",
        "    for (int64_t c = 0; c < cols; c++) "
        f"dst[c] = {_add(t, ct, 'dst[c]', _mul(t, ct, 'a', bval))};",
        "}",
        "(void)ix; (void)v; (void)bp;"])


set_c_kernel("SparseTensorDenseMatMul", _matmul_c, _matmul_dims)


# --- SparseReduceSum ---------------------------------------------------------------------------
def _reduce_axes(kc: KernelContext, rank: int) -> List[int]:
    axes = constant_value(kc.node.inputs[3])
    if axes is None:
        raise kc.static_error("the C backend needs reduction_axes to be a constant")
    return reduced_axes(kc.node, axes, rank, kc.error)


def _reduce_dims(kc: KernelContext) -> List[List[str]]:
    rank = _rank(kc, kc.inputs[0])
    dims = _dims(kc, 2, rank)
    red = _reduce_axes(kc, rank)
    if kc.attr("keep_dims"):
        return [["1" if k in red else d for k, d in enumerate(dims)]]
    return [[d for k, d in enumerate(dims) if k not in red]]


def _reduce_c(kc: KernelContext) -> str:
    indices, values, _, _ = kc.inputs
    out = kc.out
    rank = _rank(kc, indices)
    dims = _dims(kc, 2, rank)
    red = _reduce_axes(kc, rank)
    _check_values(kc, indices, values, "input_values")
    ix = f"((const {indices.ctype} *){indices.data})"
    _check_rows(kc, ix, indices.dim(0), rank, dims, "input_indices")
    kept = [k for k in range(rank) if k not in red]
    t, ct = out.dtype, out.ctype
    return "\n".join([
        f"const {ct} *v = {values.data};",
        f"{ct} *o = {out.data};",
        f"for (int64_t e = 0; e < {out.size}; e++) o[e] = 0;",
        f"for (int64_t r = 0; r < {indices.dim(0)}; r++) {{",
        f"    const int64_t at = {_offset(ix, rank, dims, kept)};",
        f"    o[at] = {_add(t, ct, 'o[at]', 'v[r]')};",
        "}",
        "(void)v;"])


set_c_kernel("SparseReduceSum", _reduce_c, _reduce_dims)


# --- SparseReorder -----------------------------------------------------------------------------
def _reorder_c(kc: KernelContext) -> str:
    indices, values, _ = kc.inputs
    out_ix, out_v = kc.outputs
    rank = _rank(kc, indices)
    dims = _dims(kc, 2, rank)
    _check_values(kc, indices, values, "input_values")
    ix = f"((const {indices.ctype} *){indices.data})"
    _check_rows(kc, ix, indices.dim(0), rank, dims, "input_indices")
    n = indices.dim(0)
    # a stable bottom-up merge sort of the entry numbers by their index rows
    less = (f"flowc_sparse_row_less(ix, {rank}, tmp_b, tmp_a)")
    kc.module.add_global("\n".join([
        "static int flowc_sparse_row_less(const int64_t *ix, int rank, int64_t a, int64_t b) {",
        "    for (int j = 0; j < rank; j++) {",
        "        const int64_t x = ix[a * rank + j], y = ix[b * rank + j];",
        "        if (x != y) return x < y;",
        "    }",
        "    return 0;",
        "}"]))
    return "\n".join([
        f"const int64_t *ix = (const int64_t *){indices.data};",
        f"const {values.ctype} *v = {values.data};",
        f"const int64_t n = {n};",
        "int64_t *perm = (int64_t *)malloc((size_t)(n + 1) * sizeof(int64_t));",
        "int64_t *spare = (int64_t *)malloc((size_t)(n + 1) * sizeof(int64_t));",
        "if (!perm || !spare) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED",
                                          cleanup="free(perm); free(spare);"),
        "for (int64_t i = 0; i < n; i++) perm[i] = i;",
        "for (int64_t width = 1; width < n; width *= 2) {",
        "    for (int64_t lo = 0; lo < n; lo += 2 * width) {",
        "        const int64_t mid = lo + width < n ? lo + width : n;",
        "        const int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;",
        "        int64_t i = lo, j = mid, k = lo;",
        "        while (i < mid && j < hi) {",
        "            const int64_t tmp_a = perm[i], tmp_b = perm[j];",
        f"            spare[k++] = {less} ? tmp_b : tmp_a;",
        f"            if ({less}) j++; else i++;",
        "        }",
        "        while (i < mid) spare[k++] = perm[i++];",
        "        while (j < hi) spare[k++] = perm[j++];",
        "    }",
        "    int64_t *swap = perm; perm = spare; spare = swap;",
        "}",
        f"int64_t *oi = (int64_t *){out_ix.data};",
        f"{out_v.ctype} *ov = {out_v.data};",
        "for (int64_t i = 0; i < n; i++) {",
        f"    for (int j = 0; j < {rank}; j++) oi[i * {rank} + j] = ix[perm[i] * {rank} + j];",
        "    ov[i] = v[perm[i]];",
        "}",
        "free(perm); free(spare);",
        "(void)v; (void)oi; (void)ov;"])


set_c_kernel("SparseReorder", _reorder_c, lambda kc: [kc.inputs[0].dims, kc.inputs[1].dims])


# --- SparseTensorDenseAdd ----------------------------------------------------------------------
def _dense_add_c(kc: KernelContext) -> str:
    indices, values, _, b = kc.inputs
    out = kc.out
    rank = b.rank
    if indices.rank != 2 or (indices.shape[1] is not None and indices.shape[1] != rank):
        raise kc.error(f"a_indices must be a matrix [N, {rank}] (b's rank)")
    kc.check_dims_equal(indices.dim(1), str(rank), "a_indices columns must equal b's rank")
    dims = _dims(kc, 2, rank)
    for k in range(rank):
        kc.check_dims_equal(dims[k], b.dim(k), f"a_shape dim {k} must equal b dim {k}")
    _check_values(kc, indices, values, "a_values")
    ix = f"((const {indices.ctype} *){indices.data})"
    _check_rows(kc, ix, indices.dim(0), rank, dims, "a_indices")
    t, ct = out.dtype, out.ctype
    return "\n".join([
        f"const {ct} *v = {values.data};",
        f"{ct} *o = {out.data};",
        f"if ({out.size} > 0) memcpy(o, {b.data}, (size_t){out.size} * sizeof({ct}));",
        f"for (int64_t r = 0; r < {indices.dim(0)}; r++) {{",
        f"    const int64_t at = {_offset(ix, rank, b.dims, list(range(rank)))};",
        f"    o[at] = {_add(t, ct, 'o[at]', 'v[r]')};",
        "}",
        "(void)v;"])


set_c_kernel("SparseTensorDenseAdd", _dense_add_c, lambda kc: [kc.inputs[3].dims])


# --- SparseReshape -----------------------------------------------------------------------------
def _reshape_rank(kc: KernelContext) -> int:
    new = kc.inputs[2]
    if new.rank != 1 or new.shape[0] is None:
        raise kc.static_error("the C backend needs the length of new_shape known at compile time")
    return new.shape[0]


def _reshape_c(kc: KernelContext) -> str:
    indices, _, new = kc.inputs
    out_ix, out_shape = kc.outputs
    rank = _rank(kc, indices)
    rank_out = _reshape_rank(kc)
    dims = _dims(kc, 1, rank)
    ix = f"((const {indices.ctype} *){indices.data})"
    _check_rows(kc, ix, indices.dim(0), rank, dims, "input_indices")
    fail = kc.fail
    kc.checks.append("\n".join([
        "{",
        f"    const int64_t *ns = (const int64_t *){new.data};",
        "    int64_t dense = 1, known = 1;",
        "    int unknown = -1;",
        *[f"    dense *= {d};" for d in dims],
        f"    for (int j = 0; j < {rank_out}; j++) {{",
        "        if (ns[j] == -1) {",
        "            if (unknown >= 0) " + fail("only one output dimension may be -1, not both %d "
                                                "and %d", "unknown", "j"),
        "            unknown = j;",
        "        } else if (ns[j] < 0) " + fail("size %d must be non-negative, not %lld", "j",
                                                 "(long long)ns[j]"),
        "        else known *= ns[j];",
        "    }",
        "    if (unknown >= 0 ? (known == 0 || dense % known != 0) : known != dense) "
        + fail("input to reshape is a SparseTensor with %lld dense values, but the requested "
               "shape cannot hold them", "(long long)dense"),
        "}"]))
    return "\n".join([
        f"const int64_t *ns = (const int64_t *){new.data};",
        f"int64_t shape[{rank_out} + 1];",
        "int64_t dense = 1, known = 1;",
        "int unknown = -1;",
        *[f"dense *= {d};" for d in dims],
        f"for (int j = 0; j < {rank_out}; j++) {{",
        "    shape[j] = ns[j];",
        "    if (ns[j] == -1) unknown = j; else known *= ns[j];",
        "}",
        "if (unknown >= 0) shape[unknown] = dense / known;",
        f"int64_t *oi = (int64_t *){out_ix.data}, *os = (int64_t *){out_shape.data};",
        f"for (int j = 0; j < {rank_out}; j++) os[j] = shape[j];",
        f"for (int64_t r = 0; r < {indices.dim(0)}; r++) {{",
        f"    int64_t flat = {_offset(ix, rank, dims, list(range(rank)))};",
        f"    for (int j = {rank_out} - 1; j >= 0; j--) {{",
        f"        oi[r * {rank_out} + j] = shape[j] > 0 ? flat % shape[j] : 0;",
        "        flat = shape[j] > 0 ? flat / shape[j] : 0;",
        "    }",
        "}",
        "(void)oi; (void)os;"])


set_c_kernel("SparseReshape", _reshape_c,
             lambda kc: [[kc.inputs[0].dim(0), str(_reshape_rank(kc))], [str(_reshape_rank(kc))]])


# --- SparseAdd, SparseAddGrad --------------------------------------------------------------------
_CMP = "\n".join([
    "static int flowc_sparse_cmp(const int64_t *x, int64_t i, const int64_t *y, int64_t j, "
    "int rank) {",
    "    for (int d = 0; d < rank; d++) {",
    "        if (x[i * rank + d] != y[j * rank + d]) return x[i * rank + d] < y[j * rank + d] "
    "? -1 : 1;",
    "    }",
    "    return 0;",
    "}"])


def _owned(kc: KernelContext, ref: TensorRef, dims: List[str], count: str) -> List[str]:
    """C: allocate output ``ref`` (the kernel owns its outputs) with ``dims`` and ``count``
    elements."""
    return [f"memset(&{ref.var}, 0, sizeof {ref.var});",
            f"{ref.var}.rank = {len(dims)}; {ref.var}.dtype = {ref.dtype.code};",
            *[f"{ref.var}.dims[{k}] = {d};" for k, d in enumerate(dims)],
            f"{ref.var}.data = flowc_alloc((size_t)({count}) * sizeof({ref.ctype}) + 1);",
            f"if (!{ref.var}.data) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED")]


def _sparse_add_c(kc: KernelContext) -> str:
    a_ind, a_val, _, b_ind, b_val, _, thresh = kc.inputs
    out_ind, out_val, out_shape = kc.outputs
    rank = _rank(kc, a_ind)
    if _rank(kc, b_ind) != rank:
        raise kc.error(f"operands do not have the same ranks: {rank} and {b_ind.shape[1]}")
    a_dims, b_dims = _dims(kc, 2, rank), _dims(kc, 5, rank)
    for k in range(rank):
        kc.check_dims_equal(a_dims[k], b_dims[k], f"operands' shapes do not match at dim {k}")
    _check_values(kc, a_ind, a_val, "a_values")
    _check_values(kc, b_ind, b_val, "b_values")
    kc.check_scalar(6, "thresh")
    _check_rows(kc, f"((const int64_t *){a_ind.data})", a_ind.dim(0), rank, a_dims, "a_indices")
    _check_rows(kc, f"((const int64_t *){b_ind.data})", b_ind.dim(0), rank, b_dims, "b_indices")
    kc.module.add_global(_CMP)
    t, ct = out_val.dtype, out_val.ctype
    take = [f"    for (int d = 0; d < {rank}; d++) "
            f"oi[n * {rank} + d] = {{src}}[{{at}} * {rank} + d];",
            "    ov[n++] = {value};"]

    def copy(src: str, at: str, value: str) -> List[str]:
        return [line.format(src=src, at=at, value=value) for line in take]
    total = _add(t, ct, "av[i]", "bv[j]")
    return "\n".join([
        f"const int64_t *ai = (const int64_t *){a_ind.data}, *bi = (const int64_t *){b_ind.data};",
        f"const {ct} *av = {a_val.data}, *bv = {b_val.data};",
        f"const int64_t na = {a_ind.dim(0)}, nb = {b_ind.dim(0)};",
        f"const double thresh = (double){thresh.data}[0];",
        *_owned(kc, out_ind, ["na + nb", str(rank)], f"(na + nb) * {rank}"),
        *_owned(kc, out_val, ["na + nb"], "na + nb"),
        *_owned(kc, out_shape, [str(rank)], str(rank)),
        f"int64_t *oi = (int64_t *){out_ind.var}.data, *os = (int64_t *){out_shape.var}.data;",
        f"{ct} *ov = ({ct} *){out_val.var}.data;",
        *[f"os[{k}] = {d};" for k, d in enumerate(a_dims)],
        "int64_t i = 0, j = 0, n = 0;",
        "while (i < na && j < nb) {",
        f"    const int c = flowc_sparse_cmp(ai, i, bi, j, {rank});",
        "    if (c < 0) {",
        *copy("ai", "i", "av[i]"),
        "        i++;",
        "    } else if (c > 0) {",
        *copy("bi", "j", "bv[j]"),
        "        j++;",
        "    } else {",
        f"        const {ct} s = {total};",
        "        if ((double)(s < 0 ? -s : s) >= thresh) {",
        *copy("ai", "i", "s"),
        "        }",
        "        i++; j++;",
        "    }",
        "}",
        "for (; i < na; i++) {", *copy("ai", "i", "av[i]"), "}",
        "for (; j < nb; j++) {", *copy("bi", "j", "bv[j]"), "}",
        f"{out_ind.var}.dims[0] = n; {out_val.var}.dims[0] = n;",
        "(void)os;"])


set_c_kernel("SparseAdd", _sparse_add_c, c_owns_outputs=True)


def _sparse_add_grad_c(kc: KernelContext) -> str:
    grad, a_ind, b_ind, sum_ind = kc.inputs
    a_grad, b_grad = kc.outputs
    rank = _rank(kc, a_ind)
    for ref in (b_ind, sum_ind):
        if _rank(kc, ref) != rank:
            raise kc.error("a_indices, b_indices and sum_indices must have the same rank")
    kc.check_dims_equal(grad.dim(0), sum_ind.dim(0),
                        "backprop_val_grad must have one entry per sum index")
    kc.module.add_global(_CMP)
    ct = grad.ctype
    return "\n".join([
        f"const int64_t *ai = (const int64_t *){a_ind.data}, *bi = (const int64_t *){b_ind.data};",
        f"const int64_t *si = (const int64_t *){sum_ind.data};",
        f"const {ct} *g = {grad.data};",
        f"{ct} *ag = {a_grad.data}, *bg = {b_grad.data};",
        f"const int64_t na = {a_ind.dim(0)}, nb = {b_ind.dim(0)}, ns = {sum_ind.dim(0)};",
        "for (int64_t e = 0; e < na; e++) ag[e] = 0;",
        "for (int64_t e = 0; e < nb; e++) bg[e] = 0;",
        "int64_t i = 0, j = 0, k = 0;",
        "while ((i < na || j < nb) && k < ns) {",
        f"    const int c = i >= na ? 1 : (j >= nb ? -1 : flowc_sparse_cmp(ai, i, bi, j, {rank}));",
        f"    const int hit = c <= 0 ? flowc_sparse_cmp(ai, i, si, k, {rank}) == 0"
        f" : flowc_sparse_cmp(bi, j, si, k, {rank}) == 0;",
        "    if (hit) {",
        "        if (c <= 0) ag[i] = g[k];",
        "        if (c >= 0) bg[j] = g[k];",
        "        k++;",
        "    }",
        "    if (c <= 0) i++;",
        "    if (c >= 0) j++;",
        "}"])


set_c_kernel("SparseAddGrad", _sparse_add_grad_c,
             lambda kc: [[kc.inputs[1].dim(0)], [kc.inputs[2].dim(0)]])
