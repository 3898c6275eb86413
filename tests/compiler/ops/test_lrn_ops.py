"""LRN and LRNGrad: compiled C against the numpy interpreter for windows cut at both ends of
the depth, a radius of 0 and one wider than the depth, f32 and f64, dims fed at run time and
an empty batch; the shape errors naming the node at build time, and LRNGrad's inputs of
different shapes refused at run time."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import OpError, ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op
CONFIGS = [dict(depth_radius=2, bias=1.5, alpha=0.3, beta=0.75),
           dict(depth_radius=0, bias=2.0, alpha=1.0, beta=0.5),
           dict(depth_radius=9, bias=1.0, alpha=0.01, beta=1.3),
           dict()]


@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
def test_lrn_and_its_gradient_match_the_interpreter(graph, rng, dtype):
    x = fl.placeholder(dtype, [None, 3, None, 7], name="x")
    g = fl.placeholder(dtype, [None, 3, None, 7], name="g")
    fetches = {}
    for i, attrs in enumerate(CONFIGS):
        y = A("LRN", [x], attrs)
        fetches[f"y{i}"] = y
        fetches[f"dx{i}"] = A("LRNGrad", [g, x, y], attrs)
    for shape in ((2, 3, 4, 7), (0, 3, 2, 7)):
        xv = rng.standard_normal(shape).astype(dtype.np) * 2
        gv = rng.standard_normal(shape).astype(dtype.np)
        got = check_against_interpreter(graph, fetches, {x: xv, g: gv}, rtol=1e-5, atol=1e-6)
    radius, bias, alpha, beta = 2, 1.5, 0.3, 0.75
    sq = xv.astype(np.float64) ** 2
    want = np.empty_like(sq)
    for d in range(7):
        want[..., d] = xv[..., d] / (bias + alpha * sq[..., max(0, d - radius):d + radius + 1]
                                     .sum(-1)) ** beta
    np.testing.assert_allclose(got["y0"], want, rtol=1e-5)


def test_lrn_of_a_depth_of_one(graph, rng):
    x = fl.placeholder(fl.float32, [2, 2, 2, 1], name="x")
    y = A("LRN", [x], dict(depth_radius=3, bias=1.0, alpha=0.5, beta=0.5))
    xv = rng.standard_normal((2, 2, 2, 1)).astype(np.float32)
    got = check_against_interpreter(graph, {"y": y}, {x: xv})
    np.testing.assert_allclose(got["y"], xv / np.sqrt(1 + 0.5 * xv ** 2), rtol=1e-6)


def test_shape_errors_name_the_node(graph):
    with pytest.raises(ShapeError, match="'bad_rank'.*input must be 4-dimensional"):
        A("LRN", [fl.zeros([2, 3, 4])], name="bad_rank")
    with pytest.raises(ShapeError, match="'bad_radius'.*depth_radius must be >= 0"):
        A("LRN", [fl.zeros([1, 1, 1, 3])], {"depth_radius": -1}, name="bad_radius")
    with pytest.raises(ShapeError, match="'bad_grad'.*same shape"):
        A("LRNGrad", [fl.zeros([1, 1, 1, 3]), fl.zeros([1, 1, 1, 4]), fl.zeros([1, 1, 1, 3])],
          name="bad_grad")
    with pytest.raises(OpError, match="T=i32 is not allowed for LRN"):
        A("LRN", [fl.zeros([1, 1, 1, 3], dtype=fl.int32)])


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_lrn_grad_inputs_of_different_shapes_fed_at_run_time(graph, backend):
    g = fl.placeholder(fl.float32, [1, 1, 1, None], name="g")
    x = fl.placeholder(fl.float32, [1, 1, 1, None], name="x")
    dx = A("LRNGrad", [g, x, x], name="grad_of_lrn")
    with fl.Session(graph=graph, backend=backend) as s:
        with pytest.raises(FlowcError, match="grad_of_lrn.*same shape"):
            s.run(dx, {g: np.ones((1, 1, 1, 3), np.float32),
                       x: np.ones((1, 1, 1, 4), np.float32)})


def test_an_lrn_graphdef_imports_and_matches_the_builder(rng):
    """A GraphDef node as TensorFlow writes it (every attr named), imported op by op."""
    pytest.importorskip("google.protobuf", reason="GraphDef support needs protobuf")
    from compiler.interop.graphdef import graphdef_to_graph
    from compiler.interop.protos import tf_protos
    from dsl.tensor import Tensor
    pb = tf_protos()
    gd = pb.graph_pb2.GraphDef()
    x = gd.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = 1
    for d in (-1, 2, 2, 6):
        x.attr["shape"].shape.dim.add(size=d)
    n = gd.node.add(name="norm", op="LRN", input=["x"])
    n.attr["T"].type = 1
    n.attr["depth_radius"].i = 1
    n.attr["bias"].f = 2.0
    n.attr["alpha"].f = 0.25
    n.attr["beta"].f = 0.75
    graph = graphdef_to_graph(gd)
    assert graph.node("norm").attrs["depth_radius"] == 1
    xv = rng.standard_normal((3, 2, 2, 6)).astype(np.float32)
    with fl.Session(graph=graph, backend="c") as s:
        got = s.run(Tensor(graph.output("norm")), {Tensor(graph.output("x")): xv})
    twin = fl.Graph()
    with twin.as_default():
        t = fl.placeholder(fl.float32, [None, 2, 2, 6])
        y = fl.nn.lrn(t, 1, 2.0, 0.25, 0.75)
    with fl.Session(graph=twin, backend="c") as s:
        np.testing.assert_allclose(got, s.run(y, {t: xv}), rtol=1e-6)


@pytest.mark.parametrize("dtype", [fl.float16, fl.bfloat16])
def test_half_lrn_computes_in_f32(graph, rng, dtype):
    x = fl.placeholder(dtype, [2, 2, 2, 5], name="x")
    y = A("LRN", [x], dict(depth_radius=1, bias=1.0, alpha=0.5, beta=0.75))
    dx = fl.gradients(fl.reduce_sum(y), x)[0]
    xv = rng.standard_normal((2, 2, 2, 5)).astype(np.float32)
    got = check_against_interpreter(graph, {"y": y, "dx": dx}, {x: xv.astype(dtype.np)})
    assert got["y"].dtype == dtype.np and got["dx"].dtype == dtype.np
