"""Gradients through tensors whose rank is known only when the step runs (a placeholder of
shape None, a py_func result without set_shape) and through reductions over fed axes: the
reduced shape and the broadcast axes are computed in the graph, as TensorFlow's gradients do
(Shape, Range, BroadcastGradientArgs), instead of refusing the graph. Checked against the same
gradients built from fully known shapes, in the interpreter and in compiled C."""
import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from oracle import check_against_interpreter


def _gradients(x, b, axes):
    outs = {"sum": fl.reduce_sum(x * 2.0),
            "sum_axis": fl.reduce_sum(x * 3.0, axis=1),
            "mean_last": fl.reduce_mean(x * x, axis=-1),
            "max_first": fl.reduce_max(x, axis=0),
            "prod_all": fl.reduce_prod(x, axis=[0, 1]),
            "sum_fed_axes": fl.reduce_sum(fl.sin(x), axis=axes, keepdims=True),
            "mean_fed_axes": fl.reduce_mean(x, axis=axes),
            "broadcast": fl.reduce_sum(x * b + b)}
    grads = {k: fl.gradients(v, [x])[0] for k, v in outs.items()}
    grads["broadcast_peer"] = fl.gradients(outs["broadcast"], [b])[0]
    return grads


@pytest.mark.parametrize("axes_value", [[1], [0, -1], []])
def test_unknown_ranks_and_fed_axes_give_the_gradients_of_known_shapes(graph, rng, axes_value):
    xv = (rng.standard_normal((2, 3)) + 2.0).astype(np.float32)
    bv = rng.standard_normal(3).astype(np.float32)
    av = np.array(axes_value, np.int32)
    x = fl.placeholder(fl.float32, None, name="x")
    b = fl.placeholder(fl.float32, None, name="b")
    axes = fl.placeholder(fl.int32, None, name="axes")
    assert x.shape.ndims is None
    unknown = _gradients(x, b, axes)
    # the compiled side with the default passes: the step is compiled for the shapes fed,
    # where constant folding gives every rank (docs/shapes_at_run_time.md)
    got = check_against_interpreter(graph, unknown, {x: xv, b: bv, axes: av},
                                    options=PipelineOptions())

    known = fl.Graph()
    with known.as_default():
        xk = fl.placeholder(fl.float32, [2, 3])
        bk = fl.placeholder(fl.float32, [3])
        want_t = _gradients(xk, bk, fl.constant(av))
        with fl.Session(graph=known, backend="interpreter") as s:
            want = s.run(want_t, {xk: xv, bk: bv})
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)
        assert np.shape(got[k]) == np.shape(want[k]), k
