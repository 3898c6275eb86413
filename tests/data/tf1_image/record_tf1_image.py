"""Records what TensorFlow 1.x's tf.image computes for the programs of tf1_image_cases.py
into tf1_image.npz (run with TensorFlow installed: ``python record_tf1_image.py``). The tests
(tests/dsl/test_tf1_image.py) only read the .npz."""
import os
import sys

import numpy as np
import tensorflow.compat.v1 as tf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tf1_image_cases  # noqa: E402


def main():
    tf.disable_eager_execution()
    values = tf1_image_cases.inputs()
    g = tf.Graph()
    with g.as_default():
        ph, fetches = tf1_image_cases.build(tf, values)
        with tf.Session() as s:
            got = s.run(fetches, {ph[k]: v for k, v in values.items()})
    np.savez(os.path.join(HERE, "tf1_image.npz"), **got)


if __name__ == "__main__":
    main()
