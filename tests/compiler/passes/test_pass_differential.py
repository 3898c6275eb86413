"""The default pipeline must not change what a step computes: the interpreter runs each graph
before and after the passes and the results must be identical (the passes fold with the same
reference kernels, so even floats match exactly)."""
import numpy as np
import pytest

from compiler.errors import ExecutionError
from compiler.interpreter import Interpreter
from compiler.ir.construct import make_node
from compiler.ir.graph import Graph, Output
from compiler.ir.op_registry import has_op
from compiler.passes.manager import PassManager
from compiler.options import DEFAULT_PIPELINE, PipelineOptions
from compiler.step import make_step_graph
from runtime.dtypes import DType


class Builder:
    """Terse graph building for these tests: ``b.op("AddV2", x, y)``."""

    def __init__(self):
        self.graph = Graph("diff")

    def op(self, name, *inputs, **attrs) -> Output:
        return make_node(self.graph, name, list(inputs), attrs).output(0)

    def const(self, value, dtype=DType.f32) -> Output:
        return self.op("Const", value=np.array(value, dtype=dtype.np), dtype=dtype)

    def placeholder(self, shape, dtype=DType.f32, name=None) -> Output:
        return make_node(self.graph, "Placeholder", [], {"dtype": dtype, "shape": shape}, name=name).output(0)


def run_both(b: Builder, feeds, fetches):
    """Results of ``fetches`` before and after the default pipeline, and the optimized graph."""
    want = Interpreter(b.graph).run(fetches, feeds)
    step = make_step_graph(b.graph, list(feeds), fetches)
    PassManager(PipelineOptions(), read_environment=False).run(step.graph)
    fed = {ph.output(0): feeds[f] for ph, f in zip(step.feeds, feeds)}
    got = Interpreter(step.graph).run([r.inputs[0] for r in step.retvals], fed)
    for k, (w, g) in enumerate(zip(want, got)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"fetch {k}"
        np.testing.assert_array_equal(g, w, err_msg=f"fetch {k}")
    return step.graph


def const_chain(b: Builder) -> Output:
    c = b.const([1.0, 2.0, 3.0])
    return b.op("AddV2", b.op("Mul", c, b.const(2.0)), b.const(1.0))


def test_default_pipeline_is_the_documented_one():
    assert DEFAULT_PIPELINE == ("prune", "infer-shapes", "fold-constants", "cse", "simplify",
                                "layout", "fold-batch-norm", "place", "legalize-types",
                                "fuse-updates", "fuse-accumulate", "fuse-conv",
                                "fuse-matmul-bias", "fuse", "partition", "plan-memory")


def test_elementwise_step_keeps_its_results(rng):
    b = Builder()
    x = b.placeholder((None, 3), name="x")
    w = b.placeholder((2, 3), name="w")
    i = b.placeholder((5,), DType.i32, name="i")
    a1 = b.op("Exp", b.op("AddV2", x, const_chain(b)))
    a2 = b.op("Exp", b.op("AddV2", const_chain(b), x))             # the same, built twice
    z = b.op("Sub", a1, b.op("Mul", a2, b.const(1.0)))
    n = b.op("Neg", b.op("Neg", b.op("AddV2", z, b.const(0.0))))
    k = b.op("Cast", b.op("Size", w), DstT=DType.f32)                # folds to 6.0
    scaled = b.op("Mul", w, b.op("Identity", k))
    ints = b.op("FloorDiv", i, b.const(1, DType.i32))
    b.op("Log", x)                                                   # not fetched: pruned
    feeds = {x: rng.standard_normal((4, 3)).astype(np.float32),
             w: rng.standard_normal((2, 3)).astype(np.float32),
             i: rng.integers(-9, 9, 5).astype(np.int32)}
    want_len = len(b.graph)
    g = run_both(b, feeds, [n, scaled, ints, a1])
    ops = [node.op for node in g]
    fused = "".join(node.attrs["expr"] for node in g if node.op == "Fused")
    ops += [op for op in ("Exp", "Neg") for _ in range(fused.count(op + "("))]
    assert ops.count("Exp") == 1 and "Neg" not in ops and "Log" not in ops and "Size" not in ops
    assert "FloorDiv" not in ops            # i // 1 is i; the division by zero is not fetched
    assert len(g) < want_len


def test_division_by_zero_stays_a_run_time_error():
    b = Builder()
    div0 = b.op("FloorDiv", b.const([4, 5], DType.i32), b.const([2, 0], DType.i32))
    step = make_step_graph(b.graph, [], [div0])
    PassManager(PipelineOptions(), read_environment=False).run(step.graph)
    assert [n.op for n in step.graph].count("FloorDiv") == 1
    with pytest.raises(ExecutionError, match="division by zero"):
        Interpreter(step.graph).run([step.retvals[0].inputs[0]], {})


@pytest.mark.skipif(not all(has_op(o) for o in ("Transpose", "Reshape", "Squeeze", "ExpandDims")),
                    reason="movement ops not registered yet")
def test_movement_step_keeps_its_results(rng):
    b = Builder()
    w = b.placeholder((2, 3), name="w")
    perm = b.const([1, 0], DType.i32)
    t = b.op("Transpose", b.op("Transpose", w, perm), perm)
    r = b.op("Reshape", b.op("Reshape", w, b.const([6], DType.i32)), b.const([3, 2], DType.i32))
    s = b.op("Squeeze", b.op("ExpandDims", w, b.const(0, DType.i32)), squeeze_dims=[0])
    same = b.op("Reshape", w, b.op("Shape", w))                     # Shape folds, then it is w
    out = b.op("AddN", [b.op("Mul", t, t), s, same])
    g = run_both(b, {w: rng.standard_normal((2, 3)).astype(np.float32)}, [out, r])
    ops = [node.op for node in g]
    assert "Transpose" not in ops and "Squeeze" not in ops and "ExpandDims" not in ops
    assert ops.count("Reshape") == 1


def test_compiled_step_after_the_passes_matches_the_interpreter(rng):
    """One compile: fetches the passes turn into a feed, a constant, or a node shared by two."""
    import dsl as fl
    from oracle import check_against_interpreter
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 3], name="x")
        fetches = {"x_times_one": x * 1.0, "x_plus_zero": x + 0.0,
                   "folded": fl.constant([1.0, 2.0, 3.0]) * 2.0 + 1.0,
                   "exp_a": fl.exp(x) * 1.0, "exp_b": fl.exp(x),
                   "neg_neg": -(-fl.exp(x))}
    got = check_against_interpreter(g, fetches, {x: rng.standard_normal((2, 3)).astype(np.float32)})
    np.testing.assert_array_equal(got["folded"], np.array([3.0, 5.0, 7.0], np.float32))
