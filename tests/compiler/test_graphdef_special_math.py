"""A TensorFlow GraphDef using the special functions (as tf.distributions / TF1 programs
write them: Lgamma, Digamma, Igamma, Igammac, Betainc, Zeta, Polygamma, Erfinv, Ndtri,
BesselI0e, BesselI1e, with their T attr) imports one to one and runs compiled and interpreted
to the values TensorFlow gives."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("tensorboardX", reason="GraphDef support needs the tensorboard extra")

from compiler.interop.graphdef import load_graphdef_model  # noqa: E402
from dsl.tensor import Tensor  # noqa: E402
from test_graphdef import F32, GraphDefWriter, attr, run_graph  # noqa: E402

UNARY = ("Lgamma", "Digamma", "Erfinv", "Ndtri", "BesselI0e", "BesselI1e")
BINARY = ("Igamma", "Igammac", "Zeta", "Polygamma")


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_a_graphdef_with_special_functions_imports_and_matches_tensorflow(tmp_path, backend):
    g = GraphDefWriter()
    g.node("x", "Placeholder", dtype=F32, shape=attr(shape=[-1, 3]))
    g.const("a", np.array([1.0, 2.0, 3.0], np.float32))
    for op in UNARY:
        g.node(op.lower(), op, ["x"], T=F32)
    for op in BINARY:
        g.node(op.lower(), op, ["a", "x"], T=F32)
    g.node("betainc", "Betainc", ["x", "x", "x"], T=F32)
    path = str(tmp_path / "special.pb")
    with open(path, "wb") as f:
        f.write(g.gd.SerializeToString())
    model = load_graphdef_model(path)
    names = [op.lower() for op in UNARY + BINARY] + ["betainc"]
    assert [model.graph.node(n).op for n in names] == list(UNARY + BINARY) + ["Betainc"]
    x = np.array([[0.25, 0.5, 0.75]], np.float32)
    feeds = {Tensor(model.graph.output("x")): x}
    got = dict(zip(names, run_graph(model.graph, [Tensor(model.graph.output(n))
                                                  for n in names], feeds, backend=backend)))
    # TensorFlow 2.21's float32 results for this graph
    want = {
        "lgamma": [1.288022518157959, 0.5723649263381958, 0.2032809555530548],
        "digamma": [-4.22745418548584, -1.9635107517242432, -1.0858604907989502],
        "erfinv": [0.22531205415725708, 0.47693631052970886, 0.8134199380874634],
        "ndtri": [-0.6744897961616516, 0.0, 0.6744897961616516],
        "besseli0e": [0.7910172939300537, 0.6450353860855103, 0.5411652326583862],
        "besseli1e": [0.09811264276504517, 0.15642082691192627, 0.18988779187202454],
        "igamma": [0.2211991846561432, 0.09020400792360306, 0.04050544649362564],
        "igammac": [0.7788008451461792, 0.9097959995269775, 0.9594945311546326],
        "zeta": [math.inf, 4.934802055358887, 2.6513168811798096],
        "polygamma": [17.197330474853516, -16.828794479370117, 19.76331329345703],
        "betainc": [0.39775678515434265, 0.5, 0.7134761810302734],
    }
    for n in names:
        assert got[n].dtype == np.float32, n
        np.testing.assert_allclose(got[n][0], want[n], rtol=1e-5, atol=1e-6, err_msg=n)
