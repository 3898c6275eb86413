"""The C lowering of NonMaxSuppressionV5 (``compiler/ops/non_max_suppression.py``):
TensorFlow's selection loop over a binary heap of candidates (highest score first, equal
scores lower index first). The outputs are sized by the selection (``c_owns_outputs``); the
scalar inputs are checked before anything is allocated."""
from __future__ import annotations

from compiler.codegen.c_ops.reduction import module_helper
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _helpers(kc: KernelContext, t: str, name: str) -> str:
    """The candidate heap and IOU functions for element type ``t``; returns their suffix."""
    module_helper(kc, f"flowc_nms_{name}", "\n".join([
        f"typedef struct {{ {t} score; int64_t index; int64_t begin; }} flowc_nms_cand_{name};",
        f"static int flowc_nms_before_{name}(const flowc_nms_cand_{name} *a, "
        f"const flowc_nms_cand_{name} *b) {{",
        "    return a->score > b->score || (a->score == b->score && a->index < b->index);",
        "}",
        f"static void flowc_nms_push_{name}(flowc_nms_cand_{name} *h, int64_t *n, "
        f"flowc_nms_cand_{name} c) {{",
        "    int64_t i = (*n)++;",
        "    while (i > 0) {",
        "        const int64_t p = (i - 1) / 2;",
        f"        if (!flowc_nms_before_{name}(&c, &h[p])) break;",
        "        h[i] = h[p]; i = p;",
        "    }",
        "    h[i] = c;",
        "}",
        f"static flowc_nms_cand_{name} flowc_nms_pop_{name}(flowc_nms_cand_{name} *h, "
        "int64_t *n) {",
        f"    const flowc_nms_cand_{name} top = h[0], last = h[--(*n)];",
        "    int64_t i = 0;",
        "    for (;;) {",
        "        int64_t c = 2 * i + 1;",
        "        if (c >= *n) break;",
        f"        if (c + 1 < *n && flowc_nms_before_{name}(&h[c + 1], &h[c])) c++;",
        f"        if (!flowc_nms_before_{name}(&h[c], &last)) break;",
        "        h[i] = h[c]; i = c;",
        "    }",
        "    if (*n > 0) h[i] = last;",
        "    return top;",
        "}",
        f"static {t} flowc_nms_min_{name}({t} a, {t} b) {{ return a < b ? a : b; }}",
        f"static {t} flowc_nms_max_{name}({t} a, {t} b) {{ return a > b ? a : b; }}",
        f"static {t} flowc_nms_iou_{name}(const {t} *bx, int64_t i, int64_t j) {{",
        f"    const {t} *a = bx + 4 * i, *b = bx + 4 * j;",
        f"    const {t} ymin_i = flowc_nms_min_{name}(a[0], a[2]), "
        f"ymax_i = flowc_nms_max_{name}(a[0], a[2]);",
        f"    const {t} xmin_i = flowc_nms_min_{name}(a[1], a[3]), "
        f"xmax_i = flowc_nms_max_{name}(a[1], a[3]);",
        f"    const {t} ymin_j = flowc_nms_min_{name}(b[0], b[2]), "
        f"ymax_j = flowc_nms_max_{name}(b[0], b[2]);",
        f"    const {t} xmin_j = flowc_nms_min_{name}(b[1], b[3]), "
        f"xmax_j = flowc_nms_max_{name}(b[1], b[3]);",
        f"    const {t} area_i = (ymax_i - ymin_i) * (xmax_i - xmin_i);",
        f"    const {t} area_j = (ymax_j - ymin_j) * (xmax_j - xmin_j);",
        "    if (area_i <= 0 || area_j <= 0) return 0;",
        f"    const {t} inter = flowc_nms_max_{name}(flowc_nms_min_{name}(ymax_i, ymax_j) - "
        f"flowc_nms_max_{name}(ymin_i, ymin_j), 0) * flowc_nms_max_{name}("
        f"flowc_nms_min_{name}(xmax_i, xmax_j) - flowc_nms_max_{name}(xmin_i, xmin_j), 0);",
        "    return inter / (area_i + area_j - inter);",
        "}"]))
    return name


