"""Run the tutorial-style TF1 programs of this folder (logistic_regression, autoencoder,
word2vec, monitored_training, conv_autoencoder_ema) under TensorFlow (``tensorflow.compat.v1``, their
``import dsl as tf`` line changed to it, nothing else) and record what they give into
``tf1_tutorials.npz``, which tests/dsl/test_tf1_tutorials.py compares flowc with.

Run from anywhere: ``python tests/data/tf1_programs/record_tf1_tutorials.py``.
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from record_tf1_programs import TF_IMPORT, load_under  # noqa: E402

PROGRAMS = ("logistic_regression", "autoencoder", "word2vec", "monitored_training",
            "conv_autoencoder_ema")


def run(name: str, import_line: str) -> dict:
    module = load_under(name, import_line)
    if name in ("monitored_training", "conv_autoencoder_ema"):
        with tempfile.TemporaryDirectory() as folder:
            return module.main(folder)
    return module.main()


def main() -> None:
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    out = {"tensorflow_version": np.array(tf.__version__)}
    for name in PROGRAMS:
        for key, value in run(name, TF_IMPORT).items():
            out[f"{name}/{key}"] = np.asarray(value)
    np.savez(os.path.join(HERE, "tf1_tutorials.npz"), **out)
    print(len(out), "values recorded with TensorFlow", tf.__version__)


if __name__ == "__main__":
    sys.exit(main())
