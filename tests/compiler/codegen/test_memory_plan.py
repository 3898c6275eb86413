"""Memory planning: buffers of static size share one arena by liveness (plan-memory).

The planner's offsets never overlap for buffers live at the same time; compiled steps give the
interpreter's results with reuse on and off; the arena is kept in a per-module pool that
concurrent calls share safely; ``flowc compile --memory-report`` reports the arena's size.
"""
import concurrent.futures
import re
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsl as fl
from cli_runner import flowc
from compiler.passes.memory_plan import ALIGNMENT, LiveBuffer, aligned, plan_offsets
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize, write_artifact
from runtime.artifact import load_artifact

REUSE = PipelineOptions(disable=("fold-constants",))
NO_REUSE = PipelineOptions(disable=("fold-constants", "plan-memory"))


# --- the planner -------------------------------------------------------------------------------
def _overlap(a: LiveBuffer, b: LiveBuffer) -> bool:
    return a.start <= b.end and b.start <= a.end


intervals = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12), st.integers(0, 5000)),
                     min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(intervals)
def test_buffers_live_at_the_same_time_never_overlap(raw):
    buffers = [LiveBuffer(k, nbytes, start, start + length)
               for k, (start, length, nbytes) in enumerate(raw)]
    plan = plan_offsets(buffers)
    spans = {b.key: (plan.offsets[b.key], plan.offsets[b.key] + aligned(b.nbytes)) for b in buffers}
    for b in buffers:
        low, high = spans[b.key]
        assert low % ALIGNMENT == 0 and high <= plan.size
    for i, a in enumerate(buffers):
        for b in buffers[i + 1:]:
            if _overlap(a, b):
                (la, ha), (lb, hb) = spans[a.key], spans[b.key]
                assert ha <= lb or hb <= la, f"{a} and {b} are live together and overlap"
    # never worse than a slot each, never better than the busiest moment
    assert plan.size <= sum(aligned(b.nbytes) for b in buffers)
    busiest = max(sum(aligned(b.nbytes) for b in buffers if b.start <= t <= b.end)
                  for t in range(0, 53))
    assert plan.size >= busiest


def test_buffers_with_disjoint_lifetimes_share_memory():
    plan = plan_offsets([LiveBuffer("a", 1000, 0, 2), LiveBuffer("b", 1000, 3, 5),
                         LiveBuffer("c", 100, 1, 4)])
    assert plan.offsets["a"] == plan.offsets["b"]
    assert plan.size == aligned(1000) + aligned(100)


def test_best_fit_takes_the_smallest_gap():
    # at time 5, p1, p2 and p3 leave two holes: 512 bytes (where q was) and 128 (where r was)
    buffers = [LiveBuffer("p1", 1024, 0, 10), LiveBuffer("q", 512, 0, 1),
               LiveBuffer("p2", 256, 0, 10), LiveBuffer("r", 128, 0, 1),
               LiveBuffer("p3", 128, 0, 10), LiveBuffer("x", 100, 5, 6)]
    plan = plan_offsets(buffers)
    assert plan.offsets["x"] == plan.offsets["r"] != plan.offsets["q"]


# --- compiled steps ----------------------------------------------------------------------------
def compile_step(graph, feeds, fetches, options, folder, targets=()):
    """The loaded executable of a step, and its device's memory plan (None: not planned)."""
    step = make_step_graph(graph, [f.output for f in feeds], [f.output for f in fetches],
                           [t.node for t in targets])
    optimize(step, options)
    write_artifact(step, str(folder))
    (plan,) = step.memory_plans.values()
    return load_artifact(str(folder)).executable, plan


