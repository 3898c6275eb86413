"""DynamicPartition and DynamicStitch: routing rows by a data-dependent index, as TensorFlow's
data_flow_ops do. They are what a sharded embedding lookup is built from
(``fl.nn.embedding_lookup``): partition the ids by shard, gather on each shard's device, stitch
the rows back in the original order.

- ``DynamicPartition(data, partitions)``: output k holds the rows ``data[i]`` whose
  ``partitions[i] == k``, in order (``partitions``' shape is a prefix of ``data``'s). A
  partition outside ``[0, num_partitions)`` is an error, found before anything is written.
- ``DynamicStitch(indices[N], data[N])``: ``merged[indices[m][i]] = data[m][i]``, later pieces
  winning where indices repeat; ``merged`` has ``max(index) + 1`` rows, rows no index names are
  zero. A negative index is an error.

Both have data-dependent output sizes: their C kernels count first, then allocate their outputs
(``c_owns_outputs``) and copy rows with ``memcpy``.
"""
from __future__ import annotations

from typing import List

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import TensorType, shape_str
from compiler.ir.op_registry import register_op

_MAX_PARTITIONS = 4096


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


# --- DynamicPartition ------------------------------------------------------------------------
def _partition_shape(ctx) -> List[TensorType]:
    data, parts = ctx.input_shape(0), ctx.input_shape(1)
    n = ctx.attr("num_partitions")
    if n > _MAX_PARTITIONS:
        raise ctx.error(f"num_partitions = {n} is more than {_MAX_PARTITIONS}")
    dtype = ctx.input_type(0).dtype
    if data is None or parts is None:
        return [TensorType(dtype, None)] * n
    if len(parts) > len(data):
        raise ctx.error(f"partitions {shape_str(parts)} must be a prefix of data's shape "
                        f"{shape_str(data)}")
    for k, (p, d) in enumerate(zip(parts, data)):
        if p is not None and d is not None and p != d:
            raise ctx.error(f"partitions {shape_str(parts)} must be a prefix of data's shape "
                            f"{shape_str(data)} (dim {k} differs)")
    return [TensorType(dtype, (None,) + tuple(data[len(parts):]))] * n


def _partition_ref(ctx, data: np.ndarray, parts: np.ndarray) -> List[np.ndarray]:
    n = ctx.attrs["num_partitions"]
    if data.shape[:parts.ndim] != parts.shape:
        raise ExecutionError(f"partitions {list(parts.shape)} must be a prefix of data's shape "
                             f"{list(data.shape)}", ctx.node)
    flat = parts.reshape(-1)
    bad = (flat < 0) | (flat >= n)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ExecutionError(f"partitions[{i}] = {int(flat[i])} is not in [0, {n})", ctx.node)
    rows = data.reshape((flat.size,) + data.shape[parts.ndim:])
    return [rows[flat == k] for k in range(n)]


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


register_op("DynamicPartition", inputs=["data: T", "partitions: i32"],
            outputs=["outputs: num_partitions * T"],
            attrs=["num_partitions: int >= 1", "T: {all}"],
            shape=_partition_shape, kernel=_partition_ref, c_kernel=_partition_c,
            c_owns_outputs=True, group="movement",
            doc="Rows of data routed to num_partitions outputs by partitions.")


# --- DynamicStitch -----------------------------------------------------------------------------
def _stitch_shape(ctx) -> List[TensorType]:
    n = ctx.attr("N")
    dtype = ctx.input_type(n).dtype
    idx0, data0 = ctx.input_shape(0), ctx.input_shape(n)
    for m in range(n):
        idx, dat = ctx.input_shape(m), ctx.input_shape(n + m)
        if idx is None or dat is None:
            continue
        if len(idx) > len(dat) or any(a is not None and b is not None and a != b
                                      for a, b in zip(idx, dat)):
            raise ctx.error(f"indices[{m}] {shape_str(idx)} must be a prefix of data[{m}]'s "
                            f"shape {shape_str(dat)}")
    if idx0 is None or data0 is None:
        return [TensorType(dtype, None)]
    rows = None
    values = [ctx.input_value(m) for m in range(n)]
    if all(v is not None for v in values):
        rows = max([int(np.max(v)) + 1 if np.size(v) else 0 for v in values] + [0])
    return [TensorType(dtype, (rows,) + tuple(data0[len(idx0):]))]


def _stitch_ref(ctx, *args) -> np.ndarray:
    n = ctx.attrs["N"]
    indices, data = args[:n], args[n:]
    inner = data[0].shape[indices[0].ndim:]
    rows = 0
    for m, (idx, dat) in enumerate(zip(indices, data)):
        if dat.shape != idx.shape + inner:
            raise ExecutionError(f"data[{m}] has shape {list(dat.shape)}; indices[{m}] "
                                 f"{list(idx.shape)} needs {list(idx.shape + inner)}", ctx.node)
        if idx.size and int(idx.min()) < 0:
            raise ExecutionError(f"indices[{m}] has a negative index {int(idx.min())}", ctx.node)
        if idx.size:
            rows = max(rows, int(idx.max()) + 1)
    out = np.zeros((rows,) + inner, data[0].dtype)
    for idx, dat in zip(indices, data):
        out[idx.reshape(-1)] = dat.reshape((-1,) + inner)
    return out


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


register_op("DynamicStitch", inputs=["indices: N * i32", "data: N * T"], outputs=["merged: T"],
            attrs=["N: int >= 1", "T: {all}"],
            shape=_stitch_shape, kernel=_stitch_ref, c_kernel=_stitch_c, c_owns_outputs=True,
            group="movement",
            doc="merged[indices[m][i]] = data[m][i]; max(index) + 1 rows, unnamed rows zero.")
