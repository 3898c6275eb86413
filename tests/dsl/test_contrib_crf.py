"""fl.contrib.crf, TF1's linear-chain CRF: the log-normalizer, the likelihood and the Viterbi
path equal a brute force over every tag sequence (in the interpreter and compiled C, with
lengths 1, full and in between, batch and time unknown), crf_decode equals the numpy
viterbi_decode, the likelihood's gradient equals finite differences, the values equal
TensorFlow Addons' CRF (recorded in tests/data/contrib_crf/tfa_crf.npz by
record_tfa_crf.py there), and a small BiLSTM-CRF learns to tag a toy task."""
import itertools
import os

import numpy as np
import pytest

import dsl as fl
from dsl.contrib import crf
from repo_paths import TESTS
from runtime.errors import FlowcError

BACKENDS = ["interpreter", "c"]


def _score(x, tags, length, transitions):
    return (sum(x[t, tags[t]] for t in range(length))
            + sum(transitions[tags[t - 1], tags[t]] for t in range(1, length)))


def _brute_force(x, length, transitions):
    """(log-normalizer, best tag sequence, its score) over every tag sequence of ``length``."""
    seqs = list(itertools.product(range(x.shape[1]), repeat=int(length)))
    scores = np.array([_score(x, q, length, transitions) for q in seqs], dtype=np.float64)
    peak = scores.max()
    return peak + np.log(np.exp(scores - peak).sum()), list(seqs[int(np.argmax(scores))]), peak


def _case(seed, batch=5, steps=4, tags=3):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(batch, steps, tags)) * 2).astype(np.float32)
    transitions = (rng.normal(size=(tags, tags)) * 2).astype(np.float32)
    lengths = rng.integers(1, steps + 1, size=batch).astype(np.int32)
    lengths[0], lengths[1] = steps, 1
    tag_indices = rng.integers(0, tags, size=(batch, steps)).astype(np.int32)
    return x, transitions, lengths, tag_indices


def _build(tags, steps=None):
    """Every CRF function on placeholders with batch (and ``steps`` unless given) unknown."""
    x = fl.placeholder(fl.f32, [None, steps, tags], name="x")
    tr = fl.placeholder(fl.f32, [tags, tags], name="transitions")
    lengths = fl.placeholder(fl.i32, [None], name="lengths")
    tag_indices = fl.placeholder(fl.i32, [None, steps], name="tag_indices")
    ll, tr_out = crf.crf_log_likelihood(x, tag_indices, lengths, tr)
    assert tr_out is tr
    fetch = {"log_likelihood": ll,
             "sequence_score": crf.crf_sequence_score(x, tag_indices, lengths, tr),
             "log_norm": crf.crf_log_norm(x, lengths, tr)}
    fetch["decode_tags"], fetch["best_score"] = crf.crf_decode(x, tr, lengths)
    return (x, tr, lengths, tag_indices), fetch


def _run(backend, steps_known, x, transitions, lengths, tag_indices):
    g = fl.Graph()
    with g.as_default():
        feeds, fetch = _build(x.shape[2], x.shape[1] if steps_known else None)
        with fl.Session(graph=g, backend=backend) as s:
            return s.run(fetch, dict(zip(feeds, (x, transitions, lengths, tag_indices))))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("steps,steps_known", [(4, False), (4, True), (1, True), (1, False)])
