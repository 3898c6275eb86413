"""The C kernels of InvertPermutation, ListDiff, Bincount and RandomShuffle against the numpy
interpreter (the oracle): int32/int64/float/bool values, NaN and -0.0 in set differences, empty
inputs, weights of every type, and shuffles of rows, of one row and of scalars."""
import numpy as np

import dsl as fl
from oracle import check_against_interpreter


def test_invert_permutation_and_list_diff_match_the_interpreter(graph, rng):
    p32 = fl.placeholder(fl.int32, [None], name="p32")
    p64 = fl.placeholder(fl.int64, [6], name="p64")
    fx = fl.placeholder(fl.float32, [None], name="fx")
    fy = fl.placeholder(fl.float32, [None], name="fy")
    ix = fl.placeholder(fl.int64, [None], name="ix")
    iy = fl.placeholder(fl.int64, [None], name="iy")
    fetches = {"inv32": fl.invert_permutation(p32), "inv64": fl.invert_permutation(p64),
               "inv_empty": fl.invert_permutation(fl.zeros([0], fl.int32))}
    for k, (x, y) in {"f": (fx, fy), "i": (ix, iy)}.items():
        out, idx = fl.setdiff1d(x, y)
        fetches[k], fetches[k + "_idx"] = out, idx
        fetches[k + "_i64"] = fl.setdiff1d(x, y, index_dtype=fl.int64)[1]
        fetches[k + "_nothing_taken"] = fl.setdiff1d(x, x[:0])[0]
        fetches[k + "_all_taken"] = fl.setdiff1d(x, x)[0]
    fetches["bool"] = fl.setdiff1d(fl.constant([True, False, True]), fl.constant([False]))[0]
    big_x = rng.integers(0, 500, 300).astype(np.int64)
    feed = {p32: rng.permutation(9).astype(np.int32), p64: rng.permutation(6).astype(np.int64),
            fx: np.array([1, np.nan, -0.0, 3, 3, 2.5, np.inf], np.float32),
            fy: np.array([np.nan, 0.0, 3, 9], np.float32),
            ix: big_x, iy: rng.integers(0, 500, 200).astype(np.int64)}
    got = check_against_interpreter(graph, fetches, feed)
    assert np.isnan(got["f"][1]) and got["f"].tolist()[::2] == [1.0, 2.5]   # NaN stays
    np.testing.assert_array_equal(got["i"], big_x[~np.isin(big_x, feed[iy])])
    np.testing.assert_array_equal(got["inv32"][feed[p32]], np.arange(9))


def test_bincount_matches_the_interpreter(graph, rng):
    a = fl.placeholder(fl.int32, [None], name="a")
    grid = fl.placeholder(fl.int32, [3, 4], name="grid")
    size = fl.placeholder(fl.int32, [], name="size")
    av = rng.integers(0, 8, 11).astype(np.int32)
    feed = {a: av, size: np.int32(5), grid: rng.integers(0, 5, (3, 4)).astype(np.int32)}
    fetches = {}
    for dt in (fl.int32, fl.int64, fl.float32, fl.float64):
        w = fl.placeholder(dt, [None], name=f"w_{dt.name}")
        feed[w] = (rng.standard_normal(11) * 10).astype(dt.np)
        fetches[dt.name] = fl.raw_ops.Bincount(arr=a, size=size, weights=w)
        fetches[dt.name + "_counts"] = fl.raw_ops.Bincount(arr=a, size=6,
                                                           weights=fl.constant([], dt))
    fetches["grid"] = fl.bincount(grid, weights=fl.cast(grid, fl.float64) * 0.5,
                                  dtype=fl.float64)
    fetches["no_bins"] = fl.raw_ops.Bincount(arr=a, size=0, weights=fl.constant([], fl.float32))
    got = check_against_interpreter(graph, fetches, feed)
    np.testing.assert_array_equal(got["i32_counts"], np.bincount(av[av < 6], minlength=6))
    assert got["no_bins"].shape == (0,)


def test_random_shuffle_matches_the_interpreter_run_after_run(graph, rng):
    x = fl.placeholder(fl.float64, [None, 2, 3], name="x")
    v = fl.placeholder(fl.int32, [None], name="v")
    fetches = {"rows": fl.random_shuffle(x, seed=1), "vector": fl.random_shuffle(v, seed=2),
               "scalar": fl.random_shuffle(fl.constant(4.0)),
               "bools": fl.random_shuffle(fl.constant([True, False, False, True, True]))}
    feed = {x: rng.standard_normal((13, 2, 3)), v: np.arange(40, dtype=np.int32)}
    names = list(fetches)
    with fl.Session(graph=graph, backend="interpreter") as s:
        want = [s.run([fetches[k] for k in names], feed) for _ in range(3)]
    with fl.Session(graph=graph, backend="c") as s:
        got = [s.run([fetches[k] for k in names], feed) for _ in range(3)]
    for w_run, g_run in zip(want, got):
        for k, w, g in zip(names, w_run, g_run):
            np.testing.assert_array_equal(g, w, err_msg=k)
    assert sorted(got[0][1].tolist()) == list(range(40))
    assert got[0][1].tolist() != got[1][1].tolist()


def test_dense_bincount_counts_each_row_and_binary_output_marks_presence(graph, rng):
    m = fl.placeholder(fl.int64, [None, 5], name="m")
    v = fl.placeholder(fl.int32, [None], name="v")
    w = fl.placeholder(fl.float32, [None, 5], name="w")
    fetches = {
        "rows": fl.raw_ops.DenseBincount(input=m, size=fl.constant(6, fl.int64), weights=w),
        "rows_counts": fl.raw_ops.DenseBincount(input=m, size=fl.constant(4, fl.int64),
                                                weights=fl.constant([], fl.int64)),
        "binary": fl.raw_ops.DenseBincount(input=v, size=5, weights=fl.constant([], fl.float64),
                                           binary_output=True),
        "flat_2d": fl.raw_ops.Bincount(arr=fl.cast(m, fl.int32), size=6,
                                       weights=fl.constant([], fl.int32)),
    }
    mv = rng.integers(0, 8, (3, 5)).astype(np.int64)
    feed = {m: mv, v: np.array([1, 1, 4, 0, 9], np.int32),
            w: rng.standard_normal((3, 5)).astype(np.float32)}
    got = check_against_interpreter(graph, fetches, feed)
    for r in range(3):      # TF: each row of a 2-D input counted apart
        np.testing.assert_array_equal(got["rows_counts"][r], np.bincount(mv[r][mv[r] < 4],
                                                                         minlength=4))
    np.testing.assert_array_equal(got["binary"], [1, 1, 0, 0, 1])
    np.testing.assert_array_equal(got["flat_2d"], np.bincount(mv[mv < 6], minlength=6))
