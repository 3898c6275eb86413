"""Text form of attribute values (shared by the IR printer and parser).

Every value prints to text that reads back to an equal value: floats use the shortest
round-trip repr (``inf``, ``-inf``, ``nan``, ``-0.0`` included), strings are JSON, tensors
print their elements inline when small and as base64 of their little-endian bytes otherwise.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from typing import Any, Optional, Sequence

import numpy as np

from compiler.ir.literals import parse_string
from compiler.ir.types import shape_str
from runtime.dtypes import DType, bf16_numpy_is_raw

# Constants with more elements than this print as base64 of their raw bytes (still exact).
INLINE_ELEMENTS = 16

_BARE_DEVICE = re.compile(r'^[^\s#"]+$')


def format_scalar(v, dtype: DType) -> str:
    """One tensor element: ``true``, ``-3``, ``1.5``, ``inf``, ``nan``."""
    if dtype is DType.bool:
        return "true" if v else "false"
    if dtype.is_floating:
        if dtype is DType.f64 or math.isnan(v):
            return format_float(v)
        s = str(dtype.np.type(v))
        return s if any(c in s for c in ".eni") else s + ".0"
    return str(int(v))


def format_float(v) -> str:
    """Shortest text that reads back to the same double, sign of zero and of nan included."""
    v = float(v)
    if math.isnan(v):
        return "-nan" if math.copysign(1.0, v) < 0 else "nan"
    return repr(v)


def format_tensor(arr: np.ndarray) -> str:
    dt = DType.from_numpy(arr.dtype)
    head = f"tensor<{dt.ir_name}{shape_str(arr.shape)}>"
    if arr.size > INLINE_ELEMENTS:
        data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        return head + 'b64"' + base64.b64encode(data).decode() + '"'
    return head + "[" + ", ".join(format_scalar(v, dt) for v in arr.reshape(-1).tolist()) + "]"


def format_file_tensor(arr: np.ndarray, file: str, sha256: str) -> str:
    """A big constant whose little-endian bytes are the file ``file`` beside the IR text (an
    artifact's ``.bin`` blob), named with their SHA-256: the text stays small, and parses
    back (``parse_tensor``'s ``data``) where the file is."""
    dt = DType.from_numpy(arr.dtype)
    return f'tensor<{dt.ir_name}{shape_str(arr.shape)}>file"{file}" sha256"{sha256}"'


def parse_file_data(text: str):
    """(file name, SHA-256) of a ``file"NAME" sha256"HEX"`` constant body."""
    name, _, digest = text[len('file"'):].partition('" sha256"')
    return name, digest[:-1]


def format_elided_tensor(arr: np.ndarray, sha256: Optional[str] = None) -> str:
    """A large constant for people, not for the parser: its type, size and a short digest
    (of its bytes; ``sha256`` where the caller has it already)."""
    dt = DType.from_numpy(arr.dtype)
    digest = (sha256 or hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest())[:12]
    return f"tensor<{dt.ir_name}{shape_str(arr.shape)}>{{elided {arr.nbytes} bytes, sha256 {digest}}}"


def format_attr(value: Any, kind: str = "any", elide: bool = False) -> str:
    """Text of an attr value; with ``elide``, constants too large to inline are summarized
    (readable, but not parseable)."""
    if elide and isinstance(value, np.ndarray) and value.size > INLINE_ELEMENTS:
        return format_elided_tensor(value)
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
        return format_float(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, np.ndarray):
        return format_tensor(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    if value is None:
        return "none"
    raise TypeError(f"cannot print attr value {value!r}")


def format_device(spec: str) -> str:
    """A device spec as the IR writes it: bare when it reads back, else a JSON string."""
    return spec if _BARE_DEVICE.match(spec) else json.dumps(spec)


def parse_device(text: str) -> str:
    """A device as the IR writes it; a quoted one is a JSON string (``LiteralError`` when it is
    not one)."""
    return parse_string(text) if text.startswith('"') else text


class ElementError(ValueError):
    """Element ``index`` of a constant's inline elements does not fit its dtype."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


def parse_tensor(dtype: DType, shape: Optional[Sequence[int]], items=None,
                 b64: Optional[str] = None, data: Optional[bytes] = None) -> np.ndarray:
    """Build a constant from its IR text pieces (``data``: its little-endian bytes, read from
    the file a ``file"..."`` constant names); raises ValueError when they do not fit."""
    if shape is None or any(d is None for d in shape):
        raise ValueError(f"a tensor constant needs a fully known shape, got {shape_str(shape)}")
    if dtype is DType.resource or (dtype is DType.bf16 and bf16_numpy_is_raw()):
        raise ValueError(f"no tensor constants of dtype {dtype}")
    count = math.prod(shape)
    if data is not None:
        if len(data) != count * dtype.itemsize:
            raise ValueError(f"the file holds {len(data)} bytes; {dtype}{shape_str(shape)} "
                             f"needs {count * dtype.itemsize}")
        arr = np.frombuffer(data, dtype=dtype.np.newbyteorder("<")).astype(dtype.np)
    elif b64 is not None:
        try:
            raw = base64.b64decode(b64, validate=True)
        except ValueError as e:
            raise ValueError(f"bad base64 data: {e}") from None
        if len(raw) != count * dtype.itemsize:
            raise ValueError(f"base64 data holds {len(raw)} bytes; {dtype}{shape_str(shape)} "
                             f"needs {count * dtype.itemsize}")
        arr = np.frombuffer(raw, dtype=dtype.np.newbyteorder("<")).astype(dtype.np)
    else:
        if len(items) != count:
            raise ValueError(f"{dtype}{shape_str(shape)} needs {count} elements, got {len(items)}")
        elements = []
        for i, x in enumerate(items):
            problem = _element_problem(x, dtype)
            if problem:
                raise ElementError(f"element {i} ({x!r}) {problem}", i)
            elements.append(x)
        arr = np.array(elements, dtype=dtype.np)
    return arr.reshape(shape)


def _element_problem(x, dtype: DType) -> str:
    """Why ``x`` cannot be an element of a ``dtype`` constant ('' when it can): a value that
    does not fit is an error, as TensorFlow's, not a wrapped integer or an overflow to inf."""
    if dtype is DType.bool:
        return "" if isinstance(x, bool) else "is not a bool"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return f"is not a {dtype} element"
    if dtype.is_floating:
        with np.errstate(over="ignore"):
            fits = not math.isfinite(x) or math.isfinite(dtype.np.type(x))
        return "" if fits else f"is out of range for {dtype}"
    if not isinstance(x, int):
        return f"is not an integer element of a {dtype} tensor"
    info = np.iinfo(dtype.np)
    return "" if info.min <= x <= info.max else f"is out of range for {dtype}"


def attrs_equal(a, b) -> bool:
    """Exact equality of attr values (bit-exact tensors; -0.0 differs from 0.0; nan == nan)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape
                and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(attrs_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        same_sign = math.copysign(1.0, a) == math.copysign(1.0, b)
        return same_sign and (a == b or (math.isnan(a) and math.isnan(b)))
    return type(a) is type(b) and a == b
