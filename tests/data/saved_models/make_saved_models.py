"""Writes the SavedModels and checkpoints of tests/compiler/test_saved_model.py and
tests/compiler/test_tensor_bundle.py, with their inputs and TensorFlow's outputs (run with
TensorFlow installed; the tests do not need it):

    python3 tests/data/saved_models/make_saved_models.py

SavedModels (each a folder ``NAME/`` as TensorFlow wrote it, ``NAME.npz`` with
``in:<signature>:<key>`` the inputs fed to signature ``<signature>`` and
``out:<signature>:<key>`` what TensorFlow's loader computed for them):

- ``keras_saved``: a Keras functional classifier (Dense, BatchNormalization, Dropout) saved
  with ``tf.saved_model.save(model, dir)`` (TF2: variables captured by the signature's call,
  matched to checkpoint keys through the object graph);
- ``keras_export``: a Keras model with Embedding (``ResourceGather``) and LSTM (a ``While``
  loop reading its kernels inside the body) written by Keras 3's ``model.export(dir)``
  (signatures ``serve`` and ``serving_default``);
- ``tf_module``: a ``tf.Module`` with ``tf.Variable``s (one int32) and two signatures: a
  ``tf.range`` loop and a ``tf.cond`` reading variables inside their bodies, and a second
  signature with two inputs and two outputs;
- ``tf1_builder``: TF1 graph mode with reference variables (``VariableV2``) and one resource
  variable, saved by ``SavedModelBuilder`` with two MetaGraphDefs (tags ``serve`` and
  ``eval``, different signatures; keys by the variables' graph names, restored by the saver's
  restore op);
- ``tf1_simple_save``: ``tf.compat.v1.saved_model.simple_save`` of a small graph.

Checkpoints (tensor bundles, for the reader): ``bundle_dtypes/ckpt`` (variables of every
numeric dtype flowc reads, a scalar, an empty tensor, one over 64 KiB, and 150 small ones, so
the index has several blocks) and ``bundle_sharded/ckpt`` (the same variables cut into data
shards of at most 4 KiB by ``MaxShardSizePolicy``, which saves the large one as slices and
leaves the empty one out); ``bundle_dtypes.values.npz`` holds every key's value as
``tf.train.load_checkpoint`` reads it, ``NAME.keys.json`` each bundle's keys, dtypes and
shapes.

``tf_descriptors.json``: TensorFlow's field numbers and kinds of every message flowc's
``tf_formats.proto`` describes (test_tf_formats.py checks flowc's against them).

Seeds are fixed, so a rerun writes the same numbers (the protobuf files may differ in
function names).
"""
import json
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261202


def rng(k):
    return np.random.RandomState(SEED + k)


def fresh(name):
    folder = os.path.join(HERE, name)
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def run_signatures(folder, feeds_by_signature, tags=None):
    """Load the SavedModel with TensorFlow and run each signature on its feeds; the npz
    arrays ``in:sig:key`` and ``out:sig:key``."""
    arrays = {}
    if tags is None:
        loaded = tf.saved_model.load(folder)
        for sig, feeds in feeds_by_signature.items():
            outs = loaded.signatures[sig](**{k: tf.constant(v) for k, v in feeds.items()})
            arrays.update({f"in:{sig}:{k}": v for k, v in feeds.items()})
            arrays.update({f"out:{sig}:{k}": v.numpy() for k, v in outs.items()})
        return arrays
    with tf.compat.v1.Session(graph=tf.Graph()) as sess:   # TF1: the loader of that tag set
        mg = tf.compat.v1.saved_model.loader.load(sess, tags, folder)
        for sig, feeds in feeds_by_signature.items():
            sd = mg.signature_def[sig]
            keys = sorted(sd.outputs)
            got = sess.run([sd.outputs[k].name for k in keys],
                           {sd.inputs[k].name: v for k, v in feeds.items()})
            arrays.update({f"in:{sig}:{k}": v for k, v in feeds.items()})
            arrays.update({f"out:{sig}:{k}": v for k, v in zip(keys, got)})
    return arrays


