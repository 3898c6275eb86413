"""Losses and gradient ops (compiler/ops/nn_grad.py): compiled C against the interpreter, the
grad ops against finite differences of their forward ops in float64, the losses against
independent numpy formulas, and the data errors (bad labels, segment ids, shapes).

Each test builds one graph and compiles it once; cases are batched as fetches of that graph.
"""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError, ShapeError
from oracle import check_against_interpreter, random_array
from runtime.errors import RuntimeExecutionError

# op -> (forward op, which input of the grad op is the forward input (x) or output (y))
GRADS = {"ReluGrad": ("Relu", "x"), "Relu6Grad": ("Relu6", "x"), "EluGrad": ("Elu", "y"),
         "SoftplusGrad": ("Softplus", "x"), "SigmoidGrad": ("Sigmoid", "y"),
         "TanhGrad": ("Tanh", "y"), "RsqrtGrad": ("Rsqrt", "y"), "SqrtGrad": ("Sqrt", "y"),
         "ReciprocalGrad": ("Reciprocal", "y")}
POSITIVE = {"RsqrtGrad", "SqrtGrad", "ReciprocalGrad"}


def run_both_fail(graph, fetch, feed, match):
    """Both backends raise an error matching ``match``."""
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises((ExecutionError, RuntimeExecutionError), match=match):
                s.run(fetch, feed)


def _grad_node(op, fwd_in, fwd_out, g):
    kind = GRADS[op][1]
    if op in ("SigmoidGrad", "TanhGrad", "RsqrtGrad", "SqrtGrad", "ReciprocalGrad"):
        return fl.apply_op(op, [fwd_out, g])                     # (y, dy)
    return fl.apply_op(op, [g, fwd_in if kind == "x" else fwd_out])  # (gradients, x or y)


def test_grad_ops_match_finite_differences(graph, rng):
    """float64: grad(g, x) == g * (f(x + h) - f(x - h)) / 2h, away from kinks."""
    x = fl.placeholder(fl.float64, [None], name="x")
    xp = fl.placeholder(fl.float64, [None], name="xp")
    g = fl.placeholder(fl.float64, [None], name="g")
    fwd, grads = {}, {}
    for op, (f, _) in GRADS.items():
        inp = xp if op in POSITIVE else x
        fwd[op] = fl.apply_op(f, [inp])
        grads[op] = _grad_node(op, inp, fwd[op], g)
    n = 200
    xv = rng.uniform(-8, 8, n)
    xv[np.abs(xv) < 0.05] += 0.2
    xv[np.abs(xv - 6) < 0.05] += 0.2
    pv = rng.uniform(0.2, 5, n)
    gv = rng.uniform(-2, 2, n)
    h = 1e-6
    with fl.Session(graph=graph, backend="interpreter") as s:
        hi = s.run(fwd, {x: xv + h, xp: pv + h})
        lo = s.run(fwd, {x: xv - h, xp: pv - h})
    got = check_against_interpreter(graph, grads, {x: xv, xp: pv, g: gv})
    for op in GRADS:
        want = gv * (hi[op] - lo[op]) / (2 * h)
        np.testing.assert_allclose(got[op], want, rtol=1e-6, atol=1e-6, err_msg=op)


def test_grad_ops_dtypes_dynamic_batch_and_edges(graph, rng):
    fetches, places = {}, []
    for dt in (np.float32, np.float64):
        a = fl.placeholder(dt, [None, 4])
        b = fl.placeholder(dt, [None, 4])
        places.append((a, b, dt))
        for op in GRADS:
            fetches[f"{op}/{np.dtype(dt).name}"] = fl.apply_op(op, [a, b])
    ai = fl.placeholder(fl.int32, [None, 4])
    bi = fl.placeholder(fl.int32, [None, 4])
    fetches["ReluGrad/i32"] = fl.apply_op("ReluGrad", [ai, bi])
    fetches["Relu6Grad/i32"] = fl.apply_op("Relu6Grad", [ai, bi])
    for batch in (3, 1, 0):
        feed = {ai: random_array(rng, (batch, 4), np.int32, -8, 9),
                bi: random_array(rng, (batch, 4), np.int32, -8, 9)}
        for a, b, dt in places:
            av = random_array(rng, (batch, 4), dt, 0.1, 3)
            bv = random_array(rng, (batch, 4), dt, -7, 7)
            if batch == 3:
                bv[0, :] = [np.nan, np.inf, -np.inf, 0.0]
                av[1, :] = [np.nan, np.inf, 0.0, 1.0]
            feed[a], feed[b] = av, bv
        got = check_against_interpreter(graph, fetches, feed)
        assert got["ReluGrad/float32"].shape == (batch, 4)
    assert got["ReluGrad/i32"].dtype == np.int32


