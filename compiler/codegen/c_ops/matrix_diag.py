"""The C lowering of the band and diagonal ops (``compiler/ops/matrix_diag.py``): loops over
each matrix's rows and columns (or its packed diagonals), with TensorFlow's checks at run time.

The diagonal offsets ``k`` (and MatrixDiag's num_rows/num_cols) must be constants: the packed
layout depends on them. The matrices' dims may be known only at run time.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from compiler.codegen.kernel_context import KernelContext, product
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.matrix_diag import band_of, diag_len, diag_matrix_size, op_align

_HELPERS = """\
static inline int64_t flowc_diag_len(int64_t d, int64_t rows, int64_t cols) {
    const int64_t a = rows + (d < 0 ? d : 0), b = cols - (d > 0 ? d : 0);
    const int64_t n = a < b ? a : b;
    return n > 0 ? n : 0;
}
static inline int64_t flowc_diag_max_len(int64_t lo, int64_t hi, int64_t rows, int64_t cols) {
    int64_t m = 0;
    for (int64_t d = lo; d <= hi; d++) {
        const int64_t n = flowc_diag_len(d, rows, cols);
        if (n > m) m = n;
    }
    return m;
}
/* where diagonal d starts in its packed row: 0 when left-aligned */
static inline int64_t flowc_diag_offset(int64_t d, int64_t rows, int64_t cols, int64_t max_len,
                                        int left_super, int left_sub) {
    const int left = d >= 0 ? left_super : left_sub;
    return left ? 0 : max_len - flowc_diag_len(d, rows, cols);
}"""


def _helpers(kc: KernelContext) -> None:
    kc.module.add_global(_HELPERS)


def _band(kc: KernelContext, i: int) -> Tuple[int, int]:
    if len(kc.node.inputs) <= i:
        return 0, 0
    v = kc.input_value(i)
    if v is None:
        raise kc.static_error(f"the C backend needs a constant k for {kc.node.op}")
    try:
        return band_of(v)
    except ValueError as e:
        raise kc.error(str(e)) from None


def _align(kc: KernelContext) -> Tuple[int, int]:
    try:
        align = op_align(kc.node)
    except ValueError as e:
        raise kc.error(str(e)) from None
    return int(align.startswith("LEFT")), int(align.endswith("LEFT"))


def _pad(kc: KernelContext, i: int) -> str:
    if len(kc.node.inputs) <= i:
        return kc.literal(0, kc.out.dtype)
    kc.check_scalar(i, "padding_value")
    return f"{kc.inputs[i].data}[0]"


# MatrixBandPart ---------------------------------------------------------------------------

def _band_part_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    rows, cols = x.dim(-2), x.dim(-1)
    kc.check_scalar(1, "num_lower")
    kc.check_scalar(2, "num_upper")
    lower, upper = f"(int64_t){kc.inputs[1].data}[0]", f"(int64_t){kc.inputs[2].data}[0]"
    kc.check(f"{lower} <= {rows}", "num_lower must be negative or less or equal to number "
             "of rows (%lld) got: %lld", f"(long long)({rows})", f"(long long){lower}")
    kc.check(f"{upper} <= {cols}", "num_upper must be negative or less or equal to number "
             "of columns (%lld) got: %lld", f"(long long)({cols})", f"(long long){upper}")
    T = x.ctype
    return f"""\
{{
    const int64_t count = {x.dim_product(0, x.rank - 2)}, rows = {rows}, cols = {cols};
    const int64_t lower = {lower}, upper = {upper};
    const {T} *x = {x.data};
    {T} *o = {kc.out.data};
    for (int64_t b = 0; b < count; b++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {{
                const int64_t at = (b * rows + r) * cols + c;
                const int in_band = (lower < 0 || r - c <= lower) && (upper < 0 || c - r <= upper);
                o[at] = in_band ? x[at] : ({T})0;
            }}
}}"""


set_c_kernel("MatrixBandPart", _band_part_c, lambda kc: [kc.inputs[0].dims])


# MatrixDiagPart ---------------------------------------------------------------------------

def _part_out_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    lo, hi = _band(kc, 1)
    if x.rank < 2:
        raise kc.error("input must be at least 2-dim")
    _helpers(kc)
    band = [] if lo == hi else [str(hi - lo + 1)]
    max_len = f"flowc_diag_max_len({lo}, {hi}, {x.dim(-2)}, {x.dim(-1)})"
    if x.shape[-2] is not None and x.shape[-1] is not None:
        rows, cols = x.shape[-2], x.shape[-1]
        max_len = str(max(diag_len(d, rows, cols) for d in range(lo, hi + 1)))
    return [x.dims[:-2] + band + [max_len]]


def _bounds_check(kc: KernelContext, lo: int, hi: int, rows: str, cols: str) -> None:
    kc.check(f"({rows}) * ({cols}) == 0 || (-({rows}) < {lo} && {hi} < ({cols}))",
             f"the diagonals {lo}..{hi} are out of bounds for a %lldx%lld matrix",
             f"(long long)({rows})", f"(long long)({cols})")


def _part_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    lo, hi = _band(kc, 1)
    left_super, left_sub = _align(kc)
    pad = _pad(kc, 2)
    rows, cols = x.dim(-2), x.dim(-1)
    _bounds_check(kc, lo, hi, rows, cols)
    max_len = _part_out_dims(kc)[0][-1]
    T = x.ctype
    return f"""\
{{
    const int64_t count = {x.dim_product(0, x.rank - 2)}, rows = {rows}, cols = {cols};
    const int64_t max_len = {max_len};
    const {T} *x = {x.data};
    {T} *o = {kc.out.data};
    const {T} pad = {pad};
    for (int64_t b = 0; b < count; b++)
        for (int64_t d = {hi}; d >= {lo}; d--) {{
            const int64_t n = flowc_diag_len(d, rows, cols);
            const int64_t off = flowc_diag_offset(d, rows, cols, max_len, {left_super}, {left_sub});
            {T} *row = o + (b * {hi - lo + 1} + ({hi} - d)) * max_len;
            for (int64_t j = 0; j < max_len; j++) {{
                const int64_t i = j - off;
                row[j] = (i >= 0 && i < n)
                    ? x[(b * rows + i - (d < 0 ? d : 0)) * cols + i + (d > 0 ? d : 0)] : pad;
            }}
        }}
}}"""


for _name in ("MatrixDiagPart", "MatrixDiagPartV2", "MatrixDiagPartV3"):
    set_c_kernel(_name, _part_c, _part_out_dims)


# MatrixDiag -------------------------------------------------------------------------------

def _diag_plan(kc: KernelContext):
    """(lo, hi, rows, cols): the output's rows and cols as C expressions."""
    lo, hi = _band(kc, 1)
    d = kc.inputs[0]
    if len(kc.node.inputs) > 1:
        sizes = [kc.input_value(i) for i in (2, 3)]
        if any(v is None for v in sizes):
            raise kc.static_error(f"the C backend needs constant num_rows and num_cols for "
                                  f"{kc.node.op}")
        want_rows, want_cols = (int(np.reshape(v, -1)[0]) for v in sizes)
    else:
        want_rows = want_cols = -1
    max_len = d.dim(-1)
    min_rows, min_cols = f"({max_len} - ({min(hi, 0)}))", f"({max_len} + {max(lo, 0)})"
    both = f"({min_rows} > {min_cols} ? {min_rows} : {min_cols})"
    if want_rows == -1 and want_cols == -1:
        rows = cols = both
    else:
        rows = min_rows if want_rows == -1 else str(want_rows)
        cols = min_cols if want_cols == -1 else str(want_cols)
    if d.shape[-1] is not None:
        try:
            r, c = diag_matrix_size(d.shape[-1], lo, hi, want_rows, want_cols)
        except ValueError as e:
            raise kc.error(str(e)) from None
        rows, cols = str(r), str(c)
    return lo, hi, rows, cols, min_rows, min_cols


def _diag_out_dims(kc: KernelContext) -> List[List[str]]:
    lo, hi, rows, cols, _, _ = _diag_plan(kc)
    d = kc.inputs[0]
    batch = d.dims[:-1] if lo == hi else d.dims[:-2]
    return [batch + [rows, cols]]


def _diag_c(kc: KernelContext) -> str:
    d = kc.inputs[0]
    lo, hi, rows, cols, min_rows, min_cols = _diag_plan(kc)
    _helpers(kc)
    left_super, left_sub = _align(kc)
    pad = _pad(kc, 4)
    if lo != hi:
        kc.check_dims_equal(d.dim(-2), str(hi - lo + 1), "The number of diagonals provided in "
                            "the input does not match the lower_diag_index and "
                            "upper_diag_index range")
    kc.check(f"{rows} >= {min_rows} && {cols} >= {min_cols} && "
             f"({rows} == {min_rows} || {cols} == {min_cols})",
             "The number of rows or columns is not consistent with the specified d_lower, "
             "d_upper, and diagonal.")
    count = d.dim_product(0, d.rank - (1 if lo == hi else 2))
    T = d.ctype
    return f"""\
{{
    const int64_t count = {count}, rows = {rows}, cols = {cols}, max_len = {d.dim(-1)};
    const {T} *x = {d.data};
    {T} *o = {kc.out.data};
    const {T} pad = {pad};
    for (int64_t b = 0; b < count; b++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {{
                const int64_t dg = c - r;
                {T} v = pad;
                if (dg >= {lo} && dg <= {hi}) {{
                    const int64_t off = flowc_diag_offset(dg, rows, cols, max_len,
                                                          {left_super}, {left_sub});
                    v = x[(b * {hi - lo + 1} + ({hi} - dg)) * max_len + (r < c ? r : c) + off];
                }}
                o[(b * rows + r) * cols + c] = v;
            }}
}}"""


for _name in ("MatrixDiag", "MatrixDiagV2", "MatrixDiagV3"):
    set_c_kernel(_name, _diag_c, _diag_out_dims)


# MatrixSetDiag ----------------------------------------------------------------------------

def _set_c(kc: KernelContext) -> str:
    x, dg = kc.inputs[0], kc.inputs[1]
    lo, hi = _band(kc, 2)
    _helpers(kc)
    left_super, left_sub = _align(kc)
    rows, cols = x.dim(-2), x.dim(-1)
    _bounds_check(kc, lo, hi, rows, cols)
    band = 1 if lo == hi else 2
    if dg.rank != x.rank - 2 + band:
        raise kc.error(f"diagonal must have rank {x.rank - 2 + band}, got {dg.rank}")
    for k in range(x.rank - 2):
        kc.check_dims_equal(dg.dim(k), x.dim(k), f"diagonal's dim {k} must match input's")
    if band == 2:
        kc.check_dims_equal(dg.dim(-2), str(hi - lo + 1), "diagonal's number of diagonals")
    max_len = f"flowc_diag_max_len({lo}, {hi}, {rows}, {cols})"
    kc.check(f"({rows}) * ({cols}) == 0 || {dg.dim(-1)} == {max_len}",
             "diagonal's last dim must be the longest diagonal's length: %lld != %lld",
             f"(long long)({dg.dim(-1)})", f"(long long)({max_len})")
    T = x.ctype
    return f"""\
{{
    const int64_t count = {x.dim_product(0, x.rank - 2)}, rows = {rows}, cols = {cols};
    const int64_t max_len = {dg.dim(-1)};
    const {T} *x = {x.data}, *v = {dg.data};
    {T} *o = {kc.out.data};
    for (int64_t b = 0; b < count; b++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {{
                const int64_t at = (b * rows + r) * cols + c, dg = c - r;
                if (dg >= {lo} && dg <= {hi}) {{
                    const int64_t off = flowc_diag_offset(dg, rows, cols, max_len,
                                                          {left_super}, {left_sub});
                    o[at] = v[(b * {hi - lo + 1} + ({hi} - dg)) * max_len + (r < c ? r : c) + off];
                }} else {{
                    o[at] = x[at];
                }}
            }}
}}"""


for _name in ("MatrixSetDiag", "MatrixSetDiagV2", "MatrixSetDiagV3"):
    set_c_kernel(_name, _set_c, lambda kc: [kc.inputs[0].dims])


# Diag and DiagPart ------------------------------------------------------------------------

def _diag_full_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    T = x.ctype
    return f"""\
{{
    const int64_t n = {x.size};
    const {T} *x = {x.data};
    {T} *o = {kc.out.data};
    for (int64_t i = 0; i < n * n; i++) o[i] = ({T})0;
    for (int64_t i = 0; i < n; i++) o[i * (n + 1)] = x[i];
}}"""


set_c_kernel("Diag", _diag_full_c, lambda kc: [kc.inputs[0].dims + kc.inputs[0].dims])


def _diag_part_full_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    if x.rank % 2 or not x.rank:
        raise kc.error(f"The rank of the tensor should be even and positive, got {x.rank}")
    return [x.dims[:x.rank // 2]]


def _diag_part_full_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    half = _diag_part_full_dims(kc)[0]
    for k, d in enumerate(half):
        kc.check_dims_equal(d, x.dim(k + len(half)), f"dims {k} and {k + len(half)} of the "
                            "input must match")
    T = x.ctype
    return f"""\
{{
    const int64_t n = {product(half)};
    const {T} *x = {x.data};
    {T} *o = {kc.out.data};
    for (int64_t i = 0; i < n; i++) o[i] = x[i * (n + 1)];
}}"""


set_c_kernel("DiagPart", _diag_part_full_c, _diag_part_full_dims)