def random_graph(seed: int):
    """Elementwise ops, matmuls, reductions, transposes and reshapes over static shapes;
    returns (graph, feeds, fetches, feed values)."""
    rng = np.random.default_rng(seed)
    g = fl.Graph()
    with g.as_default():
        a = fl.placeholder(fl.float32, [8, 16], name="a")
        b = fl.placeholder(fl.float32, [16, 8], name="b")
        feeds = [a, b]
        values = {a: rng.uniform(-1, 1, (8, 16)).astype(np.float32),
                  b: rng.uniform(-1, 1, (16, 8)).astype(np.float32)}
        pool = [a, b]
        for _ in range(int(rng.integers(12, 22))):
            x = pool[int(rng.integers(len(pool)))]
            same = [t for t in pool if t.shape == x.shape]
            y = same[int(rng.integers(len(same)))]
            rows, cols = x.shape
            kind = int(rng.integers(9))
            if kind == 0:
                z = fl.tanh(x)
            elif kind == 1:
                z = fl.nn.relu(x) - y
            elif kind == 2:
                z = x * y + 0.5
            elif kind == 3:
                z = fl.maximum(x, fl.negative(y))
            elif kind == 4:
                z = x - fl.reduce_mean(x, axis=0, keepdims=True)
            elif kind == 5:
                z = fl.tanh(fl.matmul(x, fl.transpose(y)) * 0.25)       # [rows, rows]
            elif kind == 6:
                z = fl.transpose(x)
            elif kind == 7:
                z = fl.reshape(fl.sigmoid(x), [cols, rows])
            else:
                z = x + fl.reduce_sum(y, axis=1, keepdims=True) * 0.1
            pool.append(z)
        picks = rng.choice(len(pool) - 2, size=2, replace=False) + 2
        fetches = [pool[-1]] + [pool[int(k)] for k in picks]
    return g, feeds, fetches, values


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_random_graphs_give_the_interpreters_results_with_reuse_on_and_off(seed, tmp_path):
    g, feeds, fetches, values = random_graph(seed)
    with fl.Session(graph=g, backend="interpreter") as s:
        want = s.run(fetches, values)
    planned = []
    for k, options in enumerate((REUSE, NO_REUSE, PipelineOptions(
            disable=("fold-constants", "fuse")))):
        exe, plan = compile_step(g, feeds, fetches, options, tmp_path / f"m{k}")
        got = exe.run([values[f] for f in feeds])
        for i, (w, v) in enumerate(zip(want, got)):
            np.testing.assert_allclose(v, w, rtol=1e-4, atol=1e-5,
                                       err_msg=f"fetch {i}, options {k}")
        planned.append(plan)
    assert planned[1] is None                       # reuse off: no plan, every buffer its own
    for plan in (planned[0], planned[2]):
        assert plan is not None and plan.buffers
        assert plan.arena_size <= plan.total_bytes


def test_reuse_and_in_place_happen_in_random_graphs(tmp_path):
    shared = in_place = 0
    for seed in (3, 11, 29):
        g, feeds, fetches, _ = random_graph(seed)
        step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
        optimize(step, PipelineOptions(disable=("fold-constants", "fuse")))
        write_artifact(step, str(tmp_path / str(seed)))
        (plan,) = step.memory_plans.values()
        shared += plan.sharing_count()
        in_place += plan.in_place_count()
    assert shared > 0 and in_place > 0


def mlp_training_graph(batch: int):
    rng = np.random.default_rng(0)
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [batch, 64], name="x")
        labels = fl.placeholder(fl.int64, [batch], name="labels")
        h = x
        variables = []
        for i, (n_in, n_out) in enumerate(((64, 128), (128, 128), (128, 10))):
            w = fl.Variable(rng.uniform(-0.2, 0.2, (n_in, n_out)).astype(np.float32), name=f"w{i}")
            b = fl.Variable(np.zeros(n_out, np.float32), name=f"b{i}")
            variables += [w, b]
            h = fl.matmul(h, w) + b
            if i < 2:
                h = fl.nn.relu(h)
        loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                              logits=h))
        train = fl.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=variables)
        init = fl.global_variables_initializer()
    feed = {x: rng.uniform(0, 1, (batch, 64)).astype(np.float32),
            labels: rng.integers(0, 10, batch).astype(np.int64)}
    return g, x, labels, loss, train, init, feed


