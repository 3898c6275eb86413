"""SavedModels flowc writes, and what TensorFlow computes from them.

Two runs, from the repository root:

1. ``python3 tests/data/saved_models/record_flowc_saved_models.py flowc`` (flowc): runs
   flowc_export.py, writing ``flowc_simple_save/`` (``tf.saved_model.simple_save``) and
   ``flowc_builder/`` (``tf.saved_model.Builder``, tags ``serve`` and ``eval``).
2. ``python tests/data/saved_models/record_flowc_saved_models.py tf`` (with TensorFlow):
   loads each with ``tf.compat.v1.saved_model.loader.load`` and records every signature's
   outputs in ``flowc_saved_models.tf.npz``.

tests/dsl/test_saved_model_builder.py checks flowc against these files; it needs no TensorFlow.
"""
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = [("flowc_simple_save", "serve", "serving_default"),
          ("flowc_builder", "serve", "serving_default"), ("flowc_builder", "serve", "both"),
          ("flowc_builder", "eval", "evaluate")]


def run_flowc():
    sys.path.insert(0, HERE)
    import flowc_export
    for name in ("flowc_simple_save", "flowc_builder"):
        shutil.rmtree(os.path.join(HERE, name), ignore_errors=True)
    flowc_export.export(os.path.join(HERE, "flowc_simple_save"),
                        os.path.join(HERE, "flowc_builder"))


def run_tf():
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    x = np.random.RandomState(7).randn(4, 5).astype(np.float32)    # flowc_export.inputs()
    record = {}
    for folder, tag, signature in MODELS:
        with tf.Graph().as_default(), tf.Session() as sess:
            mg = tf.saved_model.loader.load(sess, [tag], os.path.join(HERE, folder))
            sig = mg.signature_def[signature]
            out = sess.run({k: v.name for k, v in sig.outputs.items()},
                           {v.name: x for v in sig.inputs.values()})
            for key, value in out.items():
                record[f"{folder}:{tag}:{signature}:{key}"] = value
            record[f"{folder}:{tag}:variables"] = np.array(
                sorted(v.op.name for v in tf.global_variables()))
    np.savez(os.path.join(HERE, "flowc_saved_models.tf.npz"), **record)


if __name__ == "__main__":
    {"flowc": run_flowc, "tf": run_tf}[sys.argv[1]]()
