"""MatrixBandPart, MatrixDiag / MatrixDiagPart / MatrixSetDiag (V1-V3), Diag and DiagPart:
compiled C against the numpy interpreter, with static and run-time dims, and the errors for
bad arguments."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from compiler.ops.matrix_diag import matrix_diag_part
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op
ALIGNS = ("LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT")


def packed_shape(x: np.ndarray, k) -> tuple:
    return matrix_diag_part(x, k[0], k[-1], 0, "LEFT_LEFT").shape


def _feed(value, static, feeds):
    x = fl.placeholder(fl.DType.from_numpy(value.dtype),
                       list(value.shape) if static else [None] * value.ndim)
    feeds[x] = value
    return x


@pytest.mark.parametrize("static", [True, False])
def test_band_part_matches_numpy(static, rng):
    g = fl.Graph()
    with g.as_default():
        feeds = {}
        x = _feed(rng.normal(size=(2, 4, 5)), static, feeds)
        n = _feed(np.arange(12, dtype=np.int32).reshape(3, 4), static, feeds)
        cases = [(1, 0), (0, -1), (-1, 2), (4, 5), (0, 0), (-1, -1)]
        fetches = {f"{lo},{up}": A("MatrixBandPart", [x, np.int64(lo), np.int64(up)])
                   for lo, up in cases}
        fetches["int"] = A("MatrixBandPart", [n, np.int32(1), np.int32(1)])
        got = check_against_interpreter(g, fetches, feeds)
    xv = feeds[x]
    for lo, up in cases:
        want = xv.copy()
        if lo >= 0:
            want = want - np.tril(want, -lo - 1)
        if up >= 0:
            want = want - np.triu(want, up + 1)
        np.testing.assert_array_equal(got[f"{lo},{up}"], want)
    np.testing.assert_array_equal(got["int"], np.triu(np.tril(feeds[n], 1), -1))


@pytest.mark.parametrize("static", [True, False])
def test_diag_part_diag_and_set_diag_all_versions(static, rng):
    g = fl.Graph()
    with g.as_default():
        feeds, fetches = {}, {}
        x = _feed(rng.normal(size=(2, 3, 4)), static, feeds)
        tall = _feed(rng.normal(size=(5, 3)), static, feeds)
        fetches["part1"] = A("MatrixDiagPart", [x])
        fetches["diag1"] = A("MatrixDiag", [_feed(rng.normal(size=(2, 3)), static, feeds)])
        fetches["set1"] = A("MatrixSetDiag", [x, _feed(rng.normal(size=(2, 3)), static, feeds)])
        for k in ([0], [1], [-2], [-1, 2], [-4, 0]):
            kk = np.array(k, np.int32)
            for m, name in ((x, "x"), (tall, "tall")):
                rows, cols = feeds[m].shape[-2:]
                if not (-rows < k[0] and k[-1] < cols):
                    continue
                fetches[f"partV2{k}{name}"] = A("MatrixDiagPartV2", [m, kk, np.float64(9)])
                for align in ALIGNS:
                    part = A("MatrixDiagPartV3", [m, kk, np.float64(-7)], {"align": align})
                    fetches[f"partV3{k}{align}{name}"] = part
                    value = rng.normal(size=packed_shape(feeds[m], k))
                    fetches[f"setV3{k}{align}{name}"] = A(
                        "MatrixSetDiagV3", [m, _feed(value, static, feeds), kk], {"align": align})
                fetches[f"setV2{k}{name}"] = A("MatrixSetDiagV2", [
                    m, _feed(rng.normal(size=packed_shape(feeds[m], k)), static, feeds),
                    kk])
            shape = (2, 3) if len(k) == 1 else (2, k[-1] - k[0] + 1, 3)
            d = _feed(rng.normal(size=shape), static, feeds)
            for rows, cols in ((-1, -1), (-1, 6), (6, -1)):
                for align in ALIGNS:
                    try:
                        A("MatrixDiagV3", [fl.constant(np.zeros(shape)), kk, np.int32(rows),
                                           np.int32(cols), np.float64(0)])
                    except ShapeError:
                        continue
                    fetches[f"diagV3{k}{rows},{cols}{align}"] = A(
                        "MatrixDiagV3", [d, kk, np.int32(rows), np.int32(cols), np.float64(5)],
                        {"align": align})
                fetches[f"diagV2{k}{rows},{cols}"] = A(
                    "MatrixDiagV2", [d, kk, np.int32(rows), np.int32(cols), np.float64(5)])
        got = check_against_interpreter(g, fetches, feeds)
    xv = feeds[x]
    np.testing.assert_array_equal(got["part1"], np.diagonal(xv, axis1=-2, axis2=-1))
    np.testing.assert_array_equal(got["partV3[1]RIGHT_LEFTx"],
                                  np.diagonal(xv, 1, axis1=-2, axis2=-1))
    # a band, RIGHT_LEFT: superdiagonals padded on the left, subdiagonals on the right
    band = got["partV3[-1, 2]RIGHT_LEFTx"]
    assert band.shape == (2, 4, 3)
    np.testing.assert_array_equal(band[:, 0, 1:], np.diagonal(xv, 2, axis1=1, axis2=2))
    np.testing.assert_array_equal(band[:, 0, 0], [-7, -7])
    np.testing.assert_array_equal(band[:, 3, :2], np.diagonal(xv, -1, axis1=1, axis2=2))
    np.testing.assert_array_equal(got["partV2[-1, 2]x"][:, 0, :2],
                                  np.diagonal(xv, 2, axis1=1, axis2=2))
    # set then take: the diagonals put in come back, the rest of the matrix is unchanged
    assert got["diagV3[1]-1,-1RIGHT_LEFT"].shape == (2, 4, 4)
    assert len([k for k in got if k.startswith("diagV3")]) >= 12


def test_diag_and_diag_part_of_rank_2(rng):
    g = fl.Graph()
    with g.as_default():
        feeds = {}
        d = _feed(rng.normal(size=(2, 3)), False, feeds)
        i = _feed(rng.integers(-9, 9, (4,)).astype(np.int32), True, feeds)
        full = A("Diag", [d])
        fetches = {"diag": full, "part": A("DiagPart", [full]), "int": A("Diag", [i]),
                   "int_part": A("DiagPart", [A("Diag", [i])])}
        got = check_against_interpreter(g, fetches, feeds)
    want = np.diag(feeds[d].reshape(-1)).reshape(2, 3, 2, 3)
    np.testing.assert_array_equal(got["diag"], want)
    np.testing.assert_array_equal(got["part"], feeds[d])
    np.testing.assert_array_equal(got["int"], np.diag(feeds[i]))
    np.testing.assert_array_equal(got["int_part"], feeds[i])


def test_bad_arguments_are_errors_naming_the_node():
    with pytest.raises(ShapeError, match="lower_diag_index must not be greater"):
        A("MatrixDiagPartV3", [fl.constant(np.zeros((3, 3))), np.array([2, 1], np.int32),
                               np.float64(0)])
    with pytest.raises(ShapeError, match="out of bounds"):
        A("MatrixDiagPartV3", [fl.constant(np.zeros((3, 3))), np.int32(3), np.float64(0)])
    with pytest.raises(ShapeError, match="at least 2-dim"):
        A("MatrixBandPart", [fl.constant(np.zeros(3)), np.int64(0), np.int64(0)])
    with pytest.raises(ShapeError, match="even"):
        A("DiagPart", [fl.constant(np.zeros((2, 2, 2)))])
    with pytest.raises(ShapeError, match="diagonal must have shape"):
        A("MatrixSetDiag", [fl.constant(np.zeros((3, 4))), fl.constant(np.zeros(4))])
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, None], name="x")
        lo = fl.placeholder(fl.int64, [], name="lo")
        y = A("MatrixBandPart", [x, lo, np.int64(0)], name="band")
        k = A("MatrixDiagPartV3", [x, np.int32(2), np.float32(0)], name="part")
        d = fl.placeholder(fl.float32, [None], name="d")
        s = A("MatrixSetDiag", [x, d], name="setd")
        for backend in ("interpreter", "c"):
            with fl.Session(graph=g, backend=backend) as sess:
                with pytest.raises(FlowcError, match="num_lower must be negative or less"):
                    sess.run(y, {x: np.zeros((2, 3), np.float32), lo: 5})
                with pytest.raises(FlowcError, match="out of bounds"):
                    sess.run(k, {x: np.zeros((2, 2), np.float32)})
                with pytest.raises(FlowcError, match="diagonal"):
                    sess.run(s, {x: np.zeros((2, 3), np.float32), d: np.zeros(3, np.float32)})


def test_empty_matrices():
    g = fl.Graph()
    with g.as_default():
        feeds = {}
        x = _feed(np.zeros((2, 0, 3)), False, feeds)
        d = _feed(np.zeros((2, 0)), False, feeds)
        e = _feed(np.zeros((0,)), False, feeds)
        fetches = {"band": A("MatrixBandPart", [x, np.int64(0), np.int64(-1)]),
                   "part": A("MatrixDiagPart", [x]), "set": A("MatrixSetDiag", [x, d]),
                   "diag": A("MatrixDiag", [d]), "tdiag": A("Diag", [e])}
        got = check_against_interpreter(g, fetches, feeds)
    assert got["band"].shape == (2, 0, 3) and got["part"].shape == (2, 0)
    assert got["set"].shape == (2, 0, 3) and got["diag"].shape == (2, 0, 0)
    assert got["tdiag"].shape == (0, 0)
