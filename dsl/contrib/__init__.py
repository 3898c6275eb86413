"""``fl.contrib``: the parts of TensorFlow 1.x's ``tf.contrib`` that TF1 programs commonly
use (``fl.contrib.layers``: regularizers and initializers)."""
from dsl.contrib import layers
from dsl.contrib import crf
from dsl.contrib import legacy_seq2seq
from dsl.contrib import seq2seq

__all__ = ["layers", "crf", "legacy_seq2seq", "seq2seq"]
