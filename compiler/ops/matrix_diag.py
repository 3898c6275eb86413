"""Band and diagonal ops over the last two dims, as TensorFlow defines them: MatrixBandPart,
MatrixDiag / MatrixDiagPart / MatrixSetDiag (V1, V2 and V3), Diag and DiagPart.

The V2/V3 ops take a diagonal offset ``k`` (one int, or a pair ``[lo, hi]`` of a band of
diagonals); with a band, diagonal ``d`` is row ``hi - d`` of the packed ``[..., hi-lo+1, L]``
array. Diagonals shorter than ``L`` are padded on one side: V3's ``align`` says which
("RIGHT_LEFT": superdiagonals (d >= 0) right-aligned, subdiagonals left-aligned); V2 packs
them all left (LEFT_LEFT). The C kernels are ``compiler/codegen/c_ops/matrix_diag.py``'s.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str
from compiler.ops.array.common import _check_scalar_input, _reference

ALIGNS = ("LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT")
_ALIGN_ATTR = 'align: string = "RIGHT_LEFT"'


def diag_len(d: int, rows: int, cols: int) -> int:
    """The length of diagonal ``d`` of a rows x cols matrix."""
    return max(0, min(rows + min(0, d), cols - max(0, d)))


def diag_offset(d: int, length: int, max_len: int, align: str) -> int:
    """Where diagonal ``d`` (``length`` long) starts in its packed row of ``max_len``."""
    left = align.startswith("LEFT") if d >= 0 else align.endswith("LEFT")
    return 0 if left else max_len - length


def band_of(k) -> Tuple[int, int]:
    """(lo, hi) from a ``k`` value: one int or a pair; ValueError in TensorFlow's words."""
    v = [int(x) for x in np.reshape(k, -1)]
    if len(v) not in (1, 2):
        raise ValueError(f"diag_index must be a scalar or vector with 1 or 2 elements, got "
                         f"{len(v)} elements")
    lo, hi = v[0], v[-1]
    if lo > hi:
        raise ValueError(f"lower_diag_index must not be greater than upper_diag_index, got "
                         f"{lo} > {hi}")
    return lo, hi


def op_align(node) -> str:
    """The op's alignment: V3's attr, LEFT_LEFT for V1/V2."""
    align = node.attrs.get("align", "LEFT_LEFT")
    if align not in ALIGNS:
        raise ValueError(f"align must be one of {', '.join(ALIGNS)}, got {align!r}")
    return align


def _k_of(ctx, i: int) -> Optional[Tuple[int, int]]:
    v = ctx.input_value(i)
    if v is None:
        return None
    try:
        return band_of(v)
    except ValueError as e:
        raise ctx.error(str(e)) from None


def _check_align(ctx) -> None:
    try:
        op_align(ctx.node)
    except ValueError as e:
        raise ctx.error(str(e)) from None


def _matrix_rank(ctx, s, what: str = "input") -> None:
    if s is not None and len(s) < 2:
        raise ctx.error(f"{what} must be at least 2-dim, received shape: {shape_str(s)}")


# MatrixBandPart ---------------------------------------------------------------------------

def _band_shape(ctx):
    s = ctx.input_shape(0)
    _matrix_rank(ctx, s)
    for i in (1, 2):
        _check_scalar_input(ctx, i)
    return [s]


def band_mask(rows: int, cols: int, lower: int, upper: int) -> np.ndarray:
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    return ((lower < 0) | (r - c <= lower)) & ((upper < 0) | (c - r <= upper))


