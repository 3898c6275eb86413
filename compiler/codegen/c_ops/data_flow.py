"""The C lowering of DynamicPartition and DynamicStitch (``compiler/ops/data_flow.py``).

Both have data-dependent output sizes: their C kernels count first, then allocate their outputs
(``c_owns_outputs``) and copy rows with ``memcpy``. ``partition_counts_c`` and
``stitch_rows_c`` (the counting, over the index values) are shared with the CUDA kernels
(``compiler/codegen/cuda_ops/data_flow.py``).
"""
from __future__ import annotations

from typing import List

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


# --- C shared by the CPU and GPU kernels (host code over the index values) ---------------------
def partition_counts_c(parts: str, nrows: str, n: int, fail) -> List[str]:
    """C counting the rows of each partition into ``count[n]`` (declared, zeroed, by the
    caller) from the int32 array ``parts``; ``fail(fmt, *args)`` for one outside [0, n)."""
    return [f"for (int64_t i = 0; i < {nrows}; i++) {{",
            f"    if ({parts}[i] < 0 || {parts}[i] >= {n}) "
            + fail(f"partitions[%lld] = %d is not in [0, {n})", "(long long)i", f"(int){parts}[i]"),
            f"    count[{parts}[i]]++;",
            "}"]


def stitch_rows_c(m: int, indices: str, size: str, fail) -> List[str]:
    """C raising ``rows`` (declared by the caller) to one past the largest of the ``size``
    int32 ``indices`` of piece ``m``; ``fail(fmt, *args)`` for a negative one."""
    return [f"for (int64_t i = 0; i < {size}; i++) {{",
            f"    const int64_t r = (int64_t){indices}[i];",
            "    if (r < 0) " + fail(f"indices[{m}][%lld] = %lld is negative", "(long long)i",
                                     "(long long)r"),
            "    if (r + 1 > rows) rows = r + 1;",
            "}"]


def _partition_c(kc: KernelContext) -> str:
    data, parts = kc.inputs
    n = kc.attr("num_partitions")
    for k in range(parts.rank):
        kc.check_dims_equal(parts.dim(k), data.dim(k), f"partitions dim {k} differs from data")
    inner = data.dim_product(parts.rank)
    lines = [f"const int64_t nrows = {parts.size}, inner = {inner};",
             f"const int32_t *{kc.target.restrict} p = {parts.data};",
             f"const char *{kc.target.restrict} src = (const char *){data.var}.data;",
             f"const size_t row_bytes = (size_t)inner * sizeof({data.ctype});",
             f"int64_t count[{n}] = {{0}}, pos[{n}] = {{0}};"]
    lines += partition_counts_c("p", "nrows", n, kc.fail)
    for k, o in enumerate(kc.outputs):
        lines.append(f"memset(&{o.var}, 0, sizeof {o.var});")
        lines.append(f"{o.var}.rank = {o.rank}; {o.var}.dtype = {o.dtype.code}; "
                     f"{o.var}.dims[0] = count[{k}];")
        for d in range(1, o.rank):
            lines.append(f"{o.var}.dims[{d}] = {data.dim(parts.rank + d - 1)};")
        lines.append(f"{o.var}.data = flowc_alloc(count[{k}] * row_bytes + 1);")
        lines.append(f"if (!{o.var}.data) "
                     + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"))
    dests = ", ".join(f"(char *){o.var}.data" for o in kc.outputs)
    lines += [f"char *dst[{n}] = {{{dests}}};",
              "for (int64_t i = 0; i < nrows; i++) {",
              "    const int32_t q = p[i];",
              "    if (row_bytes) memcpy(dst[q] + pos[q] * row_bytes, src + i * row_bytes, row_bytes);",
              "    pos[q]++;",
              "}"]
    return "\n".join(lines)


def _stitch_c(kc: KernelContext) -> str:
    n = kc.attr("N")
    indices, data = kc.inputs[:n], kc.inputs[n:]
    out = kc.out
    irank = indices[0].rank
    inner = data[0].dim_product(irank)
    lines = [f"const int64_t inner = {inner};",
             f"const size_t row_bytes = (size_t)inner * sizeof({out.ctype});",
             "int64_t rows = 0;"]
    for m, (idx, dat) in enumerate(zip(indices, data)):
        for k in range(idx.rank):
            kc.check_dims_equal(idx.dim(k), dat.dim(k), f"indices[{m}] dim {k} differs from data[{m}]")
        lines.append(f"if ({dat.dim_product(idx.rank)} != inner) "
                     + kc.fail(f"data[{m}] rows have %lld elements, data[0] rows %lld",
                               f"(long long){dat.dim_product(idx.rank)}", "(long long)inner"))
        lines += stitch_rows_c(m, idx.data, idx.size, kc.fail)
    lines.append(f"memset(&{out.var}, 0, sizeof {out.var});")
    lines.append(f"{out.var}.rank = {out.rank}; {out.var}.dtype = {out.dtype.code}; "
                 f"{out.var}.dims[0] = rows;")
    for d in range(1, out.rank):
        lines.append(f"{out.var}.dims[{d}] = {data[0].dim(irank + d - 1)};")
    lines.append(f"{out.var}.data = flowc_alloc(rows * row_bytes + 1);")
    lines.append(f"if (!{out.var}.data) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"))
    lines.append(f"if (rows * row_bytes) memset({out.var}.data, 0, rows * row_bytes);")
    for m, (idx, dat) in enumerate(zip(indices, data)):
        lines += [f"for (int64_t i = 0; i < {idx.size}; i++) {{",
                  f"    const int64_t r = (int64_t){idx.data}[i];",
                  f"    if (row_bytes) memcpy((char *){out.var}.data + r * row_bytes, "
                  f"(const char *){dat.var}.data + i * row_bytes, row_bytes);",
                  "}"]
    return "\n".join(lines)


set_c_kernel("DynamicPartition", _partition_c, c_owns_outputs=True)

set_c_kernel("DynamicStitch", _stitch_c, c_owns_outputs=True)