def test_grad_op_shape_mismatch(graph):
    a = fl.placeholder(fl.float32, [None, 3])
    b = fl.placeholder(fl.float32, [None, 3])
    with pytest.raises(ShapeError, match="same shape"):
        fl.apply_op("TanhGrad", [a, fl.placeholder(fl.float32, [2, 4])])
    t = fl.apply_op("TanhGrad", [a, b])
    run_both_fail(graph, t, {a: np.zeros((2, 3), np.float32), b: np.zeros((3, 3), np.float32)},
                  "same shape|differs")


def _np_log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def test_softmax_cross_entropy_losses(graph, rng):
    fetches, places = {}, []
    for dt in (np.float32, np.float64):
        name = np.dtype(dt).name
        f = fl.placeholder(dt, [None, 5], name=f"f_{name}")
        lab = fl.placeholder(dt, [None, 5], name=f"l_{name}")
        s32 = fl.placeholder(fl.int32, [None], name=f"s32_{name}")
        s64 = fl.placeholder(fl.int64, [None], name=f"s64_{name}")
        places.append((f, lab, s32, s64, dt))
        fetches[f"dense/{name}"], fetches[f"dense_bp/{name}"] = fl.apply_op(
            "SoftmaxCrossEntropyWithLogits", [f, lab])
        fetches[f"sp32/{name}"], fetches[f"sp32_bp/{name}"] = fl.apply_op(
            "SparseSoftmaxCrossEntropyWithLogits", [f, s32])
        fetches[f"sp64/{name}"], fetches[f"sp64_bp/{name}"] = fl.apply_op(
            "SparseSoftmaxCrossEntropyWithLogits", [f, s64])
        fetches[f"api/{name}"] = fl.nn.softmax_cross_entropy_with_logits(labels=lab, logits=f)
        fetches[f"api_sp/{name}"] = fl.nn.sparse_softmax_cross_entropy_with_logits(
            labels=s64, logits=f)
    for batch in (4, 0):
        feed = {}
        for f, lab, s32, s64, dt in places:
            fv = random_array(rng, (batch, 5), dt, -4, 4)
            if batch:
                fv[0] = [1e4, -1e4, 3e3, 0, 1e4]                # large logits stay finite
            lv = rng.uniform(0, 1, (batch, 5)).astype(dt)
            lv /= lv.sum(axis=1, keepdims=True) if batch else 1
            iv = rng.integers(0, 5, batch)
            feed.update({f: fv, lab: lv, s32: iv.astype(np.int32), s64: iv})
        got = check_against_interpreter(graph, fetches, feed, rtol=2e-5, atol=1e-5)
        for f, lab, s32, s64, dt in places:
            name = np.dtype(dt).name
            x = feed[f].astype(np.float64)
            ls = _np_log_softmax(x) if batch else x
            sm = np.exp(ls)
            tol = dict(rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(got[f"dense/{name}"], -(feed[lab] * ls).sum(axis=1), **tol)
            np.testing.assert_allclose(got[f"dense_bp/{name}"], sm - feed[lab], **tol)
            onehot = np.eye(5)[feed[s64]] if batch else np.zeros((0, 5))
            np.testing.assert_allclose(got[f"sp32/{name}"], -(onehot * ls).sum(axis=1), **tol)
            np.testing.assert_allclose(got[f"sp64_bp/{name}"], sm - onehot, **tol)
            np.testing.assert_array_equal(got[f"api_sp/{name}"], got[f"sp64/{name}"])
            assert np.all(np.isfinite(got[f"dense/{name}"]))


def test_sparse_cross_entropy_bad_labels_and_shapes(graph):
    f = fl.placeholder(fl.float32, [None, 3], name="logits")
    lab = fl.placeholder(fl.int32, [None], name="labels")
    loss = fl.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=f, name="xent")
    fv = np.zeros((2, 3), np.float32)
    for bad in (3, -1):
        run_both_fail(graph, loss, {f: fv, lab: np.array([0, bad], np.int32)},
                      f"xent.*label value of {bad}")
    run_both_fail(graph, loss, {f: fv, lab: np.array([0, 1, 2], np.int32)}, "batch|labels")
    with pytest.raises(ShapeError, match="2-D"):
        fl.apply_op("SparseSoftmaxCrossEntropyWithLogits", [fl.placeholder(fl.float32, [3]),
                                                            fl.placeholder(fl.int32, [3])])
    with pytest.raises(ShapeError, match="2-dimensional"):
        fl.apply_op("SoftmaxCrossEntropyWithLogits", [fl.placeholder(fl.float32, [3]),
                                                      fl.placeholder(fl.float32, [3])])
    with pytest.raises(ShapeError, match="broadcastable"):
        fl.apply_op("SoftmaxCrossEntropyWithLogits", [fl.placeholder(fl.float32, [2, 3]),
                                                      fl.placeholder(fl.float32, [3, 3])])
    with pytest.raises(ShapeError, match="2-dimensional"):
        fl.apply_op("SoftmaxCrossEntropyWithLogits", [fl.placeholder(fl.float32, [2, 3]),
                                                      fl.placeholder(fl.float32, [1, 2, 3])])
    d = fl.placeholder(fl.float32, [None, None], name="dense_labels")
    dense = fl.apply_op("SoftmaxCrossEntropyWithLogits", [f, d], name="dense")[0]
    run_both_fail(graph, dense, {f: fv, d: np.zeros((3, 3), np.float32)}, "dense.*broadcast")


