"""The C lowering of the TensorArray ops (``compiler/ops/tensor_array.py``): ``TensorArrayV3``,
``TensorArrayWriteV3``, ``TensorArrayReadV3``, ``TensorArrayGatherV3``,
``TensorArrayScatterV3``, ``TensorArrayGradV3``, ``TensorArraySizeV3`` and
``TensorArrayCloseV3``.

The C array (``codegen_templates/c/tensor_array.c.j2``) owns a copy of each element written;
``TensorArrayV3`` owns the array it allocates (its handle's release,
``flowc_tensor_array_destroy``, frees the elements and its gradient arrays) and the flow
scalar (freed as a buffer); ``TensorArrayGradV3`` owns a reference to the gradient array
(released by ``flowc_ta_unref``), so it outlives the forward array's last use if need be.
Every failure TensorFlow reports (an index out of range, an element written twice or read
after it was cleared, elements of different shapes in one gather) is an error naming the node,
checked before the output is allocated.
"""
from __future__ import annotations

from compiler.codegen.kernel_context import KernelContext, TensorRef, c_string
from compiler.ir.op_registry import set_c_kernel


def _helpers(kc: KernelContext) -> None:
    kc.module.add_global(kc.render("tensor_array.c.j2"))


def _a(kc: KernelContext) -> str:
    return f"((flowc_tensor_array *){kc.inputs[0].var}.data)"


def _index(kc: KernelContext, i: int) -> str:
    return f"((int64_t){kc.inputs[i].data}[0])"


def _shape_arrays(shape) -> tuple:
    """(rank, C initializer of the dims) of an element shape attr; -1 for unknown."""
    if shape is None:
        return -1, "{0}"
    return len(shape), "{" + (", ".join("-1" if d is None else str(d) for d in shape) or "0") + "}"


def _array_c(kc: KernelContext) -> str:
    _helpers(kc)
    kc.check_scalar(0, "size")
    handle, flow = kc.outputs
    dtype = kc.attr("dtype")
    rank, dims = _shape_arrays(kc.attrs.get("element_shape"))
    flags = ", ".join(str(int(bool(kc.attrs.get(a, d)))) for a, d in (
        ("dynamic_size", False), ("clear_after_read", True), ("identical_element_shapes", False)))
    return "\n".join([
        f"int64_t size = {_index(kc, 0)};",
        "if (size < 0) " + kc.fail("Size should be >= 0, got %lld", "(long long)size"),
        f"static const int64_t shape[] = {dims};",
        f"flowc_tensor_array *a = flowc_ta_new(size, {dtype.code}, "
        f"(int64_t)sizeof({kc.target.c_type(dtype)}), {flags}, {rank}, shape);",
        "if (!a) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
        f"{handle.var}.rank = 0; {handle.var}.dtype = {handle.dtype.code}; {handle.var}.data = a;",
        f"{flow.var}.rank = 0; {flow.var}.dtype = {flow.dtype.code};",
        f"{flow.var}.data = flowc_alloc(sizeof(float));",
        f"if (!{flow.var}.data) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
        f"((float *){flow.var}.data)[0] = 0.0f;"])


def _write_failures(kc: KernelContext, index: str, rank: str, dims: str, src: str,
                    value: TensorRef) -> list:
    """The C statements that turn ``flowc_ta_write``'s ``rc`` into errors, after adding the
    value (at ``src``, of ``rank`` and ``dims``) into the element of a gradient array."""
    a = _a(kc)
    ctype = value.ctype
    return [
        "if (rc == 6) {",
        f"    flowc_tensor *e = flowc_ta_element({a}, {index}, {rank}, {dims});",
        "    if (!e) { char sv[160], se[160]; " + kc.fail(
            "Could not aggregate to TensorArray index %lld because the existing shape is %s but "
            "the new input shape is %s", f"(long long)({index})",
            f"flowc_ta_shape_str(se, {a}->elems[{index}].rank, {a}->elems[{index}].dims)",
            f"flowc_ta_shape_str(sv, {rank}, {dims})") + " }",
        "    int64_t n = 1;",
        "    for (int32_t d = 0; d < e->rank; d++) n *= e->dims[d];",
        f"    {ctype} *dst = ({ctype} *)e->data;",
        f"    const {ctype} *add = (const {ctype} *)({src});",
        "    for (int64_t i = 0; i < n; i++) dst[i] += add[i];",
        "    rc = 0;",
        "}",
        "if (rc == 1) " + kc.fail(
            "Tried to write to index %lld but array is not resizeable and size is: %lld",
            f"(long long)({index})", f"(long long){a}->size"),
        "if (rc == 2) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
        "if (rc == 3) " + kc.fail(
            "Could not write to TensorArray index %lld because it has already been written to.",
            f"(long long)({index})"),
        "if (rc == 4) { char sv[160], se[160]; " + kc.fail(
            "Could not write to TensorArray index %lld because the value shape is %s which is "
            "incompatible with the TensorArray's inferred element shape: %s",
            f"(long long)({index})", f"flowc_ta_shape_str(sv, {rank}, {dims})",
            f"flowc_ta_shape_str(se, {a}->shape_rank, {a}->shape_dims)") + " }",
        "if (rc == 5) " + kc.fail("the TensorArray has already been closed.")]


