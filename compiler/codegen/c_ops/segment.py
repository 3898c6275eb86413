"""The C lowering of the segment reductions (``compiler/ops/segment.py``): one template
(``codegen_templates/c/segment_reduce.c.j2``) for the sorted, unsorted and sparse forms.

Every id and index is checked before the outputs are allocated (the sorted forms size their
output from the last id, so the ids are validated first): sorted ids must be >= 0 and not
decreasing, unsorted ids below num_segments, sparse indices inside data's rows. A failure names
the node, and nothing is written.
"""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import _check_alloc
from compiler.codegen.c_ops.math import unsigned_ctype
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.segment import SEGMENT_OPS, SPARSE_GRAD_OPS, empty_value

def _layout(kc: KernelContext):
    return SEGMENT_OPS[kc.node.op]


def _rows(kc: KernelContext) -> str:
    """How many ids (rows, or sparse entries) there are."""
    reduction, layout = _layout(kc)
    return kc.inputs[2 if layout.startswith("sparse") else 1].size


def _ids(kc: KernelContext):
    reduction, layout = _layout(kc)
    return kc.inputs[2 if layout.startswith("sparse") else 1]


def _num_segments(kc: KernelContext) -> str:
    reduction, layout = _layout(kc)
    i = {"unsorted": 2, "sparse_n": 3}.get(layout)
    ids = _ids(kc)
    if i is None:                   # sorted ids: the last one + 1 (validated by then)
        rows = _rows(kc)
        return f"({rows} > 0 ? (int64_t){ids.data}[{rows} - 1] + 1 : 0)"
    v = kc.input_value(i)
    if v is not None:
        return str(int(v))
    kc.check_scalar(i, "num_segments")
    return f"((int64_t){kc.inputs[i].data}[0])"


def _segment_dims(kc: KernelContext) -> List[List[str]]:
    reduction, layout = _layout(kc)
    data, ids = kc.inputs[0], _ids(kc)
    skip = ids.rank if layout == "unsorted" else 1
    return [[_num_segments(kc)] + data.dims[skip:]]


def _validation(kc: KernelContext, n: str) -> str:
    """A C block that fails on the first bad id or index, before anything is allocated."""
    reduction, layout = _layout(kc)
    data, ids = kc.inputs[0], _ids(kc)
    rows = _rows(kc)
    lines = [f"const {ids.ctype} *ids = {ids.data};", f"const int64_t nrows = {rows};"]
    if layout == "unsorted":
        lines.append(f"const int64_t nseg = {n};")
        body = [f"if ((int64_t)ids[r] >= nseg) " + kc.fail(
            "segment_ids[%lld] = %lld is out of range [0, %lld)", "(long long)r",
            "(long long)ids[r]", "(long long)nseg")]
    else:
        body = [
            "if ((int64_t)ids[r] < 0) " + kc.fail(
                "segment ids must be >= 0, got segment_ids[%lld] = %lld", "(long long)r",
                "(long long)ids[r]"),
            "if (r > 0 && ids[r] < ids[r - 1]) " + kc.fail(
                "segment ids are not increasing: segment_ids[%lld] = %lld < segment_ids[%lld] "
                "= %lld", "(long long)r", "(long long)ids[r]", "(long long)(r - 1)",
                "(long long)ids[r - 1]")]
        if layout == "sparse_n":
            lines.append(f"const int64_t nseg = {n};")
            body.append("if ((int64_t)ids[r] >= nseg) " + kc.fail(
                "segment ids must be < num_segments: segment_ids[%lld] = %lld is out of range "
                "[0, %lld)", "(long long)r", "(long long)ids[r]", "(long long)nseg"))
        if layout.startswith("sparse"):
            idx = kc.inputs[1]
            lines += [f"const {idx.ctype} *idx = {idx.data};",
                      f"const int64_t nsrc = {data.dim(0)};"]
            body.append("if ((int64_t)idx[r] < 0 || (int64_t)idx[r] >= nsrc) " + kc.fail(
                "indices[%lld] = %lld is out of range [0, %lld)", "(long long)r",
                "(long long)idx[r]", "(long long)nsrc"))
    return "\n".join(["{", *("    " + l for l in lines),
                      "    for (int64_t r = 0; r < nrows; r++) {",
                      *("        " + l for l in body), "    }", "}"])


