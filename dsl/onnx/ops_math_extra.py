"""ONNX lowerings onto flowc's transcendental, activation, scan and bitwise ops
(``compiler/ops/{math_special,activations,scan,bitwise}.py``): one flowc op per ONNX node
where their semantics agree, a few elementwise ops around it where ONNX defines more
(BitShift's out-of-range shifts, IsInf's sign flags, Selu's alpha and gamma, Gelu), and the
cosine-sum window generators (Hann, Hamming, Blackman) built from Range and Cos."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

import dsl as fl
from dsl.onnx.dtypes import flowc_dtype, onnx_type_name
from dsl.nn_activations import gelu
from dsl.onnx.errors import NotConstantError
from dsl.onnx.values import binary, scalar, unary
from dsl.ops import apply_op
from runtime.dtypes import DType

# ONNX Selu's default attrs (float32 values); with both, flowc's Selu op is the same function
_SELU_ALPHA = np.float32(1.67326319217681884765625)
_SELU_GAMMA = np.float32(1.05070102214813232421875)


def _unary_op(op: str):
    def lower(ctx):
        return unary(op, ctx.input(0))
    lower.__name__ = f"lower_{op.lower()}"
    return lower


def _binary_op(op: str):
    def lower(ctx):
        return binary(op, ctx.input(0), ctx.input(1))
    lower.__name__ = f"lower_{op.lower()}"
    return lower


# --- activations -----------------------------------------------------------------------------
def lower_leaky_relu(ctx):
    return apply_op("LeakyRelu", [ctx.input(0)], {"alpha": float(ctx.attr("alpha", 0.01))})


def lower_selu(ctx):
    x = ctx.input(0)
    alpha = np.float32(ctx.attr("alpha", _SELU_ALPHA))
    gamma = np.float32(ctx.attr("gamma", _SELU_GAMMA))
    if alpha == _SELU_ALPHA and gamma == _SELU_GAMMA:
        return unary("Selu", x)
    negative = binary("Mul", unary("Expm1", x), scalar(alpha, x))
    return binary("Mul", fl.where_v2(binary("Greater", x, scalar(0, x)), x, negative),
                  scalar(gamma, x))


def lower_gelu(ctx):
    approximate = ctx.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ctx.error(f"approximate must be 'none' or 'tanh', got '{approximate}'")
    return gelu(ctx.input(0), approximate=approximate == "tanh")


def lower_swiglu(ctx):
    """Swish(A) * B with Swish's alpha: ``A * sigmoid(alpha * A) * B`` (one fused kernel)."""
    a, b = ctx.input(0), ctx.input(1)
    gate = binary("Mul", a, unary("Sigmoid", binary("Mul", a, scalar(ctx.attr("alpha", 1.0), a))))
    return binary("Mul", gate, b)


# --- float classification ----------------------------------------------------------------------
def lower_isinf(ctx):
    x = ctx.input(0)
    want_pos, want_neg = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    if not (want_pos or want_neg):
        return binary("Less", x, scalar(-np.inf, x))           # nothing is below -inf
    inf = unary("IsInf", x)
    if want_pos and want_neg:
        return inf
    side = binary("Greater" if want_pos else "Less", x, scalar(0, x))
    return binary("LogicalAnd", inf, side)


# --- scans -----------------------------------------------------------------------------------
def _scan_axis(ctx):
    """The axis input as a 0-D tensor (exporters also write a 1-element 1-D one)."""
    try:
        value = ctx.const(1, "axis")
    except NotConstantError:
        return apply_op("Reshape", [ctx.input(1), fl.constant(np.zeros(0, np.int64))])
    if value.size != 1:
        raise ctx.error(f"axis must hold one value, got shape {list(value.shape)}")
    return fl.constant(value.reshape(()), dtype=ctx.input(1).dtype)


def _scan(op: str):
    def lower(ctx):
        attrs = {"exclusive": bool(ctx.attr("exclusive", 0)),
                 "reverse": bool(ctx.attr("reverse", 0))}
        return apply_op(op, [ctx.input(0), _scan_axis(ctx)], attrs)
    lower.__name__ = f"lower_{op.lower()}"
    return lower


