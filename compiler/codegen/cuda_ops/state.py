"""GPU kernels of resource variables: the handle, reads, assignments, in-place updates,
row gathers and scatters (and ``_ResourceScatterSubScaled``, the fused sparse SGD step).

A GPU variable is resident on the device: the runtime's ``flowc_var`` struct stays in host
memory (dims, initialized flag, lock, name), its ``value.data`` is device memory. So the checks
on a variable's state run on the host, exactly as the C backend writes them (they are the C
backend's own), and only the data moves on the device. Kernels that change a variable start
with the step's error flag: once any kernel of the step found bad data, they do nothing, and
a scatter checks every index (one kernel) before it changes any row (a second one).
"""
from __future__ import annotations

from compiler.codegen.c_ops.state import (_check_initialized, _check_value_dims, _gather_c_dims,
                                          _handle_c, _read_c_dims, _var_expr, assign_shape_checks,
                                          gather_shape_checks, scatter_shape_checks)
from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.kernel_context import KernelContext
from compiler.ops.state import handle_source, variable_key
from runtime.dtypes import DType

# Dtypes CUDA has atomicAdd for (scatter-add and -sub with repeated indices add up).
# Integers add as unsigned (two's complement wraps; negation never overflows).
_ATOMIC = {DType.f32: "float", DType.f64: "double", DType.i32: "unsigned int",
           DType.i64: "unsigned long long"}


def _var_name(kc: KernelContext) -> str:
    src = handle_source(kc.node.inputs[0])
    return variable_key(src) if src is not None else kc.node.inputs[0].node.name


def _copy_kernel(kc: KernelContext, dst: str, src: str, n: str, guarded: bool) -> str:
    """Launch a device-to-device copy of ``n`` elements (a kernel, so it can be guarded)."""
    ctype = kc.inputs[1].ctype if guarded else kc.out.ctype
    launch = CudaLaunch(kc, "copy")
    if guarded:
        launch.guard_state()
    d = launch.raw_ptr(ctype, dst)
    s = launch.raw_ptr(ctype, src, writable=False)
    count = launch.value(n)
    body = f"{kc.target.grid_stride_loop('i', count)} {d}[i] = {s}[i];"
    return launch.launch(body, n)


def _read(kc: KernelContext) -> str:
    _check_initialized(kc)
    out = kc.out
    _check_value_dims(kc, out.rank, [str(d) for d in out.shape if d is not None]
                      if all(d is not None for d in out.shape) else [], "the read")
    v = _var_expr(kc)
    return _copy_kernel(kc, f"{out.var}.data", f"{v}->value.data", out.size, guarded=False)


def _assign(kc: KernelContext) -> str:
    value = kc.inputs[1]
    v = _var_expr(kc)
    assign_shape_checks(kc, v)
    nbytes = f"(size_t){value.size} * sizeof({value.ctype})"
    lines = [f"flowc_var *var = {v};",
             "flowc_var_lock(var);",
             f"if (var->value.data == NULL || (size_t)var->capacity != {nbytes}) {{",
             "    /* a new size: a new device buffer (same size: updated in place) */",
             "    void *p = NULL;",
             f"    if (cudaMallocAsync(&p, {nbytes} ? {nbytes} : 64, flowc_stream) != cudaSuccess) "
             f"{{ flowc_var_unlock(var); "
             + kc.fail("out of GPU memory assigning variable '%s'", "var->name",
                       code="FLOWC_RESOURCE_EXHAUSTED") + " }",
             "    if (var->value.data) cudaFreeAsync(var->value.data, flowc_stream);",
             "    var->value.data = p;",
             f"    var->capacity = (int64_t)({nbytes});",
             "}",
             f"var->value.rank = {value.rank};",
             f"var->value.dtype = {value.dtype.code};"]
    lines += [f"var->value.dims[{d}] = {e};" for d, e in enumerate(value.dims)]
    lines += ["var->initialized = 1;",
              "flowc_var_unlock(var);",
              _copy_kernel(kc, "var->value.data", f"{value.var}.data", value.size, guarded=True)]
    return "\n".join(lines)


def _update(op: str):
    def emit(kc: KernelContext) -> str:
        _check_initialized(kc)
        value = kc.inputs[1]
        _check_value_dims(kc, value.rank, value.dims, "the update")
        launch = CudaLaunch(kc, "update")
        launch.guard_state()
        p = launch.raw_ptr(value.ctype, f"{_var_expr(kc)}->value.data")
        x = launch.ptr(value)
        n = launch.value(value.size)
        if value.dtype.is_integer:
            u = "uint64_t" if value.dtype.itemsize == 8 else "uint32_t"
            stmt = f"{p}[i] = ({value.ctype})(({u}){p}[i] {op[0]} ({u}){x}[i]);"
        else:
            stmt = f"{p}[i] {op} {x}[i];"
        return launch.launch(f"{kc.target.grid_stride_loop('i', n)} {stmt}", value.size)
    return emit


def _bad_row(kc: KernelContext) -> str:
    """The C kernels' message for an index out of the variable's rows (a printf format of
    the index's place, its value and the rows)."""
    name = _var_name(kc).replace("%", "%%")
    return f"indices[%lld] = %lld is not in [0, %lld) (rows of variable '{name}')"


def _rows_and_inner(kc: KernelContext, launch: CudaLaunch, inner_dims):
    v = _var_expr(kc)
    _check_initialized(kc)
    kc.check(f"{v}->value.rank >= 1", "variable '%s' is a scalar", f"{v}->name")
    rows = launch.value(f"{v}->value.dims[0]")
    inner = "1"
    for d in inner_dims:
        inner = d if inner == "1" else f"({inner}) * ({d})"
    return rows, launch.value(inner)


