"""The C lowering of Einsum (``compiler/ops/einsum.py``).

A two-operand contraction whose labels each occur once per operand, and where no label is
summed inside one operand alone, is a batched matrix product, as in TensorFlow's kernel: the
labels split into batch (both operands and the output), contracted (both operands only), and
the free labels of each operand; an operand already laid out as [batch, free, contracted] (or
[batch, contracted, free], read transposed) is used where it is, any other is first copied
into that order, and the product (BLAS gemm for floats, the shared ``matmul.c.j2`` helper) is
written straight into the output when the output's label order allows, else permuted into it.
Everything else (one operand: transposes, diagonals, sums; three or more operands; broadcast
``...`` dims that stretch) runs as a loop nest over the output and the summed labels,
accumulating floats in double and integers in unsigned (wrapping) arithmetic.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from compiler.codegen.c_ops.nn import _UNSIGNED, blas_routines
from compiler.codegen.c_ops.reduction import module_helper
from compiler.codegen.kernel_context import KernelContext, TensorRef, product
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.einsum import Equation, label_sizes, parse_equation

_INT32_MAX = 2**31 - 1


def _equation(kc: KernelContext) -> Equation:
    try:
        eq = parse_equation(kc.attr("equation"), [t.rank for t in kc.inputs])
        label_sizes(eq, [t.shape for t in kc.inputs])
    except ValueError as e:
        raise kc.error(str(e)) from None
    return eq


def _sizes(kc: KernelContext, eq: Equation) -> Dict[str, str]:
    """Each label's size as C, with run-time checks that its dims agree (a '...' dim of 1
    stretches)."""
    sizes: Dict[str, str] = {}
    for c in eq.labels:
        dims = [t.dim(j) for t, labels in zip(kc.inputs, eq.inputs)
                for j, lc in enumerate(labels) if lc == c]
        big = [d for d in dims if d.isdigit() and d != "1"]
        if c not in eq.broadcast:
            size = big[0] if big else next((d for d in dims if not d.isdigit()), dims[0])
            for d in dims:
                kc.check_dims_equal(d, size, f"the dims of label '{c}' must match")
        elif big:
            size = big[0]
            for d in dims:
                if not d.isdigit():
                    kc.check(f"{d} == 1 || {d} == {size}",
                             "'...' dims of size %lld and %lld cannot be matched",
                             f"(long long)({d})", f"(long long)({size})")
        else:
            size = dims[0]
            for d in dims[1:]:
                size = f"({size} == 1 ? {d} : {size})"
            for d in dims:
                if not d.isdigit():
                    kc.check(f"{d} == 1 || {d} == {size}",
                             "'...' dims of size %lld and %lld cannot be matched",
                             f"(long long)({d})", f"(long long)({size})")
        sizes[c] = size
    return sizes


def _output_dims(kc: KernelContext) -> List[List[str]]:
    eq = _equation(kc)
    sizes = _sizes(kc, eq)
    return [[sizes[c] for c in eq.output]]


def _stride(t: TensorRef, labels: List[str], c: str, broadcast: bool) -> str:
    """C: the element stride of label ``c`` in operand ``t`` (summed over a repeated label;
    0 along a broadcast dim of size 1)."""
    terms = []
    for j, lc in enumerate(labels):
        if lc != c:
            continue
        s, d = t.stride(j), t.dim(j)
        if broadcast and d == "1":
            continue
        terms.append(f"({d} == 1 ? 0 : {s})" if broadcast and not d.isdigit() else s)
    return " + ".join(terms) or "0"


def _loop_nest(kc: KernelContext, eq: Equation, sizes: Dict[str, str]) -> str:
    out = kc.out
    dtype = out.dtype
    acc = "double" if dtype.is_floating else _UNSIGNED[dtype]
    summed = [c for c in eq.labels if c not in eq.output]
    index = {c: f"i{k}" for k, c in enumerate(eq.labels)}
    lines = [f"{out.ctype} *{kc.target.restrict} o = {out.data};", "int64_t oi = 0;"]
    for k, t in enumerate(kc.inputs):
        lines.append(f"const {t.ctype} *{kc.target.restrict} x{k} = {t.data};")
    offsets = []
    for k, (t, labels) in enumerate(zip(kc.inputs, eq.inputs)):
        terms = []
        for c in dict.fromkeys(labels):
            s = _stride(t, labels, c, c in eq.broadcast)
            if s != "0":
                terms.append(f"{index[c]} * ({s})")
        offsets.append(" + ".join(terms) or "0")
    depth = 0
    for c in eq.output:
        lines.append("    " * depth + f"for (int64_t {index[c]} = 0; {index[c]} < {sizes[c]}; "
                     f"{index[c]}++) {{")
        depth += 1
    pad = "    " * depth
    lines.append(pad + f"{acc} acc = 0;")
    inner = depth
    for c in summed:
        lines.append("    " * inner + f"for (int64_t {index[c]} = 0; {index[c]} < {sizes[c]}; "
                     f"{index[c]}++) {{")
        inner += 1
    term = " * ".join(f"({acc})x{k}[{off}]" for k, off in enumerate(offsets))
    lines.append("    " * inner + f"acc += {term};")
    for level in range(inner - 1, depth - 1, -1):
        lines.append("    " * level + "}")
    lines.append(pad + f"o[oi++] = ({out.ctype})acc;")
    for level in range(depth - 1, -1, -1):
        lines.append("    " * level + "}")
    lines.append("(void)oi;" + "".join(f" (void)x{k};" for k in range(len(kc.inputs))))
    return "\n".join(lines)


def _matmul_plan(kc: KernelContext, eq: Equation) -> Optional[Tuple[list, list, list, list]]:
    """(batch, free of a, free of b, contracted) labels when the contraction is a batched
    matrix product, else None."""
    if len(kc.inputs) != 2:
        return None
    la, lb = eq.inputs
    if len(set(la)) != len(la) or len(set(lb)) != len(lb):
        return None
    out = eq.output
    if any(c not in lb and c not in out for c in la) or \
            any(c not in la and c not in out for c in lb):
        return None
    a, b = kc.inputs
    for c in set(la) & set(lb):
        if c in eq.broadcast:       # a '...' dim in both: the same static size, or no gemm
            da, db = a.dim(la.index(c)), b.dim(lb.index(c))
            if not (da.isdigit() and da == db):
                return None
    batch = [c for c in out if c in la and c in lb]
    free_a = [c for c in out if c in la and c not in lb]
    free_b = [c for c in out if c in lb and c not in la]
    contracted = [c for c in la if c in lb and c not in out]
    return batch, free_a, free_b, contracted


def _permute_helper(kc: KernelContext, ctype: str) -> str:
    name = f"flowc_einsum_permute_{ctype.replace(' ', '_')}"
    module_helper(kc, name, "\n".join([
        "/* dst (contiguous, dims[]) = src read with strides[] (one per dst dim) */",
        f"static void {name}(const {ctype} *src, {ctype} *dst, int rank, const int64_t *dims,",
        "                     const int64_t *strides) {",
        "    int64_t total = 1, at[16] = {0}, off = 0;",
        "    for (int d = 0; d < rank; d++) total *= dims[d];",
        "    for (int64_t i = 0; i < total; i++) {",
        "        dst[i] = src[off];",
        "        for (int d = rank - 1; d >= 0; d--) {",
        "            off += strides[d];",
        "            if (++at[d] < dims[d]) break;",
        "            off -= strides[d] * dims[d];",
        "            at[d] = 0;",
        "        }",
        "    }",
        "}"]))
    return name


def _gather_into(kc: KernelContext, lines: List[str], name: str, src: str, ctype: str,
                 order: List[str], labels: List[str], t: TensorRef, sizes: Dict[str, str]) -> None:
    """C copying operand ``t`` (``labels``) into a new buffer ``name`` laid out as ``order``."""
    fn = _permute_helper(kc, ctype)
    dims = [sizes[c] for c in order] or ["1"]
    strides = [t.stride(labels.index(c)) for c in order] or ["0"]
    count = product([sizes[c] for c in order])
    lines += [f"{name} = ({ctype} *)flowc_alloc((size_t)({count}) * sizeof({ctype}) + 1);",
              f"if (!{name}) {{ free(work_a); free(work_b); free(work_c); "
              + kc.fail("out of memory for einsum's operands", code="FLOWC_RESOURCE_EXHAUSTED")
              + " }",
              f"{{ const int64_t dims[] = {{{', '.join(dims)}}}, "
              f"strides[] = {{{', '.join(strides)}}};",
              f"  if ({count} > 0) {fn}({src}, {name}, {max(len(order), 1)}, dims, strides); }}"]


def _matmul(kc: KernelContext, eq: Equation, sizes: Dict[str, str], plan) -> str:
    batch, free_a, free_b, contracted = plan
    a, b = kc.inputs
    out = kc.out
    la, lb = eq.inputs
    T = out.ctype
    m = product([sizes[c] for c in free_a])
    n = product([sizes[c] for c in free_b])
    k = product([sizes[c] for c in contracted])
    nb = product([sizes[c] for c in batch])
    lines = [f"{T} *work_a = NULL, *work_b = NULL, *work_c = NULL;",
             f"const {T} *pa = {a.data};", f"const {T} *pb = {b.data};"]
    if la == batch + free_a + contracted:
        ta = False
    elif la == batch + contracted + free_a:
        ta = True
    else:
        ta = False
        _gather_into(kc, lines, "work_a", a.data, T, batch + free_a + contracted, la, a, sizes)
        lines.append("pa = work_a;")
    if lb == batch + contracted + free_b:
        tb = False
    elif lb == batch + free_b + contracted:
        tb = True
    else:
        tb = False
        _gather_into(kc, lines, "work_b", b.data, T, batch + contracted + free_b, lb, b, sizes)
        lines.append("pb = work_b;")
    direct = eq.output == batch + free_a + free_b
    if direct:
        lines.append(f"{T} *pc = {out.data};")
    else:
        lines += [f"work_c = ({T} *)flowc_alloc((size_t)({nb} * {m} * {n}) * sizeof({T}) + 1);",
                  "if (!work_c) { free(work_a); free(work_b); "
                  + kc.fail("out of memory for einsum's product", code="FLOWC_RESOURCE_EXHAUSTED")
                  + " }",
                  f"{T} *pc = work_c;"]
    blas = out.dtype.is_floating
    if blas:
        for d in (m, n, k):
            if d.isdigit():
                if int(d) > _INT32_MAX:
                    raise kc.error(f"dimension {d} is too large for BLAS (32-bit sizes)")
            else:
                kc.check(f"{d} <= INT32_MAX", "dimension %lld is too large for BLAS (32-bit "
                         "sizes)", f"(long long)({d})")
    routines = blas_routines(kc, out.dtype, [m, n, k] if blas else None)
    fn = (f"flowc_matmul_{out.dtype.ir_name}_{'t' if ta else 'n'}{'t' if tb else 'n'}"
          + ("_dnnl" if routines["onednn"] else ""))
    module_helper(kc, fn, kc.render(
        "matmul.c.j2", part="helper", fn=fn, ta=ta, tb=tb, blas=blas,
        **routines,
        utype=_UNSIGNED.get(out.dtype, "")))
    lda = m if ta else k
    ldb = k if tb else n
    lines += [f"const int64_t nb = {nb}, m = {m}, n = {n}, k = {k};",
              "for (int64_t bi = 0; bi < nb; bi++)",
              f"    {fn}(pa, bi * m * k, pb, bi * k * n, pc, bi * m * n, m, n, k, {lda}, {ldb});"]
    if not direct:
        fn_p = _permute_helper(kc, T)
        prod_labels = batch + free_a + free_b
        prod_strides = {c: product([sizes[x] for x in prod_labels[j + 1:]])
                        for j, c in enumerate(prod_labels)}
        dims = [sizes[c] for c in eq.output] or ["1"]
        strides = [prod_strides[c] for c in eq.output] or ["0"]
        lines += [f"{{ const int64_t dims[] = {{{', '.join(dims)}}}, "
                  f"strides[] = {{{', '.join(strides)}}};",
                  f"  if ({out.size} > 0) {fn_p}(work_c, {out.data}, {max(len(eq.output), 1)}, "
                  "dims, strides); }"]
    lines.append("free(work_a); free(work_b); free(work_c);")
    return "\n".join(lines)


def _einsum_c(kc: KernelContext) -> str:
    eq = _equation(kc)
    sizes = _sizes(kc, eq)
    if kc.out.rank > 16:
        raise kc.error("einsum's output has more than 16 dims")
    plan = _matmul_plan(kc, eq)
    if plan is not None:
        return _matmul(kc, eq, sizes, plan)
    return _loop_nest(kc, eq, sizes)


set_c_kernel("Einsum", _einsum_c, _output_dims)
