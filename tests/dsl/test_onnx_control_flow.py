"""ONNX control flow (If, Loop, Scan) imported as flowc conds and while loops, compiled to C and
checked against the onnx package's reference evaluator: every optional-input combination of
Loop, scan outputs stacked, outer-scope values, loop-carried values that change shape,
Scan's axes and directions (and Scan-8's batches and sequence lengths), and control flow
nested in control flow."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import dsl as fl  # noqa: E402
from dsl.onnx import (NotConstantError, OnnxImportError, UnsupportedOpsError,  # noqa: E402
                      import_graph)

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, elem=None, shape=None):
    if elem is None:                      # untyped (a function body's subgraph)
        return helper.make_empty_tensor_value_info(name)
    return helper.make_tensor_value_info(name, elem, shape)


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.asarray(value), name + "_value"))


def _model(nodes, inputs, outputs, opset=17, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _compile_and_run(models_and_feeds):
    """Import every (model, feeds) into one graph, compile it once to C, run it; returns the
    outputs per model."""
    graph = fl.Graph("onnx_cf")
    fetches, feeds, counts = [], {}, []
    for k, (model, values) in enumerate(models_and_feeds):
        imported = import_graph(model, f"m{k}.onnx", graph, scope=f"m{k}")
        fetches.extend(imported.outputs.values())
        counts.append(len(imported.outputs))
        feeds.update({imported.inputs[n]: v for n, v in values.items()})
    with fl.Session(graph=graph, backend="c") as sess:
        got = sess.run(fetches, feeds)
    out, at = [], 0
    for n in counts:
        out.append(got[at:at + n])
        at += n
    return out


def _check_all(cases, also=()):
    """Each case (model, feeds) gives in C what the onnx reference evaluator gives; the
    models ``also`` are compiled in the same module (their outputs come first)."""
    also = list(also)
    results = _compile_and_run(also + list(cases))
    checked = results[len(also):]
    for k, ((model, values), got) in enumerate(zip(cases, checked)):
        want = ReferenceEvaluator(model).run(None, values)
        assert len(got) == len(want), k
        for j, (g, w) in enumerate(zip(got, want)):
            w = np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape, (k, j, g.dtype, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"case {k} output {j}")
    return results[:len(also)] + checked if also else checked


# --- If ---------------------------------------------------------------------------------------
def _if_model(cond_value=None):
    """y, z = If(c): then (x * w, x + 1) else (x - w, x * x); w and x from the outer graph."""
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["t0"]), _const("one", np.float32(1)),
         helper.make_node("Add", ["x", "one"], ["t1"])], "then", [],
        [_vi("t0", F, [3]), _vi("t1", F, [3])])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["x", "w"], ["e0"]), helper.make_node("Mul", ["x", "x"], ["e1"])],
        "else", [], [_vi("e0", F, [3]), _vi("e1", F, [3])])
    nodes = [helper.make_node("If", ["c"], ["y", "z"], then_branch=then_g, else_branch=else_g)]
    inputs = [_vi("x", F, [3])]
    inits = [numpy_helper.from_array(np.array([2, 3, 4], np.float32), "w")]
    if cond_value is None:
        inputs.append(_vi("c", B, []))
    else:
        inits.append(numpy_helper.from_array(np.array(cond_value), "c"))
    return _model(nodes, inputs, [_vi("y", F, [3]), _vi("z", F, [3])], initializers=inits)


def test_if_takes_either_branch_at_run_time_and_reads_outer_values(rng):
    x = rng.uniform(-1, 1, 3).astype(np.float32)
    _check_all([(_if_model(), {"x": x, "c": np.array(True)}),
                (_if_model(), {"x": x, "c": np.array(False)})])


def test_an_if_with_a_constant_condition_imports_only_the_taken_branch(rng):
    graph = fl.Graph("if_const")
    imported = import_graph(_if_model(cond_value=False), "m.onnx", graph)
    ops = {n.op for n in graph}
    assert not ops & {"Switch", "Merge"}
    assert "Sub" in ops and "Add" not in ops
    x = rng.uniform(-1, 1, 3).astype(np.float32)
    with fl.Session(graph=graph, backend="c") as sess:
        y, z = sess.run(list(imported.outputs.values()), {imported.inputs["x"]: x})
    np.testing.assert_allclose(y, x - np.array([2, 3, 4], np.float32), rtol=1e-6)
    np.testing.assert_allclose(z, x * x, rtol=1e-6)


def test_if_branches_of_different_ranks_need_a_condition_known_at_import(rng):
    then_g = helper.make_graph([_const("a", np.float32(1))], "then", [], [_vi("a", F, [])])
    else_g = helper.make_graph([_const("b", np.ones(2, np.float32))], "else", [],
                               [_vi("b", F, [2])])
    model = _model([helper.make_node("Greater", ["x", "zero"], ["c"]),
                    helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g,
                                     name="pick")],
                   [_vi("x", F, [])], [_vi("y", F, None)],
                   initializers=[numpy_helper.from_array(np.float32(0), "zero")])
    with pytest.raises(NotConstantError, match="rank 0 in then_branch and 1 in else_branch") as e:
        import_graph(model, "m.onnx", fl.Graph("g"))
    assert e.value.input_name == "x"
    imported = import_graph(model, "m.onnx", fl.Graph("g"), constant_inputs={"x": np.float32(-1)})
    assert imported.outputs["y"].shape == (2,)


# --- Loop -------------------------------------------------------------------------------------
def _loop_model(with_m=True, with_cond=True, stop_at=None, opset=17):
    """Loop(M, cond, a, s): a *= 2 each iteration (a float[2] loop-carried value), s += i,
    the scan outputs a and i * w (w from the outer graph); the body's condition is
    ``i + 1 < stop_at`` (or its input)."""
    body_nodes = [_const("two", np.float32(2)),
                  helper.make_node("Mul", ["a_in", "two"], ["a_out"]),
                  helper.make_node("Add", ["s_in", "i"], ["s_out"]),
                  helper.make_node("Cast", ["i"], ["i_f"], to=F),
                  helper.make_node("Mul", ["i_f", "w"], ["iw"]),
                  helper.make_node("Identity", ["a_out"], ["a_scan"])]
    if stop_at is None:
        body_nodes.append(helper.make_node("Identity", ["c_in"], ["c_out"]))
    else:
        body_nodes += [_const("one", np.int64(1)), _const("stop", np.int64(stop_at)),
                       helper.make_node("Add", ["i", "one"], ["next_i"]),
                       helper.make_node("Less", ["next_i", "stop"], ["c_out"])]
    body = helper.make_graph(body_nodes, "body",
                             [_vi("i", I64, []), _vi("c_in", B, []), _vi("a_in", F, [2]),
                              _vi("s_in", I64, [])],
                             [_vi("c_out", B, []), _vi("a_out", F, [2]), _vi("s_out", I64, []),
                              _vi("a_scan", F, [2]), _vi("iw", F, [3])])
    inputs = [_vi("a", F, [2]), _vi("s", I64, [])]
    if with_m:
        inputs.append(_vi("m", I64, []))
    if with_cond:
        inputs.append(_vi("c", B, []))
    node = helper.make_node("Loop", ["m" if with_m else "", "c" if with_cond else "", "a", "s"],
                            ["a_final", "s_final", "a_all", "iw_all"], body=body)
    return _model([node], inputs, [_vi("a_final", F, [2]), _vi("s_final", I64, []),
                                   _vi("a_all", F, None), _vi("iw_all", F, None)], opset,
                  [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")])


def test_loop_with_every_combination_of_trip_count_and_condition(rng):
    """(The onnx reference evaluator's Loop mishandles an absent condition and scalar scan
    outputs: numpy says what to expect.)"""
    a = rng.uniform(-1, 1, 2).astype(np.float32)
    s = np.array(5, np.int64)
    m = lambda v: np.array(v, np.int64)          # noqa: E731
    cases = [  # (model, feeds, iterations)
        (_loop_model(), {"m": m(4), "c": np.array(True)}, 4),
        # a false condition or a trip count of 0: no iteration, empty scan outputs
        (_loop_model(), {"m": m(4), "c": np.array(False)}, 0),
        (_loop_model(), {"m": m(0), "c": np.array(True)}, 0),
        # the body's condition stops it before the trip count
        (_loop_model(stop_at=2), {"m": m(6), "c": np.array(True)}, 2),
        # a for loop (no condition input)
        (_loop_model(with_cond=False), {"m": m(3)}, 3),
        # a while loop (no trip count)
        (_loop_model(with_m=False, stop_at=5), {"c": np.array(True)}, 5),
        # neither: a do-while loop stopped by the body (opset 11)
        (_loop_model(with_m=False, with_cond=False, stop_at=3, opset=11), {}, 3),
    ]
    results = _compile_and_run([(model, {"a": a, "s": s, **feeds}) for model, feeds, _ in cases])
    w = np.array([1, 2, 3], np.float32)
    for (_, _, n), (a_final, s_final, a_all, iw_all) in zip(cases, results):
        np.testing.assert_allclose(a_final, a * 2.0 ** n, rtol=1e-6)
        assert s_final == s + n * (n - 1) // 2 and s_final.dtype == np.int64
        assert a_all.shape == (n, 2) and iw_all.shape == (n, 3)
        np.testing.assert_allclose(a_all, np.array([a * 2.0 ** (t + 1) for t in range(n)],
                                                   np.float32).reshape(n, 2), rtol=1e-6)
        np.testing.assert_allclose(iw_all, np.array([t * w for t in range(n)],
                                                    np.float32).reshape(n, 3), rtol=1e-6)


def test_a_loop_carried_value_that_grows_and_untyped_body_values(rng):
    """acc = Concat(acc, [i]) each iteration (its shape changes: the loop relaxes it to
    [?]); the body's values are untyped, as in ONNX's function bodies (Range's expansion)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=F),
         helper.make_node("Unsqueeze", ["i_f", "axes"], ["i_1"]),
         helper.make_node("Concat", ["acc_in", "i_1"], ["acc_out"], axis=0),
         helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0)],
        "body", [_vi("i"), _vi("c_in"), _vi("acc_in")],
        [_vi("c_out"), _vi("acc_out"), _vi("total")],
        initializer=[numpy_helper.from_array(np.array([0], np.int64), "axes")])
    model = _model([helper.make_node("Loop", ["m", "", "acc"], ["acc_final", "totals"],
                                     body=body)],
                   [_vi("m", I64, []), _vi("acc", F, [1])],
                   [_vi("acc_final", F, None), _vi("totals", F, None)])
    (acc, totals), = _compile_and_run([(model, {"m": np.array(4, np.int64),
                                               "acc": np.array([0.5], np.float32)})])
    np.testing.assert_allclose(acc, [0.5, 0, 1, 2, 3])
    np.testing.assert_allclose(totals, [0.5, 1.5, 3.5, 6.5])


