"""fl.contrib.seq2seq.sequence_loss and fl.contrib.legacy_seq2seq.sequence_loss_by_example /
sequence_loss, TF1's sequence cross-entropies: every averaging and summing choice against
numpy (in the interpreter and compiled C, with zero weights and an all-zero row), a custom
softmax_loss_function, their gradients, and the errors TF1 gives for bad arguments."""
import numpy as np
import pytest

import dsl as fl
from dsl.contrib import legacy_seq2seq, seq2seq

BACKENDS = ["interpreter", "c"]
BATCH, STEPS, CLASSES = 4, 5, 6


def _data(seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(BATCH, STEPS, CLASSES)).astype(np.float32) * 2
    targets = rng.integers(0, CLASSES, size=(BATCH, STEPS)).astype(np.int32)
    weights = rng.uniform(0.5, 2.0, size=(BATCH, STEPS)).astype(np.float32)
    weights[1, 3:] = 0.0                       # padding
    weights[:, 4] = 0.0                        # a step no sequence reaches
    weights[2] = 0.0                           # an empty sequence
    return logits, targets, weights


def _crossent(logits, targets):
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]


def _div_no_nan(a, b):
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    return np.where(b == 0, 0.0, a / np.where(b == 0, 1.0, b))


def _want(logits, targets, weights, avg_t, avg_b, sum_t, sum_b):
    """TF1's sequence_loss in numpy."""
    ce = _crossent(logits, targets) * weights
    if avg_t and avg_b:
        return _div_no_nan(ce.sum(), weights.sum())
    if sum_t and sum_b:
        return _div_no_nan(ce.sum(), (weights != 0).sum())
    if avg_t or avg_b:
        axis = 0 if avg_b else 1
        return _div_no_nan(ce.sum(axis), weights.sum(axis))
    if sum_t or sum_b:
        axis = 0 if sum_b else 1
        return _div_no_nan(ce.sum(axis), (weights != 0).sum(axis))
    return ce


FLAGS = [(True, True, False, False), (True, False, False, False), (False, True, False, False),
         (False, False, False, False), (False, False, True, True), (False, False, True, False),
         (False, False, False, True), (True, False, False, True), (False, True, True, False)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequence_loss_averages_and_sums_as_tf1(backend):
    logits, targets, weights = _data()
    g = fl.Graph()
    with g.as_default():
        lp = fl.placeholder(fl.f32, [None, None, CLASSES])
        tp = fl.placeholder(fl.i32, [None, None])
        wp = fl.placeholder(fl.f32, [None, None])
        losses = [seq2seq.sequence_loss(lp, tp, wp, average_across_timesteps=a_t,
                                        average_across_batch=a_b, sum_over_timesteps=s_t,
                                        sum_over_batch=s_b) for a_t, a_b, s_t, s_b in FLAGS]
        with fl.Session(graph=g, backend=backend) as s:
            got = s.run(losses, {lp: logits, tp: targets, wp: weights})
    for flags, value in zip(FLAGS, got):
        want = _want(logits, targets, weights, *flags)
        assert value.shape == np.shape(want), flags
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6, err_msg=str(flags))
    # the empty sequence and the unreached step give 0, not NaN
    assert got[1][2] == 0 and got[2][4] == 0


def test_sequence_loss_uses_the_given_softmax_loss_function():
    logits, targets, weights = _data(1)
    seen = []

    def loss_function(labels=None, logits=None):
        seen.append(labels)
        return 2.0 * fl.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                    logits=logits)
    with fl.Graph().as_default():
        loss = seq2seq.sequence_loss(fl.constant(logits), fl.constant(targets),
                                     fl.constant(weights), softmax_loss_function=loss_function,
                                     name="my_loss")
        assert loss.op.name.startswith("my_loss/")
        with fl.Session(backend="c") as s:
            got = s.run(loss)
    assert len(seen) == 1                        # once, on the flattened steps
    np.testing.assert_allclose(got, 2 * _want(logits, targets, weights, True, True, False,
                                              False), rtol=1e-5)


def test_sequence_loss_refuses_what_tf1_refuses():
    logits, targets, weights = _data()
    with fl.Graph().as_default():
        with pytest.raises(ValueError, match="Logits must be"):
            seq2seq.sequence_loss(logits[0], targets, weights)
        with pytest.raises(ValueError, match="Targets must be"):
            seq2seq.sequence_loss(logits, targets[0], weights)
        with pytest.raises(ValueError, match="Weights must be"):
            seq2seq.sequence_loss(logits, targets, weights[0])
        with pytest.raises(ValueError, match="cannot be set to True at same time"):
            seq2seq.sequence_loss(logits, targets, weights, sum_over_timesteps=True)
        with pytest.raises(ValueError, match="cannot be set to True at same time"):
            seq2seq.sequence_loss(logits, targets, weights, average_across_timesteps=False,
                                  sum_over_batch=True)


