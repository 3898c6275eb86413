"""GPU kernels of ResizeBilinear, ResizeNearestNeighbor and their gradients ResizeBilinearGrad
and ResizeNearestNeighborGrad (NHWC), with the C kernels' semantics
(``compiler/codegen/c_ops/image_resize.py``, ``image_resize_grad.py``): the scales are computed
on the host in float32 as there, and each thread maps its pixel's coordinates the same way
(align_corners, half_pixel_centers, TensorFlow's legacy nearest rounding). Products that
feed a sum are ``__fmul_rn`` (never contracted into an FMA, so a source coordinate is the one
the C and numpy kernels compute, and its floor the same pixel).

The gradients are gathers, not scatters: one thread per element of the original image sums
the resized pixels that read it. The forward coordinate maps are non-decreasing in the
resized index, so the contributing rows (columns) are one run found by a binary search, and
they are added in the C kernel's order (resized row, then column, then the taps
top-left, top-right, bottom-left, bottom-right): no atomics, the same sums on every run.

A size fed at run time is copied to the host (``host_inputs``) for the output dims and the C
target's checks. Types: every type the C kernels take. The forward nearest moves f16 and bf16
as bits; the gradients sum in f32 or f64 (and, for the nearest gradient, in u8, i8 and i32,
wrapping as the C kernel does); f16 and bf16 gradients are computed in f32 between casts
(``legalize-types``, after placement), as on a CPU.
"""
from __future__ import annotations

from compiler.codegen.c_ops.image_resize import _size
from compiler.codegen.c_ops.image_resize_grad import (_UNSIGNED, bilinear_grad_checks,
                                                      nearest_grad_checks)
from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.graph import Node
from runtime.dtypes import DType

# The device helpers: a resized index's source position, its bilinear taps (the gradient's
# form also clamps the lower tap below n and the upper one above 0, as the C gradient does)
# and its nearest source index.
_HELPERS = r"""
__device__ __forceinline__ float flowc_resize_pos(int64_t o, float scale, int half_pixel,
                                                  float shift) {
    return half_pixel ? __fmul_rn((float)o + 0.5f, scale) - shift : __fmul_rn((float)o, scale);
}
__device__ __forceinline__ void flowc_bilinear_taps(int64_t o, float scale, int64_t n,
                                                    int half_pixel, int grad, int64_t *lo,
                                                    int64_t *hi, float *frac) {
    const float p = flowc_resize_pos(o, scale, half_pixel, 0.5f);
    const float f = floorf(p);
    int64_t a = f < 0.0f ? 0 : (int64_t)f;
    int64_t b = (int64_t)ceilf(p);
    if (b > n - 1) b = n - 1;
    if (grad) { if (a > n - 1) a = n - 1; if (b < 0) b = 0; }
    *lo = a; *hi = b; *frac = p - f;
}
__device__ __forceinline__ int64_t flowc_nearest_index(int64_t o, float scale, int64_t n,
                                                       int align_corners, int half_pixel,
                                                       int grad) {
    const float p = flowc_resize_pos(o, scale, half_pixel, 0.0f);
    int64_t v = (int64_t)(align_corners ? roundf(p) : floorf(p));
    if (v > n - 1) v = n - 1;
    if ((half_pixel || grad) && v < 0) v = 0;
    return v;
}
/* The first resized index r in [0, count) whose upper (``upper``) or lower bilinear tap is
   >= target (count if none): both are non-decreasing in r. */
__device__ __forceinline__ int64_t flowc_bilinear_first(int64_t target, int64_t count,
                                                        float scale, int64_t n, int half_pixel,
                                                        int upper) {
    int64_t lo = 0, hi = count;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        int64_t a, b; float l;
        flowc_bilinear_taps(mid, scale, n, half_pixel, 1, &a, &b, &l);
        if ((upper ? b : a) >= target) hi = mid; else lo = mid + 1;
    }
    return lo;
}
/* The first resized index r in [0, count) whose nearest source index is >= target. */
__device__ __forceinline__ int64_t flowc_nearest_first(int64_t target, int64_t count,
                                                       float scale, int64_t n,
                                                       int align_corners, int half_pixel) {
    int64_t lo = 0, hi = count;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (flowc_nearest_index(mid, scale, n, align_corners, half_pixel, 1) >= target) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}
"""


def _helpers(kc: KernelContext) -> None:
    kc.module.add_global(_HELPERS.strip("\n"))


def _scale(launch: CudaLaunch, ac: bool, original: str, resized: str) -> str:
    """TensorFlow's CalculateResizeScale(original, resized) in float32, computed on the host
    as the C kernels compute it, a float parameter of the kernel."""
    expr = (f"({int(ac)} && ({resized}) > 1) ? (float)(({original}) - 1) / "
            f"(float)(({resized}) - 1) : (float)({original}) / (float)({resized})")
    return launch.value(expr, "float")


def _flags(kc: KernelContext):
    return bool(kc.attrs.get("align_corners")), bool(kc.attrs.get("half_pixel_centers"))


