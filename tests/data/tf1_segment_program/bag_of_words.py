"""A bag-of-words text classifier in TensorFlow 1.x style: each document is a variable number
of word ids, fed as (word ids, document of each word); the embeddings of a document's words
are pooled with tf.sparse_segment_mean (and tf.sparse_segment_sqrt_n, tf.segment_max over the
same sorted rows), classified with a dense layer and trained with Adagrad. The batch order is
tf.random_shuffle's (seeded); tf.bincount gives the document lengths, tf.setdiff1d the
vocabulary a batch did not use, tf.invert_permutation undoes the shuffle.

Only its import line is flowc's (``import tensorflow.compat.v1 as tf`` runs it under
TensorFlow; record_bag_of_words.py does so). The documents are made with numpy.
"""
import numpy as np

import dsl as tf

VOCAB, DIM, CLASSES, DOCS = 30, 8, 3, 12


def make_docs(seed):
    """Documents of 2..6 words; a class prefers a third of the vocabulary."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, CLASSES, DOCS)
    words, doc_of_word = [], []
    for d, c in enumerate(labels):
        n = rng.randint(2, 7)
        favourite = rng.randint(c * 10, c * 10 + 10, n)
        other = rng.randint(0, VOCAB, n)
        words.extend(np.where(rng.rand(n) < 0.7, favourite, other))
        doc_of_word.extend([d] * n)
    return (np.array(words, np.int32), np.array(doc_of_word, np.int32),
            labels.astype(np.int32))


def main(steps=25):
    words_v, docs_v, labels_v = make_docs(3)
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(5)
        words = tf.placeholder(tf.int32, [None], name="words")
        doc_of_word = tf.placeholder(tf.int32, [None], name="doc_of_word")
        labels = tf.placeholder(tf.int32, [None], name="labels")
        embeddings = tf.Variable(np.random.RandomState(0).randn(VOCAB, DIM).astype(np.float32)
                                 * 0.3, name="embeddings")
        positions = tf.range(tf.size(words))
        mean = tf.sparse_segment_mean(embeddings, words, doc_of_word)
        sqrt_n = tf.sparse_segment_sqrt_n(embeddings, words, doc_of_word)
        peak = tf.segment_max(tf.gather(embeddings, words), doc_of_word)
        features = tf.concat([mean, sqrt_n, peak], 1)
        w = tf.Variable(np.random.RandomState(1).randn(3 * DIM, CLASSES).astype(np.float32)
                        * 0.2, name="w")
        b = tf.Variable(tf.zeros([CLASSES]), name="b")
        logits = tf.matmul(features, w) + b
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
        train = tf.train.AdagradOptimizer(0.5).minimize(loss)
        order = tf.random_shuffle(tf.range(DOCS), seed=7)
        lengths = tf.bincount(doc_of_word, minlength=DOCS)
        unused, _ = tf.setdiff1d(tf.range(VOCAB), words)
        restored = tf.gather(order, tf.invert_permutation(order))
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            feed = {words: words_v, doc_of_word: docs_v, labels: labels_v}
            losses = [session.run([loss, train], feed)[0] for _ in range(steps)]
            orders = [session.run(order) for _ in range(2)]
            shown = session.run({"lengths": lengths, "unused": unused, "restored": restored,
                                 "positions": positions, "logits": logits}, feed)
    return np.array(losses), np.array(orders), shown
