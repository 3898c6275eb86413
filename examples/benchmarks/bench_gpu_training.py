"""Training steps on a GPU: the MLP of bench_train_mlp.py and the CNN of bench_train_cnn.py
trained through ``fl.Session`` (which puts every op with a GPU kernel on GPU:0 when the process
has a GPU), checked against the same session on the CPU
(``ConfigProto(device_count={"GPU": 0})``) and against PyTorch on the same GPU, then timed
beside PyTorch CUDA eager and ``torch.compile`` of the same model in the same run.

    python3 examples/benchmarks/bench_gpu_training.py [--repeats N] [--cases mlp:128,cnn:64]

The default cases are the MLP at batch 128 and 1024 and the CNN at batch 64 and 256. Each
step feeds the batch from host memory, in flowc (a feed) and in PyTorch (``.cuda()``). A
time is per step: ``--steps`` steps back to back and then a wait for the GPU (flowc: a fetch
of the loss; PyTorch: ``torch.cuda.synchronize``), the median of ``--repeats`` such rounds.
Ratios are flowc / PyTorch (lower is faster). Without a GPU it says why and exits 2;
without PyTorch it times flowc alone. ``bench_gpu.py`` uses the same models.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_train_cnn as cnn  # noqa: E402
import bench_train_mlp as mlp  # noqa: E402
import dsl as fl  # noqa: E402

STEPS_CHECKED = 5
CPU_ONLY = fl.ConfigProto(device_count={"GPU": 0})


def flowc_mlp(batch: int):
    model = mlp.FlowcModel(mlp.init_params())
    x, labels = mlp.sample_batch(batch)
    return (model.graph, model.x, model.labels, model.loss, model.train_op, model.init,
            x, labels)


def flowc_cnn(batch: int):
    g, x, labels, loss, train_op, init, _ = cnn.flowc_model(cnn.init_params())
    xv, lv = cnn.sample_batch(batch)
    return g, x, labels, loss, train_op, init, xv, lv


def flowc_session(case, config=None):
    """(the session, a step returning the loss, a step returning nothing)."""
    g, x, labels, loss, train_op, init, xv, lv = case
    sess = fl.Session(graph=g, config=config)
    sess.run(init)
    feed = {x: xv, labels: lv}
    return (sess, lambda: float(sess.run([loss, train_op], feed)[0]),
            lambda: sess.run(train_op, feed))


def devices_of(sess) -> List[str]:
    """Where the session's variables live (GPU:0 when the step went to the GPU)."""
    return sorted({d.rsplit("/", 1)[-1] for d in sess.variable_devices().values()})


