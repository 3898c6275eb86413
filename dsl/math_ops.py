"""TensorFlow-named math functions (``fl.add``, ``fl.cast``, ``fl.where``, ...) and the Tensor
operator overloads (``+ - * / // % ** @``, unary ``-``, ``abs()``, ``< <= > >=``, ``& | ^ ~``:
logical on bool tensors, bitwise on integers, as in TensorFlow 2).

Python scalars, lists and numpy values on either side of a binary function are converted to
the tensor side's dtype (``x + 1`` on f32 stays f32). ``==`` and ``!=`` stay identity tests, as
in TensorFlow 1.x; ``fl.equal`` compares values.
"""
from __future__ import annotations

from typing import Optional, Sequence

from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType, as_dtype

__all__ = [
    "add", "subtract", "multiply", "divide", "truediv", "realdiv", "floordiv", "floormod", "mod",
    "maximum", "minimum", "pow", "squared_difference", "add_n",
    "negative", "abs", "sign", "square", "sqrt", "rsqrt", "exp", "log", "log1p", "reciprocal",
    "tanh", "sigmoid", "floor", "ceil", "round", "cast",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_not", "logical_and", "logical_or", "logical_xor", "where", "where_v2",
    "unsorted_segment_sum", "div_no_nan", "divide_no_nan",
]

# truediv's int -> float promotion (as tf.math.truediv)
_TRUEDIV_FLOAT = {DType.i8: DType.f32, DType.i16: DType.f32, DType.u8: DType.f32,
                  DType.u16: DType.f32, DType.i32: DType.f64, DType.i64: DType.f64,
                  DType.u32: DType.f64, DType.u64: DType.f64}


def _binary_operands(x, y):
    """Convert the non-tensor side to the tensor side's dtype (``x + 1`` on f32 stays f32)."""
    if type(x) is Tensor and type(y) is Tensor:
        return x, y
    if isinstance(x, Tensor) and not isinstance(y, Tensor):
        y = convert_to_tensor(y, dtype=x.dtype)
    elif isinstance(y, Tensor) and not isinstance(x, Tensor):
        x = convert_to_tensor(x, dtype=y.dtype)
    else:
        x = convert_to_tensor(x)
        y = convert_to_tensor(y, dtype=None if isinstance(y, Tensor) else x.dtype)
    return x, y


def _binary(op: str, x, y, name: Optional[str]) -> Tensor:
    x, y = _binary_operands(x, y)
    return apply_op(op, [x, y], name=name)


def _unary(op: str, x, name: Optional[str]) -> Tensor:
    return apply_op(op, [convert_to_tensor(x)], name=name)


# --- arithmetic ----------------------------------------------------------------------------
def add(x, y, name: Optional[str] = None) -> Tensor:
    """x + y with broadcasting (AddV2); integers wrap."""
    return _binary("AddV2", x, y, name)


def subtract(x, y, name: Optional[str] = None) -> Tensor:
    """x - y with broadcasting (Sub)."""
    return _binary("Sub", x, y, name)


def multiply(x, y, name: Optional[str] = None) -> Tensor:
    """x * y with broadcasting (Mul)."""
    return _binary("Mul", x, y, name)


def realdiv(x, y, name: Optional[str] = None) -> Tensor:
    """x / y for floats (RealDiv)."""
    return _binary("RealDiv", x, y, name)


def truediv(x, y, name: Optional[str] = None) -> Tensor:
    """x / y; integers are first cast to float (i32/i64 -> f64, smaller ints -> f32)."""
    x, y = _binary_operands(x, y)
    to = _TRUEDIV_FLOAT.get(x.dtype)
    if to is not None:
        x, y = cast(x, to), cast(y, to)
    return apply_op("RealDiv", [x, y], name=name or "truediv")


def divide(x, y, name: Optional[str] = None) -> Tensor:
    """x / y with Python 3 semantics (``truediv``)."""
    return truediv(x, y, name=name)


def floordiv(x, y, name: Optional[str] = None) -> Tensor:
    """floor(x / y) (FloorDiv); integer division by zero is a run-time error."""
    return _binary("FloorDiv", x, y, name)


def floormod(x, y, name: Optional[str] = None) -> Tensor:
    """The remainder of floor division, with the sign of y (FloorMod)."""
    return _binary("FloorMod", x, y, name)


mod = floormod


def maximum(x, y, name: Optional[str] = None) -> Tensor:
    """Elementwise max; NaN on either side gives NaN."""
    return _binary("Maximum", x, y, name)


def minimum(x, y, name: Optional[str] = None) -> Tensor:
    """Elementwise min; NaN on either side gives NaN."""
    return _binary("Minimum", x, y, name)


def pow(x, y, name: Optional[str] = None) -> Tensor:  # noqa: A001  (tf.pow)
    """x ** y (Pow); negative integer exponents are a run-time error."""
    return _binary("Pow", x, y, name)


def squared_difference(x, y, name: Optional[str] = None) -> Tensor:
    """(x - y) ** 2 with broadcasting."""
    return _binary("SquaredDifference", x, y, name)


