"""Elementwise math ops: compiled C against the numpy interpreter, plus TensorFlow's defined
results on edge cases (wrapping, floor division, casts) and the integer run-time errors.

Each test builds one graph and compiles it once; cases are batched as fetches of that graph.
"""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError, OpError, ShapeError
from dsl.math_ops import elu, relu, relu6, softplus
from oracle import check_against_interpreter, random_array
from runtime.errors import RuntimeExecutionError

INT_TYPES = [(fl.int32, np.int32), (fl.int64, np.int64)]
FLOAT_TYPES = [(fl.float32, np.float32), (fl.float64, np.float64)]

F_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 5.9, 6.0, 6.1, 20.0, -20.0,
             40.0, -40.0, 88.5, -88.5, 1e-30, 1e30, -1e30, np.inf, -np.inf, np.nan]


def _rows(values, width=4):
    """Pad a flat array (repeating its start) into rows of ``width``."""
    values = np.asarray(values)
    pad = (-len(values)) % width
    return np.concatenate([values, values[:pad]]).reshape(-1, width)


def float_rows(rng, np_dtype, low=-8, high=8):
    extra = [1e300, -1e300, 710.0, -710.0] if np_dtype == np.float64 else []
    special = np.array(F_SPECIAL + extra, dtype=np_dtype)
    return _rows(np.concatenate([special, random_array(rng, (16,), np_dtype, low, high)]))


def int_rows(rng, np_dtype, nonzero=False):
    info = np.iinfo(np_dtype)
    special = [info.min, info.max, info.min + 1, info.max - 1, -1, 1, 2, -2, 7, -7, 46341,
               -46341, 3037000500, 255, 256, -129]
    special = [v for v in special if info.min <= v <= info.max]
    values = np.concatenate([np.array(special + [0], np_dtype),
                             random_array(rng, (15,), np_dtype, -100, 100)])
    if nonzero:
        values = values[values != 0]
    return _rows(values)


def run_both(graph, fetch, feed):
    """Run ``fetch`` with the interpreter and with C; returns the two exceptions raised."""
    errors = []
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises((ExecutionError, RuntimeExecutionError)) as info:
                s.run(fetch, feed)
            errors.append(info.value)
    return errors


# --- unary ---------------------------------------------------------------------------------
FLOAT_UNARY = {"neg": fl.negative, "abs": fl.abs, "sign": fl.sign, "exp": fl.exp, "log": fl.log,
               "log1p": fl.log1p, "sqrt": fl.sqrt, "rsqrt": fl.rsqrt, "square": fl.square,
               "reciprocal": fl.reciprocal, "tanh": fl.tanh, "sigmoid": fl.sigmoid,
               "relu": relu, "relu6": relu6, "elu": elu, "softplus": softplus,
               "floor": fl.floor, "ceil": fl.ceil, "round": fl.round}


def test_unary_float_ops(graph, rng):
    fetches, feeds = {}, {}
    for dt, np_dt in FLOAT_TYPES:
        x = fl.placeholder(dt, [None, 4], name=f"x_{dt}")
        feeds[x] = float_rows(rng, np_dt)
        for name, fn in FLOAT_UNARY.items():
            fetches[f"{name}_{dt}"] = fn(x)
    got = check_against_interpreter(graph, fetches, feeds)
    empty = {x: np.zeros((0, 4), v.dtype) for x, v in feeds.items()}
    assert check_against_interpreter(graph, fetches, empty)["exp_f32"].shape == (0, 4)

    x32 = feeds[next(iter(feeds))]
    # half to even: 0.5 -0.5 1.5 2.5 -2.5 3.5
    assert got["round_f32"].ravel()[4:10].tolist() == [0.0, -0.0, 2.0, 2.0, -2.0, 4.0]
    nan_at = np.isnan(x32)
    for name in ("relu", "relu6", "sign", "abs", "softplus", "elu"):
        assert np.isnan(got[f"{name}_f32"][nan_at]).all(), name
    assert np.nanmax(got["relu6_f32"]) == 6.0 and np.nanmin(got["relu_f32"]) == 0.0


