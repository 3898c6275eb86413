"""GPU kernels of DynamicPartition and DynamicStitch (``compiler/ops/data_flow.py``).

Their output sizes depend on the values of their index inputs, so the host needs those values
before it can allocate: the index tensors are copied to the host (one stream sync, as
TensorFlow's GPU kernels copy their partition counts back), checked there with the C kernels'
messages, and turned into a row map that goes back to the device. The rows then move in
parallel, one launch per output (DynamicPartition) or per data input (DynamicStitch), each
thread copying one element. Where indices repeat, DynamicStitch's map keeps only the last
writer of each row, so the result is the C kernel's, with no racing writes.

These kernels allocate their own outputs (``owns_outputs``); every host buffer they make is
freed on every path, failures included.
"""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.data_flow import partition_counts_c, stitch_rows_c
from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.kernel_context import KernelContext, TensorRef


class _HostBuffers:
    """Host buffers a kernel's host code makes: each failure frees them all first."""

    def __init__(self, kc: KernelContext, names: List[str]):
        self.kc = kc
        self.names = names

    def declare(self) -> List[str]:
        return [f"void *{n} = NULL;" for n in self.names]

    def free(self) -> str:
        return " ".join(f"free({n}); {n} = NULL;" for n in self.names)

    def fail(self, fmt: str, *args: str, code: str = "FLOWC_INVALID_ARGUMENT") -> str:
        return self.kc.fail(fmt, *args, code=code, cleanup=self.free())

    def oom(self, what: str) -> str:
        return self.fail(f"out of memory {what}", code="FLOWC_RESOURCE_EXHAUSTED")


def _to_host(host: _HostBuffers, buf: str, ref: TensorRef) -> List[str]:
    """Copy the int32 device tensor ``ref`` into the host buffer ``buf`` (no sync)."""
    nbytes = f"(size_t)({ref.size}) * sizeof(int32_t)"
    return [f"{buf} = flowc_alloc({nbytes} + 4);",
            f"if (!{buf}) " + host.oom("copying indices to the host"),
            f"if ({ref.size} > 0 && cudaMemcpyAsync({buf}, {ref.var}.data, {nbytes}, "
            "cudaMemcpyDeviceToHost, flowc_stream) != cudaSuccess) "
            + host.fail("copying indices to the host failed")]


def _sync(host: _HostBuffers) -> str:
    return ("if (cudaStreamSynchronize(flowc_stream) != cudaSuccess) "
            + host.fail("the GPU failed before the indices reached the host"))


def _upload(host: _HostBuffers, device: str, buf: str, nbytes: str) -> List[str]:
    """The host buffer ``buf`` copied to a new device buffer ``device`` (freed by the caller,
    stream-ordered, after the launches that read it)."""
    return [f"void *{device} = NULL;",
            f"if (cudaMallocAsync(&{device}, ({nbytes}) + 8, flowc_stream) != cudaSuccess) "
            + host.oom("for the row map"),
            f"if (({nbytes}) > 0 && cudaMemcpyAsync({device}, {buf}, {nbytes}, "
            "cudaMemcpyHostToDevice, flowc_stream) != cudaSuccess) "
            f"{{ cudaFreeAsync({device}, flowc_stream); "
            + host.fail("copying the row map to the GPU failed") + " }"]


def _allocate(host: _HostBuffers, out: TensorRef, rows: str, inner: str, row_dims) -> List[str]:
    lines = [f"{out.var}.rank = {out.rank}; {out.var}.dtype = {out.dtype.code}; "
             f"{out.var}.dims[0] = {rows};"]
    lines += [f"{out.var}.dims[{d}] = {e};" for d, e in enumerate(row_dims, start=1)]
    nbytes = f"(size_t)({rows}) * (size_t)({inner}) * sizeof({out.ctype})"
    lines.append(f"if (cudaMallocAsync(&{out.var}.data, ({nbytes}) ? ({nbytes}) : 64, "
                 "flowc_stream) != cudaSuccess) "
                 + host.fail("out of GPU memory for the output", code="FLOWC_RESOURCE_EXHAUSTED"))
    return lines


