"""TensorFlow GraphDefs using the elementwise, activation, scan and bitwise ops flowc now has,
written as TensorFlow 1.x writes them (its op names, input order and attrs, Tidx included):
they import one to one and the compiled graph matches numpy."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("tensorboardX", reason="GraphDef support needs the tensorboard extra")

from compiler.interop.graphdef import load_graphdef_model  # noqa: E402
from dsl.tensor import Tensor  # noqa: E402
from test_graphdef import DT_INT32, F32, GraphDefWriter, attr, run_graph  # noqa: E402

I32 = attr(type=DT_INT32)


def test_a_graphdef_with_the_new_ops_imports_and_matches_numpy(tmp_path):
    g = GraphDefWriter()
    g.node("x", "Placeholder", dtype=F32, shape=attr(shape=[-1, 3]))
    g.node("i", "Placeholder", dtype=I32, shape=attr(shape=[-1, 3]))
    g.const("axis", np.array(1, np.int32))
    g.const("two", np.array([2, 2, 2], np.int32))
    g.node("leaky", "LeakyRelu", ["x"], T=F32, alpha=attr(f=0.1))
    g.node("erf", "Erf", ["leaky"], T=F32)
    g.node("cumsum", "Cumsum", ["erf", "axis"], T=F32, Tidx=I32, exclusive=attr(b=True),
           reverse=attr(b=False))
    g.node("atan2", "Atan2", ["cumsum", "x"], T=F32)
    g.node("selu", "Selu", ["atan2"], T=F32)
    g.node("out", "Softsign", ["selu"], T=F32)
    g.node("and", "BitwiseAnd", ["i", "two"], T=I32)
    g.node("shift", "LeftShift", ["and", "i"], T=I32)
    g.node("bits", "Invert", ["shift"], T=I32)
    path = str(tmp_path / "extra.pb")
    with open(path, "wb") as f:
        f.write(g.gd.SerializeToString())
    model = load_graphdef_model(path)
    assert model.graph.node("cumsum").attrs["exclusive"] is True
    x = np.random.RandomState(0).randn(4, 3).astype(np.float32)
    i = np.random.RandomState(1).randint(-40, 40, (4, 3)).astype(np.int32)
    feeds = {Tensor(model.graph.output("x")): x, Tensor(model.graph.output("i")): i}
    got, bits = run_graph(model.graph, [Tensor(model.graph.output("out")),
                                        Tensor(model.graph.output("bits"))], feeds)

    erf = np.vectorize(math.erf)(np.where(x > 0, x, x * 0.1).astype(np.float64))
    cumsum = np.concatenate([np.zeros((4, 1)), np.cumsum(erf, 1)[:, :-1]], 1)
    a = np.arctan2(cumsum, x)
    selu = np.where(a < 0, 1.7580993408473768 * np.expm1(a), 1.0507009873554805 * a)
    np.testing.assert_allclose(got, selu / (np.abs(selu) + 1), rtol=1e-5, atol=1e-6)
    shift = np.clip(i, 0, 31)
    want = ~((((i & 2).astype(np.int64) << shift) & 0xFFFFFFFF).astype(np.uint32).view(np.int32))
    np.testing.assert_array_equal(bits, want)
