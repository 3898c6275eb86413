"""The pass manager and its flags: verification after passes, IR printing, dumps, timing,
reproducers, the disable list, unknown names, FLOWC_FLAGS and the argparse helpers."""
import argparse
import io
import os
import subprocess
import sys

import pytest

from compiler.flags import add_pipeline_arguments, options_from_args, pipeline_flags_given
from compiler.options import ENV_VAR, FlagError, format_flags, parse_flags, resolve_options
from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph
from compiler.options import DEFAULT_PIPELINE, PipelineOptions
from compiler.passes.manager import (Pass, PassFailure, PassManager, UnknownPassError, known_passes,
                                     register_pass, unregister_pass)
from repo_paths import ROOT

STEP = """graph @step {
  %x   = Placeholder() {dtype=f32, shape=[?,3]} : f32[?,3]
  %c1  = Const() {dtype=f32, value=tensor<f32[]>[0.5]} : f32[]
  %c2  = Const() {dtype=f32, value=tensor<f32[]>[2.0]} : f32[]
  %one = Mul(%c1, %c2) {T=f32} : f32[]
  %a   = Exp(%x) {T=f32} : f32[?,3]
  %b   = Exp(%x) {T=f32} : f32[?,3]
  %m   = Mul(%b, %one) {T=f32} : f32[?,3]
  %s   = AddV2(%a, %m) {T=f32} : f32[?,3]
  %dead = Neg(%s) {T=f32} : f32[?,3]
  %r0  = _Retval(%s) {T=f32, index=0}
}
"""


def step():
    return parse_graph(STEP)