def test_a_slice_by_the_iteration_number_reads_one_element_per_iteration(rng):
    """ONNX's own test_loop11 pattern: Slice(x, [i], [i + 1]) with i known at run time."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), _const("one", np.int64(1)),
         helper.make_node("Add", ["i", "one"], ["end"]),
         helper.make_node("Unsqueeze", ["i", "axes"], ["start1"]),
         helper.make_node("Unsqueeze", ["end", "axes"], ["end1"]),
         helper.make_node("Slice", ["x", "start1", "end1", "axes"], ["piece"]),
         helper.make_node("Add", ["y_in", "piece"], ["y_out"])],
        "body", [_vi("i", I64, []), _vi("c_in", B, []), _vi("y_in", F, [1])],
        [_vi("c_out", B, []), _vi("y_out", F, [1]), _vi("piece", F, [1])],
        initializer=[numpy_helper.from_array(np.array([0], np.int64), "axes")])
    model = _model([helper.make_node("Loop", ["m", "", "y"], ["y_final", "pieces"], body=body)],
                   [_vi("m", I64, []), _vi("y", F, [1]), _vi("x", F, [None])],
                   [_vi("y_final", F, [1]), _vi("pieces", F, None)])
    x = rng.uniform(-1, 1, 6).astype(np.float32)
    (y, pieces), = _compile_and_run([(model, {"m": np.array(6, np.int64),
                                             "y": np.zeros(1, np.float32), "x": x})])
    np.testing.assert_allclose(y, [x.sum()], rtol=1e-5)
    np.testing.assert_allclose(pieces, x.reshape(6, 1))


# --- Scan -------------------------------------------------------------------------------------
def _scan_body():
    """(sum, x_t, y_t) -> (sum + x_t, x_t * y_t, sum + x_t): one state, two scan inputs."""
    return helper.make_graph(
        [helper.make_node("Add", ["sum_in", "x_t"], ["sum_out"]),
         helper.make_node("Mul", ["x_t", "y_t"], ["prod"]),
         helper.make_node("Identity", ["sum_out"], ["running"])],
        "body", [_vi("sum_in", F, [3]), _vi("x_t", F, [3]), _vi("y_t", F, [3])],
        [_vi("sum_out", F, [3]), _vi("prod", F, [3]), _vi("running", F, [3])])


def test_scan_axes_and_directions_of_inputs_and_outputs(rng):
    """x scanned along axis 1 in reverse, y along axis 0; the products stacked reversed, the
    running sums stacked on axis 1."""
    node = helper.make_node("Scan", ["init", "x", "y"], ["final", "prods", "sums"],
                            body=_scan_body(),
                            num_scan_inputs=2, scan_input_axes=[1, 0],
                            scan_input_directions=[1, 0], scan_output_axes=[0, -1],
                            scan_output_directions=[1, 0])
    model = _model([node], [_vi("init", F, [3]), _vi("x", F, [3, None]), _vi("y", F, [None, 3])],
                   [_vi("final", F, [3]), _vi("prods", F, None), _vi("sums", F, None)])
    plain = helper.make_node("Scan", ["init", "y", "y"], ["final", "prods", "sums"],
                             body=_scan_body(), num_scan_inputs=2)
    plain_model = _model([plain], [_vi("init", F, [3]), _vi("y", F, [4, 3])],
                         [_vi("final", F, [3]), _vi("prods", F, [4, 3]), _vi("sums", F, [4, 3])],
                         opset=9)
    init = rng.uniform(-1, 1, 3).astype(np.float32)
    x = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    y = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
    (final, prods, sums), _ = _check_all([(plain_model, {"init": init, "y": y})],
                                         also=[(model, {"init": init, "x": x, "y": y})])
    # (the reference evaluator has no reversed scan outputs: numpy says what to expect)
    xs = [x[:, 3 - t] for t in range(4)]
    running = init + np.cumsum(xs, axis=0)
    np.testing.assert_allclose(final, running[-1], rtol=1e-5)
    np.testing.assert_allclose(prods, np.stack([xs[t] * y[t] for t in range(4)])[::-1], rtol=1e-5)
    np.testing.assert_allclose(sums, running.T, rtol=1e-5)


def test_scan8_scans_each_batch_entry_to_its_sequence_length(rng):
    """Scan-8: batch dim 0, scan axis 1, a reverse direction, sequence_lens [3, 1] of 3:
    entry 1's scan outputs are padded with zeros (onnxruntime's padding)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "x_t"], ["sum_out"]),
         helper.make_node("Identity", ["sum_out"], ["running"])],
        "body", [_vi("sum_in", F, [2]), _vi("x_t", F, [2])],
        [_vi("sum_out", F, [2]), _vi("running", F, [2])])
    model = _model([helper.make_node("Scan", ["lens", "init", "x"], ["final", "sums"], body=body,
                                     num_scan_inputs=1, directions=[1])],
                   [_vi("lens", I64, [2]), _vi("init", F, [2, 2]), _vi("x", F, [2, 3, 2])],
                   [_vi("final", F, [2, 2]), _vi("sums", F, [2, 3, 2])], opset=8)
    init = rng.uniform(-1, 1, (2, 2)).astype(np.float32)
    x = rng.uniform(-1, 1, (2, 3, 2)).astype(np.float32)
    lens = np.array([3, 1], np.int64)
    (final, sums), = _compile_and_run([(model, {"lens": lens, "init": init, "x": x})])
    want_final = np.stack([init[0] + x[0].sum(0), init[1] + x[1, 0]])
    want_sums = np.zeros((2, 3, 2), np.float32)
    want_sums[0] = init[0] + np.cumsum(x[0, ::-1], axis=0)
    want_sums[1, 0] = init[1] + x[1, 0]
    np.testing.assert_allclose(final, want_final, rtol=1e-5)
    np.testing.assert_allclose(sums, want_sums, rtol=1e-5)


