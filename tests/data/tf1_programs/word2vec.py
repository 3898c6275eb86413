"""Skip-gram word2vec in the style of TensorFlow 1.x's word2vec_basic: (center, context) pairs
from a sliding window, an embedding table read with tf.nn.embedding_lookup, tf.nn.nce_loss
against sampled negatives, SGD, then cosine similarity of a few words against all of them
through l2-normalized embeddings (tf.sqrt(tf.reduce_sum(tf.square(...), 1, keepdims=True))).

Only its import line is flowc's. The negatives are sampled, so flowc and TensorFlow draw
different ones; what they share is the start (numpy values) and the data, and the test compares
the full-softmax loss both reach. The corpus: words from a Markov chain with 2 likely
successors each.
"""
import math

import numpy as np

import dsl as tf

VOCAB, EMBED, BATCH, NUM_SAMPLED, WINDOW = 40, 16, 64, 8, 1


def corpus(length, seed=3):
    successors = np.random.RandomState(0).randint(0, VOCAB, size=(VOCAB, 2))
    rng = np.random.RandomState(seed)
    words = [0]
    for _ in range(length - 1):
        words.append(successors[words[-1], rng.randint(2)] if rng.rand() < 0.9
                     else rng.randint(VOCAB))
    return np.array(words, np.int32)


def skipgram_pairs(words):
    centers, contexts = [], []
    for i in range(WINDOW, len(words) - WINDOW):
        for j in range(-WINDOW, WINDOW + 1):
            if j:
                centers.append(words[i])
                contexts.append(words[i + j])
    return np.array(centers, np.int32), np.array(contexts, np.int64)[:, None]


def main(steps=150):
    centers, contexts = skipgram_pairs(corpus(3000))
    rng = np.random.RandomState(5)
    graph = tf.Graph()
    with graph.as_default():
        train_inputs = tf.placeholder(tf.int32, shape=[BATCH])
        train_labels = tf.placeholder(tf.int64, shape=[BATCH, 1])
        valid_examples = np.array([0, 1, 2, 3], np.int32)
        valid_dataset = tf.constant(valid_examples, dtype=tf.int32)
        with tf.name_scope("embeddings"):
            embeddings = tf.Variable(rng.uniform(-1.0, 1.0, [VOCAB, EMBED]).astype(np.float32))
            embed = tf.nn.embedding_lookup(embeddings, train_inputs)
        with tf.name_scope("weights"):
            nce_weights = tf.Variable((rng.randn(VOCAB, EMBED) / math.sqrt(EMBED))
                                      .astype(np.float32))
        with tf.name_scope("biases"):
            nce_biases = tf.Variable(tf.zeros([VOCAB]))
        with tf.name_scope("loss"):
            loss = tf.reduce_mean(tf.nn.nce_loss(weights=nce_weights, biases=nce_biases,
                                                 labels=train_labels, inputs=embed,
                                                 num_sampled=NUM_SAMPLED, num_classes=VOCAB))
        optimizer = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
        # the full softmax over every word, to measure what the sampled loss trains
        full_logits = tf.matmul(embed, nce_weights, transpose_b=True) + nce_biases
        full_loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.squeeze(train_labels, axis=[1]), logits=full_logits))
        norm = tf.sqrt(tf.reduce_sum(tf.square(embeddings), 1, keepdims=True))
        normalized_embeddings = embeddings / norm
        valid_embeddings = tf.nn.embedding_lookup(normalized_embeddings, valid_dataset)
        similarity = tf.matmul(valid_embeddings, normalized_embeddings, transpose_b=True)
        init = tf.global_variables_initializer()
        with tf.Session() as session:
            init.run()
            n = len(centers) // BATCH * BATCH
            held = {train_inputs: centers[n - BATCH:n], train_labels: contexts[n - BATCH:n]}
            start_full = session.run(full_loss, held)
            losses = []
            for step in range(steps):
                k = (step * BATCH) % (n - BATCH)
                _, loss_val = session.run([optimizer, loss],
                                          feed_dict={train_inputs: centers[k:k + BATCH],
                                                     train_labels: contexts[k:k + BATCH]})
                losses.append(loss_val)
            end_full = session.run(full_loss, held)
            sim = similarity.eval()
            nearest = (-sim[0, :]).argsort()[1:4]
    return {"losses": np.array(losses, np.float32), "full_loss": np.float32([start_full, end_full]),
            "similarity_shape": np.array(sim.shape), "nearest": nearest}


if __name__ == "__main__":
    out = main()
    print("nce %.3f -> %.3f; full softmax %s" % (out["losses"][:10].mean(),
                                                  out["losses"][-10:].mean(), out["full_loss"]))
