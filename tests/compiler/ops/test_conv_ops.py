"""Conv2D, Conv2DBackpropInput/Filter, MaxPool, AvgPool, MaxPoolGrad and AvgPoolGrad.

The numpy references are first checked against independent formulations (direct loops with
TensorFlow's window arithmetic written out again, and float64 finite differences for the
gradient ops); then the compiled C is checked against them over strides, paddings, dilations,
dynamic batch and spatial dims, empty dims, both float types, and the run-time shape errors.
"""
from types import SimpleNamespace

import numpy as np
import pytest

import dsl as fl
from compiler.errors import CodegenError, ExecutionError, ShapeError
from compiler.ir.op_registry import get_op
from compiler.options import PipelineOptions
from oracle import check_against_interpreter
from runtime.errors import RuntimeExecutionError

# (input HW, filter/window HW, strides, dilations, padding, explicit pads)
CONV_CASES = [
    ((5, 5), (3, 3), (1, 1), (1, 1), "SAME", None),
    ((7, 6), (3, 2), (2, 1), (1, 1), "SAME", None),
    ((6, 7), (2, 3), (2, 3), (1, 1), "VALID", None),
    ((8, 8), (3, 3), (1, 1), (2, 2), "SAME", None),
    ((9, 7), (2, 2), (2, 1), (3, 2), "VALID", None),
    ((4, 4), (1, 1), (1, 1), (1, 1), "VALID", None),      # the 1x1 gemm-only path
    ((5, 4), (3, 3), (2, 2), (1, 1), "EXPLICIT", ((1, 2), (0, 3))),
    ((2, 2), (3, 3), (3, 3), (1, 1), "SAME", None),       # stride larger than the input
    ((2, 5), (3, 1), (2, 1), (1, 1), "VALID", None),      # output height 0 (VALID, 2 < 3)
]


