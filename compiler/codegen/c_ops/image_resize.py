"""The C lowering of ResizeBilinear and ResizeNearestNeighbor (``compiler/ops/image_resize.py``):
the size may be fed (its elements are read at run time and checked positive); source rows and
columns are computed per output pixel in float32 as the reference kernels do."""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import Value, _c, _check_alloc, _elements, _is_int
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _size(kc: KernelContext, checks: bool) -> List[Value]:
    size = _elements(kc, 1, 2)
    if checks:
        if not _is_int(*size):
            kc.check(f"{_c(size[0])} > 0 && {_c(size[1])} > 0",
                     "output dimensions must be positive, got [%lld, %lld]",
                     f"(long long){_c(size[0])}", f"(long long){_c(size[1])}")
        x = kc.inputs[0]
        _check_alloc(kc, [x.dim(0) if x.shape[0] is None else x.shape[0], size[0], size[1],
                          x.dim(3) if x.shape[3] is None else x.shape[3]],
                     kc.out.dtype.itemsize)
    return size


def _dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    h, w = _size(kc, checks=False)
    return [[x.dim(0), _c(h), _c(w), x.dim(3)]]


def _prologue(kc: KernelContext) -> List[str]:
    x, out = kc.inputs[0], kc.out
    ac = "1" if kc.attrs.get("align_corners") else "0"
    kc.check(f"({x.dim(1)} > 0 && {x.dim(2)} > 0) || ({x.dim(0)}) * ({x.dim(3)}) == 0",
             "input image must be of non-zero size")
    lines = [f"const int64_t N = {x.dim(0)}, H = {x.dim(1)}, W = {x.dim(2)}, C = {x.dim(3)};",
             f"const int64_t OH = {out.dim(1)}, OW = {out.dim(2)};"]
    for scale, i, o in (("sh", "H", "OH"), ("sw", "W", "OW")):
        lines.append(f"const float {scale} = ({ac} && {o} > 1) ? (float)({i} - 1) / "
                     f"(float)({o} - 1) : (float){i} / (float){o};")
    return lines


def _bilinear_c(kc: KernelContext) -> str:
    _size(kc, checks=True)
    x, out = kc.inputs[0], kc.out
    hp = bool(kc.attrs.get("half_pixel_centers"))

    def taps(o: str, scale: str, n: str, v: str) -> List[str]:
        pos = f"((float){o} + 0.5f) * {scale} - 0.5f" if hp else f"(float){o} * {scale}"
        return [f"const float p{v} = {pos};",
                f"const float f{v} = floorf(p{v});",
                f"const int64_t {v}0 = f{v} < 0.0f ? 0 : (int64_t)f{v};",
                f"int64_t {v}1 = (int64_t)ceilf(p{v}); if ({v}1 > {n} - 1) {v}1 = {n} - 1;",
                f"const float l{v} = p{v} - f{v};"]

    lines = _prologue(kc)
    lines += ["if (N * C > 0) {",
              "for (int64_t oy = 0; oy < OH; oy++) {"]
    lines += ["    " + t for t in taps("oy", "sh", "H", "y")]
    lines += ["    for (int64_t ox = 0; ox < OW; ox++) {"]
    lines += ["        " + t for t in taps("ox", "sw", "W", "x")]
    lines += ["        for (int64_t b = 0; b < N; b++) {",
              "            const int64_t r0 = (b * H + y0) * W, r1 = (b * H + y1) * W;",
              f"            const {x.ctype} *tl = {x.data} + (r0 + x0) * C, "
              f"*tr = {x.data} + (r0 + x1) * C;",
              f"            const {x.ctype} *bl = {x.data} + (r1 + x0) * C, "
              f"*br = {x.data} + (r1 + x1) * C;",
              f"            float *o = {out.data} + ((b * OH + oy) * OW + ox) * C;",
              "            for (int64_t c = 0; c < C; c++) {",
              "                const float top = (float)tl[c] + ((float)tr[c] - (float)tl[c]) "
              "* lx;",
              "                const float bottom = (float)bl[c] + ((float)br[c] - (float)bl[c]) "
              "* lx;",
              "                o[c] = top + (bottom - top) * ly;",
              "            }",
              "        }",
              "    }",
              "}",
              "}"]
    return "{\n" + "\n".join("    " + ln for ln in lines) + "\n}"


def _nearest_c(kc: KernelContext) -> str:
    _size(kc, checks=True)
    x, out = kc.inputs[0], kc.out
    ac, hp = bool(kc.attrs.get("align_corners")), bool(kc.attrs.get("half_pixel_centers"))

    def index(o: str, scale: str, n: str, v: str) -> List[str]:
        pos = f"((float){o} + 0.5f) * {scale}" if hp else f"(float){o} * {scale}"
        rounded = f"roundf({pos})" if ac else f"floorf({pos})"
        lines = [f"int64_t {v} = (int64_t){rounded};", f"if ({v} > {n} - 1) {v} = {n} - 1;"]
        if hp:
            lines.append(f"if ({v} < 0) {v} = 0;")
        return lines

    lines = _prologue(kc)
    lines += ["if (N * C > 0) {",
              "for (int64_t oy = 0; oy < OH; oy++) {"]
    lines += ["    " + t for t in index("oy", "sh", "H", "iy")]
    lines += ["    for (int64_t ox = 0; ox < OW; ox++) {"]
    lines += ["        " + t for t in index("ox", "sw", "W", "ix")]
    lines += ["        for (int64_t b = 0; b < N; b++) {",
              f"            memcpy({out.data} + ((b * OH + oy) * OW + ox) * C, "
              f"{x.data} + ((b * H + iy) * W + ix) * C, (size_t)C * sizeof({x.ctype}));",
              "        }",
              "    }",
              "}",
              "}"]
    return "{\n" + "\n".join("    " + ln for ln in lines) + "\n}"


set_c_kernel("ResizeBilinear", _bilinear_c, _dims)
set_c_kernel("ResizeNearestNeighbor", _nearest_c, _dims)
