"""``fl.raw_ops`` takes TensorFlow's Python keyword names (``tf.raw_ops.Sum(input=, axis=)``)
as well as the GraphDef names the IR keeps."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import dsl as fl
from compiler.errors import OpError
from compiler.ir.op_registry import all_ops
from dsl.raw_op_names import PYTHON_NAMES


def _run(t, feeds=None):
    with fl.Session(graph=t.graph) as sess:
        return sess.run(t, feeds or {})


def test_reductions_take_axis():
    with fl.Graph().as_default():
        x = fl.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
        s = fl.raw_ops.Sum(input=x, axis=1)
        m = fl.raw_ops.Mean(input=x, axis=[0], keep_dims=True)
        assert s.op.node.op == "Sum"
        np.testing.assert_allclose(_run(s), [3, 12])
        np.testing.assert_allclose(_run(m), [[1.5, 2.5, 3.5]])


def test_graphdef_names_still_work_and_both_at_once_is_an_error():
    with fl.Graph().as_default():
        x = fl.constant(np.ones((2, 3), np.float32))
        np.testing.assert_allclose(_run(fl.raw_ops.Sum(input=x, reduction_indices=0)), [2, 2, 2])
        with pytest.raises(OpError, match="'axis' and 'reduction_indices'"):
            fl.raw_ops.Sum(input=x, axis=0, reduction_indices=0)


def test_missing_input_is_named_by_its_python_name():
    with fl.Graph().as_default():
        x = fl.constant(np.ones((2, 3), np.float32))
        with pytest.raises(OpError, match=r"Sum needs input 'axis' \(GraphDef name "
                                          r"'reduction_indices'\)"):
            fl.raw_ops.Sum(input=x)


def test_expand_dims_split_and_squeeze_take_axis():
    with fl.Graph().as_default():
        x = fl.constant(np.arange(6, dtype=np.float32).reshape(1, 6))
        e = fl.raw_ops.ExpandDims(input=x, axis=0)
        a, b = fl.raw_ops.Split(axis=1, value=x, num_split=2)
        q = fl.raw_ops.Squeeze(input=x, axis=[0])
        with fl.Session() as sess:
            ev, av, qv = sess.run([e, a, q])
        assert ev.shape == (1, 1, 6) and av.shape == (1, 3) and qv.shape == (6,)


def test_table_names_real_arguments():
    ops = all_ops()
    for op_name, renames in PYTHON_NAMES.items():
        op = ops[op_name]
        names = {a.name for a in op.inputs} | set(op.attrs)
        assert set(renames) <= names, op_name
        doc = fl.raw_ops.__getattr__(op_name).__doc__
        assert all(python in doc for python in renames.values()), op_name


def test_table_matches_tensorflow_where_installed():
    tf = pytest.importorskip("tensorflow")
    from tensorflow.python.framework import op_def_registry
    for op_name, op in all_ops().items():
        fn = getattr(tf.raw_ops, op_name, None)
        od = op_def_registry.get(op_name)
        if fn is None or od is None:
            continue
        params = [p for p in inspect.signature(fn).parameters if p != "name"]
        graph_inputs = [a.name for a in od.input_arg]
        expected = {g: p for g, p in zip(graph_inputs, params) if g != p}
        attrs = {a.name for a in od.attr}
        extra = [p for p in params[len(graph_inputs):] if p not in attrs]
        missing = [a for a in attrs if a not in params and a not in _inferred(od)]
        expected.update(zip(missing, extra))
        assert PYTHON_NAMES.get(op_name, {}) == expected, op_name


def _inferred(od):
    return {n for a in od.input_arg for n in (a.type_attr, a.number_attr, a.type_list_attr) if n}
