"""One SGD training step of the 784-256-256-10 MLP (ReLU, mean sparse softmax cross-entropy,
learning rate 0.01, float32): flowc's compiled C and interpreter beside a hand-written numpy
forward + backward + update and, when installed, PyTorch and TensorFlow (a TF1 session,
tf.function, and tf.function with XLA).

    python3 examples/benchmarks/bench_train_mlp.py [--batch B] [--repeats N] [--threads T]
    python3 examples/benchmarks/bench_train_mlp.py --profile [--batch B] [--threads T]

Without --batch it measures batches of 1, 128 and 1024, one table each. Every framework starts
from the same weights (drawn with numpy) and trains on the same batch; the losses of the first
--check-steps steps must agree before anything is timed. --profile instead breaks flowc's
compiled step down: empty step, forward only, forward + backward, full step; cProfile of the
Python side; and each kind of kernel of the step timed as a step of its own.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import time
from typing import Callable, Dict, List, Tuple

import numpy as np

from bench_common import (Row, add_threads_argument, apply_framework_threads, apply_threads,
                          environment_line, median_seconds, optional_import, print_table)

import dsl as fl  # noqa: E402

LAYER_SIZES = (784, 256, 256, 10)
LEARNING_RATE = 0.01
BATCHES = (1, 128, 1024)
NUMPY = "numpy (hand-written backward)"
Params = List[Tuple[np.ndarray, np.ndarray]]


def init_params(seed: int = 0) -> Params:
    """Glorot-uniform weights and small random biases (not zero, so bias gradients show)."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(LAYER_SIZES[:-1], LAYER_SIZES[1:]):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        w = rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)
        b = rng.uniform(-0.1, 0.1, fan_out).astype(np.float32)
        params.append((w, b))
    return params


def sample_batch(batch: int, seed: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (batch, LAYER_SIZES[0])).astype(np.float32)
    return x, rng.integers(0, LAYER_SIZES[-1], batch).astype(np.int64)


# --- flowc ---------------------------------------------------------------------------------
def have_optimizer() -> bool:
    return hasattr(fl, "train") and hasattr(fl.train, "GradientDescentOptimizer")


class FlowcModel:
    """The MLP as a flowc graph: variables from numpy values, one train op."""

    def __init__(self, params: Params):
        self.graph = fl.Graph()
        with self.graph.as_default():
            self.x = fl.placeholder(fl.float32, [None, LAYER_SIZES[0]], name="x")
            self.labels = fl.placeholder(fl.int64, [None], name="labels")
            self.vars = []
            h = self.x
            for i, (w, b) in enumerate(params):
                wv, bv = fl.Variable(w, name=f"w{i}"), fl.Variable(b, name=f"b{i}")
                self.vars += [wv, bv]
                h = fl.matmul(h, wv) + bv
                if i < len(params) - 1:
                    h = fl.nn.relu(h)
            self.logits = h
            self.loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
                labels=self.labels, logits=h), name="loss")
            self.grads = fl.gradients(self.loss, self.vars)        # fetched by --profile
            if have_optimizer():
                self.train_op = fl.train.GradientDescentOptimizer(LEARNING_RATE).minimize(
                    self.loss, var_list=self.vars)
                self.sgd = "fl.train.GradientDescentOptimizer"
            else:                       # what GradientDescentOptimizer builds
                self.train_op = fl.group(*[v.assign_sub(LEARNING_RATE * g, read_value=False)
                                           for g, v in zip(self.grads, self.vars)])
                self.sgd = "assign_sub(lr * fl.gradients)"
            self.init = fl.global_variables_initializer()

    def session(self, backend: str):
        sess = fl.Session(graph=self.graph, backend=backend)
        sess.run(self.init)
        return sess


def flowc_trainer(model: FlowcModel, backend: str, x, labels):
    sess = model.session(backend)
    feed = {model.x: x, model.labels: labels}
    return (lambda: float(sess.run([model.loss, model.train_op], feed)[0]),
            lambda: sess.run(model.train_op, feed))


