"""Hostile inputs of the kernels that index with data: every shape or index a kernel cannot use
fails with the interpreter's error (typed, naming the node) and changes nothing, on the C
backend and on the GPU kernels (run on the CUDA simulator) alike, instead of reading or
writing past a buffer.

The sanitizer job (``python3 -m pytest -m sanitize``, ``tests/sanitizers.py``) runs this file
with every kernel built under AddressSanitizer and UBSan, so a read past a buffer that returns
no error and a plausible value still fails there.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError
from runtime.errors import FlowcError, InvalidArgumentError

ROWS, WIDTH = 4, 1024


# --- row scatters into a variable: one row of updates per index -----------------------------
def _scatter_graph(device=None):
    """v[4, 1024] and each row scatter of it, fed ids and updates of any number of rows (and
    the fused sparse SGD step, ``_ResourceScatterSubScaled``, which fuse-updates makes of a
    ``scatter_sub`` of scaled rows)."""
    g = fl.Graph()
    with g.as_default(), fl.device(device):
        v = fl.Variable(np.arange(ROWS * WIDTH, dtype=np.float32).reshape(ROWS, WIDTH), name="v")
        ids = fl.placeholder(fl.int64, [None], name="ids")
        upd = fl.placeholder(fl.float32, [None, WIDTH], name="upd")
        ops = {"update": fl.scatter_update(v, ids, upd, name="scatter_update"),
               "add": fl.scatter_add(v, ids, upd, name="scatter_add"),
               "sub": fl.scatter_sub(v, ids, upd, name="scatter_sub"),
               "scaled": fl.scatter_sub(v, ids, upd * 0.5, name="scaled_sub")}
        init = fl.global_variables_initializer()
    return g, v, ids, upd, ops, init


def _rows_message(rows: int) -> str:
    """The error (a regular expression) for updates of ``rows`` rows and 4 indices."""
    return re.escape(f"updates of shape [{rows}, {WIDTH}] must have shape "
                     f"indices.shape + variable.shape[1:] = [{ROWS}, {WIDTH}]")


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_a_scatter_with_fewer_or_more_update_rows_than_indices_fails_and_changes_nothing(backend):
    """scatter_update(v[4,1024], [0,1,2,3], updates[1,1024]) read three rows past the updates
    (garbage in rows 1-3; with 200,000 indices, SIGSEGV); updates with more rows than indices
    are as wrong. Both fail as TensorFlow's InvalidArgumentError does, in the interpreter's
    words, before any row changes."""
    g, v, ids, upd, ops, init = _scatter_graph()
    errors = InvalidArgumentError if backend == "c" else ExecutionError
    with fl.Session(graph=g, backend=backend) as s:
        s.run(init)
        before = s.run(v)
        for mode, op in ops.items():
            for rows in (1, 8):
                message = _rows_message(rows)
                feed = {ids: np.arange(ROWS), upd: np.ones((rows, WIDTH), np.float32)}
                with pytest.raises(errors, match=message) as info:
                    s.run(op, feed)
                assert op.name.split("/")[0] in str(info.value), (mode, str(info.value))
                np.testing.assert_array_equal(s.run(v), before, err_msg=f"{mode}, {rows} rows")
        # 200,000 indices, one row of updates: the read ran off the heap (SIGSEGV)
        feed = {ids: np.arange(200_000) % ROWS, upd: np.ones((1, WIDTH), np.float32)}
        for op in ops.values():
            with pytest.raises(errors, match="must have shape"):
                s.run(op, feed)
        np.testing.assert_array_equal(s.run(v), before)
        # the same ops with one row per index still work
        s.run(ops["add"], {ids: np.array([3, 3]), upd: np.ones((2, WIDTH), np.float32)})
        assert s.run(v)[3, 0] == before[3, 0] + 2


# --- scalar operands read as one value ------------------------------------------------------
def _scalar_operand_cases():
    """Ops whose kernels read an operand as one value (``data[0]``), each fed a ``[?]`` where
    the scalar goes: Fill's value, OneHot's depth, on and off values, Range's start, limit and
    delta, a queue's dequeue count. Fed an empty tensor, the C kernels read past it (a null
    pointer: SIGSEGV)."""
    g = fl.Graph()
    with g.as_default():
        v = fl.placeholder(fl.float32, [None], name="v")
        n = fl.placeholder(fl.int32, [None], name="n")
        ids = fl.constant([0, 2, 1], fl.int32)
        q = fl.FIFOQueue(10, [fl.float32], shapes=[[2]], name="q")
        fill_queue = q.enqueue_many([np.ones((3, 2), np.float32)])
        cases = {
            "fill": (fl.fill([2, 3], v, name="fill"), v, "value"),
            "on": (fl.one_hot(ids, 3, on_value=v, off_value=0.0, name="one_hot_on"), v,
                   "on_value"),
            "off": (fl.one_hot(ids, 3, on_value=1.0, off_value=v, name="one_hot_off"), v,
                    "off_value"),
            "depth": (fl.one_hot(ids, n, name="one_hot_depth"), n, "depth"),
            "start": (fl.range(n, 5, name="range_start"), n, "start"),
            "limit": (fl.range(0, n, name="range_limit"), n, "limit"),
            "delta": (fl.range(0, 5, n, name="range_delta"), n, "delta"),
            "dequeue": (q.dequeue_many(n, name="dequeue_many"), n, "n"),
        }
    return g, cases, fill_queue


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_an_empty_tensor_fed_as_a_scalar_operand_fails_naming_it(backend):
    g, cases, fill_queue = _scalar_operand_cases()
    with fl.Session(graph=g, backend=backend) as s:
        s.run(fill_queue)
        for key, (op, fed, name) in cases.items():
            empty = np.zeros(0, fed.dtype.np)
            with pytest.raises(FlowcError, match=rf"\b{name} must be a scalar, got shape "
                                                 r"\[0\]") as info:
                s.run(op, {fed: empty})
            node = (op[0] if isinstance(op, list) else op).op.name
            assert f"'{node}'" in str(info.value), key
            if backend == "c":
                assert isinstance(info.value, InvalidArgumentError), key


# --- the GPU kernels: the same checks, on the host, in the CPU's words ------------------------
@pytest.fixture
def gpu(gpu_target):
    """Runs on the GPU where there is one, and on the CUDA simulator everywhere (which also
    fails the test when a kernel writes past a device buffer)."""
    return gpu_target


def _cpu_and_gpu_errors(g, fetch, feed, init=None):
    """The error of running ``fetch`` (built under ``fl.device("/device:GPU:0")``) on the CPU
    alone (soft placement) and on the GPU (strict: a node without a GPU kernel there would
    fail the placement), as messages."""
    messages = []
    for config in (fl.ConfigProto(device_count={"GPU": 0}, allow_soft_placement=True), None):
        with fl.Session(graph=g, config=config) as s:
            if init is not None:
                s.run(init)
            with pytest.raises(FlowcError) as info:
                s.run(fetch, feed)
            messages.append(str(info.value))
    return messages


def test_a_gpu_scatter_with_wrong_update_rows_fails_as_on_the_cpu(gpu):
    """The GPU scatter (all its modes and the fused SGD step) checks on the host, with the C
    kernel's checks: updates with more rows than indices made it read the indices past
    their end; fewer rows, silently left rows unwritten."""
    g, v, ids, upd, ops, init = _scatter_graph("/device:GPU:0")
    for rows in (1, 8):
        feed = {ids: np.arange(ROWS), upd: np.ones((rows, WIDTH), np.float32)}
        for op in ops.values():
            cpu, gpu_message = _cpu_and_gpu_errors(g, op, feed, init)
            assert gpu_message == cpu and re.search(_rows_message(rows), gpu_message), gpu_message
    with fl.Session(graph=g) as s:
        s.run(init)
        before = s.run(v)
        with pytest.raises(InvalidArgumentError):
            s.run(ops["scaled"], {ids: np.arange(ROWS), upd: np.ones((8, WIDTH), np.float32)})
        np.testing.assert_array_equal(s.run(v), before)


def test_gpu_segment_sums_and_scalar_operands_are_checked_as_on_the_cpu(gpu):
    """UnsortedSegmentSum on the GPU read segment ids past their end when data had fewer rows
    than ids (no check of the two against each other); Fill's value and OneHot's on/off
    values were read on the device without a check that there is one."""
    g = fl.Graph()
    with g.as_default(), fl.device("/device:GPU:0"):
        data = fl.placeholder(fl.float32, [None, 3], name="data")
        seg = fl.placeholder(fl.int32, [None], name="seg")
        v = fl.placeholder(fl.float32, [None], name="v")
        sums = fl.unsorted_segment_sum(data, seg, 4, name="segment_sum")
        fill = fl.fill([2, 3], v, name="fill")
        one_hot = fl.one_hot(fl.constant([0, 2], fl.int32), 3, on_value=v, off_value=0.0,
                             name="one_hot")
    good = {data: np.ones((2, 3), np.float32), seg: np.array([0, 3], np.int32)}
    cases = [(sums, {data: np.ones((2, 3), np.float32), seg: np.zeros(5, np.int32)},
              "segment_ids dim 0 differs from data: 5 != 2"),
             (fill, {v: np.zeros(0, np.float32)}, r"value must be a scalar, got shape \[0\]"),
             (one_hot, {v: np.zeros(0, np.float32)}, r"on_value must be a scalar, got shape \[0\]")]
    for fetch, feed, message in cases:
        cpu, gpu_message = _cpu_and_gpu_errors(g, fetch, feed)
        assert gpu_message == cpu and re.search(message, gpu_message), gpu_message
        assert f"'{fetch.op.name}'" in gpu_message
    with fl.Session(graph=g) as s:                # the kernels still work on good data
        np.testing.assert_array_equal(s.run(sums, good)[[0, 3]], np.ones((2, 3), np.float32))
