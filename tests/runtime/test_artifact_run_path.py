"""``Artifact.run``'s short path: feeds named in a dict (or given in order) go straight to the
compiled step's C run path, and every value that is not exactly what a feed takes is still
converted or refused as before (dtype, rank, known dims, names)."""
import numpy as np
import pytest

import dsl as fl
from compiler.step import make_step_graph, optimize, write_artifact
from runtime import FeedError, fastcall, load_artifact
from runtime.resources import ResourceStore


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    """x: f32[?,3], n: i32[] (scalar), w: f32[2,3] -> y = relu(x * n + 1), s = sum(w)."""
    g = fl.Graph("run_path")
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, 3], name="x")
        n = fl.placeholder(fl.i32, [], name="n")
        w = fl.placeholder(fl.f32, [2, 3], name="w")
        y = fl.nn.relu(x * fl.cast(n, fl.f32) + 1.0, name="y")
        s = fl.reduce_sum(w, name="s")
    step = make_step_graph(g, [x.output, n.output, w.output], [y.output, s.output])
    step.feed_names, step.fetch_names = ["x", "n", "w"], ["y", "s"]
    optimize(step)
    return load_artifact(write_artifact(step, str(tmp_path_factory.mktemp("art") / "a")))


X = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], dtype=np.float32)
W = np.arange(6, dtype=np.float32).reshape(2, 3)


def want(x, n, w):
    return np.maximum(np.asarray(x, np.float32) * n + 1, 0), np.float32(np.sum(w))


def check(got, x=X, n=3, w=W):
    y, s = want(x, n, w)
    np.testing.assert_allclose(got[0], y, rtol=1e-6)
    assert got[1].shape == () and got[1].dtype == np.float32      # a 0-d array, as before
    np.testing.assert_allclose(got[1], s, rtol=1e-6)


def test_dict_and_list_feeds_agree(artifact):
    check(artifact.run({"x": X, "n": np.int32(3), "w": W}))
    check(artifact.run({"w": W, "n": np.array(3, np.int32), "x": X}))   # any key order
    check(artifact.run([X, np.int32(3), W]))
    check(artifact.run((X, np.int32(3), W)))


def test_the_short_path_is_taken_when_the_c_run_path_exists(artifact):
    artifact.run({"x": X, "n": np.int32(3), "w": W})
    assert bool(artifact._route) == (fastcall.load() is not None)


def test_values_that_need_converting_still_run(artifact):
    check(artifact.run({"x": X.tolist(), "n": 3, "w": W.astype(np.float64)}))
    check(artifact.run({"x": X.astype(np.int64), "n": np.int64(3), "w": W}), x=X.astype(np.int64))
    wide = np.zeros((2, 6), np.float32)
    wide[:, ::2] = X
    check(artifact.run({"x": wide[:, ::2], "n": np.int32(3), "w": W}))    # not contiguous
    big_endian = X.astype(">f4")
    check(artifact.run({"x": big_endian, "n": np.int32(3), "w": W}))


@pytest.mark.parametrize("feeds, words", [
    ({"x": X.astype(bool)}, "booleans do not feed numbers"),
    ({"n": np.float32(3.0)}, "holds floats"),
    ({"n": np.int64(2 ** 40)}, "out of range"),
    ({"x": np.array(["a", "b", "c"])}, "not numeric"),
    ({"x": X[0]}, "shape [3]"),                          # rank 1 for f32[?,3]
    ({"x": np.zeros((2, 4), np.float32)}, "shape [2, 4]"),   # a known dim differs
    ({"w": np.zeros((3, 2), np.float32)}, "shape [3, 2]"),
    ({"n": np.zeros(2, np.int32)}, "shape [2]"),
])
def test_wrong_values_are_refused(artifact, feeds, words):
    values = {"x": X, "n": np.int32(3), "w": W, **feeds}
    for run in (lambda: artifact.run(values),
                lambda: artifact.run([values["x"], values["n"], values["w"]]),
                lambda: artifact.run(values, store=ResourceStore())):
        with pytest.raises(FeedError) as info:
            run()
        assert words in str(info.value)
    check(artifact.run({"x": X, "n": np.int32(3), "w": W}))     # and the next run is fine


def test_feed_names_are_checked(artifact):
    with pytest.raises(FeedError, match=r"unknown feed\(s\) z; this artifact takes x, n, w"):
        artifact.run({"x": X, "n": np.int32(3), "w": W, "z": X})
    with pytest.raises(FeedError, match=r"missing feed\(s\) n, w"):
        artifact.run({"x": X})
    with pytest.raises(FeedError, match=r"unknown feed\(s\) 7"):
        artifact.run({"x": X, "n": np.int32(3), 7: W})
    with pytest.raises(FeedError, match=r"expected 3 feeds \(x, n, w\), got 2"):
        artifact.run([X, np.int32(3)])


def test_each_run_returns_new_arrays(artifact):
    first = artifact.run({"x": X, "n": np.int32(3), "w": W})
    first[0][...] = 99
    check(artifact.run({"x": X, "n": np.int32(3), "w": W}))


def test_a_given_store_takes_the_checked_path(artifact):
    check(artifact.run({"x": X, "n": np.int32(3), "w": W}, store=ResourceStore()))
    check(artifact.run([X, 3, W], store=artifact.store))
