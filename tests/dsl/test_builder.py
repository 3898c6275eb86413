"""The Python builder: scopes, devices, control dependencies, default graphs, raw_ops,
constants and conversions, source locations, and the Operation/Tensor handles."""
import collections
import inspect
import os
import threading

import numpy as np
import pytest

import dsl as fl
from compiler.errors import GraphError, OpError
from compiler.ir.verifier import verify


def _line() -> int:
    return inspect.currentframe().f_back.f_lineno


# --- names -------------------------------------------------------------------------------
def test_names_are_uniquified_like_tensorflow(graph):
    x = fl.placeholder(fl.float32, [2], name="x")
    a, b, c = (fl.raw_ops.AddV2(x=x, y=x, name="add") for _ in range(3))
    assert [t.op.name for t in (a, b, c)] == ["add", "add_1", "add_2"]
    assert a.name == "add:0" and a.op.type == "AddV2"
    assert fl.identity(x, name="add_1").op.name == "add_1_1"
    assert fl.raw_ops.Neg(x=x).op.name == "Neg"         # the default name is the op type
    assert fl.constant(1.0).op.name == "Const" and fl.constant(2.0).op.name == "Const_1"


def test_name_scopes_nest_and_are_uniquified(graph):
    x = fl.placeholder(fl.float32, [], name="x")
    with fl.name_scope("layer") as scope:
        assert scope == "layer/"
        y = fl.multiply(x, 2.0, name="y")
        with fl.name_scope("inner") as inner:
            assert inner == "layer/inner/"
            z = fl.add(y, 1.0, name="add")
    with fl.name_scope("layer") as again:
        w = fl.add(x, 1.0, name="add")
    assert again == "layer_1/"
    assert y.op.name == "layer/y" and z.op.name == "layer/inner/add" and w.op.name == "layer_1/add"
    assert y.op.inputs[1].op.name == "layer/Const"    # the converted 2.0 is named in the scope too
    with fl.name_scope("layer/"):                      # a trailing slash re-enters the exact scope
        assert fl.add(x, 1.0, name="y").op.name == "layer/y_1"
        with fl.name_scope(None):                      # None goes back to the top level
            assert fl.add(x, 1.0, name="add").op.name == "add"
    with fl.name_scope("block") as s:
        out = fl.identity(x, name=s)                   # TF idiom: the op named like its scope
    assert out.op.name == "block"
    assert graph.current_name_scope == ""
    verify(graph)


def test_invalid_op_and_scope_names_are_refused(graph):
    with pytest.raises(GraphError, match="invalid node name"):
        fl.placeholder(fl.float32, [], name="has space")
    with pytest.raises(GraphError, match="invalid node name 'my layer'"):
        with fl.name_scope("my layer"):
            pass


# --- devices -----------------------------------------------------------------------------
def test_device_scopes_are_recorded_and_merge(graph):
    a = fl.constant(1.0, name="a")
    with fl.device("/job:ps/task:0"):
        b = fl.constant(2.0, name="b")
        with fl.device("/device:CPU:1"):
            c = b + a
        with fl.device("/job:worker"):
            d = fl.identity(c)
        with fl.device(None):
            e = fl.identity(c)
        with fl.device(""):
            f = fl.identity(c)
    with fl.device("/cpu:0"):
        g = fl.identity(a)
    assert a.device == "" and b.device == "/job:ps/task:0"
    assert c.op.device == "/job:ps/task:0/device:CPU:1"
    assert d.device == "/job:worker/task:0"
    assert e.device == "" and f.device == "/job:ps/task:0"
    assert g.device == "/device:CPU:0"
    with pytest.raises(GraphError, match="bad device spec"):
        with fl.device("/jbo:ps"):
            pass


def test_device_functions_see_the_op(graph):
    def ps_for_consts(op):
        return "/job:ps/task:0" if op.type == "Const" else "/job:worker"

    x = fl.placeholder(fl.float32, [], name="x")
    with fl.device(ps_for_consts):
        c = fl.constant(3.0, name="c")
        y = x * c
    assert c.device == "/job:ps/task:0" and y.device == "/job:worker"


# --- control dependencies ----------------------------------------------------------------
def test_control_dependencies_nest_and_clear(graph):
    x = fl.placeholder(fl.float32, [], name="x")
    a = fl.identity(x, name="a")
    b = fl.identity(x, name="b")
    with fl.control_dependencies([a]):
        p = fl.identity(x, name="p")
        with fl.control_dependencies([b.op]):
            q = fl.identity(x, name="q")
            with fl.control_dependencies(None):
                r = fl.identity(x, name="r")
                with fl.control_dependencies([p]):
                    s = fl.identity(x, name="s")
        t = fl.identity(p, name="t")                  # p already waits for a: nothing added
        u = fl.identity(a, name="u")                  # a is an input: no control edge to it
    names = lambda t: [op.name for op in t.op.control_inputs]  # noqa: E731
    assert names(p) == ["a"] and names(q) == ["a", "b"] and names(r) == []
    assert names(s) == ["p"] and names(t) == [] and names(u) == []
    with fl.control_dependencies([x]):
        noop = fl.raw_ops.NoOp(name="group")
    assert isinstance(noop, fl.Operation) and [o.name for o in noop.control_inputs] == ["x"]
    with pytest.raises(TypeError):
        with fl.control_dependencies([3.0]):
            pass
    verify(graph)


