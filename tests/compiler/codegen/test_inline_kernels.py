"""Elementwise ops on a few elements of static shape are emitted in place in the step function
(no outlined kernel call), the values only they read addressed in the arena without a tensor
slot: same results as the interpreter, and their error paths still name the node and where it
was written."""
import re

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.emitter import INLINE_MAX_ELEMENTS, emit_c
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter

NO_FUSION = PipelineOptions(disable=("fuse", "fold-constants"))


def _source(g, feeds, fetches):
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step, NO_FUSION)
    return emit_c(step.graph, step.feeds, step.retvals).source


def test_scalar_chain_is_inline_and_matches_the_interpreter():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.f32, [], name="x")
        v = fl.placeholder(fl.f32, [INLINE_MAX_ELEMENTS], name="v")
        y = x
        for k in range(20):
            y = fl.sigmoid(y * 1.5 + x) if k % 2 else fl.maximum(y - 0.25, x)
        z = fl.reduce_sum(v * y + 1.0)
    source = _source(g, [x, v], [y, z])
    kernels = re.findall(r"static __attribute__\(\(noinline\)\) int (k[0-9a-f]+_\w+)\(", source)
    assert not [k for k in kernels if k.split("_", 1)[1] in ("Mul", "AddV2", "Sigmoid",
                                                             "Maximum", "Sub")], kernels
    assert "/* %Sigmoid = Sigmoid(" in source
    # values read only by inline code are addressed in the arena: no tensor slot, no stores of
    # their data pointer, rank or dims; the fetched y keeps its slot
    assert "#define t_Sigmoid " not in source and "t_Sigmoid.data" not in source
    assert re.search(r"float \*(restrict)? ?o = \(\(float \*\)\(flowc_arena \+ \d+\)\);", source)
    assert f"#define t_{y.output.node.name} " in source
    feeds = {x: np.float32(0.3), v: np.linspace(-1, 1, INLINE_MAX_ELEMENTS, dtype=np.float32)}
    check_against_interpreter(g, {"y": y, "z": z}, feeds)


def test_larger_or_dynamic_elementwise_ops_stay_outlined():
    g = fl.Graph()
    with g.as_default():
        big = fl.placeholder(fl.f32, [INLINE_MAX_ELEMENTS + 1], name="big")
        dyn = fl.placeholder(fl.f32, [None], name="dyn")
        a = fl.exp(big)
        b = fl.exp(dyn)
    source = _source(g, [big, dyn], [a, b])
    assert re.search(r"static __attribute__\(\(noinline\)\) int k[0-9a-f]+_Exp\(", source)
    assert '{ const char *flowc_node = "Exp' not in source


def test_an_inline_op_that_fails_names_its_node_and_line():
    g = fl.Graph()
    with g.as_default():
        a = fl.placeholder(fl.i32, [], name="a")
        b = fl.placeholder(fl.i32, [], name="b")
        q = fl.floordiv(a, b, name="quotient")       # the line the error must point at
    source = _source(g, [a, b], [q])
    assert '{ const char *flowc_node = "quotient"' in source
    with fl.Session(graph=g) as s:
        assert s.run(q, {a: np.int32(7), b: np.int32(2)}) == 3
        where = r"test_inline_kernels\.py:\d+:\d+: node 'quotient': Integer division by zero"
        with pytest.raises(fl.FlowcError, match=where):
            s.run(q, {a: np.int32(7), b: np.int32(0)})