def test_unary_integer_ops(graph, rng):
    fetches, feeds = {}, {}
    for dt, np_dt in INT_TYPES + [(fl.int8, np.int8)]:
        x = fl.placeholder(dt, [None, 4], name=f"x_{dt}")
        nz = fl.placeholder(dt, [None, 4], name=f"nz_{dt}")
        feeds[x] = int_rows(rng, np_dt)
        feeds[nz] = int_rows(rng, np_dt, nonzero=True)
        for name in ("neg", "abs", "sign", "square", "relu", "relu6", "round"):
            fn = FLOAT_UNARY[name]
            fetches[f"{name}_{dt}"] = fn(x)
        fetches[f"reciprocal_{dt}"] = fl.reciprocal(nz)
    u = fl.placeholder(fl.uint8, [None], name="u")
    feeds[u] = np.array([0, 1, 7, 16, 200, 255], np.uint8)
    for name in ("square", "relu", "relu6"):
        fetches[f"{name}_u8"] = FLOAT_UNARY[name](u)
    got = check_against_interpreter(graph, fetches, feeds)
    assert check_against_interpreter(graph, fetches, {k: v[:0] for k, v in feeds.items()})[
        "neg_i32"].shape == (0, 4)

    i32_min = np.iinfo(np.int32).min
    x32 = feeds[next(iter(feeds))]
    at_min = x32 == i32_min
    assert (got["neg_i32"][at_min] == i32_min).all() and (got["abs_i32"][at_min] == i32_min).all()
    at = x32 == 46341
    assert (got["square_i32"][at] == np.int32(-2147479015)).all()     # 46341**2 wraps
    assert list(got["square_u8"]) == [0, 1, 49, 0, 64, 1]


# --- binary --------------------------------------------------------------------------------
FLOAT_BINARY = {"add": fl.add, "sub": fl.subtract, "mul": fl.multiply, "div": fl.realdiv,
                "max": fl.maximum, "min": fl.minimum, "pow": fl.pow, "floordiv": fl.floordiv,
                "floormod": fl.floormod, "sqdiff": fl.squared_difference,
                "add_v1": lambda a, b: fl.raw_ops.Add(x=a, y=b)}


def test_binary_float_ops_with_broadcasting(graph, rng):
    fetches, feeds, empties = {}, {}, {}
    for dt, np_dt in FLOAT_TYPES:
        x = fl.placeholder(dt, [None, 4], name=f"x_{dt}")
        y = fl.placeholder(dt, [4], name=f"y_{dt}")               # broadcast along rows
        col = fl.placeholder(dt, [3, 1], name=f"col_{dt}")        # [3,1] op [1,4] -> [3,4]
        row = fl.placeholder(dt, [1, 4], name=f"row_{dt}")
        s = fl.placeholder(dt, [], name=f"s_{dt}")
        dyn_a = fl.placeholder(dt, [None, None], name=f"da_{dt}")  # size-1 dims known at run time
        dyn_b = fl.placeholder(dt, [None], name=f"db_{dt}")
        feeds[x] = float_rows(rng, np_dt)
        feeds[y] = np.array([2.5, -0.0, -3.0, np.inf], np_dt)
        feeds[col] = np.array([[1.5], [-7.0], [np.nan]], np_dt)
        feeds[row] = np.array([[0.5, -2.0, 0.0, 4.0]], np_dt)
        feeds[s] = np.array(-1.5, np_dt)
        feeds[dyn_a] = random_array(rng, (3, 1), np_dt)
        feeds[dyn_b] = random_array(rng, (5,), np_dt)
        for name, fn in FLOAT_BINARY.items():
            fetches[f"{name}_{dt}"] = fn(x, y)
            if dt == fl.float64:             # other loop shapes: once per op is enough
                fetches[f"{name}_{dt}_outer"] = fn(col, row)
                fetches[f"{name}_{dt}_scalar"] = fn(s, x)
        fetches[f"add_{dt}_dyn"] = fl.add(dyn_a, dyn_b)
        fetches[f"pow_{dt}_dyn"] = fl.pow(fl.abs(dyn_a), dyn_b)
        empties.update({x: np.zeros((0, 4), np_dt), dyn_a: np.zeros((0, 1), np_dt)})
    got = check_against_interpreter(graph, fetches, feeds)
    assert got["add_f32_dyn"].shape == (3, 5)
    assert got["floordiv_f64_outer"].shape == (3, 4)
    empty = dict(feeds)
    empty.update(empties)
    assert check_against_interpreter(graph, fetches, empty)["mul_f64"].shape == (0, 4)

    # TensorFlow's floor semantics for floats: floor(x / y), remainder has the sign of y.
    col_row = {k: got[f"{k}_f64_outer"] for k in ("floordiv", "floormod", "max")}
    assert col_row["floordiv"][1].tolist()[:2] == [-14.0, 3.0]    # -7 // 0.5, -7 // -2
    assert col_row["floormod"][0].tolist()[:2] == [0.0, -0.5]     # 1.5 % 0.5, 1.5 % -2
    assert np.isnan(col_row["max"][2]).all()                        # NaN propagates


