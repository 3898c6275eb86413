"""TensorFlow 1.x's cast shortcuts: ``to_float``, ``to_double``, ``to_int32``, ``to_int64``
and ``to_bfloat16`` (Cast, under TensorFlow's default names)."""
from __future__ import annotations

from dsl.math_ops import cast
from dsl.tensor import Tensor
from runtime.dtypes import DType

__all__ = ["to_float", "to_double", "to_int32", "to_int64", "to_bfloat16"]


def to_float(x, name: str = "ToFloat") -> Tensor:
    """``x`` as float32."""
    return cast(x, DType.f32, name=name)


def to_double(x, name: str = "ToDouble") -> Tensor:
    """``x`` as float64."""
    return cast(x, DType.f64, name=name)


def to_int32(x, name: str = "ToInt32") -> Tensor:
    """``x`` as int32."""
    return cast(x, DType.i32, name=name)


def to_int64(x, name: str = "ToInt64") -> Tensor:
    """``x`` as int64."""
    return cast(x, DType.i64, name=name)


def to_bfloat16(x, name: str = "ToBFloat16") -> Tensor:
    """``x`` as bfloat16."""
    return cast(x, DType.bf16, name=name)
