"""SavedModel folders through the command line (compiler/interop/saved_model.py): SavedModels
TensorFlow wrote (tests/data/saved_models/, by make_saved_models.py, with TensorFlow's outputs)
compile with ``flowc compile DIR --signature NAME [--tag TAG]``, and ``flowc run`` on the
artifact, fed by the signature's input keys, gives TensorFlow's outputs under the signature's
output keys. No TensorFlow is needed."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

pytest.importorskip("google.protobuf")

from cli_runner import flowc  # noqa: E402
from compiler.model_loader import ModelError, load_model  # noqa: E402
from compiler.interop.saved_model import SavedModelError  # noqa: E402
from repo_paths import ROOT  # noqa: E402

DATA = os.path.join("tests", "data", "saved_models")      # from ROOT: errors name it so

# (model folder, signature, tag or None): every signature TensorFlow ran
CASES = [
    ("keras_saved", "serving_default", None),       # tf.saved_model.save(keras_model)
    ("keras_export", "serve", None),                # Keras 3 model.export: Embedding, LSTM
    ("keras_export", "serving_default", None),
    ("tf_module", "serving_default", None),         # tf.Module: While and If read variables
    ("tf_module", "combine", None),
    ("tf1_builder", "serving_default", "serve"),    # TF1 reference and resource variables
    ("tf1_builder", "hidden", None),
    ("tf1_builder", "evaluate", "eval"),            # the second MetaGraphDef
    ("tf1_simple_save", "serving_default", None),
]


@pytest.fixture
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def _reference(name: str, signature: str):
    with np.load(os.path.join(ROOT, DATA, name + ".npz")) as z:
        feeds = {k.split(":", 2)[2]: z[k] for k in z.files if k.startswith(f"in:{signature}:")}
        outs = {k.split(":", 2)[2]: z[k] for k in z.files if k.startswith(f"out:{signature}:")}
    return feeds, outs


def _compile_and_run(capsys, tmp_path, model, feeds, *options):
    artifact = tmp_path / "artifact"
    rc, out, err = flowc(capsys, "compile", model, "-o", artifact, *options)
    assert rc == 0, err
    np.savez(tmp_path / "feeds.npz", **feeds)
    rc, _, err = flowc(capsys, "run", artifact, "--feeds", tmp_path / "feeds.npz",
                       "--save", tmp_path / "got.npz")
    assert rc == 0, err
    with np.load(tmp_path / "got.npz") as got:
        return out, {k: got[k] for k in got.files}


@pytest.mark.parametrize("name,signature,tag", CASES,
                         ids=[f"{n}-{s}" for n, s, _ in CASES])
def test_signature_compiles_and_runs_as_tensorflow(name, signature, tag, capsys, tmp_path,
                                                   at_root):
    feeds, want = _reference(name, signature)
    options = ["--signature", signature] + (["--tag", tag] if tag else [])
    out, got = _compile_and_run(capsys, tmp_path, os.path.join(DATA, name), feeds, *options)
    assert sorted(got) == sorted(want)
    for key in feeds:
        assert f"{key} " in out.splitlines()[1], out          # feeds named by input keys
    for key, value in want.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
        np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-6, err_msg=key)


def test_defaults_serve_and_serving_default(capsys, tmp_path, at_root):
    """No --signature: serving_default; no --tag with two MetaGraphDefs: the 'serve' one; the
    file saved_model.pb itself names the folder too."""
    feeds, want = _reference("tf1_builder", "serving_default")
    _, got = _compile_and_run(capsys, tmp_path, os.path.join(DATA, "tf1_builder",
                                                             "saved_model.pb"), feeds)
    np.testing.assert_allclose(got["probs"], want["probs"], rtol=1e-5, atol=1e-6)


def test_check_lists_the_signature(capsys, at_root):
    rc, out, err = flowc(capsys, "check", os.path.join(DATA, "tf_module"), "--signature",
                         "combine")
    assert rc == 0, err
    assert "inputs:  a f32[?,4], b f32[?,4]" in out
    assert "outputs: diff f32[?,4], sum f32[?,4]" in out


def test_fetch_and_feed_by_signature_keys(capsys, tmp_path, at_root):
    feeds, want = _reference("tf_module", "combine")
    _, got = _compile_and_run(capsys, tmp_path, os.path.join(DATA, "tf_module"), feeds,
                              "--signature", "combine", "--fetch", "sum", "--feed", "a",
                              "--feed", "b")
    assert list(got) == ["sum"]
    np.testing.assert_allclose(got["sum"], want["sum"], rtol=1e-5, atol=1e-6)


def test_variables_are_constants(at_root):
    """Every variable the signature reads is a constant: no handle, read or variable op is
    left in the graph (the weights fold into the compiled code)."""
    for name, signature, tag in CASES:
        model = load_model(os.path.join(DATA, name), signature, [tag] if tag else None)
        ops = {n.op for n in model.graph}
        assert not ops & {"VarHandleOp", "ReadVariableOp", "VariableV2", "ResourceGather"}, name
    model = load_model(os.path.join(DATA, "keras_export"), "serve")
    assert "GatherV2" in {n.op for n in model.graph}        # the Embedding's ResourceGather


# --- errors: one `flowc: error:` naming the file --------------------------------------------------
def _error(capsys, *args) -> str:
    rc, _, err = flowc(capsys, *args)
    assert rc == 1, err
    lines = err.splitlines()
    assert lines[0].startswith("flowc: error: ") and \
        sum(ln.startswith("flowc: error:") for ln in lines) == 1, err
    return err


def test_unknown_signature_lists_the_signatures(capsys, tmp_path, at_root):
    err = _error(capsys, "compile", os.path.join(DATA, "tf_module"), "--signature", "nope",
                 "-o", tmp_path / "a")
    assert f"{DATA}/tf_module/saved_model.pb: no signature 'nope'" in err
    assert "it has: bump, combine, serving_default" in err


def test_unknown_tag_set_lists_the_tag_sets(capsys, tmp_path, at_root):
    err = _error(capsys, "check", os.path.join(DATA, "tf1_builder"), "--tag", "serve,gpu")
    assert "no MetaGraphDef with the tag set 'gpu,serve'; the SavedModel has: serve; eval" in err


def test_signature_of_the_other_meta_graph_needs_its_tag(capsys, at_root):
    err = _error(capsys, "check", os.path.join(DATA, "tf1_builder"), "--signature", "evaluate")
    assert "no signature 'evaluate' in the MetaGraphDef tagged 'serve'" in err


def test_signature_that_assigns_a_variable_is_refused(capsys, at_root):
    err = _error(capsys, "check", os.path.join(DATA, "tf_module"), "--signature", "bump")
    assert "(AssignAddVariableOp) changes variable 'offset'" in err
    assert f"{DATA}/tf_module/saved_model.pb" in err


def test_signature_option_on_other_models(capsys, at_root, tmp_path):
    path = tmp_path / "m.ir"
    path.write_text("graph @g {\n  %x = Placeholder() {dtype = f32, shape = [2]}\n}\n")
    err = _error(capsys, "check", path, "--signature", "serving_default")
    assert "--signature applies to TensorFlow SavedModel folders" in err
    err = _error(capsys, "check", tmp_path)
    assert "is a directory, and not a SavedModel (no saved_model.pb in it)" in err


def _copy_model(tmp_path, name):
    folder = tmp_path / name
    shutil.copytree(os.path.join(ROOT, DATA, name), folder)
    return folder


def test_missing_or_damaged_variables_name_the_file(capsys, tmp_path):
    folder = _copy_model(tmp_path, "keras_saved")
    data = folder / "variables" / "variables.data-00000-of-00001"
    raw = bytearray(data.read_bytes())
    raw[100] ^= 0xFF
    data.write_bytes(bytes(raw))
    err = _error(capsys, "check", folder)
    assert f"{data}: checksum mismatch for '" in err
    shutil.rmtree(folder / "variables")
    err = _error(capsys, "check", folder)
    assert f"{folder / 'variables' / 'variables.index'}: no such file" in err


def test_damaged_saved_model_pb(capsys, tmp_path):
    folder = _copy_model(tmp_path, "tf1_simple_save")
    pb = folder / "saved_model.pb"
    pb.write_bytes(pb.read_bytes()[:-100])
    err = _error(capsys, "check", folder)
    assert f"{pb}: not a SavedModel" in err


def test_api_errors_are_flowc_errors(at_root):
    with pytest.raises(SavedModelError, match="choose a signature|no signature"):
        load_model(os.path.join(DATA, "tf_module"), "missing")
    with pytest.raises(ModelError, match="--tag applies to TensorFlow SavedModel"):
        load_model(os.path.join(DATA, "make_saved_models.py"), tags=["serve"])


# --- pieces ---------------------------------------------------------------------------------------
def test_stripped_default_attrs_come_back_from_the_files_op_definitions():
    """An attr flowc's op declares comes back at TensorFlow's default (flowc's own default
    could differ); one it lacks stays out (it holds TensorFlow's default, which flowc's op
    computes); an op flowc lowers away (While) gets every default, which the lowering reads."""
    from compiler.interop.protos import tf_protos
    from compiler.interop.saved_model import restore_default_attrs
    pb = tf_protos()
    mg = pb.MetaGraphDef()
    mg.meta_info_def.stripped_default_attrs = True
    matmul = mg.meta_info_def.stripped_op_list.op.add(name="MatMul")
    for name in ("transpose_a", "grad_a"):
        matmul.attr.add(name=name, type="bool").default_value.b = False
    loop = mg.meta_info_def.stripped_op_list.op.add(name="While")
    loop.attr.add(name="parallel_iterations", type="int").default_value.i = 10
    mg.graph_def.node.add(name="mm", op="MatMul")
    mg.graph_def.library.function.add().node_def.add(name="w", op="While")
    restore_default_attrs(mg)
    assert set(mg.graph_def.node[0].attr) == {"transpose_a"}
    assert mg.graph_def.library.function[0].node_def[0].attr["parallel_iterations"].i == 10
    mg.meta_info_def.stripped_default_attrs = False          # nothing stripped: nothing added
    mg.graph_def.node[0].ClearField("attr")
    restore_default_attrs(mg)
    assert not mg.graph_def.node[0].attr


def test_text_saved_model(capsys, tmp_path):
    """saved_model.pbtxt (SavedModelBuilder.save(as_text=True)) loads as the binary one."""
    from google.protobuf import text_format
    from compiler.interop.saved_model import read_saved_model
    folder = _copy_model(tmp_path, "tf1_simple_save")
    sm, _ = read_saved_model(str(folder))
    (folder / "saved_model.pb").unlink()
    (folder / "saved_model.pbtxt").write_text(text_format.MessageToString(sm))
    feeds, want = _reference("tf1_simple_save", "serving_default")
    _, got = _compile_and_run(capsys, tmp_path, folder, feeds)
    np.testing.assert_allclose(got["probs"], want["probs"], rtol=1e-5, atol=1e-6)