def tf_window(size, k, s, d, padding, pads):
    """TensorFlow's windowed output size and padding before, written out independently."""
    ek = (k - 1) * d + 1
    if padding == "SAME":
        out = -(-size // s)
        return out, max((out - 1) * s + ek - size, 0) // 2
    if padding == "VALID":
        return (max(size - ek + s, 0)) // s, 0
    return (size + pads[0] + pads[1] - ek) // s + 1, pads[0]


def conv_attrs(strides, dilations, padding, pads):
    explicit = [0, 0, *pads[0], *pads[1], 0, 0] if padding == "EXPLICIT" else []
    return {"strides": [1, *strides, 1], "dilations": [1, *dilations, 1], "padding": padding,
            "explicit_paddings": explicit, "data_format": "NHWC", "use_cudnn_on_gpu": True}


def pool_attrs(ksize, strides, padding):
    return {"ksize": [1, *ksize, 1], "strides": [1, *strides, 1], "padding": padding,
            "explicit_paddings": [], "data_format": "NHWC"}


def ref(op, attrs, *arrays):
    """Run an op's numpy reference kernel directly."""
    return get_op(op).kernel(SimpleNamespace(attrs=attrs, node=None), *arrays)


def loop_conv(x, f, strides, dilations, padding, pads):
    """Conv2D by its definition: a sum over in-range taps only."""
    n, h, w, c = x.shape
    kh, kw, _, o = f.shape
    oh, pt = tf_window(h, kh, strides[0], dilations[0], padding, pads and pads[0])
    ow, pl = tf_window(w, kw, strides[1], dilations[1], padding, pads and pads[1])
    y = np.zeros((n, oh, ow, o), x.dtype)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    r = i * strides[0] - pt + a * dilations[0]
                    s = j * strides[1] - pl + b * dilations[1]
                    if 0 <= r < h and 0 <= s < w:
                        y[:, i, j, :] += x[:, r, s, :] @ f[a, b]
    return y


def numerical_grad(fn, x, eps=1e-6):
    """Central finite differences of the scalar ``fn`` at ``x`` (float64)."""
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        up = fn(x)
        flat[i] = old - eps
        down = fn(x)
        flat[i] = old
        gflat[i] = (up - down) / (2 * eps)
    return g


# --- the references themselves ------------------------------------------------------------
def test_conv_reference_matches_direct_loops(rng):
    for hw, k, s, d, pad, pads in CONV_CASES:
        x = rng.standard_normal((2, *hw, 3))
        f = rng.standard_normal((*k, 3, 2))
        got = ref("Conv2D", conv_attrs(s, d, pad, pads), x, f)
        np.testing.assert_allclose(got, loop_conv(x, f, s, d, pad, pads), rtol=1e-12, atol=1e-12,
                                   err_msg=str((hw, k, s, d, pad)))


def test_conv_backprop_references_are_numerical_gradients(rng):
    for hw, k, s, d, pad, pads in CONV_CASES[:7]:
        attrs = conv_attrs(s, d, pad, pads)
        x = rng.standard_normal((2, *hw, 2))
        f = rng.standard_normal((*k, 2, 3))
        cot = rng.standard_normal(ref("Conv2D", attrs, x, f).shape)
        dx = ref("Conv2DBackpropInput", attrs, np.array(x.shape, np.int32), f, cot)
        df = ref("Conv2DBackpropFilter", attrs, x, np.array(f.shape, np.int32), cot)
        want_dx = numerical_grad(lambda v: np.sum(ref("Conv2D", attrs, v, f) * cot), x.copy())
        want_df = numerical_grad(lambda v: np.sum(ref("Conv2D", attrs, x, v) * cot), f.copy())
        np.testing.assert_allclose(dx, want_dx, rtol=1e-6, atol=1e-6, err_msg=str((hw, k, s, pad)))
        np.testing.assert_allclose(df, want_df, rtol=1e-6, atol=1e-6, err_msg=str((hw, k, s, pad)))


POOL_CASES = [((5, 5), (2, 2), (2, 2), "VALID"), ((5, 6), (3, 3), (2, 2), "SAME"),
              ((4, 7), (3, 2), (1, 3), "SAME"), ((6, 6), (1, 1), (2, 2), "VALID"),
              ((3, 3), (5, 5), (1, 1), "SAME"), ((5, 5), (2, 3), (3, 2), "VALID")]


def loop_pool(x, ksize, strides, padding):
    """(max with the first maximum winning, mean) over the in-range elements of each window."""
    n, h, w, c = x.shape
    oh, pt = tf_window(h, ksize[0], strides[0], 1, padding, None)
    ow, pl = tf_window(w, ksize[1], strides[1], 1, padding, None)
    mx, avg = np.zeros((n, oh, ow, c), x.dtype), np.zeros((n, oh, ow, c), x.dtype)
    for i in range(oh):
        for j in range(ow):
            r0, s0 = i * strides[0] - pt, j * strides[1] - pl
            win = x[:, max(r0, 0):r0 + ksize[0], max(s0, 0):s0 + ksize[1], :]
            avg[:, i, j, :] = win.mean(axis=(1, 2))
            flat = win.reshape(n, -1, c)
            for b in range(n):
                for ch in range(c):
                    vals = flat[b, :, ch]
                    best = vals[0]
                    for v in vals[1:]:
                        if v > best:
                            best = v
                    mx[b, i, j, ch] = best
    return mx, avg


def test_pool_references_match_loops_and_numerical_gradients(rng):
    for hw, k, s, pad in POOL_CASES:
        attrs = pool_attrs(k, s, pad)
        x = rng.standard_normal((2, *hw, 3))
        mx, avg = loop_pool(x, k, s, pad)
        np.testing.assert_allclose(ref("MaxPool", attrs, x), mx, rtol=0, atol=0)
        np.testing.assert_allclose(ref("AvgPool", attrs, x), avg, rtol=1e-12, atol=1e-12)
        cot = rng.standard_normal(mx.shape)
        got = ref("MaxPoolGrad", attrs, x, mx, cot)
        want = numerical_grad(lambda v: np.sum(ref("MaxPool", attrs, v) * cot), x.copy())
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=str((hw, k, s, pad)))
        got = ref("AvgPoolGrad", attrs, np.array(x.shape, np.int32), cot)
        want = numerical_grad(lambda v: np.sum(ref("AvgPool", attrs, v) * cot), x.copy())
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=str((hw, k, s, pad)))


