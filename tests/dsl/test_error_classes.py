"""One error hierarchy, TensorFlow's (``fl.errors``): the same failing step raises the same class
on the C backend, on the numpy interpreter and on a GPU (the CUDA simulator here), and the error
names the node (``node_def``, the message) and where it was written (``location``).

The table is ``docs/errors.md``'s: each case builds a small graph whose step fails in one way,
runs it in a fresh session of each backend, and checks the class, its TensorFlow code and the
node. Across tasks (gRPC) the same table's cases are in tests/compiler/test_error_classes_remote.py.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import dsl as fl
from runtime.dtypes import DType

BACKENDS = ("c", "interpreter")
BOUND = fl.RunOptions(timeout_in_ms=20000)
THIS_FILE = os.path.basename(__file__)


# --- the table: name -> (TensorFlow's class, builder) -------------------------------------------
# A builder adds its graph to the default graph and returns (node name, setup, step): ``setup``
# runs in the session before the failing ``step``.

def _gather():
    ids = fl.placeholder(fl.int32, [None], name="ids")
    out = fl.gather(fl.constant(np.arange(10, dtype=np.float32).reshape(5, 2)), ids, name="gat")
    return "gat", None, lambda s: s.run(out, {ids: np.array([1, 7], np.int32)})


def _resource_gather():
    v = fl.Variable(np.zeros((3, 2), np.float32), name="table")
    ids = fl.placeholder(fl.int32, [None], name="ids")
    rows = fl.apply_op("ResourceGather", [v.handle, ids], {"dtype": DType.f32}, name="rows")
    return "rows", lambda s: s.run(v.initializer), \
        lambda s: s.run(rows, {ids: np.array([0, 5], np.int32)})


def _scatter():
    v = fl.Variable(np.zeros((3, 2), np.float32), name="table")
    ids = fl.placeholder(fl.int32, [None], name="ids")
    op = fl.scatter_update(v, ids, np.ones((2, 2), np.float32), name="scatter")
    return "scatter", lambda s: s.run(v.initializer), \
        lambda s: s.run(op, {ids: np.array([0, 6], np.int32)})


def _uninitialized():
    v = fl.Variable(np.zeros(3, np.float32), name="never_set")
    out = fl.identity(v, name="read_it")
    return v.value().op.name, None, lambda s: s.run(out)


def _division():
    a = fl.placeholder(fl.int32, [None], name="a")
    b = fl.placeholder(fl.int32, [None], name="b")
    out = fl.floordiv(a, b, name="div")
    return "div", None, lambda s: s.run(out, {a: np.array([1, 2], np.int32),
                                              b: np.array([1, 0], np.int32)})


def _out_of_memory():
    dims = fl.placeholder(fl.int32, [2], name="dims")
    out = fl.reduce_sum(fl.fill(dims, 1.0, name="huge"))
    return "huge", None, lambda s: s.run(out, {dims: np.array([2 ** 30, 2 ** 30], np.int32)})


def _missing_feed():
    x = fl.placeholder(fl.float32, [None], name="unfed")
    out = fl.reduce_sum(x)
    return "unfed", None, lambda s: s.run(out)


def _dequeue_closed():
    q = fl.FIFOQueue(2, [fl.float32], shapes=[[]], name="q")
    deq, close = q.dequeue(name="deq"), q.close()
    return "deq", lambda s: s.run(close), lambda s: s.run(deq, options=BOUND)


def _enqueue_closed():
    q = fl.FIFOQueue(2, [fl.float32], shapes=[[]], name="q")
    enq, close = q.enqueue([1.0], name="enq"), q.close()
    return "enq", lambda s: s.run(close), lambda s: s.run(enq, options=BOUND)


def _deadline():
    q = fl.FIFOQueue(2, [fl.float32], shapes=[[]], name="q")
    deq = q.dequeue(name="deq")
    return "deq", None, lambda s: s.run(deq, options=fl.RunOptions(timeout_in_ms=30))


def _no_checkpoint(tmp):
    v = fl.Variable(np.zeros(3, np.float32), name="v")
    saver = fl.train.Saver([v])
    path = str(tmp / "absent" / "model.ckpt")
    return "save/RestoreV2", None, lambda s: saver.restore(s, path)


CASES = {
    "gather index out of range": ("InvalidArgumentError", _gather),
    "variable row out of range": ("InvalidArgumentError", _resource_gather),
    "scatter row out of range": ("InvalidArgumentError", _scatter),
    "uninitialized variable": ("FailedPreconditionError", _uninitialized),
    "integer division by zero": ("InvalidArgumentError", _division),
    "out of memory": ("ResourceExhaustedError", _out_of_memory),
    "missing feed": ("InvalidArgumentError", _missing_feed),
    "dequeue from a closed queue": ("OutOfRangeError", _dequeue_closed),
    "enqueue to a closed queue": ("CancelledError", _enqueue_closed),
    "deadline": ("DeadlineExceededError", _deadline),
    "no checkpoint": ("NotFoundError", _no_checkpoint),
}


def _failure(build, session_kwargs, devices=None):
    """The error of ``build``'s failing step in a fresh session (``session_kwargs``);
    ``devices``, a dict, gets the session's GPUs and where its variables live."""
    g = fl.Graph()
    with g.as_default():
        node, setup, step = build()
    with fl.Session(graph=g, **session_kwargs) as s:
        if setup is not None:
            setup(s)
        with pytest.raises(fl.errors.OpError) as caught:
            step(s)
        if devices is not None:
            devices.update(gpus=list(s.gpus), variables=set(s.variable_devices().values()))
    return node, caught.value