def save_npz(name, arrays):
    with open(os.path.join(HERE, name + ".npz"), "wb") as f:
        np.savez(f, **arrays)


def trained_looking(model, seed):
    """Seeded weights with biases, BatchNormalization statistics and affine terms away from
    their initial 0 and 1."""
    r = rng(seed)
    for layer in model.layers:
        weights = []
        for w in layer.get_weights():
            if w.ndim == 1 and np.all(w == 1):
                w = r.uniform(0.5, 1.5, w.shape)
            elif w.ndim == 1:
                w = r.uniform(-0.3, 0.3, w.shape)
            weights.append(w.astype(w.dtype))
        layer.set_weights(weights)
    return model


# --- TF2 ---------------------------------------------------------------------------------------
def keras_saved():
    import keras
    from keras import layers
    keras.utils.set_random_seed(SEED + 1)
    inp = keras.Input((10,), name="features")
    x = layers.Dense(16, activation="relu")(inp)
    x = layers.BatchNormalization()(x)
    x = layers.Dropout(0.25)(x)
    out = layers.Dense(4, activation="softmax", name="probs")(x)
    model = trained_looking(keras.Model(inp, out), 1)
    folder = fresh("keras_saved")
    tf.saved_model.save(model, folder)
    loaded = tf.saved_model.load(folder)
    x = rng(101).randn(3, 10).astype(np.float32)
    key = list(loaded.signatures["serving_default"].structured_input_signature[1])[0]
    arrays = run_signatures(folder, {"serving_default": {key: x}})
    (out,) = [v for k, v in arrays.items() if k.startswith("out:")]
    np.testing.assert_allclose(out, model(x, training=False).numpy(), rtol=1e-5)
    save_npz("keras_saved", arrays)


def keras_export():
    import keras
    from keras import layers
    keras.utils.set_random_seed(SEED + 2)
    inp = keras.Input((6,), dtype="int32", name="tokens")
    x = layers.Embedding(20, 8)(inp)
    x = layers.LSTM(5)(x)
    out = layers.Dense(3, name="logits")(x)
    model = trained_looking(keras.Model(inp, out), 2)
    folder = fresh("keras_export")
    model.export(folder, verbose=False)
    tokens = rng(102).randint(0, 20, size=(2, 6)).astype(np.int32)
    loaded = tf.saved_model.load(folder)
    arrays = {}
    for sig in ("serve", "serving_default"):
        fn = loaded.signatures[sig]
        key = list(fn.structured_input_signature[1])[0]
        arrays.update(run_signatures(folder, {sig: {key: tokens}}))
    ref = model(tokens).numpy()
    for k, v in arrays.items():
        if k.startswith("out:"):
            np.testing.assert_allclose(v, ref, rtol=1e-5, atol=1e-6)
    save_npz("keras_export", arrays)


class Scaler(tf.Module):
    def __init__(self):
        super().__init__()
        r = rng(3)
        self.w = tf.Variable(r.randn(4, 4).astype(np.float32) * 0.5, name="w")
        self.b = tf.Variable(r.randn(4).astype(np.float32) * 0.1, name="b")
        self.scale = tf.Variable(np.float32(1.5), name="scale")
        self.offset = tf.Variable(np.int32(3), name="offset")
        self.steps = tf.Variable(np.int32(3), name="steps", trainable=False)

    @tf.function(input_signature=[tf.TensorSpec((None, 4), tf.float32, name="x")])
    def serve(self, x):
        h = x
        for _ in tf.range(self.steps):                  # a While reading w and b inside
            h = tf.tanh(tf.matmul(h, self.w) + self.b)
        if tf.reduce_sum(h) > 0:                          # an If reading scale in a branch
            h = h * self.scale
        else:
            h = h - self.scale
        return {"y": h, "count": tf.shape(x)[0] + self.offset}

    @tf.function(input_signature=[tf.TensorSpec((None, 4), tf.float32, name="a"),
                                  tf.TensorSpec((None, 4), tf.float32, name="b")])
    def combine(self, a, b):
        return {"sum": tf.matmul(a + b, self.w), "diff": (a - b) * self.scale}

    @tf.function(input_signature=[tf.TensorSpec((), tf.int32, name="by")])
    def bump(self, by):
        return {"offset": self.offset.assign_add(by)}     # changes a variable: refused