def test_dense_cross_entropy_broadcasts_to_2d(graph, rng):
    """TF broadcasts features and labels to one 2-D shape (a row of either, a vector)."""
    f = fl.placeholder(fl.float64, [None, 4])
    row = fl.placeholder(fl.float64, [None, None])
    vec = fl.placeholder(fl.float64, [4])
    a = fl.apply_op("SoftmaxCrossEntropyWithLogits", [f, vec])
    b = fl.apply_op("SoftmaxCrossEntropyWithLogits", [row, f])
    assert a[1].shape == (None, 4) and b[0].shape == (None,)
    fv, vv, rv = rng.normal(size=(3, 4)), rng.uniform(size=4), rng.normal(size=(1, 4))
    got = check_against_interpreter(graph, {"a": a[0], "ab": a[1], "b": b[0], "bb": b[1]},
                                    {f: fv, vec: vv, row: rv})
    ls = _np_log_softmax(fv)
    np.testing.assert_allclose(got["a"], -(vv * ls).sum(axis=1))
    np.testing.assert_allclose(got["ab"], np.exp(ls) - vv)
    lr = _np_log_softmax(rv)
    np.testing.assert_allclose(got["b"], -(fv * lr).sum(axis=1))
    np.testing.assert_allclose(got["bb"], np.exp(lr) - fv)


def test_cross_entropy_higher_rank_logits(graph, rng):
    f = fl.placeholder(fl.float64, [None, 2, 4])
    fd = fl.placeholder(fl.float64, [None, 2, None])
    lab = fl.placeholder(fl.int64, [None, 2])
    dist = fl.placeholder(fl.float64, [None, 2, None])
    loss = fl.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=f)
    dense = fl.nn.softmax_cross_entropy_with_logits(labels=dist, logits=fd)
    fv = rng.normal(size=(3, 2, 4))
    lv = rng.integers(0, 4, (3, 2))
    dv = rng.uniform(size=(3, 2, 4))
    got = check_against_interpreter(graph, {"loss": loss, "dense": dense},
                                    {f: fv, lab: lv, fd: fv, dist: dv})
    ls = _np_log_softmax(fv.reshape(6, 4)).reshape(3, 2, 4)
    np.testing.assert_allclose(got["loss"], -np.take_along_axis(ls, lv[..., None], -1)[..., 0])
    np.testing.assert_allclose(got["dense"], -(dv * ls).sum(axis=-1))


