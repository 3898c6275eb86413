"""Cast between every pair of flowc's element types, compiled C against the numpy interpreter,
bit for bit: rounding to f16/bf16 (to nearest even, once, from f64 and i64 too; overflow to
inf; NaN kept), saturating float-to-integer casts, the unsigned integers' full ranges."""
import dataclasses

import numpy as np
import pytest

import dsl as fl
from oracle import NO_FOLDING
from runtime.dtypes import DType

TYPES = [DType.f16, DType.bf16, DType.f32, DType.f64, DType.i8, DType.i16, DType.i32, DType.i64,
         DType.u8, DType.u16, DType.u32, DType.u64, DType.bool]

# floats that round differently in f16 and bf16: ties, the f16 overflow edge (65520 rounds to
# inf, 65519 to 65504), subnormals, values where rounding via f32 would round twice
FLOAT_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 65504.0, 65519.0, 65520.0, -65520.0,
                1e-8, 3e-8, 6e-8, -6e-5, 2**-25, 3 * 2**-25, -5 * 2**-25, 2**-14 - 2**-25, 1e-40,
                1e30, 3.4e38, -3.4e38, 1 + 2**-8, 1 + 2**-8 + 2**-40,
                1 + 2**-11, 1 + 2**-11 + 2**-40, 2049.0, 300.7, -129.5, 255.9, 4e9, -4e9, 1.8e19,
                2**24 + 2**16 + 1, 1e300, -1e300, np.inf, -np.inf, np.nan, -np.nan]
INT_VALUES = [0, 1, -1, 2, 127, -128, 255, 256, 2049, 32767, -32768, 65535, 65536, 2**24 + 1,
              2**24 + 2**16 + 1, 2**31 - 1, -2**31, 2**32 - 1, 2**53 + 1, 2**63 - 1, -2**63,
              2**64 - 1, 2**63 + 2**39 + 1]


def values_of(dtype: DType) -> np.ndarray:
    if dtype is DType.bool:
        return np.array([True, False, True, True], bool)
    if dtype.is_floating:
        with np.errstate(over="ignore"):
            return np.array(FLOAT_VALUES, np.float64).astype(dtype.np)
    info = np.iinfo(dtype.np)
    return np.array([v for v in INT_VALUES if info.min <= v <= info.max], dtype.np)


def same_bits(want: np.ndarray, got: np.ndarray, what: str) -> None:
    """Equal dtypes, shapes and bits; NaNs need only be NaNs of the same sign."""
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if DType.from_numpy(want.dtype).is_floating:
        w64, g64 = want.astype(np.float64), got.astype(np.float64)
        nan = np.isnan(w64)
        assert (np.isnan(g64) == nan).all(), f"{what}: {want} vs {got}"
        assert (np.signbit(w64[nan]) == np.signbit(g64[nan])).all(), what
        w, g = want[~nan], got[~nan]
        bits = np.dtype(f"u{want.dtype.itemsize}")
        assert (w.view(bits) == g.view(bits)).all(), f"{what}: {w} vs {g}"
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("truncate", [False, True])
def test_cast_between_every_pair(graph, truncate):
    feeds, fetches = {}, {}
    for src in TYPES:
        x = fl.placeholder(src, [None], name=f"x_{src}")
        feeds[x] = values_of(src)
        for dst in TYPES:
            fetches[f"{src}->{dst}"] = fl.raw_ops.Cast(x=x, DstT=dst, Truncate=truncate)
    with np.errstate(all="ignore"):
        with fl.Session(graph=graph, backend="interpreter") as s:
            want = s.run(fetches, feeds)
    with fl.Session(graph=graph, options=NO_FOLDING) as s:
        got = s.run(fetches, feeds)
    for name in fetches:
        same_bits(want[name], got[name], name)
    # the defined results, independent of both backends
    f = values_of(DType.f64)
    to_f16 = want["f64->f16"].astype(np.float64)
    assert to_f16[FLOAT_VALUES.index(65519.0)] == 65504.0
    assert np.isinf(to_f16[FLOAT_VALUES.index(65520.0)])
    bf = want["f64->bf16"].astype(np.float64)
    # 1 + 2^-8 + 2^-40 is just above the tie: rounded once it goes up (twice, via f32, down)
    assert bf[FLOAT_VALUES.index(1 + 2**-8 + 2**-40)] == 1 + 2**-7
    assert bf[FLOAT_VALUES.index(1 + 2**-8)] == 1.0                     # the tie: to even
    assert np.isnan(bf[-1]) and np.signbit(bf[-1]) and np.isnan(to_f16[-2])
    assert want["f64->u8"][FLOAT_VALUES.index(-129.5)] == 0               # saturates
    assert want["f64->u64"][FLOAT_VALUES.index(1.8e19)] == np.uint64(18000000000000000000)
    assert want["f64->u32"][FLOAT_VALUES.index(4e9)] == 4000000000
    assert want["f64->u32"][FLOAT_VALUES.index(np.inf)] == 2**32 - 1
    assert want["bf16->f32"].dtype == np.float32 and len(f) == len(bf)
    i = values_of(DType.i32)
    exact = want["i32->bf16"].astype(np.float64)
    assert exact[list(i).index(2**24 + 2**16 + 1)] == 2**24 + 2**17   # once, not via f32


GPU0 = "/device:GPU:0"


def test_cast_and_movement_on_the_gpu(gpu_target, capsys):
    """The CUDA target stores f16 as its bits (nvcc has no _Float16): its casts convert with
    bit-exact helpers, and its copies move halves as they are."""
    g = fl.Graph()
    feeds, fetches = {}, {}
    with g.as_default():
        for src in TYPES:
            x = fl.placeholder(src, [None], name=f"x_{src}")
            feeds[x] = values_of(src)
            with fl.device(GPU0):
                for dst in TYPES:
                    fetches[f"{src}->{dst}"] = fl.raw_ops.Cast(x=x, DstT=dst,
                                                               name=f"cast_{src}_{dst}")
                fetches[f"{src} moved"] = fl.concat([x, fl.gather(x, [1, 0])], axis=0,
                                                    name=f"concat_{src}")
    with np.errstate(all="ignore"):
        with fl.Session(graph=g, backend="interpreter") as s:
            want = s.run(fetches, feeds)
    capsys.readouterr()
    options = dataclasses.replace(NO_FOLDING, log_device_placement=True)
    with fl.Session(graph=g, options=options) as s:
        got = s.run(fetches, feeds)
    report = capsys.readouterr()
    placed = [line for line in (report.out + report.err).splitlines()
              if "cast_" in line or "concat_" in line]
    assert placed and all("GPU:0" in line for line in placed), "\n".join(placed)
    for name in fetches:
        same_bits(want[name], got[name], name)
