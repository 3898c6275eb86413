"""One SGD training step of an LSTM language model written with ``fl.while_loop``: flowc's
compiled C (the loop and its gradient are two C ``while`` loops) and interpreter beside
TensorFlow (``tf.while_loop`` in a ``tf.function``, with and without XLA) and PyTorch
(``nn.LSTM``).

    python3 examples/benchmarks/bench_lstm.py [--repeats N] [--threads T] [--small] [--no-xla]

The model (Zaremba et al.'s small LSTM LM, one layer): token ids [seq, batch] -> embedding
(vocabulary 10,000, 512) -> LSTM (hidden 512; gates i, f, g, o as PyTorch orders them) ->
full softmax over the vocabulary at every step -> mean cross-entropy of the next token; SGD
with learning rate 0.1; sequence 20, batch 64, float32. ``--small`` (vocabulary 1,000,
hidden and embedding 64, sequence 10, batch 16) is a quick run.

flowc's loop collects the hidden states in a loop variable that grows by one step per
iteration (``shape_invariants``) and the softmax runs once on all of them, as PyTorch and
TensorFlow do. Every framework starts from the same numpy-drawn weights and the same batch;
the losses of the first --check-steps steps must agree before anything is timed (they are the
warm-up); then the rows take turns, one step each, and each row's median is reported.
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

import numpy as np

from bench_common import (Row, add_threads_argument, apply_framework_threads, apply_threads,
                          environment_line, optional_import, print_table)

import dsl as fl  # noqa: E402

LEARNING_RATE = 0.1


@dataclass(frozen=True)
class Config:
    vocab: int = 10_000
    embed: int = 512
    hidden: int = 512
    seq: int = 20
    batch: int = 64


SMALL = Config(vocab=1000, embed=64, hidden=64, seq=10, batch=16)


def init_params(cfg: Config, seed: int = 0) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def u(*shape, scale=0.1):
        return rng.uniform(-scale, scale, shape).astype(np.float32)
    return {"emb": u(cfg.vocab, cfg.embed), "w": u(cfg.embed + cfg.hidden, 4 * cfg.hidden),
            "b": u(4 * cfg.hidden), "wo": u(cfg.hidden, cfg.vocab), "bo": u(cfg.vocab)}


def sample_batch(cfg: Config, seed: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """Token ids [seq, batch] and the next tokens (the targets), time-major."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, cfg.vocab, (cfg.seq + 1, cfg.batch)).astype(np.int32)
    return tokens[:-1], tokens[1:]


# --- flowc ---------------------------------------------------------------------------------
class FlowcModel:
    def __init__(self, params: Dict[str, np.ndarray], cfg: Config):
        self.graph = fl.Graph()
        B, H = cfg.batch, cfg.hidden
        with self.graph.as_default():
            self.x = fl.placeholder(fl.int32, [cfg.seq, B], name="x")
            self.y = fl.placeholder(fl.int32, [cfg.seq, B], name="y")
            self.steps = fl.placeholder(fl.int32, [], name="steps")    # the loop's trip count
            v = {k: fl.Variable(a, name=k) for k, a in params.items()}
            inputs = fl.gather(v["emb"], self.x)                         # [seq, B, E]

            def cell(t, h, c, hs):
                z = fl.matmul(fl.concat([fl.gather(inputs, t), h], 1), v["w"]) + v["b"]
                i, f, g, o = fl.split(z, 4, axis=1)
                c2 = fl.sigmoid(f) * c + fl.sigmoid(i) * fl.tanh(g)
                h2 = fl.sigmoid(o) * fl.tanh(c2)
                return t + 1, h2, c2, fl.concat([hs, fl.expand_dims(h2, 0)], 0)

            zeros = fl.zeros([B, H])
            _, _, _, hs = fl.while_loop(
                lambda t, h, c, hs: t < self.steps, cell,
                [0, zeros, zeros, fl.zeros([0, B, H])],
                shape_invariants=[[], [B, H], [B, H], [None, B, H]])
            logits = fl.matmul(fl.reshape(hs, [-1, H]), v["wo"]) + v["bo"]
            self.loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
                labels=fl.reshape(self.y, [-1]), logits=logits))
            self.train_op = fl.train.GradientDescentOptimizer(LEARNING_RATE).minimize(self.loss)
            self.init = fl.global_variables_initializer()


def flowc_trainer(model: FlowcModel, backend: str, x, y, cfg: Config):
    sess = fl.Session(graph=model.graph, backend=backend)
    sess.run(model.init)
    feed = {model.x: x, model.y: y, model.steps: np.int32(cfg.seq)}
    return (lambda: float(sess.run([model.loss, model.train_op], feed)[0]),
            lambda: sess.run(model.train_op, feed))


# --- PyTorch -------------------------------------------------------------------------------
def torch_trainer(torch, params, x, y, cfg: Config):
    emb = torch.nn.Embedding(cfg.vocab, cfg.embed)
    lstm = torch.nn.LSTM(cfg.embed, cfg.hidden)
    out = torch.nn.Linear(cfg.hidden, cfg.vocab)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(params["emb"]))
        lstm.weight_ih_l0.copy_(torch.from_numpy(params["w"][:cfg.embed].T.copy()))
        lstm.weight_hh_l0.copy_(torch.from_numpy(params["w"][cfg.embed:].T.copy()))
        lstm.bias_ih_l0.copy_(torch.from_numpy(params["b"]))
        lstm.bias_hh_l0.zero_()
        out.weight.copy_(torch.from_numpy(params["wo"].T.copy()))
        out.bias.copy_(torch.from_numpy(params["bo"]))
    modules = torch.nn.ModuleList([emb, lstm, out])
    opt = torch.optim.SGD(modules.parameters(), lr=LEARNING_RATE)
    xt, yt = torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64))

    def step():
        opt.zero_grad()
        hs, _ = lstm(emb(xt))
        loss = torch.nn.functional.cross_entropy(out(hs.reshape(-1, cfg.hidden)), yt.reshape(-1))
        loss.backward()
        opt.step()
        return loss
    return lambda: float(step().detach()), step


