"""Text form of attribute values (shared by the IR printer and parser)."""
from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from compiler.ir.types import shape_str
from runtime.dtypes import DType

# Constants with more elements than this print as base64 of their raw bytes (still exact).
INLINE_ELEMENTS = 16


def format_scalar(v, dtype: DType) -> str:
    if dtype is DType.bool:
        return "true" if v else "false"
    if dtype.is_floating:
        if dtype is DType.f64:
            return repr(float(v))
        s = str(dtype.np.type(v))
        return s if any(c in s for c in ".eni") else s + ".0"
    return str(int(v))


def format_tensor(arr: np.ndarray) -> str:
    dt = DType.from_numpy(arr.dtype)
    head = f"tensor<{dt.ir_name}{shape_str(arr.shape)}>"
    if arr.size > INLINE_ELEMENTS:
        data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        return head + 'b64"' + base64.b64encode(data).decode() + '"'
    return head + "[" + ", ".join(format_scalar(v, dt) for v in arr.reshape(-1).tolist()) + "]"


def format_attr(value: Any, kind: str = "any") -> str:
    if kind == "shape":
        return shape_str(value)
    if kind == "list(shape)":
        return "[" + ", ".join(shape_str(s) for s in value) + "]"
    if isinstance(value, DType):
        return value.ir_name
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, np.ndarray):
        return format_tensor(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    if value is None:
        return "none"
    raise TypeError(f"cannot print attr value {value!r}")


def parse_tensor(dtype: DType, shape, items=None, b64: str | None = None) -> np.ndarray:
    if b64 is not None:
        raw = base64.b64decode(b64)
        arr = np.frombuffer(raw, dtype=dtype.np.newbyteorder("<")).astype(dtype.np)
    else:
        if dtype is DType.bool:
            arr = np.array([bool(x) for x in items], dtype=np.bool_)
        elif dtype.is_floating:
            arr = np.array([float(x) for x in items], dtype=dtype.np)
        else:
            arr = np.array([int(x) for x in items], dtype=dtype.np)
    return arr.reshape(shape)


def attrs_equal(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and a.tobytes() == b.tobytes())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(attrs_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b or (isinstance(a, float) and isinstance(b, float)
                                              and np.isnan(a) and np.isnan(b))
