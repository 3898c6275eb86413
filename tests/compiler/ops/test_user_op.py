"""Ops registered by a package outside flowc (tests/ext_ops) work everywhere flowc's own do:
fl.raw_ops and fl.apply_op, both backends with equal results, the IR text, and errors."""
import numpy as np
import pytest

import dsl as fl
import ext_ops
from compiler.errors import CodegenError, ShapeError
from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph
from compiler.codegen.user_templates import c_template
from compiler.ir.op_registry import get_op, register_op
from oracle import check_against_interpreter
from runtime.errors import RuntimeExecutionError


def test_user_ops_are_registered_with_their_signature():
    op = get_op("ScaledSoftsign")
    assert [a.name for a in op.inputs] == ["x"] and op.attrs["scale"].default == 1.0
    assert set(op.attrs["T"].allowed) == {fl.float32, fl.float64, fl.float16, fl.bfloat16}
    assert "ScaledSoftsign" in dir(fl.raw_ops) and "MinMax" in dir(fl.raw_ops)
    assert "scale * x" in fl.raw_ops.ScaledSoftsign.__doc__


def test_user_ops_in_both_backends(graph, rng):
    x32 = fl.placeholder(fl.float32, [None, 4], name="x32")
    x64 = fl.placeholder(fl.float64, [None], name="x64")
    i = fl.placeholder(fl.int32, [None, 4], name="i")
    j = fl.placeholder(fl.int32, [None, 4], name="j")
    lo, hi = fl.raw_ops.MinMax(a=i, b=j)
    fetches = {
        "raw": fl.raw_ops.ScaledSoftsign(x=x32, scale=2.5),
        "raw_default": fl.raw_ops.ScaledSoftsign(x=x64),
        "wrapper": ext_ops.scaled_softsign(x32 * 3.0, scale=-0.5, name="soft"),
        "apply": fl.apply_op("ScaledSoftsign", [x64], {"scale": 4.0}),
        "lo": lo, "hi": hi,
        "mm_float": ext_ops.min_max(x32, fl.negative(x32))[1],
    }
    assert fetches["wrapper"].op.name == "soft" and fetches["apply"].dtype is fl.float64
    for batch in (0, 1, 7):
        feed = {x32: rng.standard_normal((batch, 4)).astype(np.float32) * 10,
                x64: rng.standard_normal(batch * 3) * 10,
                i: rng.integers(-50, 50, (batch, 4), dtype=np.int32),
                j: rng.integers(-50, 50, (batch, 4), dtype=np.int32)}
        got = check_against_interpreter(graph, fetches, feed)
        xv = feed[x32]
        np.testing.assert_allclose(got["raw"], 2.5 * xv / (1 + np.abs(xv)), rtol=1e-6)
        np.testing.assert_array_equal(got["lo"], np.minimum(feed[i], feed[j]))
        np.testing.assert_array_equal(got["hi"], np.maximum(feed[i], feed[j]))
        np.testing.assert_array_equal(got["mm_float"], np.abs(xv))


def test_user_op_checks_shapes_at_build_and_run_time(graph):
    with pytest.raises(ShapeError, match="MinMax needs inputs of one shape"):
        ext_ops.min_max(fl.constant([1, 2]), fl.constant([1, 2, 3]))
    with pytest.raises(Exception, match="attr T=i32 is not allowed for ScaledSoftsign"):
        fl.raw_ops.ScaledSoftsign(x=fl.constant([1, 2]))
    a = fl.placeholder(fl.int64, [None], name="a")
    b = fl.placeholder(fl.int64, [None], name="b")
    lo, _ = ext_ops.min_max(a, b, name="mm")
    with fl.Session(graph=graph) as s:
        np.testing.assert_array_equal(s.run(lo, {a: [1, 5], b: [3, 2]}), [1, 2])
        with pytest.raises(RuntimeExecutionError, match="node 'mm'.*MinMax inputs differ in dim 0: 2 != 3"):
            s.run(lo, {a: [1, 5], b: [3, 2, 1]})


def test_user_ops_round_trip_through_ir_text(graph):
    x = fl.placeholder(fl.float32, [2], name="x")
    ext_ops.scaled_softsign(x, scale=0.25)
    ext_ops.min_max(x, x)
    text = print_graph(graph)
    assert "ScaledSoftsign(%x) {T=f32, scale=0.25}" in text and ": (f32[2], f32[2])" in text
    assert print_graph(parse_graph(text)) == text


def test_template_errors_are_clear(graph):
    with pytest.raises(ValueError, match="bad C template"):
        c_template("{% for %}")
    with pytest.raises(ValueError, match="does not exist"):
        c_template(path="no/such/template.c.j2")
    with pytest.raises(ValueError, match="exactly one of"):
        c_template()
    register_op("_TestBadTemplate", inputs=["x: T"], outputs=["y: T"], attrs=["T: {float}"],
                shape=lambda ctx: [ctx.input_shape(0)], kernel=lambda ctx, x: x,
                c_kernel=c_template("{{ out.data }}[0] = {{ no_such_name }};"), replace=True)
    x = fl.placeholder(fl.float32, [1], name="x")
    y = fl.raw_ops._TestBadTemplate(x=x, name="bad")
    with fl.Session(graph=graph) as s:
        with pytest.raises(CodegenError, match="node 'bad'.*no_such_name"):
            s.run(y, {x: [1.0]})
