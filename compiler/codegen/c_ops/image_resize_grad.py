"""The C lowering of ResizeBilinearGrad and ResizeNearestNeighborGrad
(``compiler/ops/image_resize_grad.py``): the output is zeroed, then each resized pixel's
gradient is added to the source pixels the forward kernel (``c_ops/image_resize.py``) read,
their rows and columns computed in float32 the same way. The nearest gradient's size may be
fed (read at run time, checked positive); the bilinear gradient's original sizes are
original_image's dims. Integer gradients wrap (added as unsigned)."""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import _c, _check_alloc, _elements, _is_int
from compiler.codegen.kernel_context import KernelContext, TensorRef
from compiler.ir.op_registry import set_c_kernel

_UNSIGNED = {"i8": "uint8_t", "i32": "uint32_t"}


def _pick(a: TensorRef, b: TensorRef, k: int) -> str:
    """Dim ``k`` as a literal where either tensor knows it."""
    return b.dim(k) if b.shape[k] is not None else a.dim(k)


def _bilinear_dims(kc: KernelContext) -> List[List[str]]:
    g, x = kc.inputs
    return [[_pick(g, x, 0), x.dim(1), x.dim(2), _pick(g, x, 3)]]


def _nearest_dims(kc: KernelContext) -> List[List[str]]:
    g = kc.inputs[0]
    h, w = _elements(kc, 1, 2)
    return [[g.dim(0), _c(h), _c(w), g.dim(3)]]


def _scales(kc: KernelContext) -> List[str]:
    """TensorFlow's CalculateResizeScale(original, resized) of both axes, as float sh, sw."""
    ac = "1" if kc.attrs.get("align_corners") else "0"
    return [f"const float {s} = ({ac} && {r} > 1) ? (float)({o} - 1) / (float)({r} - 1) : "
            f"(float){o} / (float){r};" for s, o, r in (("sh", "OH", "RH"), ("sw", "OW", "RW"))]


def _add(kc: KernelContext, dst: str, value: str) -> str:
    """C adding ``value`` into ``dst`` in the output's type (wrapping for signed ints)."""
    dtype = kc.out.dtype
    unsigned = _UNSIGNED.get(dtype.ir_name)
    if unsigned:
        return f"{dst} = ({kc.out.ctype})(({unsigned}){dst} + ({unsigned})({value}));"
    return f"{dst} += ({kc.out.ctype})({value});"


def _zero(out: TensorRef) -> str:
    return f"if (({out.size}) > 0) memset({out.data}, 0, (size_t)({out.size}) * sizeof({out.ctype}));"


def _wrap(lines: List[str]) -> str:
    return "{\n" + "\n".join("    " + ln for ln in lines) + "\n}"


def _grad_loops(kc: KernelContext, dy_type: str, row: List[str], col: List[str],
                body: List[str]) -> str:
    """The frame both gradients share: the sizes and scales, the output zeroed, then for
    each resized pixel (ry, rx) its source rows (``row``, C at the row loop's head) and
    columns (``col``), and ``body`` for each image ``b``, with ``v`` the pixel's gradient
    (C values) and ``dx`` the output."""
    g, out = kc.inputs[0], kc.out
    lines = [f"const int64_t N = {g.dim(0)}, RH = {g.dim(1)}, RW = {g.dim(2)}, C = {g.dim(3)};",
             f"const int64_t OH = {out.dim(1)}, OW = {out.dim(2)};"]
    lines += _scales(kc)
    lines += [_zero(out), f"{out.ctype} *dx = {out.data};", f"const {dy_type} *dy = {g.data};",
              "if (N * C > 0) {",
              "for (int64_t ry = 0; ry < RH; ry++) {"]
    lines += ["    " + t for t in row]
    lines += ["    for (int64_t rx = 0; rx < RW; rx++) {"]
    lines += ["        " + t for t in col]
    lines += ["        for (int64_t b = 0; b < N; b++) {",
              f"            const {dy_type} *v = dy + ((b * RH + ry) * RW + rx) * C;"]
    lines += ["            " + t for t in body]
    lines += ["        }",
              "    }",
              "}",
              "}"]
    return _wrap(lines)