def test_max_pool_grad_reference_routes_ties_to_the_first_max():
    x = np.array([[1, 3, 3], [3, 0, 2], [1, 1, 1]], np.float64).reshape(1, 3, 3, 1)
    attrs = pool_attrs((2, 2), (1, 1), "VALID")
    y = ref("MaxPool", attrs, x)
    dx = ref("MaxPoolGrad", attrs, x, y, np.ones_like(y))
    assert y.reshape(-1).tolist() == [3, 3, 3, 2]
    assert dx.reshape(3, 3).tolist() == [[0, 2, 0], [1, 0, 1], [0, 0, 0]]


# --- compiled C against the interpreter ----------------------------------------------------
def _tol(dt):
    return dict(rtol=1e-4, atol=1e-4) if dt == np.float32 else dict(rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_conv2d_and_backprops_against_interpreter(graph, rng, dt):
    """Every case with dynamic batch and spatial dims; batch 2, 1 and 0 are fed."""
    fetches, specs = {}, []
    for i, (hw, k, s, d, pad, pads) in enumerate(CONV_CASES):
        x = fl.placeholder(dt, [None, None, None, 3], name=f"x{i}")
        f = fl.placeholder(dt, [*k, 3, 4], name=f"f{i}")
        padding = [[0, 0], list(pads[0]), list(pads[1]), [0, 0]] if pad == "EXPLICIT" else pad
        fetches[f"conv{i}"] = fl.nn.conv2d(x, f, [1, *s, 1], padding, dilations=[1, *d, 1])
        dy = fl.placeholder(dt, [None, None, None, 4], name=f"dy{i}")
        sizes = fl.placeholder(fl.int32, [4], name=f"sizes{i}")       # dynamic input_sizes
        fetches[f"dx{i}"] = fl.nn.conv2d_backprop_input(sizes, f, dy, s, padding, dilations=d)
        fetches[f"df{i}"] = fl.nn.conv2d_backprop_filter(x, [*k, 3, 4], dy, s, padding, dilations=d)
        specs.append((x, f, dy, sizes, hw, k, s, d, pad, pads))
    for n in (2, 1, 0):
        feed = {}
        for x, f, dy, sizes, hw, k, s, d, pad, pads in specs:
            oh = tf_window(hw[0], k[0], s[0], d[0], pad, pads and pads[0])[0]
            ow = tf_window(hw[1], k[1], s[1], d[1], pad, pads and pads[1])[0]
            feed[x] = rng.standard_normal((n, *hw, 3)).astype(dt)
            feed[f] = rng.standard_normal((*k, 3, 4)).astype(dt)
            feed[dy] = rng.standard_normal((n, oh, ow, 4)).astype(dt)
            feed[sizes] = np.array([n, *hw, 3], np.int32)
        got = check_against_interpreter(graph, fetches, feed, **_tol(dt))
        assert got["conv1"].shape == (n, 4, 6, 4) and got["conv8"].shape == (n, 0, 5, 4)
        if n == 0:
            assert not np.any(got["df0"])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_pools_and_grads_against_interpreter(graph, rng, dt):
    fetches, specs = {}, []
    for i, (hw, k, s, pad) in enumerate(POOL_CASES):
        x = fl.placeholder(dt, [None, *hw, 3] if i % 2 else [None, None, None, 3], name=f"x{i}")
        y = fl.nn.max_pool(x, [1, *k, 1], [1, *s, 1], pad)
        fetches[f"max{i}"] = y
        fetches[f"avg{i}"] = fl.nn.avg_pool(x, k, s, pad)
        dy = fl.placeholder(dt, y.shape, name=f"dy{i}")
        fetches[f"dmax{i}"] = fl.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=dy,
                                                     ksize=[1, *k, 1], strides=[1, *s, 1],
                                                     padding=pad)
        shape = fl.placeholder(fl.int32, [4], name=f"shape{i}")
        fetches[f"davg{i}"] = fl.raw_ops.AvgPoolGrad(orig_input_shape=shape, grad=dy,
                                                     ksize=[1, *k, 1], strides=[1, *s, 1],
                                                     padding=pad)
        specs.append((x, dy, shape, hw, k, s, pad))
    for n in (2, 0):
        feed = {}
        for x, dy, shape, hw, k, s, pad in specs:
            xv = rng.integers(-3, 4, size=(n, *hw, 3)).astype(dt)   # many ties
            if n:
                xv[0, 0, 0, 0] = np.nan
                xv[-1, -1, -1, -1] = -np.inf
            feed[x] = xv
            oh, ow = (tf_window(hw[a], k[a], s[a], 1, pad, None)[0] for a in (0, 1))
            feed[dy] = rng.standard_normal((n, oh, ow, 3)).astype(dt)
            feed[shape] = np.array([n, *hw, 3], np.int32)
        check_against_interpreter(graph, fetches, feed, **_tol(dt))



