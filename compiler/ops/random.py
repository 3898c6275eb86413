"""Random ops on TensorFlow's counter-based Philox-4x32-10 generator: RandomUniform,
RandomStandardNormal, TruncatedNormal and RandomUniformInt.

The numpy reference (vectorized Philox) and the generated C (``philox.c.j2``, from
``compiler/codegen/c_ops/random.py``) produce bit-identical numbers. The algorithms are
TensorFlow's CPU ones:
- key = (seed low 32 bits, seed high 32 bits), counter = (0, 0, seed2 low, seed2 high);
  output group ``g`` comes from the Philox block at counter + g (TruncatedNormal: the group's
  stream starts at counter + g * 256 * group / 4 and draws 32-bit words one by one).
- uniform float: 23 random mantissa bits with exponent 0 (a float in [1, 2)) minus 1; double:
  52 bits from two words. float groups are 4 numbers per block, double groups 2.
- normal: Box-Muller (u1 clamped to >= 1e-7; sin and cos give two numbers).
- truncated normal: normals rejected unless |x| < 2.
- uniform int: ``minval + bits % (maxval - minval)`` (32 bits per int32, 64 per int64);
  ``minval < maxval`` is required unless the output is empty.

With the same (seed, seed2) the numbers are TensorFlow's CPU numbers bit for bit (checked
against TF 2.21 in tests/compiler/ops/test_random_ops.py); the float32 Box-Muller uses the C library's
logf/sinf/cosf in both backends (numpy calls them through ctypes), as TF does, so float32
normals match TF's exactly where TF runs on the same C library (else to within an ulp or so).

Each run draws new numbers, as in TensorFlow: every random node has a stream (a 64-bit
counter kept by the runtime's ``ResourceStore``, outside any step), and a run that draws n
numbers reserves ``256 * n`` Philox blocks by advancing it (TF's ``ReserveRandomOutputs(n,
256)``), so run k of a session draws exactly TF's k-th numbers. The interpreter without a
store draws the first run's numbers every time.

Deviation from TensorFlow: seed = seed2 = 0 is an ordinary seed here (TF draws a
nondeterministic one).

The ops are ``stateful=True`` so CSE and constant folding never merge or fold them.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
from typing import Callable, List, Tuple

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import shape_str
from compiler.ops.array.common import _check_fits
from compiler.ops.array.fill_range import _shape_from_dims_input
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType

_U32 = np.uint32
_MASK = np.uint64(0xFFFFFFFF)
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_RESERVED_SAMPLES_PER_OUTPUT = 256       # TF's kReservedSamplesPerOutput
_TRUNCATE = 2.0
_EPSILON = 1.0e-7


# --- Philox in numpy ---------------------------------------------------------------------------
def philox(index: np.ndarray, seed: int, seed2: int, offset: int = 0) -> np.ndarray:
    """The Philox-4x32-10 blocks at counters (0, 0, seed2) + offset + index: uint32 [len, 4]."""
    index = np.asarray(index, np.uint64) + np.uint64(offset & (2**64 - 1))
    s, s2 = seed & (2**64 - 1), seed2 & (2**64 - 1)
    c0 = index & _MASK
    c1 = index >> np.uint64(32)
    c2 = np.full(index.shape, s2 & 0xFFFFFFFF, np.uint64)
    c3 = np.full(index.shape, s2 >> 32, np.uint64)
    k0, k1 = s & 0xFFFFFFFF, s >> 32
    for r in range(10):
        p0, p1 = _M0 * c0, _M1 * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & _MASK,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & _MASK)
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return np.stack([c0, c1, c2, c3], axis=-1).astype(_U32)


def _u32_to_float(x: np.ndarray) -> np.ndarray:
    bits = (x.astype(_U32) & _U32(0x7FFFFF)) | _U32(127 << 23)
    return bits.view(np.float32) - np.float32(1)


def _u64_to_double(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    man = ((hi.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32)) | lo.astype(np.uint64)
    return (man | np.uint64(1023 << 52)).view(np.float64) - 1.0


def _libm_float_fn(name: str) -> Callable:
    """The C library's float function ``name`` (logf, sinf, cosf) as a numpy ufunc."""
    fn = getattr(_LIBM, name)
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return np.frompyfunc(fn, 1, 1)


_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
_libm_logf, _libm_sinf, _libm_cosf = (_libm_float_fn(f) for f in ("logf", "sinf", "cosf"))
_libm_log = np.frompyfunc(math.log, 1, 1)
_libm_sin = np.frompyfunc(math.sin, 1, 1)
_libm_cos = np.frompyfunc(math.cos, 1, 1)


