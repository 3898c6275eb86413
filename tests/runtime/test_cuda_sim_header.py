"""The CUDA simulator itself (runtime/csrc/cuda_sim/cuda_runtime.h), on small hand-written
kernels built into a program: barriers and shared memory behave as on a GPU, and what is a bug
on a GPU (a missing barrier, a barrier not every thread reaches, a write past a buffer, a
launch shape a GPU refuses) shows, instead of passing by luck."""
from __future__ import annotations

import os
import subprocess

import pytest

from compiler.codegen.build import RUNTIME_INCLUDE
from compiler.codegen.cuda_build import SIMULATOR_INCLUDE, simulator_flags

PROGRAM = r"""
#include <cuda_runtime.h>
#include <stdio.h>

/* a block sums its 64 values through shared memory; `racy` leaves out the first barrier */
__global__ void block_sum(const float *x, float *out, int racy) {
    __shared__ float sh[64];
    FLOWC_SHARED_FRESH(sh);
    const int t = threadIdx.x;
    sh[t] = x[blockIdx.x * 64 + t];
    if (!racy) __syncthreads();
    for (int s = 32; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = sh[0];
}

__global__ void some_wait(int *out) {
    if (threadIdx.x < 3) __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void one_past(float *p, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += gridDim.x * blockDim.x)
        p[i] = 1.0f;
}

__global__ void count(unsigned long long *c) { atomicAdd(c, 1ULL); }

/* a host function on the copy stream: what the pinned buffer holds when it runs */
static float seen_by_host_fn = -1;
static void CUDART_CB look(void *p) { seen_by_host_fn = *(float *)p; }

int main(void) {
    float *x, *out;
    cudaMalloc(&x, 4 * 64 * sizeof(float));
    cudaMalloc(&out, 4 * sizeof(float));
    float h[256];
    for (int k = 0; k < 256; k++) h[k] = (float)(k % 7);
    cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
    float r[4];
    for (int racy = 0; racy < 2; racy++) {
        FLOWC_LAUNCH(block_sum, 4, 64, 0, 0)(x, out, racy);
        printf("launch%d %d\n", racy, (int)cudaGetLastError());
        cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
        printf("sums%d %g %g %g %g\n", racy, r[0], r[1], r[2], r[3]);
    }
    int *flags;
    cudaMalloc(&flags, 32 * sizeof(int));
    FLOWC_LAUNCH(some_wait, 1, 32, 0, 0)(flags);
    printf("some_wait %d %s\n", (int)cudaGetLastError(), cudaGetErrorString(cudaErrorLaunchFailure));
    FLOWC_LAUNCH(some_wait, 1, 2048, 0, 0)(flags);
    printf("too_many_threads %d\n", (int)cudaGetLastError());
    unsigned long long *c, hc = 0;
    cudaMalloc(&c, sizeof *c);
    cudaMemcpy(c, &hc, sizeof hc, cudaMemcpyHostToDevice);
    FLOWC_LAUNCH(count, 3, 100, 0, 0)(c);
    cudaMemcpy(&hc, c, sizeof hc, cudaMemcpyDeviceToHost);
    printf("count %llu\n", hc);
    float *fresh;
    cudaMalloc(&fresh, sizeof(float));
    unsigned bits;
    cudaMemcpy(&bits, fresh, 4, cudaMemcpyDeviceToHost);
    printf("fresh %08x\n", bits);

    /* a copy stream: its copies and host functions run later, on a worker thread, in order,
       after the compute stream's work recorded in the event it waits for */
    cudaStream_t copy;
    cudaEvent_t ready;
    float *pinned, *dev, v = 42.0f;
    cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    cudaMallocHost((void **)&pinned, sizeof(float));
    cudaMalloc(&dev, sizeof(float));
    *pinned = 0.0f;
    cudaMemcpyAsync(dev, &v, sizeof v, cudaMemcpyHostToDevice, cudaStreamLegacy);
    cudaEventRecord(ready, cudaStreamLegacy);
    cudaStreamWaitEvent(copy, ready, 0);
    cudaMemcpyAsync(pinned, dev, sizeof(float), cudaMemcpyDeviceToHost, copy);
    cudaLaunchHostFunc(copy, look, pinned);
    printf("copy_sync %d\n", (int)cudaStreamSynchronize(copy));
    printf("host_fn_saw %g\n", seen_by_host_fn);
    printf("free_pinned_as_device %d\n", (int)cudaFree(pinned));
    printf("free_device_as_pinned %d\n", (int)cudaFreeHost(dev));
    printf("free_pinned %d\n", (int)cudaFreeHost(pinned));
    float *other;
    cudaMalloc(&other, sizeof(float));
    printf("peer %d\n", (int)cudaMemcpyPeerAsync(other, 0, dev, 0, sizeof(float), cudaStreamLegacy));
    printf("peer_no_gpu %d\n", (int)cudaMemcpyPeerAsync(other, 0, dev, 7, sizeof(float), cudaStreamLegacy));
    (void)cudaGetLastError();                    /* as a GPU's runtime, the error stays until read */
    cudaMemcpy(&v, other, sizeof v, cudaMemcpyDeviceToHost);
    printf("peer_value %g\n", v);
    cudaFree(other);
    cudaFree(dev);
    float *p;
    cudaMalloc(&p, 10 * sizeof(float));
    FLOWC_LAUNCH(one_past, 1, 32, 0, 0)(p, 10);
    printf("before_free %d\n", (int)cudaGetLastError());
    printf("free %d\n", (int)cudaFree(p));
    void *q;
    printf("after %d\n", (int)cudaMalloc(&q, 16));
    return 0;
}
"""


