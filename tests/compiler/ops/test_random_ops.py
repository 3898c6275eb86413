"""Philox random ops (compiler/ops/random.py): the generator against Random123's known
answers, compiled C bit-identical to the numpy interpreter, seeds, distribution moments on a
large sample (loose statistical bounds), the fl.random_* API and the data errors.
"""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError, ShapeError
from compiler.ops.random import philox
from compiler.ir.op_registry import get_op
from oracle import NO_FOLDING
from runtime.errors import RuntimeExecutionError

FLOAT_OPS = ("RandomUniform", "RandomStandardNormal", "TruncatedNormal")


def run_both(graph, fetches, feed=None, options=NO_FOLDING):
    """(interpreter results, C results) of the same fetches, as lists."""
    fetches = list(fetches.values()) if isinstance(fetches, dict) else fetches
    with fl.Session(graph=graph, backend="interpreter") as s:
        want = s.run(fetches, feed or {})
    with fl.Session(graph=graph, backend="c", options=options) as s:
        got = s.run(fetches, feed or {})
    return want, got


def test_philox_known_answers():
    """Random123's kat_vectors for philox4x32_10 (counter words 0-1 are the index here)."""
    cases = [(0, 0, 0, [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
             (2**64 - 1, 2**64 - 1, 2**64 - 1, [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
             (0x85a308d3243f6a88, 0x299f31d0a4093822, 0x0370734413198a2e,
              [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1])]
    for index, seed, seed2, want in cases:
        assert philox(np.array([index], np.uint64), seed, seed2)[0].tolist() == want


def test_random_ops_bit_identical_in_both_backends(graph):
    """Every op and dtype, static and fed shapes (sizes not a multiple of the group size)."""
    dims = fl.placeholder(fl.int32, [2], name="dims")
    fetches = {}
    for op in FLOAT_OPS:
        for dt in (fl.float32, fl.float64):
            attrs = {"dtype": dt, "seed": 87654321, "seed2": 11}
            fetches[f"{op}/{dt.ir_name}"] = fl.apply_op(op, [fl.constant([2003])], attrs)
            fetches[f"{op}/{dt.ir_name}/fed"] = fl.apply_op(op, [dims], attrs)
    for dt, lo, hi in ((fl.int32, -7, 2**31 - 1), (fl.int64, -2**63, 2**63 - 1),
                       (fl.int64, 5, 6)):
        fetches[f"int/{dt.ir_name}/{lo}"] = fl.apply_op(
            "RandomUniformInt", [dims, fl.constant(lo, dtype=dt), fl.constant(hi, dtype=dt)],
            {"seed": 3, "seed2": 4})
    for shape in ([7, 3], [0, 5], [1, 1]):
        want, got = run_both(graph, fetches, {dims: np.array(shape, np.int32)})
        for name, w, g in zip(fetches, want, got):
            assert w.dtype == g.dtype and w.shape == g.shape, name
            np.testing.assert_array_equal(g, w, err_msg=name)
            if name.endswith("fed") or name.startswith("int"):
                assert g.shape == tuple(shape), name
    assert got[1].dtype == np.float32 and got[2].dtype == np.float64


def test_seeds_select_streams(graph):
    def uniform(seed, seed2):
        return fl.apply_op("RandomUniform", [fl.constant([64])],
                           {"dtype": fl.float32, "seed": seed, "seed2": seed2})
    a, a_again, b, c = uniform(1, 2), uniform(1, 2), uniform(1, 3), uniform(2, 2)
    want, got = run_both(graph, [a, a_again, b, c])
    np.testing.assert_array_equal(got[0], got[1])
    assert not np.array_equal(got[0], got[2]) and not np.array_equal(got[0], got[3])
    with fl.Session(graph=graph, backend="c") as s:            # with folding enabled too
        first = s.run(a)
    np.testing.assert_array_equal(first, got[0])


def test_each_run_draws_new_numbers_in_both_backends(graph):
    """A node's stream advances 256 blocks per number per run (TF's skip-ahead), in the C code
    and in the interpreter alike; a new session starts the stream again."""
    from compiler.ops.random import uniform_values
    u = fl.apply_op("RandomUniform", [fl.constant([10])], {"dtype": fl.float32, "seed": 7, "seed2": 3})
    runs = {}
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend, options=NO_FOLDING) as s:
            runs[backend] = [s.run(u) for _ in range(3)]
    for k in range(3):
        want = uniform_values(10, fl.float32, 7, 3, offset=k * 10 * 256)
        np.testing.assert_array_equal(runs["c"][k], want)
        np.testing.assert_array_equal(runs["interpreter"][k], want)
    assert not np.array_equal(runs["c"][0], runs["c"][1])


def test_distribution_moments(graph):
    n = 200_000
    fetches = {}
    for op in FLOAT_OPS:
        for dt in (fl.float32, fl.float64):
            fetches[f"{op}/{dt.ir_name}"] = fl.apply_op(
                op, [fl.constant([n])], {"dtype": dt, "seed": 5, "seed2": 9})
    fetches["int"] = fl.apply_op("RandomUniformInt", [fl.constant([n]), fl.constant(-3),
                                                      fl.constant(7)], {"seed": 5, "seed2": 9})
    with fl.Session(graph=graph, backend="c") as s:
        got = dict(zip(fetches, s.run(list(fetches.values()))))
    for dt in ("f32", "f64"):
        u = got[f"RandomUniform/{dt}"].astype(np.float64)
        assert u.min() >= 0 and u.max() < 1
        assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
        z = got[f"RandomStandardNormal/{dt}"].astype(np.float64)
        assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02
        assert abs(np.mean(z ** 3)) < 0.05 and abs(np.mean(z ** 4) - 3) < 0.1
        t = got[f"TruncatedNormal/{dt}"].astype(np.float64)
        assert np.abs(t).max() < 2 and abs(t.mean()) < 0.02
        assert abs(t.std() - 0.8796) < 0.02                  # std of N(0, 1) cut at +-2
    counts = np.bincount(got["int"] + 3, minlength=10)
    assert got["int"].min() == -3 and got["int"].max() == 6
    assert np.all(np.abs(counts / n - 0.1) < 0.01)


def test_uniform_int_errors_and_shapes(graph):
    lo = fl.placeholder(fl.int32, [], name="lo")
    hi = fl.placeholder(fl.int32, [], name="hi")
    dims = fl.placeholder(fl.int64, [None], name="dims")
    r = fl.apply_op("RandomUniformInt", [fl.constant([3]), lo, hi], name="rint")
    empty = fl.apply_op("RandomUniformInt", [fl.constant([0, 2]), lo, hi])
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises((ExecutionError, RuntimeExecutionError),
                               match="rint.*minval < maxval"):
                s.run(r, {lo: 4, hi: 4})
            assert s.run(empty, {lo: 4, hi: 1}).shape == (0, 2)
    with pytest.raises(ShapeError, match="0-D"):
        fl.apply_op("RandomUniformInt", [fl.constant([3]), fl.constant([1]), fl.constant(2)])
    with pytest.raises(ShapeError, match=">= 0"):
        fl.apply_op("RandomUniform", [fl.constant([2, -1])], {"dtype": fl.float32})
    assert fl.apply_op("RandomStandardNormal", [dims], {"dtype": fl.float64}).shape.ndims is None
    bad = fl.apply_op("TruncatedNormal", [fl.placeholder(fl.int32, [2])],
                      {"dtype": fl.float32}, name="tn")
    assert bad.shape == (None, None)
    for op in FLOAT_OPS + ("RandomUniformInt",):
        assert get_op(op).stateful


def test_random_api_and_seed_rule(graph):
    a = fl.random_uniform([4, 5], minval=-2.0, maxval=3.0, seed=3)
    b = fl.random_uniform([4, 5], minval=-2.0, maxval=3.0, seed=3)
    c = fl.random_uniform([4, 5])
    d = fl.random_uniform([4, 5])
    e = fl.random_uniform([1000], minval=10, maxval=20, dtype=fl.int64, seed=1)
    f = fl.random_normal([3000], mean=5.0, stddev=0.5, dtype=fl.float64, seed=2)
    g = fl.truncated_normal([3000], mean=-1.0, stddev=2.0, seed=2)
    src = graph.node(a.name.split(":")[0]).inputs[0].node.inputs[0].node
    assert src.op == "RandomUniform" and (src.attrs["seed"], src.attrs["seed2"]) == (87654321, 3)
    want, got = run_both(graph, [a, b, c, d, e, f, g])
    for w, x in zip(want, got):                  # scale and shift may round differently in C
        np.testing.assert_allclose(x, w, rtol=1e-6, atol=1e-6)
        assert x.dtype == w.dtype
    av, bv, cv, dv, ev, fv, gv = got
    np.testing.assert_array_equal(av, bv)
    assert not np.array_equal(cv, dv) and not np.array_equal(av, cv)
    assert av.min() >= -2 and av.max() < 3 and av.dtype == np.float32
    assert ev.dtype == np.int64 and ev.min() >= 10 and ev.max() < 20
    assert abs(fv.mean() - 5) < 0.05 and abs(fv.std() - 0.5) < 0.05
    assert np.all(np.abs(gv + 1) < 4) and gv.dtype == np.float32
    with pytest.raises(ValueError, match="maxval"):
        fl.random_uniform([2], dtype=fl.int32)
    with pytest.raises(TypeError, match="float"):
        fl.random_normal([2], dtype=fl.int32)


# First numbers of tf.raw_ops.<op>(shape=[5], seed=87654321, seed2=1) from TensorFlow 2.21 (CPU).
TF_GOLDEN = {
    ("RandomUniform", "f32"): [0.2390373945236206, 0.92039954662323, 0.05051243305206299,
                               0.4957444667816162, 0.8355222940444946],
    ("RandomStandardNormal", "f32"): [-0.8113182187080383, 1.4845987558364868,
                                      0.06532937288284302, -2.442704200744629,
                                      0.09924840182065964],
    ("TruncatedNormal", "f32"): [-0.8113182187080383, 1.4845987558364868, 0.06532937288284302,
                                 0.09924840182065964, 0.6396970748901367],
    ("RandomUniform", "f64"): [0.9122999234504989, 0.4040997484619626, 0.6841790844248057,
                               0.704905089841523, 0.15071409333057018],
    ("RandomStandardNormal", "f64"): [0.24282754598505307, -0.35299821810996557,
                                      -0.8365077914900015, -0.24356901971324732,
                                      1.9100682898663162],
    ("TruncatedNormal", "f64"): [0.24282754598505307, -0.35299821810996557,
                                 -0.16554790468414687, 0.34224683233230957,
                                 -0.012115088506327797],
    ("RandomUniformInt", "i32"): [38, 12, 35, 71, 63],
    ("RandomUniformInt", "i64"): [667024176879815, 114963146766129, 649132782580325,
                                  754100241909578, 798103286475091],
}
INT_RANGES = {"i32": (-7, 100), "i64": (-2**40, 2**50)}


def test_numbers_match_tensorflow(graph):
    """fl's seed rule and both backends reproduce TensorFlow's numbers exactly."""
    fetches = {}
    for (op, dt), _ in TF_GOLDEN.items():
        if op == "RandomUniformInt":
            lo, hi = INT_RANGES[dt]
            fetches[op, dt] = fl.random_uniform([5], lo, hi, dtype=dt, seed=1)
        else:
            fn = {"RandomUniform": fl.random_uniform, "RandomStandardNormal": fl.random_normal,
                  "TruncatedNormal": fl.truncated_normal}[op]
            fetches[op, dt] = fn([5], dtype=dt, seed=1)
    for results in run_both(graph, fetches):
        for key, got in zip(fetches, results):
            want = np.array(TF_GOLDEN[key], dtype=got.dtype)
            np.testing.assert_array_equal(got, want, err_msg=str(key))


def test_optimizer_keeps_every_random_op(graph):
    """Stateful: identical random ops are not merged by CSE nor evaluated by folding."""
    from compiler.passes.manager import PassManager
    from compiler.options import PipelineOptions
    from compiler.step import make_step_graph
    attrs = {"dtype": fl.float32, "seed": 1, "seed2": 2}
    a = fl.apply_op("RandomUniform", [fl.constant([3])], attrs)
    b = fl.apply_op("RandomUniform", [fl.constant([3])], attrs)
    step = make_step_graph(graph, [], [a.output, (a + b).output])
    PassManager(PipelineOptions(), read_environment=False).run(step.graph)
    assert sum(n.op == "RandomUniform" for n in step.graph) == 2
