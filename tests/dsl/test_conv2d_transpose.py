"""fl.nn.conv2d_transpose and fl.layers.conv2d_transpose / Conv2DTranspose, as TF1's: the
numbers of a direct scatter loop, compiled C equal to the interpreter, gradients by
differences, the layer's variables, output sizes and a batch known only at run time."""
import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter


def loop_transpose(x, f, out_shape, stride, padding):
    """out[n, i*s + a - pad_top, j*s + b - pad_left, o] += x[n, i, j, c] * f[a, b, o, c]."""
    n, h, w, c = x.shape
    kh, kw, oc, _ = f.shape
    _, oh, ow, _ = out_shape
    if padding == "SAME":
        pt = max((h - 1) * stride + kh - oh, 0) // 2
        pl = max((w - 1) * stride + kw - ow, 0) // 2
    else:
        pt = pl = 0
    out = np.zeros(out_shape, np.float64)
    for i in range(h):
        for j in range(w):
            for a in range(kh):
                for b in range(kw):
                    y, z = i * stride + a - pt, j * stride + b - pl
                    if 0 <= y < oh and 0 <= z < ow:
                        out[:, y, z, :] += x[:, i, j, :] @ f[a, b].T
    return out


@pytest.mark.parametrize("padding,stride,out_hw", [("SAME", 2, (6, 8)), ("VALID", 2, (7, 9)),
                                                   ("SAME", 1, (3, 4)), ("VALID", 3, (9, 11))])
def test_nn_conv2d_transpose_matches_loops_and_c(graph, rng, padding, stride, out_hw):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    f = rng.standard_normal((3, 2, 4, 5)).astype(np.float32)
    out_shape = [2, out_hw[0], out_hw[1], 4]
    y = fl.nn.conv2d_transpose(fl.constant(x), fl.constant(f), out_shape,
                               strides=[1, stride, stride, 1], padding=padding)
    assert y.shape.as_list() == out_shape
    assert y.op.type == "Conv2DBackpropInput"
    got = check_against_interpreter(graph, {"y": y})["y"]
    np.testing.assert_allclose(got, loop_transpose(x, f, out_shape, stride, padding),
                               rtol=1e-4, atol=1e-4)


def test_nn_conv2d_transpose_gradients_by_differences(graph, rng):
    x0 = rng.standard_normal((1, 3, 3, 2))
    f0 = rng.standard_normal((2, 2, 3, 2))
    x = fl.placeholder(fl.float64, [1, 3, 3, 2])
    f = fl.placeholder(fl.float64, [2, 2, 3, 2])
    y = fl.nn.conv2d_transpose(x, f, [1, 6, 6, 3], [1, 2, 2, 1], "SAME")
    w = fl.constant(rng.standard_normal((1, 6, 6, 3)))
    loss = fl.reduce_sum(y * w)
    gx, gf = fl.gradients(loss, [x, f])
    with fl.Session(backend="c") as s:
        dx, df = s.run([gx, gf], {x: x0, f: f0})

        def num(which, base):
            out = np.zeros_like(base)
            for idx in np.ndindex(base.shape):
                plus, minus = base.copy(), base.copy()
                plus[idx] += 1e-6
                minus[idx] -= 1e-6
                fp = {x: plus, f: f0} if which == "x" else {x: x0, f: plus}
                fm = {x: minus, f: f0} if which == "x" else {x: x0, f: minus}
                out[idx] = (s.run(loss, fp) - s.run(loss, fm)) / 2e-6
            return out
        np.testing.assert_allclose(dx, num("x", x0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(df, num("f", f0), rtol=1e-5, atol=1e-6)


def test_nn_conv2d_transpose_checks_channels(graph):
    with pytest.raises(ValueError, match="input channels"):
        fl.nn.conv2d_transpose(fl.zeros([1, 2, 2, 3]), fl.zeros([2, 2, 4, 5]), [1, 4, 4, 4],
                               [1, 2, 2, 1])
    with pytest.raises(ValueError, match="output channels"):
        fl.nn.conv2d_transpose(fl.zeros([1, 2, 2, 5]), fl.zeros([2, 2, 4, 5]), [1, 4, 4, 3],
                               [1, 2, 2, 1])


def test_layer_variables_shapes_and_dynamic_batch(graph, rng):
    x = fl.placeholder(fl.float32, [None, 4, 5, 3])
    y = fl.layers.conv2d_transpose(x, 6, 3, strides=2, padding="same", activation=fl.nn.relu,
                                   kernel_initializer=fl.glorot_uniform_initializer(seed=1))
    z = fl.layers.conv2d_transpose(x, 2, (3, 2), strides=(2, 3), name="up")
    assert y.shape.as_list() == [None, 8, 10, 6]
    assert z.shape.as_list() == [None, 9, 15, 2]          # valid: in*s + max(k - s, 0)
    names = sorted(v.op.name for v in fl.trainable_variables())
    assert names == ["conv2d_transpose/bias", "conv2d_transpose/kernel", "up/bias", "up/kernel"]
    kernel = [v for v in fl.trainable_variables() if v.op.name == "up/kernel"][0]
    assert kernel.shape.as_list() == [3, 2, 2, 3]
    layer = fl.layers.Conv2DTranspose(4, 2, strides=2)
    assert layer.compute_output_shape([None, 4, 5, 3]).as_list() == [None, 8, 10, 4]
    xv = rng.standard_normal((3, 4, 5, 3)).astype(np.float32)
    with fl.Session(backend="c") as s:
        s.run(fl.global_variables_initializer())
        yv, zv, k = s.run([y, z, kernel], {x: xv})
        assert yv.shape == (3, 8, 10, 6) and zv.shape == (3, 9, 15, 2)
        assert (yv >= 0).all()
        # with zero bias the valid layer is the plain transpose at strides (2, 3)
        n, h, w, _ = xv.shape
        want = np.zeros(zv.shape)
        for i in range(h):
            for j in range(w):
                for a in range(3):
                    for b in range(2):
                        want[:, i * 2 + a, j * 3 + b, :] += xv[:, i, j, :] @ k[a, b].T
        np.testing.assert_allclose(zv, want, rtol=1e-4, atol=1e-4)