def test_binary_integer_ops(graph, rng):
    fetches, feeds, empties, cols = {}, {}, {}, {}
    ops = {"add": fl.add, "sub": fl.subtract, "mul": fl.multiply, "max": fl.maximum,
           "min": fl.minimum, "floordiv": fl.floordiv, "floormod": fl.floormod}
    for dt, np_dt in INT_TYPES + [(fl.int8, np.int8), (fl.uint8, np.uint8)]:
        signed = np_dt != np.uint8
        col = fl.placeholder(dt, [None, 1], name=f"col_{dt}")      # col op d -> every pair
        d = fl.placeholder(dt, [4], name=f"d_{dt}")
        rows = fl.placeholder(dt, [None, 4], name=f"rows_{dt}")    # same-shape and scalar cases
        s = fl.placeholder(dt, [], name=f"s_{dt}")
        values = int_rows(rng, np_dt) if signed else np.arange(0, 256, 3, np_dt).reshape(-1, 2)
        feeds[col] = values.reshape(-1, 1)
        feeds[rows] = _rows(values.ravel())
        info = np.iinfo(np_dt)
        feeds[d] = np.array([-1, 3, -7, info.min] if signed else [1, 3, 200, 255], np_dt)
        feeds[s] = np.array(-3 if signed else 7, np_dt)
        empties.update({col: np.zeros((0, 1), np_dt), rows: np.zeros((0, 4), np_dt)})
        cols[dt] = feeds[col][:, 0]
        for name, fn in ops.items():
            fetches[f"{name}_{dt}"] = fn(col, d)
            if dt == fl.int32:               # other loop shapes: once per op is enough
                fetches[f"{name}_{dt}_scalar"] = fn(rows, s)
                if name not in ("floordiv", "floormod"):
                    fetches[f"{name}_{dt}_same"] = fn(rows, rows)
        if signed:
            e = fl.placeholder(dt, [4], name=f"e_{dt}")
            feeds[e] = np.array([0, 1, 7, info.bits - 1], np_dt)
            fetches[f"pow_{dt}"] = fl.pow(col, e)
        if np_dt in (np.int32, np.int64):
            fetches[f"sqdiff_{dt}"] = fl.squared_difference(col, d)
            fetches[f"sqdiff_{dt}_same"] = fl.squared_difference(rows, fl.negative(rows))
    got = check_against_interpreter(graph, fetches, feeds)
    empty = dict(feeds)
    empty.update(empties)
    assert check_against_interpreter(graph, fetches, empty)["pow_i64"].shape == (0, 4)

    i32_min, i32_max = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    row = {int(v): k for k, v in enumerate(cols[fl.int32])}.__getitem__   # value -> row
    assert got["floordiv_i32"][row(i32_min), 0] == i32_min        # MIN // -1 wraps
    assert got["floormod_i32"][row(i32_min), 0] == 0              # MIN % -1
    assert got["add_i32"][row(i32_max), 1] == i32_min + 2         # MAX + 3 wraps
    assert got["sub_i32"][row(i32_min), 1] == i32_max - 2         # MIN - 3 wraps
    assert got["floordiv_i32"][row(-7), 1] == -3 and got["floormod_i32"][row(-7), 1] == 2
    assert got["floordiv_i32"][row(7), 2] == -1 and got["floormod_i32"][row(7), 2] == 0
    assert got["floormod_i32"][row(2), 2] == -5                    # 2 % -7: sign of divisor
    assert got["floordiv_i32"][row(-2), 3] == 0 and got["floormod_i32"][row(-2), 3] == -2
    assert got["pow_i32"][row(7), 2] == 7 ** 7
    assert got["pow_i32"][row(-2), 3] == i32_min                   # (-2) ** 31
    wrapped = np.array(pow(46341, 31, 2 ** 32), np.uint32).view(np.int32)
    assert got["pow_i32"][row(46341), 3] == wrapped
    assert got["pow_i64"][row(-2), 3] == np.iinfo(np.int64).min    # (-2) ** 63
    assert got["pow_i32"][row(0), 0] == 1                          # 0 ** 0
    assert got["mul_i32"][row(i32_max), 3] == i32_min              # MAX * MIN wraps


