"""The C lowering of ``LRN`` and ``LRNGrad`` (``compiler/ops/lrn.py``): per pixel (the input
seen as ``[rows, depth]``), the window's sum of squares for each depth, then TensorFlow's
formulas, in the input's type. The three inputs of ``LRNGrad`` must have one shape (checked at
run time where a dim is unknown)."""
from __future__ import annotations

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _head(kc: KernelContext, x) -> list:
    t = x.ctype
    return [f"const int64_t rows = {x.dim_product(0, 3)}, depth = {x.dim(3)};",
            f"const int64_t radius = {int(kc.attr('depth_radius'))};",
            f"const {t} bias = {kc.literal(kc.attr('bias'), x.dtype)};",
            f"const {t} alpha = {kc.literal(kc.attr('alpha'), x.dtype)};",
            f"const {t} beta = {kc.literal(kc.attr('beta'), x.dtype)};"]


def _norm_loop(t: str, image: str) -> list:
    """C that sets ``norm`` to bias + alpha * the window's sum of squares around depth ``i``
    of row ``img`` (``lo``, ``hi``: the window)."""
    return [f"        const int64_t lo = i > radius ? i - radius : 0;",
            f"        const int64_t hi = i + radius + 1 < depth ? i + radius + 1 : depth;",
            f"        {t} s = 0;",
            f"        for (int64_t j = lo; j < hi; j++) s += {image}[j] * {image}[j];",
            f"        const {t} norm = bias + alpha * s;"]


def _lrn_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    t, pw = x.ctype, kc.math("pow", x.dtype)
    lines = _head(kc, x) + [
        f"const {t} *xd = {x.data};",
        f"{t} *yd = {out.data};",
        "for (int64_t r = 0; r < rows; r++) {",
        f"    const {t} *img = xd + r * depth;",
        "    for (int64_t i = 0; i < depth; i++) {",
        *_norm_loop(t, "img"),
        f"        yd[r * depth + i] = img[i] * {pw}(norm, -beta);",
        "    }",
        "}"]
    return "\n".join(lines)


def _lrn_grad_c(kc: KernelContext) -> str:
    g, image, output = kc.inputs
    out = kc.out
    for other, name in ((image, "input_image"), (output, "output_image")):
        for d in range(4):
            kc.check_dims_equal(g.dim(d), other.dim(d),
                                f"input_grads and {name} must have the same shape (dim {d})")
    t, pw = g.ctype, kc.math("pow", g.dtype)
    lines = _head(kc, g) + [
        f"const {t} *gd = {g.data}, *xd = {image.data}, *od = {output.data};",
        f"{t} *yd = {out.data};",
        "for (int64_t r = 0; r < rows; r++) {",
        f"    const {t} *img = xd + r * depth, *gr = gd + r * depth, *orow = od + r * depth;",
        f"    {t} *dst = yd + r * depth;",
        "    for (int64_t j = 0; j < depth; j++) dst[j] = 0;",
        "    for (int64_t i = 0; i < depth; i++) {",
        *_norm_loop(t, "img"),
        f"        const {t} own = {pw}(norm, -beta);",
        "        for (int64_t j = lo; j < hi; j++) {",
        f"            {t} dy = ({t})-2 * alpha * beta * img[j] * orow[i] / norm;",
        "            if (i == j) dy += own;",
        "            dst[j] += dy * gr[i];",
        "        }",
        "    }",
        "}"]
    return "\n".join(lines)


set_c_kernel("LRN", _lrn_c, lambda kc: [kc.inputs[0].dims])
set_c_kernel("LRNGrad", _lrn_grad_c, lambda kc: [kc.inputs[0].dims])