@pytest.fixture(autouse=True)
def no_env_flags(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


@pytest.fixture
def test_passes():
    """Passes that misbehave on purpose, registered only for the test that asks for them."""

    class BreakOrder(Pass):            # leaves users before their inputs
        def run(self, graph, ctx):
            graph._nodes.reverse()
            return True

    class Crash(Pass):                 # a bug in a pass
        def run(self, graph, ctx):
            raise KeyError("oops")

    class CrashAfterEdit(Pass):        # a bug after half a rewrite
        def run(self, graph, ctx):
            graph._nodes.reverse()
            raise ValueError("half done")

    names = {"test-break-order": BreakOrder, "test-crash": Crash, "test-crash-after-edit": CrashAfterEdit}
    for name, cls in names.items():
        register_pass(name)(cls)
    yield
    for name in names:
        unregister_pass(name)


def run(flags, graph=None, env=False):
    out = io.StringIO()
    pm = PassManager(parse_flags(flags) if isinstance(flags, str) else flags, out=out,
                     read_environment=env)
    g = pm.run(graph or step())
    return g, pm, out.getvalue()


# --- verification and failures -------------------------------------------------------------
def test_verifier_failure_names_the_pass(test_passes):
    with pytest.raises(PassFailure, match="verifier failed after pass 'test-break-order'") as e:
        run("--passes=prune,test-break-order,cse")
    assert e.value.pass_name == "test-break-order"
    assert "comes after its user" in str(e.value)


def test_no_verify_skips_the_verifier(test_passes):
    g, pm, _ = run("--passes=test-break-order --no-verify")
    assert [r.name for r in pm.records] == ["test-break-order"]
    assert g.nodes[0].op == "_Retval"


def test_invalid_input_is_reported_before_any_pass():
    g = step()
    g._nodes.reverse()
    with pytest.raises(PassFailure, match="before any pass"):
        run("--passes=cse", g)


def test_crash_names_the_pass_and_writes_a_reproducer(test_passes, tmp_path):
    d = str(tmp_path / "dump")
    with pytest.raises(PassFailure, match="pass 'test-crash' crashed: KeyError") as e:
        run(f"--passes=prune,fold-constants,test-crash,simplify --dump-to={d}")
    path = os.path.join(d, "reproducer.ir")
    assert any(path in note for note in e.value.__notes__)
    text = open(path).read()
    assert "// RUN: --passes=test-crash,simplify\n" in text
    assert "// full pipeline: prune,fold-constants,test-crash,simplify" in text
    # the IR in it is the IR before the failing pass: what fold-constants left
    before = open(os.path.join(d, "0002.after_fold-constants.ir")).read()
    assert print_graph(parse_graph(text)) == before
    assert text.endswith(before)
    rows = [r.split("\t") for r in open(os.path.join(d, "passes.tsv")).read().splitlines()]
    assert [(r[1], r[5]) for r in rows[1:]] == [("prune", "yes"), ("fold-constants", "yes"),
                                                 ("test-crash", "failed")]


def test_reproducer_holds_the_ir_before_a_pass_that_broke_it(test_passes, tmp_path):
    d = str(tmp_path)
    with pytest.raises(PassFailure, match="after pass 'test-break-order'"):
        run(f"--passes=cse,test-break-order --dump-to={d}")
    text = open(os.path.join(d, "reproducer.ir")).read()
    assert "// RUN: --passes=test-break-order\n" in text
    assert print_graph(parse_graph(text)) == open(os.path.join(d, "0001.after_cse.ir")).read()


def test_keep_going_continues_after_a_failed_pass(test_passes, tmp_path):
    g, pm, out = run(f"--passes=test-crash,cse --keep-going --dump-to={tmp_path}")
    assert "pass 'test-crash' failed, continuing (--keep-going)" in out
    assert [(r.name, r.status) for r in pm.records] == [("test-crash", "failed"), ("cse", "changed")]
    rows = open(tmp_path / "passes.tsv").read().splitlines()
    assert rows[1].split("\t")[-1] == "failed" and rows[2].split("\t")[-1] == "yes"
    assert sorted(os.listdir(tmp_path)) == ["0000.input.ir", "0001.after_test-crash.ir",
                                            "0002.after_cse.ir", "passes.tsv", "reproducer.ir"]


def test_keep_going_stops_when_the_failed_pass_broke_the_graph(test_passes):
    with pytest.raises(PassFailure, match="left an invalid graph"):
        run("--passes=test-crash-after-edit,cse --keep-going")


def test_pass_errors_keep_their_type():
    from compiler.errors import ShapeError
    bad = STEP.replace("%a   = Exp(%x) {T=f32} : f32[?,3]", "%a   = Exp(%x) {T=f32} : f32[?,4]")
    with pytest.raises(ShapeError, match="node 'a'"):
        run("--passes=infer-shapes", parse_graph(bad))


# --- instruments ---------------------------------------------------------------------------
def test_dump_folder_has_a_file_per_pass_and_a_table(tmp_path):
    d = tmp_path / "dump"
    g, pm, _ = run(f"--dump-to={d}")
    names = list(DEFAULT_PIPELINE)
    expected = ["0000.input.ir"] + [f"{i:04d}.after_{n}.ir" for i, n in enumerate(names, 1)] + ["passes.tsv"]
    assert sorted(os.listdir(d)) == sorted(expected)
    assert open(d / "0000.input.ir").read() == print_graph(step())
    assert open(d / f"{len(names):04d}.after_{names[-1]}.ir").read() == print_graph(g)
    rows = [r.split("\t") for r in open(d / "passes.tsv").read().splitlines()]
    assert rows[0] == ["index", "pass", "nodes_before", "nodes_after", "ms", "changed"]
    assert [r[1] for r in rows[1:]] == names
    for k, r in enumerate(rows[1:], 1):
        before = parse_graph(open(d / sorted(os.listdir(d))[k - 1]).read())
        after = parse_graph(open(d / f"{k:04d}.after_{r[1]}.ir").read())
        assert (int(r[2]), int(r[3])) == (len(before), len(after))
        assert float(r[4]) >= 0 and r[5] in ("yes", "no")
    assert rows[1][5] == "yes"          # prune removed %dead


def test_a_new_dump_replaces_the_old_one(tmp_path):
    run(f"--dump-to={tmp_path}")
    (tmp_path / "notes.txt").write_text("mine")
    run(f"--passes=cse --dump-to={tmp_path}")
    assert sorted(os.listdir(tmp_path)) == ["0000.input.ir", "0001.after_cse.ir", "notes.txt", "passes.tsv"]


def test_print_ir_after_chosen_passes():
    _, _, out = run("--print-ir-after=cse,prune")
    titles = [line for line in out.splitlines() if line.startswith("// -----")]
    assert titles == ["// ----- IR after prune -----", "// ----- IR after cse -----"]
    assert "graph @step {" in out


def test_print_ir_after_and_before_all():
    _, _, out = run("--passes=prune,infer-shapes --print-ir-after-all --print-ir-before-all")
    titles = [line for line in out.splitlines() if line.startswith("// -----")]
    assert titles == ["// ----- IR before prune -----", "// ----- IR after prune -----",
                      "// ----- IR before infer-shapes -----",
                      "// ----- IR after infer-shapes (no change) -----"]


def test_time_passes_prints_a_table():
    _, _, out = run("--passes=prune,cse --time-passes")
    lines = out.splitlines()
    assert any(line.rstrip().endswith("  prune") for line in lines)
    assert any(line.rstrip().endswith("  cse") for line in lines)
    assert lines[-1].rstrip().endswith("total")


# --- choosing passes -----------------------------------------------------------------------
def test_disable_list_removes_passes():
    g, pm, _ = run("--disable-passes=cse,simplify,fuse")
    assert [r.name for r in pm.records] == ["prune", "infer-shapes", "fold-constants", "layout",
                                            "fold-batch-norm", "place", "legalize-types",
                                            "fuse-updates", "fuse-accumulate", "fuse-conv",
                                            "fuse-matmul-bias", "partition", "plan-memory"]
    assert [n.op for n in g].count("Exp") == 2          # no cse


def test_unknown_pass_is_an_error_listing_the_known_ones():
    for flags in ("--passes=prune,cse-all", "--disable-passes=cse-all", "--print-ir-after=cse-all"):
        with pytest.raises(UnknownPassError, match="unknown pass 'cse-all'") as e:
            run(flags)
        assert "did you mean 'cse'?" in str(e.value)
        assert all(name in str(e.value) for name in known_passes())
    with pytest.raises(UnknownPassError, match="unknown pass 'nope'"):
        PassManager(PipelineOptions(passes=("nope",)), read_environment=False).run(step())


def test_unknown_flag_and_bad_values_are_errors():
    with pytest.raises(FlagError, match=r"unknown flag '--pases'.*did you mean '--passes'.*--dump-to"):
        parse_flags("--pases=cse")
    with pytest.raises(FlagError, match="needs a value"):
        parse_flags("--dump-to")
    with pytest.raises(FlagError, match="needs an integer"):
        parse_flags("--fold-max-elements=many")
    with pytest.raises(FlagError, match="starting with '--'"):
        parse_flags("cse")


def test_flag_forms():
    opts = parse_flags(["--passes", "prune,cse", "--print-ir-after=cse", "--print-ir-after=prune",
                        "--time-passes", "--keep-going=false", "--no-verify", "--fold-max-elements=10",
                        "--dump-to", "out dir"])
    assert opts == PipelineOptions(passes=("prune", "cse"), print_ir_after=("cse", "prune"),
                                   time_passes=True, keep_going=False, verify_each=False,
                                   fold_max_elements=10, dump_to="out dir")
    assert parse_flags(format_flags(opts)) == opts
    assert parse_flags("--passes=") == PipelineOptions(passes=())


# --- FLOWC_FLAGS ---------------------------------------------------------------------------
def test_env_flags_apply_when_a_pipeline_starts(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "--disable-passes=cse --print-ir-after=simplify")
    g, pm, out = run(PipelineOptions(), env=True)
    assert [r.name for r in pm.records] == ["prune", "infer-shapes", "fold-constants", "simplify",
                                            "layout", "fold-batch-norm", "place",
                                            "legalize-types", "fuse-updates",
                                            "fuse-accumulate", "fuse-conv", "fuse-matmul-bias",
                                            "fuse", "partition", "plan-memory"]
    assert "// ----- IR after simplify -----" in out


def test_explicit_options_win_over_env(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "--passes=cse --time-passes")
    _, pm, out = run(PipelineOptions(passes=("prune",)), env=True)
    assert [r.name for r in pm.records] == ["prune"]
    assert "flowc pass timing" in out                     # not overridden: still from the env
    assert resolve_options(PipelineOptions(dump_to="d"), {ENV_VAR: "--dump-to=e --keep-going"}) == \
        PipelineOptions(dump_to="d", keep_going=True)


def test_env_is_read_at_run_time_not_import_time(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "--no-such-flag")
    root = ROOT
    imported = subprocess.run([sys.executable, "-c", "import compiler.flags, compiler.step, dsl"],
                              cwd=root, capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    pm = PassManager(PipelineOptions(passes=("cse",)), out=io.StringIO())
    with pytest.raises(FlagError, match=f"unknown flag '--no-such-flag' \\(in {ENV_VAR}\\)"):
        pm.run(step())
    monkeypatch.setenv(ENV_VAR, "--passes=prune")
    pm.run(step())
    assert [r.name for r in pm.records] == ["cse"]          # explicit passes win


def test_env_is_ignored_when_asked(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "--no-such-flag")
    _, pm, _ = run("--passes=cse")
    assert [r.name for r in pm.records] == ["cse"]


# --- argparse helpers for the CLI ------------------------------------------------------------
def test_argparse_helpers_share_the_flags():
    parser = argparse.ArgumentParser(prog="flowc opt")
    parser.add_argument("input")
    add_pipeline_arguments(parser)
    args = parser.parse_args(["g.ir", "--passes", "prune,cse", "--passes=simplify", "--dump-to", "d",
                              "--print-ir-after-all", "--no-verify", "--disable-passes=cse"])
    assert args.input == "g.ir"
    assert options_from_args(args) == PipelineOptions(
        passes=("prune", "cse", "simplify"), dump_to="d", print_ir_after_all=True,
        verify_each=False, disable=("cse",))
    assert options_from_args(parser.parse_args(["g.ir"])) == PipelineOptions()
    with pytest.raises(UnknownPassError, match="unknown pass 'bogus'"):
        options_from_args(parser.parse_args(["g.ir", "--passes=bogus"]))
    help_text = parser.format_help()
    assert "--print-ir-after-all" in help_text and ENV_VAR in help_text
    assert pipeline_flags_given(parser.parse_args(["g.ir", "--time-passes"]))
    assert not pipeline_flags_given(parser.parse_args(["g.ir"]))


def test_argparse_helpers_without_passes():
    parser = argparse.ArgumentParser(prog="flowc ir")
    parser.add_argument("--passes", help="the command's own")
    add_pipeline_arguments(parser, include_passes=False)
    args = parser.parse_args(["--passes=x", "--dump-to=d"])
    assert options_from_args(args) == PipelineOptions(dump_to="d")
