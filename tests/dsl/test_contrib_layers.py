"""fl.contrib.layers' layer functions (slim's layers) against numpy, in the interpreter and in
compiled C: what each computes, the variables it makes (slim's names, shapes and
collections), batch_norm in training and inference with its moving-average updates, and the
errors for inputs they cannot take."""
import numpy as np
import pytest

import dsl as tf

layers = tf.contrib.layers
BACKENDS = ["interpreter", "c"]
RNG = np.random.RandomState(0)
IMAGES = RNG.randn(2, 6, 6, 3).astype(np.float32)
VECTORS = RNG.randn(5, 4).astype(np.float32)


@pytest.fixture(autouse=True)
def fresh_graph():
    g = tf.Graph()
    with g.as_default():
        yield g


def _run(fetches, backend, feed=None, before=None):
    with tf.Session(backend=backend) as s:
        s.run(tf.global_variables_initializer())
        if before is not None:
            s.run(before, feed)
        return s.run(fetches, feed)


def _names(collection=tf.GraphKeys.GLOBAL_VARIABLES):
    return [v.name for v in tf.get_collection(collection)]


def _const(value):
    return tf.constant_initializer(np.asarray(value, np.float32))


# --- numpy references ------------------------------------------------------------------------
def np_conv2d(x, w, stride=(1, 1), padding="SAME", rate=(1, 1)):
    kh, kw = (w.shape[0] - 1) * rate[0] + 1, (w.shape[1] - 1) * rate[1] + 1
    n, h, wd, _ = x.shape
    if padding == "SAME":
        oh, ow = -(-h // stride[0]), -(-wd // stride[1])
        ph = max((oh - 1) * stride[0] + kh - h, 0)
        pw = max((ow - 1) * stride[1] + kw - wd, 0)
        x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    else:
        oh, ow = (h - kh) // stride[0] + 1, (wd - kw) // stride[1] + 1
    out = np.zeros((n, oh, ow, w.shape[3]), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride[0]:i * stride[0] + kh:rate[0],
                      j * stride[1]:j * stride[1] + kw:rate[1], :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


def np_pool(x, k, s, fn):
    n, h, w, c = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    out = np.zeros((n, oh, ow, c), np.float64)
    for i in range(oh):
        for j in range(ow):
            out[:, i, j, :] = fn(x[:, i * s:i * s + k, j * s:j * s + k, :], axis=(1, 2))
    return out


# --- dense and convolutions ------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_fully_connected_is_relu_of_x_times_weights_plus_biases(backend):
    w = RNG.randn(4, 3).astype(np.float32)
    out = layers.fully_connected(VECTORS, 3, weights_initializer=_const(w),
                                 biases_initializer=_const([0.5, -0.5, 0.0]))
    seq = layers.fully_connected(np.stack([VECTORS, VECTORS]), 3, activation_fn=None,
                                 weights_initializer=_const(w), scope="seq")
    got, got_seq = _run([out, seq], backend)
    want = np.maximum(VECTORS @ w + [0.5, -0.5, 0.0], 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_seq, np.stack([VECTORS @ w] * 2), rtol=1e-5, atol=1e-6)
    assert _names() == ["fully_connected/weights:0", "fully_connected/biases:0",
                        "seq/weights:0", "seq/biases:0"]
    assert _names(tf.GraphKeys.MODEL_VARIABLES) == _names()
    assert _names(tf.GraphKeys.TRAINABLE_VARIABLES) == _names()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("padding,stride,rate", [("SAME", 1, 1), ("VALID", 2, 1),
                                                 ("SAME", 1, 2)])
def test_conv2d_matches_numpy(backend, padding, stride, rate):
    w = RNG.randn(3, 3, 3, 4).astype(np.float32)
    out = layers.conv2d(IMAGES, 4, [3, 3], stride=stride, padding=padding, rate=rate,
                        activation_fn=None, weights_initializer=_const(w),
                        biases_initializer=_const(np.arange(4) * 0.1))
    want = np_conv2d(IMAGES, w, (stride, stride), padding, (rate, rate)) + np.arange(4) * 0.1
    np.testing.assert_allclose(_run(out, backend), want, rtol=1e-4, atol=1e-5)
    assert [(v.name, v.get_shape().as_list()) for v in tf.global_variables()] == [
        ("Conv/weights:0", [3, 3, 3, 4]), ("Conv/biases:0", [4])]


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv2d_nchw_and_conv1d(backend):
    w = RNG.randn(2, 2, 3, 5).astype(np.float32)
    nchw = layers.conv2d(IMAGES.transpose(0, 3, 1, 2), 5, 2, data_format="NCHW",
                         weights_initializer=_const(w))
    w1 = RNG.randn(3, 3, 2).astype(np.float32)
    seq = RNG.randn(2, 7, 3).astype(np.float32)
    one = layers.conv1d(seq, 2, 3, padding="VALID", activation_fn=None,
                        weights_initializer=_const(w1))
    got_nchw, got_one = _run([nchw, one], backend)
    np.testing.assert_allclose(got_nchw, np.maximum(np_conv2d(IMAGES, w), 0).transpose(0, 3, 1, 2),
                               rtol=1e-4, atol=1e-5)
    want_one = np_conv2d(seq[:, None], w1[None], padding="VALID")[:, 0]
    np.testing.assert_allclose(got_one, want_one, rtol=1e-4, atol=1e-5)
    assert tf.global_variables()[2].get_shape().as_list() == [3, 3, 2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv2d_transpose_is_tf_layers_conv2d_transpose_with_slims_names(backend):
    w = RNG.randn(3, 3, 2, 3).astype(np.float32)
    out = layers.conv2d_transpose(IMAGES, 2, 3, stride=2, activation_fn=None,
                                  weights_initializer=_const(w))
    valid = layers.conv2d_transpose(IMAGES, 2, 3, stride=2, padding="VALID",
                                    weights_initializer=_const(w))
    ref = tf.layers.conv2d_transpose(IMAGES, 2, 3, strides=2, padding="same",
                                     kernel_initializer=_const(w))
    ref_valid = tf.nn.relu(tf.layers.conv2d_transpose(IMAGES, 2, 3, strides=2,
                                                      padding="valid",
                                                      kernel_initializer=_const(w)))
    got, got_valid, want, want_valid = _run([out, valid, ref, ref_valid], backend)
    assert got.shape == (2, 12, 12, 2) and got_valid.shape == (2, 13, 13, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_valid, want_valid, rtol=1e-5, atol=1e-6)
    assert _names(tf.GraphKeys.MODEL_VARIABLES) == [
        "Conv2d_transpose/weights:0", "Conv2d_transpose/biases:0",
        "Conv2d_transpose_1/weights:0", "Conv2d_transpose_1/biases:0"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_separable_conv2d_is_depthwise_then_pointwise(backend):
    dw = RNG.randn(3, 3, 3, 2).astype(np.float32)
    pw = RNG.randn(1, 1, 6, 4).astype(np.float32)
    out = layers.separable_conv2d(IMAGES, 4, 3, depth_multiplier=2, activation_fn=None,
                                  weights_initializer=_const(dw),
                                  pointwise_initializer=_const(pw))
    depth = np.concatenate([np_conv2d(IMAGES[..., c:c + 1], dw[:, :, c:c + 1, :])
                            for c in range(3)], axis=-1)
    want = np.tensordot(depth, pw[0, 0], axes=([3], [0]))
    np.testing.assert_allclose(_run(out, backend), want, rtol=1e-4, atol=1e-5)
    assert [(v.name, v.get_shape().as_list()) for v in tf.global_variables()] == [
        ("SeparableConv2d/depthwise_weights:0", [3, 3, 3, 2]),
        ("SeparableConv2d/pointwise_weights:0", [1, 1, 6, 4]),
        ("SeparableConv2d/biases:0", [4])]


def test_normalizer_fn_replaces_the_biases_and_regularizers_collect_losses():
    reg = layers.l2_regularizer(0.5)
    out = layers.conv2d(IMAGES, 2, 1, normalizer_fn=layers.batch_norm,
                        normalizer_params={"scale": True}, weights_regularizer=reg,
                        variables_collections=["mine"], outputs_collections="outs")
    layers.fully_connected(VECTORS, 2, weights_regularizer=reg, biases_regularizer=reg,
                           variables_collections={"weights": ["only_weights"]})
    assert _names() == ["Conv/weights:0", "Conv/BatchNorm/gamma:0", "Conv/BatchNorm/beta:0",
                        "Conv/BatchNorm/moving_mean:0", "Conv/BatchNorm/moving_variance:0",
                        "fully_connected/weights:0", "fully_connected/biases:0"]
    assert _names("mine") == ["Conv/weights:0"]     # the normalizer has its own params
    assert _names("only_weights") == ["fully_connected/weights:0"]
    assert tf.get_collection("outs") == [out]
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == 3
    w = tf.global_variables()[0]
    with tf.Session(backend="interpreter") as s:
        s.run(tf.global_variables_initializer())
        np.testing.assert_allclose(s.run(losses[0]), 0.25 * np.sum(s.run(w) ** 2), rtol=1e-5)


def test_reuse_shares_the_weights_and_a_second_unnamed_layer_gets_new_ones():
    a = layers.fully_connected(VECTORS, 3, scope="fc")
    b = layers.fully_connected(VECTORS, 3, scope="fc", reuse=True)
    layers.fully_connected(VECTORS, 3)
    layers.fully_connected(VECTORS, 3)
    assert _names() == ["fc/weights:0", "fc/biases:0", "fully_connected/weights:0",
                        "fully_connected/biases:0", "fully_connected_1/weights:0",
                        "fully_connected_1/biases:0"]
    x, y = _run([a, b], "interpreter")
    np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="already exists"):
        layers.fully_connected(VECTORS, 3, scope="fc")


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="num_outputs"):
        layers.fully_connected(VECTORS, 3.0)
    with pytest.raises(ValueError, match="must be known"):
        layers.fully_connected(tf.placeholder(tf.float32, [None, None]), 3)
    with pytest.raises(ValueError, match="channel dimension"):
        layers.conv2d(tf.placeholder(tf.float32, [None, 4, 4, None]), 3, 3)
    with pytest.raises(ValueError, match="rank"):
        layers.conv2d(VECTORS, 3, 3)
    with pytest.raises(ValueError, match="data_format"):
        layers.max_pool2d(IMAGES, 2, data_format="NWHC")
    with pytest.raises(ValueError, match="padding"):
        layers.conv2d(IMAGES, 3, 3, padding="FULL")


# --- pooling, flatten, dropout, encodings ----------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_pools_flatten_one_hot_and_bias_add(backend):
    mp = layers.max_pool2d(IMAGES, [2, 2])
    ap = layers.avg_pool2d(IMAGES, 3, stride=3)
    ap_nchw = layers.avg_pool2d(IMAGES.transpose(0, 3, 1, 2), 2, data_format="NCHW")
    flat = layers.flatten(mp)
    hot = layers.one_hot_encoding(tf.constant([2, 0], tf.int32), 3)
    biased = layers.bias_add(VECTORS, initializer=_const([1, 2, 3, 4]))
    got = _run([mp, ap, ap_nchw, flat, hot, biased], backend)
    np.testing.assert_allclose(got[0], np_pool(IMAGES, 2, 2, np.max), rtol=1e-6)
    np.testing.assert_allclose(got[1], np_pool(IMAGES, 3, 3, np.mean), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], np_pool(IMAGES, 2, 2, np.mean).transpose(0, 3, 1, 2),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], np_pool(IMAGES, 2, 2, np.max).reshape(2, -1), rtol=1e-6)
    np.testing.assert_array_equal(got[4], [[0, 0, 1], [1, 0, 0]])
    np.testing.assert_allclose(got[5], VECTORS + [1, 2, 3, 4], rtol=1e-6)
    assert _names() == ["BiasAdd/biases:0"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_only_when_training(backend):
    ones = np.ones((200, 50), np.float32)
    switch = tf.placeholder_with_default(False, [])
    dropped = layers.dropout(ones, keep_prob=0.25, seed=3)
    kept = layers.dropout(ones, keep_prob=0.25, is_training=False)
    switched = layers.dropout(ones, keep_prob=0.25, is_training=switch, seed=3)
    with tf.Session(backend=backend) as s:
        d, k, off = s.run([dropped, kept, switched])
        on = s.run(switched, {switch: True})
    assert set(np.unique(d)) <= {0.0, 4.0} and abs((d > 0).mean() - 0.25) < 0.03
    np.testing.assert_array_equal(k, ones)
    np.testing.assert_array_equal(off, ones)
    assert set(np.unique(on)) <= {0.0, 4.0} and abs((on > 0).mean() - 0.25) < 0.03


@pytest.mark.parametrize("backend", BACKENDS)
def test_embed_sequence_and_layer_norm(backend):
    table = RNG.randn(6, 3).astype(np.float32)
    ids = np.array([[1, 5, 0], [2, 2, 4]], np.int64)
    emb = layers.embed_sequence(ids, vocab_size=6, embed_dim=3, initializer=_const(table))
    x = RNG.randn(2, 3, 4).astype(np.float32)
    ln = layers.layer_norm(x, begin_norm_axis=1)
    ln_last = layers.layer_norm(x, begin_norm_axis=-1, center=False, scope="last")
    got_emb, got_ln, got_last = _run([emb, ln, ln_last], backend)
    np.testing.assert_allclose(got_emb, table[ids], rtol=1e-6)
    mu = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(got_ln, (x - mu) / np.sqrt(var + 1e-12), rtol=1e-4, atol=1e-5)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(got_last, (x - mu) / np.sqrt(var + 1e-12), rtol=1e-4, atol=1e-5)
    assert [(v.name, v.get_shape().as_list()) for v in tf.global_variables()] == [
        ("EmbedSequence/embeddings:0", [6, 3]), ("LayerNorm/beta:0", [4]),
        ("LayerNorm/gamma:0", [4]), ("last/gamma:0", [4])]


def test_repeat_and_stack_name_their_layers_as_slim():
    net = layers.repeat(IMAGES, 2, layers.conv2d, 3, [3, 3], scope="conv3")
    layers.stack(layers.flatten(net), layers.fully_connected, [8, (4, )], scope="fc")
    layers.repeat(VECTORS, 1, layers.fully_connected, 2)
    assert [n for n in _names() if n.endswith("weights:0")] == [
        "conv3/conv3_1/weights:0", "conv3/conv3_2/weights:0", "fc/fc_1/weights:0",
        "fc/fc_2/weights:0", "Repeat/fully_connected_1/weights:0"]


def test_linear_and_relu_are_fully_connected_without_and_with_relu():
    w = np.eye(4, 2, dtype=np.float32)
    lin = layers.linear(-np.abs(VECTORS), 2, weights_initializer=_const(w))
    rel = layers.relu(-np.abs(VECTORS), 2, weights_initializer=_const(w))
    a, b = _run([lin, rel], "interpreter")
    np.testing.assert_allclose(a, -np.abs(VECTORS)[:, :2], rtol=1e-6)
    np.testing.assert_array_equal(b, np.zeros_like(b))
    assert _names()[0] == "fully_connected/weights:0"


# --- batch_norm ------------------------------------------------------------------------------
def _bn_reference(x, axes, eps, gamma=1.0, beta=0.0):
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta, mean, var


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fused", [None, False])
def test_batch_norm_trains_on_the_batch_and_updates_moving_averages(backend, fused):
    out = layers.batch_norm(IMAGES, decay=0.9, scale=True, fused=fused,
                            param_initializers={"gamma": _const([1.0, 2.0, 0.5])})
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2
    with tf.Session(backend=backend) as s:
        s.run(tf.global_variables_initializer())
        got = s.run(out)
        s.run(updates)
        mm, mv = s.run(tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)[2:])
    want, mean, var = _bn_reference(IMAGES, (0, 1, 2), 1e-3, np.array([1.0, 2.0, 0.5]))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    count = IMAGES.size // 3
    if fused is None:   # FusedBatchNorm hands the update the unbiased variance
        var = var * count / (count - 1)
    np.testing.assert_allclose(mm, 0.1 * mean, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(mv, 0.9 + 0.1 * var, rtol=1e-4)
    # tf.layers' BatchNormalization makes gamma before beta, as TF1's slim batch_norm does
    assert _names() == ["BatchNorm/gamma:0", "BatchNorm/beta:0", "BatchNorm/moving_mean:0",
                        "BatchNorm/moving_variance:0"]
    assert _names(tf.GraphKeys.TRAINABLE_VARIABLES) == _names()[:2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_inference_uses_the_moving_averages_and_a_switch_picks_per_step(backend):
    init = {"moving_mean": _const([0.5, -1.0, 0.0]), "moving_variance": _const([4.0, 1.0, 0.25]),
            "beta": _const([0.0, 1.0, 2.0])}
    inference = layers.batch_norm(IMAGES, is_training=False, param_initializers=init,
                                  scope="inference")
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
    switch = tf.placeholder_with_default(False, [])
    switched = layers.batch_norm(IMAGES, is_training=switch, param_initializers=init,
                                 scope="switched")
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    moving = [v for v in tf.global_variables() if v.name.startswith("switched/moving")]
    with tf.Session(backend=backend) as s:
        s.run(tf.global_variables_initializer())
        got, off = s.run([inference, switched])
        s.run(updates)                              # not training: the averages stay
        np.testing.assert_allclose(s.run(moving), [[0.5, -1.0, 0.0], [4.0, 1.0, 0.25]])
        on = s.run(switched, {switch: True})
        s.run(updates, {switch: True})
        after = s.run(moving)
    want = (IMAGES - [0.5, -1.0, 0.0]) / np.sqrt(np.array([4.0, 1.0, 0.25]) + 1e-3) + \
        [0.0, 1.0, 2.0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(off, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(on, _bn_reference(IMAGES, (0, 1, 2), 1e-3, 1.0,
                                                 [0.0, 1.0, 2.0])[0], rtol=1e-4, atol=1e-4)
    mean = IMAGES.mean(axis=(0, 1, 2))
    np.testing.assert_allclose(after[0], 0.999 * np.array([0.5, -1.0, 0.0]) + 0.001 * mean,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_with_updates_in_place_runs_them_with_the_output(backend):
    out = layers.batch_norm(VECTORS, decay=0.5, updates_collections=None, center=False)
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
    # slim's own code (not tf.layers') makes these: no beta, moving averages only
    assert _names() == ["BatchNorm/moving_mean:0", "BatchNorm/moving_variance:0"]
    with tf.Session(backend=backend) as s:
        s.run(tf.global_variables_initializer())
        got = s.run(out)
        mm, mv = s.run(tf.global_variables())
    want, mean, var = _bn_reference(VECTORS, (0,), 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mm, 0.5 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mv, 0.5 + 0.5 * var * 5 / 4, rtol=1e-5)


def test_batch_norm_refuses_what_it_does_not_support():
    with pytest.raises(NotImplementedError, match="batch_weights"):
        layers.batch_norm(VECTORS, batch_weights=np.ones(5, np.float32))
    with pytest.raises(ValueError, match="channel dimension"):
        layers.batch_norm(tf.placeholder(tf.float32, [None, None]))
    with pytest.raises(ValueError, match="undefined rank"):
        layers.batch_norm(tf.placeholder(tf.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_nchw_is_nhwc_transposed(backend):
    nhwc = layers.batch_norm(IMAGES, scale=True, scope="nhwc")
    nchw = layers.batch_norm(IMAGES.transpose(0, 3, 1, 2), scale=True, data_format="NCHW",
                             scope="nchw")
    unfused = layers.batch_norm(IMAGES.transpose(0, 3, 1, 2), data_format="NCHW", fused=False,
                                scope="unfused")
    a, b, c = _run([nhwc, nchw, unfused], backend)
    np.testing.assert_allclose(b, a.transpose(0, 3, 1, 2), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c, a.transpose(0, 3, 1, 2), rtol=1e-4, atol=1e-4)
    assert tf.global_variables()[-1].get_shape().as_list() == [3]


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_and_unit_norm(backend):
    x = RNG.randn(2, 3, 4).astype(np.float32)
    sm, un = _run([layers.softmax(x), layers.unit_norm(x, 1)], backend)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(-1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(un, x / np.sqrt(1e-7 + (x ** 2).sum(1, keepdims=True)),
                               rtol=1e-5)
    with pytest.raises(ValueError, match="dim must be"):
        layers.unit_norm(x, 3)
