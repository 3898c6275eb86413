"""Forward convolutions on oneDNN (conv_onednn.c.j2, chosen by c_ops/conv_engine.py) where it
is installed: the generated code calls it for the shapes the choice gives it, and its results
equal the interpreter's (the oracle) for strides 1 and 2, dilation, SAME, VALID and explicit
padding, windows wider than the input, a fused bias and ReLU, constant filters (reordered
once) and fed filters (reordered on each run, a new filter each time), several runs and
concurrent runs; FLOWC_CONV_ENGINE=blas keeps flowc's kernels; tiny shapes stay on flowc's
kernels under auto; the choice is part of the cache key."""
import json
import os
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import dsl as fl
from compiler.codegen import onednn
from compiler.codegen.c_ops import conv_engine
from compiler.codegen.emitter import emit_c
from compiler.errors import CompileError
from compiler.step import make_step_graph, optimize, toolchain_fingerprint
from oracle import NO_FOLDING, check_against_interpreter
from repo_paths import ROOT

pytestmark = pytest.mark.skipif(not onednn.available(),
                                reason="oneDNN is not installed (the onednn-cpu-gomp wheels, "
                                "or FLOWC_ONEDNN_ROOT)")
TOL = dict(rtol=1e-4, atol=1e-4)

# (input shape, filter shape, strides, padding, dilations, bias and relu)
CASES = [
    ((2, 12, 12, 16), (3, 3, 16, 32), 1, "SAME", 1, True),
    ((1, 13, 11, 8), (3, 3, 8, 16), 2, "VALID", 1, False),
    ((2, 24, 24, 3), (7, 7, 3, 64), 2, "SAME", 1, True),
    ((1, 10, 9, 8), (3, 3, 8, 12), 1, "SAME", 2, True),
    ((3, 8, 8, 32), (1, 1, 32, 48), 2, "SAME", 1, False),
    ((1, 4, 3, 16), (5, 5, 16, 8), 1, "SAME", 1, True),       # the window is wider than the input
    ((2, 9, 10, 4), (3, 2, 4, 20), (2, 1), [[0, 0], [2, 1], [0, 3], [0, 0]], 1, False),
]


def _graph(rng, constant_filters: bool):
    fetches, feed, feeds = {}, {}, []
    for i, (xs, fs, stride, padding, dilation, fused) in enumerate(CASES):
        x = fl.placeholder(fl.float32, xs, name=f"x{i}")
        fv = rng.standard_normal(fs).astype(np.float32)
        if constant_filters:
            f = fl.constant(fv)
        else:
            f = fl.placeholder(fl.float32, fs, name=f"f{i}")
            feed[f] = fv
            feeds.append(f)
        y = fl.nn.conv2d(x, f, stride, padding, dilations=dilation)
        if fused:
            y = fl.nn.relu(fl.nn.bias_add(y, fl.constant(rng.standard_normal(fs[3]).astype(
                np.float32))))
        fetches[f"case{i}"] = y
        feed[x] = rng.standard_normal(xs).astype(np.float32)
        feeds.append(x)
    return fetches, feed, feeds


def _source(graph, fetches, feeds) -> str:
    step = make_step_graph(graph, [f.output for f in feeds],
                           [t.output for t in fetches.values()])
    optimize(step, NO_FOLDING)
    return emit_c(step.graph, step.feeds, step.retvals).source


@pytest.mark.cpu_only
@pytest.mark.parametrize("constant_filters", [True, False], ids=["constant", "fed"])
def test_convolutions_run_on_onednn_and_match_the_interpreter(graph, rng, monkeypatch,
                                                              constant_filters):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "onednn")
    fetches, feed, feeds = _graph(rng, constant_filters)
    source = _source(graph, fetches, feeds)
    constant = re.findall(r"= flowc_dnnl_conv_f32\(&\w+, [^,]+, [^,]+, ([01]), ", source)
    assert constant == ["1" if constant_filters else "0"] * len(CASES)
    check_against_interpreter(graph, fetches, feed, **TOL)
    with fl.Session(graph=graph) as sess:             # later runs, new inputs (and filters)
        for _ in range(3):
            for t in list(feed):
                feed[t] = rng.standard_normal(feed[t].shape).astype(np.float32)
            got = sess.run(fetches, feed)
            with fl.Session(graph=graph, backend="interpreter") as ref:
                want = ref.run(fetches, feed)
            for k in fetches:
                np.testing.assert_allclose(got[k], want[k], err_msg=k, **TOL)