def _pixel(launch: CudaLaunch, out) -> str:
    """Device code naming an output element's coordinates b, y, x, c (NHWC) from flat i."""
    v = launch.value
    oh, ow, c = v(out.dim(1)), v(out.dim(2)), v(out.dim(3))
    return (f"const int64_t c = i % {c}, x = (i / {c}) % {ow}, y = (i / ({c} * {ow})) % {oh}, "
            f"b = i / ({c} * {ow} * {oh});")


def _image_checks(kc: KernelContext) -> None:
    """The C forward kernels' checks, on the host (``c_ops/image_resize.py``)."""
    _size(kc, checks=True)
    x = kc.inputs[0]
    kc.check(f"({x.dim(1)} > 0 && {x.dim(2)} > 0) || ({x.dim(0)}) * ({x.dim(3)}) == 0",
             "input image must be of non-zero size")


class _Forward:
    """What both forward kernels start from: the checks and helpers, the launch, the output and
    image pointers, the image's dims and the two scales, and the loop head that finds output
    element i's pixel (b, y, x, c)."""

    def __init__(self, kc: KernelContext, name: str):
        _image_checks(kc)
        _helpers(kc)
        x, out = kc.inputs[0], kc.out
        self.ac, self.hp = _flags(kc)
        self.launch = launch = CudaLaunch(kc, name)
        self.o, self.px = launch.ptr(out, writable=True), launch.ptr(x)
        v = launch.value
        self.h, self.w, self.c = v(x.dim(1)), v(x.dim(2)), v(x.dim(3))
        self.sh = _scale(launch, self.ac, x.dim(1), out.dim(1))
        self.sw = _scale(launch, self.ac, x.dim(2), out.dim(2))
        self.head = (f"{kc.target.grid_stride_loop('i', v(out.size))} {{\n"
                     f"    {_pixel(launch, out)}\n")


def _bilinear(kc: KernelContext) -> str:
    k = _Forward(kc, "resize_bilinear")
    o, px, h, w, c, sh, sw, hp = k.o, k.px, k.h, k.w, k.c, k.sh, k.sw, k.hp
    body = (k.head +
            "    int64_t y0, y1, x0, x1; float ly, lx;\n"
            f"    flowc_bilinear_taps(y, {sh}, {h}, {int(hp)}, 0, &y0, &y1, &ly);\n"
            f"    flowc_bilinear_taps(x, {sw}, {w}, {int(hp)}, 0, &x0, &x1, &lx);\n"
            f"    const int64_t r0 = (b * {h} + y0) * {w}, r1 = (b * {h} + y1) * {w};\n"
            f"    const float tl = (float){px}[(r0 + x0) * {c} + c], "
            f"tr = (float){px}[(r0 + x1) * {c} + c];\n"
            f"    const float bl = (float){px}[(r1 + x0) * {c} + c], "
            f"br = (float){px}[(r1 + x1) * {c} + c];\n"
            "    const float top = tl + __fmul_rn(tr - tl, lx);\n"
            "    const float bottom = bl + __fmul_rn(br - bl, lx);\n"
            f"    {o}[i] = top + __fmul_rn(bottom - top, ly);\n}}")
    return k.launch.launch(body, kc.out.size)


def _nearest(kc: KernelContext) -> str:
    k = _Forward(kc, "resize_nearest")
    o, px, h, w, c, sh, sw, ac, hp = k.o, k.px, k.h, k.w, k.c, k.sh, k.sw, k.ac, k.hp
    body = (k.head +
            f"    const int64_t iy = flowc_nearest_index(y, {sh}, {h}, {int(ac)}, {int(hp)}, 0);\n"
            f"    const int64_t ix = flowc_nearest_index(x, {sw}, {w}, {int(ac)}, {int(hp)}, 0);\n"
            f"    {o}[i] = {px}[((b * {h} + iy) * {w} + ix) * {c} + c];\n}}")
    return k.launch.launch(body, kc.out.size)


