"""fl.variable_scope and fl.get_variable against TensorFlow 1.x.

``naming_program`` is a TF1 program (variable sharing by reuse, AUTO_REUSE, default names,
scope defaults, name scopes, the errors); ``TF_OUTPUT`` is what it printed under
``tensorflow.compat.v1`` (TensorFlow 2.21), with flowc's dtype spellings (``f64`` for
``float64``); under ``import dsl as tf`` it must print the same.
"""
import numpy as np
import pytest

import dsl as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    g = tf.Graph()
    with g.as_default():
        yield g


def naming_program(tf, np):
    out = []
    x = tf.placeholder(tf.float32, [None, 4], name="x")

    def model(inp):
        with tf.variable_scope("layer1"):
            w = tf.get_variable("w", [4, 3])
            b = tf.get_variable("b", [3], initializer=tf.zeros_initializer())
            h = tf.nn.relu(tf.matmul(inp, w) + b)
        with tf.variable_scope("layer2"):
            w2 = tf.get_variable("w", [3, 2])
            return tf.matmul(h, w2, name="logits")

    with tf.variable_scope("model"):
        y1 = model(x)
    with tf.variable_scope("model", reuse=True):
        y2 = model(x)
    out += [y1.name, y2.name]
    with tf.variable_scope("model") as scope:
        scope.reuse_variables()
        y3 = model(x)
    out.append(y3.name)
    with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
        a = tf.get_variable("v", [2])
    with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
        a2 = tf.get_variable("v", [2])
        out.append(str(a is a2))
    with tf.variable_scope("outer"):
        for _ in range(2):
            with tf.variable_scope(None, default_name="block"):
                out.append(tf.get_variable("k", [1]).name)
                out.append(tf.identity(x).name)
    with tf.variable_scope("outer", reuse=True):
        for _ in range(2):
            with tf.variable_scope(None, default_name="block"):
                out.append(tf.get_variable("k", [1]).name)
    with tf.variable_scope("init", initializer=tf.constant_initializer(0.5),
                           dtype=tf.float64) as s:
        v = tf.get_variable("v", [2])
        out.append(v.dtype.name if hasattr(v.dtype, "name") else str(v.dtype))
        with tf.variable_scope("inner"):
            out.append(tf.get_variable("u", [1]).name)
    with tf.variable_scope(s, auxiliary_name_scope=False):
        out.append(tf.constant(1.0).name)
    with tf.variable_scope(s):
        out.append(tf.constant(1.0).name)
    with tf.name_scope("ns"):
        with tf.variable_scope("vs"):
            out.append(tf.get_variable("v", [1]).name)
            out.append(tf.constant(1.0, name="c").name)
    iv = tf.get_variable("ints", [3], dtype=tf.int32)
    out.append(iv.name)
    cv = tf.get_variable("from_value", initializer=np.arange(3, dtype=np.float32))
    out.append(cv.name)
    nt = tf.get_variable("frozen", [1], trainable=False)
    out.append(str(nt in tf.trainable_variables()))
    for fn, what in ((lambda: tf.get_variable("from_value", [3]), "exists"),
                     (lambda: tf.get_variable("c2", [3], initializer=np.ones(3, np.float32)),
                      "constant with shape"),
                     (lambda: tf.get_variable("c3", initializer=np.ones(3, np.int32),
                                              dtype=tf.float32), "dtype"),
                     (lambda: tf.variable_scope(None, reuse=True).__enter__(), "reuse none"),
                     (lambda: tf.variable_scope(None).__enter__(), "no name")):
        try:
            fn()
            out.append("no error: " + what)
        except (ValueError, TypeError) as e:
            out.append(f"{type(e).__name__}: {str(e).splitlines()[0]}")
    with tf.variable_scope("model", reuse=True):
        with tf.variable_scope("layer1"):
            for fn in (lambda: tf.get_variable("w", [4, 4]),
                       lambda: tf.get_variable("w", [4, 3], dtype=tf.float64),
                       lambda: tf.get_variable("missing", [1])):
                try:
                    fn()
                except ValueError as e:
                    out.append(str(e).splitlines()[0])
    out.append(" ".join(sorted(v.name for v in tf.global_variables())))
    return out


