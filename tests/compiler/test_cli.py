"""The ``flowc`` command line: compile, ir, opt and run, dumps, saving, and its error messages."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from compiler.cli import main
from cli_runner import flowc
from repo_paths import ROOT


MODEL = textwrap.dedent("""
    import dsl as fl

    def build():
        g = fl.Graph("small")
        with g.as_default():
            x = fl.placeholder(fl.f32, [None, 3], name="x")
            h = fl.nn.relu(x * 2.0 + 1.0, name="h")
            e = fl.exp(fl.negative(h), name="e")
            fl.exp(x, name="unused")
        return g, {"h": h, "decay": e}
""")

FAILING_MODEL = textwrap.dedent("""
    def helper():
        return {}["missing"]

    def build():
        return helper()
""")

IR = textwrap.dedent("""\
    graph @plain {
      %a   = Placeholder() {dtype=f32, shape=[2]} : f32[2]
      %two = Const() {dtype=f32, value=tensor<f32[]>[2.0]} : f32[]
      %b   = Mul(%a, %two) {T=f32} : f32[2]
      %c   = Relu(%b) {T=f32} : f32[2]
    }
""")


def expected(x):
    h = np.maximum(x * 2 + 1, 0).astype(np.float32)
    return h, np.exp(-h)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A model file, a feed file, and one artifact compiled from them with --dump-to."""
    d = tmp_path_factory.mktemp("cli")
    (d / "model.py").write_text(MODEL)
    x = np.array([[-2.0, 0.0, 1.5], [3.0, -0.25, 0.5]], dtype=np.float32)
    np.save(d / "x.npy", x)
    rc = main(["compile", str(d / "model.py"), "-o", str(d / "art"), "--dump-to", str(d / "dump")])
    assert rc == 0
    return d, x


def test_help_for_every_command(capsys):
    for cmd in ([], ["compile"], ["ir"], ["opt"], ["run"]):
        rc, out, _ = flowc(capsys, *cmd, "--help")
        assert rc == 0
        assert out.startswith("usage: flowc")
    rc, out, _ = flowc(capsys, "--help")
    for cmd in ("compile", "ir", "opt", "run"):
        assert cmd in out


