"""GPU kernels of array ops: fills (ZerosLike, OnesLike, Fill), Shape/Size/Rank (computed on
the host from the dims, then copied), and data movement as index maps (Transpose, Slice,
Tile, Pad, StridedSlice, ConcatV2, Pack, Split, SplitV, Unpack, GatherV2, OneHot) plus
UnsortedSegmentSum (atomic adds, for f32 into a double buffer rounded once at the end, as the
C kernel sums; the gradient of a gather) and Range (its bounds read on the host, where they
are not constants).

Every output element is computed by one iteration of a grid-stride loop that recovers its
coordinates from the flat index. Shape-like inputs (a permutation, slice bounds, an axis)
must be compile-time constants for the GPU kernel (``supports``); otherwise the op stays on
a CPU, with a note in the placement report.
"""
from __future__ import annotations

from typing import Callable, List

from compiler.codegen.c_ops.array.common import (_add, _c, _constant_axis, _contiguous_strides,
                                                 _dim, _mul, _values)
from compiler.codegen.c_ops.array.concat_split import (_split_v_plan, check_even_split,
                                                       concat_checks, pack_checks)
from compiler.codegen.c_ops.array.fill_range import (one_hot_value_checks, range_checks,
                                                     range_operands)
from compiler.codegen.c_ops.array.slicing import _slice_plan, _strided_slice_plan, _used_step
from compiler.codegen.c_ops.array.tile_pad import _pad_plan
from compiler.codegen.c_ops.nn_grad import segment_sum_checks
from compiler.codegen.cuda_kernels import constant_inputs, register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.kernel_context import KernelContext, TensorRef, product
from compiler.ir.graph import Node
from compiler.ops.array.common import _normalize_axis
from runtime.dtypes import DType

# Atomic adds exist for these (UnsortedSegmentSum).
_ATOMIC = {DType.f32: "float", DType.f64: "double", DType.i32: "unsigned int",
           DType.i64: "unsigned long long"}


def _const(kc: KernelContext, i: int) -> List[int]:
    value = kc.input_value(i)
    if value is None:
        raise kc.error(f"input {i} must be a compile-time constant for the CUDA kernel")
    return [int(v) for v in value.reshape(-1).tolist()]


def _coords(launch: CudaLaunch, out: TensorRef) -> str:
    """Device code naming the output coordinates c0..c{R-1} of flat index i."""
    lines = ["int64_t rem = i;"]
    for d in range(out.rank - 1, -1, -1):
        e = launch.value(out.dim(d))
        lines.append(f"const int64_t c{d} = rem % {e};" + (f" rem /= {e};" if d else ""))
    lines.append("(void)rem;")
    return "\n    ".join(lines)


def index_map(kc: KernelContext, x: TensorRef, source: Callable[[CudaLaunch], str],
              valid="", fill: str = "0", hint: str = "") -> str:
    """Launch ``out[i] = x[source]`` (``source``: a device offset expression over c0..; where
    ``valid`` (a condition, or a function of the launch returning one) is false, ``fill``
    instead)."""
    out = kc.out
    launch = CudaLaunch(kc, hint or kc.node.op)
    o, px = launch.ptr(out, writable=True), launch.ptr(x)
    coords = _coords(launch, out)
    src = source(launch)
    cond = valid(launch) if callable(valid) else valid
    n = launch.value(out.size)
    value = f"({cond}) ? {px}[{src}] : ({out.ctype})({fill})" if cond else f"{px}[{src}]"
    body = (f"{kc.target.grid_stride_loop('i', n)} {{\n    {coords}\n"
            f"    {o}[i] = {value};\n}}")
    return launch.launch(body, out.size)


def _offset(launch: CudaLaunch, x: TensorRef, coords: List[str]) -> str:
    terms = [f"({c}) * {launch.value(x.stride(d))}" for d, c in enumerate(coords)]
    return " + ".join(terms) or "0"


# --- fills and shapes ------------------------------------------------------------------------
def _fill_value(kc: KernelContext, value: str) -> str:
    out = kc.out
    launch = CudaLaunch(kc, "fill")
    o = launch.ptr(out, writable=True)
    n = launch.value(out.size)
    return launch.launch(f"{kc.target.grid_stride_loop('i', n)} {o}[i] = {value};", out.size)


