"""Sweep of TensorFlow models as users bring them: Keras applications, hand-built Keras models,
a TF2 ``tf.Module`` with control flow and a TF1 ``simple_save`` graph, each exported the ways
users export them, then imported, compiled to C and run by flowc and compared with TensorFlow.
Needs TensorFlow (and Keras 3); not part of the test suite (weights are random, seeded; the
models are built and written to a scratch folder each time):

    python3 tests/data/tf_graphs/sweep_keras_models.py --out /tmp/sweep [--only NAME,...]
        [--formats sm,export,pb,pb_lowered,pb_grappler] [--flowc-python PYTHON] [--batch 1,3]
        [--skip-export] [--flowc-root TREE --results NAME.json]

``--flowc-python``: a Python where flowc is installed (``pip install -e .``: its model loaders
for ``.pb`` files are entry points), e.g. ``python3`` when TensorFlow lives in another
environment; flowc's code is taken from this tree (or ``--flowc-root``, to compare with another
checkout). ``--skip-export`` checks the models an earlier run wrote (``OUT/cases.pkl``).

Formats:
- ``sm``: ``tf.saved_model.save`` with a ``serving_default`` signature of dynamic batch;
- ``export``: Keras 3 ``model.export(dir)`` (signature ``serve``);
- ``pb``: frozen GraphDef (``convert_variables_to_constants_v2``, functional control flow kept);
- ``pb_lowered``: the same with ``lower_control_flow=True`` (TF1 Switch/Merge/Enter/Exit frames);
- ``pb_grappler``: the frozen GraphDef after grappler's default optimizers (as a Session runs).

For each model and format: ``imports`` (flowc's model loader reads it), ``compiles`` (``flowc
compile``), ``matches`` (``flowc run`` at each batch size gives TensorFlow's outputs within
rtol=atol=1e-4). The table goes to stdout and ``OUT/results.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SEED = 20261202
RTOL = ATOL = 1e-4
FORMATS = ("sm", "export", "pb", "pb_lowered", "pb_grappler")


def rng(k):
    return np.random.RandomState(SEED + k)


# --- the models -----------------------------------------------------------------------------
def keras_models():
    """name -> (builder returning a keras.Model, [(input name, shape without batch, dtype,
    sampler)], has control flow)."""
    import keras
    from keras import layers

    def image(size, seed=0):
        return [("image", (size, size, 3), "float32",
                 lambda b, s=seed: rng(s).rand(b, size, size, 3).astype(np.float32))]

    def app(cls, size, **kw):
        def build():
            return cls(weights=None, input_shape=(size, size, 3), classes=10,
                       classifier_activation=None, **kw)
        return build, image(size), False

    A = keras.applications
    models = {
        "mobilenet": app(A.MobileNet, 32, alpha=0.25),
        "mobilenet_v2": app(A.MobileNetV2, 32, alpha=0.35),
        "mobilenet_v3_small": app(A.MobileNetV3Small, 32, minimalistic=False),
        "mobilenet_v3_large": app(A.MobileNetV3Large, 32),
        "resnet50": app(A.ResNet50, 32),
        "resnet50_v2": app(A.ResNet50V2, 32),
        "efficientnet_b0": app(A.EfficientNetB0, 32),
        "efficientnet_v2_b0": app(A.EfficientNetV2B0, 32),
        "densenet121": app(A.DenseNet121, 32),
        "inception_v3": app(A.InceptionV3, 75),
        "xception": app(A.Xception, 71),
        "nasnet_mobile": app(A.NASNetMobile, 32),
        "convnext_tiny": app(A.ConvNeXtTiny, 32),
        "vgg16": app(A.VGG16, 32),
    }
    if hasattr(A, "RegNetX002"):                        # Keras 2 only; Keras 3 has no RegNet
        models["regnet_x002"] = app(A.RegNetX002, 32)

    def tokens(length, vocab, seed):
        return [("tokens", (length,), "int32",
                 lambda b: rng(seed).randint(0, vocab, (b, length)).astype(np.int32))]

    def text_rnn():
        x = keras.Input((12,), dtype="int32", name="tokens")
        h = layers.Embedding(50, 8)(x)
        h = layers.LSTM(8, return_sequences=True)(h)
        h = layers.Bidirectional(layers.GRU(6))(h)
        h = layers.Dense(4)(h)
        return keras.Model(x, h)

    def transformer():
        x = keras.Input((10,), dtype="int32", name="tokens")
        h = layers.Embedding(40, 16)(x)
        a = layers.MultiHeadAttention(num_heads=2, key_dim=8)(h, h)
        h = layers.LayerNormalization()(h + layers.Dropout(0.1)(a))
        f = layers.Dense(32, activation="gelu")(h)
        f = layers.Dense(16)(f)
        h = layers.LayerNormalization(epsilon=1e-5)(h + f)
        h = layers.GlobalAveragePooling1D()(h)
        return keras.Model(x, layers.Dense(3)(h))

    def text_cnn():
        x = keras.Input((20,), dtype="int32", name="tokens")
        h = layers.Embedding(60, 12)(x)
        h = layers.Conv1D(16, 3, activation="relu", padding="same")(h)
        h = layers.MaxPooling1D(2)(h)
        h = layers.Conv1D(8, 5, activation="relu", dilation_rate=2)(h)
        h = layers.GlobalMaxPooling1D()(h)
        h = layers.Dropout(0.5)(h)
        return keras.Model(x, layers.Dense(2, activation="softmax")(h))

    def unet():
        x = keras.Input((16, 16, 3), name="image")
        c1 = layers.Conv2D(8, 3, padding="same", activation="relu")(x)
        c1 = layers.BatchNormalization()(c1)
        p1 = layers.MaxPooling2D()(c1)
        c2 = layers.Conv2D(16, 3, padding="same", activation="relu")(p1)
        p2 = layers.AveragePooling2D(2)(c2)
        b = layers.Conv2D(16, 3, padding="same", activation="relu")(p2)
        u2 = layers.Conv2DTranspose(16, 3, strides=2, padding="same")(b)
        u2 = layers.Concatenate()([u2, c2])
        u1 = layers.UpSampling2D(interpolation="nearest")(u2)
        u1 = layers.Concatenate()([u1, c1])
        u1 = layers.Conv2D(8, 3, padding="same", activation="relu")(u1)
        r = layers.Resizing(24, 24, interpolation="bilinear")(u1)
        u0 = layers.UpSampling2D(interpolation="bilinear")(c2)
        out = layers.Conv2D(2, 1)(r)
        return keras.Model(x, [out, layers.GlobalAveragePooling2D()(u0)])

    def preprocess():
        x = keras.Input((20, 20, 3), name="image")
        h = layers.Rescaling(1 / 255.0, offset=-0.5)(x)
        norm = layers.Normalization()
        norm.adapt(rng(9).rand(16, 20, 20, 3).astype(np.float32))
        h = norm(h)
        h = layers.Resizing(12, 12)(h)
        h = layers.Conv2D(6, 3, strides=2)(h)
        h = layers.BatchNormalization()(h)
        h = layers.Activation("swish")(h)
        h = layers.GlobalAveragePooling2D()(h)
        return keras.Model(x, layers.Dense(5)(h))

    pixels = [("image", (20, 20, 3), "float32",
               lambda b: (rng(3).rand(b, 20, 20, 3) * 255).astype(np.float32))]
    models.update({
        "text_rnn": (text_rnn, tokens(12, 50, 4), True),
        "transformer": (transformer, tokens(10, 40, 5), False),
        "text_cnn": (text_cnn, tokens(20, 60, 6), False),
        "unet": (unet, image(16, 7), False),
        "preprocess": (preprocess, pixels, False),
    })
    return models


def trained_looking(model, seed):
    """BatchNormalization statistics and 1-D weights away from Keras' initial 0 and 1."""
    from keras import layers
    r = rng(seed)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            shapes = [w.shape for w in layer.get_weights()]
            if len(shapes) == 4:
                layer.set_weights([r.uniform(0.8, 1.2, shapes[0]), r.uniform(-0.1, 0.1, shapes[1]),
                                   r.uniform(-0.1, 0.1, shapes[2]), r.uniform(0.8, 1.2, shapes[3])])
    return model