@_reference
def _band_kernel(ctx, x, num_lower, num_upper):
    if x.ndim < 2:
        raise ValueError(f"input must be at least 2-dim, received shape: {list(x.shape)}")
    for name, v in (("num_lower", num_lower), ("num_upper", num_upper)):
        if np.size(v) != 1:
            raise ValueError(f"{name} must be a scalar, got shape {list(np.shape(v))}")
    rows, cols = x.shape[-2:]
    lower, upper = int(np.reshape(num_lower, -1)[0]), int(np.reshape(num_upper, -1)[0])
    if lower > rows:
        raise ValueError(f"num_lower must be negative or less or equal to number of rows "
                         f"({rows}) got: {lower}")
    if upper > cols:
        raise ValueError(f"num_upper must be negative or less or equal to number of columns "
                         f"({cols}) got: {upper}")
    return np.where(band_mask(rows, cols, lower, upper), x, np.zeros((), x.dtype))


register_op("MatrixBandPart", inputs=["input: T", "num_lower: Tindex", "num_upper: Tindex"],
            outputs=["band: T"], attrs=["T: {all}", "Tindex: {i32, i64} = i64"],
            shape=_band_shape, kernel=_band_kernel, group="other",
            doc="input with everything outside the central band of each matrix (num_lower "
                "subdiagonals, num_upper superdiagonals; negative: all) set to zero.")


# MatrixDiagPart ---------------------------------------------------------------------------

def _part_dims(rows, cols, lo: int, hi: int):
    if rows is None or cols is None:
        return None
    return max(diag_len(d, rows, cols) for d in range(lo, hi + 1))


def _part_shape(ctx):
    s = ctx.input_shape(0)
    _matrix_rank(ctx, s)
    _check_align(ctx)
    if len(ctx.node.inputs) > 1:
        _check_scalar_input(ctx, 2)
        k = _k_of(ctx, 1)
    else:
        k = (0, 0)
    if s is None or k is None:
        return [None]
    lo, hi = k
    rows, cols = s[-2], s[-1]
    if rows is not None and cols is not None and not (-rows < lo and hi < cols) \
            and rows * cols > 0:
        raise ctx.error(f"the diagonals {lo}..{hi} are out of bounds for a {rows}x{cols} "
                        "matrix")
    band = () if lo == hi else (hi - lo + 1,)
    return [tuple(s[:-2]) + band + (_part_dims(rows, cols, lo, hi),)]


def matrix_diag_part(x: np.ndarray, lo: int, hi: int, pad, align: str) -> np.ndarray:
    """The packed diagonals lo..hi of each matrix of ``x`` (the reference semantics)."""
    rows, cols = x.shape[-2:]
    if rows * cols and not (-rows < lo and hi < cols):
        raise ValueError(f"the diagonals {lo}..{hi} are out of bounds for a {rows}x{cols} "
                         "matrix (need -rows < k <= cols - 1)")
    max_len = _part_dims(rows, cols, lo, hi) if rows * cols else 0
    out = np.full(x.shape[:-2] + (hi - lo + 1, max_len), pad, x.dtype)
    for d in range(lo, hi + 1):
        n = diag_len(d, rows, cols)
        off = diag_offset(d, n, max_len, align)
        i = np.arange(n)
        out[..., hi - d, off:off + n] = x[..., i - min(0, d), i + max(0, d)]
    return out[..., 0, :] if lo == hi else out


def _scalar_of(v, name: str):
    if np.size(v) != 1:
        raise ValueError(f"{name} must be a scalar, got shape {list(np.shape(v))}")
    return np.reshape(v, -1)[0]


@_reference
def _part_kernel(ctx, x, k=None, pad=None):
    if x.ndim < 2:
        raise ValueError(f"input must be at least 2-dim, received shape: {list(x.shape)}")
    lo, hi = (0, 0) if k is None else band_of(k)
    pad = 0 if pad is None else _scalar_of(pad, "padding_value")
    return matrix_diag_part(x, lo, hi, pad, op_align(ctx.node))


register_op("MatrixDiagPart", inputs=["input: T"], outputs=["diagonal: T"], attrs=["T: {all}"],
            shape=_part_shape, kernel=_part_kernel, group="other",
            doc="The main diagonal of each matrix in the last two dims.")
