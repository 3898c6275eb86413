"""``--profile`` on a GPU: each node's work on the stream is timed by a pair of CUDA events,
into the same counters and kernel table a CPU module has (``codegen_templates/cuda/
profile.cu.j2``). The profiled module compiles with nvcc; on the CUDA simulator its counters
fill as the profile report reads them (a traced run: tests/compiler/codegen/test_cuda_simulator.py)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.cuda_build import build_cuda_module, find_nvcc
from compiler.codegen.cuda_emitter import emit_cuda
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


def _profiled_module():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 4], name="x")
        h = fl.nn.relu(fl.matmul(x, fl.ones([4, 3])), name="h")
        total = fl.reduce_sum(h, name="total")
    step = make_step_graph(g, [x.output], [total.output])
    optimize(step, PipelineOptions(devices=(CPU0, GPU0), default_device=GPU0))
    retvals = [n for n in step.graph if n.op == "_Retval"]
    return step, emit_cuda(step.graph, step.feeds, retvals, profile=True, origins=step.origins)


def test_each_timed_node_has_a_pair_of_events_and_a_row_in_the_kernel_table():
    step, module = _profiled_module()
    kernels = module.instrumentation["kernels"]
    assert module.instrumentation["instrumentation"]["profile"] is True
    marks = [int(m) for m in re.findall(r"FLOWC_PROF_MARK\((\d+)\);", module.source)]
    assert marks == list(range(2 * len(kernels)))
    names = [k["node"] for k in kernels]
    assert "x" in names and "total" in names                  # the feed's copy is timed too
    assert not any(n.op == "Const" and n.name in names for n in step.graph)
    assert "flowc_profile_ns" in module.source and 'extern "C"' in module.source
    plain = emit_cuda(step.graph, step.feeds, [n for n in step.graph if n.op == "_Retval"])
    assert "FLOWC_PROF_MARK" not in plain.source and not plain.instrumentation


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc (the CUDA compiler) is not installed")
def test_a_profiled_module_compiles_with_nvcc(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    _, module = _profiled_module()
    assert build_cuda_module(module.source, "sm_90", name="profiled").files["fatbin"]


def test_a_profiled_gpu_artifact_reports_its_nodes_on_the_simulator(tmp_path, monkeypatch):
    from compiler.codegen.instrument import Instrumentation
    from compiler.step import write_artifact
    from runtime import profile
    from runtime.cuda_module import load_cuda_artifact
    monkeypatch.setenv("FLOWC_CUDA_SIMULATOR", "1")
    step, _ = _profiled_module()
    path = write_artifact(step, str(tmp_path / "art"), cuda_arch="sim",
                          instrumentation=Instrumentation(profile=True))
    art = load_cuda_artifact(path)
    x = np.ones((8, 4), np.float32)
    results, prof = profile.profile_runs(art.executable, lambda: art.executable.run([x]), 3)
    assert float(results[-1][0]) == 8 * 3 * 4.0
    rows = {k.node: k for k in prof.kernels}
    assert rows["total"].calls == 3 and rows["total"].device == GPU0
    assert all(k.total_ns >= 0 for k in rows.values())
    assert "device " + GPU0 in prof.format()