def _like(value: int):
    return lambda kc: _fill_value(kc, kc.literal(value, kc.out.dtype))


def _fill(kc: KernelContext) -> str:
    kc.check_scalar(1, "value")             # the C target's check, on the host
    out = kc.out
    launch = CudaLaunch(kc, "fill_from")
    o, v = launch.ptr(out, writable=True), launch.ptr(kc.inputs[1])
    n = launch.value(out.size)
    return launch.launch(f"{kc.target.grid_stride_loop('i', n)} {o}[i] = {v}[0];", out.size)


def _host_values(kc: KernelContext, values: List[str]) -> str:
    """Copy values computed on the host (from dims) into the output."""
    out = kc.out
    items = ", ".join(f"({out.ctype})({v})" for v in values) or "0"
    return (f"{{ const {out.ctype} host[] = {{{items}}};\n"
            f"  FLOWC_CUDA(cudaMemcpyAsync({out.var}.data, host, sizeof host, "
            "cudaMemcpyHostToDevice, flowc_stream)); }")


def _shape(kc: KernelContext) -> str:
    return _host_values(kc, kc.inputs[0].dims) if kc.inputs[0].rank else "/* rank 0: empty */"


def _size(kc: KernelContext) -> str:
    return _host_values(kc, [kc.inputs[0].size])


def _rank(kc: KernelContext) -> str:
    return _host_values(kc, [str(kc.inputs[0].rank)])


# --- movement ----------------------------------------------------------------------------------
def _transpose(kc: KernelContext) -> str:
    x = kc.inputs[0]
    perm = _const(kc, 1)
    src = [""] * x.rank
    for d, p in enumerate(perm):
        src[p] = f"c{d}"
    return index_map(kc, x, lambda launch: _offset(launch, x, src))


def _slice(kc: KernelContext) -> str:
    x = kc.inputs[0]
    _slice_plan(kc, checks=True)                 # the C target's bounds checks, on the host
    begin = _const(kc, 1)
    return index_map(kc, x, lambda launch: _offset(launch, x, [f"c{d} + {b}"
                                                               for d, b in enumerate(begin)]))


def _tile(kc: KernelContext) -> str:
    x = kc.inputs[0]
    return index_map(kc, x, lambda launch: _offset(
        launch, x, [f"c{d} % {launch.value(x.dim(d))}" for d in range(x.rank)]))


def _concat_parts(kc: KernelContext, parts: List[TensorRef], axis: int, stacked: bool) -> str:
    """Copy each part into its block of the output along ``axis``."""
    out = kc.out
    inner = out.dim_product(axis + 1)
    total = out.dim(axis)
    code, offset = [], "0"
    for x in parts:
        extent = "1" if stacked else x.dim(axis)
        launch = CudaLaunch(kc, "stack" if stacked else "concat")
        o, px = launch.ptr(out, writable=True), launch.ptr(x)
        v = launch.value
        e, inn, tot, off = v(extent), v(inner), v(total), v(offset)
        n = v(x.size)
        body = (f"{kc.target.grid_stride_loop('i', n)} {{\n"
                f"    const int64_t k = i % {inn}, a = (i / {inn}) % {e}, r = i / ({inn} * {e});\n"
                f"    {o}[(r * {tot} + {off} + a) * {inn} + k] = {px}[i];\n}}")
        code.append(launch.launch(body, x.size))
        offset = f"({offset} + {extent})" if offset != "0" else extent
    return "\n".join(code)


def _concat(kc: KernelContext) -> str:
    concat_checks(kc)
    parts = kc.inputs[:-1]
    (axis,) = _const(kc, len(kc.inputs) - 1)
    axis = axis + kc.out.rank if axis < 0 else axis
    return _concat_parts(kc, parts, axis, stacked=False)


def _pack(kc: KernelContext) -> str:
    pack_checks(kc)
    axis = kc.attr("axis")
    axis = axis + kc.out.rank if axis < 0 else axis
    return _concat_parts(kc, kc.inputs, axis, stacked=True)