register_op("MatrixDiagPartV2", inputs=["input: T", "k: i32", "padding_value: T"],
            outputs=["diagonal: T"], attrs=["T: {all}"],
            shape=_part_shape, kernel=_part_kernel, group="other",
            doc="Diagonals k (one, or a band [lo, hi]) of each matrix, packed left-aligned.")
register_op("MatrixDiagPartV3", inputs=["input: T", "k: i32", "padding_value: T"],
            outputs=["diagonal: T"], attrs=["T: {all}", _ALIGN_ATTR],
            shape=_part_shape, kernel=_part_kernel, group="other",
            doc="Diagonals k (one, or a band [lo, hi]) of each matrix, packed as align says.")


# MatrixDiag -------------------------------------------------------------------------------

def diag_matrix_size(max_len: int, lo: int, hi: int, rows: int, cols: int) -> Tuple[int, int]:
    """The output's rows and cols (-1: inferred), with TensorFlow's checks."""
    min_rows, min_cols = max_len - min(hi, 0), max_len + max(lo, 0)
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    elif rows == -1:
        rows = min_rows
    elif cols == -1:
        cols = min_cols
    if rows < min_rows:
        raise ValueError(f"The number of rows is too small: {rows} < {min_rows}")
    if cols < min_cols:
        raise ValueError(f"The number of columns is too small: {cols} < {min_cols}")
    if rows != min_rows and cols != min_cols:
        raise ValueError("The number of rows or columns is not consistent with the specified "
                         "d_lower, d_upper, and diagonal.")
    return rows, cols


def _diag_args(ctx) -> Optional[Tuple[int, int, int, int]]:
    """(lo, hi, rows, cols) when k, num_rows and num_cols are constants."""
    if len(ctx.node.inputs) == 1:
        return 0, 0, -1, -1
    for i in (2, 3, 4):
        _check_scalar_input(ctx, i)
    k = _k_of(ctx, 1)
    sizes = [ctx.input_value(i) for i in (2, 3)]
    if k is None or any(v is None for v in sizes):
        return None
    return k + tuple(int(np.reshape(v, -1)[0]) for v in sizes)


def _diag_shape(ctx):
    s = ctx.input_shape(0)
    _check_align(ctx)
    args = _diag_args(ctx)
    if s is not None and len(s) < 1:
        raise ctx.error(f"diagonal must be at least 1-dim, received shape: {shape_str(s)}")
    if s is None or args is None:
        return [None]
    lo, hi, rows, cols = args
    batch = tuple(s[:-1])
    if lo != hi:
        if len(s) < 2:
            raise ctx.error(f"diagonal must be at least 2-dim for a band of diagonals, "
                            f"received shape: {shape_str(s)}")
        if s[-2] is not None and s[-2] != hi - lo + 1:
            raise ctx.error(f"The number of diagonals provided in the input does not match "
                            f"the lower_diag_index and upper_diag_index range: {s[-2]} vs "
                            f"{hi - lo + 1}")
        batch = tuple(s[:-2])
    if s[-1] is None:
        return [batch + (None, None)]
    try:
        return [batch + diag_matrix_size(s[-1], lo, hi, rows, cols)]
    except ValueError as e:
        raise ctx.error(str(e)) from None


def matrix_diag(diag: np.ndarray, lo: int, hi: int, rows: int, cols: int, pad,
                align: str) -> np.ndarray:
    """Matrices with the packed diagonals lo..hi of ``diag`` and ``pad`` elsewhere."""
    if lo == hi:
        diag = diag[..., None, :]
    elif diag.ndim < 2 or diag.shape[-2] != hi - lo + 1:
        raise ValueError(f"The number of diagonals provided in the input does not match the "
                         f"lower_diag_index and upper_diag_index range: got shape "
                         f"{list(diag.shape)} for {hi - lo + 1} diagonals")
    max_len = diag.shape[-1]
    rows, cols = diag_matrix_size(max_len, lo, hi, rows, cols)
    out = np.full(diag.shape[:-2] + (rows, cols), pad, diag.dtype)
    for d in range(lo, hi + 1):
        n = diag_len(d, rows, cols)
        off = diag_offset(d, n, max_len, align)
        i = np.arange(n)
        out[..., i - min(0, d), i + max(0, d)] = diag[..., hi - d, off:off + n]
    return out