# (input hw, window, strides, ((top, bottom), (left, right))): TensorFlow's EXPLICIT padding
# of MaxPool (ONNX's pads), smaller than the window
EXPLICIT_POOL_CASES = [((6, 7), (3, 3), (2, 2), ((1, 1), (1, 1))),
                       ((5, 5), (2, 3), (1, 2), ((0, 1), (2, 0))),
                       ((4, 3), (3, 2), (3, 1), ((2, 2), (0, 1)))]


def test_max_pool_explicit_padding_against_loops_and_interpreter(graph, rng):
    """The padding is ignored (as -inf): the max over each window's in-range elements; its
    gradient (through the argmax fusion) routes there too."""
    fetches, feed = {}, {}
    for i, (hw, k, s, pads) in enumerate(EXPLICIT_POOL_CASES):
        attrs = dict(pool_attrs(k, s, "EXPLICIT"), explicit_paddings=[0, 0, *pads[0], *pads[1],
                                                                      0, 0])
        xv = rng.integers(-3, 4, size=(2, *hw, 3)).astype(np.float32)       # ties
        padded = np.pad(xv, [(0, 0), *pads, (0, 0)], constant_values=-np.inf)
        want, _ = loop_pool(padded, k, s, "VALID")
        np.testing.assert_array_equal(ref("MaxPool", attrs, xv), want)
        x = fl.placeholder(fl.float32, [None, *hw, 3], name=f"x{i}")
        y = fl.apply_op("MaxPool", [x], {k: v for k, v in attrs.items() if k != "data_format"})
        fetches[f"max{i}"] = y
        fetches[f"grad{i}"] = fl.gradients(fl.reduce_sum(y * y), [x])[0]
        feed[x] = xv
    check_against_interpreter(graph, fetches, feed)
    with pytest.raises(ShapeError, match="smaller than the window"):
        fl.apply_op("MaxPool", [fl.placeholder(fl.float32, [1, 4, 4, 1])],
                    dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="EXPLICIT",
                         explicit_paddings=[0, 0, 2, 0, 0, 0, 0, 0]))

def test_static_shapes_and_constant_sizes(graph, rng):
    """Fully static shapes (literal dims in C), 4-lists and ints for ksize/strides."""
    xv = rng.standard_normal((3, 9, 8, 5)).astype(np.float32)
    fv = rng.standard_normal((3, 3, 5, 6)).astype(np.float32)
    x = fl.placeholder(fl.float32, xv.shape, name="x")
    f = fl.placeholder(fl.float32, fv.shape, name="f")
    y = fl.nn.conv2d(x, f, 2, "SAME")
    dy = fl.placeholder(fl.float32, y.shape, name="dy")
    fetches = {"y": y, "y1": fl.nn.conv2d(x, f, [1, 1, 1, 1], "VALID", dilations=2),
               "dx": fl.nn.conv2d_backprop_input(list(xv.shape), f, dy, 2, "SAME"),
               "df": fl.nn.conv2d_backprop_filter(x, list(fv.shape), dy, 2, "SAME"),
               "mp": fl.nn.max_pool(x, 3, 2, "SAME"), "ap": fl.nn.avg_pool(x, [1, 2, 2, 1], 2, "VALID")}
    assert y.shape == (3, 5, 4, 6) and fetches["y1"].shape == (3, 5, 4, 6)
    feed = {x: xv, f: fv, dy: rng.standard_normal(y.shape).astype(np.float32)}
    got = check_against_interpreter(graph, fetches, feed, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got["y"], loop_conv(xv.astype(np.float64), fv.astype(np.float64),
                                                   (2, 2), (1, 1), "SAME", None), rtol=1e-4, atol=1e-4)


