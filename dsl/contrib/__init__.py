"""``fl.contrib``: the parts of TensorFlow 1.x's ``tf.contrib`` that TF1 programs commonly
use (``fl.contrib.layers``: regularizers and initializers; ``fl.contrib.rnn``: the fused
LSTM cells and the core cells under their contrib names)."""
from dsl.contrib import layers, rnn

__all__ = ["layers", "rnn"]