def test_comparisons_logical_and_select(graph, rng):
    fetches, feeds = {}, {}
    first_float = None
    cmp_ops = {"less": fl.less, "less_equal": fl.less_equal, "greater": fl.greater,
               "greater_equal": fl.greater_equal, "equal": fl.equal, "not_equal": fl.not_equal}
    for dt, np_dt in FLOAT_TYPES + INT_TYPES:
        x = fl.placeholder(dt, [None, 4], name=f"x_{dt}")
        y = fl.placeholder(dt, [None, 1], name=f"y_{dt}")
        if np_dt in (np.float32, np.float64):
            feeds[x] = float_rows(rng, np_dt)
        else:
            feeds[x] = random_array(rng, (10, 4), np_dt, -3, 3)
        feeds[y] = feeds[x][:, 1:2].copy()
        if first_float is None:
            first_float = x
        for name, fn in cmp_ops.items():
            fetches[f"{name}_{dt}"] = fn(x, y)
        cond = fl.greater(x, y)
        fetches[f"select_{dt}"] = fl.where(cond, x, fl.negative(y))
    a = fl.placeholder(fl.bool_, [None, 3], name="a")
    b = fl.placeholder(fl.bool_, [3], name="b")
    feeds[a] = random_array(rng, (5, 3), bool)
    feeds[b] = np.array([True, False, True])
    fetches.update(and_=fl.logical_and(a, b), or_=fl.logical_or(a, b), not_=fl.logical_not(a),
                   xor=fl.logical_xor(a, b), eq_bool=fl.equal(a, b), ne_bool=fl.not_equal(a, b))
    c = fl.placeholder(fl.bool_, [2, 1, 1], name="c")               # 3-way broadcasting
    t = fl.placeholder(fl.int64, [1, None, 1], name="t")
    e = fl.placeholder(fl.int64, [4], name="e")
    feeds[c] = np.array([True, False]).reshape(2, 1, 1)
    feeds[t] = np.arange(3, dtype=np.int64).reshape(1, 3, 1)
    feeds[e] = np.arange(10, 14, dtype=np.int64)
    fetches["select3"] = fl.where(c, t, e)
    fetches["select_bool"] = fl.where_v2(b, a, fl.logical_not(a))     # b broadcasts over rows
    got = check_against_interpreter(graph, fetches, feeds)
    assert got["select3"].shape == (2, 3, 4)
    assert got["select3"][0, 2].tolist() == [2, 2, 2, 2]
    assert got["select3"][1, 0].tolist() == [10, 11, 12, 13]
    x = feeds[first_float]
    nan_rows = np.isnan(x[:, 1])
    assert not got["equal_f32"][nan_rows].any() and got["not_equal_f32"][nan_rows].all()
    assert got["xor"].tolist() == (feeds[a] != feeds[b]).tolist()


