"""Kernel units are compiled once and cached by their text: another model with the same kernels
links their cached objects and compiles only its own glue; a kernel unit's text names no node,
and a model with one more kernel changes only the unit that kernel lands in. Cache keys name
the CPU ``-march=native`` builds for. A build that runs long shows a progress bar on a
terminal, and nothing elsewhere."""
import io
import os
import shutil
import stat

import numpy as np
import pytest

import dsl as fl
from compiler.codegen import build, unit_build
from compiler.codegen.build import build_shared_object, compiler_command
from compiler.codegen.emitter import emit_c
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter

pytestmark = pytest.mark.cpu_only      # CPU internals (conftest.py)


@pytest.fixture
def logged_cc(tmp_path, monkeypatch):
    """CC logs each command line and runs the real compiler; returns the file names of the
    units compiled so far: (glue units, kernel units)."""
    real = shutil.which(compiler_command())
    log = tmp_path / "cc.log"
    script = tmp_path / "logged-cc"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CC", str(script))
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FLOWC_CC_JOBS", "2")
    monkeypatch.setenv("FLOWC_CC_MIN_UNIT_COST", "0")     # small test modules split too

    def units():
        lines = log.read_text().splitlines() if log.exists() else []
        names = [os.path.basename(line.split(" -o ")[0].split()[-1])
                 for line in lines if " -c " in f" {line} "]
        return [n for n in names if ".unit" in n], [n for n in names if ".kernels" in n]
    return units


def _widening_net(seed: int, widths=range(4, 22), scope: str = "net"):
    """x [5, 3] through a matmul and a tanh per width (each a kernel of its own shapes), the
    weights constants drawn from ``seed``; (graph, fetches, feed)."""
    rng = np.random.default_rng(seed)
    g = fl.Graph()
    with g.as_default(), fl.name_scope(scope):
        x = fl.placeholder(fl.float32, [5, 3], name="x")
        h, width = x, 3
        for w in widths:
            weights = rng.uniform(-0.5, 0.5, (width, w)).astype(np.float32)
            h = fl.tanh(fl.matmul(h, fl.constant(weights)))
            width = w
        y = fl.reduce_sum(h, axis=1)
    return g, {"y": y}, {x: rng.uniform(-1, 1, (5, 3)).astype(np.float32)}


def test_another_model_with_the_same_kernels_compiles_only_its_glue(logged_cc):
    g, fetches, feed = _widening_net(1)
    check_against_interpreter(g, fetches, feed)
    glue, kernels = logged_cc()
    assert glue and len(kernels) >= 2
    # other weights, other node names: other glue, the same kernels
    g2, fetches2, feed2 = _widening_net(2, scope="other")
    check_against_interpreter(g2, fetches2, feed2)
    glue2, kernels2 = logged_cc()
    assert len(glue2) > len(glue)
    assert kernels2 == kernels                      # no kernel unit compiled again


def _emitted(widths):
    g, fetches, feed = _widening_net(1, widths)
    step = make_step_graph(g, [t.output for t in feed], [t.output for t in fetches.values()])
    optimize(step)
    return emit_c(step.graph, step.feeds, step.retvals)


def _layout(widths):
    return _emitted(widths).layout


def test_kernel_units_name_no_node_and_one_more_kernel_changes_one_unit():
    layout = _layout(range(4, 40))
    units = [layout.render_kernels(c) for c in layout.kernel_chunks()]
    assert len(units) >= 3
    for text in units:
        assert "/* %" not in text and "net/" not in text and "first used by" not in text
    # one more matmul and tanh at the end, and the sum then reads 41 columns: three kernels
    # that are new, and one that is gone (the sum of 39)
    grown = _layout(list(range(4, 40)) + [41])
    grown_units = [grown.render_kernels(c) for c in grown.kernel_chunks()]
    assert len(set(grown_units) - set(units)) <= 3  # the units the new kernels joined
    assert len(set(units) - set(grown_units)) <= 3
    assert len(set(units) & set(grown_units)) >= len(units) - 3


def test_cache_keys_name_the_target_cpu(tmp_path, monkeypatch):
    from compiler import step as step_module
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    source = "int flowc_answer(void) { return 42; }\n"
    first = build_shared_object(source)
    assert not first.cached and build_shared_object(source).cached
    g, fetches, feed = _widening_net(1, widths=[4])
    step = make_step_graph(g, [t.output for t in feed], [t.output for t in fetches.values()])
    optimize(step)
    step_module.toolchain_fingerprint.cache_clear()
    key = step_module.step_key(step)
    try:
        monkeypatch.setattr(build, "target_cpu", lambda: "vendor_id=Other;flags=sse2")
        monkeypatch.setattr(step_module, "target_cpu", build.target_cpu)
        other = build_shared_object(source)
        assert not other.cached and other.key != first.key
        step_module.toolchain_fingerprint.cache_clear()
        assert step_module.step_key(step) != key
    finally:
        step_module.toolchain_fingerprint.cache_clear()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_a_long_build_shows_a_progress_bar_on_a_terminal_only(logged_cc, monkeypatch, terminal):
    monkeypatch.setattr(unit_build, "PROGRESS_AFTER_S", 0.0)     # every build counts as long
    stream = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    emitted = _emitted(range(4, 12))
    layout = emitted.layout
    build_shared_object(emitted.source, sorted(emitted.features), layout=layout)
    text = stream.getvalue()
    if terminal:
        units = layout.unit_count(2, 0)
        assert "compiling module" in text and f"/{units}" in text
    else:
        assert text == ""
