"""The small MLP and CNN training graphs the GPU session tests build, with the user's view of
them: placeholders, loss, training op, initializer, variables. Nothing here pins the model to
a device; ``inputs_on_cpu`` pins the placeholders to the CPU, as an input pipeline would be."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

import numpy as np

import dsl as fl


@dataclass
class TrainingModel:
    graph: object
    x: object
    labels: object
    loss: object
    train_op: object
    init: object
    variables: List[object]


def _maybe_cpu(inputs_on_cpu: bool):
    return fl.device("/cpu:0") if inputs_on_cpu else fl.device("")


def mlp_model(optimizer: str = "sgd", inputs_on_cpu: bool = False, features: int = 20,
              hidden: int = 16, classes: int = 5, seed: int = 0) -> TrainingModel:
    rng = np.random.default_rng(seed)
    g = fl.Graph()
    with g.as_default():
        with _maybe_cpu(inputs_on_cpu):
            x = fl.placeholder(fl.float32, [None, features], name="x")
            labels = fl.placeholder(fl.int64, [None], name="labels")
        w0 = fl.Variable(rng.uniform(-0.3, 0.3, (features, hidden)).astype(np.float32), name="w0")
        b0 = fl.Variable(np.zeros(hidden, np.float32), name="b0")
        w1 = fl.Variable(rng.uniform(-0.3, 0.3, (hidden, classes)).astype(np.float32), name="w1")
        b1 = fl.Variable(np.zeros(classes, np.float32), name="b1")
        h = fl.nn.relu(fl.matmul(x, w0) + b0)
        logits = fl.matmul(h, w1) + b1
        loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits), name="loss")
        opt = (fl.train.AdamOptimizer(0.01) if optimizer == "adam"
               else fl.train.GradientDescentOptimizer(0.1))
        train_op = opt.minimize(loss)
        init = fl.global_variables_initializer()
    return TrainingModel(g, x, labels, loss, train_op, init, [w0, b0, w1, b1])


def cnn_model(inputs_on_cpu: bool = False, seed: int = 0) -> TrainingModel:
    """Two 3x3 convolutions with max pools and a dense layer on 8x8x1 images."""
    rng = np.random.default_rng(seed)

    def glorot(shape, fan_in, fan_out):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, shape).astype(np.float32)

    g = fl.Graph()
    with g.as_default():
        with _maybe_cpu(inputs_on_cpu):
            x = fl.placeholder(fl.float32, [None, 8, 8, 1], name="x")
            labels = fl.placeholder(fl.int64, [None], name="labels")
        f1 = fl.Variable(glorot((3, 3, 1, 4), 9, 36), name="f1")
        c1 = fl.Variable(np.zeros(4, np.float32), name="c1")
        f2 = fl.Variable(glorot((3, 3, 4, 8), 36, 72), name="f2")
        c2 = fl.Variable(np.zeros(8, np.float32), name="c2")
        w = fl.Variable(glorot((2 * 2 * 8, 3), 32, 3), name="w")
        b = fl.Variable(np.zeros(3, np.float32), name="b")
        h = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(x, f1, 1, "SAME"), c1))
        h = fl.nn.max_pool(h, 2, 2, "VALID")
        h = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(h, f2, 1, "SAME"), c2))
        h = fl.nn.max_pool(h, 2, 2, "VALID")
        logits = fl.matmul(fl.reshape(h, [-1, 2 * 2 * 8]), w) + b
        loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits), name="loss")
        train_op = fl.train.GradientDescentOptimizer(0.05).minimize(loss)
        init = fl.global_variables_initializer()
    return TrainingModel(g, x, labels, loss, train_op, init, [f1, c1, f2, c2, w, b])


def mlp_batch(batch: int = 12, features: int = 20, classes: int = 5,
              seed: int = 1) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.uniform(-1, 1, (batch, features)).astype(np.float32),
            "labels": rng.integers(0, classes, batch).astype(np.int64)}


def cnn_batch(batch: int = 6, seed: int = 1) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.uniform(0, 1, (batch, 8, 8, 1)).astype(np.float32),
            "labels": rng.integers(0, 3, batch).astype(np.int64)}


def train_losses(sess, model: TrainingModel, batch: Dict[str, np.ndarray],
                 steps: int) -> List[float]:
    """Initialize, then the loss of each of ``steps`` training steps."""
    sess.run(model.init)
    feed = {model.x: batch["x"], model.labels: batch["labels"]}
    return [float(sess.run([model.loss, model.train_op], feed)[0]) for _ in range(steps)]