def _move_rows(kc: KernelContext, out: str, out_ctype: str, src: str, src_ctype: str,
               map_ptr: str, first: str, count: str, inner: str, hint: str) -> str:
    """Launch: for each of ``count`` map entries from ``first`` (pairs of int64: destination
    row, source row), copy one row of ``inner`` elements from ``src`` to ``out``."""
    launch = CudaLaunch(kc, hint)
    o = launch.raw_ptr(out_ctype, out)
    x = launch.raw_ptr(src_ctype, src, writable=False)
    m = launch.raw_ptr("int64_t", map_ptr, writable=False)
    v = launch.value
    f, k, n = v(first), v(inner), v(f"({count}) * ({inner})")
    body = (f"{kc.target.grid_stride_loop('i', n)} {{\n"
            f"    const int64_t j = {f} + i / {k}, c = i % {k};\n"
            f"    {o}[{m}[2 * j] * {k} + c] = {x}[{m}[2 * j + 1] * {k} + c];\n}}")
    return launch.launch(body, f"({count}) * ({inner})")


def _partition(kc: KernelContext) -> str:
    data, parts = kc.inputs
    n = kc.attr("num_partitions")
    for k in range(parts.rank):
        kc.check_dims_equal(parts.dim(k), data.dim(k), f"partitions dim {k} differs from data")
    host = _HostBuffers(kc, ["hp", "hmap"])
    inner = data.dim_product(parts.rank)
    row_dims = [data.dim(d) for d in range(parts.rank, data.rank)]
    lines = host.declare() + [
        f"const int64_t nrows = {parts.size}, inner = {inner};",
        f"int64_t count[{n}] = {{0}}, start[{n}] = {{0}}, pos[{n}];"]
    lines += _to_host(host, "hp", parts) + [_sync(host)]
    lines += ["const int32_t *p = (const int32_t *)hp;"]
    lines += partition_counts_c("p", "nrows", n, host.fail)
    lines += [f"for (int k = 1; k < {n}; k++) start[k] = start[k - 1] + count[k - 1];",
              f"for (int k = 0; k < {n}; k++) pos[k] = start[k];",
              # the map, grouped by partition: (row within the output, row of data)
              "hmap = flowc_alloc((size_t)nrows * 2 * sizeof(int64_t) + 8);",
              "if (!hmap) " + host.oom("for the row map"),
              "for (int64_t i = 0; i < nrows; i++) {",
              "    const int64_t j = pos[p[i]]++;",
              "    ((int64_t *)hmap)[2 * j] = j - start[p[i]];",
              "    ((int64_t *)hmap)[2 * j + 1] = i;",
              "}"]
    for k, o in enumerate(kc.outputs):
        lines += _allocate(host, o, f"count[{k}]", "inner", row_dims)
    lines += _upload(host, "dmap", "hmap", "(size_t)nrows * 2 * sizeof(int64_t)")
    lines.append(host.free())
    for k, o in enumerate(kc.outputs):
        lines.append(_move_rows(kc, f"{o.var}.data", o.ctype, f"{data.var}.data", data.ctype,
                                "dmap", f"start[{k}]", f"count[{k}]", "inner", "partition"))
    lines.append("cudaFreeAsync(dmap, flowc_stream);")
    return "\n".join(lines)


