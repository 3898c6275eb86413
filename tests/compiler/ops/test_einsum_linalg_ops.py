"""Einsum, MatrixDeterminant and MatrixInverse: compiled C against the numpy interpreter.

Einsum's C lowering has two paths: a batched matrix product (operands used in place or
permuted first, the product written into the output or permuted into it) and a loop nest
(one operand, diagonals, three operands, stretching '...' dims); the cases below reach both,
for floats and integers, with static and run-time dims."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op

EINSUMS = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),            # matmul, in place
    ("bik,bjk->bij", [(2, 3, 4), (2, 5, 4)]),            # b read transposed
    ("bki,bkj->bij", [(2, 4, 3), (2, 4, 5)]),            # a read transposed
    ("aecd,abcd->acbe", [(2, 3, 4, 5), (2, 6, 4, 5)]),   # Keras attention scores: permutes
    ("abcd,cde->abe", [(2, 3, 4, 5), (4, 5, 6)]),        # Keras dense over two dims
    ("ij,jk", [(3, 4), (4, 5)]),                         # implicit output
    ("i,j->ij", [(3,), (4,)]),                           # outer product (k = 1)
    ("i,i", [(5,), (5,)]),                               # inner product
    ("ij,jk->ik", [(0, 3), (3, 2)]),                     # empty rows
    ("ij,jk->ik", [(2, 0), (0, 2)]),                     # empty contraction: zeros
    ("ii->i", [(4, 4)]),                                 # diagonal
    ("ii", [(4, 4)]),                                    # trace
    ("ij->ji", [(3, 4)]),
    ("bij->", [(2, 3, 4)]),
    ("ijk,ikj->i", [(2, 3, 3), (2, 3, 3)]),              # a label summed inside one operand
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),   # '...' dims that stretch
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),          # three operands: one op, a loop nest
]


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_einsum_matches_numpy_on_both_paths(dtype, rng):
    g = fl.Graph()
    with g.as_default():
        fetches, feeds = {}, {}
        for n, (equation, shapes) in enumerate(EINSUMS):
            xs = []
            for shape in shapes:
                value = (rng.normal(size=shape) if dtype == np.float32
                         else rng.integers(-5, 5, shape)).astype(dtype)
                dims = [None] * len(shape) if n % 2 else list(shape)   # every other one fed
                x = fl.placeholder(fl.DType.from_numpy(np.dtype(dtype)), dims)
                feeds[x] = value
                xs.append(x)
            fetches[f"{n}:{equation}"] = A("Einsum", [xs], {"equation": equation})
        got = check_against_interpreter(g, fetches, feeds, rtol=1e-4, atol=1e-5)
    values = list(feeds.values())
    at = 0
    for (equation, shapes), result in zip(EINSUMS, got.values()):
        ops = values[at:at + len(shapes)]
        at += len(shapes)
        np.testing.assert_allclose(result, np.einsum(equation, *ops), rtol=1e-4, atol=1e-4)


def test_fl_einsum_contracts_many_operands_two_at_a_time(graph, rng):
    values = [rng.normal(size=s) for s in ((2, 3), (3, 4), (4, 5), (5, 2))]
    y = fl.einsum("ij,jk,kl,lm->im", *[fl.constant(v) for v in values])
    ops = [n for n in graph if n.op == "Einsum"]
    assert len(ops) == 3 and all(len(n.inputs) == 2 for n in ops)
    got = check_against_interpreter(graph, {"y": y})
    np.testing.assert_allclose(got["y"], np.einsum("ij,jk,kl,lm->im", *values), rtol=1e-12)


def test_einsum_refuses_dims_that_do_not_match(graph):
    a = fl.placeholder(fl.float32, [2, None], name="a")
    b = fl.placeholder(fl.float32, [None, 4], name="b")
    y = fl.einsum("ij,jk->ik", a, b)
    with pytest.raises(ShapeError, match="label 'j'"):
        fl.einsum("ij,jk->ik", fl.constant(np.zeros((2, 3))), fl.constant(np.zeros((4, 4))))
    with pytest.raises(ShapeError, match="names 2 operands"):
        A("Einsum", [[a]], {"equation": "ij,jk->ik"})
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises(FlowcError, match="'j'"):
                s.run(y, {a: np.zeros((2, 3), np.float32), b: np.zeros((5, 4), np.float32)})


def test_determinant_and_inverse_of_batches(graph, rng):
    x = fl.placeholder(fl.float64, [None, 3, 3], name="x")
    f = fl.placeholder(fl.float32, [None, None], name="f")
    fetches = {"det": fl.matrix_determinant(x), "inv": fl.matrix_inverse(x),
               "inv_adj": fl.matrix_inverse(x, adjoint=True), "det32": fl.matrix_determinant(f)}
    xv = rng.normal(size=(4, 3, 3))
    xv[1] = [[0, 1, 2], [1, 0, 3], [4, -3, 8]]              # needs a row swap
    fv = rng.normal(size=(5, 5)).astype(np.float32)
    got = check_against_interpreter(graph, fetches, {x: xv, f: fv})
    np.testing.assert_allclose(got["det"], np.linalg.det(xv), rtol=1e-10)
    np.testing.assert_allclose(got["inv"] @ xv, np.broadcast_to(np.eye(3), xv.shape), atol=1e-9)
    np.testing.assert_allclose(got["inv_adj"], np.linalg.inv(xv.transpose(0, 2, 1)), rtol=1e-9)
    singular = xv.copy()
    singular[2] = [[1, 2, 3], [2, 4, 6], [0, 1, 1]]
    got = check_against_interpreter(graph, {"det": fetches["det"]},
                                    {x: singular, f: np.zeros((0, 0), np.float32)})
    assert got["det"][2] == 0
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises(FlowcError, match="Input is not invertible"):
                s.run(fetches["inv"], {x: singular})
    assert check_against_interpreter(graph, {"d": fetches["det32"]},
                                     {f: np.zeros((0, 0), np.float32)})["d"] == 1.0
