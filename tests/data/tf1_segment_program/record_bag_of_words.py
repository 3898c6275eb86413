"""Run bag_of_words.py under TensorFlow (``tensorflow.compat.v1``, its ``import dsl as tf``
line changed to it, nothing else) and record what it gives into bag_of_words.npz, which
tests/dsl/test_tf1_segment_program.py compares flowc with. Run with TensorFlow installed:
``python tests/data/tf1_segment_program/record_bag_of_words.py``.
"""
import os
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    path = os.path.join(HERE, "bag_of_words.py")
    with open(path) as f:
        source = f.read()
    assert source.count("import dsl as tf\n") == 1
    module = types.ModuleType("bag_of_words")
    exec(compile(source.replace("import dsl as tf\n", "import tensorflow.compat.v1 as tf\n"),
                 path, "exec"), module.__dict__)
    module.tf.disable_eager_execution()
    losses, orders, shown = module.main()
    np.savez(os.path.join(HERE, "bag_of_words.npz"), losses=losses, orders=orders,
             **{"shown/" + k: v for k, v in shown.items()})
    print(losses)


if __name__ == "__main__":
    main()