def bilinear_grad_checks(kc: KernelContext) -> None:
    """ResizeBilinearGrad's run-time checks (the CUDA kernel's too)."""
    g, x = kc.inputs
    for k, what in ((0, "batch"), (3, "depth")):
        kc.check_dims_equal(g.dim(k), x.dim(k), f"grads and original_image differ in {what}")
    kc.check(f"{g.dim(1)} > 0 && {g.dim(2)} > 0", "resized dimensions must be positive")
    kc.check(f"{x.dim(1)} > 0 && {x.dim(2)} > 0", "original dimensions must be positive")
    kc.check(f"{x.dim(1)} <= INT32_MAX && {x.dim(2)} <= INT32_MAX",
             "original sizes must be between 0 and max int32")


def _bilinear_grad_c(kc: KernelContext) -> str:
    out = kc.out
    bilinear_grad_checks(kc)
    hp = bool(kc.attrs.get("half_pixel_centers"))

    def taps(o: str, scale: str, n: str, v: str) -> List[str]:
        pos = f"((float){o} + 0.5f) * {scale} - 0.5f" if hp else f"(float){o} * {scale}"
        return [f"const float p{v} = {pos};",
                f"const float f{v} = floorf(p{v});",
                f"int64_t {v}0 = f{v} < 0.0f ? 0 : (int64_t)f{v}; "
                f"if ({v}0 > {n} - 1) {v}0 = {n} - 1;",
                f"int64_t {v}1 = (int64_t)ceilf(p{v}); if ({v}1 > {n} - 1) {v}1 = {n} - 1;",
                f"if ({v}1 < 0) {v}1 = 0;",
                f"const float l{v} = p{v} - f{v}, i{v} = 1.0f - l{v};"]

    body = ["const int64_t r0 = (b * OH + y0) * OW, r1 = (b * OH + y1) * OW;",
            f"{out.ctype} *tl = dx + (r0 + x0) * C, *tr = dx + (r0 + x1) * C;",
            f"{out.ctype} *bl = dx + (r1 + x0) * C, *br = dx + (r1 + x1) * C;",
            "for (int64_t c = 0; c < C; c++) {",
            "    " + _add(kc, "tl[c]", "v[c] * iy * ix"),
            "    " + _add(kc, "tr[c]", "v[c] * iy * lx"),
            "    " + _add(kc, "bl[c]", "v[c] * ly * ix"),
            "    " + _add(kc, "br[c]", "v[c] * ly * lx"),
            "}"]
    return _grad_loops(kc, "float", taps("ry", "sh", "OH", "y"), taps("rx", "sw", "OW", "x"),
                       body)


def nearest_grad_checks(kc: KernelContext) -> None:
    """ResizeNearestNeighborGrad's run-time checks of a fed size (the CUDA kernel's too)."""
    g, out = kc.inputs[0], kc.out
    size = _elements(kc, 1, 2)
    if not _is_int(*size):
        kc.check(f"{_c(size[0])} > 0 && {_c(size[1])} > 0",
                 "shape_t's elements must be positive, got [%lld, %lld]",
                 f"(long long){_c(size[0])}", f"(long long){_c(size[1])}")
        _check_alloc(kc, [g.dim(0) if g.shape[0] is None else g.shape[0], size[0], size[1],
                          g.dim(3) if g.shape[3] is None else g.shape[3]], out.dtype.itemsize)


def _nearest_grad_c(kc: KernelContext) -> str:
    g, out = kc.inputs[0], kc.out
    nearest_grad_checks(kc)
    ac, hp = bool(kc.attrs.get("align_corners")), bool(kc.attrs.get("half_pixel_centers"))

    def index(o: str, scale: str, n: str, v: str) -> List[str]:
        pos = f"((float){o} + 0.5f) * {scale}" if hp else f"(float){o} * {scale}"
        rounded = f"roundf({pos})" if ac else f"floorf({pos})"
        return [f"int64_t {v} = (int64_t){rounded};", f"if ({v} > {n} - 1) {v} = {n} - 1;",
                f"if ({v} < 0) {v} = 0;"]

    body = [f"{out.ctype} *d = dx + ((b * OH + iy) * OW + ix) * C;",
            "for (int64_t c = 0; c < C; c++) " + _add(kc, "d[c]", "v[c]")]
    return _grad_loops(kc, g.ctype, index("ry", "sh", "OH", "iy"),
                       index("rx", "sw", "OW", "ix"), body)


set_c_kernel("ResizeBilinearGrad", _bilinear_grad_c, _bilinear_dims)
set_c_kernel("ResizeNearestNeighborGrad", _nearest_grad_c, _nearest_dims)
