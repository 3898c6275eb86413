"""The C lowering of ``_DFT`` (``compiler/ops/signal.py``): a direct sum per output bin in
double precision, O(N L) per transform, over a table of the L twiddle factors built once per
run (``k n mod L`` indexes it, so no angle loses precision to a large product)."""
from __future__ import annotations

from typing import List

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.construct import constant_value
from compiler.ir.op_registry import set_c_kernel


def _length(kc: KernelContext) -> str:
    """C for the transform length L (read at run time unless constant), with its checks."""
    kc.check_scalar(1, "fft_length")
    value = constant_value(kc.node.inputs[1])
    if value is not None:
        return str(int(value.reshape(-1)[0]))
    expr = f"((int64_t){kc.inputs[1].data}[0])"
    line = f"if (!({expr} >= 1)) " + kc.fail("fft_length must be positive, got %lld",
                                              f"(long long){expr}")
    if line not in kc.checks:
        kc.checks.append(line)
    return expr


def _dft_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    inverse, onesided, axis = kc.attr("inverse"), kc.attr("onesided"), kc.attr("axis")
    length = _length(kc)
    dims = list(x.dims)
    dims[axis] = f"({length} / 2 + 1)" if onesided and not inverse else length
    dims[-1] = "1" if inverse and onesided else "2"
    return [dims]


def _dft_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    inverse, onesided, axis = kc.attr("inverse"), kc.attr("onesided"), kc.attr("axis")
    length = _length(kc)
    sign = "+" if inverse else "-"
    scale = " / (double)L" if inverse else ""
    lines = [
        f"const {x.ctype} *xd = {x.data};",
        f"{out.ctype} *yd = {out.data};",
        f"const int64_t L = {length};",
        f"const int64_t N = {x.dim(axis)}, C = {x.dim(-1)};",
        f"const int64_t outer = {x.dim_product(0, axis)}, inner = {x.dim_product(axis + 1, -1)};",
        f"const int64_t K = {out.dim(axis)}, CO = {out.dim(-1)};",
        "const int64_t M = N < L ? N : L;",
        "double *tc = (double *)malloc((size_t)L * 2 * sizeof(double));",
        "if (!tc) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
        "double *ts = tc + L;",
        "for (int64_t j = 0; j < L; j++) {",
        "    const double a = 6.283185307179586476925286766559 * (double)j / (double)L;",
        "    tc[j] = cos(a); ts[j] = sin(a);",
        "}",
        "for (int64_t o = 0; o < outer; o++) {",
        "    for (int64_t i = 0; i < inner; i++) {",
        "        const " + x.ctype + " *xs = xd + o * N * inner * C + i * C;",
        "        " + out.ctype + " *ys = yd + o * K * inner * CO + i * CO;",
        "        for (int64_t k = 0; k < K; k++) {",
        "            double re = 0, im = 0;",
    ]
    if inverse and onesided:
        # the Hermitian extension of the first bins: bin b > L/2 is conj(bin L - b)
        lines += [
            "            for (int64_t b = 0; b < L; b++) {",
            "                const int mirrored = b > L / 2;",
            "                const int64_t src = mirrored ? L - b : b;",
            "                if (src >= N) continue;",
            "                const double xr = (double)xs[src * inner * C];",
            "                double xi = C == 2 ? (double)xs[src * inner * C + 1] : 0.0;",
            "                if (mirrored) xi = -xi;",
            "                const int64_t j = (int64_t)(((uint64_t)b * (uint64_t)k) % "
            "(uint64_t)L);",
            "                re += xr * tc[j] - xi * ts[j];",
            "            }",
            f"            ys[k * inner * CO] = ({out.ctype})(re{scale});",
            "            (void)im;",
        ]
    else:
        lines += [
            "            for (int64_t n = 0; n < M; n++) {",
            "                const double xr = (double)xs[n * inner * C];",
            "                const double xi = C == 2 ? (double)xs[n * inner * C + 1] : 0.0;",
            "                const int64_t j = (int64_t)(((uint64_t)n * (uint64_t)k) % "
            "(uint64_t)L);",
            f"                re += xr * tc[j] {'-' if inverse else '+'} xi * ts[j];",
            f"                im += xi * tc[j] {sign} xr * ts[j];",
            "            }",
            f"            ys[k * inner * CO] = ({out.ctype})(re{scale});",
            f"            ys[k * inner * CO + 1] = ({out.ctype})(im{scale});",
        ]
    lines += ["        }", "    }", "}", "free(tc);", "(void)M;"]
    return "\n".join(lines)


set_c_kernel("_DFT", _dft_c, _dft_dims)
