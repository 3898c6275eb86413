"""Convolutions with few filter taps and output channels that fill whole vectors run as direct
loops (conv_direct.c.j2), plain or with a fused bias and ReLU, and so do their filter
gradients: the generated code calls the direct helpers, and results equal the interpreter's
(the oracle) for odd sizes (an odd output width leaves one pixel after the pairs), strides 1
and 2, dilation, SAME and VALID padding, batch 1, f64 and empty batches."""
import re

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.emitter import emit_c
from compiler.step import make_step_graph, optimize
from oracle import NO_FOLDING, check_against_interpreter

# (input shape, filter shape, strides, padding, dilations, bias and relu)
CASES = [
    ((2, 28, 28, 1), (5, 5, 1, 32), 1, "SAME", 1, True),
    ((1, 9, 7, 3), (3, 3, 3, 16), 1, "SAME", 1, False),
    ((2, 11, 10, 3), (3, 3, 3, 8), 2, "VALID", 1, True),
    ((3, 8, 9, 2), (3, 2, 2, 24), 2, "SAME", 1, False),
    ((2, 9, 9, 1), (3, 3, 1, 8), 1, "SAME", 2, True),
    ((1, 3, 2, 1), (5, 5, 1, 8), 1, "SAME", 1, True),     # the window is wider than the input
]


def _graph(rng):
    fetches, feed, feeds = {}, {}, []
    for i, (xs, fs, stride, padding, dilation, fused) in enumerate(CASES):
        x = fl.placeholder(fl.float32, [None, *xs[1:]], name=f"x{i}")
        f = fl.placeholder(fl.float32, fs, name=f"f{i}")
        y = fl.nn.conv2d(x, f, stride, padding, dilations=dilation)
        if fused:
            b = fl.placeholder(fl.float32, [fs[3]], name=f"b{i}")
            y = fl.nn.relu(fl.nn.bias_add(y, b))
            feed[b] = rng.standard_normal(fs[3]).astype(np.float32)
            feeds.append(b)
        fetches[f"case{i}"] = y
        dy = fl.placeholder(fl.float32, [None, *list(y.shape)[1:]], name=f"dy{i}")
        fetches[f"filter_grad{i}"] = fl.nn.conv2d_backprop_filter(x, list(fs), dy, stride,
                                                                  padding, dilations=dilation)
        feed.update({x: rng.standard_normal(xs).astype(np.float32),
                     f: rng.standard_normal(fs).astype(np.float32),
                     dy: rng.standard_normal((xs[0], *list(y.shape)[1:])).astype(np.float32)})
        feeds += [x, f, dy]
    x64 = fl.placeholder(fl.float64, [2, 7, 5, 2], name="x64")
    fetches["f64"] = fl.nn.relu(fl.nn.bias_add(
        fl.nn.conv2d(x64, fl.constant(rng.standard_normal((3, 3, 2, 8))), 2, "SAME"),
        fl.constant(rng.standard_normal(8))))
    feed[x64] = rng.standard_normal((2, 7, 5, 2))
    return fetches, feed, feeds + [x64]


@pytest.mark.cpu_only
def test_small_filters_run_direct_and_match_the_interpreter(graph, rng, monkeypatch):
    # flowc's own kernels: under auto, oneDNN takes the large ones with a fed batch at run time
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    fetches, feed, feeds = _graph(rng)
    step = make_step_graph(graph, [f.output for f in feeds],
                           [t.output for t in fetches.values()])
    optimize(step, NO_FOLDING)
    source = emit_c(step.graph, step.feeds, step.retvals).source
    calls = re.findall(r"= (flowc_conv2d\w*)\(", source)
    assert len(calls) == len(fetches) and all("_direct_" in c for c in calls), calls
    check_against_interpreter(graph, fetches, feed)
    for i, (xs, *_rest) in enumerate(CASES):                   # empty batches at run time
        for name in (f"x{i}", f"dy{i}"):
            t = graph.get_tensor_by_name(f"{name}:0")
            feed[t] = np.zeros((0, *feed[t].shape[1:]), np.float32)
    check_against_interpreter(graph, {k: v for k, v in fetches.items() if k != "f64"}, feed)


def test_larger_filters_keep_im2col(graph, rng, monkeypatch):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    x = fl.placeholder(fl.float32, [2, 6, 6, 4], name="x")
    wide = fl.nn.conv2d(x, fl.constant(rng.standard_normal((3, 3, 4, 8)).astype(np.float32)),
                        1, "SAME")                                   # 36 taps
    odd = fl.nn.conv2d(x, fl.constant(rng.standard_normal((1, 1, 4, 6)).astype(np.float32)),
                       1, "SAME")                                    # 6 channels: no vector
    step = make_step_graph(graph, [x.output], [wide.output, odd.output])
    optimize(step, NO_FOLDING)
    source = emit_c(step.graph, step.feeds, step.retvals).source
    assert "_direct_" not in source
    check_against_interpreter(graph, {"wide": wide, "odd": odd},
                              {x: rng.standard_normal((2, 6, 6, 4)).astype(np.float32)})