def _check(err, cls_name: str, node: str) -> None:
    """``err`` is TensorFlow's ``cls_name`` (its class and its code) and names ``node``."""
    cls = getattr(fl.errors, cls_name)
    assert isinstance(err, cls), (type(err).__mro__, str(err))
    assert fl.errors.exception_type_from_error_code(err.error_code) is cls
    assert err.error_code == cls.error_code
    assert err.node_def is not None and err.node_def.name == node, (err.node_def, str(err))
    assert f"'{node}'" in err.message and err.message == str(err)
    assert err.location and THIS_FILE in err.location, err.location
    # the canonical class is the same whichever backend raised it
    canonical = [c for c in type(err).__mro__ if c in fl.errors.CANONICAL_CLASSES]
    assert canonical[0] is cls, canonical


@pytest.mark.parametrize("case", list(CASES))
def test_a_failing_step_raises_the_same_class_on_both_backends(case, tmp_path):
    cls_name, build = CASES[case]
    if build is _no_checkpoint:
        build = lambda: _no_checkpoint(tmp_path)                   # noqa: E731
    for backend in BACKENDS:
        node, err = _failure(build, {"backend": backend})
        _check(err, cls_name, node)
        assert err.op is not None and err.op.name == node          # the fl.Operation
        assert err.node_def.op == err.op.type


# The cases whose failing op runs on the GPU (or whose variable lives there).
GPU_CASES = ["gather index out of range", "variable row out of range", "scatter row out of range",
             "uninitialized variable"]


@pytest.mark.usefixtures("gpu_target")
@pytest.mark.parametrize("case", GPU_CASES)
def test_the_gpu_raises_the_cpu_class(case):
    cls_name, build = CASES[case]
    devices = {}
    node, err = _failure(build, {}, devices)
    assert devices["gpus"], "the session has no GPU"
    assert all("/device:GPU:0" in d for d in devices["variables"]), devices
    _check(err, cls_name, node)


def test_tensorflow_style_handlers_catch_flowc_errors():
    """``except fl.errors.X`` in the shape TensorFlow code writes it, and the old top-level
    names are the same classes."""
    g = fl.Graph()
    with g.as_default():
        node, _, step = _gather()
    with fl.Session(graph=g, backend="interpreter") as s:
        try:
            step(s)
        except fl.errors.InvalidArgumentError as e:
            caught = e
    assert isinstance(caught, fl.InvalidArgumentError) and isinstance(caught, fl.errors.OpError)
    assert fl.InvalidArgumentError is fl.errors.InvalidArgumentError
    assert fl.OutOfRangeError is fl.errors.OutOfRangeError
    assert fl.AbortedError is fl.errors.AbortedError
    assert fl.DeadlineExceededError is fl.errors.DeadlineExceededError
    assert issubclass(fl.errors.OpError, fl.FlowcError)
    assert fl.RuntimeExecutionError is fl.errors.OpError
