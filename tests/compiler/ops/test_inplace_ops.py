"""InplaceUpdate, InplaceAdd, InplaceSub (``y = x; y[i] op= v``): compiled C against the numpy
interpreter and numpy itself, for several dtypes, unknown leading dims, repeated and empty
indices and a ``v`` that is ``x`` itself; an index out of range is an error naming the node in
both; ``x`` is never changed where another reader sees it (a constant, a feed, a value read
twice, a loop invariant); and a loop variable built one row per iteration is written in place
(no copy of the whole tensor per iteration)."""
import numpy as np
import pytest

import dsl as fl
from compiler.codegen.emitter import emit_c
from compiler.passes.memory_plan import in_place_copies, storage_roots
from compiler.step import make_step_graph, optimize
from oracle import NO_FOLDING, check_against_interpreter, random_array
from runtime.errors import FlowcError


def _expected(mode, x, i, v):
    y = x.copy()
    for k, r in enumerate(i):
        y[r] = v[k] if mode == "update" else (y[r] + v[k] if mode == "add" else y[r] - v[k])
    return y


OPS = {"update": fl.raw_ops.InplaceUpdate, "add": fl.raw_ops.InplaceAdd,
       "sub": fl.raw_ops.InplaceSub}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
def test_row_updates_match_the_interpreter_and_numpy(graph, rng, dtype):
    x0 = random_array(rng, (5, 2, 3), dtype)
    cases = {"rows": np.array([4, 0], np.int32), "repeated": np.array([1, 3, 1], np.int32),
             "none": np.zeros(0, np.int32)}
    x = fl.placeholder(fl.DType.from_numpy(np.dtype(dtype)), [None, 2, 3], name="x")
    fetches, want, feed = {}, {}, {x: x0}
    for case, idx in cases.items():
        v0 = random_array(rng, (len(idx), 2, 3), dtype)
        v = fl.placeholder(fl.DType.from_numpy(np.dtype(dtype)), [None, 2, 3], name=f"v_{case}")
        i = fl.placeholder(fl.int32, [None], name=f"i_{case}")
        feed.update({v: v0, i: idx})
        for mode, op in OPS.items():
            fetches[f"{mode}_{case}"] = op(x=fl.identity(x), i=i, v=v)
            want[f"{mode}_{case}"] = _expected(mode, x0, idx, v0)
    got = check_against_interpreter(graph, fetches, feed)
    for name, w in want.items():
        np.testing.assert_array_equal(got[name], w, err_msg=name)


def test_a_bool_tensor_takes_row_updates(graph):
    x = fl.constant(np.zeros((3, 2), bool))
    y = fl.raw_ops.InplaceUpdate(x=x, i=fl.constant([1]), v=fl.constant([[True, False]]))
    got = check_against_interpreter(graph, {"y": y})
    np.testing.assert_array_equal(got["y"], [[False, False], [True, False], [False, False]])


def test_v_and_i_that_share_x_buffer_are_read_before_it_is_written(graph, rng):
    x = fl.placeholder(fl.float32, [3, 2], name="x")
    data = x * 1.0                                     # an op's result: written in place
    swapped = fl.raw_ops.InplaceUpdate(x=data, i=fl.constant([2, 1, 0]), v=data)
    xi = fl.placeholder(fl.int32, [3], name="xi")
    ids = xi + 0                                       # i is x itself
    moved = fl.raw_ops.InplaceUpdate(x=ids, i=ids, v=fl.constant([7, 8, 9]))
    x0 = rng.standard_normal((3, 2)).astype(np.float32)
    got = check_against_interpreter(graph, {"swapped": swapped, "moved": moved},
                                    {x: x0, xi: np.array([2, 0, 1], np.int32)})
    np.testing.assert_array_equal(got["swapped"], x0[::-1])
    np.testing.assert_array_equal(got["moved"], [8, 9, 7])


@pytest.mark.parametrize("backend", ["interpreter", "c"])
@pytest.mark.parametrize("bad", [3, -1])
def test_an_index_out_of_range_is_an_error_naming_the_node(graph, backend, bad):
    x = fl.placeholder(fl.float32, [3, 2], name="x")
    i = fl.placeholder(fl.int32, [2], name="i")
    y = fl.raw_ops.InplaceAdd(x=x * 2.0, i=i, v=fl.ones([2, 2]), name="rows_added")
    with fl.Session(graph=graph, backend=backend, options=NO_FOLDING) as s:
        with pytest.raises(FlowcError, match=rf"rows_added.*i\[1\] = {bad} is not in \[0, 3\)"):
            s.run(y, {x: np.zeros((3, 2), np.float32), i: np.array([0, bad], np.int32)})