# --- exporting --------------------------------------------------------------------------------
def freeze_pb(tf, concrete, path, mode):
    from tensorflow.python.framework.convert_to_constants import \
        convert_variables_to_constants_v2
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=(mode == "pb_lowered"))
    gd = frozen.graph.as_graph_def()
    feeds = [t.name.split(":")[0] for t in frozen.inputs]
    fetches = [t.name.split(":")[0] for t in frozen.outputs]
    if mode == "pb_grappler":
        from tensorflow.python.grappler import tf_optimizer
        from tensorflow.core.protobuf import config_pb2, meta_graph_pb2
        with tf.Graph().as_default() as g:
            tf.graph_util.import_graph_def(gd, name="")
            mg = tf.compat.v1.train.export_meta_graph(graph=g)
        fetch = meta_graph_pb2.CollectionDef()
        fetch.node_list.value.extend(fetches)
        mg.collection_def["train_op"].CopyFrom(fetch)
        config = config_pb2.ConfigProto()
        gd = tf_optimizer.OptimizeGraph(config, mg)
    with open(path, "wb") as f:
        f.write(gd.SerializeToString())
    return feeds, fetches


def graphdef_reference(tf, path, feeds):
    gd = tf.compat.v1.GraphDef()
    with open(path, "rb") as f:
        gd.ParseFromString(f.read())
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(gd, name="")
        fetches = [n for n in _fetch_names(gd)]
        with tf.compat.v1.Session(graph=g) as sess:
            got = sess.run([f + ":0" for f in fetches], {k + ":0": v for k, v in feeds.items()})
    return dict(zip(fetches, got))