# --- nesting ----------------------------------------------------------------------------------
def test_a_loop_inside_an_if_and_an_if_inside_a_loop_body(rng):
    """Outer If whose then_branch runs a Loop (the trip count and x from the outer graph);
    that Loop's body holds an If on the parity of the iteration number. Else: x unchanged."""
    inner_then = helper.make_graph([helper.make_node("Add", ["v_in", "x"], ["t"])], "even", [],
                                   [_vi("t", F, [2])])
    inner_else = helper.make_graph([helper.make_node("Sub", ["v_in", "x"], ["e"])], "odd", [],
                                   [_vi("e", F, [2])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), _const("two", np.int64(2)),
         _const("zero", np.int64(0)),
         helper.make_node("Mod", ["i", "two"], ["parity"]),
         helper.make_node("Equal", ["parity", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["v_out"], then_branch=inner_then,
                          else_branch=inner_else),
         helper.make_node("Mul", ["v_out", "v_out"], ["sq"])],
        "body", [_vi("i", I64, []), _vi("c_in", B, []), _vi("v_in", F, [2])],
        [_vi("c_out", B, []), _vi("v_out", F, [2]), _vi("sq", F, [2])])
    then_g = helper.make_graph(
        [helper.make_node("Loop", ["m", "", "x"], ["v", "sqs"], body=body),
         helper.make_node("ReduceSum", ["sqs", "axis0"], ["total"], keepdims=0)],
        "then", [], [_vi("v", F, [2]), _vi("total", F, [2])],
        initializer=[numpy_helper.from_array(np.array([0], np.int64), "axis0")])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["same"]),
                                helper.make_node("Identity", ["x"], ["same2"])], "else", [],
                               [_vi("same", F, [2]), _vi("same2", F, [2])])
    model = _model([helper.make_node("If", ["c"], ["y", "z"], then_branch=then_g,
                                     else_branch=else_g)],
                   [_vi("c", B, []), _vi("m", I64, []), _vi("x", F, [2])],
                   [_vi("y", F, [2]), _vi("z", F, [2])])
    x = rng.uniform(-1, 1, 2).astype(np.float32)
    (y, z), (y2, z2) = _compile_and_run(
        [(model, {"c": np.array(True), "m": np.array(5, np.int64), "x": x}),
         (model, {"c": np.array(False), "m": np.array(5, np.int64), "x": x})])
    # iterations 0..4 add, subtract, add, subtract, add x: v = 2x, x, 2x, x, 2x
    np.testing.assert_allclose(y, 2 * x, rtol=1e-6)
    np.testing.assert_allclose(z, 14 * x * x, rtol=1e-5)
    np.testing.assert_allclose(y2, x)
    np.testing.assert_allclose(z2, x)


