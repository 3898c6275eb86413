"""The GPU check: flowc's CUDA modules on a real GPU beside PyTorch on the same GPU.

    python3 examples/benchmarks/bench_gpu.py [--repeats N]

Needs a CUDA GPU, nvcc and pycuda (the ``gpu`` extra); says why and exits 2 where one is
missing. Each case is compiled with the GPU as the default device (ops without a GPU kernel
stay on the CPU, as the placement report says), run once against the numpy interpreter (the
oracle), then timed (median of --repeats steps after warm-up). The cases:

1. the elementwise chain ``relu(x * 1.5 + 0.5) * sigmoid(x)`` over 16,777,216 float32 values
   drawn on the GPU (Philox) and summed there, so no tensor crosses PCIe (PyTorch: the same
   with ``torch.rand`` on the GPU);
2. an MLP forward step (784-256-256-10, batch 1024) with the batch fed from host memory each
   step (PyTorch: the same copy, ``x.cuda()``, each step);
3. an MLP training step (784-256-256-10, SGD, batch --batch) through ``fl.Session``, which
   puts the step on GPU:0 by itself (PyTorch: the same model and SGD on the same GPU);
4. the CNN training step of bench_train_cnn.py (two 5x5 convolutions, max pools, two dense
   layers, SGD, batch --batch) through ``fl.Session`` on the GPU;
5. the launch cost: a chain of 64 dependent elementwise ops on 256 floats, compiled without
   fusion (64 kernels a step), fetched to the host (PyTorch: the same 64 ops, eager); the row
   after it divides both times by 64;
6. transfers between the CPU and the GPU within a step: 16 MiB fed and changed on the CPU,
   sent to the GPU (pinned staging), scaled there and sent back to the CPU (the copy stream)
   for a sum (PyTorch: ``.cuda()``, the scale, ``.cpu()``, the sum).

The training cases first check their first losses against the same session on the CPU and
against PyTorch on the GPU (``bench_gpu_training.py``).

Every row prints flowc's time, PyTorch's and their ratio (flowc / PyTorch, lower is faster).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dsl as fl  # noqa: E402
from compiler.options import PipelineOptions  # noqa: E402
from compiler.step import make_step_graph, optimize, write_artifact  # noqa: E402
from runtime.cuda_module import CudaContext, cuda_status, load_cuda_artifact  # noqa: E402

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


def compile_for_gpu(g, feeds, fetches, folder, disable=()):
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step, PipelineOptions(devices=(CPU0, GPU0), default_device=GPU0, disable=disable))
    placed = Counter("GPU" if "GPU" in n.assigned_device else "CPU" for n in step.graph)
    return write_artifact(step, folder), dict(placed)


def median_ms(fn, repeats: int, sync=None) -> float:
    for _ in range(3):
        fn()
    if sync:
        sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def elementwise_graph(n: int):
    g = fl.Graph("gpu_chain")
    with g.as_default():
        scale = fl.placeholder(fl.float32, [], name="scale")
        x = fl.random_uniform([n], minval=-4.0, maxval=4.0, seed=3) * scale
        y = fl.nn.relu(x * 1.5 + 0.5) * fl.sigmoid(x)
        total = fl.reduce_sum(y)
    return g, [scale], [total]


def mlp_graph(batch: int, rng):
    g = fl.Graph("gpu_mlp")
    weights = [rng.uniform(-0.1, 0.1, s).astype(np.float32)
               for s in ((784, 256), (256,), (256, 256), (256,), (256, 10), (10,))]
    with g.as_default():
        x = fl.placeholder(fl.float32, [batch, 784], name="x")
        h = fl.nn.relu(fl.nn.bias_add(fl.matmul(x, weights[0]), weights[1]))
        h = fl.nn.relu(fl.nn.bias_add(fl.matmul(h, weights[2]), weights[3]))
        logits = fl.nn.bias_add(fl.matmul(h, weights[4]), weights[5])
        probs = fl.nn.softmax(logits)
    return g, [x], [probs], weights


LAUNCHES = 64


def launch_chain_graph():
    """LAUNCHES dependent elementwise ops on 256 floats (one kernel each, without fusion)."""
    g = fl.Graph("gpu_launches")
    with g.as_default():
        x = fl.placeholder(fl.float32, [256], name="x")
        y = x
        for k in range(LAUNCHES):
            y = y * 1.0001 if k % 2 == 0 else y + 0.0001
    return g, [x], [y]


def transfer_graph(n: int):
    """CPU -> GPU -> CPU within one step: the two _Send/_Recv pairs carry n floats each."""
    g = fl.Graph("gpu_transfers")
    with g.as_default():
        with fl.device("/cpu:0"):
            x = fl.placeholder(fl.float32, [n], name="x")
            a = x + 1.0
        with fl.device("/device:GPU:0"):
            b = a * 2.0
        with fl.device("/cpu:0"):
            total = fl.reduce_sum(b - 1.0)
    return g, [x], [total]


def check(g, feeds, fetches, values, got, name: str) -> None:
    with fl.Session(graph=g, backend="interpreter") as s:
        want = s.run(fetches, dict(zip(feeds, values)))
    for w, v in zip(want, got):
        np.testing.assert_allclose(v, w, rtol=2e-3, atol=1e-4, err_msg=name)
    print(f"{name}: GPU result equals the interpreter's")


def training_rows(torch, batch: int, repeats: int) -> list:
    """The MLP and CNN training steps through fl.Session on the GPU beside PyTorch's."""
    import bench_gpu_training as training
    rows = []
    cases = (("MLP", training.flowc_mlp, training.torch_mlp, 1e-3,
              f"MLP training step 784-256-256-10 SGD, batch {batch} (fl.Session)"),
             ("CNN", training.flowc_cnn, training.torch_cnn, 2e-3,
              f"CNN training step (bench_train_cnn), batch {batch} (fl.Session)"))
    for name, flowc_case, torch_case, rtol, label in cases:
        gpu_sess, gpu_loss, gpu_step = training.flowc_session(flowc_case(batch))
        cpu_sess, cpu_loss, _ = training.flowc_session(flowc_case(batch), training.CPU_ONLY)
        torch_loss, torch_step = torch_case(torch, batch)
        training.check_losses(name, gpu_loss, cpu_loss, torch_loss, rtol)
        print(f"{name} training: variables on {training.devices_of(gpu_sess)} "
              f"(the CPU session's on {training.devices_of(cpu_sess)})")
        rows.append((label, median_ms(gpu_step, repeats),
                     median_ms(torch_step, repeats, torch.cuda.synchronize)))
        gpu_sess.close()
        cpu_sess.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64, help="batch of the training steps")
    args = ap.parse_args()
    ok, why = cuda_status()
    if not ok:
        print(f"no usable GPU: {why}")
        return 2
    import torch
    context = CudaContext(0)
    print(f"GPU 0: {context.device.name()} ({context.arch}); torch {torch.__version__}, "
          f"torch sees {torch.cuda.get_device_name(0)}")
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        n = 16_777_216
        g, feeds, fetches = elementwise_graph(n)
        path, placed = compile_for_gpu(g, feeds, fetches, os.path.join(tmp, "chain"))
        print(f"elementwise chain placed: {placed}")
        art = load_cuda_artifact(path, context)
        values = [np.float32(1.0)]
        with context:
            got = art.executable.run(values)
            check(g, feeds, fetches, values, got, "elementwise chain")
            flowc_ms = median_ms(lambda: art.executable.run(values), args.repeats)

        def torch_chain():
            x = (torch.rand(n, device="cuda") * 8.0 - 4.0) * 1.0
            return (torch.relu(x * 1.5 + 0.5) * torch.sigmoid(x)).sum().item()
        rows.append(("elementwise chain, 16M f32 (draw + chain + sum)", flowc_ms,
                     median_ms(torch_chain, args.repeats, torch.cuda.synchronize)))

        g, feeds, fetches, weights = mlp_graph(1024, rng)
        path, placed = compile_for_gpu(g, feeds, fetches, os.path.join(tmp, "mlp"))
        print(f"MLP forward placed: {placed}")
        art = load_cuda_artifact(path, context)
        values = [rng.uniform(0, 1, (1024, 784)).astype(np.float32)]
        with context:
            got = art.executable.run(values)
            check(g, feeds, fetches, values, got, "MLP forward")
            flowc_ms = median_ms(lambda: art.executable.run(values), args.repeats)
        tw = [torch.from_numpy(w).cuda() for w in weights]
        xh = torch.from_numpy(values[0])

        def torch_mlp():
            x = xh.cuda()
            h = torch.relu(x @ tw[0] + tw[1])
            h = torch.relu(h @ tw[2] + tw[3])
            return torch.softmax(h @ tw[4] + tw[5], dim=1).cpu()
        rows.append(("MLP forward 784-256-256-10, batch 1024 (fed from host)", flowc_ms,
                     median_ms(torch_mlp, args.repeats, torch.cuda.synchronize)))
        g, feeds, fetches = launch_chain_graph()
        path, placed = compile_for_gpu(g, feeds, fetches, os.path.join(tmp, "launches"),
                                       disable=("fuse",))
        print(f"launch chain placed: {placed}")
        art = load_cuda_artifact(path, context)
        values = [rng.uniform(0, 1, 256).astype(np.float32)]
        with context:
            got = art.executable.run(values)
            check(g, feeds, fetches, values, got, "launch chain")
            flowc_ms = median_ms(lambda: art.executable.run(values), args.repeats)
        xl = torch.from_numpy(values[0]).cuda()

        def torch_launches():
            y = xl
            for k in range(LAUNCHES):
                y = y * 1.0001 if k % 2 == 0 else y + 0.0001
            return y.cpu()
        torch_ms = median_ms(torch_launches, args.repeats, torch.cuda.synchronize)
        rows.append((f"{LAUNCHES} dependent elementwise kernels on 256 f32, unfused", flowc_ms,
                     torch_ms))
        rows.append(("  the same, per kernel launch", flowc_ms / LAUNCHES,
                     torch_ms / LAUNCHES))

        n = 4 * 1024 * 1024
        g, feeds, fetches = transfer_graph(n)
        path, placed = compile_for_gpu(g, feeds, fetches, os.path.join(tmp, "transfers"))
        print(f"transfers placed: {placed}")
        art = load_cuda_artifact(path, context)
        values = [rng.uniform(0, 1, n).astype(np.float32)]
        with context:
            got = art.executable.run(values)
            check(g, feeds, fetches, values, got, "CPU-GPU transfers")
            flowc_ms = median_ms(lambda: art.executable.run(values), args.repeats)
        xt = torch.from_numpy(values[0])

        def torch_transfers():
            a = xt + 1.0
            b = (a.cuda() * 2.0).cpu()
            return (b - 1.0).sum().item()
        rows.append(("16 MiB CPU -> GPU -> CPU within a step (two Send/Recv pairs)", flowc_ms,
                     median_ms(torch_transfers, args.repeats, torch.cuda.synchronize)))
    rows += training_rows(torch, args.batch, args.repeats)
    print(f"\n{'case':66s} {'flowc ms':>10s} {'torch ms':>10s} {'ratio':>7s}")
    for name, f, t in rows:
        print(f"{name:66s} {f:10.3f} {t:10.3f} {f / t:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
