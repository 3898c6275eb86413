"""examples/digits_mlp.flow written with the Python builder: a 64-128-10 perceptron for the
8x8 handwritten digits, trained with Adam on softmax cross-entropy.

    python3 examples/digits_mlp.py [--steps N]       # train it (dsl.trainer, as flowc train)
    flowc train examples/digits_mlp.py               # the same, through train_spec()
    flowc ir examples/digits_mlp.py                  # the graph, via build()

``build()`` returns the graph and the fetches of the .flow file's outputs (``probs``,
``predictions``), so ``flowc ir``/``check``/``compile`` treat both files alike (same IR);
``train_spec()`` adds what the .flow file declares for training: the loss, the accuracy
metric, the optimizer, the data file and the default settings.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, Tuple

import dsl as fl
from dsl.trainer import TrainSpec, train

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "digits.npz")


def _build() -> Dict[str, object]:
    """Every tensor of the model, in the order the .flow file creates them."""
    graph = fl.Graph("digits_mlp")
    with graph.as_default():
        x = fl.placeholder(fl.float32, [None, 64], name="x")     # pixels / 16, row by row
        y = fl.placeholder(fl.int32, [None], name="y")           # the digit
        with fl.name_scope("hidden"):
            w1 = fl.Variable(fl.glorot_uniform_initializer(seed=1), shape=[64, 128],
                             dtype=fl.float32, name="weights1")
            b1 = fl.Variable(fl.zeros_initializer(), shape=[128], dtype=fl.float32, name="bias1")
            h = fl.nn.relu(fl.nn.bias_add(x @ w1, b1))
        with fl.name_scope("logits"):
            w2 = fl.Variable(fl.glorot_uniform_initializer(seed=2), shape=[128, 10],
                             dtype=fl.float32, name="weights2")
            b2 = fl.Variable(fl.zeros_initializer(), shape=[10], dtype=fl.float32, name="bias2")
            logits = fl.nn.bias_add(h @ w2, b2)
        probs = fl.nn.softmax(logits, name="probs")
        predictions = fl.argmax(logits, axis=1, output_type=fl.int32, name="predictions")
        loss = fl.reduce_mean(
            fl.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
        accuracy = fl.reduce_mean(fl.cast(fl.equal(predictions, y), fl.float32), name="accuracy")
    return {"graph": graph, "probs": probs, "predictions": predictions, "loss": loss,
            "accuracy": accuracy}


def build() -> Tuple[fl.Graph, Dict[str, fl.Tensor]]:
    """The graph and its named fetches, as the .flow file's outputs."""
    m = _build()
    return m["graph"], {"probs": m["probs"], "predictions": m["predictions"]}


def train_spec() -> TrainSpec:
    """What ``flowc train`` needs: loss, optimizer, metrics, data and default settings."""
    m = _build()
    return TrainSpec(m["graph"], m["loss"], fl.train.AdamOptimizer(learning_rate=0.01),
                     {"accuracy": m["accuracy"]}, DATA, steps=600, batch_size=64,
                     eval_every=200, name=__file__)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Train the digits MLP.")
    parser.add_argument("--steps", type=int, help="train until this step (default 600)")
    parser.add_argument("--checkpoint-dir", help="write checkpoints here")
    parser.add_argument("--backend", choices=("c", "interpreter"), default="c")
    args = parser.parse_args(argv)
    result = train(train_spec(), steps=args.steps, checkpoint_dir=args.checkpoint_dir,
                   backend=args.backend)
    return result.status


if __name__ == "__main__":
    sys.exit(main())