def test_log_norm_likelihood_and_best_path_equal_the_brute_force(backend, steps, steps_known):
    x, transitions, lengths, tag_indices = _case(steps, steps=steps)
    got = _run(backend, steps_known, x, transitions, lengths, tag_indices)
    assert got["decode_tags"].dtype == np.int32 and got["decode_tags"].shape == (5, steps)
    for b, length in enumerate(lengths):
        log_z, path, best = _brute_force(x[b], length, transitions)
        score = _score(x[b], tag_indices[b], length, transitions)
        np.testing.assert_allclose(got["log_norm"][b], log_z, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["sequence_score"][b], score, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["log_likelihood"][b], score - log_z, rtol=1e-5,
                                   atol=1e-5)
        assert list(got["decode_tags"][b, :length]) == path, (b, length)
        assert not got["decode_tags"][b, length:].any()           # padding tags are 0
        np.testing.assert_allclose(got["best_score"][b], best, rtol=1e-5, atol=1e-5)
    # a likelihood is a log-probability: below 0, and the best path's is the largest
    assert (got["log_likelihood"] < 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_empty_sequence_scores_zero(backend):
    x, transitions, lengths, tag_indices = _case(7)
    lengths[2] = 0
    got = _run(backend, False, x, transitions, lengths, tag_indices)
    assert got["log_norm"][2] == 0 and got["sequence_score"][2] == 0
    assert got["log_likelihood"][2] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_crf_decode_equals_viterbi_decode(backend):
    x, transitions, lengths, tag_indices = _case(11, batch=8, steps=9, tags=6)
    got = _run(backend, False, x, transitions, lengths, tag_indices)
    for b, length in enumerate(lengths):
        path, best = crf.viterbi_decode(x[b, :length], transitions)
        assert list(got["decode_tags"][b, :length]) == path
        np.testing.assert_allclose(got["best_score"][b], best, rtol=1e-5)
        np.testing.assert_allclose(best, _score(x[b], path, length, transitions), rtol=1e-5)


def test_viterbi_decode_is_the_brute_force_best_path():
    x, transitions, lengths, _ = _case(3, batch=3, steps=5, tags=4)
    for b in range(3):
        path, best = crf.viterbi_decode(x[b], transitions)
        _, want, want_score = _brute_force(x[b], 5, transitions)
        assert path == want and all(isinstance(t, int) for t in path)
        np.testing.assert_allclose(best, want_score, rtol=1e-5)
    with pytest.raises(ValueError, match="num_tags"):
        crf.viterbi_decode(x[0], transitions[:2])


@pytest.mark.parametrize("case", ["small", "wide", "one_step"])
def test_values_equal_tensorflow_addons_crf(case):
    with np.load(os.path.join(TESTS, "data", "contrib_crf", "tfa_crf.npz")) as data:
        ref = {k[len(case) + 1:]: data[k] for k in data.files if k.startswith(case + "/")}
    got = _run("c", False, ref["inputs"], ref["transitions"], ref["lengths"],
               ref["tag_indices"])
    for key in ("log_likelihood", "sequence_score", "log_norm", "best_score"):
        np.testing.assert_allclose(got[key], ref[key], rtol=1e-5, atol=1e-5, err_msg=key)
    np.testing.assert_array_equal(got["decode_tags"], ref["decode_tags"])   # padding too


def test_likelihood_gradient_equals_finite_differences():
    x, transitions, lengths, tag_indices = _case(5, batch=3, steps=4, tags=3)
    x, transitions = x.astype(np.float64), transitions.astype(np.float64)
    g = fl.Graph()
    with g.as_default():
        xp = fl.placeholder(fl.f64, [None, None, 3])
        tp = fl.placeholder(fl.f64, [3, 3])
        ll, _ = crf.crf_log_likelihood(xp, tag_indices, lengths, tp)
        total = fl.reduce_sum(ll * np.array([1.0, -0.5, 2.0]))
        grads = fl.gradients(total, [xp, tp])
    results = {}
    for backend in BACKENDS:
        with fl.Session(graph=g, backend=backend) as s:
            results[backend] = s.run(grads, {xp: x, tp: transitions})
    with fl.Session(graph=g, backend="interpreter") as s:
        eps = 1e-6
        for k, value in enumerate((x, transitions)):
            numeric = np.zeros_like(value)
            for i in np.ndindex(value.shape):
                moved = []
                for step in (eps, -eps):
                    v = value.copy()
                    v[i] += step
                    moved.append(s.run(total, {xp: v if k == 0 else x,
                                               tp: v if k == 1 else transitions}))
                numeric[i] = (moved[0] - moved[1]) / (2 * eps)
            for backend in BACKENDS:
                np.testing.assert_allclose(results[backend][k], numeric, rtol=1e-5, atol=1e-7,
                                           err_msg=f"{backend} input {k}")
    # padding past a sequence's length gets no gradient
    assert not results["c"][0][1, 1:].any()
    assert np.abs(results["c"][1]).max() > 0


def test_log_likelihood_makes_the_transitions_variable_of_its_scope():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, None, 4])
        tags = fl.placeholder(fl.i64, [None, None])
        lengths = fl.placeholder(fl.i64, [None])
        with fl.variable_scope("crf_layer"):
            ll, transitions = crf.crf_log_likelihood(x, tags, lengths)
        assert transitions.name == "crf_layer/transitions:0"
        assert transitions in fl.trainable_variables()
        assert transitions.shape.as_list() == [4, 4]
        with fl.variable_scope("crf_layer", reuse=True):
            _, again = crf.crf_log_likelihood(x, tags, lengths)
        assert again is transitions
        decoded, _ = crf.crf_decode(x, transitions, lengths)
        with fl.Session(graph=g, backend="c") as s:
            s.run(fl.global_variables_initializer())
            feed_x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
            feed = {x: feed_x, tags: np.array([[0, 1, 2], [3, 0, 0]]),
                    lengths: np.array([3, 1])}
            got_ll, got_tags, tr = s.run([ll, decoded, transitions], feed)
    for b, length in enumerate([3, 1]):
        log_z, path, _ = _brute_force(feed_x[b], length, tr)
        np.testing.assert_allclose(got_ll[b], _score(feed_x[b], feed[tags][b], length, tr)
                                   - log_z, rtol=1e-5, atol=1e-5)
        assert list(got_tags[b, :length]) == path


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tag_out_of_range_is_an_error_naming_the_node(backend):
    x, transitions, lengths, tag_indices = _case(2)
    tag_indices[1, 2] = 7
    with pytest.raises(FlowcError, match="out of range|not in|range"):
        _run(backend, False, x, transitions, lengths, tag_indices)