TF_OUTPUT = [
    'model/layer2/logits:0',
    'model_1/layer2/logits:0',
    'model_2/layer2/logits:0',
    'True',
    'outer/block/k:0',
    'outer/block/Identity:0',
    'outer/block_1/k:0',
    'outer/block_1/Identity:0',
    'outer/block/k:0',
    'outer/block_1/k:0',
    'f64',
    'init/inner/u:0',
    'Const:0',
    'init_1/Const:0',
    'vs/v:0',
    'ns/vs/c:0',
    'ints:0',
    'from_value:0',
    'False',
    'ValueError: Variable from_value already exists, disallowed. Did you mean to set reuse=True or reuse=tf.AUTO_REUSE in VarScope?',
    'ValueError: If initializer is a constant, do not specify shape.',
    "ValueError: Initializer type 'i32' and explicit dtype 'f32' don't match.",
    'TypeError: If default_name is None then name_or_scope is required',
    'TypeError: If default_name is None then name_or_scope is required',
    'Trying to share variable model/layer1/w, but specified shape (4, 4) and found shape (4, 3).',
    'Trying to share variable model/layer1/w, but specified dtype f64 and found dtype f32.',
    'Variable model/layer1/missing does not exist, or was not created with tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in VarScope?',
    'auto/v:0 from_value:0 frozen:0 init/inner/u:0 init/v:0 ints:0 model/layer1/b:0 model/layer1/w:0 model/layer2/w:0 outer/block/k:0 outer/block_1/k:0 vs/v:0',
]


def test_the_naming_program_prints_what_tensorflow_printed():
    assert naming_program(tf, np) == TF_OUTPUT


def test_shared_weights_give_the_same_values_and_train_once():
    x = tf.placeholder(tf.float32, [None, 2])

    def tower(inp):
        w = tf.get_variable("w", [2, 1], initializer=tf.constant_initializer([[1.0], [2.0]]))
        return tf.matmul(inp, w)

    with tf.variable_scope("tower"):
        a = tower(x)
    with tf.variable_scope("tower", reuse=True):
        b = tower(x * 2.0)
    assert len(tf.trainable_variables()) == 1
    loss = tf.reduce_sum(a) + tf.reduce_sum(b)
    step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    feed = {x: np.array([[1.0, 1.0]], np.float32)}
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        av, bv = s.run([a, b], feed)
        assert av[0, 0] == 3.0 and bv[0, 0] == 6.0
        s.run(step, feed)
        # d loss / d w = x + 2x = [3, 3]: one variable, both uses summed
        np.testing.assert_allclose(s.run(tf.global_variables()[0]), [[0.7], [1.7]], rtol=1e-6)


def test_default_initializers_are_glorot_uniform_for_floats_and_zeros_otherwise():
    w = tf.get_variable("w", [60, 40])
    i = tf.get_variable("i", [3], dtype=tf.int64)
    b = tf.get_variable("b", [2], dtype=tf.bool)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        wv, iv, bv = s.run([w, i, b])
    limit = np.sqrt(6.0 / (60 + 40))
    assert np.abs(wv).max() <= limit and np.abs(wv).max() > 0.9 * limit
    assert abs(wv.std() - limit / np.sqrt(3)) < 0.1 * limit    # uniform: limit / sqrt(3)
    assert iv.dtype == np.int64 and not iv.any() and not bv.any()


def test_initializer_forms_and_collections():
    a = tf.get_variable("a", [2, 2], initializer=tf.ones_initializer)      # a class
    b = tf.get_variable("b", initializer=tf.constant([1.0, 2.0]))          # a tensor
    c = tf.get_variable("c", [3], initializer=lambda shape, dtype=None, partition_info=None:
                        tf.fill(shape, 7.0))                              # a function
    d = tf.get_variable("d", [1], collections=[tf.GraphKeys.LOCAL_VARIABLES])
    e = tf.get_local_variable("e", [1])
    assert d in tf.local_variables() and d not in tf.global_variables()
    assert e in tf.local_variables() and e not in tf.trainable_variables()
    with tf.Session() as s:
        s.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        av, bv, cv = s.run([a, b, c])
    assert (av == 1).all() and list(bv) == [1.0, 2.0] and list(cv) == [7.0] * 3
    with pytest.raises(ValueError, match="initializer passed for variable f is not valid"):
        tf.get_variable("f", [None, 2])


def test_custom_getters_nest_and_see_every_get_variable():
    seen = []

    def outer(getter, name, *args, **kwargs):
        seen.append(("outer", name))
        return getter(name, *args, **kwargs)

    def inner(getter, name, *args, **kwargs):
        seen.append(("inner", name))
        return getter(name, *args, **kwargs)

    with tf.variable_scope("a", custom_getter=outer):
        with tf.variable_scope("b", custom_getter=inner):
            v = tf.get_variable("v", [1])
    assert v.name == "a/b/v:0"
    assert seen == [("inner", "a/b/v"), ("outer", "a/b/v")]


def test_reuse_is_inherited_and_false_means_inherit():
    with tf.variable_scope("s"):
        tf.get_variable("v", [1])
    with tf.variable_scope("s", reuse=True):
        with tf.variable_scope(tf.get_variable_scope(), reuse=False):
            assert tf.get_variable_scope().reuse is True
            assert tf.get_variable("v", [1]).name == "s/v:0"
    assert tf.get_variable_scope().name == "" and not tf.get_variable_scope().reuse
    with pytest.raises(ValueError, match="reuse parameter must be True or False or None"):
        with tf.variable_scope("s", reuse="yes"):
            pass