# --- numpy ---------------------------------------------------------------------------------
def numpy_trainer(params: Params, x, labels):
    ws = [(w.copy(), b.copy()) for w, b in params]
    rows = np.arange(len(labels))

    def step() -> float:
        acts = [x]
        h = x
        for i, (w, b) in enumerate(ws):
            h = h @ w + b
            if i < len(ws) - 1:
                h = np.maximum(h, 0)
            acts.append(h)
        m = h.max(axis=1, keepdims=True)
        e = np.exp(h - m)
        s = e.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) + m[:, 0] - h[rows, labels]))
        g = e / s
        g[rows, labels] -= 1
        g /= len(labels)
        for i in range(len(ws) - 1, -1, -1):
            w, b = ws[i]
            gw, gb = acts[i].T @ g, g.sum(axis=0)
            if i:
                g = (g @ w.T) * (acts[i] > 0)
            w -= LEARNING_RATE * gw
            b -= LEARNING_RATE * gb
        return loss
    return step, step


# --- PyTorch -------------------------------------------------------------------------------
def torch_trainer(torch, params: Params, x, labels, compile: bool = False):
    layers = []
    for i, (w, b) in enumerate(params):
        lin = torch.nn.Linear(*w.shape)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w.T.copy()))
            lin.bias.copy_(torch.from_numpy(b))
        layers.append(lin)
        if i < len(params) - 1:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    if compile:                     # forward and backward compiled; the SGD update eager
        model = torch.compile(model)
    xt, lt = torch.from_numpy(x), torch.from_numpy(labels)

    def step() -> float:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt), lt)
        loss.backward()
        opt.step()
        return loss
    return lambda: float(step().detach()), step


# --- TensorFlow ----------------------------------------------------------------------------
def tensorflow_trainer(tf, params: Params, x, labels, jit: bool = False):
    tvars = [(tf.Variable(w), tf.Variable(b)) for w, b in params]
    flat = [v for pair in tvars for v in pair]
    xt, lt = tf.constant(x), tf.constant(labels)

    @tf.function(jit_compile=jit)
    def step():
        with tf.GradientTape() as tape:
            h = xt
            for i, (w, b) in enumerate(tvars):
                h = tf.matmul(h, w) + b
                if i < len(tvars) - 1:
                    h = tf.nn.relu(h)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=lt, logits=h))
        for v, g in zip(flat, tape.gradient(loss, flat)):
            v.assign_sub(LEARNING_RATE * g)
        return loss
    return lambda: float(step().numpy()), step


def tf1_session_trainer(tf, params: Params, x, labels):
    """TensorFlow 1.x style: a graph, tf.compat.v1.train.GradientDescentOptimizer, a session."""
    graph = tf.Graph()
    with graph.as_default():
        h = tf.constant(x)
        for i, (w, b) in enumerate(params):
            h = tf.matmul(h, tf.compat.v1.Variable(w)) + tf.compat.v1.Variable(b)
            if i < len(params) - 1:
                h = tf.nn.relu(h)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.constant(labels), logits=h))
        train = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
        init = tf.compat.v1.global_variables_initializer()
    sess = tf.compat.v1.Session(graph=graph)
    sess.run(init)
    return lambda: float(sess.run([loss, train])[0]), lambda: sess.run(train)


# --- for run_all.py ------------------------------------------------------------------------
NAME = "mlp"