# --- bit shifts ------------------------------------------------------------------------------
def lower_bit_shift(ctx):
    """ONNX's shift: an amount below 0 or of the width or more gives what the sign fill alone
    gives (-1 for a right shift of a negative signed x, else 0); flowc's (TensorFlow's) ops
    clamp the amount instead, so those lanes are selected apart."""
    x, y = ctx.input(0), ctx.input(1)
    direction = ctx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"direction must be 'LEFT' or 'RIGHT', got '{direction}'")
    bits = 8 * x.dtype.itemsize
    in_range = binary("Less", y, scalar(bits, y))
    if x.dtype.is_signed:
        in_range = binary("LogicalAnd", in_range, binary("GreaterEqual", y, scalar(0, y)))
    if direction == "LEFT":
        return fl.where_v2(in_range, binary("LeftShift", x, y), scalar(0, x))
    fill = binary("RightShift", x, scalar(bits - 1, x)) if x.dtype.is_signed else scalar(0, x)
    return fl.where_v2(in_range, binary("RightShift", x, y), fill)


# --- window functions --------------------------------------------------------------------------
# cosine-sum windows: w[n] = sum_k a_k cos(2 pi k n / N), N = size (periodic) or size - 1
_WINDOWS = {"HannWindow": (0.5, -0.5), "HammingWindow": (25 / 46, -21 / 46),
            "BlackmanWindow": (0.42, -0.5, 0.08)}


def _window(op_type: str):
    terms = _WINDOWS[op_type]

    def lower(ctx):
        elem = ctx.attr("output_datatype", TensorProto.FLOAT)
        out = flowc_dtype(elem)
        if out is None or out is DType.bool:
            raise ctx.error(f"output_datatype {onnx_type_name(elem)} is not a flowc number type")
        size = apply_op("Reshape", [ctx.input(0), fl.constant(np.zeros(0, np.int64))])
        one = scalar(1, size)
        n = fl.cast(apply_op("Range", [scalar(0, size), size, one]), DType.f64)
        period = size if ctx.attr("periodic", 1) else binary("Sub", size, one)
        angle = binary("RealDiv", binary("Mul", n, fl.constant(2 * np.pi, dtype=DType.f64)),
                       fl.cast(period, DType.f64))
        w = scalar(terms[0], angle)
        for k, a in enumerate(terms[1:], start=1):
            harmonic = angle if k == 1 else binary("Mul", angle, scalar(k, angle))
            w = binary("AddV2", w, binary("Mul", unary("Cos", harmonic), scalar(a, angle)))
        return fl.cast(w, out)
    lower.__name__ = f"lower_{op_type.lower()}"
    return lower


LOWERINGS = {
    "Sin": [(7, None, _unary_op("Sin"))],
    "Cos": [(7, None, _unary_op("Cos"))],
    "Tan": [(7, None, _unary_op("Tan"))],
    "Asin": [(7, None, _unary_op("Asin"))],
    "Acos": [(7, None, _unary_op("Acos"))],
    "Atan": [(7, None, _unary_op("Atan"))],
    "Sinh": [(9, None, _unary_op("Sinh"))],
    "Cosh": [(9, None, _unary_op("Cosh"))],
    "Asinh": [(9, None, _unary_op("Asinh"))],
    "Acosh": [(9, None, _unary_op("Acosh"))],
    "Atanh": [(9, None, _unary_op("Atanh"))],
    "Erf": [(9, None, _unary_op("Erf"))],
    "Gelu": [(20, None, lower_gelu)],
    "Softsign": [(1, None, _unary_op("Softsign"))],
    "LeakyRelu": [(6, None, lower_leaky_relu)],
    "Selu": [(6, None, lower_selu)],
    "SwiGLU": [(28, None, lower_swiglu)],
    "IsNaN": [(9, None, _unary_op("IsNan"))],
    "IsInf": [(10, None, lower_isinf)],
    "CumSum": [(11, None, _scan("Cumsum"))],
    "CumProd": [(26, None, _scan("Cumprod"))],
    "BitShift": [(11, None, lower_bit_shift)],
    "BitwiseAnd": [(18, None, _binary_op("BitwiseAnd"))],
    "BitwiseOr": [(18, None, _binary_op("BitwiseOr"))],
    "BitwiseXor": [(18, None, _binary_op("BitwiseXor"))],
    "BitwiseNot": [(18, None, _unary_op("Invert"))],
    "HannWindow": [(17, None, _window("HannWindow"))],
    "HammingWindow": [(17, None, _window("HammingWindow"))],
    "BlackmanWindow": [(17, None, _window("BlackmanWindow"))],
}