# DepthwiseConv2dNative: (input shape, filter shape KHxKWxCxM, strides, padding, dilations)
DEPTHWISE = [
    ((2, 12, 12, 32), (3, 3, 32, 1), 1, "SAME", 1),
    ((1, 15, 13, 24), (3, 3, 24, 2), 2, "VALID", 1),
    ((1, 10, 10, 16), (5, 5, 16, 1), 1, "SAME", 2),
    ((3, 9, 8, 48), (3, 3, 48, 1), 2, "SAME", 1),
]


@pytest.mark.cpu_only
@pytest.mark.parametrize("constant_filters", [True, False], ids=["constant", "fed"])
def test_depthwise_convolutions_run_on_onednn_and_match_the_interpreter(graph, rng, monkeypatch,
                                                                        constant_filters):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "onednn")
    fetches, feed, feeds = {}, {}, []
    for i, (xs, fs, stride, padding, dilation) in enumerate(DEPTHWISE):
        x = fl.placeholder(fl.float32, xs, name=f"x{i}")
        fv = rng.standard_normal(fs).astype(np.float32)
        if constant_filters:
            f = fl.constant(fv)
        else:
            f = fl.placeholder(fl.float32, fs, name=f"f{i}")
            feed[f] = fv
            feeds.append(f)
        fetches[f"dw{i}"] = fl.nn.depthwise_conv2d_native(x, f, stride, padding,
                                                          dilations=dilation)
        feed[x] = rng.standard_normal(xs).astype(np.float32)
        feeds.append(x)
    source = _source(graph, fetches, feeds)
    constant = re.findall(r"= flowc_dnnl_conv_f32\(&\w+, [^,]+, [^,]+, ([01]), ", source)
    assert len(constant) == len(DEPTHWISE)
    if not constant_filters:
        assert set(constant) == {"0"}
    check_against_interpreter(graph, fetches, feed, **TOL)


@pytest.mark.cpu_only
def test_auto_counts_every_channel_of_a_depthwise_convolution(graph, rng, monkeypatch):
    """Under auto a depthwise convolution's flops are those of all its C * M outputs: MobileNet's
    3x3 layers (here 166k and 115k flops, with a fused bias and ReLU6) run on oneDNN; a tiny
    one (2,304 flops) stays on flowc's kernel; all equal the interpreter's."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "auto")
    fetches, feed, feeds = {}, {}, []
    for name, xs, fs, stride in [("mobile", (1, 24, 24, 16), (3, 3, 16, 1), 1),
                                 ("multiplier", (1, 20, 20, 8), (3, 3, 8, 2), 1),
                                 ("strided", (1, 33, 33, 24), (3, 3, 24, 1), 2),
                                 ("tiny", (1, 4, 4, 8), (3, 3, 8, 1), 1)]:
        x = fl.placeholder(fl.float32, xs, name=name)
        f = fl.constant(rng.standard_normal(fs).astype(np.float32))
        b = fl.constant(rng.standard_normal(fs[2] * fs[3]).astype(np.float32))
        y = fl.nn.depthwise_conv2d_native(x, f, stride, "SAME")
        fetches[name] = fl.nn.relu6(fl.nn.bias_add(y, b))
        feed[x] = rng.standard_normal(xs).astype(np.float32) * 3
        feeds.append(x)
    source = _source(graph, fetches, feeds)
    calls = re.findall(r"= flowc_dnnl_conv_f32\(&\w+, [^,]+, [^,]+, [01], [^,]+, [^,]+, "
                       r"FLOWC_DNNL_ACT_RELU6, [^,]+, [^,]+, (\d+), ", source)
    assert sorted(calls) == ["16", "24", "8"]          # the groups of the three large ones
    check_against_interpreter(graph, fetches, feed, **TOL)


@pytest.mark.cpu_only
def test_nodes_of_one_shape_keep_their_own_filters(graph, rng, monkeypatch):
    """Twelve convolutions of one shape and twelve constant filters (more than a kernel keeps
    reordered): nodes that share a kernel never use each other's filter."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "onednn")
    x = fl.placeholder(fl.float32, [2, 10, 10, 16], name="x")
    fetches = {f"conv{i}": fl.nn.conv2d(x, fl.constant(rng.standard_normal(
        (3, 3, 16, 16)).astype(np.float32)), 1, "SAME") for i in range(12)}
    for i in range(11):                      # chained too: each output feeds the next conv
        fetches[f"chain{i}"] = fl.nn.conv2d(fetches[f"conv{i}"],
                                            fetches[f"conv{i + 1}"].op.inputs[1], 1, "SAME")
    feed = {x: rng.standard_normal((2, 10, 10, 16)).astype(np.float32)}
    check_against_interpreter(graph, fetches, feed, rtol=1e-3, atol=1e-3)
    with fl.Session(graph=graph) as sess:
        first = sess.run(fetches, feed)
        again = sess.run(fetches, feed)
    for k in fetches:
        np.testing.assert_array_equal(first[k], again[k])


