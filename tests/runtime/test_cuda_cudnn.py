"""GPU convolutions through cuDNN (compiler/codegen/cuda_ops/conv_cudnn.py) against the numpy
interpreter: Conv2D (plain and fused with a bias and a ReLU), Conv2DBackpropInput and
Conv2DBackpropFilter for several shapes (groups, strides, dilations, SAME and VALID, NCHW
through the layout pass, float64, more padding after than before), with cuDNN forced (FLOWC_CUDA_CONV=cudnn) and chosen per
shape by timing (auto), the choice of each shape read from FLOWC_CUDA_CONV_LOG's lines.

The GPU tests (marked ``gpu``) need pycuda, a GPU, nvcc and cuDNN (the toolkit's,
FLOWC_CUDNN_HOME or the nvidia-cudnn-cu<major> wheel), and are skipped with the reason
anywhere one is missing. The same cases run on every machine on the CUDA simulator built with
``cuda_sim_cudnn/cudnn.h``, a stand-in for cuDNN's calls (reference loops in cuDNN's
layouts): that checks flowc's side of them (descriptors, the filter's layout kernels, the
padding added after x, the timed choice, the epilogue after cuDNN), not cuDNN.
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize, write_artifact

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"

SIM_CUDNN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_sim_cudnn")

# x shape (NHWC), filter shape (HWIO: in-channels C / groups), attrs, dtype
CASES = {
    "same": ((4, 12, 12, 8), (3, 3, 8, 16), {"strides": [1, 1, 1, 1], "padding": "SAME"},
             np.float32),
    "stride2_valid": ((3, 13, 11, 5), (5, 3, 5, 7), {"strides": [1, 2, 2, 1],
                                                     "padding": "VALID"}, np.float32),
    "dilated": ((2, 10, 9, 4), (3, 3, 4, 6), {"strides": [1, 1, 1, 1], "padding": "SAME",
                                              "dilations": [1, 2, 2, 1]}, np.float32),
    "grouped": ((2, 9, 9, 8), (3, 3, 4, 6), {"strides": [1, 1, 2, 1], "padding": "SAME"},
                np.float32),
    "nchw": ((2, 6, 10, 10), (3, 3, 6, 4), {"strides": [1, 1, 1, 1], "padding": "SAME",
                                            "data_format": "NCHW"}, np.float32),
    "float64": ((2, 7, 7, 3), (3, 3, 3, 5), {"strides": [1, 1, 1, 1], "padding": "VALID"},
                np.float64),
    # SAME with a stride of 2 over an even size pads more after than before: cuDNN's
    # symmetric padding on x with a zero row and column added after it
    "asymmetric": ((2, 8, 8, 3), (3, 3, 3, 4), {"strides": [1, 2, 2, 1], "padding": "SAME"},
                   np.float32),
    # more padding before than after: cuDNN cannot express it, the generated kernel runs (and
    # the log says why)
    "before": ((2, 7, 6, 3), (3, 2, 3, 4), {"strides": [1, 1, 1, 1], "padding": "EXPLICIT",
                                            "explicit_paddings": [0, 0, 2, 0, 1, 0, 0, 0]},
               np.float32),
}
_LOG = re.compile(r"^flowc: (\S+) \((Conv2D|Conv2DBackpropInput|Conv2DBackpropFilter)\) .*: "
                  r"(cudnn|generated) \(cuDNN algo (-?\d+): (-?[\d.]+) ms, generated: "
                  r"(-?[\d.]+) ms(?:; (.*))?\)$", re.M)


@pytest.fixture
def cudnn_gpu(monkeypatch, tmp_path):
    """A GPU with nvcc and cuDNN; each shape's choice logged to stderr."""
    from compiler.codegen.cuda_build import cudnn_home, find_nvcc
    from runtime.cuda_module import cuda_status
    monkeypatch.delenv("FLOWC_CUDA_SIMULATOR", raising=False)
    monkeypatch.delenv("FLOWC_CUDA_ARCH", raising=False)
    ok, why = cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc (the CUDA compiler) is not installed")
    if cudnn_home(nvcc) is None:
        pytest.skip("no cuDNN for this nvcc (set FLOWC_CUDNN_HOME or install nvidia-cudnn-cu13)")
    monkeypatch.setenv("FLOWC_CUDA_CONV_LOG", "1")
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def cudnn_simulator(monkeypatch, tmp_path):
    """The CUDA simulator, its modules built with the cuDNN stand-in (``always``: 1 as under
    FLOWC_CUDA_CONV=cudnn, 0 as under auto); a write out of bounds fails the test."""
    import compiler.codegen.cuda_build as cuda_build
    base = cuda_build.simulator_flags
    faults = tmp_path / "faults.txt"
    monkeypatch.setenv("FLOWC_CUDA_SIMULATOR", "1")
    monkeypatch.delenv("FLOWC_CUDA_ARCH", raising=False)
    monkeypatch.setenv("FLOWC_CUDA_SIMULATOR_FAULTS", str(faults))
    monkeypatch.setenv("FLOWC_CUDA_CONV_LOG", "1")
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path / "cache"))

    def use(always: int):
        monkeypatch.setattr(cuda_build, "simulator_flags", lambda: base() + [
            "-DFLOWC_CUDNN", f"-DFLOWC_CUDNN_ALWAYS={always}", f"-I{SIM_CUDNN}"])
    yield use
    assert not faults.exists(), f"a kernel wrote out of bounds: {faults.read_text()}"