def test_equal_with_incompatible_shapes_allowed(graph):
    x = fl.placeholder(fl.int32, [2], name="x")
    y = fl.placeholder(fl.int32, [3], name="y")
    z = fl.placeholder(fl.int32, [1], name="z")
    eq = fl.raw_ops.Equal(x=x, y=y, incompatible_shape_error=False)
    ne = fl.raw_ops.NotEqual(x=x, y=y, incompatible_shape_error=False)
    ok = fl.raw_ops.Equal(x=x, y=z, incompatible_shape_error=False)
    assert eq.shape == () and ok.shape == (2,)
    with pytest.raises(ShapeError):
        fl.equal(x, y)
    feeds = {x: np.array([1, 2], np.int32), y: np.array([1, 2, 3], np.int32),
             z: np.array([2], np.int32)}
    got = check_against_interpreter(graph, {"eq": eq, "ne": ne, "ok": ok}, feeds)
    assert got["eq"].tolist() is False and got["ne"].tolist() is True
    assert got["ok"].tolist() == [False, True]


def test_add_n(graph, rng):
    fetches, feeds, placeholders = {}, {}, {}
    for dt, np_dt in FLOAT_TYPES + INT_TYPES:
        xs = [fl.placeholder(dt, [None, 3], name=f"x{k}_{dt}") for k in range(3)]
        fixed = fl.placeholder(dt, [2, 3], name=f"fixed_{dt}")
        for x in xs:
            feeds[x] = random_array(rng, (2, 3), np_dt)
        feeds[fixed] = random_array(rng, (2, 3), np_dt)
        if np_dt != np.float32 and np_dt != np.float64:
            feeds[xs[0]][0, 0] = np.iinfo(np_dt).max
            feeds[xs[1]][0, 0] = 5
        fetches[f"sum_{dt}"] = fl.add_n(xs + [fixed])
        fetches[f"one_{dt}"] = fl.add_n([xs[0]])
        assert fetches[f"sum_{dt}"].shape == (2, 3)
        placeholders[dt] = xs + [fixed]
    got = check_against_interpreter(graph, fetches, feeds)
    x0, _, x2, fx = (feeds[t] for t in placeholders[fl.int32])
    assert got["sum_i32"][0, 0] == np.int32(np.iinfo(np.int32).min + 4 + x2[0, 0] + fx[0, 0])
    np.testing.assert_array_equal(got["one_i32"], x0)

    bad = dict(feeds)
    bad[placeholders[fl.float32][1]] = np.zeros((3, 3), np.float32)
    errs = run_both(graph, fetches, bad)
    assert all("AddN" in str(e) or "differs" in str(e) for e in errs), errs


# --- Cast ----------------------------------------------------------------------------------
CAST_TYPES = [(fl.float32, np.float32), (fl.float64, np.float64), (fl.int32, np.int32),
              (fl.int64, np.int64), (fl.int8, np.int8), (fl.uint8, np.uint8), (fl.bool_, bool)]

CAST_FLOATS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, -2.7, 2.7, 127.9, 128.0, -128.5,
               -129.0, 255.9, 256.0, -1.0, 3e9, -3e9, 2147483520.0, 2147483648.0, -2147483648.0,
               -2147483904.0, 9.2233720368547758e18, -9.2233720368547758e18, 1e19, -1e19, 1e30]


def _cast_source(np_dt):
    if np_dt == bool:
        return np.array([True, False, True, False])
    if np.dtype(np_dt).kind == "f":
        return np.array(CAST_FLOATS, np_dt)
    info = np.iinfo(np_dt)
    return np.array([info.min, info.max, -1, 0, 1, 127, 128, 255, 256, -129, 2**31, 2**40 + 3]
                    , np.int64).astype(np_dt)