def _nms_c(kc: KernelContext) -> str:
    boxes, scores = kc.inputs[0], kc.inputs[1]
    sel_out, score_out, count_out = kc.outputs
    t = boxes.ctype
    name = _helpers(kc, t, boxes.dtype.ir_name)
    for i, what in ((2, "max_output_size"), (3, "iou_threshold"), (4, "score_threshold"),
                    (5, "soft_nms_sigma")):
        kc.check_scalar(i, what)
    kc.check_dims_equal(boxes.dim(1), "4", "boxes must be [num_boxes, 4]")
    kc.check_dims_equal(scores.dim(0), boxes.dim(0), "scores must have one entry per box")
    max_out = f"((int64_t){kc.inputs[2].data}[0])"
    iou_t, score_t, sigma = (f"{kc.inputs[i].data}[0]" for i in (3, 4, 5))
    kc.check(f"{iou_t} >= 0 && {iou_t} <= 1", "iou_threshold must be in [0, 1]")
    kc.check(f"{sigma} >= 0", "soft_nms_sigma must be non-negative")
    kc.check(f"{max_out} >= 0", "max_output_size must be non-negative")
    exp = kc.math("exp", boxes.dtype)
    pad = bool(kc.attr("pad_to_max_output_size"))
    cand = f"flowc_nms_cand_{name}"
    cleanup = "free(heap); free(sel); free(sel_scores);"

    def alloc(ref, count: str, rank: int) -> list:
        dims = [f"{ref.var}.dims[0] = {count};"] if rank else []
        return [f"memset(&{ref.var}, 0, sizeof {ref.var});",
                f"{ref.var}.rank = {rank}; {ref.var}.dtype = {ref.dtype.code};", *dims,
                f"{ref.var}.data = flowc_alloc((size_t)({count}) * sizeof({ref.ctype}) + 1);",
                f"if (!{ref.var}.data) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED",
                                                   cleanup=cleanup)]
    return "\n".join([
        f"const {t} *bx = {boxes.data}, *sc = {scores.data};",
        f"const int64_t n = {boxes.dim(0)}, max_out = {max_out};",
        f"const {t} iou_t = {iou_t}, score_t = {score_t}, sigma = {sigma};",
        "const int64_t cap = max_out < n ? max_out : n;",
        f"{cand} *heap = ({cand} *)malloc((size_t)(n + 1) * sizeof({cand}));",
        "int64_t *sel = (int64_t *)malloc((size_t)(cap + 1) * sizeof(int64_t));",
        f"{t} *sel_scores = ({t} *)malloc((size_t)(cap + 1) * sizeof({t}));",
        "if (!heap || !sel || !sel_scores) " + kc.fail(
            "out of memory", code="FLOWC_RESOURCE_EXHAUSTED", cleanup=cleanup),
        "int64_t hn = 0, count = 0;",
        "for (int64_t i = 0; i < n; i++) {",
        f"    if (sc[i] > score_t) {{ {cand} c = {{sc[i], i, 0}}; "
        f"flowc_nms_push_{name}(heap, &hn, c); }}",
        "}",
        "const int soft = sigma > 0;",
        f"const {t} scale = soft ? ({t})-0.5 / sigma : 0;",
        "while (count < max_out && hn > 0) {",
        f"    {cand} c = flowc_nms_pop_{name}(heap, &hn);",
        f"    const {t} original = c.score;",
        "    int hard = 0;",
        "    for (int64_t j = count - 1; j >= c.begin; j--) {",
        f"        const {t} sim = flowc_nms_iou_{name}(bx, c.index, sel[j]);",
        f"        const {t} weight = {exp}(scale * sim * sim);",
        f"        c.score *= (soft || sim <= iou_t) ? weight : ({t})0;",
        "        if (!soft && sim > iou_t) { hard = 1; break; }",
        "        if (c.score <= score_t) break;",
        "    }",
        "    if (hard) continue;",
        "    c.begin = count;",
        "    if (c.score == original) {",
        "        sel[count] = c.index; sel_scores[count] = c.score; count++;",
        "        continue;",
        "    }",
        f"    if (c.score > score_t) flowc_nms_push_{name}(heap, &hn, c);",
        "}",
        f"const int64_t m = {'max_out' if pad else 'count'};",
        *alloc(sel_out, "m", 1),
        *alloc(score_out, "m", 1),
        *alloc(count_out, "1", 0),
        "{",
        f"    int32_t *so = (int32_t *){sel_out.var}.data;",
        f"    {t} *ss = ({t} *){score_out.var}.data;",
        "    for (int64_t i = 0; i < m; i++) {",
        "        so[i] = i < count ? (int32_t)sel[i] : 0;",
        "        ss[i] = i < count ? sel_scores[i] : 0;",
        "    }",
        f"    *(int32_t *){count_out.var}.data = (int32_t)count;",
        "}",
        "free(heap); free(sel); free(sel_scores);"])


set_c_kernel("NonMaxSuppressionV5", _nms_c, c_owns_outputs=True)
