"""Run slim_cnn.py of this folder under TensorFlow (``tensorflow.compat.v1`` and tf_slim,
its two import lines changed to them, nothing else) and record what it gives into
``slim_programs.npz``, which tests/dsl/test_contrib_slim.py compares flowc with, and the
trained CNN's TensorFlow checkpoint into ``slim_checkpoint/``.

Needs TensorFlow, tf_keras and tf_slim (``pip install tensorflow tf-keras tf-slim``). Run from anywhere:
``python tests/data/tf1_programs/record_slim_programs.py``.
"""
import os
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FLOWC_LINES = "import dsl as tf\nslim = tf.contrib.slim\n"
TF_LINES = "import tensorflow.compat.v1 as tf\nimport tf_slim as slim\n"


def load_under_tensorflow(module_name: str):
    path = os.path.join(HERE, module_name + ".py")
    with open(path) as f:
        source = f.read()
    assert source.count(FLOWC_LINES) == 1, path
    module = types.ModuleType(module_name)
    module.__file__ = path
    exec(compile(source.replace(FLOWC_LINES, TF_LINES), path, "exec"), module.__dict__)
    return module


def alias_legacy_layers() -> None:
    """tf_slim reaches tf.layers through ``tf_keras.legacy_tf_layers``, which recent tf_keras
    ships as ``tf_keras.src.legacy_tf_layers``: make the old names point at it."""
    import importlib
    try:
        importlib.import_module("tf_keras.legacy_tf_layers")
        return
    except ImportError:
        pass
    for name in ("", ".base", ".core", ".convolutional", ".normalization", ".pooling"):
        sys.modules["tf_keras.legacy_tf_layers" + name] = importlib.import_module(
            "tf_keras.src.legacy_tf_layers" + name)


def main() -> None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    alias_legacy_layers()
    import tensorflow.compat.v1 as tf
    from tensorflow.python.framework import ops
    from tensorflow.python.ops import control_flow_ops
    # tf_slim 1.1 still reaches these where TensorFlow 2.21 no longer has them
    if not hasattr(ops, "Tensor"):
        ops.Tensor = tf.Tensor
    if not hasattr(control_flow_ops, "cond"):
        control_flow_ops.cond = tf.cond
    tf.disable_v2_behavior()
    out = {"tensorflow_version": np.array(tf.__version__)}
    program = load_under_tensorflow("slim_cnn")
    out.update(program.main())
    # a checkpoint TensorFlow writes of the trained CNN, and what restoring it gives there
    folder = os.path.join(HERE, "slim_checkpoint")
    os.makedirs(folder, exist_ok=True)
    program.train(save_path=os.path.join(folder, "model.ckpt"))
    out["restored/test_logits"] = program.restore_and_predict(
        os.path.join(folder, "model.ckpt"))
    np.savez(os.path.join(HERE, "slim_programs.npz"), **out)
    print(len(out), "values recorded with TensorFlow", tf.__version__)
    print("losses", out["train/losses"][:3], "...", out["train/losses"][-3:])


if __name__ == "__main__":
    sys.exit(main())
