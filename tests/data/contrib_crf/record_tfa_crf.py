"""Records tfa_crf.npz: random CRF inputs and what TensorFlow Addons' linear-chain CRF
(``tfa.text.crf_log_likelihood``, ``crf_sequence_score``, ``crf_log_norm``, ``crf_decode``,
the successor of ``tf.contrib.crf`` with the same semantics) gives for them.
test_contrib_crf.py compares flowc against these values without needing TensorFlow.
Run with tensorflow, tensorflow-addons and tf_keras installed:
``TF_USE_LEGACY_KERAS=1 python3 record_tfa_crf.py`` (its decoder is a tf_keras RNN)."""
import importlib.util
import os
import sys
import types
import typing

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))


def _tfa_crf():
    """tensorflow_addons/text/crf.py alone: the package's __init__ imports Keras internals
    that newer TensorFlow releases no longer have, and crf.py needs only its TensorLike type
    from there."""
    spec = importlib.util.find_spec("tensorflow_addons")
    root = spec.submodule_search_locations[0]
    for name in ("tensorflow_addons", "tensorflow_addons.utils"):
        sys.modules.setdefault(name, types.ModuleType(name))
    stub = types.ModuleType("tensorflow_addons.utils.types")
    stub.TensorLike = typing.Any
    sys.modules["tensorflow_addons.utils.types"] = stub
    crf_spec = importlib.util.spec_from_file_location("tfa_crf", os.path.join(root, "text",
                                                                            "crf.py"))
    module = importlib.util.module_from_spec(crf_spec)
    crf_spec.loader.exec_module(module)
    return module


def main() -> None:
    crf = _tfa_crf()
    rng = np.random.default_rng(1605)
    out = {}
    for case, (batch, steps, tags) in {"small": (5, 6, 4), "wide": (3, 9, 7),
                                       "one_step": (4, 1, 5)}.items():
        inputs = rng.normal(size=(batch, steps, tags)).astype(np.float32) * 2
        transitions = rng.normal(size=(tags, tags)).astype(np.float32)
        lengths = rng.integers(1, steps + 1, size=batch).astype(np.int32)
        lengths[0] = steps
        lengths[-1] = 1
        tag_indices = rng.integers(0, tags, size=(batch, steps)).astype(np.int32)
        ll, _ = crf.crf_log_likelihood(tf.constant(inputs), tf.constant(tag_indices),
                                            tf.constant(lengths), tf.constant(transitions))
        score = crf.crf_sequence_score(tf.constant(inputs), tf.constant(tag_indices),
                                            tf.constant(lengths), tf.constant(transitions))
        norm = crf.crf_log_norm(tf.constant(inputs), tf.constant(lengths),
                                     tf.constant(transitions))
        decode, best = crf.crf_decode(tf.constant(inputs), tf.constant(transitions),
                                           tf.constant(lengths))
        for key, value in {"inputs": inputs, "transitions": transitions, "lengths": lengths,
                           "tag_indices": tag_indices, "log_likelihood": ll,
                           "sequence_score": score, "log_norm": norm,
                           "decode_tags": decode, "best_score": best}.items():
            out[f"{case}/{key}"] = np.asarray(value)
    np.savez_compressed(os.path.join(HERE, "tfa_crf.npz"), **out)


if __name__ == "__main__":
    main()
