"""fl.Session: fetch structures, result types, the step cache, feeding any tensor,
PlaceholderWithDefault, agreement of the two backends, and concurrent runs."""
import collections

import numpy as np
import pytest

import dsl as fl
from compiler.errors import GraphError
from oracle import check_against_interpreter, run_in_threads

BACKENDS = ("interpreter", "c")
Pair = collections.namedtuple("Pair", "first second")


def _model(graph):
    x = fl.placeholder(fl.float32, [2, 3], name="x")
    k = fl.placeholder(fl.int32, [], name="k")
    y = fl.multiply(x, 2.0, name="y")
    z = fl.add(y, 1.0, name="z")
    total = fl.raw_ops.Size(input=x, name="total")
    neg_k = fl.raw_ops.Neg(x=k, name="neg_k")
    with fl.control_dependencies([z]):
        step = fl.raw_ops.NoOp(name="step")
    return x, k, y, z, total, neg_k, step


@pytest.mark.parametrize("backend", BACKENDS)
def test_fetch_structures(graph, rng, backend):
    x, k, y, z, total, neg_k, step = _model(graph)
    xv = rng.standard_normal((2, 3)).astype(np.float32)
    feed = {x: xv, k: 7}
    with fl.Session(graph=graph, backend=backend) as s:
        got = s.run({"list": [y, (step, "z:0"), "x:0"], "pair": Pair(neg_k, [total]),
                     "nested": {"again": y}, "op": "step"}, feed)
        assert set(got) == {"list", "pair", "nested", "op"}
        ys, (none, zs), xs = got["list"]
        np.testing.assert_array_equal(ys, xv * 2)
        np.testing.assert_array_equal(zs, xv * 2 + 1)
        np.testing.assert_array_equal(xs, xv)
        assert none is None and got["op"] is None
        assert isinstance(got["pair"], Pair) and got["pair"].first == -7
        assert isinstance(got["pair"].second, list) and got["pair"].second[0] == 6
        np.testing.assert_array_equal(got["nested"]["again"], ys)
        assert isinstance(got["list"][1], tuple)
        # The same tensors fetched in other spellings share the compiled step.
        count = s.compile_count
        np.testing.assert_array_equal(s.run(y, feed), xv * 2)
        np.testing.assert_array_equal(s.run("y:0", feed), xv * 2)
        assert s.run(step, feed) is None and s.run("step", feed) is None
        assert s.run([], feed) == [] and s.run({}) == {} and s.run(()) == ()
        single = s.run([y, y, "y:0"], feed)
        assert all(np.array_equal(v, xv * 2) for v in single)
        if backend == "c":
            assert s.compile_count - count <= 2          # [y] and [step] only


def test_fetch_errors(graph):
    x, k, y, z, total, neg_k, step = _model(graph)
    other = fl.Graph()
    with other.as_default():
        foreign = fl.constant(1.0)
    with fl.Session(graph=graph) as s:
        with pytest.raises(TypeError, match="cannot fetch 3"):
            s.run([y, 3])
        with pytest.raises(GraphError, match="no node named 'nope'"):
            s.run("nope:0")
        with pytest.raises(GraphError, match="another graph"):
            s.run(foreign)
    with pytest.raises(RuntimeError, match="closed"):
        s.run(y, {x: np.zeros((2, 3), np.float32)})
    with pytest.raises(ValueError, match="unknown backend"):
        fl.Session(graph=graph, backend="gpu")


DTYPES = [fl.float16, fl.float32, fl.float64, fl.int8, fl.int16, fl.int32, fl.int64,
          fl.uint8, fl.bool_]


@pytest.mark.parametrize("backend", BACKENDS)
def test_results_have_exact_dtypes_and_scalars_are_numpy_scalars(graph, backend):
    fetches, feed = [], {}
    for dt in DTYPES:
        value = np.array([[1, 0, 1]]).astype(dt.np)
        p = fl.placeholder(dt, [1, 3], name=f"p_{dt.ir_name}")
        q = fl.placeholder(dt, [], name=f"q_{dt.ir_name}")
        feed[p], feed[q] = value, value[0, 0]
        fetches += [fl.identity(p), fl.identity(q), fl.constant(value[0, 1], dtype=dt),
                    fl.constant(value)]
    with fl.Session(graph=graph, backend=backend) as s:
        got = s.run(fetches, feed)
    for i, dt in enumerate(DTYPES):
        arr, scalar, const_scalar, const_arr = got[4 * i: 4 * i + 4]
        assert type(arr) is np.ndarray and arr.dtype == dt.np and arr.shape == (1, 3), dt
        assert type(const_arr) is np.ndarray and const_arr.dtype == dt.np, dt
        assert type(scalar) is dt.np.type and scalar == 1, dt
        assert type(const_scalar) is dt.np.type and const_scalar == 0, dt


