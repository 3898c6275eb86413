"""A TensorFlow 1 GraphDef with BroadcastTo, MatrixBandPart, the V3 diagonal ops (their
``align`` attr), Diag, DiagPart and LinSpace, and tf.tensordot / norm / eye / trace / meshgrid
as TensorFlow composes them, imported op by op: both backends match TensorFlow's recorded
outputs (tests/data/tf_graphs/make_tf1_array_linalg.py wrote them)."""
from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("google.protobuf", reason="GraphDef support needs protobuf")

import dsl as fl  # noqa: E402
from compiler.interop.graphdef import graphdef_to_graph, read_graphdef  # noqa: E402
from dsl.tensor import Tensor  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                    "tf_graphs")


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_tf1_array_linalg_graph_matches_tensorflow(backend):
    graph = graphdef_to_graph(read_graphdef(os.path.join(DATA, "tf1_array_linalg.pb")))
    ops = {n.op for n in graph}
    assert {"BroadcastTo", "MatrixBandPart", "MatrixDiagPartV3", "MatrixDiagV3",
            "MatrixSetDiagV3", "Diag", "DiagPart", "LinSpace"} <= ops
    data = np.load(os.path.join(DATA, "tf1_array_linalg.npz"))
    feeds = {Tensor(graph.output(f[3:] + ":0")): data[f] for f in data.files
             if f.startswith("in:")}
    want = {f[4:]: data[f] for f in data.files if f.startswith("out:")}
    with fl.Session(graph=graph, backend=backend) as s:
        got = s.run([Tensor(graph.output(t)) for t in want], feeds)
    for (name, w), g in zip(want.items(), got):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
