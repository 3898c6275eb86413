"""TF1's array and linear-algebra functions (``fl.broadcast_to``, ``fl.matrix_band_part``,
``fl.matrix_diag``..., ``fl.eye``, ``fl.linspace``, ``fl.trace``, ``fl.tensordot``,
``fl.to_float``..., ``fl.meshgrid``, ``fl.norm``) and the ``fl.math`` / ``fl.linalg``
namespaces: results against numpy in both backends, and TF1's errors for bad arguments."""
import numpy as np
import pytest

import dsl as fl

BACKENDS = ("interpreter", "c")


def run_both(fetches, feeds):
    """The fetches' values from each backend (the data are fed, so the C side computes)."""
    out = {}
    for backend in BACKENDS:
        with fl.Session(backend=backend) as s:
            out[backend] = s.run(fetches, feeds)
    return out


def assert_both(fetches, feeds, want, rtol=1e-6):
    got = run_both(fetches, feeds)
    for backend in BACKENDS:
        for name, w in want.items():
            np.testing.assert_allclose(got[backend][name], w, rtol=rtol, atol=1e-6,
                                       err_msg=f"{backend}: {name}")


def test_broadcast_to_and_linspace(graph, rng):
    x = fl.placeholder(fl.float32, [None, 1])
    v = rng.normal(size=(3, 1)).astype(np.float32)
    n = fl.placeholder(fl.int32, [])
    fetches = {"b": fl.broadcast_to(x, [2, 3, 4]),
               "b_dyn": fl.broadcast_to(x, fl.shape(x) * [1, 4]),
               "lin": fl.linspace(-1.0, 2.0, n), "lin1": fl.lin_space(3.0, 5.0, 1),
               "lin64": fl.linspace(fl.constant(0.0, fl.float64), 1.0, 5)}
    assert fetches["b"].shape.as_list() == [2, 3, 4]
    want = {"b": np.broadcast_to(v, (2, 3, 4)), "b_dyn": np.broadcast_to(v, (3, 4)),
            "lin": np.linspace(-1, 2, 7), "lin1": [3.0], "lin64": np.linspace(0, 1, 5)}
    assert_both(fetches, {x: v, n: 7}, want)
    w = fl.placeholder(fl.float32, [None])
    bad = fl.broadcast_to(w, [2, 2])
    for backend in BACKENDS:
        with fl.Session(backend=backend) as s:
            with pytest.raises(fl.InvalidArgumentError, match="broadcast"):
                s.run(bad, {w: np.ones(3, np.float32)})
            with pytest.raises(fl.InvalidArgumentError, match="num > 0"):
                s.run(fetches["lin"], {n: 0})


def test_band_part_and_the_diagonal_functions(graph, rng):
    x = fl.placeholder(fl.float64, [None, None, None])
    d = fl.placeholder(fl.float64, [None, None])
    xv, dv = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 3))
    fetches = {
        "band": fl.matrix_band_part(x, 1, 0), "lband": fl.linalg.band_part(x, -1, 0),
        "diag": fl.matrix_diag(d), "linalg_diag": fl.linalg.diag(d, k=1),
        "part": fl.matrix_diag_part(x), "part_k": fl.linalg.diag_part(x, k=-1),
        "set": fl.matrix_set_diag(x, d), "tdiag": fl.diag(d), "tpart": fl.diag_part(fl.diag(d)),
        "trace": fl.trace(x[:, :3, :]), "mt": fl.linalg.transpose(x),
    }
    set_want = xv.copy()
    for i in range(3):
        set_want[:, i, i] = dv[:, i]
    diag_k1 = np.zeros((2, 4, 4))
    for i in range(3):
        diag_k1[:, i, i + 1] = dv[:, i]
    want = {
        "band": np.tril(np.triu(xv, -1), 0), "lband": np.tril(xv),
        "diag": np.stack([np.diag(r) for r in dv]), "linalg_diag": diag_k1,
        "part": np.diagonal(xv, axis1=1, axis2=2), "part_k": np.diagonal(xv, -1, 1, 2),
        "set": set_want, "tdiag": np.diag(dv.reshape(-1)).reshape(2, 3, 2, 3), "tpart": dv,
        "trace": np.trace(xv[:, :3, :], axis1=1, axis2=2), "mt": np.swapaxes(xv, 1, 2),
    }
    assert_both(fetches, {x: xv, d: dv}, want)


def test_eye_with_batch_shape_and_columns(graph):
    want = {"sq": np.eye(3), "rect": np.eye(2, 4), "batch": np.broadcast_to(np.eye(3, 2),
                                                                           (2, 1, 3, 2))}
    fetches = {"sq": fl.eye(3, dtype=fl.float64), "rect": fl.linalg.eye(2, 4),
               "batch": fl.eye(3, 2, batch_shape=[2, 1], dtype=fl.int32)}
    assert fetches["batch"].dtype == fl.int32
    assert fetches["batch"].shape.as_list() == [2, 1, 3, 2]
    n = fl.placeholder(fl.int32, [])
    fetches["dyn"] = fl.eye(n) + fl.zeros([3, 3])
    want["dyn"] = np.eye(3)
    assert_both(fetches, {n: 3}, want)
    with pytest.raises(TypeError, match="positive integer"):
        fl.eye(2.5)