def peer_trainers(fw, params: Params, x, labels) -> Dict[str, Tuple[Callable, Callable]]:
    """Every installed peer's (step returning the loss, step), named as in run_all's table."""
    out: Dict[str, Tuple[Callable, Callable]] = {"numpy": numpy_trainer(params, x, labels)}
    if fw.torch is not None:
        out["PyTorch eager"] = torch_trainer(fw.torch, params, x, labels)
        out["torch.compile"] = torch_trainer(fw.torch, params, x, labels, compile=True)
    if fw.tf is not None:
        out["TF1 session"] = tf1_session_trainer(fw.tf, params, x, labels)
        out["tf.function"] = tensorflow_trainer(fw.tf, params, x, labels)
        out["tf.function XLA"] = tensorflow_trainer(fw.tf, params, x, labels, jit=True)
    return out


def measure(fw, quick: bool = False) -> list:
    from bench_common import FLOWC, Result
    results = []
    for batch in BATCHES:
        params = init_params()
        x, labels = sample_batch(batch)
        trainers = {FLOWC: flowc_trainer(FlowcModel(params), "c", x, labels)}
        trainers.update(peer_trainers(fw, params, x, labels))
        checked = {name: (check, step, 0) for name, (check, step) in trainers.items()}
        checked[NUMPY] = checked.pop("numpy")
        check_losses(checked, 3)
        repeats = 10 if quick else 50
        medians = interleaved_medians({k: (step, repeats) for k, (_, step) in trainers.items()})
        bench = f"MLP train step, batch {batch}"
        results += [Result(bench, k, v, batch, "examples") for k, v in medians.items()]
        results += fw.missing(bench, ("PyTorch eager", "torch.compile", "TF1 session",
                                      "tf.function", "tf.function XLA"))
    return results