def test_l2_loss_and_bias_add_grad(graph, rng):
    fetches, feed = {}, {}
    for dt in (np.float32, np.float64, np.int32):
        name = np.dtype(dt).name
        x = fl.placeholder(dt, [None, 3, 2])
        feed[x] = random_array(rng, (4, 3, 2), dt, -5, 5)
        if dt != np.int32:
            fetches[f"l2/{name}"] = fl.nn.l2_loss(x)
        fetches[f"nhwc/{name}"] = fl.apply_op("BiasAddGrad", [x])
        fetches[f"nchw/{name}"] = fl.apply_op("BiasAddGrad", [x], {"data_format": "NCHW"})
    empty = fl.placeholder(fl.float32, [None, 3])
    feed[empty] = np.zeros((0, 3), np.float32)
    fetches["l2_empty"] = fl.nn.l2_loss(empty)
    fetches["bag_empty"] = fl.apply_op("BiasAddGrad", [empty])
    got = check_against_interpreter(graph, fetches, feed)
    for v in feed.values():
        if v.shape[0] == 0:
            continue
        name = v.dtype.name
        if name != "int32":
            np.testing.assert_allclose(got[f"l2/{name}"], (v.astype(np.float64) ** 2).sum() / 2,
                                       rtol=1e-6)
        np.testing.assert_allclose(got[f"nhwc/{name}"], v.sum(axis=(0, 1)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[f"nchw/{name}"], v.sum(axis=(0, 2)), rtol=1e-5, atol=1e-5)
    assert got["l2_empty"] == 0 and got["bag_empty"].tolist() == [0, 0, 0]
    with pytest.raises(ShapeError, match="rank >= 3"):
        fl.apply_op("BiasAddGrad", [fl.placeholder(fl.float32, [2, 3])], {"data_format": "NCHW"})


def test_bias_add_grad_channels_last_sums_rows_in_order(graph, rng):
    """NHWC sums every row into all channels at once: the same per-channel order (and so the
    same float result) as the interpreter, for many and odd channel counts."""
    fetches, feed = {}, {}
    for shape, dt in (((1280, 1003), np.float32), ((3, 7, 5, 67), np.float32),
                      ((2, 9, 33), np.float64), ((5, 4, 13), np.int64), ((1, 1), np.float32)):
        x = fl.placeholder(dt, [None] + list(shape[1:]))
        feed[x] = random_array(rng, shape, dt, -5, 5)
        fetches[f"{np.dtype(dt).name}/{len(shape)}/{shape[-1]}"] = fl.apply_op("BiasAddGrad", [x])
    got = check_against_interpreter(graph, fetches, feed)
    for (name, value), x in zip(got.items(), feed.values()):
        acc = np.float64 if x.dtype.kind == "f" else x.dtype
        want = x.reshape(-1, x.shape[-1]).sum(axis=0, dtype=acc).astype(x.dtype)
        np.testing.assert_allclose(value, want, rtol=1e-6, err_msg=name)


def test_unsorted_segment_sum(graph, rng):
    fetches, feed = {}, {}
    for dt in (np.float32, np.float64, np.int32, np.int64):
        name = np.dtype(dt).name
        data = fl.placeholder(dt, [None, 3])
        ids = fl.placeholder(fl.int64 if dt == np.int64 else fl.int32, [None])
        num = fl.placeholder(fl.int32, [])
        fetches[f"static/{name}"] = fl.apply_op("UnsortedSegmentSum", [data, ids, fl.constant(4)])
        fetches[f"dynamic/{name}"] = fl.apply_op("UnsortedSegmentSum", [data, ids, num])
        feed[data] = random_array(rng, (6, 3), dt, -5, 5)
        feed[ids] = np.array([0, -1, 3, 3, 1, -5], feed[data].dtype if dt == np.int64 else np.int32)
        feed[num] = np.array(5, np.int32)
    ids2 = fl.placeholder(fl.int32, [None, None])
    data2 = fl.placeholder(fl.float64, [None, None])
    fetches["rank2_ids"] = fl.apply_op("UnsortedSegmentSum", [data2, ids2, fl.constant(3)])
    feed[ids2] = np.array([[2, 0], [-1, 2]], np.int32)
    feed[data2] = np.array([[1.0, 2.0], [4.0, 8.0]])
    got = check_against_interpreter(graph, fetches, feed)
    assert got["dynamic/float64"].shape == (5, 3)
    f64 = [v for v in feed.values() if v.dtype == np.float64 and v.shape == (6, 3)][0]
    want = np.zeros((4, 3))
    for r, s in enumerate([0, -1, 3, 3, 1, -5]):
        if s >= 0:
            want[s] += f64[r]
    np.testing.assert_allclose(got["static/float64"], want)
    assert got["rank2_ids"].tolist() == [2.0, 0.0, 9.0]
    bad = fl.apply_op("UnsortedSegmentSum", [data2, ids2, fl.constant(2)], name="segsum")
    run_both_fail(graph, bad, {data2: feed[data2], ids2: feed[ids2]}, "segsum.*out of range")
    with pytest.raises(ShapeError, match="prefix"):
        fl.apply_op("UnsortedSegmentSum", [fl.placeholder(fl.float32, [3, 2]),
                                           fl.placeholder(fl.int32, [2]), fl.constant(2)])


def test_broadcast_gradient_args(graph):
    s0 = fl.placeholder(fl.int32, [None], name="s0")
    s1 = fl.placeholder(fl.int32, [None], name="s1")
    r0, r1 = fl.apply_op("BroadcastGradientArgs", [s0, s1], name="bga")
    c0, c1 = fl.apply_op("BroadcastGradientArgs", [fl.constant([2, 1, 3], dtype=fl.int64),
                                                   fl.constant([3], dtype=fl.int64)])
    assert c0.shape == (1,) and c1.shape == (2,)
    cases = [([2, 1, 3], [3], [1], [0, 1]), ([1], [1], [0], [0]), ([], [4, 5], [0, 1], []),
             ([4, 1], [1, 5], [1], [0]), ([2, 3], [2, 3], [], [])]
    for a, b, want0, want1 in cases:
        feed = {s0: np.array(a, np.int32), s1: np.array(b, np.int32)}
        got = check_against_interpreter(graph, {"r0": r0, "r1": r1, "c0": c0, "c1": c1}, feed)
        assert got["r0"].tolist() == want0 and got["r1"].tolist() == want1, (a, b)
        assert got["c0"].tolist() == [1] and got["c1"].tolist() == [0, 1]
    run_both_fail(graph, r0, {s0: np.array([2, 3], np.int32), s1: np.array([4], np.int32)},
                  "bga.*[Ii]ncompatible")
    with pytest.raises(ShapeError, match="Incompatible"):
        fl.apply_op("BroadcastGradientArgs", [fl.constant([2]), fl.constant([3])])


def test_dropout(graph, rng):
    x = fl.placeholder(fl.float32, [None, 1000])
    y = fl.nn.dropout(x, rate=0.25, seed=7)
    y2 = fl.nn.dropout(x, keep_prob=0.75, seed=7)
    same = fl.nn.dropout(x, rate=0.0)
    xv = rng.uniform(1, 2, (8, 1000)).astype(np.float32)
    got = check_against_interpreter(graph, {"y": y, "y2": y2}, {x: xv})
    kept = got["y"] != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(got["y"][kept], xv[kept] / np.float32(0.75), rtol=1e-6)
    np.testing.assert_array_equal(got["y"], got["y2"])
    assert same is x or same.name == x.name
    with pytest.raises(ValueError, match="rate"):
        fl.nn.dropout(x, rate=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        fl.nn.dropout(x)


# --- MaxPoolGradGrad -----------------------------------------------------------------------
# (input HW, window, strides, padding)
POOL_CASES = [((5, 5), (2, 2), (2, 2), "VALID"), ((5, 6), (3, 3), (2, 2), "SAME"),
              ((4, 7), (3, 2), (1, 3), "SAME"), ((6, 6), (1, 1), (2, 2), "VALID"),
              ((3, 3), (5, 5), (1, 1), "SAME"), ((5, 5), (2, 3), (3, 2), "VALID")]


def _pool_kw(k, s, pad):
    return dict(ksize=[1, *k, 1], strides=[1, *s, 1], padding=pad)


def _pool_out(size, k, s, pad):
    return -(-size // s) if pad == "SAME" else (size - k + s) // s


def _loop_max_pool_grad_grad(x, gx, k, s, pad):
    """Per output element, gx at the first strict maximum of the window, by plain loops."""
    n, h, w, c = x.shape
    oh, ow = _pool_out(h, k[0], s[0], pad), _pool_out(w, k[1], s[1], pad)
    pt = max((oh - 1) * s[0] + k[0] - h, 0) // 2 if pad == "SAME" else 0
    pl = max((ow - 1) * s[1] + k[1] - w, 0) // 2 if pad == "SAME" else 0
    out = np.zeros((n, oh, ow, c), gx.dtype)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for ch in range(c):
                    best = None
                    for r in range(max(i * s[0] - pt, 0), min(i * s[0] - pt + k[0], h)):
                        for q in range(max(j * s[1] - pl, 0), min(j * s[1] - pl + k[1], w)):
                            if best is None or x[b, r, q, ch] > x[b, best[0], best[1], ch]:
                                best = (r, q)
                    out[b, i, j, ch] = gx[b, best[0], best[1], ch]
    return out


def test_max_pool_grad_grad_reference_is_the_adjoint_of_max_pool_grad(graph, rng):
    """<MaxPoolGrad(x, y, dy), gx> == <dy, MaxPoolGradGrad(x, y, gx)>, and direct loops."""
    x = fl.placeholder(fl.float64, [None, None, None, 3], name="x")
    gx = fl.placeholder(fl.float64, [None, None, None, 3], name="gx")
    fetches, specs = {}, []
    for i, (hw, k, s, pad) in enumerate(POOL_CASES):
        y = fl.nn.max_pool(x, [1, *k, 1], [1, *s, 1], pad)
        dy = fl.placeholder(fl.float64, [None, None, None, 3], name=f"dy{i}")
        fetches[f"dx{i}"] = fl.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=dy,
                                                   **_pool_kw(k, s, pad))
        fetches[f"gg{i}"] = fl.raw_ops.MaxPoolGradGrad(orig_input=x, orig_output=y, grad=gx,
                                                       **_pool_kw(k, s, pad))
        specs.append((dy, hw, k, s, pad))
    with fl.Session(graph=graph, backend="interpreter") as sess:
        for i, (dy, hw, k, s, pad) in enumerate(specs):
            xv = rng.integers(-2, 3, size=(2, *hw, 3)).astype(np.float64)    # many ties
            gv = rng.standard_normal((2, *hw, 3))
            oh, ow = _pool_out(hw[0], k[0], s[0], pad), _pool_out(hw[1], k[1], s[1], pad)
            dv = rng.standard_normal((2, oh, ow, 3))
            got = sess.run({"dx": fetches[f"dx{i}"], "gg": fetches[f"gg{i}"]},
                           {x: xv, gx: gv, dy: dv})
            assert got["gg"].shape == (2, oh, ow, 3)
            np.testing.assert_allclose(np.sum(got["dx"] * gv), np.sum(dv * got["gg"]),
                                       rtol=1e-12, err_msg=str((hw, k, s, pad)))
            np.testing.assert_array_equal(got["gg"], _loop_max_pool_grad_grad(xv, gv, k, s, pad))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_max_pool_grad_grad_against_interpreter(graph, rng, dt):
    """Static and dynamic dims, ties, NaN and -inf, batch 2, 1 and 0."""
    fetches, specs = {}, []
    for i, (hw, k, s, pad) in enumerate(POOL_CASES):
        x = fl.placeholder(dt, [None, *hw, 3] if i % 2 else [None, None, None, 3], name=f"x{i}")
        y = fl.nn.max_pool(x, [1, *k, 1], [1, *s, 1], pad)
        gx = fl.placeholder(dt, [None, *hw, 3], name=f"gx{i}")
        fetches[f"gg{i}"] = fl.raw_ops.MaxPoolGradGrad(orig_input=x, orig_output=y, grad=gx,
                                                       **_pool_kw(k, s, pad))
        specs.append((x, gx, hw))
    static = fl.placeholder(dt, [2, 6, 5, 2], name="static")
    sg = fl.placeholder(dt, [2, 6, 5, 2], name="static_g")
    fetches["static"] = fl.raw_ops.MaxPoolGradGrad(
        orig_input=static, orig_output=fl.nn.max_pool(static, 3, 2, "SAME"), grad=sg,
        **_pool_kw((3, 3), (2, 2), "SAME"))
    assert fetches["static"].shape == (2, 3, 3, 2)
    for n in (2, 1, 0):
        feed = {static: rng.standard_normal((2, 6, 5, 2)).astype(dt),
                sg: rng.standard_normal((2, 6, 5, 2)).astype(dt)}
        for x, gx, hw in specs:
            xv = rng.integers(-3, 4, size=(n, *hw, 3)).astype(dt)
            if n:
                xv[0, 0, 0, 0] = np.nan
                xv[-1, -1, -1, -1] = -np.inf
            feed[x], feed[gx] = xv, rng.standard_normal((n, *hw, 3)).astype(dt)
        got = check_against_interpreter(graph, fetches, feed)
        assert got["gg1"].shape == (n, 3, 3, 3)


def test_max_pool_grad_grad_picks_the_first_maximum():
    x = fl.constant(np.array([[1, 3, 3], [3, 0, 2], [1, 1, 1]], np.float32).reshape(1, 3, 3, 1))
    gx = fl.constant(np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1))
    gg = fl.raw_ops.MaxPoolGradGrad(orig_input=x, orig_output=fl.nn.max_pool(x, 2, 1, "VALID"),
                                    grad=gx, **_pool_kw((2, 2), (1, 1), "VALID"))
    for backend in ("interpreter", "c"):
        with fl.Session(graph=gx.graph, backend=backend) as s:
            assert s.run(gg).reshape(-1).tolist() == [1, 1, 3, 5]


def test_max_pool_grad_grad_shape_errors(graph):
    x = fl.placeholder(fl.float32, [None, None, None, 2], name="x")
    y = fl.nn.max_pool(x, 2, 2, "VALID")
    with pytest.raises(ShapeError, match="grad"):
        fl.raw_ops.MaxPoolGradGrad(orig_input=fl.placeholder(fl.float32, [1, 4, 4, 2]),
                                   orig_output=y, grad=fl.placeholder(fl.float32, [1, 4, 5, 2]),
                                   **_pool_kw((2, 2), (2, 2), "VALID"))
    with pytest.raises(ShapeError, match="orig_output"):
        fl.raw_ops.MaxPoolGradGrad(orig_input=fl.placeholder(fl.float32, [1, 4, 4, 2]),
                                   orig_output=fl.placeholder(fl.float32, [1, 3, 2, 2]),
                                   grad=fl.placeholder(fl.float32, [1, 4, 4, 2]),
                                   **_pool_kw((2, 2), (2, 2), "VALID"))
    gx = fl.placeholder(fl.float32, [None, None, None, 2], name="gx")
    yy = fl.placeholder(fl.float32, [None, None, None, 2], name="yy")
    gg = fl.raw_ops.MaxPoolGradGrad(orig_input=x, orig_output=yy, grad=gx, name="the_gg",
                                    **_pool_kw((2, 2), (2, 2), "VALID"))
    xv = np.zeros((1, 4, 4, 2), np.float32)
    run_both_fail(graph, gg, {x: xv, yy: np.zeros((1, 2, 2, 2), np.float32),
                              gx: np.zeros((1, 4, 3, 2), np.float32)}, "the_gg.*grad")
    run_both_fail(graph, gg, {x: xv, yy: np.zeros((1, 3, 2, 2), np.float32),
                              gx: xv}, "the_gg.*orig_output")


def test_second_derivative_of_max_pool_compiled_equals_interpreter(graph, rng):
    """d/d dy of <MaxPoolGrad(x, y, dy), w>: MaxPoolGradGrad in the graph, run both ways."""
    x = fl.placeholder(fl.float32, [None, 6, 6, 2], name="x")
    dy = fl.placeholder(fl.float32, [None, 3, 3, 2], name="dy")
    w = fl.placeholder(fl.float32, [None, 6, 6, 2], name="w")
    y = fl.nn.max_pool(x, 3, 2, "SAME")
    dx = fl.gradients(y, x, grad_ys=dy)[0]
    gx, gdy = fl.gradients(fl.reduce_sum(dx * w), [x, dy])
    assert "MaxPoolGradGrad" in {n.op for n in graph}
    feed = {x: rng.standard_normal((2, 6, 6, 2)).astype(np.float32),
            dy: rng.standard_normal((2, 3, 3, 2)).astype(np.float32),
            w: rng.standard_normal((2, 6, 6, 2)).astype(np.float32)}
    got = check_against_interpreter(graph, {"gx": gx, "gdy": gdy}, feed)
    assert not got["gx"].any() and got["gdy"].any()
