"""fl.contrib.slim and fl.contrib.framework: arg_scope (nesting, overriding, reuse of a scope,
functions it refuses), the variable functions, slim.losses' argument order, and a slim CNN
written as a TF1 program (tests/data/tf1_programs/slim_cnn.py) that must train and give what
TensorFlow with tf_slim gave for it (recorded by record_slim_programs.py into
slim_programs.npz): losses, logits, every variable's name, order and final value."""
import importlib.util
import os

import numpy as np
import pytest

import dsl as tf
from repo_paths import ROOT

slim = tf.contrib.slim
HERE = os.path.join(ROOT, "tests", "data", "tf1_programs")
RECORDED = os.path.join(HERE, "slim_programs.npz")
X = np.random.RandomState(1).randn(2, 5, 5, 3).astype(np.float32)


@pytest.fixture(autouse=True)
def fresh_graph():
    g = tf.Graph()
    with g.as_default():
        yield g


# --- arg_scope -------------------------------------------------------------------------------
def test_arg_scope_sets_defaults_that_calls_and_inner_scopes_override():
    with slim.arg_scope([slim.conv2d, slim.fully_connected], activation_fn=None,
                        weights_initializer=tf.ones_initializer()):
        with slim.arg_scope([slim.conv2d], padding="VALID"):
            valid = slim.conv2d(X, 2, 3)
            same = slim.conv2d(X, 2, 3, padding="SAME")
            fc = slim.fully_connected(slim.flatten(X), 2)
        outer = slim.conv2d(X, 2, 3)
    plain = slim.conv2d(X, 2, 3)
    assert valid.get_shape().as_list() == [2, 3, 3, 2]
    assert same.get_shape().as_list() == [2, 5, 5, 2]
    assert outer.get_shape().as_list() == [2, 5, 5, 2]      # SAME again outside the inner
    with tf.Session(backend="interpreter") as s:
        s.run(tf.global_variables_initializer())
        got_valid, got_fc, got_plain = s.run([valid, fc, plain])
    np.testing.assert_allclose(got_valid[0, 0, 0], [X[0, :3, :3].sum()] * 2, rtol=1e-5)
    np.testing.assert_allclose(got_fc[0], [X[0].sum()] * 2, rtol=1e-5)
    assert (got_plain >= 0).all() and (got_plain == 0).any()  # relu (the default) is back


def test_arg_scope_yields_a_scope_to_reuse_and_refuses_undecorated_functions():
    with slim.arg_scope([slim.conv2d], padding="VALID", activation_fn=None) as sc:
        pass
    assert sc[tf.contrib.framework.arg_scope_func_key(slim.conv2d)] == {
        "padding": "VALID", "activation_fn": None}
    with slim.arg_scope(sc):
        assert slim.conv2d(X, 2, 3).get_shape().as_list() == [2, 3, 3, 2]
    assert slim.conv2d(X, 2, 3).get_shape().as_list() == [2, 5, 5, 2]
    with pytest.raises(ValueError, match="not decorated with @add_arg_scope"):
        with slim.arg_scope([tf.nn.conv2d], padding="VALID"):
            pass
    with pytest.raises(ValueError, match="not decorated with @add_arg_scope"):
        with slim.arg_scope([slim.relu], padding="VALID"):    # a functools.partial
            pass
    with pytest.raises(TypeError, match="list/tuple"):
        with slim.arg_scope(slim.conv2d, padding="VALID"):
            pass
    with pytest.raises(ValueError, match="kwargs must be empty"):
        with slim.arg_scope(sc, padding="SAME"):
            pass
    # a keyword the function does not take is the function's own TypeError
    with slim.arg_scope([slim.max_pool2d], no_such_argument=1):
        with pytest.raises(TypeError, match="no_such_argument"):
            slim.max_pool2d(X, 2)


def test_add_arg_scope_on_a_users_function_and_arg_scoped_arguments():
    @slim.add_arg_scope
    def scaled(x, factor=1.0, bias=0.0):
        return x * factor + bias

    with slim.arg_scope([scaled], factor=3.0):
        with slim.arg_scope([scaled], bias=1.0):
            assert scaled(2.0) == 7.0
            assert scaled(2.0, factor=1.0) == 3.0
        assert scaled(2.0) == 6.0
    assert scaled(2.0) == 2.0
    assert slim.arg_scoped_arguments(scaled) == ["factor", "bias"]
    assert "normalizer_fn" in slim.arg_scoped_arguments(slim.conv2d)
    assert slim.has_arg_scope(slim.batch_norm) and not slim.has_arg_scope(tf.nn.relu)