def _axis_slices(kc: KernelContext, x: TensorRef, axis: int) -> str:
    """Copy consecutive slices of ``x`` along ``axis`` into the outputs, in order (each
    output's extent along the axis is its own dim there; a removed axis counts as 1)."""
    inner = x.dim_product(axis + 1)
    total = x.dim(axis)
    code, offset = [], "0"
    for out in kc.outputs:
        extent = out.dim(axis) if out.rank == x.rank else "1"
        launch = CudaLaunch(kc, "axis_slice")
        o, px = launch.ptr(out, writable=True), launch.ptr(x)
        v = launch.value
        e, inn, tot, off, n = v(extent), v(inner), v(total), v(offset), v(out.size)
        body = (f"{kc.target.grid_stride_loop('i', n)} {{\n"
                f"    const int64_t k = i % {inn}, a = (i / {inn}) % {e}, r = i / ({inn} * {e});\n"
                f"    {o}[i] = {px}[(r * {tot} + {off} + a) * {inn} + k];\n}}")
        code.append(launch.launch(body, out.size))
        offset = f"({offset} + {extent})" if offset != "0" else extent
    return "\n".join(code)


def _split(kc: KernelContext) -> str:
    x = kc.inputs[1]
    a = _constant_axis(kc, 0, x.rank)
    check_even_split(kc, x, a, kc.attr("num_split"))
    return _axis_slices(kc, x, a)


def _split_v(kc: KernelContext) -> str:
    a, _ = _split_v_plan(kc, checks=True)
    return _axis_slices(kc, kc.inputs[0], a)


def _unpack(kc: KernelContext) -> str:
    x = kc.inputs[0]
    num = kc.attr("num")
    a = _normalize_axis(kc.attr("axis"), x.rank)
    if x.shape[a] is None:
        kc.check(f"{x.dim(a)} == {num}", f"Dimension {a} has size %lld but num is {num}",
                 f"(long long){x.dim(a)}")
    return _axis_slices(kc, x, a)


def _pad(kc: KernelContext) -> str:
    x = kc.inputs[0]
    pairs = _pad_plan(kc, checks=True)
    src = [f"c{d} - {_c(before)}" for d, (before, _) in enumerate(pairs)]

    def inside(launch: CudaLaunch) -> str:
        return " && ".join(f"({s}) >= 0 && ({s}) < {launch.value(x.dim(d))}"
                           for d, s in enumerate(src)) or "1"
    return index_map(kc, x, lambda launch: _offset(launch, x, src), valid=inside)


def _strided_slice(kc: KernelContext) -> str:
    """numpy basic indexing from the C target's plan: out[c] = x[base + sum c_k * step_k]."""
    x, out = kc.inputs[0], kc.out
    plan, final = _strided_slice_plan(kc, checks=True)
    x_strides = _contiguous_strides(_values(x))
    base = _add([_mul([start, stride]) for (start, _, _), stride in zip(plan, x_strides)])
    terms = []
    for k, j in enumerate(final):
        if j is not None:
            step = _mul([_used_step(plan[j][2], _dim(out, k)), x_strides[j]])
            terms.append((k, _c(step)))

    def source(launch: CudaLaunch) -> str:
        parts = [launch.value(_c(base))] + [f"c{k} * {launch.value(step)}" for k, step in terms]
        return " + ".join(parts)
    return index_map(kc, x, source)


def _gather(kc: KernelContext) -> str:
    params, indices = kc.inputs[0], kc.inputs[1]
    (axis,) = _const(kc, 2)
    axis = axis + params.rank if axis < 0 else axis
    out = kc.out
    launch = CudaLaunch(kc, "gather")
    o, p, idx = launch.ptr(out, writable=True), launch.ptr(params), launch.ptr(indices)
    v = launch.value
    inner, rows, count = (v(params.dim_product(axis + 1)), v(params.dim(axis)),
                          v(indices.size))
    n = v(out.size)
    bad = launch.report(*_bad_index(indices, v, "j", "ix", rows))
    body = (f"{kc.target.grid_stride_loop('i', n)} {{\n"
            f"    const int64_t k = i % {inner}, j = (i / {inner}) % {count}, "
            f"r = i / ({inner} * {count});\n"
            f"    const int64_t ix = (int64_t){idx}[j];\n"
            f"    if (ix < 0 || ix >= {rows}) {{ {bad} {o}[i] = 0; continue; }}\n"
            f"    {o}[i] = {p}[(r * {rows} + ix) * {inner} + k];\n}}")
    return launch.launch(body, out.size)


