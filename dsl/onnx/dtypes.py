"""ONNX element types as flowc dtypes."""
from __future__ import annotations

from onnx import TensorProto

from runtime.dtypes import DType

_BY_ONNX = {
    TensorProto.FLOAT: DType.f32, TensorProto.DOUBLE: DType.f64, TensorProto.FLOAT16: DType.f16,
    TensorProto.INT8: DType.i8, TensorProto.INT16: DType.i16, TensorProto.INT32: DType.i32,
    TensorProto.INT64: DType.i64, TensorProto.UINT8: DType.u8, TensorProto.BOOL: DType.bool,
    TensorProto.UINT16: DType.u16, TensorProto.UINT32: DType.u32, TensorProto.UINT64: DType.u64,
    TensorProto.BFLOAT16: DType.bf16,
}


def onnx_type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type {elem_type}"


def flowc_dtype(elem_type: int):
    """The flowc dtype of an ONNX element type, or None when flowc has none."""
    return _BY_ONNX.get(elem_type)
