"""TensorFlow 2 GraphDefs: function calls, functional control flow and TensorLists.

The graphs under tests/data/tf_graphs/ were written by TensorFlow (make_tf_graphs.py there):
Keras LSTM (bidirectional) and GRU (backwards) layers, the GRU also with its loops lowered to
TensorFlow 1 frames, a Python loop over ``tf.range`` with a ``tf.cond`` in it, TensorArrays
(of unknown element shape, of dynamic size), ``tf.switch_case`` and a loop in a cond, and
functions calling functions; each compiles to C and matches TensorFlow's recorded outputs.
Hand-written GraphDefs check what TensorFlow's exporter rarely writes (a direct call of a
function with attr placeholders, ``Case``, an ``If`` on an int, control outputs) and that every
failure is one GraphDefImportError naming the file, the node and the function."""
from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("google.protobuf", reason="GraphDef support needs protobuf")

import dsl as fl  # noqa: E402
from compiler.cli import main as flowc_main  # noqa: E402
from compiler.interop.graphdef import (GraphDefImportError, graphdef_to_graph,  # noqa: E402
                                       load_graphdef_model, read_graphdef)
from compiler.interop.protos import tf_protos  # noqa: E402
from compiler.interop.tf_functions import (import_lowered, lower_functions,  # noqa: E402
                                           lowered_output)
from dsl.tensor import Tensor  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                    "tf_graphs")
PB = tf_protos()
DT_FLOAT, DT_INT32, DT_BOOL, DT_VARIANT = 1, 3, 10, 21


def _cases(name):
    data = np.load(os.path.join(DATA, name + ".npz"))
    ks = sorted({f.split(":")[0][2:] for f in data.files if f.startswith("in")}, key=int)
    for k in ks:
        feeds = {f.split(":", 1)[1]: data[f] for f in data.files if f.startswith(f"in{k}:")}
        outs = {f.split(":", 1)[1]: data[f] for f in data.files if f.startswith(f"out{k}:")}
        yield feeds, outs


def _run(graph, fetches, feeds, backend="c"):
    with fl.Session(graph=graph, backend=backend) as s:
        return s.run([Tensor(graph.output(f)) for f in fetches],
                     {Tensor(graph.output(k)): v for k, v in feeds.items()})


@pytest.mark.parametrize("name, fetches", [
    ("keras_lstm", ["Identity"]),
    ("keras_gru", ["Identity"]),
    ("keras_gru_tf1_frames", ["Identity"]),
    ("range_loop", ["Identity"]),
    ("tensor_arrays", ["Identity_3", "Identity_1", "Identity", "Identity_2"]),
    ("nested_calls", ["Identity"]),
])
def test_tensorflow_2_graphs_compile_and_match_tensorflow(name, fetches):
    model = load_graphdef_model(os.path.join(DATA, name + ".pb"))
    assert model.fetch_names == fetches       # the model's outputs, no leftovers of inlining
    ops = {n.op for n in model.graph}
    assert not ops & {"While", "StatelessWhile", "StatelessIf", "PartitionedCall", "_SwitchN"}
    for feeds, want in _cases(name):
        got = _run(model.graph, list(want), feeds)
        for (tensor, w), g in zip(want.items(), got):
            assert g.shape == w.shape, (name, tensor)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{name} {tensor}")


def test_the_interpreter_agrees_on_a_loop_with_a_cond_and_on_tensor_arrays():
    for name in ("range_loop", "tensor_arrays"):
        model = load_graphdef_model(os.path.join(DATA, name + ".pb"))
        for feeds, want in _cases(name):
            got = _run(model.graph, list(want), feeds, backend="interpreter")
            for (tensor, w), g in zip(want.items(), got):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=tensor)


