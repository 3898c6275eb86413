"""``fl.contrib``: the parts of TensorFlow 1.x's ``tf.contrib`` that TF1 programs commonly
use: ``fl.contrib.layers`` (slim's layer functions, regularizers and initializers),
``fl.contrib.framework`` (arg_scope and the variable functions), ``fl.contrib.slim``,
``fl.contrib.rnn`` (the fused LSTM and GRU cells and the core cells under their contrib
names), ``fl.contrib.crf`` (linear-chain CRFs), ``fl.contrib.seq2seq`` and
``fl.contrib.legacy_seq2seq`` (the sequence losses)."""
from dsl.contrib import layers, rnn
from dsl.contrib import crf
from dsl.contrib import framework, slim
from dsl.contrib import legacy_seq2seq
from dsl.contrib import seq2seq

__all__ = ["layers", "rnn", "crf", "framework", "slim", "legacy_seq2seq", "seq2seq"]
