"""u8/u16/u32/u64 through the numeric kernels, compiled C against the numpy interpreter:
arithmetic wraps modulo 2^bits, division and remainder are unsigned (floor = truncation),
comparisons and extremes compare as unsigned, reductions accumulate in the type (Sum and Prod
wrap), and integer division by zero is TensorFlow's error."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError
from oracle import NO_FOLDING, check_against_interpreter
from runtime.errors import RuntimeExecutionError

UNSIGNED = [(fl.uint8, np.uint8), (fl.uint16, np.uint16), (fl.uint32, np.uint32),
            (fl.uint64, np.uint64)]


def unsigned_rows(rng, np_dtype, nonzero=False):
    top = np.iinfo(np_dtype).max
    special = np.array([0, 1, 2, 3, 7, 100, 255, top, top - 1, top // 2, top // 2 + 1, top // 3],
                       dtype=np_dtype)
    rand = rng.integers(0, top, size=12, dtype=np_dtype, endpoint=True)
    values = np.concatenate([special, rand])
    if nonzero:
        values[values == 0] = 5
    return values.reshape(-1, 4)


def unsigned_cases(x, y):
    return {
        "add": x + y, "sub": x - y, "mul": x * y, "floordiv": fl.floordiv(x, y),
        "floormod": fl.floormod(x, y), "max": fl.maximum(x, y), "min": fl.minimum(x, y),
        "square": fl.square(x), "relu": fl.nn.relu(x), "add_n": fl.add_n([x, y, x]),
        "less": x < y, "greater_equal": x >= y, "equal": fl.equal(x, y),
        "truediv": fl.truediv(x, y), "select": fl.where(x < y, x, y),
        "sum": fl.reduce_sum(x, axis=1), "prod": fl.reduce_prod(y, axis=0),
        "rmax": fl.reduce_max(x, axis=0), "rmin": fl.reduce_min(x, axis=1),
        "mean": fl.reduce_mean(x, axis=1), "argmax": fl.argmax(x, axis=1),
        "argmin": fl.argmin(y, axis=0), "to_f32": fl.cast(x, fl.float32),
        "concat": fl.concat([x, y], axis=0), "transpose": fl.transpose(x),
        "gather": fl.gather(x, [3, 0, 0]), "tile": fl.tile(y, [2, 1]),
        "pad": fl.pad(x, [[1, 0], [0, 2]]), "slice": x[1:3, ::2],
    }


@pytest.mark.parametrize("dt,np_dt", UNSIGNED, ids=[d.ir_name for d, _ in UNSIGNED])
def test_unsigned_elementwise_and_reductions(graph, rng, dt, np_dt):
    x = fl.placeholder(dt, [None, 4], name="x")
    y = fl.placeholder(dt, [None, 4], name="y")
    xv, yv = unsigned_rows(rng, np_dt), unsigned_rows(rng, np_dt, nonzero=True)[::-1].copy()
    got = check_against_interpreter(graph, unsigned_cases(x, y), {x: xv, y: yv})
    with np.errstate(over="ignore"):
        assert (got["add"] == xv + yv).all() and (got["sub"] == xv - yv).all()
        assert (got["mul"] == xv * yv).all()
    assert (got["floordiv"] == xv // yv).all() and (got["floormod"] == xv % yv).all()
    assert (got["max"] == np.maximum(xv, yv)).all() and (got["less"] == (xv < yv)).all()
    assert got["sub"].dtype == np_dt and got["truediv"].dtype == (
        np.float32 if np_dt in (np.uint8, np.uint16) else np.float64)
    top = np.iinfo(np_dt).max
    assert got["rmax"].max() == top and got["to_f32"].dtype == np.float32


def test_unsigned_division_by_zero_is_an_error(graph):
    x = fl.placeholder(fl.uint32, [3], name="x")
    y = fl.placeholder(fl.uint32, [3], name="y")
    q = fl.floordiv(x, y)
    feeds = {x: np.array([1, 2, 3], np.uint32), y: np.array([1, 0, 3], np.uint32)}
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend, options=NO_FOLDING) as s:
            with pytest.raises((ExecutionError, RuntimeExecutionError),
                               match="Integer division by zero"):
                s.run(q, feeds)


def test_unsigned_feeds_keep_their_range(graph):
    x = fl.placeholder(fl.uint64, [None], name="x")
    y = x + np.uint64(1)
    with fl.Session(graph=graph) as s:
        got = s.run(y, {x: [2**64 - 2, 0]})
        assert got.dtype == np.uint64 and got.tolist() == [2**64 - 1, 1]
        with pytest.raises(fl.FeedError, match="out of range"):
            s.run(y, {x: np.array([-1], np.int64)})


def test_unsigned_kernels_on_the_gpu(gpu_target, rng):
    g = fl.Graph()
    feeds, fetches = {}, {}
    with g.as_default():
        for dt, np_dt in (UNSIGNED[1], UNSIGNED[3]):
            x = fl.placeholder(dt, [6, 4], name=f"x_{dt}")
            y = fl.placeholder(dt, [6, 4], name=f"y_{dt}")
            feeds[x], feeds[y] = unsigned_rows(rng, np_dt), unsigned_rows(rng, np_dt, True)
            with fl.device("/device:GPU:0"):
                for k, v in unsigned_cases(x, y).items():
                    fetches[f"{k}_{dt}"] = v
    check_against_interpreter(g, fetches, feeds)
