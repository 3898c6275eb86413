"""The TF1 math functions TensorFlow builds from other ops (dsl/math_compositions.py), against
numpy in the interpreter and compiled C: log_sigmoid without overflow, reduce_variance /
reduce_std / reduce_euclidean_norm, scalar_mul, accumulate_n, xlogy / xdivy at x = 0 (values
and finite gradients), sort / argsort along any axis both ways (floats and integers, ties
keep their order), confusion_matrix with and without weights and num_classes."""
import numpy as np
import pytest

import dsl as fl

BACKENDS = ["c", "interpreter"]


def run(backend, fetches, feed=None):
    with fl.Session(backend=backend) as s:
        return s.run(fetches, feed or {})


@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_and_elementwise(backend):
    rng = np.random.default_rng(5)
    v = rng.standard_normal((3, 4)).astype(np.float32)
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 4])
        outs = [fl.log_sigmoid(x * 100.0), fl.reduce_variance(x, 1), fl.reduce_std(x),
                fl.reduce_std(x, 0, keepdims=True), fl.reduce_euclidean_norm(x, [0, 1]),
                fl.scalar_mul(2.5, x), fl.accumulate_n([x, x * 2.0, x * 3.0]),
                fl.math.reduce_variance(x, axis=0)]
        got = run(backend, outs, {x: v})
    w = v.astype(np.float64) * 100
    np.testing.assert_allclose(got[0], -np.logaddexp(0, -w), rtol=1e-5, atol=1e-5)
    assert np.isfinite(got[0]).all()
    np.testing.assert_allclose(got[1], v.var(1), rtol=1e-5)
    np.testing.assert_allclose(got[2], v.std(), rtol=1e-5)
    np.testing.assert_allclose(got[3], v.std(0, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(got[4], np.sqrt((v ** 2).sum()), rtol=1e-5)
    np.testing.assert_allclose(got[5], 2.5 * v, rtol=1e-6)
    np.testing.assert_allclose(got[6], 6 * v, rtol=1e-6)
    np.testing.assert_allclose(got[7], v.var(0), rtol=1e-5)
    with pytest.raises(ValueError, match="Only scalar multiply"):
        fl.scalar_mul([1.0, 2.0], fl.constant([1.0, 2.0]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_xlogy_and_xdivy_are_zero_where_x_is_with_finite_gradients(backend):
    xv = np.array([0.0, 0.0, 2.0, 3.0])
    yv = np.array([0.0, 5.0, 4.0, 0.5])
    g = fl.Graph()
    with g.as_default():
        x, y = fl.constant(xv), fl.constant(yv)
        a, b = fl.xlogy(x, y), fl.math.xdivy(x, y)
        grads = fl.gradients(fl.reduce_sum(a) + fl.reduce_sum(b), [x, y])
        got = run(backend, [a, b] + grads)
    np.testing.assert_allclose(got[0], [0, 0, 2 * np.log(4), 3 * np.log(0.5)])
    np.testing.assert_allclose(got[1], [0, 0, 0.5, 6.0])
    assert all(np.isfinite(t).all() for t in got[2:])
    np.testing.assert_allclose(got[3][2:], [2 / 4 - 2 / 16, 3 / 0.5 - 3 / 0.25])


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_and_argsort(backend):
    rng = np.random.default_rng(6)
    f = rng.standard_normal((3, 5, 4)).astype(np.float32)
    i = rng.integers(-5, 5, (4, 6)).astype(np.int32)
    i[0, :] = np.iinfo(np.int32).min                  # ascending integers: no overflow
    g = fl.Graph()
    with g.as_default():
        xf = fl.placeholder(fl.float32, [None, 5, 4])
        xi = fl.constant(i)
        outs = [fl.sort(xf), fl.sort(xf, axis=1, direction="DESCENDING"),
                fl.argsort(xf, axis=0), fl.sort(xi), fl.argsort(xi, direction="DESCENDING")]
        got = run(backend, outs, {xf: f})
    np.testing.assert_array_equal(got[0], np.sort(f, -1))
    np.testing.assert_array_equal(got[1], -np.sort(-f, 1))
    np.testing.assert_array_equal(got[2], np.argsort(f, 0, kind="stable"))
    np.testing.assert_array_equal(got[3], np.sort(i, -1))
    np.testing.assert_array_equal(got[4], np.argsort(-i.astype(np.int64), -1, kind="stable"))
    assert got[4].dtype == np.int32
    with pytest.raises(ValueError, match="direction"):
        fl.sort(fl.constant([1.0]), direction="UP")


@pytest.mark.parametrize("backend", BACKENDS)
def test_confusion_matrix(backend):
    labels = np.array([0, 1, 2, 2, 1, 0, 2])
    preds = np.array([0, 2, 2, 1, 1, 0, 2])
    weights = np.arange(1, 8, dtype=np.float32)
    g = fl.Graph()
    with g.as_default():
        lab = fl.placeholder(fl.int32, [None])
        pre = fl.placeholder(fl.int64, [None])
        outs = [fl.confusion_matrix(lab, pre), fl.math.confusion_matrix(lab, pre, num_classes=4),
                fl.confusion_matrix(lab, pre, weights=weights, dtype=fl.float32)]
        got = run(backend, outs, {lab: labels.astype(np.int32), pre: preds})
    want = np.zeros((3, 3), np.int32)
    wsum = np.zeros((3, 3), np.float32)
    for a, b, w in zip(labels, preds, weights):
        want[a, b] += 1
        wsum[a, b] += w
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], np.pad(want, ((0, 1), (0, 1))))
    np.testing.assert_allclose(got[2], wsum)
    assert got[0].dtype == np.int32