def tf_module():
    module = Scaler()
    folder = fresh("tf_module")
    tf.saved_model.save(module, folder, signatures={"serving_default": module.serve,
                                                    "combine": module.combine,
                                                    "bump": module.bump})
    r = rng(103)
    x = r.randn(3, 4).astype(np.float32)
    a, b = r.randn(2, 4).astype(np.float32), r.randn(2, 4).astype(np.float32)
    arrays = run_signatures(folder, {"serving_default": {"x": x}, "combine": {"a": a, "b": b}})
    np.testing.assert_allclose(arrays["out:serving_default:y"], module.serve(x)["y"].numpy(),
                               rtol=1e-6)
    save_npz("tf_module", arrays)


# --- TF1 ---------------------------------------------------------------------------------------
def tf1_graph(seed):
    """x -> dense (reference variables) -> relu -> dense (a resource variable) -> softmax."""
    r = rng(seed)
    v1 = tf.compat.v1
    x = v1.placeholder(tf.float32, (None, 5), name="x")
    w1 = v1.Variable(r.randn(5, 7).astype(np.float32), name="dense/kernel", use_resource=False)
    b1 = v1.Variable(r.randn(7).astype(np.float32) * 0.1, name="dense/bias", use_resource=False)
    w2 = v1.get_variable("head/kernel", initializer=r.randn(7, 3).astype(np.float32),
                         use_resource=True)
    h = tf.nn.relu(tf.matmul(x, w1) + b1)
    logits = tf.matmul(h, w2)
    return x, h, logits, tf.nn.softmax(logits, name="probs")


def tf1_builder():
    folder = fresh("tf1_builder")
    v1 = tf.compat.v1
    x_val = rng(104).randn(4, 5).astype(np.float32)
    with v1.Session(graph=tf.Graph()) as sess:
        x, h, logits, probs = tf1_graph(4)
        sess.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(folder)
        serve = v1.saved_model.predict_signature_def({"x": x}, {"probs": probs})
        hidden = v1.saved_model.predict_signature_def({"inputs": x}, {"hidden": h,
                                                                       "logits": logits})
        builder.add_meta_graph_and_variables(sess, ["serve"],
                                             signature_def_map={"serving_default": serve,
                                                                "hidden": hidden})
        builder.add_meta_graph(["eval"], signature_def_map={"evaluate": hidden})
        builder.save()
    arrays = run_signatures(folder, {"serving_default": {"x": x_val},
                                     "hidden": {"inputs": x_val}}, tags=["serve"])
    arrays.update(run_signatures(folder, {"evaluate": {"inputs": x_val}}, tags=["eval"]))
    save_npz("tf1_builder", arrays)


def tf1_simple_save():
    folder = fresh("tf1_simple_save")
    v1 = tf.compat.v1
    x_val = rng(105).randn(2, 5).astype(np.float32)
    with v1.Session(graph=tf.Graph()) as sess:
        x, _, _, probs = tf1_graph(5)
        sess.run(v1.global_variables_initializer())
        v1.saved_model.simple_save(sess, folder, inputs={"x": x}, outputs={"probs": probs})
    save_npz("tf1_simple_save", run_signatures(folder, {"serving_default": {"x": x_val}},
                                               tags=["serve"]))


