"""With FLOWC_NUM_THREADS > 1 an im2col convolution is cut into one part of rows per thread
(``conv.c.j2``): each part runs its own chunks (im2col, gemm, epilogue), the input gradient's
parts are whole images and the filter gradient's parts sum into their own buffers, added up
after; a direct convolution (few taps, ``conv_direct.c.j2``) cuts its output rows the same way. Forward (with bias and ReLU fused), input and filter (and bias) gradients equal the
interpreter for 2 and 3 threads, with several chunks per part, batches that do not divide by
the threads, strides, dilations and VALID padding; one thread and two train alike."""
import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter, train_per_thread_count

TOL = dict(rtol=2e-4, atol=2e-4)

# (input, filter, stride, dilation, padding): each has several chunks of column rows and at
# least 2^20 multiply-adds, so it is cut across the threads.
CASES = [
    ((5, 12, 12, 32), (5, 5, 32, 16), 1, 1, "SAME"),
    ((9, 30, 30, 8), (3, 3, 8, 16), 1, 1, "SAME"),
    ((7, 31, 29, 8), (3, 3, 8, 24), 2, 1, "VALID"),
    ((6, 20, 20, 32), (3, 3, 32, 8), 1, 2, "SAME"),
    ((1, 40, 40, 16), (3, 3, 16, 32), 1, 1, "SAME"),     # one image: the input gradient is not cut
    ((6, 28, 28, 1), (5, 5, 1, 32), 1, 1, "SAME"),       # few taps: direct (conv_direct.c.j2)
    ((9, 33, 31, 3), (3, 3, 3, 32), 2, 1, "SAME"),
]


def _layer_gradients(rng, i, xs, fs, stride, dilation, padding):
    x = fl.constant(rng.standard_normal(xs).astype(np.float32), name=f"x{i}")
    f = fl.Variable(rng.standard_normal(fs).astype(np.float32) * 0.2, name=f"f{i}")
    b = fl.Variable(rng.standard_normal(fs[3]).astype(np.float32), name=f"b{i}")
    y = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(x, f, stride, padding, dilations=dilation), b))
    loss = fl.reduce_sum(y * fl.constant(rng.standard_normal(tuple(y.shape.as_list())).astype(np.float32)))
    dx, df, db = fl.gradients(loss, [x, f, b])
    return {f"y{i}": y, f"dx{i}": dx, f"df{i}": df, f"db{i}": db}


@pytest.mark.parametrize("threads", ["2", "3"])
def test_cut_convolutions_match_the_interpreter(graph, rng, monkeypatch, threads):
    monkeypatch.setenv("FLOWC_NUM_THREADS", threads)
    fetches = {}
    for i, case in enumerate(CASES):
        fetches.update(_layer_gradients(rng, i, *case))
    init = fl.global_variables_initializer()
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            s.run(init)
            got = s.run(fetches)
        if backend == "interpreter":
            want = got
    for name in fetches:
        np.testing.assert_allclose(got[name], want[name], err_msg=name, **TOL)


def test_cut_convolution_gradients_train_like_one_thread(graph, rng, monkeypatch):
    x = fl.placeholder(fl.float32, [None, 14, 14, 32], name="x")
    f = fl.Variable(rng.standard_normal((5, 5, 32, 64)).astype(np.float32) * 0.05, name="f")
    b = fl.Variable(np.zeros(64, np.float32), name="b")
    y = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(x, f, 1, "SAME"), b))
    loss = fl.reduce_mean(fl.square(y - 0.5))
    step = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
    feed = {x: rng.standard_normal((6, 14, 14, 32)).astype(np.float32)}
    results = train_per_thread_count(graph, monkeypatch, loss, step, feed, [f, b])
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    for one, two in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(one, two, rtol=1e-4, atol=1e-6)


def test_a_small_convolution_is_not_cut_and_still_matches(graph, rng, monkeypatch):
    monkeypatch.setenv("FLOWC_NUM_THREADS", "2")
    x = fl.constant(rng.standard_normal((2, 6, 6, 3)).astype(np.float32))
    f = fl.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
    check_against_interpreter(graph, {"y": fl.nn.conv2d(x, f, 1, "SAME")}, {}, **TOL)


# (input, window, stride, padding): at least 2^16 outputs, so the images are cut across threads.
POOL_CASES = [
    ((8, 32, 32, 32), 2, 2, "VALID"),
    ((8, 33, 33, 32), 3, 2, "SAME"),                      # overlapping windows
]


@pytest.mark.parametrize("threads", ["2", "3"])
def test_cut_poolings_and_their_gradients_match_the_interpreter(graph, rng, monkeypatch, threads):
    monkeypatch.setenv("FLOWC_NUM_THREADS", threads)
    fetches = {}
    for i, (xs, k, s, padding) in enumerate(POOL_CASES):
        x = fl.constant(rng.standard_normal(xs).astype(np.float32), name=f"x{i}")
        for kind, pool in (("max", fl.nn.max_pool), ("avg", fl.nn.avg_pool)):
            h = fl.nn.relu(x) if kind == "max" else x            # max: the ReLU-masked gradient
            y = pool(h, [1, k, k, 1], [1, s, s, 1], padding)
            r = fl.constant(rng.standard_normal(tuple(y.shape.as_list())).astype(np.float32))
            fetches[f"{kind}{i}"] = y
            fetches[f"d{kind}{i}"] = fl.gradients(fl.reduce_sum(y * r), [x])[0]
    check_against_interpreter(graph, fetches, {}, **TOL)