def test_module_entry_point_runs_as_a_program():
    proc = subprocess.run([sys.executable, "-m", "compiler.cli", "opt", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--passes" in proc.stdout


def test_compile_writes_artifact_and_dump(work):
    d, _ = work
    assert sorted(os.listdir(d / "art")) == ["cpu_0.c", "cpu_0.so", "graph.ir", "manifest.json"]
    rows = (d / "dump" / "passes.tsv").read_text().splitlines()
    assert rows[0].split("\t")[:2] == ["index", "pass"]
    ran = [r.split("\t") for r in rows[1:]]
    assert ran, "no passes recorded"
    want = {"passes.tsv", "0000.input.ir"}
    want |= {f"{int(i):04d}.after_{name.replace('-', '_')}.ir" for i, name, *_ in ran}
    files = sorted(os.listdir(d / "dump"))
    assert {f.replace("-", "_") for f in files} == want      # one file per pass that ran
    last = (d / "dump" / files[-2]).read_text()
    assert "%unused" not in last and "_Retval" in last


def test_run_prints_every_fetch_by_name(work, capsys):
    d, x = work
    rc, out, err = flowc(capsys, "run", d / "art", "--feed", f"x={d / 'x.npy'}")
    assert rc == 0, err
    h, e = expected(x)
    assert out.startswith("h = array(")
    assert "\ndecay = array(" in out
    assert np.array_repr(h).splitlines()[0][len("array("):] in out


def test_run_saves_one_fetch_as_npy_and_several_as_npz(work, capsys, tmp_path):
    d, x = work
    h, e = expected(x)
    rc, _, err = flowc(capsys, "run", d / "art", "--feed", f"x={d / 'x.npy'}", "--fetch", "decay",
                       "--save", tmp_path / "decay.npy")
    assert rc == 0, err
    np.testing.assert_allclose(np.load(tmp_path / "decay.npy"), e, rtol=1e-6)
    rc, _, err = flowc(capsys, "run", d / "art", "--feed", f"x={d / 'x.npy'}",
                       "--save", tmp_path / "all.npz")
    assert rc == 0, err
    with np.load(tmp_path / "all.npz") as z:
        assert sorted(z.files) == ["decay", "h"]
        np.testing.assert_allclose(z["h"], h)
    rc, _, err = flowc(capsys, "run", d / "art", "--feed", f"x={d / 'x.npy'}",
                       "--save", tmp_path / "both.npy")
    assert rc == 1 and "need a .npz path" in err


def test_ir_prints_input_or_the_step_after_a_pass(work, capsys):
    d, _ = work
    rc, out, _ = flowc(capsys, "ir", d / "model.py")
    assert rc == 0
    assert out.startswith("graph @small {") and "%unused" in out and "_Retval" not in out
    rc, out, _ = flowc(capsys, "ir", d / "model.py", "--after", "prune")
    assert rc == 0
    assert "%unused" not in out and "_Retval(%h)" in out and "_Retval(%e)" in out
    rc, out, _ = flowc(capsys, "ir", d / "model.py", "--format", "dot")
    assert rc == 0 and out.startswith('digraph "small" {') and '"x" -> "Mul"' in out


def test_print_ir_after_goes_to_stderr(work, capsys):
    d, _ = work
    rc, out, err = flowc(capsys, "ir", d / "model.py", "--after", "infer-shapes",
                         "--print-ir-after", "prune", "--time-passes")
    assert rc == 0
    assert "IR after prune" in err and "flowc pass timing" in err
    assert "IR after" not in out


def test_opt_round_trips_and_runs_passes(work, capsys, tmp_path):
    d, _ = work
    text = (d / "art" / "graph.ir").read_text()
    rc, out, _ = flowc(capsys, "opt", d / "art" / "graph.ir")
    assert rc == 0 and out == text
    step = tmp_path / "step.ir"
    step.write_text(IR.replace("}\n", "  %r = _Retval(%b) {T=f32, index=0}\n}\n"))
    rc, out, _ = flowc(capsys, "opt", step, "--passes", "prune")
    assert rc == 0
    assert "%c " not in out and "%r" in out


def test_compile_ir_file_fetches_sinks_or_named_tensors(capsys, tmp_path):
    (tmp_path / "plain.ir").write_text(IR)
    np.save(tmp_path / "a.npy", np.array([-1.0, 2.0], dtype=np.float32))
    rc, out, err = flowc(capsys, "compile", tmp_path / "plain.ir", "-o", tmp_path / "art",
                         "--fetch", "c", "--fetch", "b")
    assert rc == 0, err
    assert "fetches: c f32[2], b f32[2]" in out
    rc, out, err = flowc(capsys, "run", tmp_path / "art", "--feed", f"a={tmp_path / 'a.npy'}",
                         "--fetch", "c")
    assert rc == 0, err
    assert out == "c = array([0., 4.], dtype=float32)\n"


def test_missing_model_file(capsys, tmp_path):
    rc, _, err = flowc(capsys, "compile", tmp_path / "nope.py", "-o", tmp_path / "out")
    assert rc == 1
    assert err == f"flowc: error: {tmp_path / 'nope.py'}: no such file\n"


def test_bad_ir_shows_location_and_caret(capsys, tmp_path):
    bad = tmp_path / "bad.ir"
    bad.write_text(IR.replace("Mul(%a, %two)", "Mul(%a, , %two)"))
    for cmd in (["opt", bad], ["ir", bad], ["compile", bad, "-o", tmp_path / "o"]):
        rc, _, err = flowc(capsys, *cmd)
        assert rc == 1
        first, source, caret = err.splitlines()[:3]
        assert first.startswith(f"flowc: error: {bad}:4:")
        assert "Mul(%a, , %two)" in source
        assert caret.strip() == "^"
        assert caret.index("^") == source.index(", ,") + 2     # under the second comma


def test_unknown_pass(capsys, tmp_path):
    (tmp_path / "plain.ir").write_text(IR)
    rc, _, err = flowc(capsys, "opt", tmp_path / "plain.ir", "--passes", "prune,no-such-pass")
    assert rc == 1
    assert "unknown pass 'no-such-pass'" in err and "prune" in err
    rc, _, err = flowc(capsys, "ir", tmp_path / "plain.ir", "--after", "no-such-pass")
    assert rc == 1 and "unknown pass 'no-such-pass'" in err
    rc, _, err = flowc(capsys, "opt", tmp_path / "plain.ir", "--disable-passes", "nope")
    assert rc == 1 and "unknown pass 'nope'" in err


def test_unknown_fetch(work, capsys, tmp_path):
    d, _ = work
    rc, _, err = flowc(capsys, "compile", d / "model.py", "-o", tmp_path / "o", "--fetch", "nope")
    assert rc == 1
    assert "unknown fetch 'nope'" in err and "h, decay" in err
    rc, _, err = flowc(capsys, "run", d / "art", "--feed", f"x={d / 'x.npy'}", "--fetch", "nope")
    assert rc == 1
    assert err == "flowc: error: unknown fetch 'nope'; this artifact fetches h, decay\n"


def test_run_feed_errors(work, capsys, tmp_path):
    d, _ = work
    rc, _, err = flowc(capsys, "run", d / "art")
    assert rc == 1 and "missing feed(s): x f32[?,3]" in err
    rc, _, err = flowc(capsys, "run", d / "art", "--feed", "x")
    assert rc == 1 and "NAME=FILE.npy" in err
    np.save(tmp_path / "wrong.npy", np.zeros((2, 4), np.float32))
    rc, _, err = flowc(capsys, "run", d / "art", "--feed", f"x={tmp_path / 'wrong.npy'}")
    assert rc == 1 and "shape [2, 4]" in err
    rc, _, err = flowc(capsys, "run", tmp_path / "no-artifact")
    assert rc == 1 and "no such artifact folder" in err


TWO_FEEDS_IR = textwrap.dedent("""\
    graph @two {
      %a = Placeholder() {dtype=f32, shape=[3]} : f32[3]
      %n = Placeholder() {dtype=i32, shape=[]} : i32[]
      %f = Cast(%n) {SrcT=i32, DstT=f32} : f32[]
      %y = Mul(%a, %f) {T=f32} : f32[3]
    }
""")


def test_run_takes_all_feeds_from_an_npz_by_name(capsys, tmp_path):
    (tmp_path / "two.ir").write_text(TWO_FEEDS_IR)
    rc, _, err = flowc(capsys, "compile", tmp_path / "two.ir", "-o", tmp_path / "art")
    assert rc == 0, err
    a = np.array([1.5, -2.0, 0.25], np.float32)
    np.savez(tmp_path / "both.npz", a=a, n=np.array(3, np.int32))
    rc, out, err = flowc(capsys, "run", tmp_path / "art", "--feeds", tmp_path / "both.npz",
                         "--save", tmp_path / "y.npy")
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), a * 3)
    # --feeds and --feed combine (several archives too); no name may come twice
    np.savez(tmp_path / "a.npz", a=a)
    np.savez(tmp_path / "n.npz", n=np.array(-2, np.int32))
    np.save(tmp_path / "n.npy", np.array(5, np.int32))
    rc, _, err = flowc(capsys, "run", tmp_path / "art", "--feeds", tmp_path / "a.npz",
                       "--feed", f"n={tmp_path / 'n.npy'}", "--save", tmp_path / "y5.npy")
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "y5.npy"), a * 5)
    rc, _, err = flowc(capsys, "run", tmp_path / "art", "--feeds", tmp_path / "a.npz",
                       "--feeds", tmp_path / "n.npz", "--save", tmp_path / "y-2.npy")
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "y-2.npy"), a * -2)
    rc, _, err = flowc(capsys, "run", tmp_path / "art", "--feeds", tmp_path / "both.npz",
                       "--feed", f"n={tmp_path / 'n.npy'}")
    assert rc == 1
    assert err == (f"flowc: error: --feed 'n' is given twice (--feeds {tmp_path / 'both.npz'} "
                   "and --feed)\n")
    rc, _, err = flowc(capsys, "run", tmp_path / "art", "--feeds", tmp_path / "both.npz",
                       "--feeds", tmp_path / "n.npz")
    assert rc == 1 and "feed 'n' is given twice" in err


