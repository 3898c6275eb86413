"""The beta = 1 products (``_MatMulBiasAdd``, ``_MatMulAccumulate``, ``_MatMulAssignSub``) call
gemv for a one-row or one-column product and ger for an outer product (k = 1), gemm otherwise.
Every branch, with every transpose and both float dtypes, equals the interpreter (the oracle)."""
import itertools

import numpy as np
import pytest

import dsl as fl
from compiler.step import make_step_graph, optimize
from oracle import NO_FOLDING, check_against_interpreter

# (m, n, k): one row (gemv), one column (gemv), outer product (ger), the corners, and gemm.
SHAPES = [(1, 7, 5), (6, 1, 5), (6, 7, 1), (1, 1, 5), (1, 7, 1), (6, 1, 1), (1, 1, 1), (6, 7, 5)]
TRANSPOSES = list(itertools.product([False, True], repeat=2))
TOL = {fl.float32: dict(rtol=2e-5, atol=1e-5), fl.float64: dict(rtol=1e-12, atol=1e-12)}


def _operands(rng, dtype, m, n, k, ta, tb):
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype.np)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype.np)
    return a, b


def _ops(fetches, targets=()):
    step = make_step_graph(fl.get_default_graph(), [], [f.output for f in fetches],
                           [t.node for t in targets])
    optimize(step, NO_FOLDING)
    return [n.op for n in step.graph]


@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
def test_bias_add_and_accumulate_match_the_interpreter_in_every_branch(graph, rng, dtype):
    fetches = {}
    for (m, n, k), (ta, tb) in itertools.product(SHAPES, TRANSPOSES):
        a, b = _operands(rng, dtype, m, n, k, ta, tb)
        name = f"{m}x{n}x{k}_{'t' if ta else 'n'}{'t' if tb else 'n'}"
        product = fl.matmul(fl.constant(a), fl.constant(b), transpose_a=ta, transpose_b=tb)
        fetches["bias_" + name] = product + fl.constant(rng.standard_normal(n).astype(dtype.np))
        # the accumulator is an op's result: the kernel writes into it (a Const is read-only)
        acc = fl.constant(rng.standard_normal((m, n)).astype(dtype.np)) * 2.0
        fetches["acc_" + name] = fl.raw_ops._MatMulAccumulate(acc=acc, a=fl.constant(a),
            b=fl.constant(b), transpose_a=ta, transpose_b=tb)
    ops = _ops(list(fetches.values()))
    assert ops.count("_MatMulBiasAdd") == len(SHAPES) * len(TRANSPOSES)
    check_against_interpreter(graph, fetches, {}, **TOL[dtype])


@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
def test_sgd_updates_match_the_interpreter_in_every_branch(graph, rng, dtype):
    variables, updates = [], []
    for (m, n, k), (ta, tb) in itertools.product(SHAPES, TRANSPOSES):
        a, b = _operands(rng, dtype, m, n, k, ta, tb)
        v = fl.Variable(rng.standard_normal((m, n)).astype(dtype.np))
        product = fl.matmul(fl.constant(a), fl.constant(b), transpose_a=ta, transpose_b=tb)
        updates.append(v.assign_sub(fl.constant(0.25, dtype) * product, read_value=False))
        variables.append(v)
    step = fl.group(*updates)
    assert _ops([], [step]).count("_MatMulAssignSub") == len(updates)
    init = fl.global_variables_initializer()
    results = []
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            s.run(init)
            s.run(step)
            s.run(step)
            results.append(s.run(variables))
    for want, got in zip(*results):
        np.testing.assert_allclose(got, want, **TOL[dtype])