def _fetch_names(gd):
    read = {i.split(":")[0].lstrip("^") for n in gd.node for i in n.input}
    return sorted(n.name for n in gd.node if n.name not in read and n.op == "Identity")


def saved_model_reference(tf, folder, signature, feeds):
    loaded = tf.saved_model.load(folder)
    fn = loaded.signatures[signature]
    out = fn(**{k: tf.constant(v) for k, v in feeds.items()})
    return {k: v.numpy() for k, v in out.items()}


def export_keras(tf, name, build, inputs, control_flow, out, formats, batches):
    import keras
    keras.utils.set_random_seed(SEED)
    model = trained_looking(build(), 11)
    specs = [tf.TensorSpec((None,) + shape, dtype, name=n) for n, shape, dtype, _ in inputs]

    @tf.function
    def serve(*xs):
        y = model(list(xs) if len(xs) > 1 else xs[0], training=False)
        ys = y if isinstance(y, (list, tuple)) else [y]
        return {f"output_{k}": v for k, v in enumerate(ys)}

    concrete = serve.get_concrete_function(*specs)
    samples = {b: {n: s(b) for n, _, _, s in inputs} for b in batches}
    cases = []
    for fmt in formats:
        if fmt == "pb_lowered" and not control_flow:
            continue
        folder = os.path.join(out, name, fmt)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        try:
            if fmt == "sm":
                tf.saved_model.save(model, folder, signatures={"serving_default": concrete})
                case = dict(path=folder, signature="serving_default")
                refs = {b: saved_model_reference(tf, folder, "serving_default", f)
                        for b, f in samples.items()}
            elif fmt == "export":
                model.export(folder, format="tf_saved_model", verbose=False,
                             input_signature=[specs if len(specs) > 1 else specs[0]])
                case = dict(path=folder, signature="serve")
                refs = {b: saved_model_reference(tf, folder, "serve", f)
                        for b, f in samples.items()}
            else:
                path = folder + ".pb"
                feeds, _ = freeze_pb(tf, concrete, path, fmt)
                case = dict(path=path, signature=None)
                samples_pb = {b: dict(zip(feeds, f.values())) for b, f in samples.items()}
                refs = {b: graphdef_reference(tf, path, samples_pb[b]) for b in batches}
                case["feeds"] = {b: samples_pb[b] for b in batches}
            case.setdefault("feeds", samples)
            case["refs"] = refs
        except Exception as e:                          # noqa: BLE001
            case = dict(path=folder, export_error=f"{type(e).__name__}: {e}".splitlines()[0])
        case.update(model=name, format=fmt)
        cases.append(case)
    return cases