@pytest.mark.cpu_only
def test_concurrent_runs_share_a_node(graph, rng, monkeypatch):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "onednn")
    x = fl.placeholder(fl.float32, [4, 16, 16, 8], name="x")
    f = fl.placeholder(fl.float32, [3, 3, 8, 16], name="f")
    y = fl.nn.relu(fl.nn.conv2d(x, f, 1, "SAME"))
    inputs = [(rng.standard_normal((4, 16, 16, 8)).astype(np.float32),
               rng.standard_normal((3, 3, 8, 16)).astype(np.float32)) for _ in range(8)]
    with fl.Session(graph=graph, backend="interpreter") as ref:
        want = [ref.run(y, {x: a, f: b}) for a, b in inputs]
    with fl.Session(graph=graph) as sess:
        got = [None] * len(inputs)

        def run(i):
            for _ in range(5):
                got[i] = sess.run(y, {x: inputs[i][0], f: inputs[i][1]})
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(inputs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **TOL)


# A fresh process (no heap memory advised before), so the VMAs' flags say what this run did.
KEPT_FILTER = textwrap.dedent("""
    import json, os
    import numpy as np
    import dsl as fl

    def advised_bytes():
        total, size = 0, 0
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split()[0]
                if "-" in head and ":" not in head:
                    lo, hi = (int(v, 16) for v in head.split("-"))
                    size = hi - lo
                elif line.startswith("VmFlags:") and "hg" in line.split()[1:]:
                    total += size
        return total

    rng = np.random.default_rng(0)
    x = fl.placeholder(fl.float32, [1, 6, 6, 256], name="x")
    f = rng.standard_normal((3, 3, 256, 256)).astype(np.float32) * 0.05   # 2.25 MiB
    y = fl.nn.conv2d(x, fl.constant(f), 1, "SAME")
    xv = rng.standard_normal((1, 6, 6, 256)).astype(np.float32)
    with fl.Session() as sess:
        sess.run(fl.constant(1.0))          # the runtime loaded; nothing of the conv yet
        before = advised_bytes()
        got = sess.run(y, {x: xv})
        after = advised_bytes()
    with fl.Session(backend="interpreter") as ref:
        want = ref.run(y, {x: xv})
    print(json.dumps({"advised": after - before,
                      "error": float(np.max(np.abs(got - want)))}))
""")


def _huge_pages_offered() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[never]" not in f.read()
    except OSError:
        return False


@pytest.mark.cpu_only
@pytest.mark.skipif(not _huge_pages_offered(), reason="no transparent huge pages here")
def test_a_large_constant_filter_is_kept_in_huge_pages():
    """A constant filter's reordered copy of 2 MiB and more, which its node keeps and reads at
    every step, is asked for transparent huge pages (flowc_alloc_kept): its whole 2 MiB page."""
    env = dict(os.environ, FLOWC_CONV_ENGINE="onednn",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", KEPT_FILTER], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["error"] < 1e-3
    assert result["advised"] >= 2 << 20, result


def test_blas_keeps_flowc_kernels_and_tiny_shapes_stay_on_them(graph, rng, monkeypatch):
    x = fl.placeholder(fl.float32, [8, 32, 32, 16], name="x")
    big = fl.nn.conv2d(x, fl.constant(rng.standard_normal((3, 3, 16, 32)).astype(np.float32)),
                       1, "SAME")
    t = fl.placeholder(fl.float32, [1, 4, 4, 8], name="t")
    tiny = fl.nn.conv2d(t, fl.constant(rng.standard_normal((3, 3, 8, 8)).astype(np.float32)),
                        1, "SAME")                                 # 18,432 flops
    dyn = fl.placeholder(fl.float32, [None, 16, 16, 16], name="d")
    dynamic = fl.nn.conv2d(dyn, fl.constant(rng.standard_normal((3, 3, 16, 16)).astype(
        np.float32)), 1, "SAME")                                   # batch known at run time
    fetches = {"big": big, "tiny": tiny, "dynamic": dynamic}
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "auto")
    source = _source(graph, fetches, [x, t, dyn])
    assert len(re.findall(r"= flowc_dnnl_conv_f32\(&", source)) == 1
    # the fed batch: oneDNN, the flops checked at run time (flowc_dnnl_conv_dyn_f32)
    assert len(re.findall(r"= flowc_dnnl_conv_dyn_f32\(&\w+, 100000, ", source)) == 1
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    assert "flowc_dnnl_conv" not in _source(graph, fetches, [x, t, dyn])
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "fastest")
    with pytest.raises(CompileError, match="FLOWC_CONV_ENGINE must be one of"):
        _source(graph, fetches, [x, t, dyn])


