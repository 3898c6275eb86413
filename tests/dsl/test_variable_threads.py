"""Concurrent steps that update one variable: every read-modify-write update is atomic per
variable in both backends, as in TensorFlow (the resource variable's mutex), so N threads of
M increments add exactly N*M. The C runtime holds the variable's ``flowc_var`` lock in
generated code; the interpreter holds the ``Variable``'s lock (``runtime/resources.py``).

The interpreter's updates used to read, compute and write back without a lock: 8 threads of
2,000 ``assign_add`` ended near 12,800 instead of 16,001. A tiny GIL switch interval makes a
thread switch between the read and the write likely within a few hundred steps."""
import sys

import numpy as np
import pytest

import dsl as fl
from oracle import run_in_threads

THREADS = 8


@pytest.fixture
def switch_often():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


@pytest.mark.parametrize("backend,steps", [("interpreter", 300), ("c", 2000)])
def test_concurrent_updates_of_one_variable_all_land(graph, backend, steps, switch_often):
    count = fl.Variable(np.float64(1.0), name="count")
    down = fl.Variable(np.zeros(2, np.int64), name="down")
    rows = fl.Variable(np.zeros((3, 2), np.float32), name="rows")
    gemm = fl.Variable(np.zeros((2, 2), np.float64), name="gemm")
    one = np.ones((2, 2))
    step = fl.group(
        count.assign_add(1.0, read_value=False),
        down.assign_sub(np.array([1, 2], np.int64), read_value=False),
        fl.scatter_add(rows, [0, 2, 2], np.ones((3, 2), np.float32)),
        fl.scatter_sub(rows, [1], np.ones((1, 2), np.float32)),
        fl.raw_ops._ResourceScatterSubScaled(resource=rows.handle, indices=[1],
                                             updates=np.ones((1, 2), np.float32),
                                             scale=np.float32(2.0)),
        fl.raw_ops._MatMulAssignSub(resource=gemm.handle, a=one, b=one, scale=np.float64(-0.5)))
    with fl.Session(graph=graph, backend=backend) as s:
        s.run(fl.global_variables_initializer())

        def worker(_):
            for _ in range(steps):
                s.run(step)

        run_in_threads(worker, range(THREADS))
        n = THREADS * steps
        assert s.run(count) == 1 + n
        np.testing.assert_array_equal(s.run(down), [-n, -2 * n])
        np.testing.assert_array_equal(s.run(rows), [[n, n], [-3 * n, -3 * n], [2 * n, 2 * n]])
        np.testing.assert_array_equal(s.run(gemm), np.full((2, 2), float(n)))