def _bilinear_grad(kc: KernelContext) -> str:
    """dx[b, y, x, c] = the sum over the resized pixels (ry, rx) whose taps include (y, x)
    of grads[b, ry, rx, c] times the tap's weight (products in float32, sums in T)."""
    bilinear_grad_checks(kc)
    _helpers(kc)
    g, out = kc.inputs[0], kc.out
    ac, hp = _flags(kc)
    t = out.ctype
    launch = CudaLaunch(kc, "resize_bilinear_grad")
    o, pg = launch.ptr(out, writable=True), launch.ptr(g)
    v = launch.value
    rh, rw, c = v(g.dim(1)), v(g.dim(2)), v(g.dim(3))
    oh, ow = v(out.dim(1)), v(out.dim(2))
    sh, sw = _scale(launch, ac, out.dim(1), g.dim(1)), _scale(launch, ac, out.dim(2), g.dim(2))
    hpi = int(hp)

    def add(cond: str, wy: str, wx: str) -> str:
        return f"if ({cond}) acc += ({t})__fmul_rn(__fmul_rn(d, {wy}), {wx});"

    body = (f"{kc.target.grid_stride_loop('i', v(out.size))} {{\n"
            f"    {_pixel(launch, out)}\n"
            # the resized rows (columns) whose upper tap is >= y and lower tap <= y
            f"    const int64_t ry0 = flowc_bilinear_first(y, {rh}, {sh}, {oh}, {hpi}, 1);\n"
            f"    const int64_t ry1 = flowc_bilinear_first(y + 1, {rh}, {sh}, {oh}, {hpi}, 0);\n"
            f"    const int64_t rx0 = flowc_bilinear_first(x, {rw}, {sw}, {ow}, {hpi}, 1);\n"
            f"    const int64_t rx1 = flowc_bilinear_first(x + 1, {rw}, {sw}, {ow}, {hpi}, 0);\n"
            f"    {t} acc = 0;\n"
            "    for (int64_t ry = ry0; ry < ry1; ry++) {\n"
            "        int64_t y0, y1; float ly;\n"
            f"        flowc_bilinear_taps(ry, {sh}, {oh}, {hpi}, 1, &y0, &y1, &ly);\n"
            "        const float iy = 1.0f - ly;\n"
            f"        const float *row = {pg} + (b * {rh} + ry) * {rw} * {c} + c;\n"
            "        for (int64_t rx = rx0; rx < rx1; rx++) {\n"
            "            int64_t x0, x1; float lx;\n"
            f"            flowc_bilinear_taps(rx, {sw}, {ow}, {hpi}, 1, &x0, &x1, &lx);\n"
            "            const float ix = 1.0f - lx;\n"
            f"            const float d = row[rx * {c}];\n"
            f"            {add('y0 == y && x0 == x', 'iy', 'ix')}\n"
            f"            {add('y0 == y && x1 == x', 'iy', 'lx')}\n"
            f"            {add('y1 == y && x0 == x', 'ly', 'ix')}\n"
            f"            {add('y1 == y && x1 == x', 'ly', 'lx')}\n"
            "        }\n"
            "    }\n"
            f"    {o}[i] = acc;\n}}")
    return launch.launch(body, out.size)


def _nearest_grad(kc: KernelContext) -> str:
    """dx[b, y, x, c] = the sum of grads[b, ry, rx, c] over the resized pixels whose nearest
    source is (y, x): integers added as unsigned (wrapping), as the C kernel adds."""
    nearest_grad_checks(kc)
    _helpers(kc)
    g, out = kc.inputs[0], kc.out
    ac, hp = _flags(kc)
    t = out.ctype
    acc_t = _UNSIGNED.get(out.dtype.ir_name, t)
    launch = CudaLaunch(kc, "resize_nearest_grad")
    o, pg = launch.ptr(out, writable=True), launch.ptr(g)
    v = launch.value
    rh, rw, c = v(g.dim(1)), v(g.dim(2)), v(g.dim(3))
    oh, ow = v(out.dim(1)), v(out.dim(2))
    sh, sw = _scale(launch, ac, out.dim(1), g.dim(1)), _scale(launch, ac, out.dim(2), g.dim(2))
    flags = f"{int(ac)}, {int(hp)}"
    body = (f"{kc.target.grid_stride_loop('i', v(out.size))} {{\n"
            f"    {_pixel(launch, out)}\n"
            f"    const int64_t ry0 = flowc_nearest_first(y, {rh}, {sh}, {oh}, {flags});\n"
            f"    const int64_t rx0 = flowc_nearest_first(x, {rw}, {sw}, {ow}, {flags});\n"
            f"    {acc_t} acc = 0;\n"
            f"    for (int64_t ry = ry0; ry < {rh} && "
            f"flowc_nearest_index(ry, {sh}, {oh}, {flags}, 1) == y; ry++) {{\n"
            f"        const {t} *row = {pg} + (b * {rh} + ry) * {rw} * {c} + c;\n"
            f"        for (int64_t rx = rx0; rx < {rw} && "
            f"flowc_nearest_index(rx, {sw}, {ow}, {flags}, 1) == x; rx++)\n"
            f"            acc = ({acc_t})(acc + ({acc_t})row[rx * {c}]);\n"
            "    }\n"
            f"    {o}[i] = ({t})acc;\n}}")
    return launch.launch(body, out.size)


def _typed(*dtypes: DType):
    def supports(node: Node) -> bool:
        return node.attrs.get("T") in dtypes
    return supports


register_cuda_kernel("ResizeBilinear", _bilinear, host_inputs=(1,))
register_cuda_kernel("ResizeNearestNeighbor", _nearest, host_inputs=(1,))
register_cuda_kernel("ResizeBilinearGrad", _bilinear_grad,
                     supports=_typed(DType.f32, DType.f64, DType.f16, DType.bf16))
register_cuda_kernel("ResizeNearestNeighborGrad", _nearest_grad, host_inputs=(1,),
                     supports=_typed(DType.u8, DType.i8, DType.i32, DType.f32, DType.f64,
                                     DType.f16, DType.bf16))