def test_repeated_signature_compiles_nothing(graph, rng):
    x, k, y, z, total, neg_k, step = _model(graph)
    with fl.Session(graph=graph) as s:
        s.run([z, neg_k], {x: np.zeros((2, 3), np.float32), k: 1})
        assert s.compile_count == 1
        for i in range(20):                            # new lists, new dicts, other key order
            xv = rng.standard_normal((2, 3)).astype(np.float32)
            feed = {x: xv, k: i} if i % 2 else {"k:0": np.int32(i), "x": xv}
            zs, nk = s.run([z, neg_k], feed)
            np.testing.assert_allclose(zs, xv * 2 + 1, rtol=1e-6)
            assert nk == -i
        assert s.compile_count == 1
        s.run([z], {x: np.zeros((2, 3), np.float32)})  # another signature: one more compile
        s.run([z], {x: np.ones((2, 3), np.float32)})
        assert s.compile_count == 2
        call = s.make_callable([z, neg_k], [x, k])
        zs, nk = call(np.ones((2, 3), np.float32), 5)
        np.testing.assert_array_equal(zs, np.full((2, 3), 3, np.float32))
        assert nk == -5 and s.compile_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_feeding_any_tensor_overrides_it(graph, backend):
    x, k, y, z, total, neg_k, step = _model(graph)
    yv = np.arange(6, dtype=np.float32).reshape(2, 3)
    with fl.Session(graph=graph, backend=backend) as s:
        # x need not be fed: y is, so nothing upstream of it runs.
        np.testing.assert_array_equal(s.run(z, {y: yv}), yv + 1)
        got_y, got_z = s.run([y, z], {y: yv})
        np.testing.assert_array_equal(got_y, yv)      # a fetched fed tensor is the fed value
        np.testing.assert_array_equal(got_z, yv + 1)
        c = y.op.inputs[1]                            # the 2.0 constant
        got = s.run(y, {x: np.ones((2, 3), np.float32), c: np.float32(5.0)})
        np.testing.assert_array_equal(got, np.full((2, 3), 5, np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_placeholder_with_default(graph, backend):
    p = fl.placeholder_with_default(fl.constant([1, 2, 3]), [None], name="p")
    q = fl.multiply(p, 2, name="q")
    with fl.Session(graph=graph, backend=backend) as s:
        np.testing.assert_array_equal(s.run(q), [2, 4, 6])
        got = s.run([q, p], {p: np.array([5, 6], np.int32)})
        np.testing.assert_array_equal(got[0], [10, 12])
        np.testing.assert_array_equal(got[1], [5, 6])
        assert got[0].dtype == np.int32
        np.testing.assert_array_equal(s.run(p), [1, 2, 3])


def test_backends_agree(graph, rng):
    x = fl.placeholder(fl.float32, [None, 4], name="x")
    i = fl.placeholder(fl.int64, [4], name="i")
    a = fl.exp(fl.negative(x)) * 3.0 + fl.nn.relu(x)
    b = fl.raw_ops.Cast(x=i, DstT=fl.float32) * x
    c = fl.raw_ops.Shape(input=b, out_type=fl.int64)
    d = fl.add(i, i)
    fetches = {"a": a, "b": b, "c": c, "d": d, "size": fl.raw_ops.Size(input=a)}
    for batch in (0, 1, 5):
        feed = {x: rng.standard_normal((batch, 4)).astype(np.float32),
                i: rng.integers(-9, 9, 4)}
        got = check_against_interpreter(graph, fetches, feed)
        assert got["b"].shape == (batch, 4) and list(got["c"]) == [batch, 4]


def test_concurrent_runs_share_one_compiled_step(graph):
    x = fl.placeholder(fl.float32, [None, 8], name="x")
    y = fl.exp(x) * 2.0 + x
    s = fl.Session(graph=graph)
    s.run(y, {x: np.zeros((1, 8), np.float32)})

    def worker(seed):
        r = np.random.default_rng(seed)
        for _ in range(150):
            xv = r.standard_normal((int(r.integers(1, 40)), 8)).astype(np.float32)
            got = s.run(y, {x: xv})
            np.testing.assert_allclose(got, np.exp(xv) * 2 + xv, rtol=1e-5, atol=1e-6)

    run_in_threads(worker, range(8))
    assert s.compile_count == 1
    s.close()