@pytest.mark.parametrize("static", [True, False])
def test_tensordot_int_and_pair_axes(graph, rng, static):
    av, bv = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 3, 5))
    a = fl.placeholder(fl.float64, av.shape if static else [None] * 3)
    b = fl.placeholder(fl.float64, bv.shape if static else [None] * 3)
    fetches = {"one": fl.tensordot(a, b, 1), "pairs": fl.tensordot(a, b, [[1, 2], [1, 0]]),
               "ints": fl.tensordot(a, b, (2, 0)), "zero": fl.tensordot(a, b[:, 0, 0], 0),
               "linalg": fl.linalg.tensordot(a, b, axes=[[-1], [0]])}
    want = {"one": np.tensordot(av, bv, 1), "pairs": np.tensordot(av, bv, [[1, 2], [1, 0]]),
            "ints": np.tensordot(av, bv, (2, 0)), "zero": np.tensordot(av, bv[:, 0, 0], 0),
            "linalg": np.tensordot(av, bv, [[2], [0]])}
    if static:
        assert fetches["pairs"].shape.as_list() == [2, 5]
    assert_both(fetches, {a: av, b: bv}, want, rtol=1e-10)
    with pytest.raises(ValueError, match="at least 0"):
        fl.tensordot(a, b, -1)
    with pytest.raises(ValueError, match="Different number of contraction axes"):
        fl.tensordot(a, b, [[1, 2], [0]])
    with pytest.raises(ValueError, match="integer or have length 2"):
        fl.tensordot(a, b, [[1], [0], [2]])


def test_casts_and_meshgrid(graph):
    x = fl.placeholder(fl.float32, [None])
    xv = np.array([1.7, -2.2, 3.0], np.float32)
    casts = {"f": fl.to_float(fl.to_int32(x)), "d": fl.to_double(x), "i64": fl.to_int64(x),
             "bf": fl.to_float(fl.to_bfloat16(x))}
    assert casts["d"].dtype == fl.float64 and casts["i64"].dtype == fl.int64
    assert casts["d"].op.name == "ToDouble"
    y = fl.placeholder(fl.float32, [None])
    yv = np.array([10.0, 20.0], np.float32)
    zv = np.array([0.5, 1.5, 2.5, 3.5], np.float32)
    z = fl.constant(zv)
    xy = fl.meshgrid(x, y, z)
    ij = fl.meshgrid(x, y, z, indexing="ij")
    fetches = dict(casts, **{f"xy{i}": t for i, t in enumerate(xy)},
                   **{f"ij{i}": t for i, t in enumerate(ij)})
    want = {"f": [1, -2, 3], "d": xv, "i64": [1, -2, 3], "bf": [1.703125, -2.203125, 3.0]}
    for i, t in enumerate(np.meshgrid(xv, yv, zv)):
        want[f"xy{i}"] = t
    for i, t in enumerate(np.meshgrid(xv, yv, zv, indexing="ij")):
        want[f"ij{i}"] = t
    assert_both(fetches, {x: xv, y: yv}, want)
    assert fl.meshgrid() == []
    with pytest.raises(ValueError, match="'xy' or 'ij'"):
        fl.meshgrid(x, indexing="yx")
    with pytest.raises(TypeError, match="invalid keyword"):
        fl.meshgrid(x, sparse=True)


def test_norm_vector_and_matrix_ords(graph, rng):
    xv = rng.normal(size=(2, 3, 4))
    x = fl.placeholder(fl.float64, [None, None, None])
    fetches = {
        "all": fl.norm(x), "e_axis": fl.norm(x, axis=1), "l1": fl.norm(x, ord=1, axis=-1),
        "inf": fl.norm(x, ord=np.inf, axis=2, keepdims=True), "p3": fl.norm(x, ord=3, axis=0),
        "fro": fl.linalg.norm(x, ord="fro", axis=[1, 2]),
        "m1": fl.norm(x, ord=1, axis=(1, 2)), "minf": fl.norm(x, ord=np.inf, axis=(-2, -1),
                                                              keep_dims=True),
    }
    want = {
        "all": np.linalg.norm(xv.reshape(-1)), "e_axis": np.linalg.norm(xv, axis=1),
        "l1": np.abs(xv).sum(-1), "inf": np.abs(xv).max(2, keepdims=True),
        "p3": (np.abs(xv) ** 3).sum(0) ** (1 / 3), "fro": np.linalg.norm(xv, "fro", (1, 2)),
        "m1": np.linalg.norm(xv, 1, (1, 2)), "minf": np.linalg.norm(xv, np.inf, (1, 2),
                                                                   keepdims=True),
    }
    assert_both(fetches, {x: xv}, want, rtol=1e-10)
    with pytest.raises(ValueError, match="supported vector norm"):
        fl.norm(x, ord="fro")
    with pytest.raises(ValueError, match="supported matrix norm"):
        fl.norm(x, ord=3, axis=[1, 2])
    with pytest.raises(ValueError, match="2 unique integers"):
        fl.norm(x, axis=[1, 1])
    with pytest.raises(NotImplementedError, match="Svd"):
        fl.norm(x, ord=2, axis=[1, 2])


def test_math_and_linalg_namespaces_alias_the_functions():
    assert fl.math.reduce_sum is fl.reduce_sum and fl.math.log1p is fl.log1p
    assert fl.math.softplus is fl.nn.softplus and fl.math.top_k is fl.top_k
    assert fl.linalg.det is fl.matrix_determinant and fl.linalg.inv is fl.matrix_inverse
    assert fl.linalg.band_part is fl.matrix_band_part and fl.linalg.diag is fl.matrix_diag
    assert fl.linalg.tensor_diag is fl.diag and fl.linalg.set_diag is fl.matrix_set_diag
    assert fl.linalg.matmul is fl.matmul and fl.linalg.norm is fl.norm
    for module in (fl.math, fl.linalg):
        for name in module.__all__:
            assert callable(getattr(module, name)), name
    assert not hasattr(fl.linalg, "svd")     # absent, not a stand-in
