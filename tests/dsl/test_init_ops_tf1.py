"""TF1 initializers beyond the variance-scaling family: orthogonal (TensorFlow's matrix for
the same seed), identity, uniform_unit_scaling, and the he/lecun shorthands."""
import math

import numpy as np
import pytest

import dsl as fl

# tf.compat.v1.orthogonal_initializer(gain=1.5, seed=3) for shape (4, 3), TensorFlow 2.21
TF_ORTHOGONAL_4x3 = [[0.925360, -0.501824, -0.884288], [0.161351, 0.656075, -0.885243],
                     [0.261615, 1.251798, 0.091590], [-1.139838, -0.027215, -0.822186]]


def _init(initializer, shape, dtype=fl.float32):
    with fl.Graph().as_default():
        v = fl.get_variable("v", shape, dtype=dtype, initializer=initializer)
        with fl.Session() as s:
            s.run(fl.global_variables_initializer())
            return s.run(v)


def test_orthogonal_is_tensorflows_matrix():
    got = _init(fl.orthogonal_initializer(gain=1.5, seed=3), [4, 3])
    np.testing.assert_allclose(got, TF_ORTHOGONAL_4x3, atol=2e-6)


@pytest.mark.parametrize("shape", [[5, 3], [3, 5], [2, 3, 4], [3, 3, 2, 6]])
@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
def test_orthogonal_columns_or_rows_are_orthonormal(shape, dtype):
    w = _init(fl.initializers.orthogonal(gain=2.0, seed=1), shape, dtype)
    assert w.shape == tuple(shape) and w.dtype == dtype.np
    m = w.reshape(-1, shape[-1]) / 2.0
    small = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(small, np.eye(len(small)), atol=1e-5)


def test_orthogonal_refuses_vectors_and_ints():
    with pytest.raises(ValueError, match="at least two-dimensional"):
        _init(fl.orthogonal_initializer(), [4])
    with pytest.raises(TypeError, match="float32 or float64"):
        _init(fl.orthogonal_initializer(), [2, 2], fl.int32)


def test_identity_and_uniform_unit_scaling():
    np.testing.assert_array_equal(_init(fl.identity_initializer(gain=3.0), [2, 3]),
                                  3.0 * np.eye(2, 3))
    with pytest.raises(ValueError, match="2D"):
        _init(fl.initializers.identity(), [2, 2, 2])
    u = _init(fl.uniform_unit_scaling_initializer(factor=2.0, seed=4), [50, 40])
    limit = 2.0 * math.sqrt(3 / 50)
    assert np.abs(u).max() <= limit and np.abs(u).max() > 0.8 * limit


@pytest.mark.parametrize("name,scale,dist", [("he_normal", 2.0, "truncated_normal"),
                                             ("he_uniform", 2.0, "uniform"),
                                             ("lecun_normal", 1.0, "truncated_normal"),
                                             ("lecun_uniform", 1.0, "uniform")])
def test_he_and_lecun_are_variance_scaling_fan_in(name, scale, dist):
    a = _init(getattr(fl.initializers, name)(seed=5), [30, 20])
    b = _init(fl.variance_scaling_initializer(scale, "fan_in", dist, seed=5), [30, 20])
    np.testing.assert_array_equal(a, b)
