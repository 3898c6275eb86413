"""Run the TF1 programs of this folder under TensorFlow (``tensorflow.compat.v1``, their
``import dsl as tf`` line changed to it, nothing else) and record what they give into
``tf1_programs.npz``, which tests/dsl/test_tf1_rnn_programs.py compares flowc with.

Needs TensorFlow with its TF1 RNN cells: TensorFlow 2.16+ keeps them in ``tf_keras``
(``pip install tf-keras``; set ``TF_USE_LEGACY_KERAS=1``). Run from anywhere:
``TF_USE_LEGACY_KERAS=1 python tests/data/tf1_programs/record_tf1_programs.py``.
"""
import os
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ("lstm_language_model", "rnn_cell_zoo")
TF_IMPORT = "import tensorflow.compat.v1 as tf"


def load_under(module_name: str, import_line: str):
    """The program ``module_name`` with its ``import dsl as tf`` line replaced."""
    path = os.path.join(HERE, module_name + ".py")
    with open(path) as f:
        source = f.read()
    assert source.count("import dsl as tf\n") == 1, path
    module = types.ModuleType(module_name)
    module.__file__ = path
    exec(compile(source.replace("import dsl as tf\n", import_line + "\n"), path, "exec"),
         module.__dict__)
    return module


def main() -> None:
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    out = {"tensorflow_version": np.array(tf.__version__)}
    program = load_under("lstm_language_model", TF_IMPORT)
    train, valid, names = program.main()
    out["lstm_language_model/train_losses"] = train
    out["lstm_language_model/valid_losses"] = valid
    out["lstm_language_model/variables"] = np.array(names)
    zoo = load_under("rnn_cell_zoo", TF_IMPORT)
    for key, value in zoo.main().items():
        out["rnn_cell_zoo/" + key] = value
    np.savez(os.path.join(HERE, "tf1_programs.npz"), **out)
    print(len(out), "values recorded with TensorFlow", tf.__version__)
    print("train", train[:3], "...", train[-3:])


if __name__ == "__main__":
    sys.exit(main())