# --- default graphs ----------------------------------------------------------------------
def test_default_graph_and_as_default():
    fl.reset_default_graph()
    outer = fl.get_default_graph()
    a = fl.constant(1.0, name="a")
    g = fl.Graph()
    with g.as_default() as entered:
        assert entered is g and fl.get_default_graph() is g
        b = fl.constant(2.0, name="a")
        with pytest.raises(RuntimeError, match="reset_default_graph"):
            fl.reset_default_graph()
        with pytest.raises(OpError, match="another graph"):
            fl.add(a, 1.0)
    assert fl.get_default_graph() is outer
    assert a.graph is outer and b.graph is g and b.op.name == "a"
    fl.reset_default_graph()
    assert fl.get_default_graph() is not outer and len(fl.get_default_graph()) == 0

    seen = []
    thread = threading.Thread(target=lambda: seen.append(fl.get_default_graph()))
    with g.as_default():
        thread.start()
        thread.join()
    assert seen[0] is not g                            # as_default is per thread


# --- raw ops -----------------------------------------------------------------------------
def test_raw_ops_use_tensorflow_names(graph):
    x = fl.placeholder(fl.float32, [2, 3], name="x")
    y = fl.raw_ops.AddV2(x=x, y=x)
    assert y.op.type == "AddV2" and y.op.get_attr("T") is fl.float32
    z = fl.raw_ops.AddV2(x=x, y=2.0, T=fl.float32, name="z")    # explicit T and a converted 2.0
    assert z.op.name == "z" and z.op.inputs[1].dtype is fl.float32
    n = fl.raw_ops.Neg(x=fl.constant([1, 2], fl.int64))
    assert n.dtype is fl.int64
    s = fl.raw_ops.Shape(input=x, out_type=fl.int64)
    assert s.dtype is fl.int64 and s.shape == (2,)
    assert "AddV2" in dir(fl.raw_ops) and "x" in fl.raw_ops.AddV2.__doc__
    i = fl.placeholder(fl.int32, [2, 3], name="i")
    with pytest.raises(OpError, match=r"AddV2.*input y of AddV2 is i32 but T=f32"):
        fl.raw_ops.AddV2(x=x, y=i)
    with pytest.raises(OpError, match=r"input x of AddV2 is f32 but T=i32"):
        fl.raw_ops.AddV2(x=x, y=x, T=fl.int32)
    with pytest.raises(OpError, match="attr T=bool is not allowed for AddV2"):
        fl.raw_ops.AddV2(x=fl.constant(True), y=fl.constant(False))
    with pytest.raises(OpError, match="AddV2 needs input 'y'"):
        fl.raw_ops.AddV2(x=x)
    with pytest.raises(OpError, match="has no attr 'colour'"):
        fl.raw_ops.AddV2(x=x, y=x, colour="red")
    with pytest.raises(OpError, match="twice"):
        fl.raw_ops.AddV2(x, x=x, y=x)
    with pytest.raises(AttributeError, match="no op named 'NoSuchOp'"):
        fl.raw_ops.NoSuchOp
    with pytest.raises(OpError, match="1.5.*not exactly representable as i32"):
        fl.raw_ops.AddV2(x=i, y=1.5)
    verify(graph)


# --- constants and conversion --------------------------------------------------------------
@pytest.mark.parametrize("dtype", [fl.float16, fl.float32, fl.float64, fl.int8, fl.int16,
                                   fl.int32, fl.int64, fl.uint8, fl.bool_])
def test_constants_of_every_dtype(graph, dtype):
    value = np.array([[1, 0, 1], [0, 1, 1]]).astype(dtype.np)
    c = fl.constant(value)
    assert c.dtype is dtype and c.shape == (2, 3)
    got = c.op.get_attr("value")
    assert got.dtype == dtype.np and np.array_equal(got, value)
    shaped = fl.constant(value, shape=[3, 2]).op.get_attr("value")
    value[0, 0] = 0                                    # the graph holds its own copies
    assert got[0, 0] == 1 and shaped[0, 0] == 1
    d = fl.constant(True if dtype is fl.bool_ else 1, dtype=dtype, shape=[2, 2])
    assert d.dtype is dtype and d.shape == (2, 2)
    assert np.array_equal(d.op.get_attr("value"), np.ones((2, 2), dtype.np))