def torch_mlp(torch, batch: int, compiled: bool = False
              ) -> Tuple[Callable[[], float], Callable[[], object]]:
    """bench_train_mlp's model and SGD on the GPU; ``compiled``: the forward and loss through
    ``torch.compile`` (the optimizer step stays eager, as usual)."""
    params = mlp.init_params()
    xv, lv = mlp.sample_batch(batch)
    layers = torch.nn.ModuleList()
    for w, b in params:
        layer = torch.nn.Linear(*w.shape)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(w.T.copy()))
            layer.bias.copy_(torch.from_numpy(b))
        layers.append(layer)
    layers = layers.cuda()
    opt = torch.optim.SGD(layers.parameters(), lr=mlp.LEARNING_RATE)
    xh, lh = torch.from_numpy(xv), torch.from_numpy(lv)

    def forward(x, labels):
        h = x
        for k, layer in enumerate(layers):
            h = layer(h)
            if k < len(layers) - 1:
                h = torch.relu(h)
        return torch.nn.functional.cross_entropy(h, labels)
    loss_of = torch.compile(forward) if compiled else forward

    def step():
        loss = loss_of(xh.cuda(), lh.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return lambda: float(step().detach()), step


def torch_cnn(torch, batch: int, compiled: bool = False
              ) -> Tuple[Callable[[], float], Callable[[], object]]:
    """bench_train_cnn's PyTorch model, on the GPU (NCHW; the input converted once);
    ``compiled`` as for ``torch_mlp``."""
    F = torch.nn.functional
    xv, lv = cnn.sample_batch(batch)
    modules = cnn.torch_layers(torch, cnn.init_params()).cuda()
    conv1, conv2, dense, out = modules
    opt = torch.optim.SGD(modules.parameters(), lr=cnn.LEARNING_RATE)
    xh = torch.from_numpy(xv).permute(0, 3, 1, 2).contiguous()
    lh = torch.from_numpy(lv)

    def forward(x, labels):
        h = F.max_pool2d(F.relu(conv1(x)), 2)
        h = F.max_pool2d(F.relu(conv2(h)), 2).permute(0, 2, 3, 1).reshape(x.shape[0], -1)
        return F.cross_entropy(out(F.relu(dense(h))), labels)
    loss_of = torch.compile(forward) if compiled else forward

    def step():
        loss = loss_of(xh.cuda(), lh.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return lambda: float(step().detach()), step


def check_losses(name: str, gpu: Callable[[], float], cpu: Callable[[], float],
                 torch_loss: Optional[Callable[[], float]], rtol: float) -> None:
    """The first steps' losses on the GPU equal the CPU session's and PyTorch's (where
    PyTorch is there)."""
    g = [gpu() for _ in range(STEPS_CHECKED)]
    c = [cpu() for _ in range(STEPS_CHECKED)]
    t = [torch_loss() for _ in range(STEPS_CHECKED)] if torch_loss else None
    print(f"{name} losses: flowc GPU {np.round(g, 5).tolist()}, flowc CPU "
          f"{np.round(c, 5).tolist()}" + (f", torch GPU {np.round(t, 5).tolist()}" if t else ""))
    np.testing.assert_allclose(g, c, rtol=rtol, err_msg=f"{name}: GPU vs CPU session")
    if t:
        np.testing.assert_allclose(g, t, rtol=rtol,
                                   err_msg=f"{name}: flowc vs PyTorch on the GPU")


def per_step_ms(step: Callable[[], object], finish: Callable[[], object], steps: int,
                repeats: int) -> float:
    """Milliseconds a step: ``steps`` steps back to back, then ``finish`` (a wait for the
    GPU), the median of ``repeats`` rounds after a warm-up round."""
    times = []
    for r in range(repeats + 1):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        finish()
        if r:
            times.append((time.perf_counter() - start) / steps)
    return statistics.median(times) * 1e3


CASES = {"mlp": (flowc_mlp, torch_mlp, 1e-3, "MLP 784-256-256-10 SGD"),
         "cnn": (flowc_cnn, torch_cnn, 2e-3, "CNN (bench_train_cnn) SGD")}
DEFAULT_CASES = "mlp:128,mlp:1024,cnn:64,cnn:256"


def parse_cases(text: str) -> List[Tuple[str, int]]:
    cases = []
    for item in text.split(","):
        name, _, batch = item.strip().partition(":")
        if name not in CASES or not batch.isdigit() or int(batch) < 1:
            raise SystemExit(f"bad case {item!r}: expected mlp:<batch> or cnn:<batch>")
        cases.append((name, int(batch)))
    return cases


def training_row(torch, name: str, batch: int, steps: int, repeats: int) -> tuple:
    """(label, flowc ms, torch eager ms or None, torch.compile ms or None) of one case, its
    losses checked first."""
    flowc_case, torch_case, rtol, label = CASES[name]
    gpu_sess, gpu_loss, gpu_step = flowc_session(flowc_case(batch))
    cpu_sess, cpu_loss, _ = flowc_session(flowc_case(batch), CPU_ONLY)
    eager = torch_case(torch, batch) if torch else None
    check_losses(f"{name} b{batch}", gpu_loss, cpu_loss, eager[0] if eager else None, rtol)
    cpu_sess.close()
    print(f"{name} b{batch}: flowc variables on {devices_of(gpu_sess)}", flush=True)
    flowc_ms = per_step_ms(gpu_step, gpu_loss, steps, repeats)
    gpu_sess.close()
    eager_ms = compiled_ms = None
    if torch:
        sync = torch.cuda.synchronize
        eager_ms = per_step_ms(eager[1], sync, steps, repeats)
        try:
            compiled = torch_case(torch, batch, compiled=True)
            compiled[1]()                                  # compiles
            compiled_ms = per_step_ms(compiled[1], sync, steps, repeats)
        except Exception as e:                             # noqa: BLE001 (reported, not fatal)
            print(f"{name} b{batch}: torch.compile failed: {type(e).__name__}: {e}")
    return f"{label}, batch {batch}", flowc_ms, eager_ms, compiled_ms


def _cell(ms: Optional[float]) -> str:
    return f"{ms:10.3f}" if ms is not None else f"{'-':>10s}"


def _ratio(a: float, b: Optional[float]) -> str:
    return f"{a / b:8.2f}" if b else f"{'-':>8s}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES,
                    help=f"comma-separated model:batch (default {DEFAULT_CASES})")
    ap.add_argument("--steps", type=int, default=20, help="steps a timed round")
    ap.add_argument("--repeats", type=int, default=7, help="timed rounds (the median is kept)")
    args = ap.parse_args()
    from runtime.cuda_module import cuda_status
    ok, why = cuda_status()
    if not ok:
        print(f"no usable GPU: {why}")
        return 2
    try:
        import torch
        if not torch.cuda.is_available():
            print("PyTorch sees no CUDA GPU: timing flowc alone")
            torch = None
    except ImportError:
        print("PyTorch is not installed: timing flowc alone")
        torch = None
    if torch:
        print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    rows = [training_row(torch, name, batch, args.steps, args.repeats)
            for name, batch in parse_cases(args.cases)]
    print(f"\n{'training step':40s} {'flowc ms':>10s} {'eager ms':>10s} {'compile ms':>10s} "
          f"{'/eager':>8s} {'/compile':>8s}")
    for label, f, e, c in rows:
        print(f"{label:40s} {_cell(f)} {_cell(e)} {_cell(c)} {_ratio(f, e)} {_ratio(f, c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