def test_run_feeds_errors(capsys, tmp_path):
    (tmp_path / "two.ir").write_text(TWO_FEEDS_IR)
    assert flowc(capsys, "compile", tmp_path / "two.ir", "-o", tmp_path / "art")[0] == 0
    art = tmp_path / "art"
    np.savez(tmp_path / "a.npz", a=np.zeros(3, np.float32))
    rc, _, err = flowc(capsys, "run", art, "--feeds", tmp_path / "a.npz")
    assert rc == 1 and "missing feed(s): n i32[]" in err
    np.savez(tmp_path / "extra.npz", a=np.zeros(3, np.float32), n=np.array(1, np.int32),
             m=np.zeros(2))
    rc, _, err = flowc(capsys, "run", art, "--feeds", tmp_path / "extra.npz")
    assert rc == 1 and "unknown feed 'm'" in err
    rc, _, err = flowc(capsys, "run", art, "--feeds", tmp_path / "none.npz")
    assert rc == 1 and err == f"flowc: error: --feeds {tmp_path / 'none.npz'}: no such file\n"
    np.save(tmp_path / "one.npy", np.zeros(3, np.float32))
    rc, _, err = flowc(capsys, "run", art, "--feeds", tmp_path / "one.npy")
    assert rc == 1 and "holds one unnamed array (.npy)" in err and "--feed NAME=FILE.npy" in err
    good = (tmp_path / "a.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(good[:len(good) // 2])
    rc, _, err = flowc(capsys, "run", art, "--feeds", tmp_path / "cut.npz")
    assert rc == 1 and "is not a readable .npz file" in err
    np.savez(tmp_path / "objects.npz", a=np.array([{}], dtype=object))
    rc, _, err = flowc(capsys, "run", art, "--feeds", tmp_path / "objects.npz")
    assert rc == 1 and "is not a readable .npz file" in err
    rc, _, err = flowc(capsys, "run", art, "--feed", f"a={tmp_path / 'a.npz'}")
    assert rc == 1 and f"or pass --feeds {tmp_path / 'a.npz'}" in err


def test_python_model_errors_point_at_the_users_line(capsys, tmp_path):
    (tmp_path / "failing.py").write_text(FAILING_MODEL)
    rc, _, err = flowc(capsys, "ir", tmp_path / "failing.py")
    assert rc == 1
    assert err.startswith(f"flowc: error: {tmp_path / 'failing.py'}:3: build() raised KeyError")
    (tmp_path / "nobuild.py").write_text("x = 1\n")
    rc, _, err = flowc(capsys, "ir", tmp_path / "nobuild.py")
    assert rc == 1 and "defines no build() function" in err


def test_command_line_mistakes_exit_2(capsys):
    rc, _, err = flowc(capsys, "compile")
    assert rc == 2
    assert "flowc: error: the following arguments are required" in err
    rc, _, err = flowc(capsys, "frobnicate")
    assert rc == 2 and "flowc: error:" in err


def test_shipped_example_follows_the_build_convention(capsys):
    example = os.path.join(ROOT, "examples", "mlp_forward.py")
    rc, out, err = flowc(capsys, "ir", example, "--after", "infer-shapes")
    assert rc == 0, err
    assert "%x " in out and "Placeholder() {dtype=f32, shape=[?,784]}" in out
    assert out.count("= MatMul(") == 3 and "= Softmax(" in out and "= ArgMax(" in out
    assert "_Retval(%probs)" in out and "_Retval(%predictions)" in out


def test_compile_never_replaces_a_folder_that_is_not_an_artifact(work, capsys, tmp_path):
    d, _ = work
    keep = tmp_path / "precious"
    keep.mkdir()
    (keep / "notes.txt").write_text("keep me")
    rc, _, err = flowc(capsys, "compile", d / "model.py", "-o", keep)
    assert rc == 1 and "refusing to replace" in err
    assert (keep / "notes.txt").read_text() == "keep me"


def test_ir_can_elide_large_constants(capsys, tmp_path):
    model = tmp_path / "weights.py"
    model.write_text(
        "import numpy as np\n"
        "import dsl as fl\n"
        "def build():\n"
        "    g = fl.Graph()\n"
        "    with g.as_default():\n"
        "        x = fl.placeholder(fl.float32, [None, 64], name='x')\n"
        "        w = fl.constant(np.ones((64, 32), np.float32), name='w')\n"
        "        y = fl.matmul(x, w, name='y')\n"
        "    return g, [y]\n")
    rc, full, _ = flowc(capsys, "ir", model)
    assert rc == 0 and 'b64"' in full
    rc, short, _ = flowc(capsys, "ir", model, "--elide-constants")
    assert rc == 0 and 'b64"' not in short
    assert "tensor<f32[64,32]>{elided 8192 bytes, sha256 " in short
    elided = tmp_path / "elided.ir"
    elided.write_text(short)
    rc, _, err = flowc(capsys, "opt", elided)
    assert rc == 1 and "elided IR does not parse" in err


def test_run_repeat_runs_the_step_n_times_and_reports_the_time(capsys, work):
    d, x = work
    rc, out, err = flowc(capsys, "run", d / "art", "--feed", f"x={d / 'x.npy'}", "--repeat", 3,
                         "--save", d / "rep.npz")
    assert rc == 0, err
    assert re.search(r"^flowc: 3 runs: median [0-9.]+ (ms|us), fastest [0-9.]+ (ms|us) per run$",
                     err, re.M), err
    h, e = expected(x)
    with np.load(d / "rep.npz") as z:
        np.testing.assert_allclose(z["h"], h)
        np.testing.assert_allclose(z["decay"], e, rtol=1e-6)
    rc, out, err = flowc(capsys, "run", d / "art", "--feed", f"x={d / 'x.npy'}", "--repeat", 0)
    assert rc == 1 and "--repeat 0: the number of runs must be at least 1" in err
    rc, out, err = flowc(capsys, "run", d / "art", "--feed", f"x={d / 'x.npy'}", "--repeat", 2,
                         "--profile", 2)
    assert rc == 1 and "--repeat and --profile" in err
