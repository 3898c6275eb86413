"""The C lowering of ``_GridSample`` (``compiler/ops/grid_sample.py``).

Per grid point, a module helper computes each spatial dim's taps (indices already mapped by
the padding mode, weights, and whether the tap reads the input); the kernel then sums the
taps dim by dim for every channel, innermost dim first, as the reference does. Coordinates
are clamped before they become integers, so no coordinate (huge, infinite, NaN) converts out
of range.
"""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.reduction import module_helper
from compiler.codegen.kernel_context import KernelContext, product
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.grid_sample import CUBIC_A, taps_per_dim
from runtime.dtypes import DType


def _acc(dtype: DType) -> str:
    return "double" if dtype is DType.f64 else "float"


def _reflect_helper(kc: KernelContext, ga: str) -> str:
    fn = f"flowc_gs_reflect_{ga}"
    fmod = "fmod" if ga == "double" else "fmodf"
    return module_helper(kc, fn, "\n".join([
        f"static {ga} {fn}({ga} c, {ga} lo, {ga} hi) {{",
        f"    const {ga} span = hi - lo;",
        "    if (span <= 0) return c != c ? c : lo;",
        f"    if (c < lo) {{ const {ga} m = {fmod}(lo - c, 2 * span); "
        "return m < span ? lo + m : hi - (m - span); }",
        f"    if (c > hi) {{ const {ga} m = {fmod}(c - hi, 2 * span); "
        "return m < span ? hi - m : lo + (m - span); }",
        "    return c;",
        "}"]))


def _taps_helper(kc: KernelContext, ga: str, ta: str, mode: str, padding: str,
                 align: bool, grad: bool = False) -> str:
    """A C function filling ``ix``, ``w``, ``ok`` (one entry per tap) for coordinate ``u`` on
    a dim of size ``L`` (``grad``: also ``dw``, the weights' derivatives along the position,
    and ``*slope``, the position's derivative along u)."""
    k = taps_per_dim(mode)
    fn = f"flowc_gs_taps_{ga}_{ta}_{mode}_{padding}_{int(align)}{'_grad' if grad else ''}"
    f = "" if ga == "double" else "f"
    one = f"({ga})1"
    if align:
        bounds = [f"    const {ga} lo = 0, hi = ({ga})(L - 1);",
                  f"    {ga} c = (u + {one}) / ({ga})2 * ({ga})(L - 1);"]
    else:
        bounds = [f"    const {ga} lo = ({ga})-0.5, hi = ({ga})L - ({ga})0.5;",
                  f"    {ga} c = ((u + {one}) * ({ga})L - {one}) / ({ga})2;"]
    extra = f", {ta} *dw, {ga} *slope" if grad else ""
    lines = [f"static void {fn}({ga} u, int64_t L, int64_t *ix, {ta} *w, int *ok{extra}) {{",
             *bounds]
    if grad:
        scale = f"({ga})(L - 1) / ({ga})2" if align else f"({ga})L / ({ga})2"
        lines.append(f"    {ga} dc = {'0' if mode == 'nearest' else scale};")
        if padding == "border":
            lines.append("    if (c < lo || c > hi) dc = 0;")
        elif padding == "reflection":
            fmod = "fmod" if ga == "double" else "fmodf"
            lines += ["    if ((c < lo || c > hi) && !(hi - lo > 0)) dc = 0;",
                      f"    else if (c < lo) dc = {fmod}(lo - c, 2 * (hi - lo)) < hi - lo "
                      "? -dc : dc;",
                      f"    else if (c > hi) dc = {fmod}(c - hi, 2 * (hi - lo)) < hi - lo "
                      "? -dc : dc;"]
        lines.append("    *slope = isfinite(dc) && isfinite(c) ? dc : 0;")
    if mode == "nearest":
        lines.append(f"    c = rint{f}(c);")
    if padding == "border":
        lines.append(f"    if (c < lo || c > hi) c = c < 0 ? 0 : (c > ({ga})(L > 0 ? L - 1 : 0) "
                     f"? ({ga})(L > 0 ? L - 1 : 0) : c);")
    elif padding == "reflection":
        lines.append(f"    if (c < lo || c > hi) c = {_reflect_helper(kc, ga)}(c, lo, hi);")
    lines += ["    const int finite = isfinite(c) && L > 0;",
              "    if (!finite) c = 0;",
              f"    if (c < ({ga})-4) c = ({ga})-4;",
              f"    if (c > ({ga})L + 4) c = ({ga})L + 4;",
              f"    int64_t base[{k}];"]
    if mode == "nearest":
        lines += ["    base[0] = (int64_t)c;", "    w[0] = 1;"]
        if grad:
            lines.append("    dw[0] = 0;")
    else:
        lines += [f"    const {ga} b = floor{f}(c), t = c - b;"]
        if mode == "linear":
            lines += ["    base[0] = (int64_t)b; base[1] = base[0] + 1;",
                      f"    w[0] = ({ta})({one} - t); w[1] = ({ta})t;"]
            if grad:
                lines.append("    dw[0] = -1; dw[1] = 1;")
        else:
            a = f"({ga}){CUBIC_A!r}"
            t1, s, t2 = f"(t + {one})", f"({one} - t)", f"(({ga})2 - t)"
            lines += [
                "    for (int k = 0; k < 4; k++) base[k] = (int64_t)b - 1 + k;",
                f"    w[0] = ({ta})((({a} * {t1} - 5 * {a}) * {t1} + 8 * {a}) * {t1} - 4 * {a});",
                f"    w[1] = ({ta})((({a} + 2) * t - ({a} + 3)) * t * t + {one});",
                f"    w[2] = ({ta})((({a} + 2) * {s} - ({a} + 3)) * {s} * {s} + {one});",
                f"    w[3] = ({ta})((({a} * {t2} - 5 * {a}) * {t2} + 8 * {a}) * {t2} - 4 * {a});"]
            if grad:
                lines += [
                    f"    dw[0] = ({ta})((3 * {a} * {t1} - 10 * {a}) * {t1} + 8 * {a});",
                    f"    dw[1] = ({ta})((3 * ({a} + 2) * t - 2 * ({a} + 3)) * t);",
                    f"    dw[2] = ({ta})(-((3 * ({a} + 2) * {s} - 2 * ({a} + 3)) * {s}));",
                    f"    dw[3] = ({ta})(-((3 * {a} * {t2} - 10 * {a}) * {t2} + 8 * {a}));"]
    lines += [f"    for (int k = 0; k < {k}; k++) {{", "        int64_t i = base[k];"]
    if padding == "zeros":
        lines.append("        ok[k] = finite && i >= 0 && i < L;")
    else:
        lines.append("        ok[k] = finite;")
        if padding == "reflection":
            lines.append(f"        i = (int64_t)trunc{f}({_reflect_helper(kc, ga)}(({ga})i, lo, "
                         "hi));")
        lines.append("        if (i < 0) i = 0;")
        lines.append("        if (i > L - 1) i = L - 1;")
    lines += ["        ix[k] = ok[k] ? i : 0;", "    }", "}"]
    return module_helper(kc, fn, "\n".join(lines))


