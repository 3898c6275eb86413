"""A large module is compiled as several translation units at once (``FLOWC_CC_JOBS``) and
linked into one shared object: it computes what the one-unit build and the interpreter compute,
exports the same ABI and nothing more, keeps every unit's source when the compiler rejects one,
and a cache hit compiles nothing. Its kernel units are cached one by one: another module with
the same kernels compiles only its glue units.

The C compiler is run through a wrapper script that logs each command line and runs ``cc``, so
the tests see how many units were compiled.
"""
import ctypes
import os
import shutil
import stat

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.build import build_shared_object, compiler_command
from compiler.codegen.emitter import NODES_PER_PART, emit_c
from compiler.errors import BuildError
from compiler.step import make_step_graph, optimize

pytestmark = pytest.mark.cpu_only      # CPU internals (conftest.py)


@pytest.fixture
def logged_cc(tmp_path, monkeypatch):
    """CC is a script that appends its arguments to a log and runs the real compiler; returns
    a function giving the unit compiles (``-c``) and the links of units logged so far."""
    real = shutil.which(compiler_command())
    log = tmp_path / "cc.log"
    script = tmp_path / "logged-cc"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CC", str(script))
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path / "cache"))

    def commands():
        lines = log.read_text().splitlines() if log.exists() else []
        compiles = [line for line in lines if " -c " in f" {line} "]
        links = [line for line in lines if ".unit0.o " in line and line not in compiles]
        return compiles, links
    return commands


def _sources(compiles):
    """The file names of the compiled units: glue units (``module.unitK.c``) and kernel units
    (``module.kernelsK.c``)."""
    names = [os.path.basename(c.split(" -o ")[0].split()[-1]) for c in compiles]
    return ([n for n in names if ".unit" in n], [n for n in names if ".kernels" in n])


def _split_every_module(monkeypatch, jobs: int = 2) -> None:
    monkeypatch.setenv("FLOWC_CC_JOBS", str(jobs))
    monkeypatch.setenv("FLOWC_CC_MIN_UNIT_COST", "0")     # small test modules split too


def _long_training_graph():
    """A two-layer network trained by SGD, its hidden layer passed through a chain of enough
    ops for the step to need several part functions."""
    rng = np.random.default_rng(7)
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [6, 8], name="x")
        labels = fl.placeholder(fl.int64, [6], name="labels")
        w0 = fl.Variable(rng.uniform(-0.3, 0.3, (8, 12)).astype(np.float32), name="w0")
        b0 = fl.Variable(np.zeros(12, np.float32), name="b0")
        w1 = fl.Variable(rng.uniform(-0.3, 0.3, (12, 5)).astype(np.float32), name="w1")
        h = fl.tanh(fl.matmul(x, w0) + b0)
        mix = [fl.constant(np.eye(12, dtype=np.float32) + rng.uniform(-0.05, 0.05, (12, 12))
                           .astype(np.float32)) for _ in range(3)]
        for k in range(NODES_PER_PART // 4):        # matmuls: nothing for fusion to merge
            h = fl.tanh(fl.matmul(h, mix[k % 3]))
        logits = fl.matmul(h, w1)
        loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                              logits=logits))
        train = fl.train.GradientDescentOptimizer(0.2).minimize(loss)
        init = fl.global_variables_initializer()
    feed = {x: rng.uniform(-1, 1, (6, 8)).astype(np.float32),
            labels: rng.integers(0, 5, 6).astype(np.int64)}
    return g, x, labels, loss, train, init, w0, feed


def _train(g, backend, loss, train, init, w0, feed, steps=3):
    with fl.Session(graph=g, backend=backend) as s:
        s.run(init)
        losses = [s.run([loss, train], feed)[0] for _ in range(steps)]
        return np.array(losses), s.run(w0)


def test_a_step_of_several_parts_built_as_two_units_trains_like_one_unit_and_the_interpreter(
        logged_cc, monkeypatch, tmp_path):
    g, x, labels, loss, train, init, w0, feed = _long_training_graph()
    step = make_step_graph(g, [x.output, labels.output], [loss.output], [train.node])
    optimize(step)
    layout = emit_c(step.graph, step.feeds, step.retvals).layout
    assert len(layout.parts) >= 2                        # the step really has several parts

    want_losses, want_w0 = _train(g, "interpreter", loss, train, init, w0, feed)
    _split_every_module(monkeypatch)
    split_losses, split_w0 = _train(g, "c", loss, train, init, w0, feed)
    compiles, links = logged_cc()
    glue, kernels = _sources(compiles)
    assert len(links) >= 2                                 # init step and train step
    assert glue.count("module.unit0.c") == len(links) and "module.unit1.c" in glue
    assert set(glue) == {"module.unit0.c", "module.unit1.c"} and kernels
    assert all(" -c " not in line for line in links)

    monkeypatch.setenv("FLOWC_CC_JOBS", "1")
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path / "one-unit-cache"))
    one_losses, one_w0 = _train(g, "c", loss, train, init, w0, feed)
    assert len(logged_cc()[0]) == len(compiles)         # one unit: no separate compiles

    np.testing.assert_array_equal(split_losses, one_losses)
    np.testing.assert_array_equal(split_w0, one_w0)
    assert want_losses[-1] < want_losses[0]
    np.testing.assert_allclose(split_losses, want_losses, rtol=1e-5)
    np.testing.assert_allclose(split_w0, want_w0, rtol=1e-5, atol=1e-6)


