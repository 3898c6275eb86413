"""One SGD training step of a small CNN on 28x28x1 (MNIST-sized) images, batch 64 (float32,
NHWC): conv 5x5x1x32 SAME + bias, ReLU, 2x2 max pool, conv 5x5x32x64 SAME + bias, ReLU, 2x2
max pool, flatten, dense 3136x128 + bias, ReLU, dense 128x10 + bias, mean sparse softmax
cross-entropy, learning rate 0.01. flowc's compiled C and interpreter beside, when installed,
PyTorch (eager and torch.compile) and TensorFlow (TF1 session, tf.function, XLA).

    python3 examples/benchmarks/bench_train_cnn.py [--batch B] [--repeats N] [--threads T]
    python3 examples/benchmarks/bench_train_cnn.py --profile STEPS [--threads T]

With --profile, only flowc's compiled step runs: STEPS traced steps (fl.RunOptions FULL_TRACE),
then a table of each kernel's fastest and median time over them (the fastest is the steadier
figure on a busy machine) and the step's wall time.

Every framework starts from the same weights (drawn with numpy) and trains on the same batch;
the losses of the first --check-steps steps must agree with flowc's interpreter (the
reference) before anything is timed.
"""
from __future__ import annotations

import argparse
import os
from typing import Callable, Dict, List, Tuple

import numpy as np

from bench_common import (Row, add_threads_argument, apply_framework_threads, apply_threads,
                          environment_line, optional_import, print_table)
from bench_train_mlp import interleaved_medians

import dsl as fl  # noqa: E402

LEARNING_RATE = 0.01
IMAGE = (28, 28, 1)
FLAT = 7 * 7 * 64
CLASSES = 10
REFERENCE = "flowc interpreter (Session.run)"
BASELINE = "flowc compiled C (Session.run)"
Params = Dict[str, np.ndarray]


def init_params(seed: int = 0) -> Params:
    """Glorot-uniform filters and weights (HWIO filters, [in, out] weights), small biases."""
    rng = np.random.default_rng(seed)

    def glorot(shape, fan_in, fan_out):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, shape).astype(np.float32)

    def bias(n):
        return rng.uniform(-0.1, 0.1, n).astype(np.float32)
    return {"f1": glorot((5, 5, 1, 32), 25, 25 * 32), "b1": bias(32),
            "f2": glorot((5, 5, 32, 64), 25 * 32, 25 * 64), "b2": bias(64),
            "w3": glorot((FLAT, 128), FLAT, 128), "b3": bias(128),
            "w4": glorot((128, CLASSES), 128, CLASSES), "b4": bias(CLASSES)}


ORDER = ("f1", "b1", "f2", "b2", "w3", "b3", "w4", "b4")


def sample_batch(batch: int, seed: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (batch, *IMAGE)).astype(np.float32)
    return x, rng.integers(0, CLASSES, batch).astype(np.int64)