def test_onednn_enters_the_toolchain_fingerprint(monkeypatch):
    fingerprint = toolchain_fingerprint.__wrapped__          # not the process's cached one
    with_it = fingerprint()
    assert onednn.onednn_tag().startswith("onednn=")
    monkeypatch.setenv("FLOWC_ONEDNN_ROOT", "0")
    assert not onednn.available() and not conv_engine.available()
    assert onednn.onednn_tag() == "" and onednn.onednn_flags() == ()
    assert fingerprint() != with_it


@pytest.mark.cpu_only
@pytest.mark.parametrize("constant_filters", [True, False], ids=["constant", "fed"])
def test_implementations_chosen_by_timing_match_the_interpreter(graph, rng, monkeypatch,
                                                                constant_filters):
    """FLOWC_CONV_TUNE=1: every static convolution times oneDNN's implementations on its first
    call and keeps the fastest; whichever it keeps, the results (a residual summed into the
    output in place too) are the interpreter's, on the first run and on later ones."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "onednn")
    monkeypatch.setenv("FLOWC_CONV_TUNE", "1")
    fetches, feed, feeds = _graph(rng, constant_filters)
    x = fl.placeholder(fl.float32, [4, 6, 6, 64], name="xr")
    r = fl.placeholder(fl.float32, [4, 6, 6, 64], name="r")
    f = fl.constant(rng.standard_normal((3, 3, 64, 64)).astype(np.float32) * 0.1)
    b = fl.constant(rng.standard_normal(64).astype(np.float32))
    fetches["residual"] = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(x, f, 1, "SAME"), b) + r)
    feed[x] = rng.standard_normal((4, 6, 6, 64)).astype(np.float32)
    feed[r] = rng.standard_normal((4, 6, 6, 64)).astype(np.float32)
    source = _source(graph, fetches, feeds + [x, r])
    assert source.count("= FLOWC_DNNL_CONV_INIT_TUNED(1.0);") == len(CASES) + 1
    check_against_interpreter(graph, fetches, feed, **TOL)
    with fl.Session(graph=graph) as sess:
        for _ in range(2):
            got = sess.run(fetches, feed)
    with fl.Session(graph=graph, backend="interpreter") as ref:
        want = ref.run(fetches, feed)
    for k in fetches:
        np.testing.assert_allclose(got[k], want[k], err_msg=k, **TOL)


def test_tuning_off_and_bad_settings(graph, rng, monkeypatch):
    x = fl.placeholder(fl.float32, [8, 32, 32, 16], name="x")
    y = fl.nn.conv2d(x, fl.constant(rng.standard_normal((3, 3, 16, 32)).astype(np.float32)),
                     1, "SAME")                                    # 37.7 Mflops
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "auto")
    assert f"FLOWC_DNNL_CONV_INIT_TUNED({conv_engine.TUNE_FLOPS}.0)" in _source(graph, {"y": y},
                                                                              [x])
    monkeypatch.setenv("FLOWC_CONV_TUNE", "0")
    source = _source(graph, {"y": y}, [x])
    assert "= FLOWC_DNNL_CONV_INIT;" in source and "= FLOWC_DNNL_CONV_INIT_TUNED(" not in source
    monkeypatch.setenv("FLOWC_CONV_TUNE", "fast")
    with pytest.raises(CompileError, match="FLOWC_CONV_TUNE must be"):
        _source(graph, {"y": y}, [x])