def test_shapes_that_do_not_match_are_refused_when_the_graph_is_built(graph):
    with pytest.raises(FlowcError, match="differ at dim 1"):
        fl.raw_ops.InplaceUpdate(x=fl.zeros([3, 2]), i=fl.constant([0]), v=fl.zeros([1, 3]))
    with pytest.raises(FlowcError, match="2 indices but v has 1 rows"):
        fl.raw_ops.InplaceUpdate(x=fl.zeros([3, 2]), i=fl.constant([0, 1]), v=fl.zeros([1, 2]))


def test_x_is_left_alone_where_another_reader_sees_it(graph, rng):
    start = rng.standard_normal((4, 3)).astype(np.float32)
    const = fl.constant(start)
    fed = fl.placeholder(fl.float32, [4, 3], name="fed")
    twice = fed * 2.0
    row = fl.ones([1, 3])
    fetches = {"const_y": fl.raw_ops.InplaceUpdate(x=const, i=fl.constant([0]), v=row),
               "const": const,
               "fed_y": fl.raw_ops.InplaceAdd(x=fed, i=fl.constant([1]), v=row),
               "twice_y": fl.raw_ops.InplaceSub(x=twice, i=fl.constant([2]), v=row),
               "twice": fl.reshape(twice, [12])}
    fed_value = rng.standard_normal((4, 3)).astype(np.float32)
    before = fed_value.copy()
    got = check_against_interpreter(graph, fetches, {fed: fed_value})
    np.testing.assert_array_equal(fed_value, before)
    np.testing.assert_array_equal(got["const"], start)
    np.testing.assert_array_equal(got["twice"], (before * 2).reshape(-1))


def _row_loop(xs, steps, invariant):
    """Loop variable y takes row t of tanh(xs[t]) each iteration; ``z`` is an update of the
    loop invariant ``invariant`` each iteration (its buffer must not change)."""
    def body(t, y, z):
        row = fl.expand_dims(fl.tanh(fl.gather(xs, t)), 0)
        y = fl.raw_ops.InplaceUpdate(x=y, i=fl.reshape(t, [1]), v=row)
        z = z + fl.raw_ops.InplaceAdd(x=invariant, i=fl.reshape(t, [1]), v=row)
        return t + 1, y, z
    return fl.while_loop(lambda t, y, z: t < steps, body,
                         [fl.constant(np.int32(0)), fl.zeros_like(xs), fl.zeros_like(xs)])


def test_a_loop_builds_its_output_one_row_per_iteration_in_place(graph, rng):
    xs = fl.placeholder(fl.float32, [None, 2, 3], name="xs")
    steps = fl.placeholder(fl.int32, [], name="steps")
    invariant = fl.placeholder(fl.float32, [None, 2, 3], name="invariant")
    _, y, z = _row_loop(xs, steps, invariant)
    x0 = rng.standard_normal((6, 2, 3)).astype(np.float32)
    inv0 = rng.standard_normal((6, 2, 3)).astype(np.float32)
    got = check_against_interpreter(graph, {"y": y, "z": z},
                                    {xs: x0, steps: np.int32(4), invariant: inv0})
    want_y = np.zeros_like(x0)
    want_y[:4] = np.tanh(x0[:4])
    np.testing.assert_allclose(got["y"], want_y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["z"], 4 * inv0 + want_y, rtol=1e-5, atol=1e-5)
    step = make_step_graph(graph, [xs.output, steps.output, invariant.output],
                           [y.output, z.output], [])
    optimize(step)
    source = emit_c(step.graph, step.feeds, step.retvals).source
    order = list(step.graph)
    # the invariant's update writes a copy; the loop variable's is written in place, and the
    # variable keeps that buffer at the iteration's end
    assert {n.op for n in in_place_copies(order, storage_roots(order))} == {"InplaceAdd"}
    assert "the variable is unchanged */" in source
