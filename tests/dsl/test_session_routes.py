"""Session.run's shortcut for a step it ran before (``_remember_route`` in ``dsl/session.py``,
``route`` in ``runtime/csrc/flowc_fastcall.c``): the same fetch with the same feed keys and no
options goes straight to the compiled step's C run path. Every answer it gives must be the full
path's answer: values, conversions, errors, state changes, and a fall back to the full path when
the fetch, the keys or the graph changed."""
import numpy as np
import pytest

import dsl as fl
from runtime import fastcall
from runtime.errors import FeedError, RuntimeExecutionError
from oracle import run_in_threads

pytestmark = pytest.mark.skipif(fastcall.load() is None,
                                reason=f"the C run path could not be built: {fastcall.build_error}")


def _routed(sess, fetch):
    key = tuple(map(id, fetch)) if type(fetch) in (list, tuple) else id(fetch)
    return key in sess._routes


def test_a_repeated_run_takes_the_route_and_gives_the_full_paths_values(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    y = fl.exp(x) * 2.0
    with fl.Session(graph=graph) as sess:
        for _ in range(3):
            xv = rng.standard_normal((4, 3)).astype(np.float32)
            got = sess.run(y, {x: xv})
            np.testing.assert_allclose(got, np.exp(xv) * 2.0, rtol=1e-6)
        assert _routed(sess, y)
        assert sess.compile_count == 1
        scalar = sess.run(y[0, 0], {x: np.ones((1, 3), np.float32)})
        assert type(scalar) is np.float32                # numpy scalars, as on the full path
        scalar = sess.run(y[0, 0], {x: np.ones((1, 3), np.float32)})
        assert type(scalar) is np.float32


def test_other_feed_keys_or_another_key_order_give_their_own_values(graph):
    a = fl.placeholder(fl.float32, [], name="a")
    b = fl.placeholder(fl.float32, [], name="b")
    c = fl.placeholder_with_default(np.float32(10.0), [], name="c")
    y = a - b + c
    with fl.Session(graph=graph) as sess:
        for _ in range(2):
            assert sess.run(y, {a: np.float32(5), b: np.float32(1)}) == 14
            assert sess.run(y, {b: np.float32(1), a: np.float32(5)}) == 14
            assert sess.run(y, {a: np.float32(5), b: np.float32(1), c: np.float32(0)}) == 4
        for _ in range(2):                        # keys not in the step's feed order
            assert sess.run(y, {b: np.float32(1), a: np.float32(5)}) == 14
        assert _routed(sess, y)
        assert sess.run(y, {a: np.float32(5), b: np.float32(1)}) == 14
        compiled = sess.compile_count
        a2 = fl.identity(a)                   # a new graph version: the full path again,
        assert sess.run(y, {a: np.float32(2), b: np.float32(1)}) == 11
        assert sess.compile_count == compiled + 1     # which compiles per graph version
        assert sess.run(a2, {a: np.float32(3)}) == 3


def test_values_to_convert_and_bad_feeds_on_the_route(graph):
    x = fl.placeholder(fl.float32, [2], name="x")
    y = x * 3.0
    with fl.Session(graph=graph) as sess:
        for _ in range(3):
            np.testing.assert_array_equal(sess.run(y, {x: [1, 2]}), [3, 6])   # converted
            np.testing.assert_array_equal(sess.run(y, {x: np.array([1, 2], np.float32)}), [3, 6])
        assert _routed(sess, y)
        with pytest.raises(FeedError, match="shape"):
            sess.run(y, {x: np.zeros(3, np.float32)})
        with pytest.raises(FeedError):
            sess.run(y, {x: y})                  # a symbolic tensor as a value
        np.testing.assert_array_equal(sess.run(y, {x: [2, 2]}), [6, 6])   # still usable


def test_a_failing_step_on_the_route_raises_and_the_session_goes_on(graph):
    params = fl.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
    ids = fl.placeholder(fl.int32, [None], name="ids")
    rows = fl.gather(params, ids)
    with fl.Session(graph=graph) as sess:
        for _ in range(2):
            np.testing.assert_array_equal(sess.run(rows, {ids: np.array([1], np.int32)}), [[2, 3]])
        with pytest.raises(RuntimeExecutionError, match=r"GatherV2.*is not in \[0, 4\)"):
            sess.run(rows, {ids: np.array([7], np.int32)})
        np.testing.assert_array_equal(sess.run(rows, {ids: np.array([3], np.int32)}), [[6, 7]])


def test_an_operation_on_the_route_changes_state_once_per_run(graph):
    v = fl.Variable(np.float32(0.0), name="v")
    step = fl.assign_add(v, 1.0).op
    with fl.Session(graph=graph) as sess:
        sess.run(fl.global_variables_initializer())
        for _ in range(5):
            assert sess.run(step) is None
        assert _routed(sess, step)
        assert sess.run(v.value()) == 5


def test_lists_and_tuples_of_fetches_take_the_route_by_their_items(graph):
    """A new list per call (sess.run([loss, train_op], feed)) finds the route of the same
    items; the result keeps the fetches' structure (a list, a tuple, None for an operation)."""
    x = fl.placeholder(fl.float32, [], name="x")
    y, z = x + 1.0, x * 3.0
    v = fl.Variable(np.float32(0.0), name="v")
    bump = fl.assign_add(v, 1.0).op
    with fl.Session(graph=graph) as sess:
        sess.run(fl.global_variables_initializer())
        for k in range(3):
            got = sess.run([y, z, bump, y], {x: np.float32(k)})
            assert type(got) is list and got == [k + 1, 3 * k, None, k + 1]
            got = sess.run((z, y), {x: np.float32(k)})
            assert type(got) is tuple and got == (3 * k, k + 1)
        assert _routed(sess, [y, z, bump, y]) and _routed(sess, (z, y))
        assert sess.run(v.value()) == 3                    # one update per run
        assert sess.run([z, y], {x: np.float32(2)}) == [6, 3]     # other order, other route
        fetches = [y]
        assert sess.run(fetches, {x: np.float32(1)}) == [2]
        fetches.append(z)                        # the same list object, other contents
        assert sess.run(fetches, {x: np.float32(1)}) == [2, 3]


def test_nested_structures_and_options_take_the_full_path(graph):
    x = fl.placeholder(fl.float32, [], name="x")
    y = x + 1.0
    with fl.Session(graph=graph) as sess:
        for _ in range(2):
            assert sess.run({"y": y, "both": [y, x * 2.0]}, {x: np.float32(1)}) == \
                {"y": 2, "both": [2, 2]}
            assert sess.run([[y]], {x: np.float32(1)}) == [[2]]
        assert not _routed(sess, [[y]])
        options = fl.RunOptions(timeout_in_ms=1000)
        assert sess.run(y, {x: np.float32(1)}, options=options) == 2
        assert not _routed(sess, y)


def test_a_closed_session_refuses_a_routed_run(graph):
    x = fl.placeholder(fl.float32, [], name="x")
    y = x + 1.0
    sess = fl.Session(graph=graph)
    sess.run(y, {x: np.float32(1)})
    sess.run(y, {x: np.float32(1)})
    sess.close()
    with pytest.raises(RuntimeError, match="closed"):
        sess.run(y, {x: np.float32(1)})


def test_concurrent_routed_runs(graph):
    x = fl.placeholder(fl.float32, [None], name="x")
    y = fl.sigmoid(x) + x
    with fl.Session(graph=graph) as sess:
        sess.run(y, {x: np.zeros(1, np.float32)})

        def worker(seed):
            r = np.random.default_rng(seed)
            for _ in range(200):
                xv = r.standard_normal(int(r.integers(1, 50))).astype(np.float32)
                np.testing.assert_allclose(sess.run(y, {x: xv}), 1 / (1 + np.exp(-xv)) + xv,
                                           rtol=1e-5, atol=1e-6)
                if seed == 0:
                    sess._routes.clear()          # a route dropped while others use it

        run_in_threads(worker, range(6))
