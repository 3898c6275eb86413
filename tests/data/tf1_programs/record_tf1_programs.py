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
PROGRAMS = ("lstm_language_model", "rnn_cell_zoo", "rnn_checkpoint")
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


def record_checkpoint(tf) -> dict:
    """rnn_checkpoint.py under TensorFlow, initialized by TensorFlow (seeded), saved with
    tf.train.Saver into rnn_checkpoint/model.ckpt; returns its outputs and variable names."""
    program = load_under("rnn_checkpoint", TF_IMPORT)
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(42)
        x, lengths, fetches = program.build()
        saver = tf.train.Saver()
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            folder = os.path.join(HERE, "rnn_checkpoint")
            os.makedirs(folder, exist_ok=True)
            saver.save(session, os.path.join(folder, "model.ckpt"), write_meta_graph=False,
                       write_state=False)
            got = session.run(fetches, {x: program.inputs(), lengths: [5, 3]})
            names = sorted(v.name for v in tf.global_variables())
    out = {f"rnn_checkpoint/fetch{k}": v for k, v in enumerate(got)}
    out["rnn_checkpoint/variables"] = np.array(names)
    return out


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
    out.update(record_checkpoint(tf))
    np.savez(os.path.join(HERE, "tf1_programs.npz"), **out)
    print(len(out), "values recorded with TensorFlow", tf.__version__)
    print("train", train[:3], "...", train[-3:])


if __name__ == "__main__":
    sys.exit(main())