def test_static_shape_errors(graph):
    x = fl.placeholder(fl.float32, [1, 4, 4, 3], name="x")
    with pytest.raises(ShapeError, match="in-channels"):
        fl.nn.conv2d(x, fl.placeholder(fl.float32, [2, 2, 2, 1]), 1, "SAME", name="chan")
    with pytest.raises(ShapeError, match="negative"):
        fl.nn.conv2d(x, fl.placeholder(fl.float32, [6, 1, 3, 1]), 1, "VALID", name="neg")
    with pytest.raises(ShapeError, match="data_format"):
        fl.nn.conv2d(x, fl.placeholder(fl.float32, [1, 1, 3, 1]), 1, "SAME", data_format="NCWH")
    with pytest.raises(ShapeError, match="batch and depth"):
        fl.nn.max_pool(x, [2, 2, 2, 1], 1, "SAME", name="mp")
    with pytest.raises(ShapeError, match="positive"):
        fl.nn.avg_pool(x, 2, 0, "SAME", name="ap")
    with pytest.raises(ShapeError, match="padding"):
        fl.nn.conv2d(x, fl.placeholder(fl.float32, [1, 1, 3, 1]), 1, "FULL", name="pad")
    with pytest.raises(ShapeError, match="out_backprop"):
        fl.nn.conv2d_backprop_input([1, 4, 4, 3], fl.placeholder(fl.float32, [2, 2, 3, 2]),
                                    fl.placeholder(fl.float32, [1, 3, 3, 2]), 1, "SAME")
    y = fl.nn.conv2d(fl.placeholder(fl.float32, [None, None, None, None]),
                     fl.placeholder(fl.float32, [None, 3, None, None]), 2, "SAME")
    assert y.shape == (None, None, None, None)


def test_run_time_shape_errors_name_the_node(graph):
    x = fl.placeholder(fl.float64, [None, None, None, None], name="x")
    f = fl.placeholder(fl.float64, [3, 3, 2, 1], name="f")
    conv = fl.nn.conv2d(x, f, 1, "VALID", name="the_conv")
    dy = fl.placeholder(fl.float64, [None, None, None, 1], name="dy")
    bwd = fl.nn.conv2d_backprop_filter(x, [3, 3, 2, 1], dy, 1, "VALID", name="the_bwd")
    sizes = fl.placeholder(fl.int32, [None], name="sizes")
    dx = fl.nn.conv2d_backprop_input(sizes, f, dy, 1, "VALID", name="the_dx")
    dx_feed = {dy: np.ones((1, 2, 2, 1))}
    cases = [(conv, {x: np.zeros((1, 4, 4, 3))}, "the_conv"),            # depth 3 != 2
             (dx, {**dx_feed, sizes: np.array([1, 4, 4], np.int32)}, "the_dx.*4"),
             (dx, {**dx_feed, sizes: np.array([1, -4, 4, 2], np.int32)}, "the_dx.*negative"),
             (dx, {**dx_feed, sizes: np.array([1, 4, 4, 3], np.int32)}, "the_dx.*in-channels"),
             (dx, {**dx_feed, sizes: np.array([1, 5, 4, 2], np.int32)}, "the_dx"),  # dy shape
             (conv, {x: np.zeros((1, 1, 4, 2))}, "the_conv"),            # negative output
             (bwd, {x: np.zeros((1, 4, 4, 2)), dy: np.zeros((1, 3, 2, 1))}, "the_bwd")]
    for fetch, feed, match in cases:
        feed[f] = np.ones((3, 3, 2, 1))
        for backend in ("interpreter", "c"):
            with fl.Session(graph=graph, backend=backend) as s:
                with pytest.raises((ExecutionError, RuntimeExecutionError), match=match):
                    s.run(fetch, feed)