def _grid_sample_dims(kc: KernelContext) -> List[List[str]]:
    x, g = kc.inputs
    r = x.rank - 2
    kc.check_dims_equal(g.dim(0), x.dim(0), "grid's batch must match the input's")
    kc.check_dims_equal(g.dim(-1), str(r), "grid's last dim must be the input's spatial rank")
    return [[x.dim(0), x.dim(1)] + g.dims[1:-1]]


def _grid_sample_c(kc: KernelContext) -> str:
    x, g = kc.inputs
    out = kc.out
    mode, padding = kc.attr("mode"), kc.attr("padding_mode")
    align = bool(kc.attr("align_corners"))
    r, k = x.rank - 2, taps_per_dim(mode)
    ga, ta = _acc(g.dtype), _acc(x.dtype)
    taps = _taps_helper(kc, ga, ta, mode, padding, align)
    strides = [x.dim_product(2 + d + 1) for d in range(r)]

    def level(d: int, indent: str) -> List[str]:
        body = [f"{indent}{ta} acc{d} = 0;",
                f"{indent}for (int k{d} = 0; k{d} < {k}; k{d}++) {{"]
        inner = indent + "    "
        if d + 1 < r:
            body += level(d + 1, inner)
            term = f"acc{d + 1}"
        else:
            ok = " && ".join(f"ok[{j}][k{j}]" for j in range(r))
            at = " + ".join(f"ix[{j}][k{j}] * {strides[j]}" for j in range(r))
            body.append(f"{inner}const {ta} v = ({ok}) ? ({ta})xc[{at}] : 0;")
            term = "v"
        body.append(f"{inner}acc{d} += {term}" + (";" if mode == "nearest" else
                                                   f" * w[{d}][k{d}];"))
        return body + [f"{indent}}}"]

    return "\n".join([
        f"const {x.ctype} *xd = {x.data};",
        f"const {g.ctype} *gd = {g.data};",
        f"{out.ctype} *yd = {out.data};",
        f"const int64_t N = {x.dim(0)}, C = {x.dim(1)}, P = {product(g.dims[1:-1])};",
        f"const int64_t L[{r}] = {{{', '.join(x.dims[2:])}}};",
        f"const int64_t plane = {x.dim_product(2)};",
        "for (int64_t n = 0; n < N; n++) {",
        "    for (int64_t p = 0; p < P; p++) {",
        f"        const {g.ctype} *gp = gd + (n * P + p) * {r};",
        f"        int64_t ix[{r}][{k}]; {ta} w[{r}][{k}]; int ok[{r}][{k}];",
        f"        for (int d = 0; d < {r}; d++) {taps}(({ga})gp[{r - 1} - d], L[d], ix[d], w[d], "
        "ok[d]);",
        "        for (int64_t c = 0; c < C; c++) {",
        f"            const {x.ctype} *xc = xd + (n * C + c) * plane;",
        *level(0, "            "),
        f"            yd[(n * C + c) * P + p] = ({out.ctype})acc0;",
        "        }",
        "    }",
        "}",
        "(void)L; (void)plane;"])


