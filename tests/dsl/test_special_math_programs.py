"""TF1 programs that use the special functions, written against ``tf`` and run with
``import dsl as tf``: the maximum-likelihood shape of a Gamma distribution trained through
lgamma (whose gradient is digamma, whose gradient is polygamma), and distribution functions
(Gamma and Beta CDFs, the normal quantile) as tf.distributions computes them, in both
backends."""
import math

import numpy as np
import pytest

import dsl as tf
from compiler.ops.math_special_functions import digamma, polygamma

SAMPLES = np.array([0.8, 1.7, 2.2, 0.4, 3.1, 1.25, 2.6, 0.95, 1.6, 4.0])


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_gamma_shape_by_maximum_likelihood(backend):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [None], name="x")
        log_alpha = tf.Variable(0.0, dtype=tf.float64, name="log_alpha")
        alpha = tf.exp(log_alpha)
        # the Gamma(alpha, rate 1) log-likelihood per sample
        loglik = tf.reduce_mean((alpha - 1.0) * tf.log(x) - x - tf.lgamma(alpha))
        train = tf.train.GradientDescentOptimizer(0.5).minimize(-loglik)
        d_alpha = tf.gradients(loglik, alpha)[0]
        d2_alpha = tf.gradients(d_alpha, alpha)[0]
        init = tf.global_variables_initializer()
    with tf.Session(graph=g, backend=backend) as sess:
        sess.run(init)
        for _ in range(300):
            sess.run(train, {x: SAMPLES})
        a, d1, d2 = sess.run([alpha, d_alpha, d2_alpha], {x: SAMPLES})
    # the optimum: digamma(alpha) = mean(log x)
    assert digamma(float(a)) == pytest.approx(np.mean(np.log(SAMPLES)), abs=1e-6)
    assert abs(d1) < 1e-6
    assert d2 == pytest.approx(-polygamma(1.0, float(a)), rel=1e-12)


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_distribution_functions(backend):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None], name="x")
        gamma_cdf = tf.igamma(2.0, x)                       # Gamma(2, 1).cdf
        gamma_sf = tf.igammac(2.0, x)
        p = tf.placeholder(tf.float32, [None], name="p")
        quantile = 1.5 + 2.0 * tf.ndtri(p)                  # Normal(1.5, 2).quantile
        beta_cdf = tf.betainc(2.0, 3.0, p)                  # Beta(2, 3).cdf
        log_beta = tf.lgamma(2.0) + tf.lgamma(3.0) - tf.lgamma(5.0)
    xv = np.array([0.0, 0.5, 1.0, 2.0, 10.0], np.float32)
    pv = np.array([0.025, 0.5, 0.975, 0.3, 1.0], np.float32)
    with tf.Session(graph=g, backend=backend) as sess:
        cdf, sf, q, bc, lb = sess.run([gamma_cdf, gamma_sf, quantile, beta_cdf, log_beta],
                                      {x: xv, p: pv})
    x64, p64 = xv.astype(float), pv.astype(float)
    np.testing.assert_allclose(cdf, 1 - np.exp(-x64) * (1 + x64), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(cdf + sf, 1.0, rtol=1e-6)
    np.testing.assert_allclose(q[:3], [1.5 - 2 * 1.959963984540054, 1.5,
                                       1.5 + 2 * 1.959963984540054], rtol=1e-6)
    assert q[4] == np.inf
    # Beta(2, 3): I_p = 12 integral(0, p, t (1 - t)^2 dt) = 12 p^2 (1/2 - 2p/3 + p^2/4)
    np.testing.assert_allclose(bc, 12 * p64 ** 2 * (0.5 - 2 * p64 / 3 + p64 ** 2 / 4), rtol=2e-6)
    assert lb == pytest.approx(math.log(1 / 12), rel=1e-6)


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_lbeta_and_unscaled_bessel_functions(backend):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [None, 3], name="x")
        lb = tf.lbeta(x)
        i0, i1 = tf.bessel_i0(x), tf.bessel_i1(x)
        empty = tf.lbeta(tf.zeros([2, 0], tf.float64))
    xv = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 4.0]])
    with tf.Session(graph=g, backend=backend) as sess:
        got_lb, got_i0, got_i1, got_empty = sess.run([lb, i0, i1, empty], {x: xv})
    want = [sum(math.lgamma(v) for v in row) - math.lgamma(sum(row)) for row in xv]
    np.testing.assert_allclose(got_lb, want, rtol=1e-14)
    np.testing.assert_allclose(got_i0, np.i0(xv), rtol=1e-14)
    # I1(x) = x/2 sum_k (x^2/4)^k / (k! (k+1)!)
    i1_series = [[v / 2 * sum((v * v / 4) ** k / (math.factorial(k) * math.factorial(k + 1))
                              for k in range(40)) for v in row] for row in xv]
    np.testing.assert_allclose(got_i1, i1_series, rtol=1e-14)
    assert got_lb.shape == (2,) and (got_empty == -np.inf).all()
