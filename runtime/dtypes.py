"""Element types shared by the compiler and the runtime.

The runtime owns this table (it must run artifacts without the compiler); the compiler
re-exports it. Each dtype has a short IR name (``f32``), a numpy dtype, a C type name and a
stable integer code used in the C ABI and in artifact manifests.
"""
from __future__ import annotations

import enum

import numpy as np


class DType(enum.Enum):
    # value: (ir name, numpy name or None, C type, ABI code)
    f16 = ("f16", "float16", "_Float16", 9)
    bf16 = ("bf16", None, "uint16_t", 10)
    f32 = ("f32", "float32", "float", 1)
    f64 = ("f64", "float64", "double", 2)
    i8 = ("i8", "int8", "int8_t", 6)
    i16 = ("i16", "int16", "int16_t", 7)
    i32 = ("i32", "int32", "int32_t", 3)
    i64 = ("i64", "int64", "int64_t", 4)
    u8 = ("u8", "uint8", "uint8_t", 8)
    bool = ("bool", "bool", "bool", 5)
    resource = ("resource", None, "void*", 20)

    # Members are singletons compared by identity: hash them so too, in C (Enum's own
    # __hash__ is Python code, and dtypes key dicts on every node a build makes).
    __hash__ = object.__hash__

    @property
    def ir_name(self) -> str:
        return self.value[0]

    @property
    def c_type(self) -> str:
        return self.value[2]

    @property
    def code(self) -> int:
        return self.value[3]

    @property
    def np(self) -> np.dtype:
        try:
            return _NP_OF[self]
        except KeyError:
            raise TypeError(f"dtype {self.ir_name} has no numpy equivalent") from None

    @property
    def itemsize(self) -> int:
        if self is DType.bf16:
            return 2
        if self is DType.resource:
            return 8
        return self.np.itemsize

    @property
    def is_floating(self) -> bool:
        return self in (DType.f16, DType.bf16, DType.f32, DType.f64)

    @property
    def is_integer(self) -> bool:
        return self in (DType.i8, DType.i16, DType.i32, DType.i64, DType.u8)

    @property
    def is_signed(self) -> bool:
        return self is not DType.u8 and self is not DType.bool

    @property
    def is_bool(self) -> bool:
        return self is DType.bool

    @property
    def is_numeric(self) -> bool:
        return self.is_floating or self.is_integer

    def __str__(self) -> str:
        return self.ir_name

    def __repr__(self) -> str:
        return f"fl.{self.ir_name}"

    @staticmethod
    def parse(text: str) -> "DType":
        try:
            return _BY_NAME[text]
        except KeyError:
            raise ValueError(f"unknown dtype {text!r}; expected one of {', '.join(_BY_NAME)}") from None

    @staticmethod
    def from_code(code: int) -> "DType":
        return _BY_CODE[code]

    @staticmethod
    def from_numpy(dt) -> "DType":
        dt = np.dtype(dt)
        try:
            return _BY_NP[dt]
        except KeyError:
            raise TypeError(f"numpy dtype {dt} has no flowc equivalent") from None


_NP_OF = {d: np.dtype(d.value[1]) for d in DType if d.value[1] is not None}
_BY_NAME = {d.ir_name: d for d in DType}
# TensorFlow-style aliases
_BY_NAME.update({"float32": DType.f32, "float64": DType.f64, "float16": DType.f16,
                 "bfloat16": DType.bf16, "int32": DType.i32, "int64": DType.i64,
                 "int8": DType.i8, "int16": DType.i16, "uint8": DType.u8})
_BY_CODE = {d.code: d for d in DType}
_BY_NP = {v: k for k, v in _NP_OF.items()}


def as_dtype(x) -> DType:
    """Accept a DType, an IR/TensorFlow name, or anything numpy understands as a dtype."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        return DType.parse(x)
    return DType.from_numpy(x)
