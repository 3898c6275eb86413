"""fuse-updates folds a column bias into its matrix product (``_MatMulBiasAdd``: the gemm
starts from the bias). Compiled results equal the interpreter's (the oracle) for transposed
operands, f64, run-time rows, empty products and an empty inner dimension; a product used
elsewhere, or a bias that is not a vector over the columns, keeps its add."""
import numpy as np

import dsl as fl
from compiler.step import make_step_graph, optimize
from oracle import NO_FOLDING, check_against_interpreter


def _ops(fetches, feeds):
    step = make_step_graph(fl.get_default_graph(), [f.output for f in feeds],
                           [f.output for f in fetches], [])
    optimize(step, NO_FOLDING)                  # as the oracle compiles them
    return [n.op for n in step.graph]


def test_bias_adds_fold_into_the_gemm_and_match_the_interpreter(graph, rng):
    a = fl.placeholder(fl.float32, [None, 5], name="a")
    b = fl.placeholder(fl.float32, [5, 7], name="b")
    bias = fl.placeholder(fl.float32, [7], name="bias")
    at = fl.placeholder(fl.float32, [5, 3], name="at")
    bt = fl.placeholder(fl.float32, [7, 5], name="bt")
    a64 = fl.placeholder(fl.float64, [4, 2], name="a64")
    b64 = fl.placeholder(fl.float64, [2, 3], name="b64")
    fetches = {
        "add": fl.matmul(a, b) + bias,
        "bias_first": bias + fl.matmul(at, b, transpose_a=True),
        "bias_add": fl.nn.bias_add(fl.matmul(a, bt, transpose_b=True), bias),
        "f64": fl.matmul(a64, b64) + fl.constant(np.array([1.0, -2.0, 0.5])),
        "no_rows": fl.matmul(fl.zeros([0, 5]), b) + bias,
        "no_inner": fl.matmul(fl.zeros([3, 0]), fl.zeros([0, 7])) + bias,
    }
    ops = _ops(list(fetches.values()), [a, b, bias, at, bt, a64, b64])
    assert ops.count("_MatMulBiasAdd") == 6 and "MatMul" not in ops
    feed = {a: rng.standard_normal((6, 5)).astype(np.float32),
            b: rng.standard_normal((5, 7)).astype(np.float32),
            bias: rng.standard_normal(7).astype(np.float32),
            at: rng.standard_normal((5, 3)).astype(np.float32),
            bt: rng.standard_normal((7, 5)).astype(np.float32),
            a64: rng.standard_normal((4, 2)), b64: rng.standard_normal((2, 3))}
    check_against_interpreter(graph, fetches, feed)
    feed[a] = np.zeros((0, 5), np.float32)                    # no rows at run time
    check_against_interpreter(graph, {"add": fetches["add"]}, feed)


def test_what_must_not_fold_keeps_its_add(graph, rng):
    a = fl.placeholder(fl.float32, [3, 4], name="a")
    b = fl.placeholder(fl.float32, [4, 2], name="b")
    product = fl.matmul(a, b)
    used_twice = product + fl.constant([1.0, 2.0])
    row_matrix = fl.matmul(a, b) + fl.constant([[1.0, 2.0]])       # a [1, 2] matrix
    column = fl.matmul(a, b) + fl.constant([[1.0], [2.0], [3.0]])  # over rows
    fetches = {"used_twice": used_twice, "product": product, "row_matrix": row_matrix,
               "column": column}
    assert "_MatMulBiasAdd" not in _ops(list(fetches.values()), [a, b])
    check_against_interpreter(graph, fetches, {a: rng.standard_normal((3, 4)).astype(np.float32),
                                               b: rng.standard_normal((4, 2)).astype(np.float32)})


