"""fl.SparseTensor, fl.sparse_placeholder and the sparse ops (SparseToDense,
SparseTensorDenseMatMul, SparseReduceSum, SparseReorder, SparseTensorDenseAdd, SparseReshape,
SparseAdd): compiled C
against the interpreter and numpy, feeding and fetching sparse values, errors on bad indices in
both backends, embedding_lookup_sparse training a wide model, and a TensorFlow GraphDef."""
from __future__ import annotations

import os

import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter

BACKENDS = ("c", "interpreter")
DATA = os.path.join(os.path.dirname(__file__), "..", "data", "tf_sparse")


def _random_sparse(rng, shape, n, dtype=np.float32, ordered=True):
    """n distinct index rows inside shape (row-major order when ordered), random values."""
    flat = rng.choice(int(np.prod(shape)), size=n, replace=False)
    if ordered:
        flat = np.sort(flat)
    indices = np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)
    if np.dtype(dtype).kind == "f":
        values = rng.standard_normal(n).astype(dtype)
    else:
        values = rng.integers(-9, 9, size=n).astype(dtype)
    return fl.SparseTensorValue(indices, values, np.array(shape, np.int64))


def _summed(v: fl.SparseTensorValue) -> np.ndarray:
    out = np.zeros(v.dense_shape, v.values.dtype)
    np.add.at(out, tuple(v.indices.T), v.values)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_sparse_ops_compiled_match_the_interpreter_and_numpy(graph, dtype):
    rng = np.random.default_rng(1)
    fdt = fl.float32 if dtype == np.float32 else fl.int32
    value = _random_sparse(rng, [5, 7], 12, dtype, ordered=False)
    sp = fl.sparse_placeholder(fdt, shape=[5, 7], name="sp")
    b = fl.placeholder(fdt, [7, 3], name="b")
    bt = fl.placeholder(fdt, [4, 5], name="bt")
    d = fl.placeholder(fdt, [5, 7], name="d")
    ordered = fl.sparse.reorder(sp)
    fetches = {
        "dense": fl.sparse.to_dense(ordered, default_value=3),
        "matmul": fl.sparse_tensor_dense_matmul(sp, b),
        "matmul_adj": fl.sparse.sparse_dense_matmul(sp, bt, adjoint_a=True, adjoint_b=True),
        "sum0": fl.sparse.reduce_sum(sp, axis=0),
        "sum_keep": fl.sparse_reduce_sum(sp, axis=-1, keepdims=True),
        "sum_all": fl.sparse.reduce_sum(sp),
        "added": fl.sparse.add(fl.sparse.add(d, sp), sp),
        "indices": ordered.indices, "values": ordered.values,
    }
    bv = (rng.integers(-5, 5, size=(7, 3))).astype(dtype)
    btv = (rng.integers(-5, 5, size=(4, 5))).astype(dtype)
    dv = (rng.integers(-5, 5, size=(5, 7))).astype(dtype)
    got = check_against_interpreter(graph, fetches, {sp: value, b: bv, bt: btv, d: dv},
                                    rtol=1e-5, atol=1e-5)
    a = _summed(value)
    order = np.lexsort((value.indices[:, 1], value.indices[:, 0]))
    np.testing.assert_array_equal(got["indices"], value.indices[order])
    np.testing.assert_array_equal(got["values"], value.values[order])
    want_dense = np.full([5, 7], 3, dtype)
    want_dense[tuple(value.indices.T)] = value.values
    np.testing.assert_array_equal(got["dense"], want_dense)
    np.testing.assert_allclose(got["matmul"], a @ bv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["matmul_adj"], a.T @ btv.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["sum0"], a.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["sum_keep"], a.sum(1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["sum_all"], a.sum(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["added"], dv + 2 * a, rtol=1e-5, atol=1e-5)


def test_sparse_to_dense_forms_and_three_dim_reductions(graph):
    rng = np.random.default_rng(2)
    value = _random_sparse(rng, [3, 4, 2], 9)
    sp = fl.SparseTensor(value.indices, value.values, value.dense_shape)
    fetches = {
        "vector": fl.sparse_to_dense([1, 3, 4], [6], [1.5, 2.5, 3.5], default_value=-1.0),
        "scalar_value": fl.sparse_to_dense([[0, 1], [2, 0]], [3, 2], 7, default_value=0),
        "dense": fl.sparse_tensor_to_dense(sp),
        "sum02": fl.sparse.reduce_sum(sp, axis=[0, 2]),
        "sum1_keep": fl.sparse.reduce_sum(sp, axis=1, keepdims=True),
        "unvalidated": fl.sparse_to_dense([[2, 0], [0, 1], [2, 0]], [3, 2], [1, 2, 3],
                                          validate_indices=False),
    }
    got = check_against_interpreter(graph, fetches, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got["vector"], [-1, 1.5, -1, 2.5, 3.5, -1])
    np.testing.assert_array_equal(got["scalar_value"], [[0, 7], [0, 0], [7, 0]])
    a = _summed(value)
    np.testing.assert_array_equal(got["dense"], a)
    np.testing.assert_allclose(got["sum02"], a.sum((0, 2)), rtol=1e-6)
    np.testing.assert_allclose(got["sum1_keep"], a.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(got["unvalidated"], [[0, 2], [0, 0], [3, 0]])  # last wins


@pytest.mark.parametrize("backend", BACKENDS)
def test_feeding_and_fetching_sparse_values(graph, backend):
    sp = fl.sparse_placeholder(fl.float32, name="sp")
    assert isinstance(sp, fl.SparseTensor) and sp.dtype == fl.float32
    assert sp.indices.dtype == fl.int64 and sp.dense_shape.dtype == fl.int64
    doubled = fl.SparseTensor(sp.indices, sp.values * 2, sp.dense_shape)
    total = fl.sparse.reduce_sum(fl.sparse_placeholder(fl.float32, shape=[2, 3], name="q"))
    value = fl.SparseTensorValue(np.array([[0, 2], [1, 1]]), np.array([1.0, 4.0], np.float32),
                                 np.array([2, 3]))
    with fl.Session(backend=backend) as s:
        got = s.run(doubled, {sp: value})
        assert isinstance(got, fl.SparseTensorValue)
        np.testing.assert_array_equal(got.indices, value.indices)
        np.testing.assert_array_equal(got.values, [2.0, 8.0])
        np.testing.assert_array_equal(got.dense_shape, [2, 3])
        as_tuple = s.run({"d": fl.sparse.to_dense(sp)}, {sp: tuple(value)})
        np.testing.assert_array_equal(as_tuple["d"], [[0, 0, 1], [0, 4, 0]])
        q = [t for t in fl.get_default_graph().get_operations() if t.name == "q/indices"][0]
        assert s.run(total, {q.outputs[0]: value.indices,
                             "q/values:0": value.values}) == pytest.approx(5.0)
        with pytest.raises(TypeError, match="SparseTensorValue"):
            s.run(doubled, {sp: value.values})


def test_sparse_placeholder_static_shape(graph):
    sp = fl.sparse_placeholder(fl.float32, shape=[None, 4])
    assert sp.shape.as_list() == [None, 4]
    assert fl.sparse.placeholder(fl.int64).shape.rank is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_range_indices_are_errors_naming_the_node(graph, backend):
    sp = fl.sparse_placeholder(fl.float32, shape=[3, 4], name="sp")
    cases = {
        "to_dense": fl.sparse.to_dense(sp, name="to_dense"),
        "matmul": fl.sparse_tensor_dense_matmul(sp, fl.ones([4, 2]), name="matmul"),
        "reduce": fl.sparse.reduce_sum(sp, axis=0, name="reduce"),
        "reorder": fl.sparse.reorder(sp, name="reorder").values,
        "add": fl.sparse.add(sp, fl.zeros([3, 4])),
    }
    bad = fl.SparseTensorValue(np.array([[0, 1], [3, 0]]), np.array([1.0, 2.0], np.float32),
                               np.array([3, 4]))
    negative = bad._replace(indices=np.array([[0, 1], [1, -1]]))
    with fl.Session(backend=backend) as s:
        for name, t in cases.items():
            for value, row in ((bad, r"\[3, 0\]"), (negative, r"\[1, -1\]")):
                with pytest.raises(fl.errors.InvalidArgumentError,
                                   match=rf"'{t.op.name}'.*\[1\] = {row} is out of bounds"):
                    s.run(t, {sp: value})


@pytest.mark.parametrize("backend", BACKENDS)
def test_to_dense_refuses_unordered_and_repeated_indices(graph, backend):
    sp = fl.sparse_placeholder(fl.float32, shape=[3, 4])
    dense = fl.sparse.to_dense(sp, name="dense")
    unordered = fl.SparseTensorValue(np.array([[1, 1], [0, 3]]), np.ones(2, np.float32),
                                     np.array([3, 4]))
    repeated = unordered._replace(indices=np.array([[1, 1], [1, 1]]))
    with fl.Session(backend=backend) as s:
        with pytest.raises(fl.errors.InvalidArgumentError, match=r"'dense'.*out of order"):
            s.run(dense, {sp: unordered})
        with pytest.raises(fl.errors.InvalidArgumentError, match=r"'dense'.*repeated"):
            s.run(dense, {sp: repeated})
        np.testing.assert_array_equal(s.run(fl.sparse.to_dense(fl.sparse.reorder(sp)),
                                            {sp: unordered}),
                                      [[0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 0, 0]])


def test_shape_errors_name_the_node(graph):
    with pytest.raises(Exception, match="inner dimension"):
        fl.sparse_tensor_dense_matmul(fl.SparseTensor([[0, 0]], [1.0], [2, 3]), fl.ones([4, 2]))
    with pytest.raises(Exception, match="does not equal b"):
        fl.sparse.add(fl.SparseTensor([[0, 0]], [1.0], [2, 3]), fl.ones([2, 4]))
    with pytest.raises(TypeError, match="SparseTensor"):
        fl.sparse.add(fl.ones([2]), fl.ones([2]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_retain(graph, backend):
    sp = fl.SparseTensor([[0, 0], [1, 2], [2, 1]], [1.0, 2.0, 3.0], [3, 3])
    kept = fl.sparse.retain(sp, [True, False, True])
    with fl.Session(backend=backend) as s:
        got = s.run(kept)
    np.testing.assert_array_equal(got.indices, [[0, 0], [2, 1]])
    np.testing.assert_array_equal(got.values, [1.0, 3.0])
    np.testing.assert_array_equal(got.dense_shape, [3, 3])


def _lookup_want(table, ids: fl.SparseTensorValue, weights, combiner):
    rows = int(ids.indices[:, 0].max()) + 1
    out = np.zeros((rows, table.shape[1]))
    wsum = np.zeros(rows)
    w = np.ones(len(ids.values)) if weights is None else weights
    for (r, _), i, x in zip(ids.indices, ids.values, w):
        out[r] += x * table[i]
        wsum[r] += x * x if combiner == "sqrtn" else x
    if combiner == "sum":
        return out
    div = np.sqrt(wsum) if combiner == "sqrtn" else wsum
    return np.where(div[:, None] == 0, 0, out / np.where(div == 0, 1, div)[:, None])


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
def test_embedding_lookup_sparse_combiners(graph, combiner, weighted):
    rng = np.random.default_rng(3)
    table = rng.standard_normal((6, 3)).astype(np.float32)
    ids = fl.SparseTensorValue(np.array([[0, 0], [0, 1], [1, 0], [3, 0], [3, 2]]),
                               np.array([1, 4, 1, 5, 0]), np.array([4, 3]))
    weights = rng.uniform(0.5, 2.0, size=5).astype(np.float32) if weighted else None
    sp_ids = fl.sparse_placeholder(fl.int64, name="ids")
    sp_w = (fl.SparseTensor(sp_ids.indices, weights, sp_ids.dense_shape) if weighted else None)
    out = fl.nn.embedding_lookup_sparse(fl.constant(table), sp_ids, sp_w, combiner=combiner)
    got = check_against_interpreter(graph, [out], {sp_ids: ids}, rtol=1e-5, atol=1e-6)["0"]
    want = _lookup_want(table, ids, weights, combiner)       # row 2 (no ids): 0, as in TF
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not got[2].any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_wide_linear_model_with_embedding_lookup_sparse_trains(graph, backend):
    rng = np.random.default_rng(4)
    vocab, batch = 20, 16
    true_w = rng.standard_normal(vocab).astype(np.float32)
    ids = fl.sparse_placeholder(fl.int64, name="ids")
    y = fl.placeholder(fl.float32, [None], name="y")
    w = fl.Variable(np.zeros((vocab, 1), np.float32), name="w")
    bias = fl.Variable(0.0, name="bias")
    logits = fl.reshape(fl.nn.embedding_lookup_sparse(w, ids, None, combiner="sum"), [-1]) + bias
    loss = fl.reduce_mean(fl.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
    train = fl.train.AdagradOptimizer(0.5).minimize(loss)

    def batch_value():
        idx, vals, ys = [], [], []
        for r in range(batch):
            feats = rng.choice(vocab, size=3, replace=False)
            idx += [[r, k] for k in range(3)]
            vals += list(feats)
            ys.append(float(true_w[feats].sum() > 0))
        idx[-3:] = [[batch - 1, k] for k in range(3)]
        return (fl.SparseTensorValue(np.array(idx), np.array(vals), np.array([batch, 3])),
                np.array(ys, np.float32))

    eval_ids, eval_y = batch_value()
    with fl.Session(backend=backend) as s:
        s.run(fl.global_variables_initializer())
        before = s.run(loss, {ids: eval_ids, y: eval_y})
        for _ in range(60):
            v, labels = batch_value()
            s.run(train, {ids: v, y: labels})
        after = s.run(loss, {ids: eval_ids, y: eval_y})
    assert after < 0.6 * before


def test_a_tensorflow_graphdef_with_sparse_ops_imports_and_matches(tmp_path):
    pytest.importorskip("google.protobuf", reason="GraphDef support needs protobuf")
    from compiler.interop.graphdef import load_graphdef_model
    data = np.load(os.path.join(DATA, "sparse_graph.npz"))
    model = load_graphdef_model(os.path.join(DATA, "sparse_graph.pb"))
    g = model.graph
    feeds = {fl.Tensor(g.output(k[len("feed/"):] + ":0")): data[k]
             for k in data.files if k.startswith("feed/")}
    names = [k[len("want/"):] for k in data.files if k.startswith("want/")]
    fetches = [fl.Tensor(g.output(n + ":0")) for n in names]
    for backend in BACKENDS:
        with fl.Session(graph=g, backend=backend) as s:
            got = s.run(fetches, feeds)
        for n, v in zip(names, got):
            np.testing.assert_allclose(v, data["want/" + n], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{n} ({backend})")


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_sparse_tensors(graph, backend):
    sp = fl.sparse_placeholder(fl.float32, shape=[3, 4], name="sp")
    fetches = [fl.sparse.to_dense(sp, default_value=1.0),
               fl.sparse_tensor_dense_matmul(sp, fl.ones([4, 2])),
               fl.sparse.reduce_sum(sp, axis=1), fl.sparse.reorder(sp).values,
               fl.sparse.add(sp, fl.zeros([3, 4]))]
    empty = fl.SparseTensorValue(np.zeros((0, 2), np.int64), np.zeros(0, np.float32),
                                 np.array([3, 4]))
    with fl.Session(backend=backend) as s:
        dense, product, total, values, added = s.run(fetches, {sp: empty})
    np.testing.assert_array_equal(dense, np.ones((3, 4)))
    np.testing.assert_array_equal(product, np.zeros((3, 2)))
    np.testing.assert_array_equal(total, np.zeros(3))
    assert values.shape == (0,)
    np.testing.assert_array_equal(added, np.zeros((3, 4)))


def test_sparse_reshape_matches_numpy(graph):
    rng = np.random.default_rng(5)
    value = _random_sparse(rng, [4, 6], 7)
    sp = fl.sparse_placeholder(fl.float32, shape=[4, 6], name="sp")
    flat = fl.sparse.reshape(sp, [-1])
    cube = fl.sparse.reshape(sp, [2, -1, 3])
    fetches = {"flat_i": flat.indices, "flat_s": flat.dense_shape,
               "cube_i": cube.indices, "cube_s": cube.dense_shape,
               "cube": fl.sparse.to_dense(cube)}
    got = check_against_interpreter(graph, fetches, {sp: value})
    np.testing.assert_array_equal(got["flat_s"], [24])
    np.testing.assert_array_equal(got["flat_i"][:, 0],
                                  value.indices[:, 0] * 6 + value.indices[:, 1])
    np.testing.assert_array_equal(got["cube_s"], [2, 4, 3])
    np.testing.assert_array_equal(got["cube"], _summed(value).reshape(2, 4, 3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_reshape_errors(graph, backend):
    sp = fl.sparse_placeholder(fl.float32, shape=[4, 6], name="sp")
    value = fl.SparseTensorValue(np.array([[1, 2]]), np.ones(1, np.float32), np.array([4, 6]))
    with fl.Session(backend=backend) as s:
        with pytest.raises(fl.errors.InvalidArgumentError, match="'bad'.*24 dense values"):
            s.run(fl.sparse.reshape(sp, [5, -1], name="bad").indices, {sp: value})
        with pytest.raises(fl.errors.InvalidArgumentError, match="'two'.*only one output dim"):
            s.run(fl.sparse.reshape(sp, [-1, -1], name="two").indices, {sp: value})


def test_gradients_of_the_sparse_ops_compiled_match_the_interpreter(graph):
    rng = np.random.default_rng(6)
    value = _random_sparse(rng, [4, 5], 8, np.float64, ordered=False)
    indices = fl.constant(value.indices)
    vals = fl.placeholder(fl.float64, [8], name="vals")
    b = fl.placeholder(fl.float64, [5, 3], name="b")
    d = fl.placeholder(fl.float64, [4, 5], name="d")
    sp = fl.sparse.reorder(fl.SparseTensor(indices, vals, [4, 5]))
    loss = (fl.reduce_sum(fl.sparse_tensor_dense_matmul(sp, b) ** 2)
            + fl.reduce_sum(fl.sparse.reduce_sum(sp, axis=0) ** 2)
            + fl.reduce_sum(fl.sparse.add(sp, d) ** 2)
            + fl.reduce_sum(fl.sparse.to_dense(sp, default_value=0.5) ** 3))
    grads = fl.gradients(loss, [vals, b, d])
    feeds = {vals: value.values, b: rng.standard_normal((5, 3)), d: rng.standard_normal((4, 5))}
    got = check_against_interpreter(graph, grads, feeds, rtol=1e-10, atol=1e-12)
    a, bv, dv = _summed(value), feeds[b], feeds[d]
    dense = np.full(a.shape, 0.5)
    dense[tuple(value.indices.T)] = value.values
    d_a = 2 * (a @ bv) @ bv.T + 2 * a.sum(0, keepdims=True) + 2 * (a + dv) + 3 * dense ** 2
    np.testing.assert_allclose(got["0"], d_a[tuple(value.indices.T)], rtol=1e-10)
    np.testing.assert_allclose(got["1"], 2 * a.T @ (a @ bv), rtol=1e-10)
    np.testing.assert_allclose(got["2"], 2 * (a + dv), rtol=1e-10)


def test_sparse_add_of_two_sparse_tensors(graph):
    a = fl.sparse_placeholder(fl.float32, shape=[3, 4], name="a")
    b = fl.sparse_placeholder(fl.float32, shape=[3, 4], name="b")
    total = fl.sparse.add(a, b, threshold=0.5)
    weights = fl.range(0.0, fl.cast(fl.shape(total.values)[0], fl.float32)) + 1.0
    grads = fl.gradients(fl.reduce_sum(total.values * weights), [a.values, b.values])
    av = fl.SparseTensorValue(np.array([[0, 1], [1, 0], [2, 3]]),
                              np.array([1, 2, 3], np.float32), np.array([3, 4]))
    bv = fl.SparseTensorValue(np.array([[0, 0], [1, 0], [2, 3]]),
                              np.array([5, 6, -2.75], np.float32), np.array([3, 4]))
    got = check_against_interpreter(
        graph, {"indices": total.indices, "values": total.values, "shape": total.dense_shape,
                "a_grad": grads[0], "b_grad": grads[1]}, {a: av, b: bv})
    # [2, 3] sums to 0.25, under the threshold: dropped
    np.testing.assert_array_equal(got["indices"], [[0, 0], [0, 1], [1, 0]])
    np.testing.assert_array_equal(got["values"], [5, 1, 8])
    np.testing.assert_array_equal(got["shape"], [3, 4])
    np.testing.assert_array_equal(got["a_grad"], [2, 3, 0])
    np.testing.assert_array_equal(got["b_grad"], [1, 3, 0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_add_refuses_mismatched_shapes_and_bad_indices(graph, backend):
    a = fl.sparse_placeholder(fl.float32, shape=[3, 4], name="a")
    b = fl.sparse_placeholder(fl.float32, name="b")
    total = fl.sparse.add(a, b).values
    av = fl.SparseTensorValue(np.array([[0, 1]]), np.ones(1, np.float32), np.array([3, 4]))
    with fl.Session(backend=backend) as s:
        with pytest.raises(fl.errors.InvalidArgumentError, match="'SparseAdd'.*shapes do not"):
            s.run(total, {a: av, b: av._replace(dense_shape=np.array([3, 5]))})
        with pytest.raises(fl.errors.InvalidArgumentError, match=r"b_indices\[0\] = \[3, 0\]"):
            s.run(total, {a: av, b: av._replace(indices=np.array([[3, 0]]))})