# --- flowc ---------------------------------------------------------------------------------
def flowc_model(params: Params):
    """(graph, x, labels, loss, train_op, init, how the SGD step is built)."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, *IMAGE], name="x")
        labels = fl.placeholder(fl.int64, [None], name="labels")
        v = {k: fl.Variable(params[k], name=k) for k in ORDER}
        h = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(x, v["f1"], 1, "SAME"), v["b1"]))
        h = fl.nn.max_pool(h, 2, 2, "VALID")
        h = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(h, v["f2"], 1, "SAME"), v["b2"]))
        h = fl.nn.max_pool(h, 2, 2, "VALID")
        h = fl.nn.relu(fl.matmul(fl.reshape(h, [-1, FLAT]), v["w3"]) + v["b3"])
        logits = fl.matmul(h, v["w4"]) + v["b4"]
        loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits), name="loss")
        var_list = [v[k] for k in ORDER]
        if hasattr(fl, "train") and hasattr(fl.train, "GradientDescentOptimizer"):
            train_op = fl.train.GradientDescentOptimizer(LEARNING_RATE).minimize(
                loss, var_list=var_list)
            how = "fl.train.GradientDescentOptimizer"
        else:
            grads = fl.gradients(loss, var_list)
            train_op = fl.group(*[w.assign_sub(LEARNING_RATE * gw, read_value=False)
                                  for gw, w in zip(grads, var_list)])
            how = "assign_sub(lr * fl.gradients)"
        init = fl.global_variables_initializer()
    return g, x, labels, loss, train_op, init, how


def flowc_trainer(model, backend: str, xv, lv):
    g, x, labels, loss, train_op, init, _ = model
    sess = fl.Session(graph=g, backend=backend)
    sess.run(init)
    feed = {x: xv, labels: lv}
    return (lambda: float(sess.run([loss, train_op], feed)[0]),
            lambda: sess.run(train_op, feed))


# --- PyTorch -------------------------------------------------------------------------------
def torch_layers(torch, params: Params):
    """The model's four PyTorch layers (conv1, conv2, dense, out) holding ``params``:
    filters HWIO -> OIHW, dense weights transposed."""
    nn = torch.nn
    conv1, conv2 = nn.Conv2d(1, 32, 5, padding=2), nn.Conv2d(32, 64, 5, padding=2)
    dense, out = nn.Linear(FLAT, 128), nn.Linear(128, CLASSES)
    with torch.no_grad():
        conv1.weight.copy_(torch.from_numpy(params["f1"].transpose(3, 2, 0, 1).copy()))
        conv1.bias.copy_(torch.from_numpy(params["b1"]))
        conv2.weight.copy_(torch.from_numpy(params["f2"].transpose(3, 2, 0, 1).copy()))
        conv2.bias.copy_(torch.from_numpy(params["b2"]))
        dense.weight.copy_(torch.from_numpy(params["w3"].T.copy()))
        dense.bias.copy_(torch.from_numpy(params["b3"]))
        out.weight.copy_(torch.from_numpy(params["w4"].T.copy()))
        out.bias.copy_(torch.from_numpy(params["b4"]))
    return nn.ModuleList([conv1, conv2, dense, out])


def torch_trainer(torch, params: Params, xv, lv, compile: bool = False):
    """NCHW convolutions (PyTorch's layout; the input is converted once, outside the timing);
    the activations go back to NHWC before the flatten so the dense weights are the same."""
    F = torch.nn.functional
    modules = torch_layers(torch, params)
    conv1, conv2, dense, out = modules
    opt = torch.optim.SGD(modules.parameters(), lr=LEARNING_RATE)
    xt = torch.from_numpy(xv).permute(0, 3, 1, 2).contiguous()
    lt = torch.from_numpy(lv)

    def forward():
        h = F.max_pool2d(F.relu(conv1(xt)), 2)
        h = F.max_pool2d(F.relu(conv2(h)), 2).permute(0, 2, 3, 1).reshape(h.shape[0], -1)
        return F.cross_entropy(out(F.relu(dense(h))), lt)
    if compile:                     # forward and backward compiled; the SGD update eager
        forward = torch.compile(forward)

    def step():
        opt.zero_grad()
        loss = forward()
        loss.backward()
        opt.step()
        return loss
    return lambda: float(step().detach()), step


# --- TensorFlow ----------------------------------------------------------------------------
def tensorflow_trainer(tf, params: Params, xv, lv, jit: bool = False):
    v = {k: tf.Variable(params[k]) for k in ORDER}
    flat = [v[k] for k in ORDER]
    xt, lt = tf.constant(xv), tf.constant(lv)

    @tf.function(jit_compile=jit)
    def step():
        with tf.GradientTape() as tape:
            loss = tf_loss(tf, v, xt, lt)
        for var, g in zip(flat, tape.gradient(loss, flat)):
            var.assign_sub(LEARNING_RATE * g)
        return loss
    return lambda: float(step().numpy()), step


def tf_loss(tf, v, x, labels):
    h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, v["f1"], 1, "SAME"), v["b1"]))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, v["f2"], 1, "SAME"), v["b2"]))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.relu(tf.matmul(tf.reshape(h, [-1, FLAT]), v["w3"]) + v["b3"])
    logits = tf.matmul(h, v["w4"]) + v["b4"]
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))


def tf1_session_trainer(tf, params: Params, xv, lv):
    """TensorFlow 1.x style: a graph, tf.compat.v1.train.GradientDescentOptimizer, a session."""
    graph = tf.Graph()
    with graph.as_default():
        v = {k: tf.compat.v1.Variable(params[k]) for k in ORDER}
        loss = tf_loss(tf, v, tf.constant(xv), tf.constant(lv))
        train = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
        init = tf.compat.v1.global_variables_initializer()
    sess = tf.compat.v1.Session(graph=graph)
    sess.run(init)
    return lambda: float(sess.run([loss, train])[0]), lambda: sess.run(train)


# --- for run_all.py ------------------------------------------------------------------------
NAME = "cnn"


def measure(fw, quick: bool = False, batch: int = 64) -> list:
    from bench_common import FLOWC, Result
    params = init_params()
    xv, lv = sample_batch(batch)
    model = flowc_model(params)
    trainers = {FLOWC: (*flowc_trainer(model, "c", xv, lv), 0),
                REFERENCE: (*flowc_trainer(model, "interpreter", xv, lv), 0)}
    if fw.torch is not None:
        trainers["PyTorch eager"] = (*torch_trainer(fw.torch, params, xv, lv), 0)
        trainers["torch.compile"] = (*torch_trainer(fw.torch, params, xv, lv, compile=True), 0)
    if fw.tf is not None:
        trainers["TF1 session"] = (*tf1_session_trainer(fw.tf, params, xv, lv), 0)
        trainers["tf.function"] = (*tensorflow_trainer(fw.tf, params, xv, lv), 0)
        trainers["tf.function XLA"] = (*tensorflow_trainer(fw.tf, params, xv, lv, jit=True), 0)
    check_losses(trainers, 2 if quick else 3)
    del trainers[REFERENCE]
    repeats = 5 if quick else 30
    medians = interleaved_medians({k: (step, repeats) for k, (_, step, _) in trainers.items()})
    bench = f"CNN train step 28x28x1, batch {batch}"
    return ([Result(bench, k, v, batch, "examples") for k, v in medians.items()]
            + [Result(bench, "numpy", None, note="not measured: no hand-written numpy CNN")]
            + fw.missing(bench, ("PyTorch eager", "torch.compile", "TF1 session",
                                 "tf.function", "tf.function XLA")))


# --- per-kernel profile of flowc's step ----------------------------------------------------
def profile_flowc(batch: int, steps: int) -> None:
    """Run ``steps`` traced steps of the compiled step; print each kernel's min and median."""
    import statistics
    import time
    g, x, labels, loss, train_op, init, _ = flowc_model(init_params())
    xv, lv = sample_batch(batch)
    sess = fl.Session(graph=g, backend="c")
    sess.run(init)
    options = fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE)
    feed = {x: xv, labels: lv}
    for _ in range(3):                               # compile, warm BLAS and the arena
        sess.run(train_op, feed, options=options, run_metadata=fl.RunMetadata())
    times: Dict[Tuple[str, str], List[float]] = {}
    walls = []
    for _ in range(steps):
        md = fl.RunMetadata()
        t0 = time.perf_counter()
        sess.run(train_op, feed, options=options, run_metadata=md)
        walls.append(time.perf_counter() - t0)
        for k in md.step_stats.kernels:
            times.setdefault((k.node, k.op), []).append(k.total_ns / 1e6)
    rows = sorted(times.items(), key=lambda kv: -statistics.median(kv[1]))
    print(f"flowc CNN step, batch {batch}: {steps} traced steps; kernel times in ms")
    print(f"{'min':>9} {'median':>9}  {'op':26} node")
    for (node, op), ts in rows:
        print(f"{min(ts):9.3f} {statistics.median(ts):9.3f}  {op:26} {node}")
    print(f"{sum(min(ts) for ts in times.values()):9.3f} "
          f"{sum(statistics.median(ts) for ts in times.values()):9.3f}  all kernels "
          f"(sums); step wall time median {statistics.median(walls) * 1e3:.3f} ms")


