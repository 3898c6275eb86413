"""Floating ``Prod`` (``fl.reduce_prod``) whose running product leaves the float range before
the end: the result is the exact product rounded to the dtype, in every backend, whatever
order a kernel multiplies in. An exact product that overflows is ``inf`` with its sign (what
TensorFlow gives for a float32 product that overflows), one that underflows is 0, one in
range is that value; NaN and ``inf * 0`` give NaN.

Before, the interpreter multiplied in float32 in order (a product whose first factors
underflowed to 0 stayed 0 however large the rest) and the C kernel in 32 independent lanes
(one lane's 0 times another's inf: NaN): ``[1e-30] * 4 + [1e30] * 10`` gave 0.0 and NaN
instead of inf.
"""
import numpy as np
import pytest

import dsl as fl
from oracle import assert_same, check_against_interpreter

INF = np.inf


def _row(n, head, tail=()):
    """A row of ``n`` ones with ``head`` at its start and ``tail`` at its end."""
    row = np.ones(n)
    row[:len(head)] = head
    if len(tail):
        row[n - len(tail):] = tail
    return row


def _f32_cases(n=64):
    """Rows of ``n`` f32 values (long enough for the C kernel's lanes) and their products."""
    lanes = np.ones(n)
    lanes[[0, 32]] = 1e-30                      # one lane underflows, the next one overflows
    lanes[[1, 2, 3, 4, 33, 34, 35, 36]] = 1e30
    cases = [
        (_row(n, [1e-30] * 4 + [1e30] * 10), INF),           # exact 1e180: overflows
        (_row(n, [1e-30] * 4 + [-1e30] + [1e30] * 9), -INF),
        (_row(n, [1e20] * 3), INF),                           # a plain overflow
        (_row(n, [-1e20] * 3), -INF),
        (_row(n, [1e30] * 4 + [1e-30] * 10), 0.0),           # exact 1e-180: underflows
        (_row(n, [1e30] * 4 + [1e-30] * 4), 1.0),            # in range: exact
        (_row(n, [2.0] * 10, [-0.5] * 9), -2.0),
        (lanes, INF),
        (_row(n, [INF, 0.0]), np.nan),
        (_row(n, [np.nan, 1e30, 1e30]), np.nan),
    ]
    rows = np.array([r for r, _ in cases], np.float32)
    return rows, np.array([w for _, w in cases], np.float32)


def _f64_cases(n=40):
    cases = [
        (_row(n, [1e200, 1e200]), INF),
        (_row(n, [-1e200, 1e200]), -INF),
        (_row(n, [1e-200] * 2 + [1e200] * 3), 1e200),        # exact, past both ends on the way
        (_row(n, [1e300, 1e300], [1e-300, 1e-300]), 1.0),
        (_row(n, [1e-300] * 3 + [1e300] * 5), INF),          # exact 1e600
        (_row(n, [1e300] * 3 + [1e-300] * 5), 0.0),
        (_row(n, [5e-324, 2.0 ** 600, 2.0 ** 500]), 5e-324 * 2.0 ** 600 * 2.0 ** 500),
    ]
    return (np.array([r for r, _ in cases], np.float64),
            np.array([w for _, w in cases], np.float64))


def _graph(graph, device=None):
    x = fl.placeholder(fl.float32, [None, None], name="x")
    d = fl.placeholder(fl.float64, [None, None], name="d")
    v = fl.placeholder(fl.float32, [None], name="v")
    with fl.device(device):
        fetches = _fetches(x, d, v)
    rows, want = _f32_cases()
    drows, dwant = _f64_cases()
    long = np.ones(40_000, np.float32)
    long[:4] = 1e-30
    long[-9:] = -1e30                          # exact -1e150
    feed = {x: rows, d: drows, v: long}
    expected = {"rows": want, "cols": want, "keep": want[:, None], "f64": dwant,
                "f64_cols": dwant, "vector": np.float32(-INF)}
    return fetches, feed, expected


def _fetches(x, d, v):
    return {"rows": fl.reduce_prod(x, axis=1),                  # contiguous rows
            "cols": fl.reduce_prod(fl.transpose(x), axis=0),    # a leading axis
            "keep": fl.reduce_prod(x, axis=[1], keepdims=True),
            "f64": fl.reduce_prod(d, axis=1),
            "f64_cols": fl.reduce_prod(fl.transpose(d), axis=0),
            "vector": fl.reduce_prod(v)}                        # one long row: in chunks


def _check(got, expected):
    for name, want in expected.items():
        g = np.asarray(got[name])
        want = np.asarray(want, g.dtype)
        assert_same(want, g, name)
        assert np.array_equal(np.signbit(g[np.isinf(g)]), np.signbit(want[np.isinf(want)])), name


def test_an_overflowing_product_is_inf_in_the_interpreter_and_in_c(graph):
    fetches, feed, expected = _graph(graph)
    with fl.Session(graph=graph, backend="interpreter") as s:
        _check(dict(zip(fetches, s.run(list(fetches.values()), feed))), expected)
    _check(check_against_interpreter(graph, fetches, feed), expected)


@pytest.mark.usefixtures("gpu_target")
def test_an_overflowing_product_is_inf_on_the_gpu(graph):
    """The reductions pinned to the GPU (its kernels, or the CUDA simulator's build of them)."""
    fetches, feed, expected = _graph(graph, "/device:GPU:0")
    with fl.Session(graph=graph) as s:
        got = dict(zip(fetches, s.run(list(fetches.values()), feed)))
    _check(got, expected)