@_reference
def _diag_kernel(ctx, diag, k=None, num_rows=None, num_cols=None, pad=None):
    if diag.ndim < 1:
        raise ValueError(f"diagonal must be at least 1-dim, received shape: "
                         f"{list(diag.shape)}")
    if k is None:
        lo = hi = 0
        rows = cols = -1
        pad = 0
    else:
        lo, hi = band_of(k)
        rows = int(_scalar_of(num_rows, "num_rows"))
        cols = int(_scalar_of(num_cols, "num_cols"))
        pad = _scalar_of(pad, "padding_value")
    return matrix_diag(diag, lo, hi, rows, cols, pad, op_align(ctx.node))


_DIAG_INPUTS = ["diagonal: T", "k: i32", "num_rows: i32", "num_cols: i32",
                "padding_value: T"]
register_op("MatrixDiag", inputs=["diagonal: T"], outputs=["output: T"], attrs=["T: {all}"],
            shape=_diag_shape, kernel=_diag_kernel, group="other",
            doc="Square matrices with diagonal on their main diagonal and zeros elsewhere.")
register_op("MatrixDiagV2", inputs=_DIAG_INPUTS, outputs=["output: T"], attrs=["T: {all}"],
            shape=_diag_shape, kernel=_diag_kernel, group="other",
            doc="Matrices with the (left-aligned) diagonals k and padding_value elsewhere.")
register_op("MatrixDiagV3", inputs=_DIAG_INPUTS, outputs=["output: T"],
            attrs=["T: {all}", _ALIGN_ATTR], shape=_diag_shape, kernel=_diag_kernel,
            group="other",
            doc="Matrices with the diagonals k (packed as align says) and padding_value "
                "elsewhere.")


# MatrixSetDiag ----------------------------------------------------------------------------

def _set_shape(ctx):
    s, ds = ctx.input_shape(0), ctx.input_shape(1)
    _matrix_rank(ctx, s)
    _check_align(ctx)
    k = _k_of(ctx, 2) if len(ctx.node.inputs) > 2 else (0, 0)
    if s is not None and ds is not None and k is not None:
        want = _part_shape_for(s, k)
        if len(ds) != len(want) or any(a is not None and b is not None and a != b
                                       for a, b in zip(ds, want)):
            raise ctx.error(f"diagonal must have shape {shape_str(want)} for input of shape "
                            f"{shape_str(s)}, got {shape_str(ds)}")
    return [s]


def _part_shape_for(s, k) -> tuple:
    lo, hi = k
    band = () if lo == hi else (hi - lo + 1,)
    return tuple(s[:-2]) + band + (_part_dims(s[-2], s[-1], lo, hi),)


def matrix_set_diag(x: np.ndarray, diag: np.ndarray, lo: int, hi: int,
                    align: str) -> np.ndarray:
    rows, cols = x.shape[-2:]
    if rows * cols and not (-rows < lo and hi < cols):
        raise ValueError(f"the diagonals {lo}..{hi} are out of bounds for a {rows}x{cols} "
                         "matrix (need -rows < k <= cols - 1)")
    want = _part_shape_for(x.shape, (lo, hi)) if rows * cols else None
    if want is not None and diag.shape != want:
        raise ValueError(f"diagonal must have shape {list(want)} for input of shape "
                         f"{list(x.shape)}, got {list(diag.shape)}")
    out = x.copy()
    if want is None:
        return out
    if lo == hi:
        diag = diag[..., None, :]
    max_len = diag.shape[-1]
    for d in range(lo, hi + 1):
        n = diag_len(d, rows, cols)
        off = diag_offset(d, n, max_len, align)
        i = np.arange(n)
        out[..., i - min(0, d), i + max(0, d)] = diag[..., hi - d, off:off + n]
    return out