def add_n(inputs: Sequence, name: Optional[str] = None) -> Tensor:
    """The sum of a non-empty list of tensors of one shape and dtype (AddN)."""
    if isinstance(inputs, Tensor) or not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError("add_n needs a non-empty list of tensors")
    first = next((v for v in inputs if isinstance(v, Tensor)), None)
    dtype = first.dtype if first is not None else None
    return apply_op("AddN", [[convert_to_tensor(v, dtype=dtype) for v in inputs]], name=name)


# --- unary ---------------------------------------------------------------------------------
def negative(x, name: Optional[str] = None) -> Tensor:
    """-x (Neg)."""
    return _unary("Neg", x, name)


def abs(x, name: Optional[str] = None) -> Tensor:  # noqa: A001  (tf.abs)
    """|x| (Abs)."""
    return _unary("Abs", x, name)


def sign(x, name: Optional[str] = None) -> Tensor:
    """-1, 0 or 1 (Sign)."""
    return _unary("Sign", x, name)


def square(x, name: Optional[str] = None) -> Tensor:
    """x * x (Square)."""
    return _unary("Square", x, name)


def sqrt(x, name: Optional[str] = None) -> Tensor:
    return _unary("Sqrt", x, name)


def rsqrt(x, name: Optional[str] = None) -> Tensor:
    """1 / sqrt(x) (Rsqrt)."""
    return _unary("Rsqrt", x, name)


def exp(x, name: Optional[str] = None) -> Tensor:
    return _unary("Exp", x, name)


def log(x, name: Optional[str] = None) -> Tensor:
    return _unary("Log", x, name)


def log1p(x, name: Optional[str] = None) -> Tensor:
    return _unary("Log1p", x, name)


def reciprocal(x, name: Optional[str] = None) -> Tensor:
    """1 / x (Reciprocal)."""
    return _unary("Reciprocal", x, name)


def tanh(x, name: Optional[str] = None) -> Tensor:
    return _unary("Tanh", x, name)


def sigmoid(x, name: Optional[str] = None) -> Tensor:
    return _unary("Sigmoid", x, name)


def floor(x, name: Optional[str] = None) -> Tensor:
    return _unary("Floor", x, name)


def ceil(x, name: Optional[str] = None) -> Tensor:
    return _unary("Ceil", x, name)


def round(x, name: Optional[str] = None) -> Tensor:  # noqa: A001  (tf.round)
    """Round half to even (Round)."""
    return _unary("Round", x, name)


def cast(x, dtype, name: Optional[str] = None) -> Tensor:
    """``x`` as ``dtype`` (Cast); returns ``x`` itself when it already has that dtype."""
    x = convert_to_tensor(x)
    dtype = as_dtype(dtype)
    if x.dtype == dtype:
        return x
    return apply_op("Cast", [x], {"DstT": dtype}, name=name or "Cast")


def unsorted_segment_sum(data, segment_ids, num_segments, name: Optional[str] = None) -> Tensor:
    """Rows of ``data`` summed by segment id (ids out of range are dropped), as in TF."""
    return apply_op("UnsortedSegmentSum", [data, segment_ids, num_segments], {},
                    name=name or "UnsortedSegmentSum")


# --- activations (re-exported by dsl.nn) ----------------------------------------------------
def relu(features, name: Optional[str] = None) -> Tensor:
    """max(features, 0)."""
    return _unary("Relu", features, name)


def relu6(features, name: Optional[str] = None) -> Tensor:
    """min(max(features, 0), 6)."""
    return _unary("Relu6", features, name)


def elu(features, name: Optional[str] = None) -> Tensor:
    """features if > 0 else exp(features) - 1."""
    return _unary("Elu", features, name)


def softplus(features, name: Optional[str] = None) -> Tensor:
    """log(exp(features) + 1)."""
    return _unary("Softplus", features, name)


# --- comparisons and logic -----------------------------------------------------------------
def equal(x, y, name: Optional[str] = None) -> Tensor:
    """x == y elementwise (bool)."""
    return _binary("Equal", x, y, name)


def not_equal(x, y, name: Optional[str] = None) -> Tensor:
    """x != y elementwise (bool)."""
    return _binary("NotEqual", x, y, name)


def less(x, y, name: Optional[str] = None) -> Tensor:
    return _binary("Less", x, y, name)


def less_equal(x, y, name: Optional[str] = None) -> Tensor:
    return _binary("LessEqual", x, y, name)


def greater(x, y, name: Optional[str] = None) -> Tensor:
    return _binary("Greater", x, y, name)


def greater_equal(x, y, name: Optional[str] = None) -> Tensor:
    return _binary("GreaterEqual", x, y, name)


def logical_not(x, name: Optional[str] = None) -> Tensor:
    return _unary("LogicalNot", x, name)


def logical_and(x, y, name: Optional[str] = None) -> Tensor:
    return _binary("LogicalAnd", x, y, name)


def logical_or(x, y, name: Optional[str] = None) -> Tensor:
    return _binary("LogicalOr", x, y, name)