def export_module(tf, out, formats, batches):
    """A TF2 tf.Module: tf.while_loop with a TensorArray, tf.cond, variables read in both."""
    class Stepper(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(rng(20).randn(4, 4).astype(np.float32) * 0.5)
            self.b = tf.Variable(rng(21).randn(4).astype(np.float32))
            self.scale = tf.Variable(1.5)

        @tf.function(input_signature=[tf.TensorSpec((None, 4), tf.float32, name="x"),
                                      tf.TensorSpec((), tf.int32, name="steps")])
        def __call__(self, x, steps):
            ta = tf.TensorArray(tf.float32, size=steps, element_shape=tf.TensorShape([None, 4]))

            def body(i, h, ta):
                h = tf.tanh(tf.matmul(h, self.w) + self.b)
                return i + 1, h, ta.write(i, h)

            _, h, ta = tf.while_loop(lambda i, h, ta: i < steps, body,
                                     (tf.constant(0), x, ta))
            seq = tf.transpose(ta.stack(), [1, 0, 2])
            pooled = tf.cond(tf.reduce_sum(h) > 0.0,
                             lambda: tf.reduce_max(seq, axis=1) * self.scale,
                             lambda: tf.reduce_mean(seq, axis=1) - self.scale)
            return {"last": h, "pooled": pooled}

    m = Stepper()
    concrete = m.__call__.get_concrete_function()
    samples = {b: {"x": rng(22 + b).randn(b, 4).astype(np.float32),
                   "steps": np.array(3 + b, np.int32)} for b in batches}
    cases = []
    for fmt in formats:
        if fmt == "export":
            continue
        folder = os.path.join(out, "tf_module", fmt)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        try:
            if fmt == "sm":
                tf.saved_model.save(m, folder, signatures={"serving_default": concrete})
                case = dict(path=folder, signature="serving_default", feeds=samples)
                case["refs"] = {b: saved_model_reference(tf, folder, "serving_default", f)
                                for b, f in samples.items()}
            else:
                path = folder + ".pb"
                feeds, _ = freeze_pb(tf, concrete, path, fmt)
                fb = {b: dict(zip(feeds, f.values())) for b, f in samples.items()}
                case = dict(path=path, signature=None, feeds=fb,
                            refs={b: graphdef_reference(tf, path, fb[b]) for b in batches})
        except Exception as e:                          # noqa: BLE001
            case = dict(path=folder, export_error=f"{type(e).__name__}: {e}".splitlines()[0])
        case.update(model="tf_module", format=fmt)
        cases.append(case)
    return cases


def export_tf1(tf, out, formats, batches):
    """TF1 graph mode: placeholders, reference variables, conv + batch norm + dense, saved with
    simple_save; and the same graph frozen with graph_util.convert_variables_to_constants."""
    v1 = tf.compat.v1
    folder = os.path.join(out, "tf1_graph", "sm")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    samples = {b: {"x": rng(30 + b).rand(b, 8, 8, 2).astype(np.float32)} for b in batches}
    cases = []
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, (None, 8, 8, 2), name="x")
        k = v1.get_variable("k", initializer=rng(31).randn(3, 3, 2, 4).astype(np.float32))
        h = tf.nn.conv2d(x, k, 1, "SAME")
        mean, var = v1.get_variable("mean", initializer=rng(32).rand(4).astype(np.float32)), \
            v1.get_variable("var", initializer=(rng(33).rand(4) + 0.5).astype(np.float32))
        h = tf.nn.batch_normalization(h, mean, var, None, None, 1e-3)
        h = tf.nn.relu6(h)
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.reshape(h, [-1, 4 * 4 * 4])
        w = v1.get_variable("w", initializer=rng(34).randn(64, 3).astype(np.float32))
        y = tf.identity(tf.nn.softmax(tf.matmul(h, w)), name="y")
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            refs = {b: {"y": sess.run(y, {x: f["x"]})} for b, f in samples.items()}
            if "sm" in formats:
                v1.saved_model.simple_save(sess, folder, {"x": x}, {"y": y})
                cases.append(dict(model="tf1_graph", format="sm", path=folder,
                                  signature="serving_default", feeds=samples, refs=refs))
            if "pb" in formats:
                gd = v1.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), ["y"])
                path = os.path.join(out, "tf1_graph", "pb.pb")
                with open(path, "wb") as f:
                    f.write(gd.SerializeToString())
                cases.append(dict(model="tf1_graph", format="pb", path=path, signature=None,
                                  feeds=samples, refs=refs))
    return cases


# --- checking with flowc ----------------------------------------------------------------------
def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                PYTHONDONTWRITEBYTECODE="1")


def _flowc(python, *args, timeout=900):
    env = _env()
    t = time.time()
    try:
        p = subprocess.run([python, "-m", "compiler.cli", *map(str, args)], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout} s", time.time() - t
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()] or lines[-1:]
    return p.returncode, (errors[0] if errors else ""), time.time() - t