def test_cast_all_pairs(graph):
    fetches, feeds = {}, {}
    for src, src_np in CAST_TYPES:
        if src in (fl.int8, fl.uint8):       # as sources they add nothing int32 does not
            continue
        x = fl.placeholder(src, [None], name=f"x_{src}")
        feeds[x] = _cast_source(src_np)
        for dst, _ in CAST_TYPES:
            fetches[f"{src}_to_{dst}"] = fl.raw_ops.Cast(x=x, DstT=dst)
    wide = fl.placeholder(fl.float64, [None], name="wide")
    one_plus = 1.0 + 2.0 ** -23 - 2.0 ** -30           # rounds up to 1 + 2**-23, truncates to 1
    feeds[wide] = np.array([one_plus, -one_plus, np.nan, np.inf, 1e300, 0.1], np.float64)
    fetches["truncate"] = fl.raw_ops.Cast(x=wide, DstT=fl.float32, Truncate=True)
    fetches["rounded"] = fl.cast(wide, fl.float32)
    got = check_against_interpreter(graph, fetches, feeds)
    assert check_against_interpreter(graph, fetches, {k: v[:0] for k, v in feeds.items()})[
        "f32_to_i32"].shape == (0,)

    f2i = got["f64_to_i32"].tolist()
    i32 = np.iinfo(np.int32)
    assert f2i[:3] == [0, i32.max, i32.min]                       # NaN -> 0, +-inf saturate
    assert f2i[5:8] == [0, 0, -2]                                 # truncation toward zero
    assert f2i[16:22] == [i32.max, i32.min, 2147483520, i32.max, i32.min, i32.min]
    u8 = got["f64_to_u8"].tolist()
    assert u8[:3] == [0, 255, 0] and u8[13:15] == [255, 255] and u8[15] == 0
    assert got["f32_to_bool"].tolist()[:5] == [True, True, True, False, False]
    assert got["i64_to_i8"].tolist()[:2] == [0, -1]               # integer casts wrap
    assert got["bool_to_f32"].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert got["truncate"][0] == np.float32(1.0) and got["rounded"][0] == np.float32(1 + 2 ** -23)
    assert got["truncate"][1] == np.float32(-1.0) and np.isnan(got["truncate"][2])


def test_cast_to_same_dtype_is_identity(graph):
    x = fl.placeholder(fl.float32, [3])
    assert fl.cast(x, fl.float32) is x
    assert fl.cast(x, "int32").op.type == "Cast"


# --- run-time errors -----------------------------------------------------------------------
def test_integer_division_errors_name_the_node(graph):
    x = fl.placeholder(fl.int32, [None], name="x")
    d1 = fl.placeholder(fl.int32, [None], name="d1")
    d2 = fl.placeholder(fl.int64, [1], name="d2")
    e = fl.placeholder(fl.int32, [None], name="e")
    r = fl.placeholder(fl.int32, [None], name="r")
    u = fl.placeholder(fl.uint8, [None], name="u")
    fetches = {"fdiv": fl.floordiv(x, d1, name="fdiv"),
               "fmod": fl.floormod(fl.cast(x, fl.int64), d2, name="fmod"),
               "pow": fl.pow(x, e, name="ipow"), "recip": fl.reciprocal(r, name="recip"),
               "umod": fl.floormod(fl.cast(x, fl.uint8), u, name="umod")}
    good = {x: np.array([5, -5, 7], np.int32), d1: np.array([2, -2, 3], np.int32),
            d2: np.array([3], np.int64), e: np.array([0, 2, 3], np.int32),
            r: np.array([1, -1, 5], np.int32), u: np.array([3, 4, 5], np.uint8)}
    got = check_against_interpreter(graph, fetches, good)
    assert got["fdiv"].tolist() == [2, 2, 2] and got["fmod"].tolist() == [2, 1, 1]
    assert got["recip"].tolist() == [1, -1, 0]

    cases = [(d1, np.array([2, 0, 3], np.int32), "fdiv", "Integer division by zero"),
             (d2, np.array([0], np.int64), "fmod", "Integer division by zero"),
             (e, np.array([0, -1, 3], np.int32), "ipow", "negative integer powers"),
             (r, np.array([1, 0, 5], np.int32), "recip", "Integer division by zero"),
             (u, np.array([3, 0, 5], np.uint8), "umod", "Integer division by zero")]
    for placeholder, value, node, message in cases:
        feed = dict(good)
        feed[placeholder] = value
        interp, compiled = run_both(graph, fetches, feed)
        assert interp.node_name == node and message in str(interp)
        assert compiled.node == node and message in str(compiled)

    # A zero divisor that no output element uses is not an error (as in TensorFlow).
    empty = dict(good)
    empty.update({x: np.zeros((0,), np.int32), d2: np.array([0], np.int64)})
    for k in (d1, e, r, u):
        empty[k] = np.zeros((0,), good[k].dtype)
    assert check_against_interpreter(graph, fetches, empty)["fmod"].shape == (0,)