def test_a_keras_lstm_loop_becomes_a_frame_over_dense_lists():
    graph = graphdef_to_graph(read_graphdef(os.path.join(DATA, "keras_lstm.pb")), "lstm.pb")
    ops = [n.op for n in graph]
    assert ops.count("LoopCond") == 3       # one loop per layer, two for the bidirectional
    assert ops.count("ReverseV2") == 2       # the backward layer reverses its input and output
    lists = sorted(n.output_types[0].shape for n in graph if n.op == "TensorListReserve")
    assert lists == [(1, None, 4), (6, None, 5), (6, None, 5)]   # [time, batch, units]
    frames = {n.attrs["frame_name"] for n in graph if n.op == "Enter"}
    assert len(frames) == 3
    for frame in frames:
        enters = [n for n in graph if n.op == "Enter" and n.attrs["frame_name"] == frame]
        # the iteration limit, the input list and the weights are loop invariants; the
        # counters, the output list and the two states are loop variables
        assert len(enters) == 10 and sum(n.attrs["is_constant"] for n in enters) == 5
        assert all(n.attrs["parallel_iterations"] == 32 for n in enters)


def test_compile_and_run_a_keras_gru_from_the_command_line(tmp_path):
    (feeds, want), = list(_cases("keras_gru"))[:1]
    np.save(tmp_path / "x.npy", feeds["x"])
    out = str(tmp_path / "art")
    assert flowc_main(["compile", os.path.join(DATA, "keras_gru.pb"), "-o", out]) == 0
    assert flowc_main(["run", out, "--feed", f"x={tmp_path / 'x.npy'}",
                       "--save", str(tmp_path / "y.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want["Identity:0"], rtol=1e-4,
                               atol=1e-5)


def test_a_text_graphdef_with_tensorflow_2_type_annotations_parses(tmp_path):
    from google.protobuf import text_format
    gd = read_graphdef(os.path.join(DATA, "keras_lstm.pb"))
    text = text_format.MessageToString(gd)
    assert "experimental_type" in text                       # TF2 writes FullTypeDefs
    path = tmp_path / "lstm.pbtxt"
    path.write_text(text)
    assert load_graphdef_model(str(path)).fetch_names == ["Identity"]


# --- hand-written GraphDefs ----------------------------------------------------------------------
def attr(**kw):
    a = PB.AttrValue()
    for k, v in kw.items():
        if k == "types":
            a.list.type.extend(v)
        elif k == "func":
            a.func.name = v
        elif k == "funcs":
            for name in v:
                a.list.func.add(name=name)
        elif k == "s":
            a.s = v.encode()
        elif k == "tensor":
            a.tensor.CopyFrom(v)
        else:
            setattr(a, k, v)
    return a


def const(gd, name, value):
    value = np.asarray(value)
    dt = {np.float32: DT_FLOAT, np.int32: DT_INT32}[value.dtype.type]
    t = PB.TensorProto(dtype=dt, tensor_content=value.tobytes())
    for d in value.shape:
        t.tensor_shape.dim.add(size=d)
    nd = gd.node.add(name=name, op="Const")
    nd.attr["value"].tensor.CopyFrom(t)
    nd.attr["dtype"].type = dt
    return name


def placeholder(gd, name, dtype, shape=None):
    nd = gd.node.add(name=name, op="Placeholder")
    nd.attr["dtype"].type = dtype
    if shape is None:
        nd.attr["shape"].shape.unknown_rank = True
    else:
        for d in shape:
            nd.attr["shape"].shape.dim.add(size=-1 if d is None else d)
    return name


def node(container, name, op, inputs=(), **attrs):
    nd = container.add(name=name, op=op)
    nd.input.extend(inputs)
    for k, v in attrs.items():
        nd.attr[k].CopyFrom(v)
    return nd


def function(gd, name, inputs, outputs, ret, control_ret=None, attrs=()):
    """A FunctionDef: ``inputs``/``outputs`` are (name, dtype or type attr name) pairs."""
    f = gd.library.function.add()
    f.signature.name = name
    for arg_name, t in inputs:
        a = f.signature.input_arg.add(name=arg_name)
        a.type_attr, a.type = (t, 0) if isinstance(t, str) else ("", t)
    for arg_name, t in outputs:
        a = f.signature.output_arg.add(name=arg_name)
        a.type_attr, a.type = (t, 0) if isinstance(t, str) else ("", t)
    for a in attrs:
        f.signature.attr.add(name=a, type="type")
    f.ret.update(ret)
    f.control_ret.update(control_ret or {})
    return f


def polymorphic_library(gd):
    """``scale(x: T) -> (y, z)``: y = x * 2 via a placeholder-typed const, z = x - 1 by
    calling ``minus_one``; ``twice(x)`` calls ``scale`` as an op (node.op == "scale")."""
    f = function(gd, "minus_one", [("v", DT_FLOAT)], [("w", DT_FLOAT)], {"w": "sub:z:0"})
    node(f.node_def, "one", "Const", value=attr(tensor=PB.TensorProto(
        dtype=DT_FLOAT, float_val=[1.0])), dtype=attr(type=DT_FLOAT))
    node(f.node_def, "sub", "Sub", ["v", "one:output:0"], T=attr(type=DT_FLOAT))
    f = function(gd, "scale", [("x", "T")], [("y", "T"), ("z", "T")],
                 {"y": "mul:z:0", "z": "call:output:0"}, attrs=["T"])
    node(f.node_def, "two", "Const", value=attr(tensor=PB.TensorProto(
        dtype=DT_FLOAT, float_val=[2.0])), dtype=attr(placeholder="T"))
    node(f.node_def, "mul", "Mul", ["x", "two:output:0"], T=attr(placeholder="T"))
    node(f.node_def, "call", "PartitionedCall", ["x"], Tin=attr(types=[DT_FLOAT]),
         Tout=attr(types=[DT_FLOAT]), f=attr(func="minus_one"))
    f = function(gd, "twice", [("x", DT_FLOAT)], [("out", DT_FLOAT)], {"out": "add:z:0"})
    node(f.node_def, "s", "scale", ["x"], T=attr(type=DT_FLOAT))
    node(f.node_def, "add", "AddV2", ["s:y:0", "s:z:0"], T=attr(type=DT_FLOAT))


def test_direct_calls_placeholders_and_nested_calls_are_inlined():
    gd = PB.GraphDef()
    polymorphic_library(gd)
    placeholder(gd, "x", DT_FLOAT, [None])
    node(gd.node, "call", "StatefulPartitionedCall", ["x"], Tin=attr(types=[DT_FLOAT]),
         Tout=attr(types=[DT_FLOAT]), f=attr(func="twice"))
    node(gd.node, "direct", "scale", ["x"], T=attr(type=DT_FLOAT))
    node(gd.node, "y", "AddV2", ["call", "direct:1"], T=attr(type=DT_FLOAT))
    lowering = lower_functions(gd, "calls.pb")
    assert lowered_output(lowering, "direct:1") == "direct/call/sub"
    assert lowered_output(lowering, "call:0") == "call/add"
    graph = graphdef_to_graph(gd, "calls.pb")
    assert graph.node("call/s/two").attrs["dtype"] is fl.float32      # placeholder bound
    xv = np.array([1.0, -2.0, 0.5], np.float32)
    for backend in ("c", "interpreter"):
        got, = _run(graph, ["y"], {"x": xv}, backend)
        np.testing.assert_allclose(got, (2 * xv + xv - 1) + (xv - 1))


def test_case_takes_the_last_branch_out_of_range_and_if_takes_an_int_predicate():
    gd = PB.GraphDef()
    for k, scale in enumerate((10.0, 20.0, 30.0)):
        f = function(gd, f"b{k}", [("a", DT_FLOAT)], [("r", DT_FLOAT)], {"r": "m:z:0"})
        node(f.node_def, "c", "Const", value=attr(tensor=PB.TensorProto(
            dtype=DT_FLOAT, float_val=[scale])), dtype=attr(type=DT_FLOAT))
        node(f.node_def, "m", "Mul", ["a", "c:output:0"], T=attr(type=DT_FLOAT))
    placeholder(gd, "x", DT_FLOAT, [2])
    placeholder(gd, "i", DT_INT32, [])
    node(gd.node, "case", "StatelessCase", ["i", "x"], Tin=attr(types=[DT_FLOAT]),
         Tout=attr(types=[DT_FLOAT]), branches=attr(funcs=["b0", "b1", "b2"]))
    node(gd.node, "if", "If", ["i", "case"], Tcond=attr(type=DT_INT32),
         Tin=attr(types=[DT_FLOAT]), Tout=attr(types=[DT_FLOAT]),
         then_branch=attr(func="b0"), else_branch=attr(func="b2"))
    graph = graphdef_to_graph(gd, "case.pb")
    lowering = lower_functions(gd, "case.pb")
    fetches = [lowered_output(lowering, "case"), lowered_output(lowering, "if:0")]
    assert fetches == ["case/case_0/Merge", "if/Merge"]     # a call's outputs: what it returns
    xv = np.array([1.0, 2.0], np.float32)
    for i, scale in ((0, 10), (1, 20), (2, 30), (5, 30), (-1, 30)):
        then = 30 if i == 0 else 10                           # If: nonzero is true
        for backend in ("c", "interpreter"):
            case, cond = _run(graph, fetches, {"x": xv, "i": np.int32(i)}, backend)
            np.testing.assert_allclose(case, xv * scale)
            np.testing.assert_allclose(cond, xv * scale * then)


def test_a_while_with_a_nested_call_and_control_outputs():
    """``while i < n: i += 1; acc = step(acc)`` where step is a call inside the body whose
    function has a control output; the loop's outputs are read and ``^loop`` is waited for."""
    gd = PB.GraphDef()
    f = function(gd, "step", [("a", DT_FLOAT)], [("b", DT_FLOAT)], {"b": "t:y:0"},
                 control_ret={"done": "t"})
    node(f.node_def, "t", "Tanh", ["a"], T=attr(type=DT_FLOAT))
    f = function(gd, "cond", [("i", DT_INT32), ("n", DT_INT32), ("acc", DT_FLOAT)],
                 [("p", DT_BOOL)], {"p": "less:z:0"})
    node(f.node_def, "less", "Less", ["i", "n"], T=attr(type=DT_INT32))
    f = function(gd, "body", [("i", DT_INT32), ("n", DT_INT32), ("acc", DT_FLOAT)],
                 [("i2", DT_INT32), ("n2", DT_INT32), ("acc2", DT_FLOAT)],
                 {"i2": "inc:z:0", "n2": "n", "acc2": "call:output:0"})
    node(f.node_def, "one", "Const", value=attr(tensor=PB.TensorProto(
        dtype=DT_INT32, int_val=[1])), dtype=attr(type=DT_INT32))
    node(f.node_def, "inc", "AddV2", ["i", "one:output:0"], T=attr(type=DT_INT32))
    node(f.node_def, "call", "PartitionedCall", ["acc"], Tin=attr(types=[DT_FLOAT]),
         Tout=attr(types=[DT_FLOAT]), f=attr(func="step"))
    placeholder(gd, "x", DT_FLOAT, [None])
    placeholder(gd, "n", DT_INT32, [])
    const(gd, "zero", np.int32(0))
    node(gd.node, "loop", "While", ["zero", "n", "x"], T=attr(types=[DT_INT32, DT_INT32,
                                                                         DT_FLOAT]),
         cond=attr(func="cond"), body=attr(func="body"), parallel_iterations=attr(i=4))
    node(gd.node, "y", "Identity", ["loop:2", "^loop"], T=attr(type=DT_FLOAT))
    graph = graphdef_to_graph(gd, "loop.pb")
    assert graph.node("loop").op == "NoOp"                  # ^loop: after the loop
    n_enter = [n for n in graph if n.op == "Enter" and n.inputs[0].node.name == "n"]
    assert n_enter and n_enter[0].attrs["is_constant"]      # returned unchanged: invariant
    xv = np.array([0.3, -1.0], np.float32)
    for steps in (0, 1, 4):
        want = xv.copy()
        for _ in range(steps):
            want = np.tanh(want)
        for backend in ("c", "interpreter"):
            got, = _run(graph, ["y"], {"x": xv, "n": np.int32(steps)}, backend)
            np.testing.assert_allclose(got, want, rtol=1e-6)


# --- errors ---------------------------------------------------------------------------------------
def _import_error(gd, path="bad.pb"):
    with pytest.raises(GraphDefImportError) as e:
        graphdef_to_graph(gd, path)
    return str(e.value)


def test_a_missing_function_and_recursion_name_the_node_and_function():
    gd = PB.GraphDef()
    placeholder(gd, "x", DT_FLOAT, [2])
    node(gd.node, "call", "PartitionedCall", ["x"], Tin=attr(types=[DT_FLOAT]),
         Tout=attr(types=[DT_FLOAT]), f=attr(func="nowhere"))
    text = _import_error(gd)
    assert "bad.pb: node 2 'call' (PartitionedCall)" in text and "'nowhere'" in text
    gd = PB.GraphDef()
    f = function(gd, "loop_forever", [("a", DT_FLOAT)], [("b", DT_FLOAT)], {"b": "c:output:0"})
    node(f.node_def, "c", "PartitionedCall", ["a"], Tin=attr(types=[DT_FLOAT]),
         Tout=attr(types=[DT_FLOAT]), f=attr(func="loop_forever"))
    placeholder(gd, "x", DT_FLOAT, [2])
    node(gd.node, "call", "loop_forever", ["x"])
    text = _import_error(gd)
    assert "function 'loop_forever' calls itself" in text and "'call'" in text


def test_bad_function_bodies_are_clear_errors():
    gd = PB.GraphDef()
    f = function(gd, "f", [("a", DT_FLOAT)], [("b", DT_FLOAT)], {"b": "t:nope:0"})
    node(f.node_def, "t", "Tanh", ["a"], T=attr(type=DT_FLOAT))
    placeholder(gd, "x", DT_FLOAT, [2])
    node(gd.node, "call", "f", ["x", "x"])
    text = _import_error(gd)
    assert "in function 'f'" in text and "takes 1 input tensors, the call gives 2" in text
    gd.node[-1].ClearField("input")
    gd.node[-1].input.append("x")
    text = _import_error(gd)
    assert "node 't' (Tanh) has no output 'nope' (its outputs: y)" in text


def test_missing_ops_inside_functions_are_listed_with_the_others():
    gd = PB.GraphDef()
    f = function(gd, "f", [("a", DT_FLOAT)], [("b", DT_FLOAT), ("c", DT_FLOAT)],
                 {"b": "t:y:0", "c": "u:y:0"})
    node(f.node_def, "t", "FancyOp", ["a"], T=attr(type=DT_FLOAT))
    node(f.node_def, "u", "OtherOp", ["a"], T=attr(type=DT_FLOAT))
    placeholder(gd, "x", DT_FLOAT, [2])
    node(gd.node, "call", "PartitionedCall", ["x"], Tin=attr(types=[DT_FLOAT]),
         Tout=attr(types=[DT_FLOAT, DT_FLOAT]), f=attr(func="f"))
    node(gd.node, "top", "TopLevelMissing", ["call", "call:1"])
    text = _import_error(gd)
    assert "3 op(s) flowc does not implement" in text
    assert "FancyOp x1" in text and "OtherOp x1" in text and "TopLevelMissing x1" in text


def test_a_list_whose_element_rank_nothing_tells_is_refused_by_name():
    gd = PB.GraphDef()
    const(gd, "shape", np.int32(-1))
    const(gd, "count", np.int32(3))
    node(gd.node, "list", "TensorListReserve", ["shape", "count"],
         element_dtype=attr(type=DT_FLOAT), shape_type=attr(type=DT_INT32))
    node(gd.node, "len", "TensorListLength", ["list"])
    text = _import_error(gd, "lists.pb")
    assert "lists.pb:3:0: node 'list' (TensorListReserve)" in text
    assert "unknown rank" in text


def test_cli_reports_a_tensorflow_2_import_error_without_a_traceback(tmp_path, capsys):
    gd = PB.GraphDef()
    placeholder(gd, "x", DT_FLOAT, [2])
    node(gd.node, "call", "PartitionedCall", ["x"], Tin=attr(types=[DT_FLOAT]),
         Tout=attr(types=[DT_FLOAT]), f=attr(func="nowhere"))
    path = tmp_path / "bad.pb"
    path.write_bytes(gd.SerializeToString())
    from cli_runner import flowc
    rc, _, err = flowc(capsys, "check", path)
    assert rc != 0 and err.startswith("flowc: error: ") and "'nowhere'" in err


def test_damaged_function_libraries_fail_as_import_errors_never_tracebacks():
    """Nodes dropped from functions, inputs renamed, attrs removed, functions deleted: each
    import either works or is one FlowcError (the CLI's ``flowc: error:``)."""
    from runtime.errors import FlowcError
    rng = np.random.default_rng(11)
    originals = [read_graphdef(os.path.join(DATA, n + ".pb"))
                 for n in ("keras_gru", "tensor_arrays", "nested_calls")]
    failures = 0
    for trial in range(60):
        gd = PB.GraphDef()
        gd.CopyFrom(originals[trial % len(originals)])
        f = gd.library.function[int(rng.integers(len(gd.library.function)))]
        how = trial % 5
        if how == 0 and len(f.node_def):
            del f.node_def[int(rng.integers(len(f.node_def)))]
        elif how == 1:
            nd = f.node_def[int(rng.integers(len(f.node_def)))]
            if nd.input:
                nd.input[int(rng.integers(len(nd.input)))] += rng.choice([":x", ":9", "_gone"])
        elif how == 2:
            nd = f.node_def[int(rng.integers(len(f.node_def)))]
            keys = sorted(nd.attr)
            if keys:
                del nd.attr[keys[int(rng.integers(len(keys)))]]
        elif how == 3:
            del gd.library.function[int(rng.integers(len(gd.library.function)))]
        else:
            key = sorted(f.ret)[int(rng.integers(len(f.ret)))] if f.ret else None
            if key:
                f.ret[key] = "nowhere:output:0"
        try:
            graphdef_to_graph(gd, f"damaged{trial}.pb")
        except FlowcError as e:
            failures += 1
            assert f"damaged{trial}.pb" in str(e)
    assert failures > 20


def test_a_call_that_nothing_reads_keeps_its_outputs_under_their_new_names():
    """A SavedModel's signature is a StatefulPartitionedCall nothing in the graph reads: its
    outputs stay, and ``lowered_output`` names them."""
    gd = PB.GraphDef()
    polymorphic_library(gd)
    placeholder(gd, "x", DT_FLOAT, [None])
    f = attr(func="scale")
    f.func.attr["T"].type = DT_FLOAT                    # the function's attr, bound by the call
    node(gd.node, "StatefulPartitionedCall", "StatefulPartitionedCall", ["x"],
         Tin=attr(types=[DT_FLOAT]), Tout=attr(types=[DT_FLOAT, DT_FLOAT]), f=f)
    graph, lowering = import_lowered(gd, "signature.pb")
    names = [lowered_output(lowering, f"StatefulPartitionedCall:{i}") for i in (0, 1)]
    xv = np.array([3.0, -1.0], np.float32)
    y, z = _run(graph, names, {"x": xv})
    np.testing.assert_allclose(y, 2 * xv)
    np.testing.assert_allclose(z, xv - 1)
