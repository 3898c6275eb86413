"""The compiled step's C run path (``runtime/csrc/flowc_fastcall.c``): the same results,
errors and buffer ownership as the cffi path it replaces (``Executable.call`` keeps both; the
C one is used where the extension could be built)."""
import gc

import numpy as np
import pytest

import dsl as fl
from runtime import fastcall
from runtime.errors import FeedError, RuntimeExecutionError
from runtime.module import PROCESS_POOL

pytestmark = pytest.mark.skipif(fastcall.load() is None,
                                reason=f"the C run path could not be built: {fastcall.build_error}")


def _both_paths(sess, fetches, feed):
    """Run through the C path and then the cffi path of the same compiled step."""
    fast = sess.run(fetches, feed)
    exe = next(iter(sess._steps.values()))
    assert exe._fast is not None
    saved, exe._fast = exe._fast, None
    sess._routes.clear()                    # Session.run's shortcut to the C path, too
    try:
        slow = sess.run(fetches, feed)
    finally:
        exe._fast = saved
    return fast, slow


def test_results_equal_the_cffi_path_for_every_kind_of_feed_and_fetch(graph, rng):
    s = fl.placeholder(fl.float32, [], name="s")
    v = fl.placeholder(fl.float64, [None, 3], name="v")
    i = fl.placeholder(fl.int32, [4], name="i")
    b = fl.placeholder(fl.bool_, [None], name="b")
    fetches = {"scalar": s * 2.0, "matrix": v * 3.0, "ints": i + 1, "sum": fl.reduce_sum(v),
               "not": fl.logical_not(b), "empty_rows": v[:0] + 1.0, "int_scalar": i[2]}
    feed = {s: np.float32(1.5), v: rng.standard_normal((5, 3)), i: np.arange(4, dtype=np.int32),
            b: np.array([True, False, True])}
    with fl.Session(graph=graph) as sess:
        fast, slow = _both_paths(sess, fetches, feed)
        for k in fetches:
            assert type(fast[k]) is type(slow[k]), k
            np.testing.assert_array_equal(fast[k], slow[k], err_msg=k)
            assert np.asarray(fast[k]).dtype == np.asarray(slow[k]).dtype, k
        assert isinstance(fast["scalar"], np.float32) and fast["scalar"] == np.float32(3.0)
        assert fast["empty_rows"].shape == (0, 3)
        feed[v] = np.zeros((0, 3))                          # an empty feed
        fast, slow = _both_paths(sess, fetches, feed)
        assert fast["matrix"].shape == (0, 3) and fast["sum"] == slow["sum"] == 0.0


@pytest.mark.cpu_only
def test_a_fetched_array_gives_its_block_back_when_collected(graph):
    x = fl.placeholder(fl.float32, [1000], name="x")
    y = x + 1.0
    with fl.Session(graph=graph) as sess:
        value = np.ones(1000, np.float32)
        sess.run(y, {x: value})
        gc.collect()
        live = PROCESS_POOL.live_blocks
        kept = [sess.run(y, {x: value}) for _ in range(3)]
        assert PROCESS_POOL.live_blocks == live + 3
        assert all(k.base is not None and np.all(k == 2.0) for k in kept)
        view = kept[0][10:20]                   # a view keeps the block alive
        del kept
        gc.collect()
        assert PROCESS_POOL.live_blocks == live + 1
        assert np.all(view == 2.0)
        del view
        gc.collect()
        assert PROCESS_POOL.live_blocks == live


def test_errors_name_what_and_where_on_the_c_path(graph):
    params = fl.placeholder(fl.float32, [3], name="params")
    ids = fl.placeholder(fl.int32, [None], name="ids")
    got = fl.gather(params, ids, name="lookup")
    with fl.Session(graph=graph) as sess:
        assert list(sess.run(got, {params: np.arange(3, dtype=np.float32), ids: [2, 0]})) == [2, 0]
        with pytest.raises(RuntimeExecutionError, match="lookup"):
            sess.run(got, {params: np.arange(3, dtype=np.float32), ids: [7]})
        exe = next(iter(sess._steps.values()))
        assert exe._fast is not None
        order = [f.name for f in exe.feeds]
        good = {"ids": np.array([1], np.int32), "params": np.zeros(3, np.float32)}
        wrong_shape = dict(good, params=np.zeros(4, np.float32))
        float_ids = dict(good, ids=np.array([1.5]))
        with pytest.raises(FeedError, match="has shape"):
            exe.call([wrong_shape[n] for n in order], store=sess.store)
        with pytest.raises(FeedError, match="holds floats"):
            exe.call([float_ids[n] for n in order], store=sess.store)
        assert list(exe.call([good[n] for n in order], store=sess.store)[0]) == [0.0]


def test_values_the_c_path_does_not_take_as_they_are_are_converted_by_the_feed_check(graph):
    """Lists, Python numbers, other dtypes that convert, non-contiguous, byte-swapped and
    unaligned arrays go through the feed check and give the same results as plain arrays."""
    x = fl.placeholder(fl.float32, [None, 2], name="x")
    s = fl.placeholder(fl.float32, [], name="s")
    y = x * s
    plain = np.arange(6, dtype=np.float32).reshape(3, 2)
    want = plain * 2.0
    raw = np.zeros(6 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(3, 2)   # unaligned
    raw[...] = plain
    strided = np.zeros((3, 4), np.float32)[:, ::2]
    strided[...] = plain
    fed = [plain.tolist(), plain.astype(np.float64), plain.astype(">f4"),
           np.ascontiguousarray(plain.T).T, strided, raw]
    assert not strided.flags.c_contiguous and not raw.flags.aligned
    with fl.Session(graph=graph) as sess:
        for value in fed:
            for scale in (2.0, np.float32(2.0), np.float64(2.0), 2):
                got = sess.run(y, {x: value, s: scale})
                assert got.dtype == np.float32
                np.testing.assert_array_equal(got, want)
        with pytest.raises(FeedError, match="shape"):
            sess.run(y, {x: np.zeros((3, 3), np.float32), s: 1.0})   # a known dim differs