def _f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _f64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _box_muller_float(x0: np.ndarray, x1: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    u1 = _u32_to_float(x0)
    u1 = np.where(u1 < np.float32(_EPSILON), np.float32(_EPSILON), u1)
    v1 = (np.float64(2 * math.pi) * _u32_to_float(x1).astype(np.float64)).astype(np.float32)
    u2 = np.sqrt(np.float32(-2) * _f32(_libm_logf(u1)))
    return _f32(_libm_sinf(v1)) * u2, _f32(_libm_cosf(v1)) * u2


def _box_muller_double(x0, x1, x2, x3) -> Tuple[np.ndarray, np.ndarray]:
    u1 = _u64_to_double(x0, x1)
    u1 = np.where(u1 < _EPSILON, _EPSILON, u1)
    v1 = np.float64(2 * math.pi) * _u64_to_double(x2, x3)
    u2 = np.sqrt(-2.0 * _f64(_libm_log(u1)))
    return _f64(_libm_sin(v1)) * u2, _f64(_libm_cos(v1)) * u2


def _groups(n: int, size: int) -> np.ndarray:
    return np.arange((n + size - 1) // size, dtype=np.uint64)


def uniform_values(n: int, dtype: DType, seed: int, seed2: int,
                   offset: int = 0) -> np.ndarray:
    """n uniform numbers in [0, 1) (TF's UniformDistribution)."""
    if dtype is DType.f32:
        return _u32_to_float(philox(_groups(n, 4), seed, seed2, offset)).reshape(-1)[:n]
    x = philox(_groups(n, 2), seed, seed2, offset)
    return np.stack([_u64_to_double(x[:, 0], x[:, 1]), _u64_to_double(x[:, 2], x[:, 3])],
                    axis=-1).reshape(-1)[:n]


def normal_values(n: int, dtype: DType, seed: int, seed2: int,
                  offset: int = 0) -> np.ndarray:
    """n standard normal numbers (TF's NormalDistribution, Box-Muller)."""
    if dtype is DType.f32:
        x = philox(_groups(n, 4), seed, seed2, offset)
        a0, a1 = _box_muller_float(x[:, 0], x[:, 1])
        b0, b1 = _box_muller_float(x[:, 2], x[:, 3])
        return np.stack([a0, a1, b0, b1], axis=-1).reshape(-1)[:n]
    x = philox(_groups(n, 2), seed, seed2, offset)
    d0, d1 = _box_muller_double(x[:, 0], x[:, 1], x[:, 2], x[:, 3])
    return np.stack([d0, d1], axis=-1).reshape(-1)[:n]


def _candidates(groups: np.ndarray, blocks: int, dtype: DType, seed: int,
                seed2: int, offset: int = 0) -> np.ndarray:
    """Per group, the normals from its first ``blocks`` Philox blocks, in draw order."""
    size = 4 if dtype is DType.f32 else 2
    skip = size * _RESERVED_SAMPLES_PER_OUTPUT // 4
    index = groups[:, None] * np.uint64(skip) + np.arange(blocks, dtype=np.uint64)[None, :]
    words = philox(index.reshape(-1), seed, seed2, offset).reshape(len(groups), blocks * 4)
    if dtype is DType.f32:
        f0, f1 = _box_muller_float(words[:, 0::2], words[:, 1::2])
    else:
        f0, f1 = _box_muller_double(words[:, 0::4], words[:, 1::4], words[:, 2::4],
                                    words[:, 3::4])
    return np.stack([f0, f1], axis=-1).reshape(len(groups), -1)


def truncated_normal_values(n: int, dtype: DType, seed: int, seed2: int,
                            offset: int = 0) -> np.ndarray:
    """n normals with |x| < 2 (TF's TruncatedNormalDistribution, by rejection)."""
    size = 4 if dtype is DType.f32 else 2
    groups = _groups(n, size)
    out = np.zeros((len(groups), size), dtype.np)
    blocks = 1                      # doubled for the groups that need more
    todo = groups
    while len(todo):
        cand = _candidates(todo, blocks, dtype, seed, seed2, offset)
        ok = np.abs(cand) < _TRUNCATE
        done = ok.sum(axis=1) >= size
        first = np.argsort(~ok[done], axis=1, kind="stable")[:, :size]   # first accepted
        out[todo[done].astype(np.int64)] = np.take_along_axis(cand[done], first, axis=1)
        todo, blocks = todo[~done], blocks * 2
    return out.reshape(-1)[:n]


def uniform_int_values(n: int, dtype: DType, lo: int, hi: int, seed: int,
                       seed2: int, offset: int = 0) -> np.ndarray:
    """n integers in [lo, hi): lo + bits % (hi - lo) (TF's integer UniformDistribution)."""
    if dtype is DType.i32:
        bits = philox(_groups(n, 4), seed, seed2, offset).reshape(-1)[:n].astype(np.uint64)
        span = (hi - lo) & 0xFFFFFFFF
        vals = (np.uint64(lo & 0xFFFFFFFF) + bits % np.uint64(span)) & _MASK
        return vals.astype(np.uint32).view(np.int32)
    x = philox(_groups(n, 2), seed, seed2, offset).astype(np.uint64)
    bits = np.stack([x[:, 0] | (x[:, 1] << np.uint64(32)), x[:, 2] | (x[:, 3] << np.uint64(32))],
                    axis=-1).reshape(-1)[:n]
    span = np.uint64((hi - lo) & (2**64 - 1))
    return (np.uint64(lo & (2**64 - 1)) + bits % span).view(np.int64)


# --- shapes and reference kernels ------------------------------------------------------------
def _shape_fn(ctx) -> list:
    for i in (1, 2):
        if i < len(ctx.input_types):
            s = ctx.input_shape(i)
            if s is not None and len(s) != 0:
                raise ctx.error(f"input {i} must be a scalar (0-D), got shape {shape_str(s)}")
    return [_shape_from_dims_input(ctx, 0)]


def _out_shape(ctx, shape: np.ndarray, itemsize: int) -> List[int]:
    if shape.ndim != 1:
        raise ExecutionError(f"shape must be a vector, got shape {list(shape.shape)}", ctx.node)
    dims = [int(d) for d in shape]
    try:
        _check_fits(dims, itemsize)
    except ValueError as e:
        raise ExecutionError(str(e), ctx.node) from None
    return dims


# Philox blocks a run reserves per number drawn (TF's ReserveRandomOutputs multiplier).
BLOCKS_PER_OUTPUT = 256


def _seeds(ctx, n: int) -> Tuple[int, int, int]:
    """(seed, seed2, offset): the offset is where this run's numbers start in the node's
    stream (reserved in the interpreter's store; 0 without one)."""
    state = ctx.state
    offset = 0
    if state is not None and hasattr(state, "reserve"):
        offset = state.reserve(ctx.node.name, n * BLOCKS_PER_OUTPUT)
    return ctx.attrs["seed"], ctx.attrs["seed2"], offset


def _float_kernel(values_fn):
    def kernel(ctx, shape: np.ndarray) -> np.ndarray:
        dtype = ctx.attrs["dtype"]
        dims = _out_shape(ctx, shape, dtype.itemsize)
        n = int(np.prod(dims, dtype=np.int64))
        return values_fn(n, dtype, *_seeds(ctx, n)).astype(dtype.np).reshape(dims)
    return kernel


def _uniform_int_kernel(ctx, shape, minval, maxval) -> np.ndarray:
    dtype = ctx.attrs["Tout"]
    for name, v in (("minval", minval), ("maxval", maxval)):
        if v.ndim != 0:
            raise ExecutionError(f"{name} must be 0-D, got shape {list(v.shape)}", ctx.node)
    dims = _out_shape(ctx, shape, dtype.itemsize)
    n = int(np.prod(dims, dtype=np.int64))
    if n == 0:
        return np.zeros(dims, dtype.np)
    lo, hi = int(minval), int(maxval)
    if lo >= hi:
        raise ExecutionError(f"Need minval < maxval: {lo} >= {hi}", ctx.node)
    return uniform_int_values(n, dtype, lo, hi, *_seeds(ctx, n)).reshape(dims)


_SEED_ATTRS = ["seed: int = 0", "seed2: int = 0"]
_FLOAT_OPS = (("RandomUniform", uniform_values,
               "Uniform floats in [0, 1) from Philox (TF's algorithm)."),
              ("RandomStandardNormal", normal_values,
               "Standard normal floats from Philox and Box-Muller."),
              ("TruncatedNormal", truncated_normal_values,
               "Standard normal floats with |x| < 2, by rejection."))

for _name, _fn, _doc in _FLOAT_OPS:
    register_op(_name, inputs=["shape: T"], outputs=["output: dtype"],
                attrs=_SEED_ATTRS + ["dtype: {f32, f64}", "T: {i32, i64}"],
                shape=_shape_fn, kernel=_float_kernel(_fn), group="source",
                stateful=True, doc=_doc)

register_op("RandomUniformInt", inputs=["shape: T", "minval: Tout", "maxval: Tout"],
            outputs=["output: Tout"], attrs=_SEED_ATTRS + ["Tout: {i32, i64}", "T: {i32, i64}"],
            shape=_shape_fn, kernel=_uniform_int_kernel, group="source",
            stateful=True, doc="Uniform integers in [minval, maxval) from Philox.")