def test_convert_to_tensor_rules(graph):
    assert fl.convert_to_tensor(1.5).dtype is fl.float32
    assert fl.convert_to_tensor(3).dtype is fl.int32
    assert fl.convert_to_tensor(2**40).dtype is fl.int64
    assert fl.convert_to_tensor(True).dtype is fl.bool_
    assert fl.convert_to_tensor([[1.0, 2.0]]).shape == (1, 2)
    assert fl.convert_to_tensor(np.float64(1.5)).dtype is fl.float64
    assert fl.convert_to_tensor(np.arange(3, dtype=np.int16)).dtype is fl.int16
    assert fl.convert_to_tensor(np.arange(3, dtype=np.uint32)).dtype is fl.uint32
    assert fl.convert_to_tensor(2**64 - 1, dtype=fl.uint64).dtype is fl.uint64
    assert fl.convert_to_tensor(2, dtype=fl.float32).dtype is fl.float32
    assert fl.convert_to_tensor(2.0, dtype=fl.int32).dtype is fl.int32       # exact: fine
    x = fl.placeholder(fl.float32, [], name="x")
    assert fl.convert_to_tensor(x) is x
    lossy = [(1.5, fl.int32), (2**31, fl.int32), (-1, fl.uint8), (1e6, fl.float16),
             (True, fl.int32), (1, fl.bool_), (float("nan"), fl.int64), ("text", fl.float32),
             (2**70, None), (1 + 2j, None), (-1, fl.uint32), (2**64, fl.uint64),
             (np.arange(254, 257, dtype=np.uint32), fl.uint8)]
    for value, dtype in lossy:
        with pytest.raises(TypeError):
            fl.convert_to_tensor(value, dtype=dtype)
    with pytest.raises(TypeError, match="is f32, expected i32"):
        fl.convert_to_tensor(x, dtype=fl.int32)
    with pytest.raises(TypeError, match="has no value"):
        fl.convert_to_tensor(fl.raw_ops.NoOp())
    i = fl.placeholder(fl.int32, [], name="i")
    assert (i + 2).dtype is fl.int32 and (x * 2).dtype is fl.float32
    with pytest.raises(TypeError):
        i + 0.5                                        # as in TensorFlow: no silent truncation


def test_constant_shape_errors(graph):
    assert fl.constant([1, 2, 3, 4], shape=[2, 2]).shape == (2, 2)
    with pytest.raises(ValueError, match="3 elements cannot have shape"):
        fl.constant([1, 2, 3], shape=[2, 2])


# --- locations and handles -----------------------------------------------------------------
def test_locations_point_at_the_users_line(graph):
    here = os.path.abspath(__file__)
    x = fl.placeholder(fl.float32, [None], name="x"); line_x = _line()  # noqa: E702
    y = (x * 2.0); line_y = _line()  # noqa: E702
    for t, line, col in ((x, line_x, 9), (y, line_y, 10)):
        loc = t.op.location
        assert os.path.abspath(loc.file) == here
        assert (loc.line, loc.col) == (line, col)
        assert not os.path.isabs(loc.file)             # relative: nothing machine-specific
    line_err = _line() + 2
    with pytest.raises(OpError) as info:
        fl.raw_ops.AddV2(x=x, y=fl.constant([1], fl.int32))
    assert f"test_builder.py:{line_err}:9: " in str(info.value)


def test_operation_and_tensor_properties(graph):
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    with fl.device("/job:worker"):
        y = fl.add(x, 1.0, name="y")
    op = y.op
    assert isinstance(op, fl.Operation) and op.name == "y" and op.type == "AddV2"
    assert op.graph is graph and op.device == "/job:worker"
    assert [t.name for t in op.inputs] == ["x:0", "Const:0"]
    assert op.outputs == [y] and op.values() == (y,)
    assert op.get_attr("T") is fl.float32
    with pytest.raises(ValueError, match="has no attr 'Q'"):
        op.get_attr("Q")
    assert y.value_index == 0 and y.dtype is fl.float32 and y.shape == (None, 3)
    assert y.get_shape() == (None, 3) and y.graph is graph and y.device == "/job:worker"
    assert x.consumers() == [op]
    assert y == graph.get_tensor_by_name("y:0") and hash(y) == hash(graph.get_tensor_by_name("y:0"))
    assert op == graph.get_operation_by_name("y") and len({op, graph.get_operation_by_name("y")}) == 1
    assert [o.name for o in graph.get_operations()][:2] == ["x", "Const"]
    assert "fl.Tensor 'y:0'" in repr(y) and "AddV2" in repr(op)
    with pytest.raises(TypeError, match="truth value"):
        bool(y)
    with pytest.raises(TypeError, match="unknown first dim"):
        len(y)
    with pytest.raises(ValueError, match="names an operation"):
        graph.get_tensor_by_name("y")
    assert len(fl.constant([[1, 2]])) == 1
    graph.add_to_collection("losses", y)
    assert graph.get_collection("losses") == [y] and graph.get_collection("none") == []
    Pair = collections.namedtuple("Pair", "a b")
    assert Pair(y, x).a is y