def _bad_index(indices, value, flat: str, got: str, limit: str):
    """``report``'s arguments for an index out of range: the C kernel's message
    (``indices[i,j] = v is not in [0, n)``) with the place of the ``flat``-th index unflattened
    over the dims of ``indices`` (for indices of rank 4 at most; else without the values)."""
    if indices.rank > 4:
        return "an index is out of range of the gathered axis", "FLOWC_INVALID_ARGUMENT"
    dims = [value(indices.dim(k)) for k in range(indices.rank)]
    place = [flat if indices.rank == 1 else
             f"(({flat}) / ({' * '.join(dims[k + 1:]) or '1'})) % {dims[k]}"
             for k in range(indices.rank)]
    fmt = "indices[" + ",".join("%lld" for _ in place) + "] = %lld is not in [0, %lld)"
    return fmt, "FLOWC_INVALID_ARGUMENT", place + [got, limit]


def _gather_supports(node: Node) -> bool:
    return constant_inputs(2)(node) and node.attrs.get("batch_dims", 0) == 0


def _one_hot(kc: KernelContext) -> str:
    indices, on, off = kc.inputs[0], kc.inputs[2], kc.inputs[3]
    (depth,) = _const(kc, 1)
    one_hot_value_checks(kc)                # the C target's checks, on the host
    out = kc.out
    launch = CudaLaunch(kc, "one_hot")
    o, idx, pon, poff = (launch.ptr(out, writable=True), launch.ptr(indices), launch.ptr(on),
                         launch.ptr(off))
    n = launch.value(out.size)
    body = (f"{kc.target.grid_stride_loop('i', n)}\n"
            f"    {o}[i] = ((int64_t){idx}[i / {depth}] == i % {depth}) ? {pon}[0] : {poff}[0];")
    return launch.launch(body, out.size)


def _one_hot_supports(node: Node) -> bool:
    return constant_inputs(1)(node) and node.attrs.get("axis", -1) == -1


def _segment_sum(kc: KernelContext) -> str:
    data, ids = kc.inputs[0], kc.inputs[1]
    # the C kernel's checks, on the host: without them, ids with more entries than data has
    # rows were read past their end (inner = data.size / ids.size rounds down)
    segment_sum_checks(kc)
    out = kc.out
    launch = CudaLaunch(kc, "segment_sum")
    x, pid = launch.ptr(data), launch.ptr(ids)
    v = launch.value
    nrows = ids.size
    inner = v(f"(({nrows}) ? ({data.size}) / ({nrows}) : 1)")
    nseg = v(out.dim(0))
    n = v(data.size)
    bad = launch.report("segment_ids[%lld] = %lld is out of range [0, %lld)",
                        "FLOWC_INVALID_ARGUMENT", [f"i / {inner}", "s", nseg])
    if out.dtype is DType.f32:
        # summed in double and rounded once, as the C kernel sums (and the interpreter)
        acc = launch.raw_ptr("double", "flowc_seg_acc")
        body = (f"{kc.target.grid_stride_loop('i', n)} {{\n"
                f"    const int64_t s = (int64_t){pid}[i / {inner}];\n"
                f"    if (s >= {nseg}) {{ {bad} continue; }}\n"
                f"    if (s < 0) continue;\n"
                f"    atomicAdd(&{acc}[s * {inner} + i % {inner}], (double){x}[i]);\n}}")
        nbytes = f"(size_t)({out.size}) * sizeof(double)"
        round_once = CudaLaunch(kc, "segment_sum_round")
        ro, racc = round_once.ptr(out, writable=True), round_once.raw_ptr("double", "flowc_seg_acc",
                                                                          writable=False)
        rounded = round_once.launch(f"{kc.target.grid_stride_loop('i', round_once.value(out.size))}"
                                    f"\n    {ro}[i] = (float){racc}[i];", out.size)
        return "\n".join([
            "double *flowc_seg_acc = NULL;",
            f"FLOWC_CUDA(cudaMallocAsync((void **)&flowc_seg_acc, {nbytes} + 8, flowc_stream));",
            f"FLOWC_CUDA(cudaMemsetAsync(flowc_seg_acc, 0, {nbytes} + 8, flowc_stream));",
            launch.launch(body, data.size), rounded,
            "FLOWC_CUDA(cudaFreeAsync(flowc_seg_acc, flowc_stream));"])
    zero = _fill_value(kc, kc.literal(0, out.dtype))
    o = launch.ptr(out, writable=True)
    cast = _ATOMIC[out.dtype]
    body = (f"{kc.target.grid_stride_loop('i', n)} {{\n"
            f"    const int64_t s = (int64_t){pid}[i / {inner}];\n"
            f"    if (s >= {nseg}) {{ {bad} continue; }}\n"
            f"    if (s < 0) continue;\n"
            f"    atomicAdd(({cast} *)&{o}[s * {inner} + i % {inner}], ({cast}){x}[i]);\n}}")
    return zero + "\n" + launch.launch(body, data.size)


