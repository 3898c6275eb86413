"""TF1's segment reductions, fl.invert_permutation, fl.setdiff1d, fl.bincount and
fl.random_shuffle, in both backends, against the values TensorFlow 2.21 (tf.compat.v1) gives
for the same calls (written out below), and against numpy on random inputs."""
import numpy as np
import pytest

import dsl as fl

BACKENDS = ["interpreter", "c"]
D = np.array([[1., -2.], [3., 4.], [-5., 6.], [7., 0.5]], np.float32)
LOW, HIGH = float(np.finfo(np.float32).min), float(np.finfo(np.float32).max)

# call -> what tf.compat.v1 returned for it
TF_VALUES = {
    "segment_sum": (lambda d: fl.segment_sum(d, [0, 0, 2, 2]), [[4, 2], [0, 0], [2, 6.5]]),
    "segment_mean": (lambda d: fl.segment_mean(d, [0, 0, 2, 2]), [[2, 1], [0, 0], [1, 3.25]]),
    "segment_max": (lambda d: fl.segment_max(d, [0, 0, 2, 2]), [[3, 4], [0, 0], [7, 6]]),
    "segment_min": (lambda d: fl.segment_min(d, [0, 0, 2, 2]), [[1, -2], [0, 0], [-5, 0.5]]),
    "segment_prod": (lambda d: fl.segment_prod(d, [0, 0, 2, 2]), [[3, -8], [1, 1], [-35, 3]]),
    "unsorted_segment_max": (lambda d: fl.unsorted_segment_max(d, [1, -1, 1, 0], 3),
                             [[7, 0.5], [1, 6], [LOW, LOW]]),
    "unsorted_segment_min": (lambda d: fl.unsorted_segment_min(d, [1, -1, 1, 0], 3),
                             [[7, 0.5], [-5, -2], [HIGH, HIGH]]),
    "unsorted_segment_prod": (lambda d: fl.unsorted_segment_prod(d, [1, -1, 1, 0], 3),
                              [[7, 0.5], [-5, -12], [1, 1]]),
    "unsorted_segment_mean": (lambda d: fl.unsorted_segment_mean(d, [1, -1, 1, 0], 3),
                              [[7, 0.5], [-2, 2], [0, 0]]),
    "unsorted_segment_sqrt_n": (lambda d: fl.unsorted_segment_sqrt_n(d, [1, -1, 1, 0], 3),
                                [[7, 0.5], [-2.8284270763397217, 2.8284270763397217], [0, 0]]),
    "sparse_segment_sum": (lambda d: fl.sparse_segment_sum(d, [3, 0, 3], [0, 0, 2]),
                           [[8, -1.5], [0, 0], [7, 0.5]]),
    "sparse_segment_mean": (lambda d: fl.sparse_segment_mean(d, [3, 0, 3], [0, 0, 2],
                                                             num_segments=4),
                            [[4, -0.75], [0, 0], [7, 0.5], [0, 0]]),
    "sparse_segment_sqrt_n": (lambda d: fl.sparse_segment_sqrt_n(d, [3, 0, 3], [0, 0, 2]),
                              [[5.656854152679443, -1.0606601238250732], [0, 0], [7, 0.5]]),
    "segment_mean_int": (lambda d: fl.segment_mean(fl.constant([-3, -4, 7]), [0, 0, 1]), [-3, 7]),
    "invert_permutation": (lambda d: fl.invert_permutation([2, 0, 3, 1]), [1, 3, 0, 2]),
    "setdiff1d": (lambda d: fl.setdiff1d([4, 1, 7, 1, 9], [1, 9])[0], [4, 7]),
    "setdiff1d_idx": (lambda d: fl.setdiff1d([4, 1, 7, 1, 9], [1, 9]).idx, [0, 2]),
    "bincount": (lambda d: fl.bincount([1, 1, 4, 0, 1]), [1, 3, 0, 0, 1]),
    "bincount_weights": (lambda d: fl.bincount([1, 1, 4, 0, 1], weights=[.5, 1, 2, 3, 4],
                                               dtype=fl.float32), [3, 5.5, 0, 0, 2]),
    "bincount_min_max": (lambda d: fl.bincount([1, 1, 4, 0, 1], minlength=7, maxlength=3),
                         [1, 3, 0]),
    "bincount_minlength": (lambda d: fl.bincount([1, 3], minlength=6), [0, 1, 0, 1, 0, 0]),
    "bincount_empty": (lambda d: fl.bincount(fl.zeros([0], fl.int32)), []),
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_tf1_calls_give_tensorflows_values(graph, backend):
    d = fl.placeholder(fl.float32, [4, 2], name="d")
    fetches = {k: build(d) for k, (build, _) in TF_VALUES.items()}
    with fl.Session(graph=graph, backend=backend) as s:
        got = s.run(fetches, {d: D})
    for k, (_, want) in TF_VALUES.items():
        np.testing.assert_allclose(got[k], np.asarray(want, dtype=got[k].dtype), rtol=1e-6,
                                   err_msg=k)
    assert got["setdiff1d_idx"].dtype == np.int32 and got["bincount"].dtype == np.int32


@pytest.mark.parametrize("backend", BACKENDS)
def test_segment_reductions_match_numpy(graph, backend, rng):
    x = rng.standard_normal((9, 3)).astype(np.float64)
    ids = np.array([0, 0, 1, 3, 3, 3, 4, 6, 6])
    xt = fl.placeholder(fl.float64, [None, 3], name="x")
    it = fl.placeholder(fl.int32, [None], name="ids")
    fetches = {"sum": fl.segment_sum(xt, it), "mean": fl.segment_mean(xt, it),
               "max": fl.segment_max(xt, it), "prod": fl.unsorted_segment_prod(xt, it, 8),
               "umean": fl.unsorted_segment_mean(xt, it, 8),
               "sparse": fl.sparse_segment_sqrt_n(xt, fl.constant([8, 0, 8]), [0, 1, 1])}
    with fl.Session(graph=graph, backend=backend) as s:
        got = s.run(fetches, {xt: x, it: ids.astype(np.int32)})
    for s_ in range(7):
        rows = x[ids == s_]
        if len(rows):
            np.testing.assert_allclose(got["sum"][s_], rows.sum(0), rtol=1e-12)
            np.testing.assert_allclose(got["mean"][s_], rows.mean(0), rtol=1e-12)
            np.testing.assert_allclose(got["max"][s_], rows.max(0), rtol=0)
            np.testing.assert_allclose(got["prod"][s_], rows.prod(0), rtol=1e-12)
            np.testing.assert_allclose(got["umean"][s_], rows.mean(0), rtol=1e-12)
        else:
            assert not got["sum"][s_].any() and not got["max"][s_].any()
            assert (got["prod"][s_] == 1).all() and not got["umean"][s_].any()
    assert got["sum"].shape == (7, 3) and got["prod"].shape == (8, 3)
    np.testing.assert_allclose(got["sparse"], [x[8], (x[0] + x[8]) / np.sqrt(2)], rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_shuffle_gives_tensorflows_order_and_a_new_one_each_run(graph, backend):
    v = fl.placeholder(fl.int64, [None], name="v")
    rows = fl.placeholder(fl.float32, [None, 2], name="rows")
    b = fl.raw_ops.RandomShuffle(value=v, seed=87654321, seed2=5)
    m = fl.random_shuffle(rows, seed=3)
    one = fl.random.shuffle(fl.constant([[1.0, 2.0]]))
    feed = {v: np.arange(7), rows: np.arange(20, dtype=np.float32).reshape(10, 2)}
    with fl.Session(graph=graph, backend=backend) as s:
        runs = [s.run([b, m, one], feed) for _ in range(3)]
    # tf.raw_ops.RandomShuffle(value=range(7), seed=87654321, seed2=5), three runs of a session
    assert [r[0].tolist() for r in runs] == [[3, 6, 1, 2, 0, 5, 4], [1, 4, 6, 3, 5, 2, 0],
                                             [5, 2, 6, 4, 0, 1, 3]]
    for _, shuffled, single in runs:
        assert sorted(shuffled[:, 0].tolist()) == list(range(0, 20, 2))
        np.testing.assert_array_equal(shuffled[:, 1], shuffled[:, 0] + 1)   # rows move whole
        np.testing.assert_array_equal(single, [[1.0, 2.0]])
    assert runs[0][1].tolist() != runs[1][1].tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_permutations_and_counts_are_errors_naming_the_node(graph, backend):
    p = fl.placeholder(fl.int32, [None], name="p")
    a = fl.placeholder(fl.int32, [None], name="a")
    inv = fl.invert_permutation(p, name="inv")
    counts = fl.raw_ops.Bincount(arr=a, size=4, weights=fl.constant([], fl.float32), name="bins")
    with fl.Session(graph=graph, backend=backend) as s:
        for value, message in (([0, 3, 1], "3 is not between 0 and 3"),
                               ([1, 0, 1], "1 is duplicated in the input"),
                               ([-1, 0], "-1 is not between 0 and 2")):
            with pytest.raises(fl.InvalidArgumentError, match=message) as e:
                s.run(inv, {p: np.array(value, np.int32)})
            assert e.value.node == "inv"
        with pytest.raises(fl.InvalidArgumentError, match="must be non-negative") as e:
            s.run(counts, {a: np.array([1, -2], np.int32)})
        assert e.value.node == "bins"
        np.testing.assert_array_equal(s.run(counts, {a: np.array([1, 9, 1], np.int32)}),
                                      [0, 2, 0, 0])     # values >= size are left out


def test_random_shuffle_has_no_gradient(graph):
    x = fl.placeholder(fl.float32, [3], name="x")
    assert fl.gradients(fl.reduce_sum(fl.random_shuffle(x)), [x]) == [None]
