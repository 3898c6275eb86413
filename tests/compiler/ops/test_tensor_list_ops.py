"""The dense TensorList ops (TensorFlow's names, XLA's dense lists): compiled C against the
numpy interpreter, with element shapes fixed by the first item, lists as while_loop variables
(set item by item, pushed and popped), fed run-time dims, and the run-time errors (index out of
range, popping an empty list, an item of another shape) in both backends."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError

R = fl.raw_ops


def _fails_in_both(graph, fetch, feed, *needles):
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises(FlowcError) as info:
                s.run(fetch, feed)
        text = str(info.value)
        assert f"'{fetch.op.name}'" in text, (backend, text)
        for needle in needles:
            assert needle in text, (backend, text)


def test_reserve_set_get_stack_length_and_element_shape(graph, rng):
    x = fl.placeholder(fl.f32, [None, 3], name="x")
    i = fl.placeholder(fl.i32, [], name="i")
    n = fl.placeholder(fl.i32, [], name="n")
    known = R.TensorListReserve(element_shape=[2, 3], num_elements=4, element_dtype=fl.f32)
    assert known.shape == (4, 2, 3)
    lazy = R.TensorListReserve(element_shape=[-1, 3], num_elements=n, element_dtype=fl.f32)
    assert lazy.shape == (None, None, 3)
    set_known = R.TensorListSetItem(input_handle=known, index=i, item=fl.ones([2, 3]) * 7.0)
    set_lazy = R.TensorListSetItem(input_handle=lazy, index=i, item=x)
    twice = R.TensorListSetItem(input_handle=set_lazy, index=0, item=x * 2.0)
    fetches = {
        "known": R.TensorListStack(input_handle=set_known, element_shape=[2, 3],
                                   element_dtype=fl.f32, num_elements=4),
        "lazy": R.TensorListStack(input_handle=twice, element_shape=[-1, 3],
                                  element_dtype=fl.f32),
        "item": R.TensorListGetItem(input_handle=twice, index=i, element_shape=[-1, 3],
                                    element_dtype=fl.f32),
        "length": R.TensorListLength(input_handle=twice),
        "eshape": R.TensorListElementShape(input_handle=twice, shape_type=fl.i64),
        "unset": R.TensorListStack(input_handle=lazy, element_shape=-1, element_dtype=fl.f32),
    }
    assert fetches["lazy"].shape == (None, None, 3)
    assert fetches["item"].shape == (None, 3)
    for rows, index, count in ((2, 1, 3), (0, 0, 1), (5, 3, 4)):
        xv = rng.standard_normal((rows, 3)).astype(np.float32)
        got = check_against_interpreter(graph, fetches, {x: xv, i: np.int32(index),
                                                         n: np.int32(count)})
        want = np.zeros((count, rows, 3), np.float32)
        want[index] = xv
        want[0] = 2 * xv
        np.testing.assert_array_equal(got["lazy"], want)
        np.testing.assert_array_equal(got["item"], want[index])
        assert got["length"] == count and got["eshape"].tolist() == [rows, 3]
        assert got["known"][index].tolist() == [[7.0] * 3] * 2
        assert got["unset"].shape == (count, 0, 3)        # no item yet: zero-size elements


def test_from_tensor_gather_resize_and_growing_set_item(graph, rng):
    t = fl.placeholder(fl.i32, [None, 2], name="t")
    idx = fl.placeholder(fl.i32, [None], name="idx")
    size = fl.placeholder(fl.i32, [], name="size")
    lst = R.TensorListFromTensor(tensor=t, element_shape=[2])
    fetches = {
        "gather": R.TensorListGather(input_handle=lst, indices=idx, element_shape=[-1],
                                     element_dtype=fl.i32),
        "resize": R.TensorListStack(input_handle=R.TensorListResize(input_handle=lst, size=size),
                                    element_shape=[2], element_dtype=fl.i32),
        "grown": R.TensorListStack(
            input_handle=R.TensorListSetItem(input_handle=lst, index=size,
                                             item=fl.constant([9, 9]),
                                             resize_if_index_out_of_bounds=True),
            element_shape=[2], element_dtype=fl.i32),
        "same": R.TensorListStack(input_handle=lst, element_shape=[-1], element_dtype=fl.i32),
    }
    tv = rng.integers(-9, 9, size=(4, 2)).astype(np.int32)
    for ids, s in (([3, 0, 0], 2), ([], 6), ([1], 4)):
        got = check_against_interpreter(graph, fetches, {t: tv, idx: np.array(ids, np.int32),
                                                         size: np.int32(s)})
        np.testing.assert_array_equal(got["gather"], tv[ids].reshape(-1, 2))
        want = np.zeros((s, 2), np.int32)
        want[:min(s, 4)] = tv[:s]
        np.testing.assert_array_equal(got["resize"], want)
        grown = np.zeros((max(4, s + 1), 2), np.int32)
        grown[:4] = tv
        grown[s] = 9
        np.testing.assert_array_equal(got["grown"], grown)
        np.testing.assert_array_equal(got["same"], tv)


def test_a_list_set_item_by_item_in_a_while_loop(graph, rng):
    """Keras's RNN loop: an output list reserved with an unknown batch dim, one item set per
    iteration from an input list read item by item."""
    x = fl.placeholder(fl.f32, [None, 5, 3], name="x")          # [batch, time, features]
    steps = R.TensorListFromTensor(tensor=fl.transpose(x, [1, 0, 2]), element_shape=[-1, 3])
    out = R.TensorListReserve(element_shape=[-1, 3], num_elements=5, element_dtype=fl.f32)

    def body(t, h, acc):
        x_t = R.TensorListGetItem(input_handle=steps, index=t, element_shape=[-1, 3],
                                  element_dtype=fl.f32)
        h = fl.tanh(x_t + 0.5 * h)
        return t + 1, h, R.TensorListSetItem(input_handle=acc, index=t, item=h)

    h0 = fl.zeros_like(fl.transpose(x, [1, 0, 2])[0])
    _, h, acc = fl.while_loop(lambda t, h, acc: t < 5, body, [0, h0, out],
                              shape_invariants=[[], [None, 3], [5, None, 3]])
    stacked = R.TensorListStack(input_handle=acc, element_shape=[-1, 3], element_dtype=fl.f32,
                                num_elements=5)
    for batch in (2, 0, 3):
        xv = rng.standard_normal((batch, 5, 3)).astype(np.float32)
        got = check_against_interpreter(graph, {"seq": stacked, "h": h}, {x: xv})
        hv, want = np.zeros((batch, 3), np.float32), []
        for k in range(5):
            hv = np.tanh(xv[:, k] + 0.5 * hv)
            want.append(hv)
        np.testing.assert_allclose(got["seq"], np.stack(want), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["h"], hv, rtol=1e-5, atol=1e-6)


def test_push_back_and_pop_back_in_loops(graph, rng):
    x = fl.placeholder(fl.f32, [None], name="x")
    n = fl.placeholder(fl.i32, [], name="n")
    empty = R.EmptyTensorList(element_shape=[-1], max_num_elements=-1, element_dtype=fl.f32)

    def push(i, lst):
        return i + 1, R.TensorListPushBack(input_handle=lst, tensor=x * fl.cast(i, fl.f32))

    _, pushed = fl.while_loop(lambda i, lst: i < n, push, [0, empty],
                              shape_invariants=[[], [None, None]])

    def pop(lst, acc):
        rest, last = R.TensorListPopBack(input_handle=lst, element_shape=[-1],
                                         element_dtype=fl.f32)
        return rest, acc * 10.0 + fl.reduce_sum(last)

    left, acc = fl.while_loop(lambda lst, acc: R.TensorListLength(input_handle=lst) > 1, pop,
                              [pushed, fl.constant(0.0)], shape_invariants=[[None, None], []])
    fetches = {"pushed": R.TensorListStack(input_handle=pushed, element_shape=[-1],
                                           element_dtype=fl.f32),
               "acc": acc, "left": R.TensorListLength(input_handle=left)}
    for count in (4, 1):
        xv = rng.integers(1, 3, size=3).astype(np.float32)
        got = check_against_interpreter(graph, fetches, {x: xv, n: np.int32(count)})
        want = np.stack([xv * k for k in range(count)])
        np.testing.assert_array_equal(got["pushed"], want)
        acc_want = 0.0
        for k in range(count - 1, 0, -1):
            acc_want = acc_want * 10 + float(want[k].sum())
        assert got["acc"] == pytest.approx(acc_want) and got["left"] == 1


def test_run_time_errors_name_the_node_in_both_backends(graph):
    x = fl.placeholder(fl.f32, [None], name="x")
    i = fl.placeholder(fl.i32, [], name="i")
    lst = R.TensorListReserve(element_shape=[-1], num_elements=3, element_dtype=fl.f32)
    filled = R.TensorListSetItem(input_handle=lst, index=0, item=x, name="fill")
    get = R.TensorListGetItem(input_handle=filled, index=i, element_shape=[-1],
                              element_dtype=fl.f32, name="get")
    _fails_in_both(graph, get, {x: np.ones(2, np.float32), i: np.int32(3)},
                   "Trying to access element 3 in a list with 3 elements")
    again = R.TensorListSetItem(input_handle=filled, index=i, item=fl.concat([x, x], 0),
                                name="again")
    _fails_in_both(graph, again, {x: np.ones(2, np.float32), i: np.int32(1)},
                   "incompatible shape")
    bad_set = R.TensorListSetItem(input_handle=lst, index=i, item=x, name="bad_set")
    _fails_in_both(graph, bad_set, {x: np.ones(2, np.float32), i: np.int32(-1)},
                   "Trying to modify element -1 in a list with 3 elements")
    empty = R.EmptyTensorList(element_shape=[2], max_num_elements=4, element_dtype=fl.f32)
    n = fl.placeholder(fl.i32, [], name="n")
    pop = R.TensorListPopBack(input_handle=R.TensorListResize(input_handle=empty, size=n),
                              element_shape=[2], element_dtype=fl.f32, name="pop")[1]
    _fails_in_both(graph, pop, {n: np.int32(0)}, "Trying to pop from an empty list")


def test_shape_functions_check_what_is_known():
    g = fl.Graph()
    with g.as_default():
        lst = R.TensorListReserve(element_shape=[2, 3], num_elements=4, element_dtype=fl.f32)
        with pytest.raises(ShapeError, match="does not match the list's element shape"):
            R.TensorListSetItem(input_handle=lst, index=0, item=fl.zeros([3, 2]))
        with pytest.raises(ShapeError, match="num_elements does not match"):
            R.TensorListStack(input_handle=lst, element_shape=-1, element_dtype=fl.f32,
                              num_elements=5)
        with pytest.raises(ShapeError, match="non negative"):
            R.TensorListReserve(element_shape=[2], num_elements=-1, element_dtype=fl.f32)
        unknown = R.TensorListReserve(element_shape=-1, num_elements=4, element_dtype=fl.f32)
        assert unknown.shape.ndims is None
        assert R.TensorListSetItem(input_handle=unknown, index=0,
                                   item=fl.zeros([5])).shape == (None, 5)
        assert R.TensorListPushBack(input_handle=lst, tensor=fl.zeros([2, 3])).shape == (5, 2, 3)


def test_scatters_make_and_grow_lists(graph, rng):
    t = fl.placeholder(fl.f32, [None, 2], name="t")
    idx = fl.placeholder(fl.i32, [None], name="idx")
    n = fl.placeholder(fl.i32, [], name="n")
    lazy = R.TensorListReserve(element_shape=[-1], num_elements=2, element_dtype=fl.f32)
    fetches = {
        "v1": R.TensorListScatter(tensor=t, indices=idx, element_shape=[-1]),
        "v2": R.TensorListScatterV2(tensor=t, indices=idx, element_shape=[2], num_elements=n),
        "into": R.TensorListScatterIntoExistingList(input_handle=R.TensorListFromTensor(
            tensor=fl.ones([3, 2]), element_shape=[2]), tensor=t, indices=idx),
        "lazy": R.TensorListScatterIntoExistingList(input_handle=lazy, tensor=t, indices=idx),
    }
    stacked = {k: R.TensorListStack(input_handle=v, element_shape=-1, element_dtype=fl.f32)
               for k, v in fetches.items()}
    for ids, count in (([2, 0, 2], 5), ([], 1), ([4], 0)):
        tv = rng.standard_normal((len(ids), 2)).astype(np.float32)
        got = check_against_interpreter(graph, stacked, {t: tv, idx: np.array(ids, np.int32),
                                                         n: np.int32(count)})

        def want(base):
            out = np.zeros((max([len(base)] + [i + 1 for i in ids]), 2), np.float32)
            out[:len(base)] = base
            for k, i in enumerate(ids):
                out[i] = tv[k]
            return out
        np.testing.assert_array_equal(got["v1"], want(np.zeros((0, 2))))
        np.testing.assert_array_equal(got["v2"], want(np.zeros((count, 2))))
        np.testing.assert_array_equal(got["into"], want(np.ones((3, 2))))
        np.testing.assert_array_equal(got["lazy"], want(np.zeros((2, 2))))
    bad = R.TensorListScatter(tensor=t, indices=idx, element_shape=[-1], name="bad")
    _fails_in_both(graph, bad, {t: np.ones((1, 2), np.float32), idx: np.array([-3], np.int32)},
                   "negative index")