set_c_kernel("_GridSample", _grid_sample_c, _grid_sample_dims)


def _grid_sample_grad_dims(kc: KernelContext) -> List[List[str]]:
    dy, x, g = kc.inputs
    r = x.rank - 2
    kc.check_dims_equal(g.dim(0), x.dim(0), "grid's batch must match the input's")
    kc.check_dims_equal(g.dim(-1), str(r), "grid's last dim must be the input's spatial rank")
    for k, (a, b) in enumerate(zip(dy.dims, [x.dim(0), x.dim(1)] + g.dims[1:-1])):
        kc.check_dims_equal(a, b, f"the gradient's dim {k} must match the output's")
    return [x.dims, g.dims]


def _grid_sample_grad_c(kc: KernelContext) -> str:
    dy, x, g = kc.inputs
    dx, dg = kc.outputs
    mode, padding = kc.attr("mode"), kc.attr("padding_mode")
    align = bool(kc.attr("align_corners"))
    r, k = x.rank - 2, taps_per_dim(mode)
    ga, ta = _acc(g.dtype), _acc(x.dtype)
    taps = _taps_helper(kc, ga, ta, mode, padding, align, grad=True)
    strides = [x.dim_product(2 + d + 1) for d in range(r)]
    loops, closes = [], []
    for d in range(r):
        pad = "            " + "    " * d
        loops.append(f"{pad}for (int k{d} = 0; k{d} < {k}; k{d}++) {{")
        closes.insert(0, f"{pad}}}")
    inner = "            " + "    " * r
    ok = " && ".join(f"ok[{j}][k{j}]" for j in range(r))
    at = " + ".join(f"ix[{j}][k{j}] * {strides[j]}" for j in range(r))
    weight = " * ".join(f"w[{j}][k{j}]" for j in range(r))
    body = [f"{inner}if (!({ok})) continue;",
            f"{inner}xc_grad[{at}] += ({x.ctype})(gv * {weight});"]
    if mode != "nearest":
        body.append(f"{inner}const {ta} v = ({ta})xc[{at}];")
        for d in range(r):
            others = " * ".join([f"w[{j}][k{j}]" for j in range(r) if j != d] or ["1"])
            body.append(f"{inner}gd[{d}] += gv * v * dw[{d}][k{d}] * {others};")
    return "\n".join([
        f"const {dy.ctype} *gyd = {dy.data};",
        f"const {x.ctype} *xd = {x.data};",
        f"const {g.ctype} *gd_in = {g.data};",
        f"{dx.ctype} *dxd = {dx.data};",
        f"{dg.ctype} *dgd = {dg.data};",
        f"const int64_t N = {x.dim(0)}, C = {x.dim(1)}, P = {product(g.dims[1:-1])};",
        f"const int64_t L[{r}] = {{{', '.join(x.dims[2:])}}};",
        f"const int64_t plane = {x.dim_product(2)};",
        f"if ({x.size} > 0) memset(dxd, 0, (size_t)({x.size}) * sizeof({dx.ctype}));",
        "for (int64_t n = 0; n < N; n++) {",
        "    for (int64_t p = 0; p < P; p++) {",
        f"        const {g.ctype} *gp = gd_in + (n * P + p) * {r};",
        f"        int64_t ix[{r}][{k}]; {ta} w[{r}][{k}], dw[{r}][{k}]; int ok[{r}][{k}];",
        f"        {ga} slope[{r}];",
        f"        for (int d = 0; d < {r}; d++) {taps}(({ga})gp[{r - 1} - d], L[d], ix[d], w[d], "
        "ok[d], dw[d], &slope[d]);",
        f"        {ta} gd[{r}] = {{0}};",
        "        for (int64_t c = 0; c < C; c++) {",
        f"            const {ta} gv = ({ta})gyd[(n * C + c) * P + p];",
        f"            const {x.ctype} *xc = xd + (n * C + c) * plane;",
        f"            {dx.ctype} *xc_grad = dxd + (n * C + c) * plane;",
        *loops, *body, *closes,
        "            (void)xc;",
        "        }",
        f"        for (int d = 0; d < {r}; d++) dgd[(n * P + p) * {r} + {r - 1} - d] = "
        f"({dg.ctype})(gd[d] * slope[d]);",
        "    }",
        "}",
        "(void)L; (void)plane;"])


set_c_kernel("_GridSampleGrad", _grid_sample_grad_c, _grid_sample_grad_dims)