def test_nchw_in_the_interpreter_equals_transposed_nhwc(graph, rng):
    """NCHW runs in the interpreter as the NHWC op on transposed operands. The C kernels are
    NHWC only: the layout pass makes each NCHW op its NHWC form between Transposes, and
    without it C refuses NCHW."""
    xv = rng.standard_normal((2, 3, 7, 6))                              # NCHW
    fv = rng.standard_normal((3, 2, 3, 4))
    x, f = fl.constant(xv), fl.constant(fv)
    nchw, nhwc = [1, 1, 2, 1], [1, 2, 1, 1]
    y = fl.nn.conv2d(x, f, nchw, "SAME", data_format="NCHW", dilations=[1, 1, 1, 2])
    dy = fl.constant(rng.standard_normal(y.shape))
    fetches = {
        "conv": (y, lambda a: a.transpose(0, 3, 1, 2)),
        "dx": (fl.nn.conv2d_backprop_input([2, 3, 7, 6], f, dy, nchw, "SAME", data_format="NCHW",
                                           dilations=[1, 1, 1, 2]), lambda a: a.transpose(0, 3, 1, 2)),
        "df": (fl.nn.conv2d_backprop_filter(x, [3, 2, 3, 4], dy, nchw, "SAME",
                                            data_format="NCHW", dilations=[1, 1, 1, 2]), lambda a: a),
        "max": (fl.nn.max_pool(x, [1, 1, 3, 2], nchw, "SAME", data_format="NCHW"),
                lambda a: a.transpose(0, 3, 1, 2)),
    }
    assert y.shape == (2, 4, 4, 6)
    with fl.Session(graph=graph, backend="interpreter") as s:
        xt, dyt = xv.transpose(0, 2, 3, 1), s.run(dy).transpose(0, 2, 3, 1)
    conv = conv_attrs((2, 1), (1, 2), "SAME", None)
    want = {"conv": ref("Conv2D", conv, xt, fv),
            "dx": ref("Conv2DBackpropInput", conv, np.array([2, 7, 6, 3], np.int32), fv, dyt),
            "df": ref("Conv2DBackpropFilter", conv, xt, np.array(fv.shape, np.int32), dyt),
            "max": ref("MaxPool", pool_attrs((3, 2), (2, 1), "SAME"), xt)}
    with fl.Session(graph=graph, backend="interpreter") as s:
        got = s.run({k: t for k, (t, _) in fetches.items()})
    for k, (_, back) in fetches.items():
        np.testing.assert_allclose(back(want[k]), got[k], rtol=1e-12, atol=1e-12, err_msg=k)
    check_against_interpreter(graph, {k: t for k, (t, _) in fetches.items()})
    no_layout = PipelineOptions(disable=("fold-constants", "layout"))
    with fl.Session(graph=graph, backend="c", options=no_layout) as s:
        with pytest.raises(CodegenError, match="NCHW"):
            s.run(fetches["conv"][0])


def test_im2col_in_several_chunks(graph, rng):
    """Column buffers bigger than one chunk (768 KiB) are processed a chunk of rows at a time."""
    xv = rng.standard_normal((5, 32, 32, 160)).astype(np.float32)      # 1024 x 1440 per image
    fv = rng.standard_normal((3, 3, 160, 3)).astype(np.float32)
    x = fl.placeholder(fl.float32, [None, 32, 32, 160], name="x")
    f = fl.placeholder(fl.float32, fv.shape, name="f")
    y = fl.nn.conv2d(x, f, 1, "SAME")
    dy = fl.placeholder(fl.float32, [None, 32, 32, 3], name="dy")
    fetches = {"y": y, "dx": fl.nn.conv2d_backprop_input(list(xv.shape), f, dy, 1, "SAME"),
               "df": fl.nn.conv2d_backprop_filter(x, list(fv.shape), dy, 1, "SAME")}
    feed = {x: xv, f: fv, dy: rng.standard_normal((5, 32, 32, 3)).astype(np.float32)}
    check_against_interpreter(graph, fetches, feed, rtol=1e-3, atol=1e-3)


def test_empty_channels_filters_and_images(graph, rng):
    """Zero channels, zero filters and zero-size images: zeros or empty results, no BLAS call."""
    x0 = fl.placeholder(fl.float64, [None, 4, 4, 0], name="x0")
    x3 = fl.placeholder(fl.float64, [None, None, None, 3], name="x3")
    f0 = fl.placeholder(fl.float64, [3, 3, 0, 2], name="f0")
    f3 = fl.placeholder(fl.float64, [2, 2, 3, 0], name="f3")
    dy0 = fl.placeholder(fl.float64, [None, 4, 4, 2], name="dy0")
    fetches = {"no_channels": fl.nn.conv2d(x0, f0, 1, "SAME"),
               "no_filters": fl.nn.conv2d(x3, f3, 1, "SAME"),
               "dx_no_channels": fl.nn.conv2d_backprop_input([2, 4, 4, 0], f0, dy0, 1, "SAME"),
               "df_no_channels": fl.nn.conv2d_backprop_filter(x0, [3, 3, 0, 2], dy0, 1, "SAME"),
               "max_no_channels": fl.nn.max_pool(x0, 2, 2, "SAME"),
               "avg": fl.nn.avg_pool(x3, 2, 1, "SAME")}
    for hw in ((5, 5), (0, 3)):
        feed = {x0: np.zeros((2, 4, 4, 0)), x3: rng.standard_normal((2, *hw, 3)),
                f0: np.zeros((3, 3, 0, 2)), f3: np.zeros((2, 2, 3, 0)),
                dy0: rng.standard_normal((2, 4, 4, 2))}
        got = check_against_interpreter(graph, fetches, feed)
        assert got["no_channels"].shape == (2, 4, 4, 2) and not got["no_channels"].any()
        assert got["no_filters"].shape == (2, *hw, 0)


