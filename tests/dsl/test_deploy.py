"""Deploying a trained model: the digits MLP with dropout, trained by ``flowc train``, gives its
held-out accuracy from ``flowc train``'s evaluation, from the exported ONNX file (onnx's
reference evaluator), from the compiled artifact (``flowc run``) and from the C library
(``--emit c-library``), all with the checkpoint's weights baked in and dropout off. Also:
frozen and initialized GraphDefs, ``fl.graph_util.convert_variables_to_constants``, and the
errors for a checkpoint that does not match, a step that writes its variables and a folder
without a checkpoint."""
import os
import re
import shutil

import cffi
import numpy as np
import pytest

import dsl as fl
from cli_runner import flowc
from compiler.interop.graphdef import load_graphdef_model, read_graphdef
from runtime.checkpoint import write_checkpoint
from repo_paths import EXAMPLES

MODEL = os.path.join(EXAMPLES, "digits_mlp_dropout.flow")
DIGITS = os.path.join(EXAMPLES, "data", "digits.npz")
STEPS = 400
LAST = re.compile(r"^step (\d+): loss [0-9.e+-]+, accuracy ([0-9.]+) \(held-out, 359 examples\)")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("deploy")


@pytest.fixture(scope="module")
def held_out():
    with np.load(DIGITS) as f:
        mask = f["is_test"]
        return f["x"][mask], f["y"][mask]


@pytest.fixture(scope="module")
def trained(work):
    """(the checkpoint folder, the held-out accuracy ``flowc train`` printed last)."""
    from compiler.cli import main
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["train", MODEL, "--steps", str(STEPS), "--eval-every", str(STEPS),
                   "--checkpoint-dir", str(work / "ckpt"), "--threads", "1", "-q"])
    assert rc == 0
    m = LAST.match(out.getvalue().strip().splitlines()[-1])
    assert m and int(m[1]) == STEPS, out.getvalue()
    return str(work / "ckpt"), m[2]


def printed(accuracy: float) -> str:
    """An accuracy as ``flowc train`` prints it."""
    return f"{accuracy:.4g}"


def test_every_deployment_gives_the_accuracy_flowc_train_reported(capsys, work, trained,
                                                                  held_out):
    ckpt, reported = trained
    x, y = held_out
    assert float(reported) > 0.95
    np.savez(work / "test.npz", x=x)

    # the ONNX file, run by onnx's reference evaluator
    onnx = pytest.importorskip("onnx")
    from onnx.reference import ReferenceEvaluator
    rc, out, err = flowc(capsys, "export", MODEL, "--checkpoint", ckpt, "-o", work / "m.onnx")
    assert rc == 0, err
    proto = onnx.load(str(work / "m.onnx"))
    assert {n.op_type for n in proto.graph.node}.isdisjoint({"RandomUniform", "Where"})
    onnx_pred = ReferenceEvaluator(proto).run(["predictions"], {"x": x})[0]

    # the artifact, run by flowc run
    rc, out, err = flowc(capsys, "compile", MODEL, "--checkpoint", ckpt, "-o", work / "art")
    assert rc == 0 and "4 variable(s)" in out and "baked in as constants" in out, err
    rc, _, err = flowc(capsys, "run", work / "art", "--feeds", work / "test.npz",
                       "--fetch", "predictions", "--save", work / "pred.npy")
    assert rc == 0, err
    run_pred = np.load(work / "pred.npy")

    # the C library, through its C API
    rc, _, err = flowc(capsys, "compile", MODEL, "--emit", "c-library", "--checkpoint", ckpt,
                       "-o", work / "lib")
    assert rc == 0, err
    lib_pred = _library_predictions(work / "lib", "digits_mlp_dropout", x)

    np.testing.assert_array_equal(onnx_pred, run_pred)
    np.testing.assert_array_equal(lib_pred, run_pred)
    assert printed(float(np.mean(run_pred == y))) == reported


