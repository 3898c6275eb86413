"""fl.map_fn, fl.scan, fl.foldl, fl.foldr (TF1's functional ops, one while loop over
TensorArrays) and fl.nest: results against numpy in the interpreter and in compiled C,
nested structures, unknown and empty first dims, TF1's errors, and gradients through them
against finite differences and the unrolled computation."""
import collections

import numpy as np
import pytest

import dsl as fl

BACKENDS = ("interpreter", "c")


def _run_both(g, fetches, feeds=None):
    """``fetches`` run in each backend; yields (backend, results)."""
    for backend in BACKENDS:
        with fl.Session(graph=g, backend=backend) as s:
            yield backend, s.run(fetches, feeds or {})


def _numeric(loss, feeds, x, eps=1e-6):
    base = {k: np.array(v) for k, v in feeds.items()}
    out = np.zeros_like(base[x])
    with fl.Session(graph=loss.graph, backend="interpreter") as s:
        for idx in np.ndindex(out.shape):
            up, down = dict(base), dict(base)
            up[x], down[x] = base[x].copy(), base[x].copy()
            up[x][idx] += eps
            down[x][idx] -= eps
            out[idx] = (s.run(loss, up) - s.run(loss, down)) / (2 * eps)
    return out


# --- map_fn -----------------------------------------------------------------------------------
def test_map_fn_over_an_unknown_first_dim_matches_numpy(graph, rng):
    x = fl.placeholder(fl.f32, [None, 3], name="x")
    sq = fl.map_fn(lambda r: r * r + 1.0, x)
    sums = fl.map_fn(lambda r: fl.reduce_sum(r), x)                 # [n] from [n, 3]
    ints = fl.map_fn(lambda r: fl.cast(fl.argmax(r), fl.i32), x, dtype=fl.i32)
    assert sq.shape.as_list() == [None, 3] and ints.dtype is fl.i32
    for n in (5, 1, 0):                                              # 0: no element at all
        xv = rng.normal(size=(n, 3)).astype(np.float32)
        for backend, got in _run_both(graph, [sq, sums, ints], {x: xv}):
            np.testing.assert_allclose(got[0], xv * xv + 1, rtol=1e-6, err_msg=backend)
            np.testing.assert_allclose(got[1], xv.sum(1), rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(got[2], xv.argmax(1) if n else np.zeros(0))
            assert got[0].shape == (n, 3) and got[1].shape == (n,)


def test_map_fn_over_images_with_a_per_element_conv_and_matmul(graph, rng):
    images = fl.placeholder(fl.f32, [None, 6, 6, 2], name="images")
    kernel = fl.constant(rng.normal(size=(3, 3, 2, 4)).astype(np.float32))
    w = fl.constant(rng.normal(size=(6, 5)).astype(np.float32))

    def per_image(img):                                  # [6, 6, 2] -> ([4, 4, 4], [6, 2, 5])
        conv = fl.nn.conv2d(fl.expand_dims(img, 0), kernel, [1, 1, 1, 1], "VALID")[0]
        rows = fl.matmul(fl.transpose(img, [2, 0, 1]), fl.tile(fl.expand_dims(w, 0), [2, 1, 1]))
        return fl.nn.relu(conv), fl.transpose(rows, [1, 0, 2])

    conv, proj = fl.map_fn(per_image, images, dtype=(fl.f32, fl.f32))
    assert conv.shape.as_list() == [None, 4, 4, 4] and proj.shape.as_list() == [None, 6, 2, 5]
    iv = rng.normal(size=(3, 6, 6, 2)).astype(np.float32)
    kv, wv = (fl.Session(graph=graph, backend="interpreter").run([kernel, w]))
    want_conv = np.zeros((3, 4, 4, 4), np.float32)
    for i in range(4):
        for j in range(4):
            want_conv[:, i, j] = np.einsum("nhwc,hwck->nk", iv[:, i:i + 3, j:j + 3], kv)
    want_proj = np.einsum("nhwc,wk->nhck", iv, wv)
    for backend, got in _run_both(graph, [conv, proj], {images: iv}):
        np.testing.assert_allclose(got[0], np.maximum(want_conv, 0), rtol=1e-4, atol=1e-4,
                                   err_msg=backend)
        np.testing.assert_allclose(got[1], want_proj, rtol=1e-4, atol=1e-4, err_msg=backend)


def test_map_fn_nested_structures_in_and_out(graph):
    a = fl.placeholder(fl.f32, [None, 2], name="a")
    b = fl.placeholder(fl.i32, [None], name="b")
    elems = {"pair": (a, [b]), "scale": a * 10.0}
    out = fl.map_fn(lambda e: {"pair": (e["pair"][0] * 2.0, [e["pair"][1][0] + 1]),
                               "scale": e["scale"] - 1.0}, elems)
    mixed = fl.map_fn(lambda e: (fl.cast(e[1], fl.f32) * e[0][0], [e[0]]), (a, b),
                      dtype=(fl.f32, [fl.f32]))
    assert isinstance(out, dict) and isinstance(out["pair"], tuple)
    assert isinstance(mixed, tuple) and isinstance(mixed[1], list)
    av = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    bv = np.array([7, 8, 9], np.int32)
    for backend, got in _run_both(graph, [out, mixed], {a: av, b: bv}):
        np.testing.assert_array_equal(got[0]["pair"][0], av * 2)
        np.testing.assert_array_equal(got[0]["pair"][1][0], bv + 1)
        np.testing.assert_array_equal(got[0]["scale"], av * 10 - 1)
        np.testing.assert_array_equal(got[1][0], bv * av[:, 0])
        np.testing.assert_array_equal(got[1][1][0], av)


def test_map_fn_errors_in_tf1_words(graph):
    with pytest.raises(TypeError, match="fn must be callable"):
        fl.map_fn(3, fl.zeros([2]))
    with pytest.raises(ValueError, match="Dimensions 3 and 4 are not compatible"):
        fl.map_fn(lambda e: e[0], (fl.zeros([3]), fl.zeros([4])), dtype=fl.f32)
    with pytest.raises(ValueError, match="1\\+ dimensional Tensors, not scalars"):
        fl.map_fn(lambda e: e, fl.constant(1.0))
    with pytest.raises(ValueError, match="does not contain any Tensors"):
        fl.map_fn(lambda e: e, [])
    with pytest.raises(ValueError, match="don't have the same nested structure"):
        fl.map_fn(lambda e: (e, e), fl.zeros([2]))
    with pytest.raises(TypeError, match="don't have the same sequence type"):
        fl.map_fn(lambda e: (e, e), fl.zeros([2]), dtype=[fl.f32, fl.f32])
    with pytest.raises(TypeError, match="TensorArray dtype is f32 but Op is trying to write "
                                        "dtype i32.*dtype="):
        fl.map_fn(lambda e: fl.cast(e, fl.i32), fl.zeros([2]))


def test_map_fn_elems_of_different_lengths_at_run_time_is_an_error(graph):
    a = fl.placeholder(fl.f32, [None], name="a")
    b = fl.placeholder(fl.f32, [None], name="b")
    y = fl.map_fn(lambda e: e[0] + e[1], (a, b), dtype=fl.f32)
    for backend in BACKENDS:
        with fl.Session(graph=graph, backend=backend) as s:
            np.testing.assert_array_equal(s.run(y, {a: [1, 2], b: [3, 4]}), [4, 6])
            for bv in ([3, 4, 5], [3]):                  # longer or shorter than a
                with pytest.raises(fl.FlowcError, match=r"Expected len\(indices\) == "
                                                        r"values.shape\[0\], but saw: 2"):
                    s.run(y, {a: [1, 2], b: bv})


# --- scan -------------------------------------------------------------------------------------
def test_scan_cumulative_product_reverse_and_initializer(graph, rng):
    x = fl.placeholder(fl.f64, [None, 2], name="x")
    cumprod = fl.scan(lambda acc, r: acc * r, x)
    rev = fl.scan(lambda acc, r: acc * r, x, reverse=True)
    with_init = fl.scan(lambda acc, r: acc + fl.reduce_sum(r), x, initializer=fl.constant(10.0,
                                                                                         fl.f64))
    rev_init = fl.scan(lambda acc, r: acc + r, x, initializer=fl.zeros([2], fl.f64),
                       reverse=True)
    xv = rng.uniform(0.5, 1.5, size=(5, 2))
    for backend, got in _run_both(graph, [cumprod, rev, with_init, rev_init], {x: xv}):
        np.testing.assert_allclose(got[0], np.cumprod(xv, 0), rtol=1e-12, err_msg=backend)
        np.testing.assert_allclose(got[1], np.cumprod(xv[::-1], 0)[::-1], rtol=1e-12)
        np.testing.assert_allclose(got[2], 10 + np.cumsum(xv.sum(1)), rtol=1e-12)
        np.testing.assert_allclose(got[3], np.cumsum(xv[::-1], 0)[::-1], rtol=1e-12)
    for backend, got in _run_both(graph, [with_init, rev_init], {x: np.zeros((0, 2))}):
        assert got[0].shape == (0,) and got[1].shape == (0, 2), backend
    for backend in BACKENDS:                      # no initializer and no element: TF1's error
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises(fl.FlowcError, match="index 0 but array size is: 0"):
                s.run(cumprod, {x: np.zeros((0, 2))})


def test_scan_fibonacci_with_a_tuple_initializer(graph):
    elems = fl.constant([1, 0, 0, 0, 0, 0], fl.i64)
    fib = fl.scan(lambda a, _: (a[1], a[0] + a[1]), elems,
                  initializer=(np.int64(0), np.int64(1)))
    assert isinstance(fib, tuple) and fib[0].shape.as_list() == [6]
    for backend, got in _run_both(graph, list(fib)):
        assert got[0].tolist() == [1, 1, 2, 3, 5, 8], backend
        assert got[1].tolist() == [1, 2, 3, 5, 8, 13], backend


def test_scan_rnn_by_hand_matches_numpy_and_its_gradients_finite_differences(graph, rng):
    T, B, D, H = 4, 2, 3, 5
    xs = fl.placeholder(fl.f64, [None, B, D], name="xs")
    wx = fl.placeholder(fl.f64, [D, H], name="wx")
    wh = fl.placeholder(fl.f64, [H, H], name="wh")
    h0 = fl.placeholder(fl.f64, [B, H], name="h0")
    hs = fl.scan(lambda h, x: fl.tanh(fl.matmul(x, wx) + fl.matmul(h, wh)), xs, initializer=h0)
    loss = fl.reduce_sum(hs * hs) + fl.reduce_sum(hs[-1])
    grads = fl.gradients(loss, [xs, wx, wh, h0])
    feeds = {xs: rng.normal(size=(T, B, D)) * 0.5, wx: rng.normal(size=(D, H)) * 0.5,
             wh: rng.normal(size=(H, H)) * 0.5, h0: rng.normal(size=(B, H)) * 0.5}
    h, want = feeds[h0], []
    for t in range(T):
        h = np.tanh(feeds[xs][t] @ feeds[wx] + h @ feeds[wh])
        want.append(h)
    for backend, got in _run_both(graph, [hs] + grads, feeds):
        np.testing.assert_allclose(got[0], np.stack(want), rtol=1e-12, err_msg=backend)
        for var, gv in zip((xs, wx, wh, h0), got[1:]):
            np.testing.assert_allclose(gv, _numeric(loss, feeds, var), rtol=1e-5, atol=1e-7,
                                       err_msg=f"{backend} d/d{var.name}")


# --- foldl / foldr ----------------------------------------------------------------------------
def test_foldl_and_foldr_orders_initializers_and_structures(graph):
    x = fl.placeholder(fl.f64, [None], name="x")
    left = fl.foldl(lambda a, e: a * 10.0 + e, x)
    right = fl.foldr(lambda a, e: a * 10.0 + e, x)
    left_init = fl.foldl(lambda a, e: a * 10.0 + e, x, initializer=fl.constant(9.0, fl.f64))
    right_init = fl.foldr(lambda a, e: a * 10.0 + e, x, initializer=fl.constant(9.0, fl.f64))
    pair = fl.foldl(lambda a, e: {"sum": a["sum"] + e[0], "max": fl.maximum(a["max"], e[1])},
                    (x, x * -1.0), initializer={"sum": fl.constant(0.0, fl.f64),
                                                "max": fl.constant(-100.0, fl.f64)})
    fetches = [left, right, left_init, right_init, pair]
    for backend, got in _run_both(graph, fetches, {x: [1.0, 2.0, 3.0, 4.0]}):
        assert [float(v) for v in got[:4]] == [1234.0, 4321.0, 91234.0, 94321.0], backend
        assert got[4] == {"sum": 10.0, "max": -1.0}, backend
    for backend, got in _run_both(graph, [left_init, right_init], {x: np.zeros(0)}):
        assert [float(v) for v in got] == [9.0, 9.0], backend       # nothing to fold
    for backend in BACKENDS:
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises(fl.FlowcError, match="array size is: 0"):
                s.run(left, {x: np.zeros(0)})


def test_fold_errors(graph):
    with pytest.raises(ValueError, match="don't have the same nested structure"):
        fl.foldl(lambda a, e: (a, a), fl.zeros([2]))
    with pytest.raises(TypeError, match="dtypes of its accumulator"):
        fl.foldr(lambda a, e: fl.cast(a, fl.i32), fl.zeros([2]), initializer=fl.constant(0.0))
    with pytest.raises(TypeError, match="fn must be callable"):
        fl.scan(None, fl.zeros([2]))


# --- gradients and training -------------------------------------------------------------------
def test_gradients_through_map_fn_and_folds_match_finite_differences(graph, rng):
    x = fl.placeholder(fl.f64, [3, 4], name="x")
    w = fl.placeholder(fl.f64, [4, 2], name="w")
    mapped = fl.map_fn(lambda r: fl.sin(fl.matmul(fl.expand_dims(r, 0), w))[0], x)
    folded = fl.foldr(lambda a, r: a * fl.cos(r), x)
    loss = fl.reduce_sum(mapped * mapped) + fl.reduce_sum(folded)
    grads = fl.gradients(loss, [x, w])
    feeds = {x: rng.normal(size=(3, 4)), w: rng.normal(size=(4, 2))}
    for backend, got in _run_both(graph, grads, feeds):
        for var, gv in zip((x, w), got):
            np.testing.assert_allclose(gv, _numeric(loss, feeds, var), rtol=1e-6, atol=1e-8,
                                       err_msg=backend)
    frozen = fl.map_fn(lambda r: r * w[:, 0], x, back_prop=False)
    assert fl.gradients(fl.reduce_sum(frozen), [x, w]) == [None, None]


def test_training_through_map_fn_and_scan_equals_the_unrolled_model(graph, rng):
    """A per-example layer by map_fn and a recurrence by scan, trained by SGD: the loss and
    the variables after each step are those of the same model written without them."""
    xv = rng.normal(size=(4, 3, 2)).astype(np.float64)
    yv = rng.normal(size=(4,)).astype(np.float64)
    init_w = rng.normal(size=(2, 2)) * 0.5
    init_u = rng.normal(size=(2,)) * 0.5

    def build(functional: bool):
        w = fl.Variable(init_w, name="w")
        u = fl.Variable(init_u, name="u")
        x, y = fl.constant(xv), fl.constant(yv)
        if functional:
            per_ex = fl.map_fn(lambda seq: fl.tanh(fl.matmul(seq, w)), x)      # [4, 3, 2]
            run = fl.scan(lambda acc, step: acc * 0.5 + fl.reduce_sum(step * u, 1),
                          fl.transpose(per_ex, [1, 0, 2]), initializer=fl.zeros([4], fl.f64))
            pred = run[-1]
        else:
            acc = fl.zeros([4], fl.f64)
            for t in range(3):
                acc = acc * 0.5 + fl.reduce_sum(fl.tanh(fl.matmul(x[:, t], w)) * u, 1)
            pred = acc
        loss = fl.reduce_mean(fl.square(pred - y))
        return loss, fl.train.GradientDescentOptimizer(0.3).minimize(loss), w, u

    for backend in BACKENDS:
        traces = []
        for functional in (True, False):
            g = fl.Graph()
            with g.as_default():
                loss, train, w, u = build(functional)
                with fl.Session(backend=backend) as s:
                    s.run(fl.global_variables_initializer())
                    losses = [s.run([loss, train])[0] for _ in range(8)]
                    traces.append((losses, s.run([w, u])))
        np.testing.assert_allclose(traces[0][0], traces[1][0], rtol=1e-10, err_msg=backend)
        for a, b in zip(traces[0][1], traces[1][1]):
            np.testing.assert_allclose(a, b, rtol=1e-10)
        assert traces[0][0][-1] < traces[0][0][0]


# --- nest -------------------------------------------------------------------------------------
def test_nest_flatten_pack_map_and_assert():
    Point = collections.namedtuple("Point", "x y")
    s = {"b": [1, (2, 3)], "a": Point(4, None)}
    assert fl.nest.flatten(s) == [4, None, 1, 2, 3]          # dict keys sorted, None a leaf
    packed = fl.nest.pack_sequence_as(s, list("vwxyz"))
    assert packed == {"b": ["x", ("y", "z")], "a": Point("v", "w")}
    assert list(packed) == ["b", "a"] and isinstance(packed["a"], Point)
    assert fl.nest.map_structure(lambda p, q: p * q, [1, (2,)], [3, (4,)]) == [3, (8,)]
    assert fl.nest.is_nested({}) and not fl.nest.is_nested("ab") and fl.nest.flatten(5) == [5]
    with pytest.raises(ValueError, match="Structure had 2 elements, but flat_sequence had 3"):
        fl.nest.pack_sequence_as((1, 2), [1, 2, 3])
    with pytest.raises(ValueError, match="same nested structure"):
        fl.nest.assert_same_structure([1, [2]], [1, 2])
    with pytest.raises(TypeError, match="same sequence type"):
        fl.nest.assert_same_structure([1, 2], (1, 2))
    fl.nest.assert_same_structure([1, 2], (1, 2), check_types=False)
    with pytest.raises(ValueError, match="same set of keys"):
        fl.nest.assert_same_structure({"a": 1}, {"b": 1})


def test_compiled_map_fn_and_scan_are_one_c_loop_each(graph):
    """fn's ops are compiled once, into a C while loop, not once per element."""
    from compiler.codegen.emitter import emit_c
    from compiler.step import make_step_graph, optimize
    x = fl.placeholder(fl.f32, [None, 3], name="x")
    y = fl.map_fn(lambda r: fl.exp(r) * 0.5, x)
    z = fl.scan(lambda a, r: a * r, x)
    step = make_step_graph(graph, [x.output], [y.output, z.output])
    optimize(step)
    src = emit_c(step.graph, step.feeds, step.retvals).source
    assert src.count("while (1) {") == 2
    assert src.count("/* loop frame map/while */") == 1
    assert src.count("/* loop frame scan/while */") == 1


def test_a_variable_fn_makes_is_made_once_outside_the_loop_and_trained(graph, rng):
    """fn calling fl.get_variable (TF1 makes it outside the loop): one variable, initialized
    once, whose gradient sums over the elements; one SGD step matches numpy."""
    x = fl.placeholder(fl.f64, [None, 3], name="x")
    w0 = rng.normal(size=(3, 2))

    def per_row(r):
        w = fl.get_variable("w", initializer=w0)
        return fl.tanh(fl.matmul(fl.expand_dims(r, 0), w))[0]

    y = fl.map_fn(per_row, x)
    loss = fl.reduce_sum(y * y)
    train = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
    assert [v.name for v in fl.trainable_variables()] == ["w:0"]
    xv = rng.normal(size=(4, 3))
    t = np.tanh(xv @ w0)
    want_w = w0 - 0.1 * xv.T @ (2 * t * (1 - t * t))
    for backend in BACKENDS:
        with fl.Session(graph=graph, backend=backend) as s:
            s.run(fl.global_variables_initializer())
            got_loss, _ = s.run([loss, train], {x: xv})
            np.testing.assert_allclose(got_loss, (t * t).sum(), rtol=1e-12, err_msg=backend)
            np.testing.assert_allclose(s.run(fl.trainable_variables()[0]), want_w, rtol=1e-10)


def test_a_tf1_program_over_the_functional_ops_gives_what_tensorflow_gave():
    """tests/data/tf1_functional/functional_program.py (``import dsl as tf``) against what
    TensorFlow 1.x gave for it (recorded by the script beside it), in both backends: the
    values before training, the losses of a few SGD steps, the values after."""
    import os
    import importlib.util
    from repo_paths import TESTS
    folder = os.path.join(TESTS, "data", "tf1_functional")
    spec = importlib.util.spec_from_file_location(
        "functional_program", os.path.join(folder, "functional_program.py"))
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    want = np.load(os.path.join(folder, "functional_program.npz"))
    data = program.inputs()
    for backend in BACKENDS:
        g = fl.Graph()
        with g.as_default():
            images, targets, fetches, train = program.build(data)
            with fl.Session(backend=backend) as s:
                before, losses, after = program.run(s, images, targets, fetches, train, data)
        for k, (b, a) in enumerate(zip(before, after)):
            np.testing.assert_allclose(b, want[f"before{k}"], rtol=1e-10, atol=1e-12,
                                       err_msg=f"{backend} before{k}")
            np.testing.assert_allclose(a, want[f"after{k}"], rtol=1e-10, atol=1e-12,
                                       err_msg=f"{backend} after{k}")
        np.testing.assert_allclose(losses, want["losses"], rtol=1e-10, err_msg=backend)
        assert losses[-1] < losses[0]


def test_map_fn_outputs_whose_shape_varies_by_element(graph):
    """fn's output shape known only at run time: equal shapes stack (also with
    infer_shape=False, whose result keeps fn's rank); unequal ones are TF1's errors."""
    n = fl.placeholder(fl.i32, [None], name="n")
    inferred = fl.map_fn(lambda k: fl.range(k), n)
    free = fl.map_fn(lambda k: fl.range(k), n, infer_shape=False)
    assert free.shape.as_list() == [None, None]
    for backend in BACKENDS:
        with fl.Session(graph=graph, backend=backend) as s:
            for t in (inferred, free):
                assert s.run(t, {n: [2, 2]}).tolist() == [[0, 1], [0, 1]], backend
            with pytest.raises(fl.FlowcError, match="value shape is \\[2\\] which is "
                                                    "incompatible with the TensorArray's inferred"):
                s.run(inferred, {n: [1, 2]})
            with pytest.raises(fl.FlowcError, match="TensorArray has inconsistent shapes"):
                s.run(free, {n: [1, 2]})