def test_a_loop_inside_a_loop_stacks_the_inner_scan_outputs(rng):
    """Outer Loop over i < m; its body runs an inner Loop over j < 3 scanning x * (i*3 + j);
    the outer scan output stacks the inner stacks: [m, 3, 2]."""
    inner = helper.make_graph(
        [helper.make_node("Identity", ["cj"], ["cj_out"]), _const("three", np.int64(3)),
         helper.make_node("Mul", ["i", "three"], ["i3"]),
         helper.make_node("Add", ["i3", "j"], ["k"]),
         helper.make_node("Cast", ["k"], ["k_f"], to=F),
         helper.make_node("Mul", ["x", "k_f"], ["elem"])],
        "inner", [_vi("j", I64, []), _vi("cj", B, [])], [_vi("cj_out", B, []), _vi("elem", F, [2])])
    outer = helper.make_graph(
        [helper.make_node("Identity", ["ci"], ["ci_out"]), _const("n3", np.int64(3)),
         helper.make_node("Loop", ["n3", ""], ["block"], body=inner)],
        "outer", [_vi("i", I64, []), _vi("ci", B, [])], [_vi("ci_out", B, []),
                                                         _vi("block", F, [3, 2])])
    model = _model([helper.make_node("Loop", ["m", ""], ["blocks"], body=outer)],
                   [_vi("m", I64, []), _vi("x", F, [2])], [_vi("blocks", F, None)])
    x = rng.uniform(-1, 1, 2).astype(np.float32)
    (got,), = _compile_and_run([(model, {"m": np.array(4, np.int64), "x": x})])
    np.testing.assert_allclose(got, [[x * (i * 3 + j) for j in range(3)] for i in range(4)],
                               rtol=1e-6)


