"""``fl.contrib``: the parts of TensorFlow 1.x's ``tf.contrib`` that TF1 programs commonly
use (``fl.contrib.layers``: regularizers and initializers)."""
from dsl.contrib import layers
from dsl.contrib import framework, slim

__all__ = ["layers", "framework", "slim"]
