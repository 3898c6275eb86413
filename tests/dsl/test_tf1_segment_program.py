"""A TF1 bag-of-words classifier written as ``import dsl as tf``
(tests/data/tf1_segment_program/bag_of_words.py: sparse_segment_mean/sqrt_n and segment_max
pooling trained with Adagrad, random_shuffle, bincount, setdiff1d, invert_permutation) gives
what TensorFlow gave for the same program with only the import changed (recorded by
record_bag_of_words.py into bag_of_words.npz): its losses step by step, its shuffles, and the
values it shows."""
import importlib.util
import os

import numpy as np

from repo_paths import ROOT

HERE = os.path.join(ROOT, "tests", "data", "tf1_segment_program")


def test_bag_of_words_trains_as_under_tensorflow():
    path = os.path.join(HERE, "bag_of_words.py")
    with open(path) as f:
        assert [ln for ln in f if "dsl" in ln] == ["import dsl as tf\n"]
    spec = importlib.util.spec_from_file_location("tf1_bag_of_words", path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    losses, orders, shown = program.main()
    with np.load(os.path.join(HERE, "bag_of_words.npz")) as want:
        np.testing.assert_allclose(losses, want["losses"], rtol=2e-4, atol=1e-6)
        np.testing.assert_array_equal(orders, want["orders"])
        for k, v in shown.items():
            np.testing.assert_allclose(v, want["shown/" + k], rtol=2e-4, atol=1e-5, err_msg=k)
    assert losses[-1] < 0.1 * losses[0]           # it learns