def test_slims_own_conv2d_alias_shares_the_defaults_of_convolution2d():
    with slim.arg_scope([slim.convolution2d], padding="VALID"):
        assert slim.conv2d(X, 2, 3).get_shape().as_list() == [2, 3, 3, 2]
    with slim.arg_scope([tf.contrib.layers.conv2d], stride=5):
        assert slim.conv2d(X, 2, 3).get_shape().as_list() == [2, 1, 1, 2]


# --- variables -------------------------------------------------------------------------------
def test_variable_helpers_filter_by_scope_suffix_and_collection():
    with tf.variable_scope("net"):
        slim.conv2d(X, 2, 3, scope="conv1", normalizer_fn=slim.batch_norm)
        slim.fully_connected(slim.flatten(X), 2, scope="fc")
    step = slim.get_or_create_global_step()
    extra = slim.variable("extra", shape=[2], initializer=tf.zeros_initializer())
    local = slim.local_variable(np.zeros(3, np.float32), name="counter")
    assert step is slim.get_or_create_global_step() and step.name == "global_step:0"
    names = [v.name for v in slim.get_model_variables()]
    assert names == ["net/conv1/weights:0", "net/conv1/BatchNorm/beta:0",
                     "net/conv1/BatchNorm/moving_mean:0",
                     "net/conv1/BatchNorm/moving_variance:0", "net/fc/weights:0",
                     "net/fc/biases:0"]
    assert extra not in slim.get_model_variables() and extra in slim.get_variables()
    assert [v.name for v in slim.get_trainable_variables("net/conv1")] == [
        "net/conv1/weights:0", "net/conv1/BatchNorm/beta:0"]
    assert [v.name for v in slim.get_variables(suffix="weights")] == [
        "net/conv1/weights:0", "net/fc/weights:0"]
    assert [v.name for v in slim.get_variables_by_name("beta")] == [
        "net/conv1/BatchNorm/beta:0"]
    assert slim.get_unique_variable("net/fc/biases").name == "net/fc/biases:0"
    with pytest.raises(ValueError, match="Couldn't find"):
        slim.get_unique_variable("net/fc/nothing")
    restore = slim.get_variables_to_restore(include=["net"], exclude=["net/conv1/BatchNorm"])
    assert [v.name for v in restore] == ["net/conv1/weights:0", "net/fc/weights:0",
                                         "net/fc/biases:0"]
    assert local in slim.get_local_variables() and local not in slim.get_variables()
    with pytest.raises(TypeError, match="list or a tuple"):
        slim.get_variables_to_restore(include="net")
    mv = slim.model_variable("mv", shape=[1], collections=["mine"])
    assert tf.get_collection("mine") == [mv] and mv in slim.get_model_variables()


def test_assign_from_checkpoint_fn_restores_by_name(tmp_path):
    w = slim.model_variable("w", shape=[3], initializer=tf.constant_initializer([1., 2., 3.]))
    saver = tf.train.Saver()
    with tf.Session(backend="interpreter") as s:
        s.run(tf.global_variables_initializer())
        path = saver.save(s, str(tmp_path / "model.ckpt"))
        w.load(np.zeros(3, np.float32), s)
        slim.assign_from_checkpoint_fn(path, slim.get_model_variables())(s)
        np.testing.assert_array_equal(s.run(w), [1., 2., 3.])