def _dtype_check(kc: KernelContext, value: TensorRef) -> str:
    return (f"if ({_a(kc)}->dtype != {value.dtype.code}) "
            + kc.fail(f"the TensorArray's dtype is not the {value.dtype.ir_name} the op writes"))


def _write_c(kc: KernelContext) -> str:
    _helpers(kc)
    kc.check_scalar(1, "index")
    value = kc.inputs[2]
    return "\n".join([
        _dtype_check(kc, value),
        f"int rc = flowc_ta_write({_a(kc)}, {_index(kc, 1)}, {value.var}.data, {value.rank}, "
        f"{value.var}.dims);",
        *_write_failures(kc, _index(kc, 1), str(value.rank), f"{value.var}.dims",
                         f"{value.var}.data", value)])


def _read_failures(kc: KernelContext, index: str, rank: int) -> list:
    """The C statements that turn ``flowc_ta_readable``'s ``rc`` into errors."""
    a = _a(kc)
    return [
        "if (rc == 1) " + kc.fail("Tried to read from index %lld but array size is: %lld",
                                  f"(long long)({index})", f"(long long){a}->size"),
        "if (rc == 3) " + kc.fail(
            "Could not read index %lld twice because it was cleared after a previous read "
            "(perhaps try setting clear_after_read = false?)", f"(long long)({index})"),
        "if (rc == 4) { char se[160]; " + kc.fail(
            "Could not read from TensorArray index %lld: it has not been written to, and the "
            "element shape %s is not fully defined (with a fully defined element_shape, a read "
            "gives zeros)", f"(long long)({index})",
            f"flowc_ta_shape_str(se, {a}->shape_rank, {a}->shape_dims)") + " }",
        "if (rc == 5) " + kc.fail("the TensorArray has already been closed."),
        "if (rc == 6) " + kc.fail(f"element %lld of the TensorArray does not have rank {rank}",
                                  f"(long long)({index})")]


def _read_c_dims(kc: KernelContext):
    return [[f"flowc_ta_dim({_a(kc)}, {_index(kc, 1)}, {d})" for d in range(kc.out.rank)]]


def _read_c(kc: KernelContext) -> str:
    _helpers(kc)
    kc.check_scalar(1, "index")
    out = kc.out
    kc.checks.append("\n".join([
        "{", f"int rc = flowc_ta_readable({_a(kc)}, {_index(kc, 1)}, {out.rank});",
        *_read_failures(kc, _index(kc, 1), out.rank), "}"]))
    return f"flowc_ta_read_into({_a(kc)}, {_index(kc, 1)}, {out.var}.data, {out.size});"


def _gather_c_dims(kc: KernelContext):
    out, indices = kc.out, kc.inputs[1]
    a = _a(kc)
    idx = f"((const int32_t *){indices.var}.data)"
    dims = [indices.dim(0)]
    for d in range(1, out.rank):
        dims.append(f"({indices.dim(0)} > 0 ? flowc_ta_dim({a}, {idx}[0], {d - 1}) "
                    f": {a}->shape_dims[{d - 1}])")
    return [dims]