# --- the benchmark -------------------------------------------------------------------------
def check_losses(trainers: Dict[str, Tuple[Callable, Callable, int]], steps: int) -> None:
    losses = {name: [check() for _ in range(steps)] for name, (check, _, _) in trainers.items()}
    want = np.array(losses[REFERENCE])
    worst = 0.0
    for name, got in losses.items():
        diff = float(np.max(np.abs(np.array(got) - want) / np.abs(want)))
        worst = max(worst, diff)
        if diff > 1e-4:
            raise SystemExit(f"{name} disagrees with the interpreter: losses {got} vs "
                             f"{want.tolist()}")
    print(f"check: the losses of {steps} steps agree in all {len(losses)} frameworks "
          f"(max relative difference {worst:.1e}); interpreter: "
          + ", ".join(f"{v:.6f}" for v in want))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=50, help="timed steps per framework")
    parser.add_argument("--check-steps", type=int, default=3,
                        help="steps whose losses must agree before timing")
    parser.add_argument("--no-xla", dest="xla", action="store_false",
                        help="leave out TensorFlow's jit_compile=True row")
    parser.add_argument("--profile", type=int, metavar="STEPS", default=0,
                        help="only profile flowc's compiled step over STEPS traced steps")
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)
    if args.profile:
        profile_flowc(args.batch, args.profile)
        return

    torch, tf = optional_import("torch"), optional_import("tensorflow")
    apply_framework_threads(torch, tf, args.threads)
    params = init_params()
    xv, lv = sample_batch(args.batch)
    model = flowc_model(params)
    few = max(args.repeats // 10, 3)
    trainers: Dict[str, Tuple[Callable, Callable, int]] = {
        BASELINE: (*flowc_trainer(model, "c", xv, lv), args.repeats),
        REFERENCE: (*flowc_trainer(model, "interpreter", xv, lv), few),
    }
    if torch is not None:
        trainers["PyTorch (eager, optim.SGD)"] = (*torch_trainer(torch, params, xv, lv),
                                                  args.repeats)
        trainers["PyTorch (torch.compile, optim.SGD)"] = (
            *torch_trainer(torch, params, xv, lv, compile=True), args.repeats)
    if tf is not None:
        trainers["TensorFlow (TF1 session)"] = (*tf1_session_trainer(tf, params, xv, lv),
                                                args.repeats)
        trainers["TensorFlow (tf.function)"] = (*tensorflow_trainer(tf, params, xv, lv),
                                                args.repeats)
        if args.xla:
            trainers["TensorFlow (tf.function, XLA)"] = (
                *tensorflow_trainer(tf, params, xv, lv, jit=True), args.repeats)
    print(environment_line(torch, tf))
    check_losses(trainers, args.check_steps)
    medians = interleaved_medians({name: (step, repeats)
                                   for name, (_, step, repeats) in trainers.items()})
    rows: List[Row] = [Row(name, seconds) for name, seconds in medians.items()]
    if torch is None:
        rows.append(Row("PyTorch", None, "not installed"))
    if tf is None:
        rows.append(Row("TensorFlow", None, "not installed"))
    title = (f"CNN training step (28x28x1 -> conv5x5x32 -> pool -> conv5x5x64 -> pool -> "
             f"dense 128 -> dense 10), "
             f"batch {args.batch}, SGD (flowc: {model[-1]}; median of {args.repeats} steps in 5 "
             f"interleaved rounds, interpreter: {few})")
    print_table(title, rows, baseline=BASELINE, unit="ms", work=args.batch, work_unit="examples")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
