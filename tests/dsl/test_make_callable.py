"""Session.make_callable: the precompiled fast path of one feed/fetch signature keeps every
check ``Session.run`` makes and gives the same results."""
import numpy as np
import pytest

import dsl as fl
from runtime.errors import FeedError


def _model():
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    k = fl.placeholder(fl.int32, [], name="k")
    return x, k, {"z": x * 2.0 + 1.0, "neg_k": -k, "pair": (fl.reduce_sum(x), k)}


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_callable_matches_run_and_compiles_once(graph, rng, backend):
    x, k, fetches = _model()
    with fl.Session(graph=graph, backend=backend) as s:
        call = s.make_callable(fetches, [x, k])
        compiled = s.compile_count
        for i in range(5):
            xv = rng.standard_normal((i + 1, 3)).astype(np.float32)
            got = call(xv, i)
            want = s.run(fetches, {x: xv, k: i})
            assert set(got) == {"z", "neg_k", "pair"}
            np.testing.assert_array_equal(got["z"], want["z"])
            assert got["neg_k"] == -i and isinstance(got["pair"], tuple)
            np.testing.assert_allclose(got["pair"][0], xv.sum(), rtol=1e-5)
        assert s.compile_count == compiled


def test_callable_keeps_the_feed_checks(graph):
    x, k, fetches = _model()
    with fl.Session(graph=graph) as s:
        call = s.make_callable(fetches["z"], [x])
        with pytest.raises(FeedError, match="takes 1 feed value"):
            call()
        with pytest.raises(FeedError, match="shape"):
            call(np.zeros((2, 4), np.float32))
        with pytest.raises(FeedError, match="floats"):
            s.make_callable(fetches["neg_k"], [k])(1.5)
        with pytest.raises(FeedError, match="symbolic"):
            call(fetches["z"])
        np.testing.assert_array_equal(call([[1, 2, 3]]), [[3, 5, 7]])   # converted as in run
        with pytest.raises(FeedError):
            s.make_callable(fetches["z"], ["nope:0"])
    with pytest.raises(RuntimeError, match="closed"):
        call(np.zeros((1, 3), np.float32))