def _gather_c(kc: KernelContext) -> str:
    _helpers(kc)
    out, indices = kc.out, kc.inputs[1]
    a = _a(kc)
    n = indices.dim(0)
    idx = f"((const int32_t *){indices.var}.data)"
    rank = out.rank - 1
    unknown = [d for d in range(rank) if out.shape[d + 1] is None]
    lines = ["{", "int64_t bad = 0;",
             f"int rc = flowc_ta_gather_check({a}, {idx}, {n}, {rank}, &bad);"]
    lines += _read_failures(kc, f"{idx}[bad]", rank)
    lines.append("if (rc == 7) { char s0[160], sk[160]; int64_t d0[FLOWC_MAX_RANK], "
                 "dk[FLOWC_MAX_RANK];")
    lines.append(f"for (int32_t d = 0; d < {rank}; d++) {{ d0[d] = flowc_ta_dim({a}, {idx}[0], d); "
                 f"dk[d] = flowc_ta_dim({a}, {idx}[bad], d); }}")
    lines.append(kc.fail("TensorArray has inconsistent shapes. Index %lld has shape: %s but index "
                         "%lld has shape: %s", f"(long long){idx}[0]",
                         f"flowc_ta_shape_str(s0, {rank}, d0)", f"(long long){idx}[bad]",
                         f"flowc_ta_shape_str(sk, {rank}, dk)") + " }")
    if unknown:
        known = " && ".join(f"{a}->shape_dims[{d}] >= 0" for d in unknown)
        static = "[" + ", ".join("?" if out.shape[d + 1] is None else str(out.shape[d + 1])
                                 for d in range(rank)) + "]"
        lines.append(f"if ({n} == 0 && !({a}->shape_rank == {rank} && {known})) "
                     + kc.fail(f"TensorArray has size zero, but element shape {static} is not "
                               "fully defined. Currently only static shapes are supported when "
                               "packing zero-size TensorArrays."))
    lines.append("}")
    kc.checks.append("\n".join(lines))
    per = out.dim_product(1)
    return "\n".join([
        f"for (int64_t k = 0; k < {n}; k++)",
        f"    flowc_ta_read_into({a}, {idx}[k], (char *){out.var}.data + k * (int64_t)({per}) * "
        f"(int64_t)sizeof({out.ctype}), {per});"])


def _scatter_c(kc: KernelContext) -> str:
    _helpers(kc)
    indices, value = kc.inputs[1], kc.inputs[2]
    if value.rank == 0:
        raise kc.error("value must have at least one dimension (one row per index)")
    n = indices.dim(0)
    kc.check_dims_equal(n, value.dim(0), "Expected len(indices) == values.shape[0], but saw")
    idx = f"((const int32_t *){indices.var}.data)"
    per = value.dim_product(1)
    row = (f"(const char *){value.var}.data + k * (int64_t)({per}) * "
           f"(int64_t)sizeof({value.ctype})")
    return "\n".join([
        _dtype_check(kc, value),
        f"for (int64_t k = 0; k < {n}; k++) {{",
        f"    int rc = flowc_ta_write({_a(kc)}, {idx}[k], {row}, {value.rank - 1}, "
        f"{value.var}.dims + 1);",
        *["    " + line for line in _write_failures(kc, f"{idx}[k]", str(value.rank - 1),
                                                      f"{value.var}.dims + 1", row, value)],
        "}"])


def _grad_c(kc: KernelContext) -> str:
    _helpers(kc)
    handle, flow = kc.outputs
    source = c_string(kc.attr("source"))
    return "\n".join([
        f"if ({_a(kc)}->closed) " + kc.fail("the TensorArray has already been closed."),
        f"flowc_tensor_array *g = flowc_ta_grad({_a(kc)}, {source});",
        "if (!g) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
        f"{handle.var}.rank = 0; {handle.var}.dtype = {handle.dtype.code}; "
        f"{handle.var}.data = g;",
        f"{flow.var}.rank = 0; {flow.var}.dtype = {flow.dtype.code};",
        f"{flow.var}.data = flowc_alloc(sizeof(float));",
        f"if (!{flow.var}.data) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
        f"((float *){flow.var}.data)[0] = ((const float *){kc.inputs[1].var}.data)[0];"])


def _size_c(kc: KernelContext) -> str:
    _helpers(kc)
    return "\n".join([
        f"if ({_a(kc)}->closed) " + kc.fail("the TensorArray has already been closed."),
        f"{kc.out.data}[0] = (int32_t){_a(kc)}->size;"])


def _close_c(kc: KernelContext) -> str:
    _helpers(kc)
    a = _a(kc)
    return "\n".join([
        f"if ({a}->closed) " + kc.fail("the TensorArray has already been closed."),
        f"flowc_ta_clear({a}); {a}->closed = 1;"])


set_c_kernel("TensorArrayV3", _array_c, c_owns_outputs=True,
             c_release=("flowc_tensor_array_destroy", "free"))
set_c_kernel("TensorArrayWriteV3", _write_c)
set_c_kernel("TensorArrayReadV3", _read_c, _read_c_dims)
set_c_kernel("TensorArrayGatherV3", _gather_c, _gather_c_dims)
set_c_kernel("TensorArrayScatterV3", _scatter_c)
set_c_kernel("TensorArrayGradV3", _grad_c, c_owns_outputs=True,
             c_release=("flowc_ta_unref", "free"))
set_c_kernel("TensorArraySizeV3", _size_c)
set_c_kernel("TensorArrayCloseV3", _close_c)
