"""An artifact's ``graph.ir`` names the ``.bin`` blob that holds each big constant
(``tensor<f32[64,64]>file"c_....bin" sha256"..."``) instead of printing its bytes again: the IR
stays small, and reads back exactly from the file beside it, which must be a regular file of
the constant's size and SHA-256."""
import hashlib
import os
import re
import shutil

import numpy as np
import pytest

import dsl as fl
from compiler.cli import main
from compiler.errors import IRSyntaxError
from compiler.ir.attr_text import attrs_equal
from compiler.ir.parser import parse_graph
from compiler.step import make_step_graph, optimize, write_artifact

TABLE = np.random.RandomState(1).randn(64, 64).astype(np.float32)     # 16 KiB: a blob
TABLE[3, 5], TABLE[7, 1] = np.inf, -0.0


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    g = fl.Graph("files")
    with g.as_default():
        x = fl.placeholder(fl.f32, [2, 64], name="x")
        y = fl.matmul(x, fl.constant(TABLE, name="table"), name="y") + 1.0
    step = make_step_graph(g, [x.output], [y.output])
    optimize(step)
    path = str(tmp_path_factory.mktemp("files") / "art")
    write_artifact(step, path)
    return path, step


@pytest.fixture
def art(written, tmp_path):
    path = str(tmp_path / "art")
    shutil.copytree(written[0], path)
    return path


def _file_constant(ir_path):
    text = open(ir_path).read()
    m = re.search(r'file"([^"]+)" sha256"([0-9a-f]{64})"', text)
    assert m, text
    return text, m.group(1), m.group(2)


def test_the_ir_names_the_blob_and_reads_back_exactly(written):
    path, step = written
    ir = os.path.join(path, "graph.ir")
    text, blob, digest = _file_constant(ir)
    assert os.path.getsize(ir) < TABLE.nbytes       # (small constants stay inline)
    data = open(os.path.join(path, blob), "rb").read()
    assert hashlib.sha256(data).hexdigest() == digest and len(data) == TABLE.nbytes
    parsed = parse_graph(text, ir)
    for n in step.graph:
        got = parsed.get(n.name).attrs
        assert set(got) == set(n.attrs), n.name
        assert all(attrs_equal(got[k], v) for k, v in n.attrs.items()), n.name
    values = [n.attrs["value"] for n in parsed if n.op == "Const" and n.attrs["value"].size > 16]
    assert any(np.array_equal(v, TABLE) and np.signbit(v[7, 1]) for v in values)


def test_flowc_ir_prints_an_artifacts_ir(written, capsys):
    assert main(["ir", os.path.join(written[0], "graph.ir")]) == 0
    assert 'b64"' in capsys.readouterr().out          # printed whole: it parsed with its file


def _refused(art, match):
    ir = os.path.join(art, "graph.ir")
    with pytest.raises(IRSyntaxError, match=match):
        parse_graph(open(ir).read(), ir)


def test_a_modified_blob_is_refused(art):
    _, blob, _ = _file_constant(os.path.join(art, "graph.ir"))
    with open(os.path.join(art, blob), "r+b") as f:
        f.write(b"\xff")
    _refused(art, "does not have the SHA-256 the IR names")


def test_a_blob_of_another_size_is_refused(art):
    _, blob, _ = _file_constant(os.path.join(art, "graph.ir"))
    with open(os.path.join(art, blob), "ab") as f:
        f.write(b"\0\0\0\0")
    _refused(art, "holds more than 16384 bytes; f32\\[64,64\\] needs 16384")


def test_a_missing_blob_is_refused(art):
    _, blob, _ = _file_constant(os.path.join(art, "graph.ir"))
    os.remove(os.path.join(art, blob))
    _refused(art, "cannot open the constant's file")


def test_a_blob_that_is_a_link_is_refused(art, tmp_path):
    _, blob, _ = _file_constant(os.path.join(art, "graph.ir"))
    target = tmp_path / "elsewhere.bin"
    shutil.move(os.path.join(art, blob), target)
    os.symlink(target, os.path.join(art, blob))
    _refused(art, "cannot open the constant's file")


def test_a_file_constant_needs_a_file_to_be_beside(written):
    text, _, _ = _file_constant(os.path.join(written[0], "graph.ir"))
    with pytest.raises(IRSyntaxError, match="beside the IR file"):
        parse_graph(text)


@pytest.mark.parametrize("name", ["..", "."])
def test_a_file_constant_names_a_file(art, name):
    ir = os.path.join(art, "graph.ir")
    text, blob, _ = _file_constant(ir)
    with open(ir, "w") as f:
        f.write(text.replace(f'file"{blob}"', f'file"{name}"'))
    _refused(art, "is not a file name")


def test_a_path_is_not_a_file_name(art):
    ir = os.path.join(art, "graph.ir")
    text, blob, _ = _file_constant(ir)
    with open(ir, "w") as f:
        f.write(text.replace(f'file"{blob}"', 'file"../x.bin"'))
    with pytest.raises(IRSyntaxError, match="expected"):
        parse_graph(open(ir).read(), ir)
