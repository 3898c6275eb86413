"""``fl.reduce_logsumexp``, as ``tf.reduce_logsumexp``: against numpy in the interpreter and
compiled C, no overflow for large values, -inf rows, keepdims and the TF1 argument names, and
its gradient (the softmax of the reduced axis)."""
import numpy as np
import pytest

import dsl as fl


def _numpy(x, axis, keepdims=False):
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    with np.errstate(divide="ignore"):             # log(0) of a -inf row: -inf, as TF
        out = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return out if keepdims else np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_matches_numpy_without_overflow(backend):
    rng = np.random.default_rng(3)
    v = rng.standard_normal((3, 4, 5)).astype(np.float32) * 3
    v[0, 0, :] = 1000.0                       # exp would overflow without the shift
    v[1, 2, :] = -np.inf                      # an empty row stays -inf
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 4, 5])
        outs = [fl.reduce_logsumexp(x, 2), fl.reduce_logsumexp(x, [0, 2], keepdims=True),
                fl.reduce_logsumexp(x), fl.reduce_logsumexp(x, reduction_indices=1,
                                                            keep_dims=True)]
        with fl.Session(graph=g, backend=backend) as s:
            got = s.run(outs, {x: v})
    want = [_numpy(v, 2), _numpy(v, (0, 2), True), _numpy(v, None), _numpy(v, 1, True)]
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5)
    assert got[0][0, 0] == pytest.approx(1000.0 + np.log(5.0))
    assert got[0][1, 2] == -np.inf


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_gradient_is_the_softmax(backend):
    v = np.random.default_rng(4).standard_normal((2, 6)) * 4
    g = fl.Graph()
    with g.as_default():
        x = fl.constant(v)
        grad = fl.gradients(fl.reduce_sum(fl.reduce_logsumexp(x, 1) * [1.0, 2.0]), x)[0]
        with fl.Session(graph=g, backend=backend) as s:
            got = s.run(grad)
    soft = np.exp(v - v.max(1, keepdims=True))
    soft /= soft.sum(1, keepdims=True)
    np.testing.assert_allclose(got, soft * np.array([[1.0], [2.0]]), rtol=1e-10)