def _library_predictions(folder, name: str, x: np.ndarray) -> np.ndarray:
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("needs a C compiler")
    ffi = cffi.FFI()
    ffi.cdef(f"""
        typedef struct {name}_model {name}_model;
        {name}_model *{name}_create(void);
        void {name}_destroy({name}_model *m);
        int32_t {name}_output_index(const char *name);
        int {name}_set_input_by_name({name}_model *m, const char *name, const void *data,
                                     int32_t dtype, int32_t rank, const int64_t *dims);
        int {name}_run({name}_model *m);
        int {name}_get_output({name}_model *m, int32_t index, const void **data,
                              int32_t *dtype, int32_t *rank, const int64_t **dims);
        const char *{name}_last_error(const {name}_model *m);
    """)
    lib = ffi.dlopen(str(folder / f"lib{name}.so"))
    fn = lambda what: getattr(lib, f"{name}_{what}")  # noqa: E731
    m = ffi.gc(fn("create")(), fn("destroy"))
    x = np.ascontiguousarray(x, np.float32)
    dims = ffi.new("int64_t[]", list(x.shape))
    assert fn("set_input_by_name")(m, b"x", ffi.from_buffer(x), 1, 2, dims) == 0
    assert fn("run")(m) == 0, ffi.string(fn("last_error")(m))
    data, dtype = ffi.new("const void **"), ffi.new("int32_t *")
    rank, out_dims = ffi.new("int32_t *"), ffi.new("const int64_t **")
    assert fn("get_output")(m, fn("output_index")(b"predictions"), data, dtype, rank,
                            out_dims) == 0
    assert dtype[0] == 3 and rank[0] == 1 and out_dims[0][0] == len(x)
    return np.frombuffer(ffi.buffer(data[0], 4 * len(x)), np.int32).copy()


def test_graphdefs_frozen_and_initialized_predict_the_same(capsys, work, trained, held_out):
    pytest.importorskip("google.protobuf")
    ckpt, reported = trained
    x, y = held_out
    rc, out, err = flowc(capsys, "export", MODEL, "--checkpoint", ckpt, "-o", work / "f.pb")
    assert rc == 0 and "baked in as constants" in out, err
    frozen = read_graphdef(str(work / "f.pb"))
    ops = {n.name: n.op for n in frozen.node}
    assert "VarHandleOp" not in ops.values() and ops["hidden/weights1"] == "Const"
    assert ops["training"] == "PlaceholderWithDefault"        # still feedable, off by default
    assert not any(name.endswith("Initializer/RandomUniform") for name in ops)
    model = load_graphdef_model(str(work / "f.pb"))
    with fl.Session(graph=model.graph) as sess:
        pred = sess.run("predictions:0", {"x:0": x})
        assert printed(float(np.mean(pred == y))) == reported
        on = sess.run("predictions:0", {"x:0": x, "training:0": True})
        assert np.mean(on != pred) > 0                         # dropout drops when asked

    rc, out, err = flowc(capsys, "export", MODEL, "--checkpoint", ckpt, "--keep-variables",
                         "-o", work / "k.pbtxt")
    assert rc == 0 and "4 variable(s) initialized" in out, err
    model = load_graphdef_model(str(work / "k.pbtxt"))
    g = model.graph
    assert g.node("hidden/weights1").op == "VarHandleOp"
    assert g.node("hidden/weights1/Assign").inputs[1].node.op == "Const"
    assert not any(n.op == "RandomUniform" and n.name.startswith("hidden/weights1")
                   for n in g)
    inits = [n.name for n in g if n.op == "AssignVariableOp"]
    with fl.Session(graph=g) as sess:
        for name in inits:                                     # the init op
            sess.run(fl.Operation(g.node(name)))
        pred = sess.run("predictions:0", {"x:0": x})
    assert printed(float(np.mean(pred == y))) == reported


def test_a_checkpoint_of_another_model_is_one_error_naming_both(capsys, work, trained):
    prefix = str(work / "other" / "model.ckpt-1")
    os.makedirs(work / "other")
    write_checkpoint(prefix, {"hidden/weights1": np.zeros((64, 128), np.float32),
                              "hidden/bias1": np.zeros(128, np.float32),
                              "logits/weights2": np.zeros((128, 10), np.float32)})
    for args in (["compile", MODEL, "-o", work / "bad_art"],
                 ["compile", MODEL, "--emit", "c-library", "-o", work / "bad_lib"],
                 ["export", MODEL, "-o", work / "bad.onnx"],
                 ["export", MODEL, "-o", work / "bad.pb"]):
        rc, _, err = flowc(capsys, *args, "--checkpoint", prefix)
        assert rc == 1, args
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("flowc: error: checkpoint "), err
        assert prefix in err and MODEL in err
        assert "not in the checkpoint: 'logits/bias2'" in err
        assert "'hidden/weights1' is f32[64,128] in the checkpoint, f32[64,256] here" in err
    assert not (work / "bad_art").exists() and not (work / "bad.onnx").exists()


