"""Shape and array ops: compiled C against the numpy interpreter, with empty dims, dims fed at
run time (None), int/float/bool dtypes, negative axes, run-time errors in both backends, and
the shape functions on partially known shapes. Each test builds one graph (one compile)."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import CodegenError, ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError

DTYPES = [(fl.float32, np.float32), (fl.float64, np.float64), (fl.int32, np.int32),
          (fl.int64, np.int64), (fl.bool_, np.bool_)]


def _value(rng, shape, np_dtype):
    if np.dtype(np_dtype) == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.integers(-50, 50, size=shape).astype(np_dtype)


def _fails_in_both(graph, fetch, feed, *needles):
    """Both backends raise a FlowcError naming the node and containing ``needles``."""
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises(FlowcError) as info:
                s.run(fetch, feed)
        text = str(info.value)
        assert f"'{fetch.op.name}'" in text, (backend, text)
        for needle in needles:
            assert needle in text, (backend, text)


# --- Reshape, ExpandDims, Squeeze (views) ------------------------------------------------------
def test_reshape_views_static_and_fed_shapes(graph, rng):
    x = fl.placeholder(fl.float32, [None, 4], name="x")
    b = fl.placeholder(fl.bool_, [None, 2, 3], name="b")
    shape32 = fl.placeholder(fl.int32, [2], name="shape32")
    shape64 = fl.placeholder(fl.int64, [3], name="shape64")
    fetches = {
        "flat": fl.reshape(x, [-1]),
        "cols2": fl.reshape(x, [-1, 2]),
        "rows2": fl.reshape(x, [2, -1]),
        "fed32": fl.reshape(x, shape32),
        "fed64": fl.reshape(x, shape64),
        "bool3": fl.reshape(b, [-1, 3]),
        "chain": fl.squeeze(fl.expand_dims(fl.reshape(x, [-1, 1, 4]), -1), [1, -1]),
        "copy_of_view": fl.reshape(fl.reshape(x, [-1]), [-1, 2]) * 2.0,
    }
    assert fetches["cols2"].shape == (None, 2)
    assert fetches["fed32"].shape == (None, None)
    assert fetches["fed64"].shape == (None, None, None)
    cases = ((2, [-1, 2], [2, 2, -1]), (0, [0, 5], [0, -1, 3]), (3, [6, -1], [3, -1, 1]))
    for rows, s32, s64 in cases:
        xv = rng.standard_normal((rows, 4)).astype(np.float32)
        feed = {x: xv, b: _value(rng, (rows, 2, 3), np.bool_),
                shape32: np.array(s32, np.int32), shape64: np.array(s64, np.int64)}
        got = check_against_interpreter(graph, fetches, feed)
        np.testing.assert_array_equal(got["flat"], xv.reshape(-1))       # a view of the feed
        np.testing.assert_array_equal(got["fed64"].reshape(-1), xv.reshape(-1))
        before = got["flat"].copy()
        xv[...] = 7.0                     # the fetched view does not alias the caller's array
        np.testing.assert_array_equal(got["flat"], before)


def test_reshape_tf_rules_for_zero_sizes(graph):
    x = fl.placeholder(fl.int32, [None, None], name="x")
    fetches = {"keep": fl.reshape(x, [0, -1]), "swap": fl.reshape(x, [-1, 0])}
    got = check_against_interpreter(graph, fetches, {x: np.zeros((0, 6), np.int32)})
    assert got["keep"].shape == (0, 6)       # the -1 is inferred leaving zero sizes out
    assert got["swap"].shape == (6, 0)
    assert fl.reshape(fl.constant(np.zeros((0, 6))), [0, -1]).shape == (0, 6)
    _fails_in_both(graph, fetches["swap"], {x: np.zeros((2, 3), np.int32)}, "6 values")


def test_reshape_bad_shapes_fail_at_run_time(graph):
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    shape = fl.placeholder(fl.int64, [2], name="shape")
    r = fl.reshape(x, shape, name="r")
    xv = np.zeros((4, 3), np.float32)
    _fails_in_both(graph, r, {x: xv, shape: np.array([5, -1])}, "12 values")
    _fails_in_both(graph, r, {x: xv, shape: np.array([-1, -1])}, "Only one input size may be -1")
    _fails_in_both(graph, r, {x: xv, shape: np.array([-2, 6])}, "must be non-negative")
    _fails_in_both(graph, r, {x: xv, shape: np.array([3, 5])}, "12 values")
    _fails_in_both(graph, r, {x: xv, shape: np.array([2**40, 2**40])}, "12 values")
    fixed = fl.reshape(x, [5, -1], name="fixed")
    _fails_in_both(graph, fixed, {x: xv}, "12 values")


def test_expand_dims_and_squeeze(graph, rng):
    cases = {}
    for tf_dtype, np_dtype in DTYPES:
        x = fl.placeholder(tf_dtype, [None, 1, 3], name=f"x_{np.dtype(np_dtype).name}")
        cases[x] = _value(rng, (2, 1, 3), np_dtype)
    x = next(iter(cases))
    fetches = {"e0": fl.expand_dims(x, 0), "e_last": fl.expand_dims(x, -1),
               "e_mid": fl.expand_dims(x, -2), "sq1": fl.squeeze(x, [1]),
               "sq_neg": fl.squeeze(x, -2),
               "sq_expand": fl.squeeze(fl.expand_dims(x, 2), axis=[2, 1])}
    for i, t in enumerate(cases):
        fetches[f"dtype{i}"] = fl.squeeze(fl.expand_dims(t, 3), [1])
    s = fl.placeholder(fl.float32, [2, 1, 1], name="s")
    fetches["all"] = fl.squeeze(s)
    cases[s] = np.ones((2, 1, 1), np.float32)
    assert fetches["sq1"].shape == (None, 3)
    assert fetches["all"].shape == (2,)
    check_against_interpreter(graph, fetches, cases)
    empty = {k: v[:0] if v.shape[0] == 2 and k is not s else v for k, v in cases.items()}
    check_against_interpreter(graph, fetches, empty)


def test_squeeze_checks_dynamic_dims_at_run_time(graph):
    x = fl.placeholder(fl.float32, [None, None], name="x")
    sq = fl.squeeze(x, [1], name="sq")
    check_against_interpreter(graph, {"sq": sq}, {x: np.ones((3, 1), np.float32)})
    _fails_in_both(graph, sq, {x: np.ones((3, 2), np.float32)}, "Can not squeeze dim[1]")
    with pytest.raises(ShapeError, match="squeeze"):
        fl.squeeze(fl.placeholder(fl.float32, [2, 3]), [1])


# --- Transpose -----------------------------------------------------------------------------------
def test_transpose(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3, 4], name="x")
    i = fl.placeholder(fl.int64, [2, None], name="i")
    b = fl.placeholder(fl.bool_, [2, 3, 1, 2], name="b")
    scalar = fl.placeholder(fl.int32, [], name="scalar")
    fetches = {
        "reverse": fl.transpose(x),
        "p021": fl.transpose(x, [0, 2, 1]),
        "p120": fl.transpose(x, [1, 2, 0]),
        "identity": fl.transpose(x, [0, 1, 2]),
        "i64": fl.transpose(i, np.array([1, 0], np.int64)),
        "bool4": fl.transpose(b, [3, 1, 0, 2]),
        "scalar": fl.transpose(scalar, []),
    }
    assert fetches["p120"].shape == (3, 4, None)
    for n in (0, 1, 5):
        check_against_interpreter(graph, fetches, {
            x: rng.standard_normal((n, 3, 4)).astype(np.float32),
            i: _value(rng, (2, n), np.int64), b: _value(rng, (2, 3, 1, 2), np.bool_),
            scalar: np.int32(7)})
    with pytest.raises(ShapeError, match="duplicated"):
        fl.transpose(x, [0, 0, 1])


def test_layout_inputs_fed_at_run_time_compile_per_value_fed(graph):
    # the C code's layout depends on them: the session compiles the step per value fed
    x = fl.placeholder(fl.float32, [2, 3], name="x")
    perm = fl.placeholder(fl.int32, [2], name="perm")
    axis = fl.placeholder(fl.int32, [], name="axis")
    cases = [fl.transpose(x, perm), fl.concat([x, x], axis), fl.gather(x, [0], axis=axis)]
    for p, a in (([1, 0], 1), ([0, 1], 0)):
        feed = {x: np.arange(6, dtype=np.float32).reshape(2, 3), perm: np.array(p, np.int32),
                axis: np.int32(a)}
        with fl.Session(graph=graph, backend="interpreter") as s:
            want = s.run(cases, feed)
        with fl.Session(graph=graph) as s:
            got = s.run(cases, feed)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w)


def test_ranks_above_the_c_runtime_limit_are_a_codegen_error(graph):
    x = fl.placeholder(fl.float32, [None, 1], name="x")
    deep = fl.reshape(x, [1] * 8 + [-1])
    with fl.Session(graph=graph, backend="interpreter") as s:
        assert s.run(deep, {x: np.zeros((3, 1), np.float32)}).shape == (1,) * 8 + (3,)
    with fl.Session(graph=graph) as s:
        with pytest.raises(CodegenError, match="at most 8 dims"):
            s.run(deep, {x: np.zeros((3, 1), np.float32)})


# --- ConcatV2, Split, SplitV, Pack, Unpack -------------------------------------------------------
def test_concat(graph, rng):
    a = fl.placeholder(fl.float64, [None, 2], name="a")
    b = fl.placeholder(fl.float64, [None, 3], name="b")
    c = fl.placeholder(fl.float64, [None, None], name="c")
    i = fl.placeholder(fl.int32, [2, None], name="i")
    z = fl.placeholder(fl.bool_, [None, 2, 2], name="z")
    fetches = {
        "axis1": fl.concat([a, b, c], 1),
        "axis_neg": fl.concat([a, b], -1),
        "axis0": fl.concat([a, a, a], 0),
        "i32_axis0": fl.concat([i, i * 2], 0),
        "i32_axis1": fl.concat([i, i], axis=np.int64(-1)),
        "bool_mid": fl.concat([z, z], 1),
        "single": fl.concat([a], 0),
    }
    assert fetches["axis_neg"].shape == (None, 5)
    for n, m in ((3, 0), (0, 2), (1, 1)):
        check_against_interpreter(graph, fetches, {
            a: rng.standard_normal((n, 2)), b: rng.standard_normal((n, 3)),
            c: rng.standard_normal((n, m)), i: _value(rng, (2, m), np.int32),
            z: _value(rng, (n, 2, 2), np.bool_)})
    mismatched = {a: np.zeros((2, 2)), b: np.zeros((2, 3)), c: np.zeros((3, 1))}
    _fails_in_both(graph, fetches["axis1"], mismatched, "Dimensions of inputs should match")
    with pytest.raises(ShapeError, match="scalars"):
        fl.concat([fl.constant(1.0), fl.constant(2.0)], 0)


def test_split_and_split_v(graph, rng):
    x = fl.placeholder(fl.float32, [None, 6], name="x")
    y = fl.placeholder(fl.int64, [4, None], name="y")
    sizes = fl.placeholder(fl.int32, [3], name="sizes")
    fetches = {}
    for k, t in enumerate(fl.split(x, 3, axis=1)):
        fetches[f"even{k}"] = t
    for k, t in enumerate(fl.split(x, 2, axis=-2)):
        fetches[f"rows{k}"] = t
    for k, t in enumerate(fl.split(x, [1, -1, 2], axis=-1)):
        fetches[f"sizes{k}"] = t
    for k, t in enumerate(fl.split(y, sizes, axis=1)):
        fetches[f"fed{k}"] = t
    for k, t in enumerate(fl.split(y, [0, 4], axis=0)):
        fetches[f"empty_part{k}"] = t
    assert fetches["sizes1"].shape == (None, 3)
    for n, fed in ((4, [1, 2, 2]), (0, [0, -1, 0]), (2, [-1, 3, 2])):
        check_against_interpreter(graph, fetches, {
            x: rng.standard_normal((n, 6)).astype(np.float32),
            y: _value(rng, (4, 5), np.int64), sizes: np.array(fed, np.int32)})
    even = fetches["rows0"]
    _fails_in_both(graph, even, {x: np.zeros((3, 6), np.float32)}, "evenly divide")
    fed0 = fetches["fed0"]
    feed = {y: np.zeros((4, 5), np.int64)}
    _fails_in_both(graph, fed0, {**feed, sizes: np.array([2, 2, 2], np.int32)}, "Determined shape")
    _fails_in_both(graph, fed0, {**feed, sizes: np.array([-1, -1, 2], np.int32)}, "one -1")
    _fails_in_both(graph, fed0, {**feed, sizes: np.array([-3, 6, 2], np.int32)}, "must be >= 0")


def test_pack_and_unpack(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    y = fl.placeholder(fl.float32, [None, 3], name="y")
    b = fl.placeholder(fl.bool_, [2, None], name="b")
    s = fl.placeholder(fl.int64, [], name="s")
    fetches = {"axis0": fl.stack([x, y]), "axis1": fl.stack([x, y, x], axis=1),
               "axis_neg": fl.stack([x, y], axis=-1), "scalars": fl.stack([s, s * 2, 5]),
               "bool": fl.stack([b], axis=2)}
    for k, t in enumerate(fl.unstack(x, axis=1)):
        fetches[f"un_cols{k}"] = t
    for k, t in enumerate(fl.unstack(b, axis=-2)):
        fetches[f"un_bool{k}"] = t
    for k, t in enumerate(fl.unstack(fl.stack([x, y], axis=2), axis=-1)):
        fetches[f"roundtrip{k}"] = t
    assert fetches["axis1"].shape == (None, 3, 3)
    for n in (0, 4):
        got = check_against_interpreter(graph, fetches, {
            x: rng.standard_normal((n, 3)).astype(np.float32),
            y: rng.standard_normal((n, 3)).astype(np.float32),
            b: _value(rng, (2, n), np.bool_), s: np.int64(-3)})
        np.testing.assert_array_equal(got["scalars"], [-3, -6, 5])
    _fails_in_both(graph, fetches["axis0"], {x: np.zeros((2, 3), np.float32),
                                             y: np.zeros((3, 3), np.float32)}, "match")
    z = fl.placeholder(fl.float32, [None, 2], name="z")
    parts = fl.unstack(z, num=2)
    _fails_in_both(graph, parts[0], {z: np.zeros((3, 2), np.float32)}, "num is 2")
    assert fl.unstack(fl.placeholder(fl.float32, [0, 2])) == []


def test_many_equal_parts_are_copied_in_one_loop(graph, rng):
    """Concat, Split, SplitV, Pack and Unpack of many parts of one static size copy them in one
    loop over the parts' pointers (``GROUP_MIN_PARTS``); parts of other sizes stay one copy
    each. Both compute what the interpreter does, and the loop is really emitted."""
    from compiler.codegen.c_ops.array.common import GROUP_MIN_PARTS
    from compiler.codegen.emitter import emit_c
    from compiler.step import make_step_graph, optimize
    n = GROUP_MIN_PARTS + 2
    x = fl.placeholder(fl.float32, [3, n, 2], name="x")
    i = fl.placeholder(fl.int32, [n, 4], name="i")
    channels = fl.unstack(x, axis=1)                     # n parts [3, 2]
    fetches = {
        "concat_mid": fl.concat([fl.expand_dims(c, 1) for c in reversed(channels)], 1),
        "concat_last": fl.concat(channels, -1),
        "concat_first": fl.concat([i, i * 2, i, i + 1, i], 0),
        "concat_sizes": fl.concat([x, x[:, :1], x, x[:, :2], x], 1),     # not one size
        "pack": fl.stack(channels, axis=2),
    }
    for k, t in enumerate(fl.split(i, 4, axis=1)):
        fetches[f"split{k}"] = t
    for k, t in enumerate(fl.split(x, [1] * n, axis=1)):
        fetches[f"split_v{k}"] = t
    for k, t in enumerate(fl.unstack(i, axis=0)):
        fetches[f"unstack{k}"] = t
    got = check_against_interpreter(graph, fetches, {
        x: rng.standard_normal((3, n, 2)).astype(np.float32), i: _value(rng, (n, 4), np.int32)})
    np.testing.assert_array_equal(got["concat_first"][:n], got["concat_first"][2 * n:3 * n])
    step = make_step_graph(graph, [x.output, i.output], [t.output for t in fetches.values()])
    optimize(step)
    source = emit_c(step.graph, step.feeds, step.retvals).source
    assert source.count(f"for (int64_t p = 0; p < {n}; p++)") >= 4
    assert "for (int64_t p = 0; p < 5; p++)" in source          # the concat of 5 int parts


# --- Slice, StridedSlice, __getitem__ ------------------------------------------------------------
def test_slice(graph, rng):
    x = fl.placeholder(fl.float32, [None, 5], name="x")
    b = fl.placeholder(fl.bool_, [None, None, 2], name="b")
    begin = fl.placeholder(fl.int64, [2], name="begin")
    size = fl.placeholder(fl.int64, [2], name="size")
    fetches = {
        "const": fl.slice(x, [1, 1], [2, 3]),
        "to_end": fl.slice(x, [0, 2], [-1, -1]),
        "fed": fl.slice(x, begin, size),
        "fed_begin": fl.slice(x, begin, [1, 2]),
        "empty_box": fl.slice(x, [0, 5], [-1, 0]),
        "bool": fl.slice(b, [0, 1, 0], [-1, -1, 1]),
    }
    assert fetches["const"].shape == (2, 3)
    assert fetches["to_end"].shape == (None, 3)
    for n, bv, sv in ((4, [1, 1], [2, 3]), (3, [2, 0], [-1, 5]), (3, [3, 5], [0, 0])):
        feed = {x: rng.standard_normal((n, 5)).astype(np.float32),
                b: _value(rng, (n, 3, 2), np.bool_), begin: np.array(bv), size: np.array(sv)}
        fetch = dict(fetches)
        if bv[0] > 2:
            del fetch["fed_begin"]
        check_against_interpreter(graph, fetch, feed)
    feed = {x: np.zeros((3, 5), np.float32)}
    _fails_in_both(graph, fetches["fed"], {**feed, begin: np.array([4, 0]), size: np.array([0, 1])},
                   "Expected begin[0] in [0, 3]")
    _fails_in_both(graph, fetches["fed"], {**feed, begin: np.array([1, 1]), size: np.array([3, 1])},
                   "Expected size[0] in [0, 2]")
    _fails_in_both(graph, fetches["const"], {x: np.zeros((2, 5), np.float32)}, "size[0]")
    with pytest.raises(ShapeError):
        fl.slice(x, [0, 4], [1, 2])


def test_getitem_and_strided_slice(graph, rng):
    x = fl.placeholder(fl.float32, [None, 4, 5], name="x")
    v = fl.placeholder(fl.int32, [None], name="v")
    i = fl.placeholder(fl.int32, [], name="i")
    j = fl.placeholder(fl.int64, [], name="j")
    begin = fl.placeholder(fl.int32, [2], name="begin")
    end = fl.placeholder(fl.int32, [2], name="end")
    strides = fl.placeholder(fl.int32, [2], name="strides")
    fetches = {
        "int": x[1], "neg_int": x[-1], "int_int": x[0, 2], "col": x[:, 1],
        "ellipsis_last": x[..., 0], "ellipsis_mid": x[1, ..., 2], "newaxis": x[None, :, None],
        "newaxis_after_ellipsis": x[..., None], "step": x[:, ::2, 1:], "reverse": x[::-1],
        "neg_step": x[:, 3:0:-2, ::-3], "clamped": x[:, 1:100, -100:3], "empty": x[:, 3:1],
        "empty_neg": x[:, 1:3:-1], "tensor_int": x[i], "tensor_i64": x[:, j, 1:],
        "tensor_bound": v[i:], "vec": v[1:-1], "vec_rev": v[::-1], "vec_last": v[-1],
        "huge_step": x[::2**62, ::-(2**62)], "fed_step": v[1::j],
        "fed_all": fl.strided_slice(x, begin, end, strides, begin_mask=0, end_mask=0),
        "masks": fl.strided_slice(x, [1, 9, 0], [2, 1, 0], [1, -1, 1], begin_mask=1,
                                  end_mask=4, shrink_axis_mask=4),
    }
    assert fetches["int_int"].shape == (5,)
    assert fetches["newaxis"].shape == (1, None, 1, 4, 5)
    assert fetches["step"].shape == (None, 2, 4)
    assert fetches["neg_step"].shape == (None, 2, 2)
    assert fetches["empty"].shape == (None, 0, 5)
    assert fetches["masks"].shape == (None, 2)           # x[:2, 9:1:-1, 0]
    cases = ((3, 1, 3, ([0, 3], [2, 0], [1, -1])), (2, -2, -4, ([-1, 0], [-3, 4], [-1, 2])))
    for n, iv, jv, fed in cases:
        check_against_interpreter(graph, fetches, {
            x: rng.standard_normal((n, 4, 5)).astype(np.float32),
            v: _value(rng, (n + 3,), np.int32), i: np.int32(iv), j: np.int64(jv),
            begin: np.array(fed[0], np.int32), end: np.array(fed[1], np.int32),
            strides: np.array(fed[2], np.int32)})
    xv = rng.standard_normal((2, 4, 5)).astype(np.float32)
    got = check_against_interpreter(graph, {"a": x[1, ..., 2], "b": x[::-1, 3:0:-2, None]}, {x: xv})
    np.testing.assert_array_equal(got["a"], xv[1, ..., 2])
    np.testing.assert_array_equal(got["b"], xv[::-1, 3:0:-2, None])
    feed = {x: xv, v: np.arange(5, dtype=np.int32)}
    _fails_in_both(graph, fetches["tensor_int"], {**feed, i: np.int32(2)},
                   "slice index 2 of dimension 0 out of bounds")
    _fails_in_both(graph, fetches["tensor_int"], {**feed, i: np.int32(-3)}, "out of bounds")
    zero_stride = {begin: np.array([0, 0], np.int32), end: np.array([1, 1], np.int32),
                   strides: np.array([1, 0], np.int32)}
    _fails_in_both(graph, fetches["fed_all"], {**feed, **zero_stride},
                   "strides[1] must be non-zero")


def test_getitem_rejects_what_tensorflow_rejects(graph):
    x = fl.placeholder(fl.float32, [3, 4])
    with pytest.raises(TypeError, match="valid indices"):
        x[1.5]
    with pytest.raises(TypeError, match="valid indices"):
        x[fl.placeholder(fl.float32, [])]
    with pytest.raises(TypeError, match="valid indices"):
        x[[0, 1]]
    with pytest.raises(ShapeError, match="out of bounds"):
        x[3]
    with pytest.raises(ShapeError, match="Multiple ellipses"):
        x[..., ...]
    with pytest.raises(ShapeError, match="Index out of range"):
        x[0, 1, 2]


# --- Tile, Pad -----------------------------------------------------------------------------------
def test_tile(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    b = fl.placeholder(fl.bool_, [2, 1, None], name="b")
    s = fl.placeholder(fl.int64, [], name="s")
    multiples = fl.placeholder(fl.int64, [2], name="multiples")
    fetches = {"const": fl.tile(x, [2, 3]), "rows": fl.tile(x, [3, 1]), "zero": fl.tile(x, [0, 2]),
               "fed": fl.tile(x, multiples), "bool3": fl.tile(b, [2, 3, 2]),
               "scalar": fl.tile(s, np.zeros(0, np.int32))}
    assert fetches["zero"].shape == (0, 6)
    for n, m in ((2, [2, 1]), (0, [3, 0]), (1, [1, 4])):
        check_against_interpreter(graph, fetches, {
            x: rng.standard_normal((n, 3)).astype(np.float32), b: _value(rng, (2, 1, n), np.bool_),
            s: np.int64(4), multiples: np.array(m, np.int64)})
    feed = {x: np.zeros((2, 3), np.float32)}
    _fails_in_both(graph, fetches["fed"], {**feed, multiples: np.array([1, -1])},
                   "multiples[1] >= 0")
    _fails_in_both(graph, fetches["fed"], {**feed, multiples: np.array([2**62, 2**3])}, "too large")


def test_pad(graph, rng):
    x = fl.placeholder(fl.float64, [None, 3], name="x")
    i = fl.placeholder(fl.int32, [None], name="i")
    b = fl.placeholder(fl.bool_, [2, 2, 2], name="b")
    paddings = fl.placeholder(fl.int32, [2, 2], name="paddings")
    fetches = {"const": fl.pad(x, [[1, 2], [0, 1]]), "fed": fl.pad(x, paddings),
               "vec": fl.pad(i, [[3, 0]]), "bool": fl.pad(b, [[0, 0], [1, 1], [0, 2]]),
               "none": fl.pad(x, [[0, 0], [0, 0]])}
    assert fetches["const"].shape == (None, 4)
    for n, p in ((2, [[0, 1], [2, 0]]), (0, [[1, 1], [0, 0]]), (3, [[0, 0], [0, 0]])):
        check_against_interpreter(graph, fetches, {
            x: rng.standard_normal((n, 3)), i: _value(rng, (n,), np.int32),
            b: _value(rng, (2, 2, 2), np.bool_), paddings: np.array(p, np.int32)})
    negative = {x: np.zeros((1, 3)), paddings: np.array([[0, -1], [0, 0]], np.int32)}
    _fails_in_both(graph, fetches["fed"], negative, "Paddings must be non-negative")
    with pytest.raises(NotImplementedError):
        fl.pad(x, [[0, 0], [1, 1]], mode="REFLECT")


# --- Fill, zeros/ones, OneHot, Range -------------------------------------------------------------
def test_fill_zeros_ones(graph, rng):
    dims = fl.placeholder(fl.int32, [2], name="dims")
    dims64 = fl.placeholder(fl.int64, [3], name="dims64")
    value = fl.placeholder(fl.float32, [], name="value")
    fetches = {"fill": fl.fill(dims, value), "fill64": fl.fill(dims64, np.int64(-7)),
               "fill_bool": fl.fill(dims, True), "zeros": fl.zeros(dims, fl.int32),
               "ones": fl.ones([2, 3], fl.float64), "zeros_static": fl.zeros([0, 2])}
    likes = {}
    for k, (tf_dtype, np_dtype) in enumerate(DTYPES):
        like = fl.placeholder(tf_dtype, [None, 2], name=f"like{k}")
        likes[like] = np_dtype
        fetches[f"zeros_like{k}"] = fl.zeros_like(like)
        fetches[f"ones_like{k}"] = fl.ones_like(like)
    fetches["ones_like_cast"] = fl.ones_like(fetches["fill"], dtype=fl.int64)
    assert fetches["fill"].shape == (None, None)
    assert fetches["ones"].shape == (2, 3)
    for n, d, d64 in ((3, [2, 3], [1, 0, 4]), (0, [0, 5], [2, 2, 2])):
        feed = {dims: np.array(d, np.int32), dims64: np.array(d64, np.int64),
                value: np.float32(1.5)}
        feed.update({like: _value(rng, (n, 2), np_dtype) for like, np_dtype in likes.items()})
        got = check_against_interpreter(graph, fetches, feed)
        assert got["fill"].shape == tuple(d)
    negative = {dims: np.array([2, -1], np.int32), value: np.float32(0)}
    _fails_in_both(graph, fetches["fill"], negative, "must be >= 0")
    _fails_in_both(graph, fetches["fill64"], {dims64: np.array([2**40, 2**40, 0], np.int64)},
                   "too large")


def test_one_hot(graph, rng):
    idx = fl.placeholder(fl.int32, [None], name="idx")
    idx64 = fl.placeholder(fl.int64, [2, None], name="idx64")
    idx8 = fl.placeholder(fl.uint8, [3], name="idx8")
    depth = fl.placeholder(fl.int32, [], name="depth")
    fetches = {
        "default": fl.one_hot(idx, 4),
        "axis0": fl.one_hot(idx64, 3, axis=0),
        "axis1": fl.one_hot(idx64, 3, on_value=5, off_value=-1, axis=1),
        "axis_last": fl.one_hot(idx64, 3, on_value=2.5, axis=-1, dtype=fl.float64),
        "fed_depth": fl.one_hot(idx, depth, on_value=True, off_value=False),
        "u8": fl.one_hot(idx8, 300, dtype=fl.int64),
        "zero_depth": fl.one_hot(idx, 0),
    }
    assert fetches["axis0"].shape == (3, 2, None)
    assert fetches["fed_depth"].dtype == fl.bool_
    for n, d in ((5, 4), (0, 2), (3, 0)):
        got = check_against_interpreter(graph, fetches, {
            idx: rng.integers(-2, 6, size=n).astype(np.int32),
            idx64: rng.integers(-1, 4, size=(2, n)).astype(np.int64),
            idx8: np.array([0, 255, 17], np.uint8), depth: np.int32(d)})
    assert got["u8"][1, 255] == 1
    _fails_in_both(graph, fetches["fed_depth"], {idx: np.zeros(2, np.int32), depth: np.int32(-1)},
                   "depth must be non-negative")


def test_range(graph):
    a = fl.placeholder(fl.int32, [], name="a")
    b = fl.placeholder(fl.int32, [], name="b")
    d = fl.placeholder(fl.int32, [], name="d")
    fa = fl.placeholder(fl.float32, [], name="fa")
    fb = fl.placeholder(fl.float64, [], name="fb")
    big = fl.placeholder(fl.int64, [], name="big")
    fetches = {"i32": fl.range(a, b, d), "count": fl.range(b), "i64": fl.range(big, big + 10, 3),
               "f32": fl.range(fa, 2.0, 0.25), "f64": fl.range(fb, -1.0, -0.3),
               "mixed": fl.range(0, fa, 1)}
    assert fetches["mixed"].dtype == fl.float32
    for av, bv, dv, fav, fbv, bigv in ((0, 10, 3, 0.5, 1.0, 2**62), (5, -3, -2, 2.0, -1.0, -2**63),
                                       (4, 4, 1, 0.3, 0.1, 0)):
        fetch = dict(fetches)
        if bv < 0:
            del fetch["count"]
        check_against_interpreter(graph, fetch, {a: np.int32(av), b: np.int32(bv), d: np.int32(dv),
                                                 fa: np.float32(fav), fb: np.float64(fbv),
                                                 big: np.int64(bigv)})
    ints = {a: np.int32(0), b: np.int32(5)}
    _fails_in_both(graph, fetches["i32"], {**ints, d: np.int32(0)}, "Requires delta != 0")
    _fails_in_both(graph, fetches["i32"], {**ints, d: np.int32(-1)}, "start >= limit")
    _fails_in_both(graph, fetches["f32"], {fa: np.float32(np.nan)}, "Requires")
    assert fl.range(2, 11, 3).shape == (3,)
    with pytest.raises(ShapeError, match="delta != 0"):
        fl.range(0, 5, 0)


# --- GatherV2 ------------------------------------------------------------------------------------
@pytest.mark.cpu_only
def test_gather(graph, rng):
    p = fl.placeholder(fl.float32, [None, 4], name="p")
    p3 = fl.placeholder(fl.int64, [2, 3, None], name="p3")
    pb = fl.placeholder(fl.bool_, [5], name="pb")
    idx = fl.placeholder(fl.int32, [None], name="idx")
    idx2 = fl.placeholder(fl.int64, [2, 2], name="idx2")
    batch_idx = fl.placeholder(fl.int32, [2, None], name="batch_idx")
    fetches = {
        "rows": fl.gather(p, idx2 % 2),
        "cols": fl.gather(p, [3, 0, 3], axis=1),
        "neg_axis": fl.gather(p, idx2 % 4, axis=-1),
        "scalar_index": fl.gather(p, 2, axis=1),
        "mid": fl.gather(p3, idx2 % 3, axis=1),
        "batch": fl.gather(p3, batch_idx, axis=1, batch_dims=1),
        "batch_neg": fl.gather(p3, batch_idx, axis=-2, batch_dims=-1),
        "bool": fl.gather(pb, idx),
        "empty_idx": fl.gather(p, np.zeros((0, 2), np.int32)),
    }
    assert fetches["mid"].shape == (2, 2, 2, None)
    assert fetches["batch"].shape == (2, None, None)
    for n, k in ((3, 4), (2, 0)):
        check_against_interpreter(graph, fetches, {
            p: rng.standard_normal((n, 4)).astype(np.float32), p3: _value(rng, (2, 3, k), np.int64),
            pb: _value(rng, (5,), np.bool_), idx: rng.integers(0, 5, size=n + 2).astype(np.int32),
            idx2: rng.integers(0, 100, size=(2, 2)),
            batch_idx: rng.integers(0, 3, size=(2, n)).astype(np.int32)})
    feed = {p: np.zeros((3, 4), np.float32)}
    bad = fl.gather(p, idx, name="bad_gather")
    _fails_in_both(graph, bad, {**feed, idx: np.array([0, 2, 7, -1], np.int32)},
                   "indices[2] = 7 is not in [0, 3)")
    _fails_in_both(graph, bad, {**feed, idx: np.array([-1], np.int32)}, "indices[0] = -1")
    bad2 = fl.gather(p, idx2, axis=1, name="bad_gather2")
    _fails_in_both(graph, bad2, {**feed, idx2: np.array([[0, 1], [4, 0]])},
                   "indices[1,0] = 4 is not in [0, 4)")


# --- shape functions on partially known shapes, and the small dsl functions ----------------------
def test_shape_functions_with_unknown_rank_do_not_crash(graph):
    x = fl.placeholder(fl.float32, None, name="x")
    v = fl.placeholder(fl.int32, None, name="v")
    s = fl.placeholder(fl.int32, [None], name="s")
    unknown = {
        "reshape_fed": fl.reshape(x, s), "transpose": fl.transpose(x, [1, 0]),
        "concat": fl.concat([x, x], 0), "split": fl.split(x, 2)[0],
        "splitv": fl.split(x, s, num=2)[1],
        "slice": fl.slice(x, s, s), "pack": fl.stack([x, x]), "squeeze": fl.squeeze(x),
        "expand": fl.expand_dims(x, 0), "tile": fl.tile(x, s), "fill": fl.fill(s, 1.0),
        "one_hot": fl.one_hot(v, 3), "gather": fl.gather(x, v), "getitem": x[1:, 0],
        "zeros_like": fl.zeros_like(x), "range": fl.range(v),
    }
    assert unknown["reshape_fed"].shape.ndims is None
    assert unknown["transpose"].shape == (None, None)
    assert unknown["fill"].shape.ndims is None
    assert unknown["expand"].shape.ndims is None
    assert fl.reshape(x, [2, -1]).shape == (2, None)
    assert fl.pad(x, [[1, 1], [0, 2]]).shape == (None, None)
    assert fl.tile(x, [2, 0]).shape == (None, 0)
    assert fl.unstack(fl.placeholder(fl.float32, [2, None]), axis=0)[0].shape == (None,)
    axis = fl.placeholder(fl.int32, [])
    assert fl.gather(fl.placeholder(fl.float32, [5, 6]), v, axis=axis).shape.ndims is None
    assert fl.gather(fl.placeholder(fl.float32, [5, 6]), s, axis=axis).shape == (None, None)


def test_shape_functions_read_partially_constant_shapes(graph):
    y = fl.placeholder(fl.float32, [None, 6], name="y")
    i = fl.placeholder(fl.int32, [], name="i")
    assert fl.reshape(y, [fl.shape(y)[0], -1, 2]).shape == (None, None, 2)
    assert fl.zeros(fl.shape(y)).shape == (None, 6)
    assert fl.zeros([i, 3]).shape == (None, 3)
    assert fl.tile(y, [i, 2]).shape == (None, 12)
    assert fl.slice(y, [i, 1], [2, -1]).shape == (2, 5)
    assert y[i:, 1:5:2].shape == (None, 2)
    assert y[i].shape == (6,)


def test_shape_errors_name_the_node(graph):
    x = fl.placeholder(fl.float32, [2, 3], name="x")
    with pytest.raises(ShapeError, match="'bad_reshape'.*6 values"):
        fl.reshape(x, [4, -1], name="bad_reshape")
    with pytest.raises(ShapeError, match="evenly divide"):
        fl.split(x, 2, axis=1)
    with pytest.raises(ShapeError, match="out of range"):
        fl.expand_dims(x, 4)
    with pytest.raises(ShapeError, match="out of range"):
        fl.concat([x, x], 2)
    with pytest.raises(ShapeError, match="does not match"):
        fl.stack([x, fl.placeholder(fl.float32, [3, 2])])
    with pytest.raises(ShapeError, match="multiples"):
        fl.tile(x, [1, -1])
    with pytest.raises(ShapeError, match="non-negative"):
        fl.pad(x, [[0, -1], [0, 0]])
    with pytest.raises(ShapeError, match="batch_dims"):
        fl.gather(x, [[0]], axis=0, batch_dims=1)


def test_shape_size_rank_identity(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    fetches = {"shape": fl.shape(x), "shape64": fl.shape(x, out_type=fl.int64), "size": fl.size(x),
               "rank": fl.rank(x), "identity": fl.identity(x), "stop": fl.stop_gradient(x),
               "shape_of_reshape": fl.shape(fl.reshape(x, [fl.shape(x)[0], -1, 1]))}
    xv = rng.standard_normal((4, 3)).astype(np.float32)
    got = check_against_interpreter(graph, fetches, {x: xv})
    np.testing.assert_array_equal(got["shape"], [4, 3])
    assert got["size"] == 12 and got["rank"] == 2
    np.testing.assert_array_equal(got["shape_of_reshape"], [4, 3, 1])


# --- ReverseV2 ---------------------------------------------------------------------------------
def test_reverse_along_any_axes_static_and_fed_dims(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3, 4], name="x")
    b = fl.placeholder(fl.bool_, [2, None], name="b")
    fetches = {"first": fl.reverse(x, [0]), "last": fl.reverse(x, [-1]),
               "two": fl.reverse(x, [2, 0]), "none": fl.reverse(x, []),
               "middle": fl.reverse(x, [1]) * 2.0, "bool": fl.reverse(b, [1])}
    assert fetches["first"].shape == (None, 3, 4)
    for rows in (2, 0, 5):
        xv = rng.standard_normal((rows, 3, 4)).astype(np.float32)
        bv = _value(rng, (2, rows), np.bool_)
        got = check_against_interpreter(graph, fetches, {x: xv, b: bv})
        np.testing.assert_array_equal(got["two"], xv[::-1, :, ::-1])
        np.testing.assert_array_equal(got["last"], xv[:, :, ::-1])
        np.testing.assert_array_equal(got["none"], xv)
        np.testing.assert_array_equal(got["bool"], bv[:, ::-1])


def test_reverse_refuses_repeated_or_out_of_range_axes():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [2, 3])
        with pytest.raises(ShapeError, match="specified more than once"):
            fl.reverse(x, [1, -1])
        with pytest.raises(ShapeError, match="out of range"):
            fl.reverse(x, [2])


def test_reverse_gradient_reverses_back(graph):
    x = fl.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    w = fl.constant(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32))
    y = fl.reduce_sum(fl.reverse(x, [1]) * w)
    (gx,) = fl.gradients(y, [x])
    with fl.Session(graph=graph) as s:
        np.testing.assert_array_equal(s.run(gx), np.array([[3, 2, 1], [6, 5, 4]], np.float32))