def _steps(x):
    return [x[:, t] for t in range(x.shape[1])]


@pytest.mark.parametrize("backend", BACKENDS)
def test_legacy_losses_over_lists_of_steps_equal_numpy(backend):
    logits, targets, weights = _data(2)
    weights[2] = 0.0
    ce = (_crossent(logits, targets) * weights).sum(1)
    total = weights.sum(1)
    g = fl.Graph()
    with g.as_default():
        lp = [fl.placeholder(fl.f32, [None, CLASSES]) for _ in range(STEPS)]
        tp = [fl.placeholder(fl.i32, [None]) for _ in range(STEPS)]
        wp = [fl.placeholder(fl.f32, [None]) for _ in range(STEPS)]
        fetch = {
            "by_example": legacy_seq2seq.sequence_loss_by_example(lp, tp, wp),
            "by_example_sum": legacy_seq2seq.sequence_loss_by_example(
                lp, tp, wp, average_across_timesteps=False),
            "loss": legacy_seq2seq.sequence_loss(lp, tp, wp),
            "loss_no_batch_avg": legacy_seq2seq.sequence_loss(lp, tp, wp,
                                                              average_across_batch=False),
            "loss_sum": legacy_seq2seq.sequence_loss(lp, tp, wp, False, False),
        }
        feed = dict(zip(lp + tp + wp, _steps(logits) + _steps(targets) + _steps(weights)))
        with fl.Session(graph=g, backend=backend) as s:
            got = s.run(fetch, feed)
    by_example = ce / (total + 1e-12)
    np.testing.assert_allclose(got["by_example"], by_example, rtol=1e-5, atol=1e-6)
    assert got["by_example"][2] == 0
    np.testing.assert_allclose(got["by_example_sum"], ce, rtol=1e-5)
    np.testing.assert_allclose(got["loss"], by_example.sum() / BATCH, rtol=1e-5)
    np.testing.assert_allclose(got["loss_no_batch_avg"], by_example.sum(), rtol=1e-5)
    np.testing.assert_allclose(got["loss_sum"], ce.sum(), rtol=1e-5)


def test_legacy_losses_take_a_softmax_loss_function_and_check_lengths():
    logits, targets, weights = _data(3)
    calls = []

    def loss_function(labels=None, logits=None):
        calls.append(labels)
        return fl.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits) * 3
    with fl.Graph().as_default():
        loss = legacy_seq2seq.sequence_loss(_steps(logits), _steps(targets), _steps(weights),
                                            softmax_loss_function=loss_function)
        with fl.Session(backend="c") as s:
            got = s.run(loss)
        with pytest.raises(ValueError, match="must be the same 5, 4, 5"):
            legacy_seq2seq.sequence_loss_by_example(_steps(logits), _steps(targets),
                                                    _steps(weights)[:4])
    assert len(calls) == STEPS
    ce = (_crossent(logits, targets) * weights).sum(1) / (weights.sum(1) + 1e-12)
    np.testing.assert_allclose(got, 3 * ce.sum() / BATCH, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_of_both_losses_reach_the_logits(backend):
    logits, targets, weights = _data(4)
    g = fl.Graph()
    with g.as_default():
        lp = fl.placeholder(fl.f32, [None, STEPS, CLASSES])
        loss = fl.contrib.seq2seq.sequence_loss(lp, targets, weights)
        legacy = fl.contrib.legacy_seq2seq.sequence_loss(fl.unstack(lp, axis=1), _steps(targets),
                                              _steps(weights), average_across_timesteps=False)
        grads = fl.gradients([loss, legacy], [lp])[0]
        grad_each = [fl.gradients(loss, [lp])[0], fl.gradients(legacy, [lp])[0]]
        with fl.Session(graph=g, backend=backend) as s:
            g_both, g_loss, g_legacy = s.run([grads, grad_each[0], grad_each[1]], {lp: logits})
    shifted = logits - logits.max(-1, keepdims=True)
    softmax = np.exp(shifted) / np.exp(shifted).sum(-1, keepdims=True)
    d_ce = softmax - np.eye(CLASSES, dtype=np.float32)[targets]     # d crossent / d logits
    np.testing.assert_allclose(g_loss, d_ce * (weights / weights.sum())[..., None],
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(g_legacy, d_ce * (weights / BATCH)[..., None], rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(g_both, g_loss + g_legacy, rtol=1e-4, atol=1e-6)
    assert not g_loss[:, 4].any()                # weight 0: no gradient