def _training_convolutions(rng):
    """One graph with every case under its own name scope: the case's convolution, the same
    with a bias and a ReLU (which fuse), and its two gradients through a random weighting of
    the output; (graph, feeds, values, fetches)."""
    g = fl.Graph()
    feeds, values, fetches = [], [], []
    with g.as_default():
        for case, (xs, fs, attrs, dtype) in sorted(CASES.items()):
            with fl.name_scope(case):
                t = fl.float64 if dtype is np.float64 else fl.float32
                x = fl.placeholder(t, [None, *xs[1:]], name="x")
                f = fl.placeholder(t, list(fs), name="f")
                r = fl.placeholder(t, [None] * 4, name="r")
                y = fl.apply_op("Conv2D", [x, f], attrs, name="conv")
                dx, df = fl.gradients(fl.reduce_sum(y * r), [x, f])
                fused = fl.nn.relu(fl.nn.bias_add(
                    fl.apply_op("Conv2D", [x, f * 0.5], attrs, name="conv_b"),
                    fl.ones_like(f[0, 0, 0, :]), data_format=attrs.get("data_format", "NHWC")))
            xv, fv = rng.uniform(-1, 1, xs).astype(dtype), rng.uniform(-1, 1, fs).astype(dtype)
            with fl.Session(graph=g, backend="interpreter") as s:
                shape = s.run(y, {x: xv, f: fv}).shape
            feeds += [x, f, r]
            values += [xv, fv, rng.uniform(-1, 1, shape).astype(dtype)]
            fetches += [y, dx, df, fused]
    return g, feeds, values, fetches


def _run(path, rng):
    """Every case on the GPU (run twice: the second run uses the choices the first made)
    against the interpreter."""
    from runtime.cuda_module import CudaContext, load_cuda_artifact
    g, feeds, values, fetches = _training_convolutions(rng)
    with fl.Session(graph=g, backend="interpreter") as s:
        want = s.run(fetches, dict(zip(feeds, values)))
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step, PipelineOptions(devices=(CPU0, GPU0), default_device=GPU0,
                                   disable=("fold-constants",)))
    on_gpu = {n.op for n in step.graph if n.assigned_device == GPU0}
    assert {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "_FusedConv2D"} <= on_gpu
    context = CudaContext(0)
    art = load_cuda_artifact(write_artifact(step, str(path)), context)
    with context:
        got = art.executable.run(values)
        again = art.executable.run(values)
    for k, (w, v, v2) in enumerate(zip(want, got, again)):
        tol = 1e-10 if w.dtype == np.float64 else 2e-4
        what = f"{fetches[k].name}"
        np.testing.assert_allclose(v, w, rtol=tol, atol=tol, err_msg=what)
        np.testing.assert_allclose(v2, w, rtol=tol, atol=tol, err_msg=what + " (2nd run)")