def _range(kc: KernelContext) -> str:
    """out[i] = start + i * delta (integers in wrapping 64-bit steps, as the C kernel), after
    the C target's checks of start, limit and delta on the host (their host copies)."""
    range_checks(kc)
    out = kc.out
    start, _, delta = range_operands(kc)
    launch = CudaLaunch(kc, "range")
    o = launch.ptr(out, writable=True)
    n = launch.value(out.size)
    t = out.ctype
    if out.dtype.is_integer:
        s, d = launch.value(f"(int64_t)({start})"), launch.value(f"(int64_t)({delta})")
        value = f"({t})(int64_t)((uint64_t){s} + (uint64_t)i * (uint64_t){d})"
    else:
        s, d = launch.value(start, t), launch.value(delta, t)
        value = f"({t}){s} + ({t})i * ({t}){d}"
    return launch.launch(f"{kc.target.grid_stride_loop('i', n)} {o}[i] = {value};", out.size)


def _segment_supports(node: Node) -> bool:
    return (constant_inputs(2)(node) and node.attrs.get("T") in _ATOMIC
            and len(node.inputs[1].shape or ()) == 1)


# Views: the output is input 0 with other dims (no kernel); a reshape's requested shape and
# an expand's axis are read on the host.
register_cuda_kernel("Reshape", None, host_inputs=(1,))
register_cuda_kernel("ExpandDims", None, host_inputs=(1,))
for _view in ("Identity", "Squeeze", "StopGradient", "Snapshot", "PlaceholderWithDefault"):
    register_cuda_kernel(_view, None)
register_cuda_kernel("ZerosLike", _like(0))
register_cuda_kernel("OnesLike", _like(1))
register_cuda_kernel("Fill", _fill, supports=constant_inputs(0))
register_cuda_kernel("Shape", _shape)
register_cuda_kernel("Size", _size)
register_cuda_kernel("Rank", _rank)
register_cuda_kernel("Transpose", _transpose, supports=constant_inputs(1))
register_cuda_kernel("Slice", _slice, supports=constant_inputs(1, 2))
register_cuda_kernel("Tile", _tile, supports=constant_inputs(1))
register_cuda_kernel("ConcatV2", _concat, supports=lambda n: constant_inputs(len(n.inputs) - 1)(n))
register_cuda_kernel("Pack", _pack)
register_cuda_kernel("GatherV2", _gather, supports=_gather_supports)
register_cuda_kernel("Pad", _pad, supports=constant_inputs(1))
register_cuda_kernel("Split", _split, supports=constant_inputs(0))
register_cuda_kernel("SplitV", _split_v, supports=constant_inputs(1, 2))
register_cuda_kernel("Unpack", _unpack)
register_cuda_kernel("StridedSlice", _strided_slice, supports=constant_inputs(1, 2, 3))
register_cuda_kernel("OneHot", _one_hot, supports=_one_hot_supports)
register_cuda_kernel("UnsortedSegmentSum", _segment_sum, supports=_segment_supports)
register_cuda_kernel("Range", _range, host_inputs=(0, 1, 2))