def _stitch(kc: KernelContext) -> str:
    n = kc.attr("N")
    indices, data = kc.inputs[:n], kc.inputs[n:]
    out = kc.out
    irank = indices[0].rank
    inner = data[0].dim_product(irank)
    row_dims = [data[0].dim(d) for d in range(irank, data[0].rank)]
    host = _HostBuffers(kc, [f"hi{m}" for m in range(n)] + ["hwin", "hmap"])
    lines = host.declare() + [f"const int64_t inner = {inner};", "int64_t rows = 0;",
                              f"int64_t base[{n + 1}], count[{n}] = {{0}}, start[{n}];",
                              "base[0] = 0;"]
    for m, (idx, dat) in enumerate(zip(indices, data)):
        for k in range(idx.rank):
            kc.check_dims_equal(idx.dim(k), dat.dim(k),
                                f"indices[{m}] dim {k} differs from data[{m}]")
        kc.check(f"{dat.dim_product(idx.rank)} == {inner}",
                 f"data[{m}] rows have %lld elements, data[0] rows %lld",
                 f"(long long){dat.dim_product(idx.rank)}", f"(long long)({inner})")
        lines += _to_host(host, f"hi{m}", idx)
        lines.append(f"base[{m + 1}] = base[{m}] + {idx.size};")
    lines.append(_sync(host))
    for m, idx in enumerate(indices):
        lines += stitch_rows_c(m, f"((const int32_t *)hi{m})", idx.size, host.fail)
    # the last writer of each row (a position in the concatenated indices; -1: none)
    lines += ["hwin = flowc_alloc((size_t)rows * sizeof(int64_t) + 8);",
              "if (!hwin) " + host.oom("for the row map"),
              "int64_t *win = (int64_t *)hwin;",
              "for (int64_t r = 0; r < rows; r++) win[r] = -1;"]
    for m, idx in enumerate(indices):
        lines.append(f"for (int64_t i = 0; i < {idx.size}; i++) "
                     f"win[((const int32_t *)hi{m})[i]] = base[{m}] + i;")
    # the map, grouped by data input: (row of merged, row of data[m]), winners only
    lines += ["int64_t named = 0;",
              "for (int64_t r = 0; r < rows; r++) {",
              "    if (win[r] < 0) continue;",
              "    named++;",
              f"    for (int m = 0; m < {n}; m++) if (win[r] < base[m + 1]) {{ count[m]++; break; }}",
              "}",
              "start[0] = 0;",
              f"for (int m = 1; m < {n}; m++) start[m] = start[m - 1] + count[m - 1];",
              "hmap = flowc_alloc((size_t)named * 2 * sizeof(int64_t) + 8);",
              "if (!hmap) " + host.oom("for the row map"),
              "{",
              f"    int64_t pos[{n}];",
              f"    for (int m = 0; m < {n}; m++) pos[m] = start[m];",
              "    for (int64_t r = 0; r < rows; r++) {",
              "        if (win[r] < 0) continue;",
              f"        int m = 0; while (win[r] >= base[m + 1]) m++;",
              "        const int64_t j = pos[m]++;",
              "        ((int64_t *)hmap)[2 * j] = r;",
              "        ((int64_t *)hmap)[2 * j + 1] = win[r] - base[m];",
              "    }",
              "}"]
    lines += _allocate(host, out, "rows", "inner", row_dims)
    nbytes = f"(size_t)rows * (size_t)inner * sizeof({out.ctype})"
    lines.append(f"if (({nbytes}) > 0 && cudaMemsetAsync({out.var}.data, 0, {nbytes}, "
                 "flowc_stream) != cudaSuccess) " + host.fail("clearing the output failed"))
    lines += _upload(host, "dmap", "hmap", "(size_t)named * 2 * sizeof(int64_t)")
    lines.append(host.free())
    for m, dat in enumerate(data):
        lines.append(_move_rows(kc, f"{out.var}.data", out.ctype, f"{dat.var}.data", dat.ctype,
                                "dmap", f"start[{m}]", f"count[{m}]", "inner", "stitch"))
    lines.append("cudaFreeAsync(dmap, flowc_stream);")
    return "\n".join(lines)


register_cuda_kernel("DynamicPartition", _partition, owns_outputs=True)
register_cuda_kernel("DynamicStitch", _stitch, owns_outputs=True)