def _choices(text):
    """The logged choices by case: {case: [(node, op, choice, algo, cudnn ms, generated ms,
    why)]}."""
    found = {}
    for m in _LOG.finditer(text):
        case = next(c for c in CASES if f"{c}/" in m.group(1))
        found.setdefault(case, []).append(m.groups())
    return found


def _check_forced(found):
    """Under cudnn: cuDNN ran every shape it takes; the one it cannot take says why."""
    assert set(found) == set(CASES), found
    for case, choices in found.items():
        assert {c[1] for c in choices} == {"Conv2D", "Conv2DBackpropInput",
                                           "Conv2DBackpropFilter"}, (case, choices)
        for node, kind, choice, algo, cudnn_ms, generated_ms, why in choices:
            if case == "before":
                assert choice == "generated" and "padding" in (why or ""), (node, why)
            else:
                assert choice == "cudnn" and int(algo) >= 0 and not why, (node, why)
                assert float(generated_ms) < 0          # not timed under cudnn


def _check_timed(found):
    """Under auto: one decision per node and shape, the faster of the two logged times."""
    assert set(found) == set(CASES), found
    for case, choices in found.items():
        # the second run decided nothing again
        assert len({c[0] for c in choices}) == len(choices) == 4, (case, choices)
        for node, kind, choice, algo, cudnn_ms, generated_ms, why in choices:
            if why:
                assert case == "before" and choice == "generated", (node, why)
                continue
            assert float(cudnn_ms) > 0 and float(generated_ms) > 0, node
            faster = "cudnn" if float(cudnn_ms) < float(generated_ms) else "generated"
            assert choice == faster, (node, cudnn_ms, generated_ms)


@pytest.mark.gpu
def test_cudnn_convolutions_and_gradients_match_the_interpreter(cudnn_gpu, monkeypatch,
                                                                tmp_path, rng, capfd):
    """FLOWC_CUDA_CONV=cudnn: every shape cuDNN can take runs on it (asymmetric SAME padding
    too), and the log says so; one it cannot take runs the generated kernel and says why."""
    monkeypatch.setenv("FLOWC_CUDA_CONV", "cudnn")
    _run(tmp_path / "art", rng)
    _check_forced(_choices(capfd.readouterr().err))


@pytest.mark.gpu
def test_the_faster_of_cudnn_and_the_generated_kernel_runs_each_shape(cudnn_gpu, monkeypatch,
                                                                      tmp_path, rng, capfd):
    """FLOWC_CUDA_CONV=auto (the default): each shape's first call times both; the log names
    the node, the choice and both times, and the choice is the faster one."""
    monkeypatch.delenv("FLOWC_CUDA_CONV", raising=False)
    _run(tmp_path / "art", rng)
    _check_timed(_choices(capfd.readouterr().err))


@pytest.mark.parametrize("always", [1, 0], ids=["cudnn", "auto"])
def test_the_cudnn_path_on_the_simulator_with_a_stand_in_matches_the_interpreter(
        always, cudnn_simulator, tmp_path, rng, capfd):
    """The same cases through flowc's cuDNN path on the CUDA simulator, cuDNN's calls answered
    by cuda_sim_cudnn/cudnn.h: forced, every shape it takes runs there; timed, each shape
    keeps the faster (the simulator's times, so either), and both match the interpreter."""
    cudnn_simulator(always)
    _run(tmp_path / "art", rng)
    found = _choices(capfd.readouterr().err)
    (_check_forced if always else _check_timed)(found)