# --- errors -----------------------------------------------------------------------------------
def test_ops_flowc_lacks_inside_a_body_are_listed_with_the_rest(tmp_path):
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("FancyOp", ["v_in"], ["v_out"], domain="com.example")],
        "body", [_vi("i", I64, []), _vi("c_in", B, []), _vi("v_in", F, [2])],
        [_vi("c_out", B, []), _vi("v_out", F, [2])])
    model = _model([helper.make_node("Relu", ["x"], ["r"]),
                    helper.make_node("Loop", ["m", "", "r"], ["y"], body=body)],
                   [_vi("m", I64, []), _vi("x", F, [2])], [_vi("y", F, [2])])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOpsError, match=r"FancyOp \(domain 'com.example'\): 1 node\(s\), "
                                                  "first #1"):
        import_graph(model, "m.onnx", fl.Graph("g"))


def test_sequence_values_in_a_subgraph_are_refused_by_name():
    seq = helper.make_tensor_sequence_value_info("s_in", F, None)
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Identity", ["s_in"], ["s_out"])],
                             "body", [_vi("i", I64, []), _vi("c_in", B, []), seq],
                             [_vi("c_out", B, []),
                              helper.make_tensor_sequence_value_info("s_out", F, None)])
    model = _model([helper.make_node("Loop", ["m", "", "x"], ["y"], body=body, name="seq_loop")],
                   [_vi("m", I64, []), _vi("x", F, [2])], [_vi("y", F, None)])
    with pytest.raises(OnnxImportError, match="seq_loop.*sequence_type value 's_in'.*dense "
                                              "tensors only"):
        import_graph(model, "m.onnx", fl.Graph("g"))