# (input HW, filter HW, strides, dilations, padding): windows whose column matrices span
# several chunks of rows, with chunks that start and end inside an image
CHUNKED_CASES = [((21, 19), (3, 3), (2, 2), (1, 1), "SAME"),
                 ((17, 18), (3, 2), (1, 2), (2, 3), "VALID"),
                 ((15, 15), (5, 5), (1, 1), (1, 1), "SAME")]


def test_chunks_of_rows_across_images_against_interpreter(graph, rng):
    """67 channels (K = 603 taps and more: about 160 rows per chunk in float64), batch 5 and 1,
    strides 1 and 2, dilations, SAME and VALID: the forward pass and both backprops."""
    fetches, specs = {}, []
    for i, (hw, k, s, d, pad) in enumerate(CHUNKED_CASES):
        x = fl.placeholder(fl.float64, [None, *hw, 67], name=f"x{i}")
        f = fl.placeholder(fl.float64, [*k, 67, 5], name=f"f{i}")
        y = fl.nn.conv2d(x, f, [1, *s, 1], pad, dilations=[1, *d, 1])
        dy = fl.placeholder(fl.float64, [None, *y.shape[1:]], name=f"dy{i}")
        fetches[f"y{i}"] = y
        fetches[f"dx{i}"] = fl.nn.conv2d_backprop_input(fl.shape(x), f, dy, s, pad, dilations=d)
        fetches[f"df{i}"] = fl.nn.conv2d_backprop_filter(x, [*k, 67, 5], dy, s, pad, dilations=d)
        specs.append((x, f, dy, hw, k, y.shape))
    for n in (5, 1):
        feed = {}
        for x, f, dy, hw, k, yshape in specs:
            feed[x] = rng.standard_normal((n, *hw, 67))
            feed[f] = rng.standard_normal((*k, 67, 5))
            feed[dy] = rng.standard_normal((n, *yshape[1:]))
        check_against_interpreter(graph, fetches, feed, rtol=1e-10, atol=1e-10)


def test_pools_over_many_channels_against_interpreter(graph, rng):
    """More channels than MaxPoolGrad's block of 256 (and not a multiple of 8), odd sizes,
    strides 1 and 2, overlapping windows, ties and NaNs."""
    fetches, feeds = {}, {}
    for i, (hw, k, s, pad) in enumerate([((7, 5), (2, 2), (2, 2), "VALID"),
                                         ((5, 6), (3, 3), (1, 1), "SAME"),
                                         ((6, 7), (3, 2), (2, 1), "SAME")]):
        x = fl.placeholder(fl.float32, [3, *hw, 261], name=f"x{i}")
        y = fl.nn.max_pool(x, [1, *k, 1], [1, *s, 1], pad)
        dy = fl.placeholder(fl.float32, y.shape, name=f"dy{i}")
        fetches[f"max{i}"] = y
        fetches[f"dmax{i}"] = fl.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=dy,
                                                     ksize=[1, *k, 1], strides=[1, *s, 1],
                                                     padding=pad)
        xv = rng.integers(-2, 3, size=(3, *hw, 261)).astype(np.float32)    # many ties
        xv[1, 2, 3, 100] = np.nan
        xv[2, 0, 0, 260] = np.nan
        feeds[x], feeds[dy] = xv, rng.standard_normal(y.shape).astype(np.float32)
    check_against_interpreter(graph, fetches, feeds, rtol=1e-5, atol=1e-5)
