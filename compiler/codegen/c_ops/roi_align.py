"""The C lowering of ``_RoiAlign`` (``compiler/ops/roi_align.py``): every batch index is
checked before anything is written; per box, a table of its samples (four corner offsets
and weights, in double precision) is built once and read for every channel."""
from __future__ import annotations

from typing import List

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.roi_align import MAX_SAMPLES


def _roi_align_dims(kc: KernelContext) -> List[List[str]]:
    x, rois, idx = kc.inputs
    kc.check_dims_equal(rois.dim(1), "4", "rois must be [num_rois, 4]")
    kc.check_dims_equal(idx.dim(0), rois.dim(0), "batch_indices must have one entry per roi")
    return [[rois.dim(0), x.dim(1), str(kc.attr("output_height")), str(kc.attr("output_width"))]]


def _boxes(kc: KernelContext, x, rois, idx, per_channel: List[str], out_ref) -> str:
    """C: the batch index checks, then per box its sample table, then ``per_channel`` (with
    ``b``, ``c``, ``r``, ``xc``, ``table`` and ``per_bin`` in scope) for every channel."""
    ph, pw = int(kc.attr("output_height")), int(kc.attr("output_width"))
    ratio = int(kc.attr("sampling_ratio"))
    scale = repr(float(kc.attr("spatial_scale")))
    half = bool(kc.attr("half_pixel"))
    check = kc.fail("batch_indices[%lld] = %lld is not in [0, %lld)", "(long long)r",
                    "(long long)b", "(long long)N")
    kc.checks.append("\n".join([
        "{",
        f"    const {idx.ctype} *bi = {idx.data};",
        f"    const int64_t N = {x.dim(0)};",
        f"    for (int64_t r = 0; r < {rois.dim(0)}; r++) {{",
        "        const int64_t b = (int64_t)bi[r];",
        f"        if (b < 0 || b >= N) {check}",
        "    }",
        "}"]))
    too_many = kc.fail("a box [%g, %g, %g, %g] needs %g samples per bin",
                       "(double)rp[0]", "(double)rp[1]", "(double)rp[2]", "(double)rp[3]",
                       "g", cleanup="free(table);")

    def grid(size: str) -> str:
        return f"const double g = {ratio} > 0 ? (double){ratio} : ceil({size});"
    return "\n".join([
        f"const {x.ctype} *xd = {x.data};",
        f"const {rois.ctype} *rd = {rois.data};",
        f"const {idx.ctype} *bi = {idx.data};",
        f"{out_ref.ctype} *yd = {out_ref.data};",
        f"const int64_t C = {x.dim(1)}, H = {x.dim(2)}, W = {x.dim(3)}, R = {rois.dim(0)};",
        "typedef struct { int64_t pos[4]; double w[4]; } flowc_roi_sample;",
        "flowc_roi_sample *table = NULL;",
        "for (int64_t r = 0; r < R; r++) {",
        f"    const {rois.ctype} *rp = rd + 4 * r;",
        f"    const double off = {'0.5' if half else '0.0'};",
        f"    const double sw = (double)rp[0] * {scale} - off, sh = (double)rp[1] * {scale} - off;",
        f"    double rw = (double)rp[2] * {scale} - off - sw, rh = (double)rp[3] * {scale} - off"
        " - sh;",
        *([] if half else ["    rw = rw > 1.0 ? rw : 1.0; rh = rh > 1.0 ? rh : 1.0;"]),
        f"    const double bh = rh / {ph}, bw = rw / {pw};",
        "    int64_t gh, gw;",
        "    {",
        "        " + grid("bh"),
        f"        if (!(g >= 0 && g <= {MAX_SAMPLES})) {too_many}",
        "        gh = (int64_t)g;",
        "    }",
        "    {",
        "        " + grid("bw"),
        f"        if (!(g >= 0 && g <= {MAX_SAMPLES})) {too_many}",
        "        gw = (int64_t)g;",
        "    }",
        "    const int64_t per_bin = gh * gw;",
        "    free(table);",
        f"    table = (flowc_roi_sample *)malloc((size_t)({ph * pw} * per_bin + 1) * "
        "sizeof(flowc_roi_sample));",
        "    if (!table) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
        "    flowc_roi_sample *t = table;",
        f"    for (int64_t i = 0; i < {ph}; i++) for (int64_t j = 0; j < {pw}; j++)",
        "    for (int64_t iy = 0; iy < gh; iy++) {",
        "        const double yy = sh + i * bh + (iy + 0.5) * bh / gh;",
        "        for (int64_t ix = 0; ix < gw; ix++, t++) {",
        "            double y = yy, xx = sw + j * bw + (ix + 0.5) * bw / gw;",
        "            if (y < -1.0 || y > (double)H || xx < -1.0 || xx > (double)W || H <= 0 || "
        "W <= 0) {",
        "                for (int q = 0; q < 4; q++) { t->pos[q] = 0; t->w[q] = 0; }",
        "                continue;",
        "            }",
        "            if (y < 0) y = 0;",
        "            if (xx < 0) xx = 0;",
        "            int64_t yl = (int64_t)y, xl = (int64_t)xx, yh, xh;",
        "            if (yl >= H - 1) { yh = yl = H - 1; y = (double)yl; } else yh = yl + 1;",
        "            if (xl >= W - 1) { xh = xl = W - 1; xx = (double)xl; } else xh = xl + 1;",
        "            const double ly = y - yl, lx = xx - xl, hy = 1.0 - ly, hx = 1.0 - lx;",
        "            t->pos[0] = yl * W + xl; t->pos[1] = yl * W + xh;",
        "            t->pos[2] = yh * W + xl; t->pos[3] = yh * W + xh;",
        "            t->w[0] = hy * hx; t->w[1] = hy * lx; t->w[2] = ly * hx; t->w[3] = ly * lx;",
        "        }",
        "    }",
        "    const int64_t b = (int64_t)bi[r];",
        "    for (int64_t c = 0; c < C; c++) {",
        f"        const {x.ctype} *xc = xd + (b * C + c) * H * W;",
        *per_channel,
        "        (void)xc;",
        "    }",
        "}",
        "free(table);",
        "(void)yd;"])