def test_mlp_training_step_reuses_memory_and_trains_like_the_interpreter(tmp_path):
    g, x, labels, loss, train, init, feed = mlp_training_graph(32)
    step = make_step_graph(g, [x.output, labels.output], [loss.output], [train.node])
    optimize(step, REUSE)
    write_artifact(step, str(tmp_path / "mlp"))
    (plan,) = step.memory_plans.values()
    assert plan.arena_size < plan.total_bytes
    assert plan.sharing_count() > 0 and plan.in_place_count() > 0
    losses = {}
    for backend, options in (("interpreter", None), ("c", REUSE), ("c", NO_REUSE)):
        with fl.Session(graph=g, backend=backend, options=options) as s:
            s.run(init)
            losses[backend, options] = [s.run([loss, train], feed)[0] for _ in range(4)]
    want = losses["interpreter", None]
    assert want[-1] < want[0]
    for key in (("c", REUSE), ("c", NO_REUSE)):
        np.testing.assert_allclose(losses[key], want, rtol=1e-5, err_msg=str(key))


def test_concurrent_calls_of_one_module_each_get_their_own_arena(tmp_path):
    g = fl.Graph()
    rng = np.random.default_rng(5)
    w_value = rng.uniform(-0.1, 0.1, (256, 256)).astype(np.float32)
    with g.as_default():
        x = fl.placeholder(fl.float32, [64, 256], name="x")
        w = fl.constant(w_value)
        h1 = fl.tanh(fl.matmul(x, w))
        h2 = fl.tanh(fl.matmul(h1, w)) * 2.0 - h1
        out = fl.reduce_sum(h2 * h2, axis=1)
    exe, plan = compile_step(g, [x], [out], REUSE, tmp_path / "m")
    assert plan is not None and plan.sharing_count() > 0

    def expected(v):
        a = np.tanh(v @ w_value)
        b = np.tanh(a @ w_value) * 2.0 - a
        return (b * b).sum(axis=1)

    inputs = [rng.uniform(-1, 1, (64, 256)).astype(np.float32) for _ in range(8)]
    wants = [expected(v.astype(np.float64)) for v in inputs]

    def worker(k):
        for _ in range(25):
            (got,) = exe.run([inputs[k]])
            np.testing.assert_allclose(got, wants[k], rtol=1e-4, atol=1e-4)
        return k

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert sorted(pool.map(worker, range(8))) == list(range(8))


def test_without_plan_memory_every_buffer_has_its_own_memory(tmp_path):
    g, feeds, fetches, values = random_graph(3)
    exe, plan = compile_step(g, feeds, fetches, NO_REUSE, tmp_path / "off")
    source = open(tmp_path / "off" / "cpu_0.c").read()
    assert plan is None and "flowc_arena_take" not in source
    exe, plan = compile_step(g, feeds, fetches, REUSE, tmp_path / "on")
    source = open(tmp_path / "on" / "cpu_0.c").read()
    assert "flowc_arena_take" in source