def test_inputs_without_a_known_tag_count_are_refused():
    with fl.Graph().as_default():
        x = fl.placeholder(fl.f32, [None, None, None])
        with pytest.raises(ValueError, match="number of tags"):
            crf.crf_log_norm(x, [1], np.zeros((2, 2), np.float32))


def _toy_batch(rng, batch=16, steps=8, vocab=10):
    """Tags depend on the word and its left neighbour: tag = 2 after word 0 (a 'begin'
    word), else 1 for words below 5 and 0 for the rest; lengths vary, padding is word 0."""
    lengths = rng.integers(2, steps + 1, size=batch).astype(np.int32)
    words = rng.integers(0, vocab, size=(batch, steps)).astype(np.int32)
    tags = np.where(words < 5, 1, 0).astype(np.int32)
    tags[:, 1:] = np.where(words[:, :-1] == 0, 2, tags[:, 1:])
    pad = np.arange(steps)[None, :] >= lengths[:, None]
    words[pad], tags[pad] = 0, 0
    return words, tags, lengths


def test_a_bilstm_crf_learns_to_tag_a_toy_task():
    g = fl.Graph()
    with g.as_default():
        fl.set_random_seed(3)
        words = fl.placeholder(fl.i32, [None, None])
        tags = fl.placeholder(fl.i32, [None, None])
        lengths = fl.placeholder(fl.i32, [None])
        embedding = fl.get_variable("embedding", [10, 8])
        inputs = fl.nn.embedding_lookup(embedding, words)
        cell_fw = fl.nn.rnn_cell.LSTMCell(12)
        cell_bw = fl.nn.rnn_cell.LSTMCell(12)
        (out_fw, out_bw), _ = fl.nn.bidirectional_dynamic_rnn(
            cell_fw, cell_bw, inputs, sequence_length=lengths, dtype=fl.f32)
        hidden = fl.concat([out_fw, out_bw], axis=-1)
        logits = fl.layers.dense(hidden, 3)
        ll, transitions = fl.contrib.crf.crf_log_likelihood(logits, tags, lengths)
        loss = fl.reduce_mean(-ll)
        train = fl.train.AdamOptimizer(0.05).minimize(loss)
        decoded, _ = fl.contrib.crf.crf_decode(logits, transitions, lengths)
        rng = np.random.default_rng(0)
        with fl.Session(graph=g, backend="c") as s:
            s.run(fl.global_variables_initializer())
            losses = []
            for _ in range(120):
                w, t, n = _toy_batch(rng)
                losses.append(s.run([loss, train], {words: w, tags: t, lengths: n})[0])
            w, t, n = _toy_batch(np.random.default_rng(99), batch=64)
            got = s.run(decoded, {words: w, lengths: n})
    valid = np.arange(t.shape[1])[None, :] < n[:, None]
    accuracy = (got == t)[valid].mean()
    assert np.mean(losses[-10:]) < 0.2 * np.mean(losses[:10]), losses
    assert accuracy > 0.95, accuracy


def test_transitions_of_unknown_size_are_refused_by_the_cells():
    with fl.Graph().as_default():
        with pytest.raises(ValueError, match="num_tags known"):
            crf.CrfForwardRnnCell(fl.placeholder(fl.f32, [None, None]))