# --- the benchmark -------------------------------------------------------------------------
def interleaved_medians(steps: Dict[str, Tuple[Callable, int]], rounds: int = 5,
                        warmup: int = 2, settle: float = 0.25) -> Dict[str, float]:
    """Median seconds per call of each step, timed in ``rounds`` interleaved rounds (each round
    runs every step its share of its repeats), so that a change of machine load (a shared or
    busy machine) falls on every row alike instead of on whichever row ran at the time. Before
    each block of steps it sleeps ``settle`` seconds: the BLAS and OpenMP worker threads of the
    library that ran before keep spinning for a while after their last call (OpenBLAS for
    about 2**28 cycles), and would otherwise take cores from the next one. The order of the
    steps rotates from round to round, so that no step always runs right after the same
    other one (whose memory traffic leaves the caches in a state that favours or hurts it)."""
    for step, _ in steps.values():
        for _ in range(warmup):
            step()
    times: Dict[str, List[float]] = {name: [] for name in steps}
    names = list(steps)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:   # each round rotated
            step, repeats = steps[name]
            time.sleep(settle)
            step()                                  # untimed: caches and thread pools warm
            for _ in range(max(repeats // rounds, 1)):
                t0 = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def check_losses(trainers: Dict[str, Tuple[Callable, Callable, int]], steps: int) -> None:
    """Run ``steps`` steps of each framework and compare the loss of every step with numpy's."""
    losses = {name: [check() for _ in range(steps)] for name, (check, _, _) in trainers.items()}
    want = np.array(losses[NUMPY])
    worst = 0.0
    for name, got in losses.items():
        diff = float(np.max(np.abs(np.array(got) - want) / np.abs(want)))
        worst = max(worst, diff)
        if diff > 1e-4:
            raise SystemExit(f"{name} disagrees with numpy: losses {got} vs {want.tolist()}")
    print(f"check: the losses of {steps} steps agree in all {len(losses)} frameworks "
          f"(max relative difference {worst:.1e}); numpy: "
          + ", ".join(f"{v:.6f}" for v in want))


def run_batch(batch: int, args, torch, tf) -> None:
    params = init_params()
    x, labels = sample_batch(batch)
    model = FlowcModel(params)
    few = max(args.repeats // 10, 3)
    trainers: Dict[str, Tuple[Callable, Callable, int]] = {
        "flowc compiled C (Session.run)": (*flowc_trainer(model, "c", x, labels), args.repeats),
        "flowc interpreter (Session.run)": (*flowc_trainer(model, "interpreter", x, labels), few),
        NUMPY: (*numpy_trainer(params, x, labels), args.repeats),
    }
    if torch is not None:
        trainers["PyTorch (eager, optim.SGD)"] = (*torch_trainer(torch, params, x, labels),
                                                  args.repeats)
    if tf is not None:
        trainers["TensorFlow (TF1 session)"] = (*tf1_session_trainer(tf, params, x, labels),
                                                args.repeats)
        trainers["TensorFlow (tf.function)"] = (*tensorflow_trainer(tf, params, x, labels),
                                                args.repeats)
        if args.xla:
            trainers["TensorFlow (tf.function, XLA)"] = (
                *tensorflow_trainer(tf, params, x, labels, jit=True), args.repeats)
    check_losses(trainers, args.check_steps)
    medians = interleaved_medians({name: (step, repeats)
                                   for name, (_, step, repeats) in trainers.items()})
    rows = [Row(name, seconds) for name, seconds in medians.items()]
    if torch is None:
        rows.append(Row("PyTorch", None, "not installed"))
    if tf is None:
        rows.append(Row("TensorFlow", None, "not installed"))
    print_table(f"MLP training step {'-'.join(map(str, LAYER_SIZES))}, batch {batch}, SGD "
                f"(flowc: {model.sgd}; median of {args.repeats} steps in 5 interleaved rounds, "
                f"interpreter: {few})",
                rows, baseline="flowc compiled C (Session.run)", unit="ms", work=batch,
                work_unit="examples")
    print()


# --- profile of flowc's compiled step ------------------------------------------------------
class _Fed:
    """Makes fed float32 placeholders of one graph and keeps their values."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.feed: Dict[fl.Tensor, np.ndarray] = {}

    def __call__(self, *shape) -> fl.Tensor:
        t = fl.placeholder(fl.float32, shape)
        self.feed[t] = self.rng.uniform(-1, 1, shape).astype(np.float32)
        return t


def _kernel_graphs(batch: int) -> Dict[str, Callable[[_Fed], list]]:
    """One small graph per kind of kernel of the training step, at the step's shapes; the
    operands are fed placeholders, so no pass can fold them away."""
    pairs = list(zip(LAYER_SIZES[:-1], LAYER_SIZES[1:]))

    def xent(fed: _Fed) -> list:
        labels = fl.placeholder(fl.int64, [batch])
        fed.feed[labels] = fed.rng.integers(0, LAYER_SIZES[-1], batch).astype(np.int64)
        return [fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=fed(batch, LAYER_SIZES[-1])))]

    def relu_and_bias_grads(fed: _Fed) -> list:
        out = []
        for _, fo in pairs[:-1]:
            rg = fl.raw_ops.ReluGrad(gradients=fed(batch, fo), features=fed(batch, fo))
            out += [rg, fl.reduce_sum(rg, axis=0)]
        return out

    def sgd_update(fed: _Fed) -> list:
        ops = []
        for fi, fo in pairs:
            for shape in ((fi, fo), (fo,)):
                v = fl.Variable(np.zeros(shape, np.float32))
                ops.append(v.assign_sub(LEARNING_RATE * fed(*shape), read_value=False))
        return [fl.group(*ops)]

    return {
        "MatMul x @ W (3, forward)":
            lambda fed: [fl.matmul(fed(batch, fi), fed(fi, fo)) for fi, fo in pairs],
        "MatMul x^T @ g (3, weight gradients)":
            lambda fed: [fl.matmul(fed(batch, fi), fed(batch, fo), transpose_a=True)
                         for fi, fo in pairs],
        "MatMul g @ W^T (2, input gradients)":     # none for the input layer
            lambda fed: [fl.matmul(fed(batch, fo), fed(fi, fo), transpose_b=True)
                         for fi, fo in pairs[1:]],
        "SparseSoftmaxCrossEntropyWithLogits + Mean": xent,
        "bias add + Relu (2 hidden layers)":
            lambda fed: [fl.nn.relu(fed(batch, fo) + fed(fo)) for _, fo in pairs[:-1]],
        "ReluGrad + bias gradient Sum (2 layers)": relu_and_bias_grads,
        "SGD update: 6 x AssignSub(lr * g)": sgd_update,
    }


def _kernel_step(build: Callable[[_Fed], list]) -> Callable[[], object]:
    g = fl.Graph()
    with g.as_default():
        fed = _Fed(np.random.default_rng(2))
        fetches = build(fed)
        init = fl.global_variables_initializer()
    sess = fl.Session(graph=g, backend="c")
    sess.run(init)
    return lambda: sess.run(fetches, fed.feed)


def profile(batch: int, repeats: int) -> None:
    """Where the compiled step's time goes: parts of the step, the Python side, the kernels."""
    model = FlowcModel(init_params())
    x, labels = sample_batch(batch)
    sess = model.session("c")
    feed = {model.x: x, model.labels: labels}
    with model.graph.as_default():
        one = fl.placeholder(fl.float32, [], name="one")
        empty = fl.identity(one)
    full = "full step (sess.run(train_op))"
    empty_name = "empty step (one scalar feed and fetch)"
    parts = {empty_name: lambda: sess.run(empty, {one: 1.0}),
             "forward only (fetch loss)": lambda: sess.run(model.loss, feed),
             "forward + backward (fetch the 6 gradients)": lambda: sess.run(model.grads, feed),
             full: lambda: sess.run(model.train_op, feed),
             "full step + loss fetched": lambda: sess.run([model.loss, model.train_op], feed)}
    medians = interleaved_medians({k: (fn, repeats) for k, fn in parts.items()})
    print_table(f"flowc compiled C: parts of the MLP training step, batch {batch} "
                f"(median of {repeats})", [Row(k, v) for k, v in medians.items()],
                baseline=full)
    print()

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(repeats):
        parts[full]()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(10)
    print(f"cProfile of {repeats} full steps, by own time (the compiled C step is the one "
          "cffi call inside runtime/module.py's call):")
    print("\n".join(line for line in text.getvalue().splitlines()[4:] if line.strip()))
    print()

    kernels = {name: (_kernel_step(build), repeats)
               for name, build in _kernel_graphs(batch).items()}
    kernels[empty_name] = (parts[empty_name], repeats)
    kernels[full] = (parts[full], repeats)
    medians = interleaved_medians(kernels)
    print_table(f"flowc compiled C: each kind of kernel of the step as a step of its own, batch "
                f"{batch} (each row includes one empty step)",
                [Row(k, v) for k, v in medians.items()], baseline=full)
    kernel_sum = sum(v - medians[empty_name] for k, v in medians.items()
                     if k not in (empty_name, full))
    print(f"sum of the kernel rows less one empty step each: {kernel_sum * 1e3:.3f} ms; "
          f"the full step: {medians[full] * 1e3:.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=None,
                        help="one batch size (default: 1, 128 and 1024, one table each)")
    parser.add_argument("--repeats", type=int, default=50, help="timed steps per framework")
    parser.add_argument("--check-steps", type=int, default=3,
                        help="steps whose losses must agree before timing")
    parser.add_argument("--no-xla", dest="xla", action="store_false",
                        help="leave out TensorFlow's jit_compile=True row")
    parser.add_argument("--profile", action="store_true",
                        help="instead of the comparison, break flowc's compiled step down "
                        "(at --batch, default 128)")
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)

    torch, tf = optional_import("torch"), optional_import("tensorflow")
    apply_framework_threads(torch, tf, args.threads)
    print(environment_line(torch, tf))
    if args.profile:
        profile(args.batch or 128, args.repeats)
        return
    for batch in ([args.batch] if args.batch else BATCHES):
        run_batch(batch, args, torch, tf)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
