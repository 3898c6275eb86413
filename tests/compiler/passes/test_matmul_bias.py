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