# --- TensorFlow ----------------------------------------------------------------------------
def tensorflow_trainer(tf, params, x, y, cfg: Config, jit: bool = False):
    v = {k: tf.Variable(a) for k, a in params.items()}
    xt, yt = tf.constant(x), tf.constant(y)
    B, H = cfg.batch, cfg.hidden

    @tf.function(jit_compile=jit)
    def step():
        with tf.GradientTape() as tape:
            inputs = tf.gather(v["emb"], xt)

            def cell(t, h, c, hs):
                z = tf.matmul(tf.concat([inputs[t], h], 1), v["w"]) + v["b"]
                i, f, g, o = tf.split(z, 4, axis=1)
                c2 = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
                h2 = tf.sigmoid(o) * tf.tanh(c2)
                return t + 1, h2, c2, hs.write(t, h2)

            zeros = tf.zeros([B, H])
            _, _, _, hs = tf.while_loop(lambda t, *_: t < cfg.seq, cell,
                                        [tf.constant(0), zeros, zeros,
                                         tf.TensorArray(tf.float32, size=cfg.seq)],
                                        maximum_iterations=cfg.seq)      # XLA needs it
            logits = tf.matmul(tf.reshape(hs.stack(), [-1, H]), v["wo"]) + v["bo"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=tf.reshape(yt, [-1]), logits=logits))
        names = sorted(v)
        for k, g in zip(names, tape.gradient(loss, [v[k] for k in names])):
            v[k].assign_sub(LEARNING_RATE * tf.convert_to_tensor(g))
        return loss
    return lambda: float(step().numpy()), step


# --- the benchmark -------------------------------------------------------------------------
def interleaved_medians(steps: Dict[str, Tuple[Callable, int]], settle: float = 0.25
                        ) -> Dict[str, float]:
    """Median seconds per step of each row, the rows taking turns one step at a time (so a
    change of machine load falls on every row alike), each row until it has its repeats.
    The steps run before (the loss check) are the warm-up: a step here costs seconds."""
    times: Dict[str, List[float]] = {name: [] for name in steps}
    for k in range(max(repeats for _, repeats in steps.values())):
        for name, (step, repeats) in steps.items():
            if k >= repeats:
                continue
            time.sleep(settle)            # other libraries' BLAS threads stop spinning
            t0 = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def check_losses(trainers, steps: int, reference: str) -> None:
    losses = {name: [check() for _ in range(steps)] for name, (check, _, _) in trainers.items()}
    want = np.array(losses[reference])
    worst = 0.0
    for name, got in losses.items():
        diff = float(np.max(np.abs(np.array(got) - want) / np.abs(want)))
        worst = max(worst, diff)
        if diff > 1e-4:
            raise SystemExit(f"{name} disagrees with {reference}: losses {got} vs {want.tolist()}")
    print(f"check: the losses of {steps} steps agree in all {len(losses)} frameworks "
          f"(max relative difference {worst:.1e}): " + ", ".join(f"{v:.6f}" for v in want))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--check-steps", type=int, default=2)
    parser.add_argument("--small", action="store_true", help="a quick run on a small model")
    parser.add_argument("--no-xla", dest="xla", action="store_false",
                        help="leave out TensorFlow's jit_compile=True row")
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)
    torch = optional_import("torch")
    tf = optional_import("tensorflow")
    apply_framework_threads(torch, tf, args.threads)
    cfg = SMALL if args.small else Config()
    print(environment_line(torch, tf))
    params = init_params(cfg)
    x, y = sample_batch(cfg)
    model = FlowcModel(params, cfg)
    few = max(args.repeats // 3, 1)
    compiled = "flowc compiled C (Session.run)"
    trainers: Dict[str, Tuple[Callable, Callable, int]] = {
        compiled: (*flowc_trainer(model, "c", x, y, cfg), args.repeats),
        "flowc interpreter (Session.run)": (*flowc_trainer(model, "interpreter", x, y, cfg),
                                            few),
    }
    if tf is not None:
        trainers["TensorFlow (tf.while_loop, tf.function)"] = (
            *tensorflow_trainer(tf, params, x, y, cfg), args.repeats)
        if args.xla:
            trainers["TensorFlow (tf.function, XLA)"] = (
                *tensorflow_trainer(tf, params, x, y, cfg, jit=True), args.repeats)
    if torch is not None:
        trainers["PyTorch (nn.LSTM, eager, optim.SGD)"] = (
            *torch_trainer(torch, params, x, y, cfg), args.repeats)
    check_losses(trainers, args.check_steps, "flowc interpreter (Session.run)")
    medians = interleaved_medians({name: (step, repeats)
                                   for name, (_, step, repeats) in trainers.items()})
    rows = [Row(name, seconds) for name, seconds in medians.items()]
    if tf is None:
        rows.append(Row("TensorFlow", None, "not installed"))
    if torch is None:
        rows.append(Row("PyTorch", None, "not installed"))
    print_table(f"LSTM language model training step: vocabulary {cfg.vocab:,}, embedding "
                f"{cfg.embed}, hidden {cfg.hidden}, sequence {cfg.seq}, batch {cfg.batch}, "
                f"full softmax, SGD (median of {args.repeats} steps, interpreter {few}, after "
                f"{args.check_steps} checked steps)", rows, baseline=compiled, unit="ms", work=cfg.seq * cfg.batch,
                work_unit="tokens")


if __name__ == "__main__":
    main()