def test_other_checkpoint_errors(capsys, work, trained):
    ckpt, _ = trained
    os.makedirs(work / "empty", exist_ok=True)
    rc, _, err = flowc(capsys, "compile", MODEL, "--checkpoint", work / "empty", "-o",
                       work / "e_art")
    assert rc == 1 and f"no checkpoint in folder '{work / 'empty'}'" in err and MODEL in err
    rc, _, err = flowc(capsys, "compile", MODEL, "--step", "train", "--checkpoint", ckpt, "-o",
                       work / "t_art")
    assert rc == 1 and "in a graph that writes them" in err and "flowc run --checkpoint" in err
    assert "'hidden/weights1' by " in err, err
    rc, _, err = flowc(capsys, "export", MODEL, "--keep-variables", "-o", work / "k.onnx")
    assert rc == 1 and "give --checkpoint" in err
    rc, _, err = flowc(capsys, "export", MODEL, "--checkpoint", ckpt, "--keep-variables", "-o",
                       work / "k.onnx")
    assert rc == 1 and "ONNX has no variables" in err
    rc, _, err = flowc(capsys, "run", work / "art", "--checkpoint", work / "empty")
    assert rc == 1 and "no checkpoint in folder" in err


def test_flowc_run_takes_a_checkpoint_folder(capsys, work, trained, held_out):
    ckpt, reported = trained
    x, y = held_out
    rc, _, err = flowc(capsys, "compile", MODEL, "-o", work / "plain_art")
    assert rc == 0, err
    np.savez(work / "x.npz", x=x)
    rc, _, err = flowc(capsys, "run", work / "plain_art", "--checkpoint", ckpt, "--feeds",
                       work / "x.npz", "--fetch", "predictions", "--save", work / "p.npy")
    assert rc == 0, err
    assert printed(float(np.mean(np.load(work / "p.npy") == y))) == reported


# --- fl.graph_util.convert_variables_to_constants -----------------------------------------------
def _small_model():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 3], name="x")
        ids = fl.placeholder(fl.int32, [None], name="ids")
        w = fl.Variable(np.zeros((3, 2), np.float32), name="w")
        table = fl.Variable(np.zeros((5, 2), np.float32), name="table")
        y = fl.add(fl.matmul(x, w), table.sparse_read(ids), name="y")
        step = fl.Variable(0, name="step")
        bump = step.assign_add(1, name="bump")
        init = fl.global_variables_initializer()
    return g, x, ids, w, table, y, bump, init


def test_convert_variables_to_constants_freezes_what_the_outputs_need():
    g, x, ids, w, table, y, bump, init = _small_model()
    wv = np.arange(6, dtype=np.float32).reshape(3, 2)
    tv = np.arange(10, dtype=np.float32).reshape(5, 2) * 10
    feed = {x: np.ones((2, 3), np.float32), ids: np.array([4, 1], np.int32)}
    with fl.Session(graph=g) as sess:
        sess.run(init)
        w.load(wv, sess)
        table.load(tv, sess)
        expected = sess.run(y, feed)
        frozen = fl.graph_util.convert_variables_to_constants(sess, g, ["y"])
    assert isinstance(frozen, fl.Graph)
    ops = {n.name: n.op for n in frozen}
    assert ops["w"] == "Const" and ops["table"] == "Const" and "step" not in ops
    assert "VarHandleOp" not in ops.values() and "GatherV2" in ops.values()
    np.testing.assert_array_equal(frozen.node("w").attrs["value"], wv)
    with fl.Session(graph=frozen) as sess:
        got = sess.run("y:0", {"x:0": feed[x], "ids:0": feed[ids]})
    np.testing.assert_array_equal(got, expected)
    assert {n.op for n in g} >= {"VarHandleOp"}                # the input is unchanged


def test_convert_variables_to_constants_lists_and_graph_defs():
    pytest.importorskip("google.protobuf")
    from compiler.freeze import FreezeError
    from compiler.interop.graphdef import graph_to_graphdef
    g, x, ids, w, table, y, bump, init = _small_model()
    with fl.Session(graph=g) as sess:
        sess.run(init)
        kept = fl.graph_util.convert_variables_to_constants(
            sess, g, ["y"], variable_names_blacklist=["table"])
        assert {n.name: n.op for n in kept}["table"] == "VarHandleOp"
        only = fl.graph_util.convert_variables_to_constants(
            sess, g, ["y"], variable_names_whitelist=["table"])
        assert {n.name: n.op for n in only}["w"] == "VarHandleOp"
        gd = fl.graph_util.convert_variables_to_constants(sess, graph_to_graphdef(g), ["y"])
        assert type(gd).__name__ == "GraphDef"
        assert {n.name: n.op for n in gd.node}["w"] == "Const"
        with pytest.raises(FreezeError, match="'step' by bump"):
            fl.graph_util.convert_variables_to_constants(sess, g, ["bump"])
        with pytest.raises(ValueError, match="'nothing' is not in the graph"):
            fl.graph_util.convert_variables_to_constants(sess, g, ["nothing"])
    sub = fl.graph_util.extract_sub_graph(g, ["y"])
    assert "step" not in {n.name for n in sub} and "w" in {n.name for n in sub}
