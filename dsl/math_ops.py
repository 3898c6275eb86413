"""TensorFlow-named math functions (``fl.add``, ``fl.matmul``, ``fl.reduce_sum``, ...) and the
Tensor operator overloads."""
from __future__ import annotations

from typing import Optional

from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor


def _binary_operands(x, y):
    """Convert the non-tensor side to the tensor side's dtype (``x + 1`` on f32 stays f32)."""
    if isinstance(x, Tensor) and not isinstance(y, Tensor):
        y = convert_to_tensor(y, dtype=x.dtype)
    elif isinstance(y, Tensor) and not isinstance(x, Tensor):
        x = convert_to_tensor(x, dtype=y.dtype)
    else:
        x, y = convert_to_tensor(x), convert_to_tensor(y)
    return x, y


def add(x, y, name: Optional[str] = None) -> Tensor:
    x, y = _binary_operands(x, y)
    return apply_op("AddV2", [x, y], name=name)


def multiply(x, y, name: Optional[str] = None) -> Tensor:
    x, y = _binary_operands(x, y)
    return apply_op("Mul", [x, y], name=name)


def negative(x, name: Optional[str] = None) -> Tensor:
    return apply_op("Neg", [convert_to_tensor(x)], name=name)


def exp(x, name: Optional[str] = None) -> Tensor:
    return apply_op("Exp", [convert_to_tensor(x)], name=name)


def _install_operators() -> None:
    def binop(fn, reverse=False):
        if reverse:
            return lambda self, other: fn(other, self)
        return lambda self, other: fn(self, other)

    Tensor.__add__ = binop(add)
    Tensor.__radd__ = binop(add, True)
    Tensor.__mul__ = binop(multiply)
    Tensor.__rmul__ = binop(multiply, True)
    Tensor.__neg__ = lambda self: negative(self)


_install_operators()
