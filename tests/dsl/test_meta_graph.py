"""Meta graphs (``Saver.save`` writes ``.meta``; ``fl.train.import_meta_graph``) and
``fl.import_graph_def``, as TensorFlow 1.x programs use them."""
import os

import numpy as np
import pytest

import dsl as tf

RNG = np.random.RandomState(0)
X = RNG.randn(16, 3).astype(np.float32)
Y = X @ np.array([[1.0], [2.0], [3.0]], np.float32)


def _model():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    w = tf.Variable(tf.zeros([3, 1]), name="w")
    b = tf.Variable(0.5, name="b", trainable=False)
    pred = tf.identity(tf.matmul(x, w) + b, name="pred")
    loss = tf.reduce_mean(tf.square(pred - y), name="loss")
    gs = tf.train.get_or_create_global_step()
    train = tf.train.AdamOptimizer(0.1).minimize(loss, global_step=gs)
    tf.add_to_collection("train_op", train)
    tf.add_to_collection("mine", pred)
    tf.add_to_collection("mine", "label")
    tf.add_to_collection("mine", 3)
    return x, y, w, loss, train, gs


def test_save_writes_meta_and_a_new_program_continues_training(tmp_path):
    d = str(tmp_path)
    g = tf.Graph()
    with g.as_default():
        x, y, w, loss, train, gs = _model()
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(5):
                sess.run(train, {x: X, y: Y})
            want_loss = sess.run(loss, {x: X, y: Y})
            want_w = sess.run(w)
            path = saver.save(sess, os.path.join(d, "model.ckpt"), global_step=gs)
            sess.run(train, {x: X, y: Y})
            want_next = sess.run(loss, {x: X, y: Y})
    assert path.endswith("model.ckpt-5") and os.path.isfile(path + ".meta")

    g2 = tf.Graph()
    with g2.as_default():
        saver2 = tf.train.import_meta_graph(path + ".meta")
        assert isinstance(saver2, tf.train.Saver)
        mine = tf.get_collection("mine")
        assert mine[0].name == "pred:0" and mine[1:] == ["label", 3]
        assert [v.name for v in tf.trainable_variables()] == ["w:0"]
        names = [v.name for v in tf.global_variables()]
        assert names[:3] == ["w:0", "b:0", "global_step:0"] and "w/Adam:0" in names
        # one Python variable per handle, whichever collection it is reached through
        assert tf.trainable_variables()[0] is tf.global_variables()[0]
        train2 = tf.get_collection("train_op")[0]
        x2, y2 = g2.get_tensor_by_name("x:0"), g2.get_tensor_by_name("y:0")
        loss2 = g2.get_tensor_by_name("loss:0")
        assert g2.get_operation_by_name("w").type == "VarHandleOp"
        with tf.Session() as sess:
            saver2.restore(sess, tf.train.latest_checkpoint(d))
            np.testing.assert_allclose(sess.run(loss2, {x2: X, y2: Y}), want_loss, rtol=1e-6)
            np.testing.assert_allclose(sess.run(tf.trainable_variables()[0]), want_w)
            assert sess.run(tf.train.get_global_step()) == 5
            sess.run(train2, {x2: X, y2: Y})                 # Adam's slots came back too
            np.testing.assert_allclose(sess.run(loss2, {x2: X, y2: Y}), want_next, rtol=1e-5)
            # the imported saver saves again (under the imported ops) and writes .meta
            p2 = saver2.save(sess, os.path.join(d, "model.ckpt"), global_step=6)
        assert os.path.isfile(p2 + ".meta")


def test_meta_files_rotate_with_checkpoints_and_can_be_skipped(tmp_path):
    with tf.Graph().as_default():
        v = tf.Variable(1.0, name="v")
        saver = tf.train.Saver(max_to_keep=2)
        with tf.Session() as sess:
            sess.run(v.initializer)
            saver.save(sess, str(tmp_path / "m"), global_step=1)
            saver.save(sess, str(tmp_path / "m"), global_step=2)
            saver.save(sess, str(tmp_path / "n"), write_meta_graph=False)
    left = sorted(n for n in os.listdir(tmp_path) if n.endswith(".meta"))
    assert left == ["m-2.meta"]


def test_export_and_import_meta_graph_under_a_scope(tmp_path):
    with tf.Graph().as_default():
        _model()
        meta = tf.train.export_meta_graph(str(tmp_path / "g.meta"))
        assert meta["saver_def"] is None and "train_op" in meta["collections"]
    g = tf.Graph()
    with g.as_default():
        other = tf.constant(1.0, name="x")                 # taken names stay taken
        saver = tf.train.import_meta_graph(str(tmp_path / "g.meta"), import_scope="m")
        assert isinstance(saver, tf.train.Saver)          # variables but no saver: a new one
        assert g.get_tensor_by_name("m/x:0").dtype == tf.float32 and other.name == "x:0"
        assert tf.get_collection("train_op")[0].name.startswith("m/")
        w = tf.trainable_variables()[0]
        assert w.name == "m/w:0"
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run(w).shape == (3, 1)


def test_import_meta_graph_refuses_other_files(tmp_path):
    bad = tmp_path / "x.meta"
    bad.write_bytes(b"\x08\x01binary")
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="not a flowc meta graph"):
            tf.train.import_meta_graph(str(bad))
        with pytest.raises(tf.NotFoundError):
            tf.train.import_meta_graph(str(tmp_path / "missing.meta"))


def _small_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        k = tf.constant([[2.0], [3.0]], name="k")
        tf.nn.relu(tf.matmul(x, k), name="out")
    return g


@pytest.mark.parametrize("form", ["graph_def", "bytes", "graph", "ir_text"])
def test_import_graph_def_input_map_and_return_elements(form):
    from compiler.ir.printer import print_graph
    src = _small_graph()
    gd = {"graph_def": lambda: src.as_graph_def(),
          "bytes": lambda: src.as_graph_def().SerializeToString(),
          "graph": lambda: src, "ir_text": lambda: print_graph(src)}[form]()
    with tf.Graph().as_default() as g:
        feed = tf.placeholder(tf.float32, [None, 2], name="feed")
        out, op = tf.import_graph_def(gd, input_map={"x": feed},
                                      return_elements=["out:0", "k"])
        assert out.name == "import/out:0" and op.name == "import/k" and op.type == "Const"
        again, = tf.import_graph_def(gd, input_map={"x:0": feed * 2.0},
                                     return_elements=["out:0"])
        assert again.name == "import_1/out:0"
        plain = tf.import_graph_def(gd, name="")
        assert plain is None and g.get_tensor_by_name("out:0").dtype == tf.float32
        with tf.Session() as sess:
            a, b = sess.run([out, again], {feed: [[1.0, 1.0], [-1.0, -1.0]]})
    np.testing.assert_allclose(a, [[5.0], [0.0]])
    np.testing.assert_allclose(b, [[10.0], [0.0]])


def test_import_graph_def_errors():
    src = _small_graph()
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"not found in graph_def: \[nope:0\]"):
            tf.import_graph_def(src, input_map={"nope:0": tf.constant([[1.0, 2.0]])})
        with pytest.raises(ValueError, match="return_element 'missing:0' not found"):
            tf.import_graph_def(src, return_elements=["missing:0"])
        with pytest.raises(ValueError, match="is i32"):
            tf.import_graph_def(src, input_map={"x:0": tf.constant([[1, 2]])})
        tf.import_graph_def(src, name="")
        with pytest.raises(ValueError, match="has a node of that name"):
            tf.import_graph_def(src, name="")
        with pytest.raises(TypeError):
            tf.import_graph_def(42)