def _run_program(tmp_path):
    src = tmp_path / "prog.cu"
    src.write_text(PROGRAM)
    exe = tmp_path / "prog"
    flags = [f for f in simulator_flags() if f not in ("-shared", "-fPIC")]
    cxx = os.environ.get("CXX", "c++")
    build = subprocess.run([cxx] + flags + [str(src), "-o", str(exe)], capture_output=True,
                           text=True)
    if build.returncode != 0 and "not found" in build.stderr:
        pytest.skip(f"no C++ compiler: {build.stderr[:200]}")
    assert build.returncode == 0, build.stderr
    faults = tmp_path / "faults.txt"
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, FLOWC_CUDA_SIMULATOR_FAULTS=str(faults)))
    assert run.returncode == 0, run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    return lines, run.stderr, faults


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return _run_program(tmp_path_factory.mktemp("cuda-sim-program"))


def test_barriers_and_shared_memory_give_the_block_sums(program):
    lines, _, _ = program
    assert lines["launch0"] == "0"
    want = [sum(float(k % 7) for k in range(b * 64, b * 64 + 64)) for b in range(4)]
    assert [float(v) for v in lines["sums0"].split()] == want


def test_a_missing_barrier_changes_the_result(program):
    """Without the barrier before the tree, the first thread run reads shared memory that no
    thread of the block has written yet: garbage (NaN), not a lucky right answer."""
    lines, _, _ = program
    assert lines["launch1"] == "0"
    racy = lines["sums1"].split()
    assert any(v.lower() in ("nan", "-nan") for v in racy), racy


def test_a_barrier_some_threads_skip_is_an_error_of_the_launch(program):
    lines, _, _ = program
    code, message = lines["some_wait"].split(" ", 1)
    assert code == "719" and "__syncthreads() " in message and "threads of a block" in message


def test_a_launch_shape_a_gpu_refuses_is_an_error(program):
    lines, _, _ = program
    assert lines["too_many_threads"] == "9"            # cudaErrorInvalidConfiguration


def test_atomics_and_fresh_allocations(program):
    lines, _, _ = program
    assert lines["count"] == "300"
    assert lines["fresh"] == "ffffffff"                 # 0xFF bytes: NaN / -1


def test_a_copy_stream_runs_after_the_event_it_waits_for_and_host_functions_in_order(program):
    """The copy stream's device-to-host copy ran after the compute stream's copy it waited
    for (through the event), and its host function after the copy (42, not 0)."""
    lines, _, _ = program
    assert lines["copy_sync"] == "0"
    assert lines["host_fn_saw"] == "42"


def test_pinned_and_device_memory_are_told_apart(program):
    lines, _, _ = program
    assert lines["free_pinned_as_device"] == "1"       # cudaErrorInvalidValue
    assert lines["free_device_as_pinned"] == "1"
    assert lines["free_pinned"] == "0"


def test_peer_copies_between_simulated_gpus(program):
    lines, _, _ = program
    assert lines["peer"] == "0" and lines["peer_value"] == "42"
    assert lines["peer_no_gpu"] == "101"                # cudaErrorInvalidDevice


def test_a_write_past_a_buffer_is_found_when_it_is_freed(program):
    lines, stderr, faults = program
    assert lines["before_free"] == "0"
    assert lines["free"] == "700"                       # cudaErrorIllegalAddress
    assert lines["after"] == "700"                      # sticky, as a GPU context's fault
    assert "wrote past the end of a 40-byte device buffer" in stderr
    assert "40-byte" in faults.read_text()