# the maximum of the four weighted corners of each sample, then over the samples: the first
# maximum in sample and corner order (``best_s``, ``best_q``)
_MAX_SEARCH = [
    "            double acc = 0;",
    "            int64_t best_s = -1; int best_q = 0;",
    "            for (int64_t s = 0; s < per_bin; s++) {",
    "                const flowc_roi_sample *ts = t + s;",
    "                double v = ts->w[0] * (double)xc[ts->pos[0]]; int vq = 0;",
    "                for (int q = 1; q < 4; q++) {",
    "                    const double u = ts->w[q] * (double)xc[ts->pos[q]];",
    "                    if (u > v) { v = u; vq = q; }",
    "                }",
    "                if (s == 0 || v > acc) { acc = v; best_s = s; best_q = vq; }",
    "            }"]


def _roi_align_c(kc: KernelContext) -> str:
    x, rois, idx = kc.inputs
    out = kc.out
    bins = int(kc.attr("output_height")) * int(kc.attr("output_width"))
    if kc.attr("mode") == "avg":
        reduce_lines = [
            "            double acc = 0;",
            "            for (int64_t s = 0; s < per_bin; s++) {",
            "                const flowc_roi_sample *ts = t + s;",
            "                acc += ts->w[0] * (double)xc[ts->pos[0]] + ts->w[1] * "
            "(double)xc[ts->pos[1]] + ts->w[2] * (double)xc[ts->pos[2]] + ts->w[3] * "
            "(double)xc[ts->pos[3]];",
            "            }",
            "            acc /= (double)(per_bin > 0 ? per_bin : 1);"]
    else:
        reduce_lines = _MAX_SEARCH + ["            (void)best_s; (void)best_q;"]
    return _boxes(kc, x, rois, idx, [
        f"        {out.ctype} *yo = yd + (r * C + c) * {bins};",
        f"        for (int64_t k = 0; k < {bins}; k++) {{",
        "            const flowc_roi_sample *t = table + k * per_bin;",
        *reduce_lines,
        f"            yo[k] = ({out.ctype})acc;",
        "        }"], out)


def _roi_align_grad_c(kc: KernelContext) -> str:
    dy, x, rois, idx = kc.inputs
    out = kc.out
    bins = int(kc.attr("output_height")) * int(kc.attr("output_width"))
    if kc.attr("mode") == "avg":
        spread = [
            "            const double share = g / (double)(per_bin > 0 ? per_bin : 1);",
            "            for (int64_t s = 0; s < per_bin; s++)",
            "                for (int q = 0; q < 4; q++)",
            f"                    xg[t[s].pos[q]] += ({out.ctype})(share * t[s].w[q]);"]
    else:
        spread = _MAX_SEARCH + [
            "            if (best_s >= 0) xg[t[best_s].pos[best_q]] += "
            f"({out.ctype})(g * t[best_s].w[best_q]);"]
    return "\n".join([
        f"if ({x.size} > 0) memset({out.data}, 0, (size_t)({x.size}) * sizeof({out.ctype}));",
        f"const {dy.ctype} *gd = {dy.data};",
        _boxes(kc, x, rois, idx, [
            f"        {out.ctype} *xg = yd + (b * C + c) * H * W;",
            f"        for (int64_t k = 0; k < {bins}; k++) {{",
            "            const flowc_roi_sample *t = table + k * per_bin;",
            f"            const double g = (double)gd[(r * C + c) * {bins} + k];",
            *spread,
            "        }"], out)])


set_c_kernel("_RoiAlign", _roi_align_c, _roi_align_dims)


def _roi_align_grad_dims(kc: KernelContext) -> List[List[str]]:
    dy, x, rois, idx = kc.inputs
    kc.check_dims_equal(rois.dim(1), "4", "rois must be [num_rois, 4]")
    kc.check_dims_equal(idx.dim(0), rois.dim(0), "batch_indices must have one entry per roi")
    for k, (a, want) in enumerate(zip(dy.dims, [rois.dim(0), x.dim(1),
                                                str(kc.attr("output_height")),
                                                str(kc.attr("output_width"))])):
        kc.check_dims_equal(a, want, f"the gradient's dim {k} must match the output's")
    return [x.dims]


set_c_kernel("_RoiAlignGrad", _roi_align_grad_c, _roi_align_grad_dims)