# --- losses ----------------------------------------------------------------------------------
def test_slim_losses_take_logits_or_predictions_first_and_total_adds_regularization():
    logits = tf.constant([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    onehot = tf.constant([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    ce = slim.losses.softmax_cross_entropy(logits, onehot)
    sparse = slim.losses.sparse_softmax_cross_entropy(logits, tf.constant([0, 2]))
    mse = slim.losses.mean_squared_error(tf.constant([1.0, 3.0]), tf.constant([0.0, 0.0]))
    hinge = slim.losses.hinge_loss(tf.constant([0.5, -2.0]), tf.constant([1.0, 0.0]))
    slim.fully_connected(X.reshape(2, -1), 2, weights_regularizer=slim.l2_regularizer(0.1))
    total = slim.losses.get_total_loss()
    assert len(slim.losses.get_losses()) == 3                 # hinge_loss is not collected
    with tf.Session(backend="interpreter") as s:
        s.run(tf.global_variables_initializer())
        got = s.run([ce, sparse, mse, hinge, total] + slim.losses.get_regularization_losses())
    lg = np.array([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    log_softmax = lg - np.log(np.exp(lg).sum(1, keepdims=True))
    want_ce = -(log_softmax[0, 0] + log_softmax[1, 2]) / 2
    np.testing.assert_allclose(got[:3], [want_ce, want_ce, 5.0], rtol=1e-5)
    np.testing.assert_allclose(got[3], [0.5, 0.0])
    np.testing.assert_allclose(got[4], 2 * want_ce + 5.0 + got[5], rtol=1e-5)


# --- the slim CNN program against TensorFlow -------------------------------------------------
def _program(name: str):
    spec = importlib.util.spec_from_file_location(f"tf1_{name}", os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_program_says_flowc_only_in_its_import_lines():
    with open(os.path.join(HERE, "slim_cnn.py")) as f:
        lines = [ln for ln in f if "dsl" in ln or "contrib." in ln]
    assert lines == ["import dsl as tf\n", "slim = tf.contrib.slim\n"]


def test_slim_cnn_trains_and_gives_tensorflows_losses_variables_and_outputs():
    got = _program("slim_cnn").main()
    with np.load(RECORDED) as data:
        want = {k: data[k] for k in data.files
                if k != "tensorflow_version" and not k.startswith("restored/")}
    assert sorted(got) == sorted(want)
    # TF1's names, in TF1's order (tf.layers' batch norm makes gamma before beta)
    assert list(got["train/variables"]) == list(want["train/variables"])
    assert "conv2/conv2_2/BatchNorm/moving_variance:0" in list(got["train/variables"])
    assert list(got["zoo/variables"]) == list(want["zoo/variables"])
    for key in sorted(want):
        if want[key].dtype.kind in "US":
            assert list(got[key]) == list(want[key]), key
        else:
            np.testing.assert_allclose(got[key], want[key], rtol=2e-4, atol=2e-5, err_msg=key)
    losses = got["train/losses"]
    assert losses[-1] < 0.3 * losses[0] and got["train/accuracy"] > 0.9   # it learns


def test_arg_scope_reaches_batch_norm_used_as_a_normalizer():
    is_training = tf.placeholder_with_default(True, [])
    with slim.arg_scope([slim.conv2d], normalizer_fn=slim.batch_norm):
        with slim.arg_scope([slim.batch_norm], is_training=is_training, scale=True,
                            decay=0.5, updates_collections=None):
            net = slim.conv2d(X, 2, 3, activation_fn=None,
                              weights_initializer=tf.ones_initializer())
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []      # updated in place
    assert [v.name for v in slim.get_model_variables()] == [
        "Conv/weights:0", "Conv/BatchNorm/beta:0", "Conv/BatchNorm/gamma:0",
        "Conv/BatchNorm/moving_mean:0", "Conv/BatchNorm/moving_variance:0"]
    mean = slim.get_unique_variable("Conv/BatchNorm/moving_mean")
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        out = s.run(net)
        moved = s.run(mean)
        s.run(net, {is_training: False})
        assert (s.run(mean) == moved).all()                 # inference leaves it
    np.testing.assert_allclose(out.mean(axis=(0, 1, 2)), 0, atol=1e-5)
    assert np.abs(moved).min() > 0.1                         # training moved it


def test_a_checkpoint_tensorflow_wrote_of_the_slim_cnn_restores_by_slims_names():
    program = _program("slim_cnn")
    path = os.path.join(HERE, "slim_checkpoint", "model.ckpt")
    with np.load(RECORDED) as data:
        want = data["restored/test_logits"]
    np.testing.assert_allclose(program.restore_and_predict(path), want, rtol=1e-4, atol=1e-5)


def test_assign_from_checkpoint_fn_can_leave_out_what_the_checkpoint_lacks():
    path = os.path.join(HERE, "slim_checkpoint", "model.ckpt")
    conv = slim.conv2d(tf.zeros([1, 8, 8, 2]), 4, [3, 3], scope="conv1",
                       normalizer_fn=slim.batch_norm, normalizer_params={"scale": True})
    extra = slim.model_variable("not_in_checkpoint", shape=[2])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        before = s.run(extra)
        slim.assign_from_checkpoint_fn(path, slim.get_model_variables(),
                                       ignore_missing_vars=True)(s)
        np.testing.assert_array_equal(s.run(extra), before)
        weights = s.run(slim.get_unique_variable("conv1/weights"))
    np.testing.assert_array_equal(weights, tf.train.load_variable(path, "conv1/weights"))
    assert slim.assign_from_checkpoint_fn(path, [extra], ignore_missing_vars=True) is None
    assert conv.get_shape().as_list() == [1, 8, 8, 4]
