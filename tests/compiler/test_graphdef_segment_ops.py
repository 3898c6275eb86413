"""A TF1 GraphDef of the segment reductions, InvertPermutation, ListDiff, (Dense)Bincount and
RandomShuffle, with TensorFlow's own gradients of four of them (SparseSegmentMeanGrad,
SparseSegmentSqrtNGrad, the Max and Prod gradients' ops), recorded by
tests/data/tf_graphs/make_segment_graph.py, imports op by op and gives TensorFlow's results in
both backends, RandomShuffle's order run after run included."""
import os

import numpy as np
import pytest

import dsl as fl

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "tf_graphs")


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_segment_graph_matches_tensorflow(backend):
    recorded = np.load(os.path.join(DATA, "segment_ops.npz"))
    with open(os.path.join(DATA, "segment_ops.pb"), "rb") as f:
        graph_def = f.read()
    fetches = [k[len("out:"):] for k in recorded.files if k.startswith("out:")]
    feeds = {k[len("in:"):] + ":0": recorded[k] for k in recorded.files if k.startswith("in:")}
    g = fl.Graph()
    with g.as_default():
        tensors = fl.import_graph_def(graph_def, return_elements=fetches + list(feeds), name="")
    outs, ins = tensors[:len(fetches)], tensors[len(fetches):]
    feed = dict(zip(ins, feeds.values()))
    with fl.Session(graph=g, backend=backend) as s:
        got = s.run(outs, feed)
        second = s.run(outs[fetches.index("r:0")], feed)
    for name, value in zip(fetches, got):
        want = recorded["out:" + name]
        assert value.shape == want.shape and value.dtype == want.dtype, name
        np.testing.assert_allclose(value, want, rtol=1e-6, err_msg=name)
    np.testing.assert_array_equal(second, recorded["out2:r:0"])
