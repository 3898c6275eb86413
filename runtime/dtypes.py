"""Element types shared by the compiler and the runtime.

The runtime owns this table (it must run artifacts without the compiler); the compiler
re-exports it. Each dtype has a short IR name (``f32``), a numpy dtype, a C type name and a
stable integer code used in the C ABI and in artifact manifests.

Half-precision floats are stored as such everywhere (tensors, feeds, fetches, constants,
variables, checkpoints); kernels that have no native half arithmetic compute them in f32 (the
compiler's ``legalize-types`` pass, and the reference interpreter alike). numpy has float16 but
no bfloat16: bf16 arrays are ``ml_dtypes.bfloat16`` when ml_dtypes is importable (onnx depends
on it). Without ml_dtypes a bf16 tensor is presented as raw ``uint16`` bits (the upper half of
the f32 with the same sign and exponent): ``DType.bf16.np`` is then ``uint16``, such arrays feed
and fetch as bits, and ``bf16_numpy_is_raw()`` says so.
"""
from __future__ import annotations

import enum

import numpy as np

try:                                   # numpy's bfloat16, where ml_dtypes is installed
    import ml_dtypes as _ml_dtypes
    _BF16_NP = np.dtype(_ml_dtypes.bfloat16)
except ImportError:                    # pragma: no cover  (bf16 arrays are raw uint16 bits)
    _BF16_NP = None


class DType(enum.Enum):
    # value: (ir name, numpy name or None, C type, ABI code)
    f16 = ("f16", "float16", "_Float16", 9)
    bf16 = ("bf16", "bfloat16", "uint16_t", 10)    # C: the bits (no C arithmetic type)
    f32 = ("f32", "float32", "float", 1)
    f64 = ("f64", "float64", "double", 2)
    i8 = ("i8", "int8", "int8_t", 6)
    i16 = ("i16", "int16", "int16_t", 7)
    i32 = ("i32", "int32", "int32_t", 3)
    i64 = ("i64", "int64", "int64_t", 4)
    u8 = ("u8", "uint8", "uint8_t", 8)
    u16 = ("u16", "uint16", "uint16_t", 11)
    u32 = ("u32", "uint32", "uint32_t", 12)
    u64 = ("u64", "uint64", "uint64_t", 13)
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
        if self is DType.resource:
            return 8
        return self.np.itemsize

    @property
    def is_floating(self) -> bool:
        return self in _FLOATING

    @property
    def is_half(self) -> bool:
        """f16 or bf16: stored in 16 bits, computed in f32 where a kernel has no half type."""
        return self is DType.f16 or self is DType.bf16

    @property
    def is_integer(self) -> bool:
        return self in _INTEGER

    @property
    def is_unsigned(self) -> bool:
        return self in _UNSIGNED

    @property
    def is_signed(self) -> bool:
        """Signed numbers: the floats and the signed integers (not bool, not unsigned)."""
        return self.is_floating or (self.is_integer and self not in _UNSIGNED)

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


_FLOATING = frozenset((DType.f16, DType.bf16, DType.f32, DType.f64))
_UNSIGNED = frozenset((DType.u8, DType.u16, DType.u32, DType.u64))
_INTEGER = frozenset((DType.i8, DType.i16, DType.i32, DType.i64)) | _UNSIGNED

_NP_OF = {d: np.dtype(d.value[1]) for d in DType
          if d.value[1] is not None and d is not DType.bf16}
_BY_NP = {v: k for k, v in _NP_OF.items()}
if _BF16_NP is not None:
    _NP_OF[DType.bf16] = _BF16_NP
    _BY_NP[_BF16_NP] = DType.bf16
else:                                  # pragma: no cover
    _NP_OF[DType.bf16] = np.dtype(np.uint16)      # raw bits; uint16 arrays stay u16
_BY_NAME = {d.ir_name: d for d in DType}
# TensorFlow-style aliases
_BY_NAME.update({"float32": DType.f32, "float64": DType.f64, "float16": DType.f16,
                 "bfloat16": DType.bf16,
                 "int32": DType.i32, "int64": DType.i64, "int8": DType.i8, "int16": DType.i16,
                 "uint8": DType.u8, "uint16": DType.u16, "uint32": DType.u32,
                 "uint64": DType.u64,
                 # the C names TensorFlow's as_dtype takes too (tf.placeholder("float", ...))
                 "float": DType.f32, "double": DType.f64, "half": DType.f16})
_BY_CODE = {d.code: d for d in DType}


def numpy_kind(dt) -> str:
    """numpy's kind letter of ``dt``, with ml_dtypes' bfloat16 (kind ``V``) a float ``f``."""
    dt = np.dtype(dt)
    return "f" if _BF16_NP is not None and dt == _BF16_NP else dt.kind


def bf16_numpy_is_raw() -> bool:
    """Whether bf16 arrays are raw uint16 bits (ml_dtypes is not installed)."""
    return _BF16_NP is None


def half_to_f32(arr: np.ndarray, dtype: "DType") -> np.ndarray:
    """An f16/bf16 array of ``dtype`` as f32 (exact; raw bf16 bits are widened too)."""
    if dtype is DType.bf16 and _BF16_NP is None:          # pragma: no cover
        return (np.asarray(arr, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(arr).astype(np.float32)


def f32_to_half(arr: np.ndarray, dtype: "DType") -> np.ndarray:
    """f32 values as ``dtype`` (f16/bf16), rounded to nearest even; a NaN stays a NaN (bf16:
    the quiet NaN with its sign, as ml_dtypes rounds)."""
    arr = np.asarray(arr, np.float32)
    if dtype is DType.bf16 and _BF16_NP is None:          # pragma: no cover
        bits = np.ascontiguousarray(arr).view(np.uint32)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        nan = (bits & 0x7FFFFFFF) > 0x7F800000
        return np.where(nan, (bits >> 16) & 0x8000 | 0x7FC0, rounded).astype(np.uint16)
    return arr.astype(dtype.np)


def as_dtype(x) -> DType:
    """Accept a DType, an IR/TensorFlow name, or anything numpy understands as a dtype."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        return DType.parse(x)
    return DType.from_numpy(x)
