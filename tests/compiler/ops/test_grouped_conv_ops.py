"""Grouped Conv2D (TensorFlow's: the input depth a multiple of the filter's in-channels;
Keras' ``Conv2D(groups=...)``, ConvNeXt's depthwise layers): the reference against a
per-group computation, and compiled C (through the simplify rule that makes a
one-channel-per-group Conv2D a DepthwiseConv2dNative; one with several channels per group
runs as one grouped kernel, see test_grouped_conv_native.py) against the interpreter, for
strides, dilations, SAME and VALID padding and a fed batch."""
import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op


def _conv(x, f, strides=1, padding="SAME", dilations=1):
    return A("Conv2D", [x, f], {"strides": [1, strides, strides, 1], "padding": padding,
                                "dilations": [1, dilations, dilations, 1]})


def test_grouped_reference_is_one_convolution_per_group(graph, rng):
    x = rng.standard_normal((2, 5, 6, 4)).astype(np.float32)
    f = rng.standard_normal((3, 3, 2, 6)).astype(np.float32)       # 2 groups, 3 outputs each
    y = _conv(fl.constant(x), fl.constant(f))
    assert y.shape == (2, 5, 6, 6)
    parts = [_conv(fl.constant(x[..., 2 * k:2 * k + 2]), fl.constant(f[..., 3 * k:3 * k + 3]))
             for k in range(2)]
    with fl.Session(backend="interpreter") as s:
        got, a, b = s.run([y, parts[0], parts[1]])
    np.testing.assert_allclose(got, np.concatenate([a, b], axis=-1), rtol=1e-6, atol=1e-6)


def test_depthwise_groups_compile_and_match(graph, rng):
    x = fl.placeholder(fl.float32, [None, 7, 6, 3], name="x")
    fetches = {}
    for k, (s, p, d, m) in enumerate([(1, "SAME", 1, 1), (2, "VALID", 1, 2), (1, "SAME", 2, 3),
                                      (2, "SAME", 1, 1)]):
        f = fl.constant(rng.standard_normal((3, 3, 1, 3 * m)).astype(np.float32))
        fetches[f"c{k}"] = _conv(x, f, s, p, d) + 1.0
    for batch in (2, 1):
        check_against_interpreter(graph, fetches, {
            x: rng.standard_normal((batch, 7, 6, 3)).astype(np.float32)})


def test_several_channels_per_group_compile_and_match(graph, rng):
    x = fl.placeholder(fl.float32, [None, 6, 5, 8], name="x")
    fetches = {}
    for k, (cin, out, s, p, d) in enumerate([(2, 8, 1, "SAME", 1), (4, 6, 2, "VALID", 1),
                                             (2, 4, 1, "SAME", 2)]):
        f = fl.constant(rng.standard_normal((3, 3, cin, out)).astype(np.float32))
        fetches[f"c{k}"] = fl.nn.relu(_conv(x, f, s, p, d))
    for batch in (2, 1):
        check_against_interpreter(graph, fetches, {
            x: rng.standard_normal((batch, 6, 5, 8)).astype(np.float32)})


def test_group_errors():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [1, 4, 4, 6])
        with pytest.raises(FlowcError, match="divisor"):
            _conv(x, fl.zeros([3, 3, 4, 8]))
        with pytest.raises(FlowcError, match="not a multiple of the number of groups"):
            _conv(x, fl.zeros([3, 3, 2, 4]))