# --- the plan in the IR ------------------------------------------------------------------------
def test_the_pass_records_the_plan_the_emitter_uses(tmp_path):
    from compiler.ir.parser import parse_graph
    from compiler.ir.printer import print_graph
    from compiler.passes.memory_plan import (IN_PLACE_ATTR, OFFSETS_ATTR, SIZE_ATTR,
                                             module_roots, plan_fetches, plan_step_memory)
    g, feeds, fetches, _ = random_graph(11)
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step, PipelineOptions(disable=("fold-constants", "fuse")))
    order = list(step.graph)
    planned = [n for n in order if OFFSETS_ATTR in n.attrs]
    assert planned and [n for n in order if SIZE_ATTR in n.attrs] == planned[:1]
    assert any(IN_PLACE_ATTR in n.attrs for n in order)
    text = print_graph(step.graph)
    assert f"{OFFSETS_ATTR}=" in text and f"{SIZE_ATTR}=" in text
    assert print_graph(parse_graph(text)) == text           # the plan survives the text form
    # what the pass recorded is what planning the module gives, and what the C uses
    root, copies = module_roots(order)
    retvals = sorted((n for n in order if n.op == "_Retval"), key=lambda r: r.attrs["index"])
    want = plan_step_memory(order, root, plan_fetches(retvals, root, copies)[1])
    assert planned[0].attrs[SIZE_ATTR] == want.arena_size
    for n in planned:
        assert n.attrs[OFFSETS_ATTR] == [want.offsets.get(o, -1) for o in n.outputs]
    write_artifact(step, str(tmp_path / "a"))
    (plan,) = step.memory_plans.values()
    assert plan.offsets == want.offsets and plan.arena_size == want.arena_size
    assert [(b.output, b.start, b.end, b.in_place_of) for b in plan.buffers] == \
        [(b.output, b.start, b.end, b.in_place_of) for b in want.buffers]
    source = open(tmp_path / "a" / "cpu_0.c").read()
    assert f"#define FLOWC_ARENA_BYTES ((size_t){want.arena_size})" in source
    assert OFFSETS_ATTR not in source                       # the C comments leave the plan out
    # the emitter reads the recorded plan: a larger recorded arena shows in the C (emitted,
    # not built)
    from compiler.codegen.emitter import emit_c
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step, PipelineOptions(disable=("fold-constants", "fuse")))
    first = next(n for n in step.graph if SIZE_ATTR in n.attrs)
    first.attrs[SIZE_ATTR] += 4096
    source = emit_c(step.graph, step.feeds, step.retvals).source
    assert f"#define FLOWC_ARENA_BYTES ((size_t){want.arena_size + 4096})" in source


def test_a_stale_recorded_plan_is_rejected():
    from compiler.codegen.emitter import emit_c
    from compiler.errors import CompileError
    from compiler.passes.memory_plan import OFFSETS_ATTR
    g, feeds, fetches, _ = random_graph(3)
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step, REUSE)
    fed = next(n for n in step.graph if n.op == "Placeholder")   # never planned
    fed.attrs[OFFSETS_ATTR] = [0]
    with pytest.raises(CompileError, match="stale memory plan"):
        emit_c(step.graph, step.feeds, step.retvals)


def test_without_plan_memory_no_plan_is_recorded():
    from compiler.passes.memory_plan import PLAN_ATTRS
    g, feeds, fetches, _ = random_graph(3)
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step, NO_REUSE)
    assert not any(a in n.attrs for n in step.graph for a in PLAN_ATTRS)


# --- the report --------------------------------------------------------------------------------
STATIC_MODEL = textwrap.dedent("""
    import dsl as fl

    def build():
        g = fl.Graph("static_mlp")
        with g.as_default():
            x = fl.placeholder(fl.f32, [16, 32], name="x")
            w = fl.constant([[0.01 * ((i * 7 + j) % 13) for j in range(64)] for i in range(32)])
            h = fl.nn.relu(fl.matmul(x, w), name="h")
            y = fl.reduce_sum(fl.tanh(h) * h, axis=1, name="y")
        return g, {"y": y}
""")


def test_memory_report_peak_is_the_arena_size(tmp_path, capsys):
    model = tmp_path / "static_mlp.py"
    model.write_text(STATIC_MODEL)
    out_dir = tmp_path / "art"
    rc, out, err = flowc(capsys, "compile", model, "-o", out_dir, "--memory-report")
    assert rc == 0, err
    peak = int(re.search(r"peak bytes \(arena size\): (\d+)", out).group(1))
    source = open(out_dir / "cpu_0.c").read()
    arena = int(re.search(r"#define FLOWC_ARENA_BYTES \(\(size_t\)(\d+)\)", source).group(1))
    assert peak == arena > 0
    assert re.search(r"buffers: \d+ planned", out) and "sharing memory:" in out
    assert re.search(r"%h \(Relu\)\s+static_mlp\.py:\d+", out) or "(Fused)" in out
    rc, out, err = flowc(capsys, "compile", model, "-o", out_dir, "--memory-report",
                         "--disable-passes=plan-memory")
    assert rc == 0 and "memory planning is off" in out
