"""One sparse training step of an embedding: a 1,000,000 x 64 float32 table, a batch of 128
examples of 32 ids each; each example's vector is the mean of its 32 rows, the loss the mean
squared error against a fixed target, and SGD (learning rate 0.5) updates only the rows the
batch used (repeated ids add up).

    python3 examples/benchmarks/bench_embedding.py [--quick] [--threads T]

flowc (``Variable.sparse_read``, whose gradient is ``IndexedSlices``, applied by
``fl.train.GradientDescentOptimizer`` as a ``ResourceScatterSub`` of the scaled rows, which the
``fuse-updates`` pass makes one ``_ResourceScatterSubScaled``), numpy (``np.subtract.at``),
PyTorch (``nn.Embedding(sparse=True)`` with ``optim.SGD``; torch.compile of the forward),
TensorFlow as a TF1 session (``tf.compat.v1.train.GradientDescentOptimizer``), and a
tf.function step (``GradientTape`` gives ``IndexedSlices``, applied with ``scatter_sub``) with
and without XLA. All start from the same table; the losses of the first steps must agree.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple

import numpy as np

from bench_common import FLOWC, Frameworks, Result, run_alone
from bench_train_mlp import interleaved_medians

import dsl as fl  # noqa: E402

NAME = "embedding"
ROWS, DIM, BATCH, IDS = 1_000_000, 64, 128, 32
LEARNING_RATE = 0.5
Trainer = Tuple[Callable[[], float], Callable[[], object]]     # (step returning the loss, step)


def data(seed: int = 0):
    rng = np.random.default_rng(seed)
    table = rng.uniform(-0.05, 0.05, (ROWS, DIM)).astype(np.float32)
    ids = rng.integers(0, ROWS, (BATCH, IDS)).astype(np.int64)
    ids[:, 1] = ids[:, 0]                       # some repeated ids: their updates add up
    target = rng.uniform(-1, 1, (BATCH, DIM)).astype(np.float32)
    return table, ids, target


def flowc_trainer(table, ids, target) -> Trainer:
    g = fl.Graph()
    with g.as_default():
        var = fl.Variable(fl.zeros([ROWS, DIM], fl.float32), name="table")
        value = fl.placeholder(fl.float32, [ROWS, DIM], name="value")
        load = var.assign(value, read_value=False)
        pid = fl.placeholder(fl.int64, [BATCH, IDS], name="ids")
        pt = fl.placeholder(fl.float32, [BATCH, DIM], name="target")
        h = fl.reduce_mean(var.sparse_read(pid), axis=1)
        loss = fl.reduce_mean(fl.square(h - pt))
        train = fl.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss, var_list=[var])
        init = fl.global_variables_initializer()
    sess = fl.Session(graph=g)
    sess.run(init)
    sess.run(load, {value: table})
    feed = {pid: ids, pt: target}
    return (lambda: float(sess.run([loss, train], feed)[0]), lambda: sess.run(train, feed))


def numpy_trainer(table, ids, target) -> Trainer:
    table = table.copy()
    flat = ids.reshape(-1)

    def step() -> float:
        h = table[ids].mean(axis=1)
        diff = h - target
        g_h = (2.0 / diff.size) * diff                      # d loss / d h
        g_rows = np.repeat(g_h / IDS, IDS, axis=0)           # d loss / d table[ids[b, l]]
        np.subtract.at(table, flat, LEARNING_RATE * g_rows)
        return float(np.mean(diff * diff))
    return step, step


def torch_trainers(torch, table, ids, target) -> Dict[str, Trainer]:
    out = {}
    for name, compile_forward in (("PyTorch eager", False), ("torch.compile", True)):
        emb = torch.nn.Embedding(ROWS, DIM, sparse=True)
        with torch.no_grad():
            emb.weight.copy_(torch.from_numpy(table))
        opt = torch.optim.SGD(emb.parameters(), lr=LEARNING_RATE)
        it, tt = torch.from_numpy(ids), torch.from_numpy(target)

        def loss_fn(e=emb):
            return torch.mean((e(it).mean(dim=1) - tt) ** 2)
        forward = torch.compile(loss_fn) if compile_forward else loss_fn

        def step(opt=opt, forward=forward):
            opt.zero_grad()
            loss = forward()
            loss.backward()
            opt.step()
            return loss
        out[name] = (lambda step=step: float(step().detach()), step)
    return out


def tf_trainers(tf, table, ids, target) -> Dict[str, Trainer]:
    out = {}
    graph = tf.Graph()
    with graph.as_default():
        value = tf.compat.v1.placeholder(tf.float32, table.shape)
        var = tf.compat.v1.Variable(value, use_resource=True)
        h = tf.reduce_mean(tf.nn.embedding_lookup(var, ids), axis=1)
        loss = tf.reduce_mean(tf.square(h - target))
        train = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
    sess = tf.compat.v1.Session(graph=graph)
    sess.run(var.initializer, {value: table})
    out["TF1 session"] = (lambda: float(sess.run([loss, train])[0]), lambda: sess.run(train))
    it, tt = tf.constant(ids), tf.constant(target)
    for name, jit in (("tf.function", False), ("tf.function XLA", True)):
        v = tf.Variable(table)

        @tf.function(jit_compile=jit)
        def step(v=v):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.reduce_mean(tf.gather(v, it), axis=1) - tt))
            g = tape.gradient(loss, v)                      # IndexedSlices
            v.scatter_sub(tf.IndexedSlices(LEARNING_RATE * g.values, g.indices))
            return loss
        out[name] = (lambda step=step: float(step().numpy()), step)
    return out


def check_losses(trainers: Dict[str, Trainer], steps: int = 3) -> None:
    losses = {name: [check() for _ in range(steps)] for name, (check, _) in trainers.items()}
    want = np.array(losses["numpy"])
    for name, got in losses.items():
        if not np.allclose(got, want, rtol=1e-4):
            raise SystemExit(f"{name} disagrees with numpy: losses {got} vs {want.tolist()}")
    if not want[-1] < want[0]:
        raise SystemExit(f"the loss does not go down: {want.tolist()}")


def measure(fw: Frameworks, quick: bool = False) -> List[Result]:
    table, ids, target = data()
    trainers: Dict[str, Trainer] = {FLOWC: flowc_trainer(table, ids, target),
                                    "numpy": numpy_trainer(table, ids, target)}
    if fw.torch is not None:
        trainers.update(torch_trainers(fw.torch, table, ids, target))
    if fw.tf is not None:
        trainers.update(tf_trainers(fw.tf, table, ids, target))
    del table
    check_losses(trainers)
    repeats = 10 if quick else 50
    medians = interleaved_medians({k: (step, repeats) for k, (_, step) in trainers.items()},
                                  warmup=1)
    bench = "embedding 1Mx64, 128x32 ids, SGD"
    return ([Result(bench, k, s, BATCH, "examples") for k, s in medians.items()]
            + fw.missing(bench, ("PyTorch eager", "torch.compile", "TF1 session", "tf.function",
                                 "tf.function XLA")))


def main() -> None:
    run_alone(__doc__, "sparse embedding training step", lambda fw, args: measure(fw, args.quick))


if __name__ == "__main__":
    main()