def _segment_c(kc: KernelContext) -> str:
    reduction, layout = _layout(kc)
    data, ids = kc.inputs[0], _ids(kc)
    sparse = layout.startswith("sparse")
    if layout == "unsorted":
        for k in range(ids.rank):
            kc.check_dims_equal(ids.dim(k), data.dim(k), f"segment_ids dim {k} differs from data")
    elif sparse:
        kc.check_dims_equal(kc.inputs[1].dim(0), ids.dim(0),
                            "segment_ids and indices must have one length")
    else:
        kc.check_dims_equal(ids.dim(0), data.dim(0), "segment_ids length differs from data dim 0")
    n = _num_segments(kc)
    if not n.isdigit() and layout != "sorted":
        kc.check(f"{n} >= 0", "num_segments must be >= 0, got %lld", f"(long long){n}")
    check = _validation(kc, n)
    if check not in kc.checks:
        kc.checks.append(check)
    skip = ids.rank if layout == "unsorted" else 1
    _check_alloc(kc, [int(d) if d.isdigit() else d for d in [n] + data.dims[skip:]],
                 data.dtype.itemsize)
    floating = data.dtype.is_floating
    if floating:
        acc = "double"
    elif reduction in ("sum", "prod"):
        acc = unsigned_ctype(data.dtype)
    else:
        acc = data.ctype
    empty = kc.literal(empty_value(reduction, layout, data.dtype.np), data.dtype)
    return kc.render("segment_reduce.c.j2", reduction=reduction, sparse=sparse,
                     nrows=_rows(kc), inner=data.dim_product(skip), nseg=n, acc=acc,
                     floating=floating, empty=empty,
                     ids=ids, idx=kc.inputs[1] if sparse else None,
                     oom=kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED",
                                 cleanup="free(acc); free(cnt);"))


for _name in SEGMENT_OPS:
    set_c_kernel(_name, _segment_c, _segment_dims)


# --- SparseSegment{Sum,Mean,SqrtN}Grad ----------------------------------------------------
def _sparse_grad_dim0(kc: KernelContext) -> str:
    v = kc.input_value(3)
    if v is not None:
        return str(int(v))
    kc.check_scalar(3, "output_dim0")
    return f"((int64_t){kc.inputs[3].data}[0])"


def _sparse_grad_c(kc: KernelContext) -> str:
    grad, idx, ids = kc.inputs[0], kc.inputs[1], kc.inputs[2]
    kc.check_dims_equal(idx.dim(0), ids.dim(0), "segment_ids and indices must have one length")
    n = _sparse_grad_dim0(kc)
    if not n.isdigit():
        kc.check(f"{n} >= 0", "output_dim0 must be >= 0, got %lld", f"(long long){n}")
        _check_alloc(kc, [n] + [int(d) if d.isdigit() else d for d in grad.dims[1:]],
                     grad.dtype.itemsize)
    check = "\n".join([
        "{",
        f"    const {ids.ctype} *ids = {ids.data};",
        f"    const {idx.ctype} *idx = {idx.data};",
        f"    const int64_t nrows = {ids.size}, nseg = {grad.dim(0)}, n = {n};",
        "    for (int64_t r = 0; r < nrows; r++) {",
        "        if ((int64_t)ids[r] < 0 || (int64_t)ids[r] >= nseg) " + kc.fail(
            "segment_ids[%lld] = %lld is out of range [0, %lld)", "(long long)r",
            "(long long)ids[r]", "(long long)nseg"),
        "        if ((int64_t)idx[r] < 0 || (int64_t)idx[r] >= n) " + kc.fail(
            "indices[%lld] = %lld is out of range [0, %lld)", "(long long)r",
            "(long long)idx[r]", "(long long)n"),
        "    }",
        "}"])
    if check not in kc.checks:
        kc.checks.append(check)
    kind = SPARSE_GRAD_OPS[kc.node.op]
    scale = {"sum": "1.0", "mean": "1.0 / (double)cnt[s]",
             "sqrtn": "1.0 / sqrt((double)cnt[s])"}[kind]
    T = grad.ctype
    return "\n".join([
        f"const {T} *g = {grad.data};",
        f"const {ids.ctype} *ids = {ids.data};",
        f"const {idx.ctype} *idx = {idx.data};",
        f"{T} *o = {kc.out.data};",
        f"const int64_t nrows = {ids.size}, nseg = {grad.dim(0)}, n = {n}, "
        f"inner = {grad.dim_product(1)};",
        "double *acc = (double *)calloc((size_t)(n * inner) + 1, sizeof(double));",
        "int64_t *cnt = (int64_t *)calloc((size_t)nseg + 1, sizeof(int64_t));",
        "if (!acc || !cnt) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED",
                                       cleanup="free(acc); free(cnt);"),
        "for (int64_t r = 0; r < nrows; r++) cnt[ids[r]]++;",
        "for (int64_t r = 0; r < nrows; r++) {",
        "    const int64_t s = (int64_t)ids[r];",
        f"    const double scale = {scale};",
        "    double *a = acc + (int64_t)idx[r] * inner;",
        "    const " + T + " *gs = g + s * inner;",
        "    for (int64_t k = 0; k < inner; k++) a[k] += (double)gs[k] * scale;",
        "}",
        f"for (int64_t i = 0; i < n * inner; i++) o[i] = ({T})acc[i];",
        "free(acc);",
        "free(cnt);"])


for _name in SPARSE_GRAD_OPS:
    set_c_kernel(_name, _sparse_grad_c,
                 lambda kc: [[_sparse_grad_dim0(kc)] + kc.inputs[0].dims[1:]])