@_reference
def _set_kernel(ctx, x, diag, k=None):
    if x.ndim < 2:
        raise ValueError(f"input must be at least 2-dim, received shape: {list(x.shape)}")
    lo, hi = (0, 0) if k is None else band_of(k)
    return matrix_set_diag(x, diag, lo, hi, op_align(ctx.node))


register_op("MatrixSetDiag", inputs=["input: T", "diagonal: T"], outputs=["output: T"],
            attrs=["T: {all}"], shape=_set_shape, kernel=_set_kernel, group="other",
            doc="input with the main diagonal of each matrix replaced by diagonal.")
register_op("MatrixSetDiagV2", inputs=["input: T", "diagonal: T", "k: i32"],
            outputs=["output: T"], attrs=["T: {all}"], shape=_set_shape, kernel=_set_kernel,
            group="other", doc="input with its diagonals k replaced (packed left-aligned).")
register_op("MatrixSetDiagV3", inputs=["input: T", "diagonal: T", "k: i32"],
            outputs=["output: T"], attrs=["T: {all}", _ALIGN_ATTR], shape=_set_shape,
            kernel=_set_kernel, group="other",
            doc="input with its diagonals k replaced (packed as align says).")


# Diag and DiagPart ------------------------------------------------------------------------

_DIAG_TYPES = "T: {bf16, f16, f32, f64, i32, i64}"


def _diag_full_shape(ctx):
    s = ctx.input_shape(0)
    if s is not None and len(s) < 1:
        raise ctx.error(f"Input must be at least rank 1, got shape {shape_str(s)}")
    return [None if s is None else tuple(s) + tuple(s)]


@_reference
def _diag_full_kernel(ctx, x):
    if x.ndim < 1:
        raise ValueError(f"Input must be at least rank 1, got shape {list(x.shape)}")
    n = x.size
    out = np.zeros((n, n), x.dtype)
    out[np.arange(n), np.arange(n)] = x.reshape(-1)
    return out.reshape(x.shape + x.shape)


def _diag_part_full_shape(ctx):
    s = ctx.input_shape(0)
    if s is None:
        return [None]
    half = len(s) // 2
    if len(s) % 2 or not s:
        raise ctx.error(f"The rank of the tensor should be even and positive, got shape "
                        f"{shape_str(s)}")
    out = []
    for a, b in zip(s[:half], s[half:]):
        if a is not None and b is not None and a != b:
            raise ctx.error(f"Invalid shape {shape_str(s)}: dimensions {a} and {b} do not "
                            "match.")
        out.append(a if a is not None else b)
    return [tuple(out)]


@_reference
def _diag_part_full_kernel(ctx, x):
    half = x.ndim // 2
    if x.ndim % 2 or not x.ndim or x.shape[:half] != x.shape[half:]:
        raise ValueError(f"The input must have an even, positive rank and shape D + D, got "
                         f"shape {list(x.shape)}")
    n = int(np.prod(x.shape[:half]))
    return np.ascontiguousarray(x.reshape(n, n)[np.arange(n), np.arange(n)]
                                .reshape(x.shape[:half]))


register_op("Diag", inputs=["diagonal: T"], outputs=["output: T"], attrs=[_DIAG_TYPES],
            shape=_diag_full_shape, kernel=_diag_full_kernel, group="other",
            doc="A tensor of shape D + D with diagonal on its diagonal, zeros elsewhere.")
register_op("DiagPart", inputs=["input: T"], outputs=["diagonal: T"], attrs=[_DIAG_TYPES],
            shape=_diag_part_full_shape, kernel=_diag_part_full_kernel, group="other",
            doc="The diagonal of a tensor of shape D + D (Diag's inverse).")

