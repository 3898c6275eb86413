"""A TF1 RNN whose weights come from a checkpoint TensorFlow wrote: stacked LSTM (peepholes,
projection) and GRU cells under dynamic_rnn. record_tf1_programs.py builds it under
TensorFlow, initializes it TensorFlow's way, saves ``rnn_checkpoint/model.ckpt`` with
``tf.train.Saver`` and records its outputs; flowc builds the same program and must find every
variable in that checkpoint under its own name (TF1's names) and give the same outputs."""
import numpy as np

import dsl as tf

BATCH, TIME, DEPTH = 2, 5, 3


def inputs() -> np.ndarray:
    return np.random.RandomState(3).randn(BATCH, TIME, DEPTH).astype(np.float32)


def build():
    """(the input placeholder, the lengths placeholder, what to fetch)."""
    x = tf.placeholder(tf.float32, [BATCH, TIME, DEPTH], name="x")
    lengths = tf.placeholder(tf.int32, [BATCH], name="lengths")
    cell = tf.nn.rnn_cell.MultiRNNCell([
        tf.nn.rnn_cell.LSTMCell(4, use_peepholes=True, num_proj=3),
        tf.nn.rnn_cell.GRUCell(5)])
    outputs, (lstm_state, gru_state) = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths,
                                                         dtype=tf.float32, scope="encoder")
    return x, lengths, [outputs, lstm_state.c, lstm_state.h, gru_state]
