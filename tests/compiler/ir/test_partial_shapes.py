"""Shape-like vectors built from a partially known shape keep their known elements through
Shape, StridedSlice, ConcatV2, Pack and Cast (TensorFlow's ``constant_value_as_shape``), so a
Reshape or a Fill sized by them has the static dims TensorFlow would give; the compiled results
still equal the interpreter's."""
import numpy as np

import dsl as fl
from oracle import check_against_interpreter


def test_known_elements_survive_slices_and_concatenation(graph, rng):
    x = fl.placeholder(fl.float32, [None, 4, 6], name="x")
    shape = fl.shape(x)
    cases = {
        "keep_batch": (fl.reshape(x, fl.concat([shape[:1], [24]], 0)), (None, 24)),
        "last_first": (fl.reshape(x, fl.concat([shape[-1:], [-1]], 0)), (6, None)),
        "cast": (fl.reshape(x, fl.concat([fl.cast(shape[1:2], fl.int64), [-1]], 0)), (4, None)),
        "packed": (fl.reshape(x, fl.concat([fl.stack([shape[0], 2]), [12]], 0)), (None, 2, 12)),
        "fill": (fl.zeros(fl.concat([shape[1:], [2]], 0)), (4, 6, 2)),
    }
    for name, (t, want) in cases.items():
        assert t.shape == want, name
    feed = {x: rng.standard_normal((3, 4, 6)).astype(np.float32)}
    check_against_interpreter(graph, {k: v for k, (v, _) in cases.items()}, feed)


def test_an_unknown_piece_leaves_its_elements_unknown(graph):
    x = fl.placeholder(fl.float32, [None, 4], name="x")
    n = fl.placeholder(fl.int32, [2], name="n")
    y = fl.reshape(x, fl.concat([n, [2]], 0))
    assert y.shape == (None, None, 2)
    z = fl.reshape(x, fl.concat([fl.shape(x)[1:] * 2, [-1]], 0))   # a product: not followed
    assert z.shape == (None, None)
