"""Run functional_program.py under TensorFlow (``tensorflow.compat.v1``, its ``import dsl as
tf`` line changed to that, nothing else) and record what it gives into functional_program.npz,
which tests/dsl/test_functional_ops.py compares flowc with. Run from anywhere with a
TensorFlow installed: ``python tests/data/tf1_functional/record_functional_program.py``."""
import os
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def load_under(import_line: str):
    path = os.path.join(HERE, "functional_program.py")
    with open(path) as f:
        source = f.read()
    assert source.count("import dsl as tf\n") == 1
    module = types.ModuleType("functional_program")
    module.__file__ = path
    exec(compile(source.replace("import dsl as tf\n", import_line + "\n"), path, "exec"),
         module.__dict__)
    return module


def main() -> None:
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    program = load_under("import tensorflow.compat.v1 as tf")
    data = program.inputs()
    with tf.Graph().as_default():
        images, targets, fetches, train = program.build(data)
        with tf.Session() as session:
            before, losses, after = program.run(session, images, targets, fetches, train, data)
    out = {f"before{k}": v for k, v in enumerate(before)}
    out.update({f"after{k}": v for k, v in enumerate(after)})
    out["losses"] = losses
    np.savez(os.path.join(HERE, "functional_program.npz"), **out)
    print("recorded", sorted(out))


if __name__ == "__main__":
    main()