def test_dynamic_broadcast_mismatch_is_a_runtime_error(graph):
    x = fl.placeholder(fl.float32, [None], name="x")
    y = fl.placeholder(fl.float32, [None], name="y")
    z = fl.add(x, y, name="sum")
    ones = {x: np.ones(3, np.float32), y: np.ones(1, np.float32)}
    ok = check_against_interpreter(graph, [z], ones)
    assert ok["0"].tolist() == [2.0, 2.0, 2.0]
    interp, compiled = run_both(graph, z, {x: np.ones(3, np.float32), y: np.ones(4, np.float32)})
    assert compiled.node == "sum" and "broadcast" in str(compiled)
    assert interp.node_name == "sum"


# --- shapes and types ----------------------------------------------------------------------
def test_shape_inference_with_partial_shapes(graph):
    unknown = fl.placeholder(fl.float32, None)
    a = fl.placeholder(fl.float32, [None, 3])
    b = fl.placeholder(fl.float32, [4, 1])
    c = fl.placeholder(fl.float32, [None, None])
    assert fl.add(unknown, a).shape.ndims is None
    assert fl.exp(unknown).shape.ndims is None and fl.cast(unknown, fl.int32).shape.ndims is None
    assert fl.add(a, b).shape == (4, 3)
    assert fl.multiply(a, c).shape == (None, 3)
    assert fl.maximum(c, 2.0).shape == (None, None)
    assert fl.less(a, b).dtype == fl.bool_ and fl.less(a, b).shape == (4, 3)
    assert fl.where(fl.less(a, 0.0), b, 1.0).shape == (4, 3)
    assert fl.add_n([a, c, fl.placeholder(fl.float32, [2, None])]).shape == (2, 3)
    assert fl.raw_ops.Equal(x=unknown, y=a, incompatible_shape_error=False).shape.ndims is None
    assert fl.cast(a, fl.int64).dtype == fl.int64
    with pytest.raises(ShapeError, match="broadcast"):
        fl.add(a, fl.placeholder(fl.float32, [5]))
    with pytest.raises(ShapeError):
        fl.add_n([a, fl.placeholder(fl.float32, [2, 4])])
    with pytest.raises(ShapeError):
        fl.where(fl.placeholder(fl.bool_, [2]), a, fl.placeholder(fl.float32, [3, 3]))


def test_type_sets_follow_tensorflow(graph):
    i = fl.placeholder(fl.int32, [2])
    f = fl.placeholder(fl.float32, [2])
    b = fl.placeholder(fl.bool_, [2])
    u = fl.placeholder(fl.uint8, [2])
    for bad in (lambda: fl.sqrt(i), lambda: fl.exp(i), lambda: fl.floor(i),
                lambda: fl.raw_ops.RealDiv(x=i, y=i), lambda: fl.logical_and(f, f),
                lambda: fl.logical_not(i), lambda: fl.negative(u), lambda: fl.abs(b),
                lambda: fl.add(b, b), lambda: fl.less(b, b), lambda: fl.add(i, f),
                lambda: fl.pow(u, u), lambda: fl.where(i, f, f)):
        with pytest.raises((OpError, TypeError)):
            bad()
    assert fl.round(i).dtype == fl.int32 and relu(u).dtype == fl.uint8
    assert fl.equal(b, b).dtype == fl.bool_ and fl.truediv(i, i).dtype == fl.float64
    assert fl.divide(fl.placeholder(fl.int8, [2]), 2).dtype == fl.float32