# --- a whole matrix as the gemm's start value: _MatMulAccumulate --------------------------------
def test_a_matrix_added_to_a_product_starts_the_gemm(graph, rng):
    """``x + MatMul(a, b)`` with ``x`` of the product's static shape is one gemm into x's
    buffer; where that buffer must not be written (a feed, a constant, a value read again or
    fetched) the compiled step writes into a copy, and every result equals the interpreter's."""
    a = fl.placeholder(fl.float32, [6, 5], name="a")
    b = fl.placeholder(fl.float32, [5, 7], name="b")
    bt = fl.placeholder(fl.float32, [7, 5], name="bt")
    at = fl.placeholder(fl.float32, [5, 6], name="at")
    x = fl.placeholder(fl.float32, [6, 7], name="x")
    a64 = fl.placeholder(fl.float64, [4, 2], name="a64")
    b64 = fl.placeholder(fl.float64, [2, 3], name="b64")
    fresh = fl.tanh(x)                       # a buffer of the step's own, read once
    read_again = x * 2.0                     # read by the sum and by `again`
    fetched = x - 1.0                        # read by the sum and fetched
    # (each product its own: common subexpressions would leave one product used thrice)
    fetches = {
        "fresh": fl.matmul(a, b) + fresh,
        "product_first": fl.matmul(at, bt, transpose_a=True, transpose_b=True) + read_again,
        "again": read_again + 3.0,
        "feed": x + fl.matmul(a, bt, transpose_b=True),
        "const": fl.matmul(a, b * 2.0) + fl.constant(
            rng.standard_normal((6, 7)).astype(np.float32)),
        "fetched_sum": fl.matmul(a, b * 3.0) + fetched,
        "fetched": fetched,
        "f64": fl.matmul(a64, b64) + fl.constant(rng.standard_normal((4, 3))),
    }
    ops = _ops(list(fetches.values()), [a, b, bt, at, x, a64, b64])
    assert ops.count("_MatMulAccumulate") == 6 and "MatMul" not in ops
    feed = {a: rng.standard_normal((6, 5)).astype(np.float32),
            b: rng.standard_normal((5, 7)).astype(np.float32),
            bt: rng.standard_normal((7, 5)).astype(np.float32),
            at: rng.standard_normal((5, 6)).astype(np.float32),
            x: rng.standard_normal((6, 7)).astype(np.float32),
            a64: rng.standard_normal((4, 2)), b64: rng.standard_normal((2, 3))}
    x_before = feed[x].copy()
    check_against_interpreter(graph, fetches, feed)
    np.testing.assert_array_equal(feed[x], x_before)          # the feed was not written


def test_a_loop_step_starts_its_gemm_from_the_gathered_row(graph, rng):
    """An RNN-like loop: ``xw[t] + h @ R`` each iteration (the row a gather's fresh buffer,
    ``xw`` a loop invariant) becomes a gemm into the row; the loop's results equal the
    interpreter's, and ``xw`` itself is not written."""
    xw = fl.placeholder(fl.float32, [5, 3, 8], name="xw")
    r = fl.placeholder(fl.float32, [8, 8], name="r")
    h0 = fl.placeholder(fl.float32, [3, 8], name="h0")

    def body(t, h):
        return t + 1, fl.tanh(fl.gather(xw, t) + fl.matmul(h, r))
    _, h = fl.while_loop(lambda t, h: t < 5, body, [fl.constant(0), h0])
    fetches = {"h": h, "xw_sum": fl.reduce_sum(xw, axis=0)}
    assert "_MatMulAccumulate" in _ops(list(fetches.values()), [xw, r, h0])
    feed = {xw: rng.standard_normal((5, 3, 8)).astype(np.float32),
            r: (rng.standard_normal((8, 8)) * 0.3).astype(np.float32),
            h0: rng.standard_normal((3, 8)).astype(np.float32)}
    check_against_interpreter(graph, fetches, feed)


def test_a_matrix_that_does_not_match_keeps_its_add(graph, rng):
    """A broadcast addend, an unknown dim, a product used twice, an integer product."""
    a = fl.placeholder(fl.float32, [None, 4], name="a")
    a2 = fl.placeholder(fl.float32, [3, 4], name="a2")
    b = fl.placeholder(fl.float32, [4, 2], name="b")
    x = fl.placeholder(fl.float32, [None, 2], name="x")
    product = fl.matmul(a2, b)
    fetches = {"unknown_rows": fl.matmul(a, b) + x,
               "broadcast": fl.matmul(a2, b) + fl.constant(np.ones((3, 1), np.float32)),
               "used_twice": product + fl.ones([3, 2]), "product": product,
               "int": fl.matmul(fl.ones([2, 2], fl.int32), fl.ones([2, 2], fl.int32))
               + fl.ones([2, 2], fl.int32)}
    assert "_MatMulAccumulate" not in _ops(list(fetches.values()), [a, a2, b, x])
    check_against_interpreter(graph, fetches, {
        a: rng.standard_normal((3, 4)).astype(np.float32),
        a2: rng.standard_normal((3, 4)).astype(np.float32),
        b: rng.standard_normal((4, 2)).astype(np.float32),
        x: rng.standard_normal((3, 2)).astype(np.float32)})