def _loss_module():
    g, x, labels, loss, train, init, w0, feed = _long_training_graph()
    step = make_step_graph(g, [x.output, labels.output], [loss.output], [train.node])
    optimize(step)
    return emit_c(step.graph, step.feeds, step.retvals)


def test_a_split_module_exports_the_one_unit_abi_and_hides_its_kernels(logged_cc,
                                                                       monkeypatch):
    emitted = _loss_module()
    _split_every_module(monkeypatch, jobs=3)
    built = build_shared_object(emitted.source, sorted(emitted.features), blobs=emitted.blobs,
                                layout=emitted.layout)
    glue, kernels = _sources(logged_cc()[0])
    parts = len(emitted.layout.parts)                      # at most one glue unit per part
    assert len(glue) == min(3, parts) == emitted.layout.glue_count(3, 0)
    assert len(kernels) == len(emitted.layout.kernel_chunks()) >= 2
    lib = ctypes.CDLL(built.path)
    for exported in ("flowc_entry", "flowc_abi_version", "flowc_free", "flowc_use_pool",
                     "flowc_queue_create", "flowc_rendezvous_init"):
        assert hasattr(lib, exported), exported
    for hidden in ("flowc_part0", "flowc_part1", emitted.layout.kernels[0].name,
                   "flowc_pool_used"):
        assert not hasattr(lib, hidden), hidden


def test_a_unit_the_compiler_rejects_is_named_and_every_source_is_kept(logged_cc, monkeypatch):
    emitted = _loss_module()
    layout = emitted.layout
    broken = layout.kernels[-1]
    broken.body = broken.body.replace("return 0;", "return 0 +;", 1)
    _split_every_module(monkeypatch)
    with pytest.raises(BuildError) as e:
        build_shared_object(layout.joined(), sorted(emitted.features), blobs=emitted.blobs,
                            layout=layout)
    message = str(e.value)
    assert "rejected generated code (kernel unit" in message and "source kept at " in message
    kept = message.split("source kept at ")[1].split(";")[0]
    assert "return 0 +;" in open(kept).read()
    folder = os.path.dirname(kept)
    chunks = len(layout.kernel_chunks())
    assert sorted(os.listdir(folder)) == sorted(
        ["module.c", "module.unit0.c", "module.unit1.c"]
        + [f"module.kernels{k}.c" for k in range(chunks)])
    assert "return 0 +;" in open(os.path.join(folder, "module.c")).read()


def test_a_cache_hit_compiles_nothing(logged_cc, monkeypatch):
    g, x, labels, loss, train, init, w0, feed = _long_training_graph()
    _split_every_module(monkeypatch)
    first, _ = _train(g, "c", loss, train, init, w0, feed, steps=1)
    compiles, links = logged_cc()
    assert compiles and links
    again, _ = _train(g, "c", loss, train, init, w0, feed, steps=1)
    assert logged_cc() == (compiles, links)
    np.testing.assert_array_equal(again, first)


def test_a_profiled_split_module_counts_every_kernel(logged_cc, monkeypatch):
    """The profile counters are defined once and shared by the units' part functions."""
    g, x, labels, loss, train, init, w0, feed = _long_training_graph()
    _split_every_module(monkeypatch)
    with fl.Session(graph=g) as s:
        s.run(init)
        md = fl.RunMetadata()
        s.run([loss, train], feed, options=fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE),
              run_metadata=md)
    kernels = md.step_stats.kernels
    assert len(kernels) > NODES_PER_PART // 2
    assert all(k.calls == 1 for k in kernels)
    assert len(logged_cc()[0]) >= 2


def test_small_modules_stay_one_unit_and_one_job_means_one_unit(monkeypatch):
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None], name="x")
        y = x * 2.0 + 1.0
    step = make_step_graph(g, [x.output], [y.output])
    optimize(step)
    small = emit_c(step.graph, step.feeds, step.retvals).layout
    assert small.unit_count(8) == 1
    large = _loss_module().layout
    assert large.unit_count(1) == 1
    assert large.glue_count(2, min_unit_cost=0) == 2
    assert large.unit_count(2, min_unit_cost=0) == 2 + len(large.kernel_chunks())
    assert large.split(1) == [large.joined()]