def logical_xor(x, y, name: Optional[str] = None) -> Tensor:
    """x != y for bools, built as (x | y) & ~(x & y) as TensorFlow does."""
    x, y = _binary_operands(x, y)
    return logical_and(logical_or(x, y), logical_not(logical_and(x, y)),
                       name=name or "LogicalXor")


def where(condition, x=None, y=None, name: Optional[str] = None) -> Tensor:
    """``x`` where ``condition`` else ``y`` (TF1's ``tf.where``); with neither ``x`` nor ``y``,
    the indices of true elements (the ``Where`` op).

    As in TensorFlow 1.x, a vector condition with matrices (or higher ranks) picks rows (the
    ``Select`` op); otherwise the three broadcast (``SelectV2``, which agrees with ``Select``
    wherever ``Select`` is defined: a scalar condition, or one of the shape of x and y)."""
    if x is None and y is None:
        return apply_op("Where", [convert_to_tensor(condition)], name=name)
    if x is None or y is None:
        raise ValueError("where needs both x and y, or neither")
    condition = convert_to_tensor(condition, dtype=DType.bool)
    x, y = _binary_operands(x, y)
    if (static_shape(condition) is not None and len(static_shape(condition)) == 1 and static_shape(x) is not None
            and len(static_shape(x)) > 1):
        return apply_op("Select", [condition, x, y], name=name or "Select")
    return apply_op("SelectV2", [condition, x, y], name=name)


def where_v2(condition, x=None, y=None, name: Optional[str] = None) -> Tensor:
    """``x`` where ``condition`` else ``y``, broadcasting all three (``tf.where_v2``, TF2's
    ``tf.where``: SelectV2)."""
    if x is None and y is None:
        return apply_op("Where", [convert_to_tensor(condition)], name=name)
    if x is None or y is None:
        raise ValueError("where_v2 needs both x and y, or neither")
    condition = convert_to_tensor(condition, dtype=DType.bool)
    x, y = _binary_operands(x, y)
    return apply_op("SelectV2", [condition, x, y], name=name)


def div_no_nan(x, y, name: Optional[str] = None) -> Tensor:
    """``x / y``, and 0 where ``y`` is 0 (``tf.div_no_nan``), built so that its gradient is
    finite too: the division sees 1 where ``y`` is 0, and ``where`` then picks 0."""
    from dsl.array_ops import ones_like, zeros_like
    from dsl.context import name_scope
    with name_scope(name or "div_no_nan"):
        x, y = _binary_operands(x, y)
        zero = equal(y, convert_to_tensor(0, dtype=y.dtype))
        safe = where(zero, ones_like(y), y)
        q = realdiv(x, safe) if x.dtype.is_floating else divide(x, safe)
        return where(zero, zeros_like(q), q)


divide_no_nan = div_no_nan


# --- operator overloads ---------------------------------------------------------------------
def _matmul(a, b) -> Tensor:
    from dsl.linalg_ops import matmul
    return matmul(a, b)


def _logical_or_bitwise(logical, bitwise_op: str):
    """``& | ^`` as TensorFlow 2 has them: logical on bool tensors, bitwise on integers."""
    def fn(x, y) -> Tensor:
        x, y = _binary_operands(x, y)
        if x.dtype.is_integer:
            return apply_op(bitwise_op, [x, y])
        return logical(x, y)
    return fn


def _invert(x) -> Tensor:
    """``~x``: LogicalNot on bool tensors, Invert (every bit flipped) on integers."""
    x = convert_to_tensor(x)
    return apply_op("Invert", [x]) if x.dtype.is_integer else logical_not(x)


def _install_operators() -> None:
    """Attach TensorFlow's operator overloads to ``Tensor`` (``==``/``!=`` stay identity)."""
    def binop(fn):
        if fn is pow:                     # ``pow(x, y, z)`` must not pass z as the name
            return lambda self, other: fn(self, other)
        return fn                         # fn(self, other): its own ``name`` stays None

    def rbinop(fn):
        return lambda self, other: fn(other, self)

    for dunder, fn in (("add", add), ("sub", subtract), ("mul", multiply), ("truediv", truediv),
                       ("floordiv", floordiv), ("mod", floormod), ("pow", pow),
                       ("matmul", _matmul),
                       ("and", _logical_or_bitwise(logical_and, "BitwiseAnd")),
                       ("or", _logical_or_bitwise(logical_or, "BitwiseOr")),
                       ("xor", _logical_or_bitwise(logical_xor, "BitwiseXor"))):
        setattr(Tensor, f"__{dunder}__", binop(fn))
        setattr(Tensor, f"__r{dunder}__", rbinop(fn))
    for dunder, fn in (("lt", less), ("le", less_equal), ("gt", greater), ("ge", greater_equal)):
        setattr(Tensor, f"__{dunder}__", binop(fn))
    Tensor.__neg__ = lambda self: negative(self)
    Tensor.__abs__ = lambda self: abs(self)
    Tensor.__invert__ = _invert


_install_operators()
