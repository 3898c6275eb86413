"""MaxPool gradients of non-overlapping windows (the 'tiles' path of pool.c.j2, plain and
through _MaxPoolArgmax/_MaxPoolGradArgmax with the ReLU fused): pixels no window covers (VALID
on odd sizes, strides wider than the window) are zero, channel counts below, at and above the
vector widths and the helper's chunk of 256, float32 and float64 in one module; all equal to
the interpreter's."""
import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter

# (input NHWC, window, strides, padding)
CASES = [
    ((2, 7, 9, 32), 2, 2, "VALID"),         # last row and column uncovered
    ((1, 8, 8, 3), 2, 3, "VALID"),          # stride wider than the window: gaps
    ((2, 5, 6, 17), 2, 2, "SAME"),
    ((1, 4, 4, 300), 2, 2, "VALID"),        # more channels than one chunk
    ((1, 6, 6, 1), 3, 3, "SAME"),
]


@pytest.mark.parametrize("relu", [False, True], ids=["plain", "relu"])
def test_tile_pool_gradients_match_the_interpreter(graph, rng, relu):
    fetches, feed = {}, {}
    for i, (shape, k, s, padding) in enumerate(CASES):
        for dtype, npt in ((fl.float32, np.float32), (fl.float64, np.float64)):
            x = fl.placeholder(dtype, shape, name=f"x{i}_{npt.__name__}")
            h = fl.nn.relu(x * 1.0) if relu else x * 1.0
            y = fl.nn.max_pool(h, k, s, padding)
            cot = fl.constant(rng.standard_normal(y.shape.as_list()).astype(npt))
            fetches[f"dx{i}_{npt.__name__}"] = fl.gradients(fl.reduce_sum(y * cot), [x])[0]
            fetches[f"y{i}_{npt.__name__}"] = y
            feed[x] = rng.standard_normal(shape).astype(npt)
    got = check_against_interpreter(graph, fetches, feed, rtol=1e-6, atol=1e-6)
    # pixels outside every window get no gradient
    dx = got["dx0_float32"]
    assert not dx[:, 6, :, :].any() and not dx[:, :, 8, :].any()
    assert not got["dx1_float32"][:, 2::3, :, :].any()


@pytest.mark.parametrize("npt", [np.float32, np.float64], ids=["f32", "f64"])
def test_argmax_pooling_keeps_the_first_maximum_with_ties_and_nans(graph, rng, npt):
    """_MaxPoolArgmax/_MaxPoolGradArgmax over whole vectors of channels and the rest: ties go
    to the first pixel, a NaN first in its window stays (and takes the gradient), a later NaN
    is passed over, as the interpreter does."""
    dtype = fl.float64 if npt is np.float64 else fl.float32
    shape = (2, 6, 5, 19)
    x = fl.placeholder(dtype, shape, name="x")
    y = fl.nn.max_pool(x * 1.0, 2, 2, "SAME")
    cot = fl.constant(rng.standard_normal(y.shape.as_list()).astype(npt))
    dx = fl.gradients(fl.reduce_sum(y * cot), [x])[0]
    xv = np.round(rng.uniform(-2, 2, shape)).astype(npt)
    xv[0, 0, 0, :7] = np.nan            # first pixel of its windows
    xv[1, 3, 1, 5:] = np.nan            # last pixel of its windows
    got = check_against_interpreter(graph, {"y": y, "dx": dx}, {x: xv})
    assert np.isnan(got["y"][0, 0, 0, :7]).all() and not np.isnan(got["y"][1]).any()