# --- operator overloads --------------------------------------------------------------------
def test_operator_overloads(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    y = fl.placeholder(fl.float32, [3], name="y")
    i = fl.placeholder(fl.int32, [None, 3], name="i")
    p = fl.placeholder(fl.bool_, [None, 3], name="p")
    q = fl.placeholder(fl.bool_, [3], name="q")
    cases = {
        "add": (x + y, "AddV2"), "radd": (2 + x, "AddV2"), "sub": (x - 1, "Sub"),
        "rsub": (1 - x, "Sub"), "mul": (x * y, "Mul"), "rmul": (3 * x, "Mul"),
        "div": (x / y, "RealDiv"), "rdiv": (1 / x, "RealDiv"), "floordiv": (x // y, "FloorDiv"),
        "rfloordiv": (7.0 // x, "FloorDiv"), "mod": (x % y, "FloorMod"),
        "rmod": (5.0 % x, "FloorMod"), "pow": (x ** 2, "Pow"), "rpow": (2 ** x, "Pow"),
        "neg": (-x, "Neg"), "abs": (abs(x), "Abs"), "lt": (x < y, "Less"),
        "le": (x <= 1, "LessEqual"), "gt": (x > y, "Greater"), "ge": (x >= y, "GreaterEqual"),
        "rlt": (1 < x, "Greater"), "and": (p & q, "LogicalAnd"), "rand": (True & p, "LogicalAnd"),
        "or": (p | q, "LogicalOr"), "xor": (p ^ q, "LogicalAnd"), "invert": (~p, "LogicalNot"),
        "idiv": (i / 2, "RealDiv"), "ifloordiv": (i // 2, "FloorDiv"), "imod": (i % 3, "FloorMod"),
        "list": ([1, 2, 3] + x, "AddV2"), "array": (np.float32(2) * x, "Mul"),
    }
    for name, (t, op) in cases.items():
        assert t.op.type == op, name
    assert cases["idiv"][0].dtype == fl.float64 and cases["add"][0].dtype == fl.float32
    feeds = {x: random_array(rng, (4, 3), np.float32, 0.5, 4),
             y: np.array([1.5, -2.0, 3.0], np.float32),
             i: random_array(rng, (4, 3), np.int32, -9, 9), p: random_array(rng, (4, 3), bool),
             q: np.array([True, False, True])}
    got = check_against_interpreter(graph, {k: t for k, (t, _) in cases.items()}, feeds)
    xv, yv, iv = feeds[x], feeds[y], feeds[i]
    np.testing.assert_allclose(got["rsub"], 1 - xv, rtol=1e-6)
    np.testing.assert_allclose(got["rpow"], 2 ** xv, rtol=1e-5)
    np.testing.assert_array_equal(got["imod"], iv % 3)
    np.testing.assert_array_equal(got["ifloordiv"], iv // 2)
    np.testing.assert_array_equal(got["xor"], feeds[p] ^ feeds[q])
    np.testing.assert_allclose(got["idiv"], iv / 2)

    # == and != stay identity (TensorFlow 1.x), so tensors remain usable as dict keys.
    assert (x == x) is True and (x == y) is False and (x != y) is True
    assert {x: 1}[x] == 1


def test_matmul_operator(graph, rng):
    linalg = pytest.importorskip("dsl.linalg_ops")
    if not hasattr(linalg, "matmul"):
        pytest.skip("dsl.linalg_ops.matmul is not written yet")
    a = fl.placeholder(fl.float32, [2, 3])
    b = fl.placeholder(fl.float32, [3, 4])
    assert (a @ b).op.type == "MatMul" and (a @ b).shape == (2, 4)
    assert b.__rmatmul__(np.ones((5, 3), np.float32)).shape == (5, 4)
