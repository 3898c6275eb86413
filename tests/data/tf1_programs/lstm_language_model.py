"""An LSTM language model in the style of TensorFlow 1.x's PTB tutorial: word embeddings, two
stacked LSTM layers run by tf.nn.dynamic_rnn, a softmax over the vocabulary, truncated
backpropagation through time with the final state fed back as the next batch's initial state,
gradients clipped by their global norm, Adam.

It is a TF1 program: only its import line is flowc's; with
``import tensorflow.compat.v1 as tf`` it runs under TensorFlow (tests/data/tf1_programs/
record_tf1_programs.py does so, and the test compares the two). The corpus is made up: text from
a random sparse Markov chain, so the model has something to learn.
"""
import numpy as np

import dsl as tf

VOCAB = 24
HIDDEN = 32
LAYERS = 2
BATCH = 8
NUM_STEPS = 12
INIT_SCALE = 0.1
MAX_GRAD_NORM = 5.0
LEARNING_RATE = 0.02


def corpus(length: int, seed: int = 7) -> np.ndarray:
    """Words from a Markov chain where each word has 3 likely successors."""
    successors = np.random.RandomState(0).randint(0, VOCAB, size=(VOCAB, 3))   # the language
    rng = np.random.RandomState(seed)                                            # the sample
    words = [0]
    for _ in range(length - 1):
        nxt = successors[words[-1], rng.randint(3)] if rng.rand() < 0.9 else rng.randint(VOCAB)
        words.append(nxt)
    return np.array(words, np.int32)


def batches(data: np.ndarray):
    """PTB-style: the text cut into BATCH rows, read NUM_STEPS words at a time."""
    rows = len(data) // BATCH
    table = data[:rows * BATCH].reshape(BATCH, rows)
    for k in range((rows - 1) // NUM_STEPS):
        x = table[:, k * NUM_STEPS:(k + 1) * NUM_STEPS]
        y = table[:, k * NUM_STEPS + 1:(k + 1) * NUM_STEPS + 1]
        yield x, y


class LanguageModel:
    def __init__(self, is_training: bool):
        self.inputs = tf.placeholder(tf.int32, [BATCH, NUM_STEPS], name="inputs")
        self.targets = tf.placeholder(tf.int32, [BATCH, NUM_STEPS], name="targets")
        embedding = tf.get_variable("embedding", [VOCAB, HIDDEN], dtype=tf.float32)
        emb = tf.nn.embedding_lookup(embedding, self.inputs)
        cell = tf.nn.rnn_cell.MultiRNNCell(
            [tf.nn.rnn_cell.BasicLSTMCell(HIDDEN, forget_bias=0.0) for _ in range(LAYERS)])
        self.initial_state = cell.zero_state(BATCH, tf.float32)
        outputs, self.final_state = tf.nn.dynamic_rnn(cell, emb,
                                                      initial_state=self.initial_state)
        output = tf.reshape(outputs, [-1, HIDDEN])
        softmax_w = tf.get_variable("softmax_w", [HIDDEN, VOCAB], dtype=tf.float32)
        softmax_b = tf.get_variable("softmax_b", [VOCAB], dtype=tf.float32)
        logits = tf.nn.xw_plus_b(output, softmax_w, softmax_b)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(self.targets, [-1]), logits=logits)
        self.cost = tf.reduce_sum(losses) / BATCH / NUM_STEPS
        if not is_training:
            return
        tvars = tf.trainable_variables()
        grads, self.grad_norm = tf.clip_by_global_norm(tf.gradients(self.cost, tvars),
                                                       MAX_GRAD_NORM)
        optimizer = tf.train.AdamOptimizer(LEARNING_RATE)
        self.train_op = optimizer.apply_gradients(
            zip(grads, tvars), global_step=tf.train.get_or_create_global_step())


def initial_weights(variables) -> dict:
    """The same start for every framework: uniform in [-INIT_SCALE, INIT_SCALE], drawn in the
    order of the variables' names."""
    rng = np.random.RandomState(1234)
    out = {}
    for v in sorted(variables, key=lambda v: v.name):
        shape = [int(d) for d in v.shape]
        out[v.name] = rng.uniform(-INIT_SCALE, INIT_SCALE, shape).astype(np.float32)
    return out


def run_epoch(session, model, data, train: bool):
    """Mean loss per word over ``data``, the state carried from batch to batch."""
    state = session.run(model.initial_state)
    losses = []
    for x, y in batches(data):
        feed = {model.inputs: x, model.targets: y}
        for i, (c, h) in enumerate(model.initial_state):
            feed[c] = state[i].c
            feed[h] = state[i].h
        fetches = [model.cost, model.final_state] + ([model.train_op] if train else [])
        cost, state = session.run(fetches, feed)[:2]
        losses.append(cost)
    return losses


def main(epochs: int = 4):
    """Train; returns (the training loss of every batch, the held-out loss after each epoch,
    the names of the variables)."""
    data = corpus(BATCH * (NUM_STEPS * 16 + 1))
    held_out = corpus(BATCH * (NUM_STEPS * 4 + 1), seed=8)
    graph = tf.Graph()
    with graph.as_default():
        model = LanguageModel(is_training=True)
        init = tf.global_variables_initializer()
        with tf.Session() as session:
            session.run(init)
            for v in tf.trainable_variables():
                v.load(initial_weights(tf.trainable_variables())[v.name], session)
            train_losses, valid = [], []
            for _ in range(epochs):
                train_losses += run_epoch(session, model, data, train=True)
                valid.append(float(np.mean(run_epoch(session, model, held_out, train=False))))
            names = sorted(v.name for v in tf.global_variables())
    return np.array(train_losses, np.float32), np.array(valid, np.float32), names


if __name__ == "__main__":
    train_losses, valid, _ = main()
    print("train loss: first %.3f last %.3f; held-out perplexity per epoch: %s"
          % (train_losses[0], train_losses[-1], np.exp(valid)))