# --- tensor bundles -------------------------------------------------------------------------------
def bundle_variables():
    r = rng(6)
    values = {
        "f32": r.randn(3, 4).astype(np.float32),
        "f64": r.randn(5).astype(np.float64),
        "i32": r.randint(-1000, 1000, size=(2, 3)).astype(np.int32),
        "i64": r.randint(-2**40, 2**40, size=(4,)).astype(np.int64),
        "i16": r.randint(-300, 300, size=(3,)).astype(np.int16),
        "i8": r.randint(-100, 100, size=(3,)).astype(np.int8),
        "u8": r.randint(0, 255, size=(2, 2)).astype(np.uint8),
        "f16": r.randn(6).astype(np.float16),
        "flag": np.array([True, False, True]),
        "scalar": np.float32(2.5),
        "empty": np.zeros((0, 3), np.float32),
        "big": r.randn(100, 170).astype(np.float32),           # 68,000 bytes
    }
    many = [r.randn(2).astype(np.float32) for _ in range(150)]
    return values, many


def bundle(name, options=None, values_file=True):
    folder = fresh(name)
    values, many = bundle_variables()
    ckpt = tf.train.Checkpoint(**{k: tf.Variable(v) for k, v in values.items()},
                               many=[tf.Variable(v) for v in many])
    prefix = ckpt.write(os.path.join(folder, "ckpt"), options=options)
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    if values_file:
        save_npz(name + ".values", {k: reader.get_tensor(k) for k in shapes
                                    if k != "_CHECKPOINTABLE_OBJECT_GRAPH"})
    info = {k: {"dtype": dtypes[k].name, "shape": list(shapes[k])} for k in sorted(shapes)}
    with open(os.path.join(HERE, name + ".keys.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")


def bundles():
    bundle("bundle_dtypes")
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=4096)
    bundle("bundle_sharded",                # the same values, in 4 KiB shards and slices
           tf.train.CheckpointOptions(experimental_sharding_callback=policy), False)


# --- TensorFlow's field numbers -------------------------------------------------------------------
def descriptors():
    """Every field of every message of TensorFlow's that flowc's tf_formats.proto names."""
    from google.protobuf import descriptor_pool
    from tensorflow.core.framework import graph_pb2, tensor_slice_pb2  # noqa: F401
    from tensorflow.core.protobuf import (meta_graph_pb2, saved_model_pb2,  # noqa: F401
                                          saved_object_graph_pb2, saver_pb2,
                                          tensor_bundle_pb2, trackable_object_graph_pb2)
    pool = descriptor_pool.Default()
    proto = os.path.join(HERE, "..", "..", "..", "compiler", "interop", "tf_formats",
                         "tf_formats.proto")
    names, enums = [], []
    stack = []
    with open(proto) as f:
        for line in f:
            words = line.split()
            if len(words) >= 2 and words[0] in ("message", "enum"):
                depth = (len(line) - len(line.lstrip())) // 2
                del stack[depth:]
                stack.append(words[1])
                (names if words[0] == "message" else enums).append(".".join(stack))
    out = {}
    for name in names:
        try:
            d = pool.FindMessageTypeByName("tensorflow." + name)
        except KeyError:
            continue
        out[name] = {f.name: {"number": f.number, "type": f.type, "repeated": f.is_repeated,
                              "oneof": f.containing_oneof.name if f.containing_oneof else None}
                     for f in d.fields}
    enum_values = {}
    for name in enums:
        try:
            e = pool.FindEnumTypeByName("tensorflow." + name)
        except KeyError:
            continue
        enum_values[name] = {v.name: v.number for v in e.values}
    with open(os.path.join(HERE, "tf_descriptors.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "messages": out, "enums": enum_values}, f,
                  indent=1, sort_keys=True)
        f.write("\n")


def main():
    tf.random.set_seed(SEED)
    keras_saved()
    keras_export()
    tf_module()
    tf1_builder()
    tf1_simple_save()
    bundles()
    descriptors()


if __name__ == "__main__":
    main()