def _imports(python, case):
    code = ("import sys; from compiler.model_loader import load_model; "
            "m = load_model(sys.argv[1], sys.argv[2] or None); print(len(m.graph.nodes))")
    env = _env()
    p = subprocess.run([python, "-c", code, case["path"], case.get("signature") or ""], env=env,
                       cwd=ROOT, capture_output=True, text=True)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    return p.returncode == 0, (lines[-1] if lines else "")


def check(python, case, work):
    r = dict(model=case["model"], format=case["format"], imports=False, compiles=False,
             matches=False, error=case.get("export_error", ""))
    if "export_error" in case:
        r["error"] = "export: " + r["error"]
        return r
    r["imports"], err = _imports(python, case)
    if not r["imports"]:
        r["error"] = "import: " + err
        return r
    art = os.path.join(work, "artifact")
    shutil.rmtree(art, ignore_errors=True)
    args = ["compile", case["path"], "-o", art]
    if case.get("signature"):
        args += ["--signature", case["signature"]]
    rc, err, secs = _flowc(python, *args)
    r["compile_s"] = round(secs, 1)
    if rc != 0:
        r["error"] = "compile: " + err
        return r
    r["compiles"] = True
    worst = 0.0
    for b, feeds in case["feeds"].items():
        fpath, gpath = os.path.join(work, "feeds.npz"), os.path.join(work, "got.npz")
        np.savez(fpath, **feeds)
        rc, err, _ = _flowc(python, "run", art, "--feeds", fpath, "--save", gpath)
        if rc != 0:
            r["error"] = f"run (batch {b}): " + err
            return r
        with np.load(gpath) as z:
            got = {k: z[k] for k in z.files}
        for key, want in case["refs"][b].items():
            have = got.get(key, got.get(key + ":0"))
            if have is None:
                r["error"] = f"batch {b}: no output '{key}' (got {sorted(got)})"
                return r
            if have.shape != want.shape:
                r["error"] = f"batch {b}: '{key}' shape {have.shape}, TF {want.shape}"
                return r
            err = np.abs(have.astype(np.float64) - want) - RTOL * np.abs(want)
            worst = max(worst, float(np.max(err, initial=0.0)))
            if not np.all(err <= ATOL):
                r["error"] = (f"batch {b}: '{key}' differs: max |diff| "
                              f"{float(np.max(np.abs(have - want))):.3g}")
                return r
    r["matches"] = True
    return r


def main():
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--flowc-python", default=sys.executable)
    ap.add_argument("--batch", default="1,3")
    ap.add_argument("--flowc-root", default=ROOT,
                    help="the flowc source tree to check with (default: this one)")
    ap.add_argument("--results", default="results.json", help="file name under OUT")
    ap.add_argument("--skip-export", action="store_true",
                    help="reuse OUT/cases.npz from an earlier run")
    args = ap.parse_args()
    ROOT = os.path.abspath(args.flowc_root)
    formats = [f for f in args.formats.split(",") if f]
    batches = [int(b) for b in args.batch.split(",")]
    only = {n for n in args.only.split(",") if n}
    os.makedirs(args.out, exist_ok=True)
    store = os.path.join(args.out, "cases.pkl")
    import pickle
    if args.skip_export:
        with open(store, "rb") as f:
            cases = [c for c in pickle.load(f) if not only or c["model"] in only]
    else:
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        cases = []
        for name, (build, inputs, cf) in keras_models().items():
            if only and name not in only:
                continue
            print(f"export {name}", flush=True)
            try:
                cases += export_keras(tf, name, build, inputs, cf, args.out, formats, batches)
            except Exception:                           # noqa: BLE001
                traceback.print_exc()
        if not only or "tf_module" in only:
            cases += export_module(tf, args.out, formats, batches)
        if not only or "tf1_graph" in only:
            cases += export_tf1(tf, args.out, formats, batches)
        with open(store, "wb") as f:
            pickle.dump(cases, f)
    results = []
    for case in cases:
        work = os.path.join(args.out, case["model"], "work_" + case["format"] + "_" +
                            os.path.basename(ROOT))
        os.makedirs(work, exist_ok=True)
        r = check(args.flowc_python, case, work)
        results.append(r)
        mark = lambda v: "yes" if v else "no"           # noqa: E731
        print(f"{r['model']:20s} {r['format']:12s} imports={mark(r['imports'])} "
              f"compiles={mark(r['compiles'])} matches={mark(r['matches'])} "
              f"{r.get('compile_s', '')} {r['error'][:200]}", flush=True)
    with open(os.path.join(args.out, args.results), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