def _gather(kc: KernelContext) -> str:
    ind, out = kc.inputs[1], kc.out
    v = _var_expr(kc)
    gather_shape_checks(kc, v)
    launch = CudaLaunch(kc, "gather_rows")
    o = launch.ptr(out, writable=True)
    p = launch.raw_ptr(out.ctype, f"{v}->value.data", writable=False)
    idx = launch.ptr(ind)
    rows, inner = _rows_and_inner(kc, launch, out.dims[ind.rank:])
    n = launch.value(out.size)
    bad = launch.report(_bad_row(kc), "FLOWC_INVALID_ARGUMENT", ["r", "ix", rows])
    body = (f"{kc.target.grid_stride_loop('i', n)} {{\n"
            f"    const int64_t r = i / {inner}, k = i % {inner};\n"
            f"    const int64_t ix = (int64_t){idx}[r];\n"
            f"    if (ix < 0 || ix >= {rows}) {{ {bad} {o}[i] = 0; continue; }}\n"
            f"    {o}[i] = {p}[ix * {inner} + k];\n}}")
    return launch.launch(body, out.size)


def _scatter(mode: str, scaled: bool = False):
    """``mode`` = update | add | sub; ``scaled``: ``_ResourceScatterSubScaled``, each update
    times the scalar ``scale`` (input 3) as it is subtracted (the sparse SGD step)."""
    def emit(kc: KernelContext) -> str:
        ind, upd = kc.inputs[1], kc.inputs[2]
        v = _var_expr(kc)
        scatter_shape_checks(kc, v)
        # every index first: an error leaves the variable unchanged
        check = CudaLaunch(kc, "scatter_check")
        idx = check.ptr(ind)
        rows, _ = _rows_and_inner(kc, check, [])
        count = check.value(ind.size)
        bad = check.report(_bad_row(kc), "FLOWC_INVALID_ARGUMENT", ["i", f"{idx}[i]", rows])
        first = check.launch(f"{kc.target.grid_stride_loop('i', count)}\n"
                             f"    if ((int64_t){idx}[i] < 0 || (int64_t){idx}[i] >= {rows}) {bad}",
                             ind.size)
        launch = CudaLaunch(kc, f"scatter_{mode}")
        launch.guard_state()
        p = launch.raw_ptr(upd.ctype, f"{v}->value.data")
        idx = launch.ptr(ind)
        u = launch.ptr(upd)
        if upd.rank == 0:                 # one value for every element of the rows
            total = f"(int64_t)({ind.size}) * flowc_inner_of({v})"
            inner = launch.value(f"flowc_inner_of({v})")
        else:
            total = upd.size
            inner = launch.value(_product(upd.dims[ind.rank:]))
        n = launch.value(total)
        src = f"{u}[0]" if upd.rank == 0 else f"{u}[i]"
        if scaled:
            src = f"({launch.ptr(kc.inputs[3])}[0] * {src})"
        target = f"{p}[(int64_t){idx}[i / {inner}] * {inner} + i % {inner}]"
        if mode == "update":
            stmt = f"{target} = {src};"
        else:
            cast = _ATOMIC[upd.dtype]
            value = f"({cast}){src}"
            if mode == "sub":
                value = f"-{value}" if upd.dtype.is_floating else f"({cast})0 - {value}"
            stmt = f"atomicAdd(({cast} *)&{target}, {value});"
        second = launch.launch(f"{kc.target.grid_stride_loop('i', n)} {stmt}", total)
        kc.module.add_global(_INNER_OF)
        return first + "\n" + second
    return emit


_INNER_OF = """/* Elements per row of a variable (the product of its dims after the first). */
static inline int64_t flowc_inner_of(const flowc_var *v) {
    int64_t n = 1;
    for (int32_t d = 1; d < v->value.rank; d++) n *= v->value.dims[d];
    return n;
}"""


def _product(dims) -> str:
    from compiler.codegen.kernel_context import product
    return product(list(dims))


def _atomic_dtype(node) -> bool:
    return node.attrs.get("dtype") in _ATOMIC


def _is_initialized(kc: KernelContext) -> str:
    return (f"{{ const bool flag = {_var_expr(kc)}->initialized != 0;\n"
            f"  FLOWC_CUDA(cudaMemcpyAsync({kc.out.var}.data, &flag, sizeof flag, "
            "cudaMemcpyHostToDevice, flowc_stream)); }")


register_cuda_kernel("VarHandleOp", _handle_c)
register_cuda_kernel("ReadVariableOp", _read, output_dims=_read_c_dims)
register_cuda_kernel("AssignVariableOp", _assign)
register_cuda_kernel("AssignAddVariableOp", _update("+="))
register_cuda_kernel("AssignSubVariableOp", _update("-="))
register_cuda_kernel("ResourceGather", _gather, output_dims=_gather_c_dims)
register_cuda_kernel("ResourceScatterUpdate", _scatter("update"))
register_cuda_kernel("ResourceScatterAdd", _scatter("add"), supports=_atomic_dtype)
register_cuda_kernel("ResourceScatterSub", _scatter("sub"), supports=_atomic_dtype)
# the fused form the fuse-updates pass makes of GradientDescent's sparse step
register_cuda_kernel("_ResourceScatterSubScaled", _scatter("sub", scaled=True),
                     supports=_atomic_dtype)
register_cuda_kernel("VarIsInitializedOp", _is_initialized)
