"""The ONNX front end: models built with onnx.helper, imported, compiled to C and checked
against numpy; the ``flowc compile model.onnx`` path; errors that name the node."""
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import dsl as fl  # noqa: E402
import runtime  # noqa: E402
from compiler.model_loader import load_model, register_model_loader  # noqa: E402
from dsl.onnx import NotConstantError, UnsupportedOpsError, import_onnx, load_onnx_model  # noqa: E402
from cli_runner import flowc  # noqa: E402


def _save(model, tmp_path, name):
    onnx.checker.check_model(model)
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def _model(nodes, inputs, outputs, initializers, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _init(name, array):
    return numpy_helper.from_array(array, name)


@pytest.fixture
def mlp(tmp_path, rng):
    """784 -> 64 (relu) -> 10 (softmax), batch dim symbolic."""
    w1 = rng.normal(0, 0.05, (784, 64)).astype(np.float32)
    b1 = rng.normal(0, 0.05, (64,)).astype(np.float32)
    w2 = rng.normal(0, 0.05, (64, 10)).astype(np.float32)
    b2 = rng.normal(0, 0.05, (10,)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["mm1"], name="fc1/matmul"),
             helper.make_node("Add", ["mm1", "b1"], ["z1"], name="fc1/add"),
             helper.make_node("Relu", ["z1"], ["h1"], name="relu1"),
             helper.make_node("Gemm", ["h1", "w2", "b2"], ["logits"], name="fc2"),
             helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
                   [_init("w1", w1), _init("b1", b1), _init("w2", w2), _init("b2", b2)])

    def reference(x):
        h = np.maximum(x @ w1 + b1, 0)
        z = h @ w2 + b2
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return _save(model, tmp_path, "mlp.onnx"), reference


def _conv_ref(x, w, b, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1), np.float64)
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + kh, j:j + kw], w)
    return (out + b[None, :, None, None]).astype(np.float32)


def _max_pool_ref(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


@pytest.fixture
def cnn(tmp_path, rng):
    """Conv(3x3, pad 1) -> Relu -> MaxPool(2) -> Flatten -> Gemm, on NCHW 1x8x8 images."""
    wc = rng.normal(0, 0.3, (4, 1, 3, 3)).astype(np.float32)
    bc = rng.normal(0, 0.1, (4,)).astype(np.float32)
    wf = rng.normal(0, 0.1, (10, 64)).astype(np.float32)
    bf = rng.normal(0, 0.1, (10,)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "wc", "bc"], ["c"], name="conv", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"], name="fc", transB=1)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 8, 8])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 10])],
                   [_init("wc", wc), _init("bc", bc), _init("wf", wf), _init("bf", bf)])

    def reference(x):
        p = _max_pool_ref(np.maximum(_conv_ref(x, wc, bc, 1), 0))
        return p.reshape(len(x), -1) @ wf.T + bf
    return _save(model, tmp_path, "cnn.onnx"), reference


@pytest.mark.parametrize("which", ["mlp", "cnn"])
def test_models_compile_to_c_and_match_numpy(which, request, rng):
    path, reference = request.getfixturevalue(which)
    model = load_onnx_model(path)
    (feed,) = model.feeds
    assert feed.type.shape[0] is None                      # the symbolic batch dim stays unknown
    x = rng.random((5, 784) if which == "mlp" else (3, 1, 8, 8), dtype=np.float32)
    with fl.Session(graph=model.graph, backend="c") as sess:
        (got,) = sess.run([fl.Tensor(f) for f in model.fetches], {fl.Tensor(feed): x})
    np.testing.assert_allclose(got, reference(x), rtol=1e-4, atol=1e-5)
    assert model.fetch_names == (["probs"] if which == "mlp" else ["logits"])


def test_node_names_and_locations_come_from_the_onnx_file(mlp):
    path, _ = mlp
    graph = load_onnx_model(path).graph
    relu = [n for n in graph if n.op == "Relu"]
    assert [n.name for n in relu] == ["relu1/Relu"]
    assert relu[0].location.file == path and relu[0].location.line == 2   # node #2 of the file
    assert graph.get("x").op == "Placeholder"


def test_initializers_and_inputs_are_located_in_the_onnx_file(mlp):
    """Not at the Python line that imported the model: an error about a graph input names the
    .onnx file."""
    path, _ = mlp
    for as_variables in (False, True):
        imported = import_onnx(path, initializers_as_variables=as_variables)
        made_before_nodes = [n for n in imported.graph if n.location.file != path]
        assert made_before_nodes == []
        assert str(imported.graph.get("x").location) == f"{path}:0:0"
    graph = load_onnx_model(path).graph
    assert str(graph.get("w1").location) == f"{path}:0:0"
    with fl.Session(graph=imported.graph) as sess:
        with pytest.raises(runtime.errors.FeedError,
                           match=f"placeholder 'x'.*defined at {re.escape(path)}:0:0"):
            sess.run(imported.outputs["probs"])


def test_flowc_compile_an_onnx_file_through_the_loader_registration(mlp, tmp_path, capsys, rng):
    register_model_loader(".onnx", load_onnx_model)        # what the entry point declares
    path, reference = mlp
    assert load_model(path).fetch_names == ["probs"]
    out = tmp_path / "art"
    rc, _, err = flowc(capsys, "compile", path, "-o", out)
    assert rc == 0, err
    x = rng.random((2, 784), dtype=np.float32)
    (probs,) = runtime.load_artifact(str(out)).run({"x": x})
    np.testing.assert_allclose(probs, reference(x), rtol=1e-4, atol=1e-6)


def test_initializers_can_become_variables(mlp, rng):
    path, reference = mlp
    imported = import_onnx(path, initializers_as_variables=True)
    assert sorted(imported.variables) == ["b1", "b2", "w1", "w2"]
    x = rng.random((3, 784), dtype=np.float32)
    with imported.graph.as_default():
        init = fl.global_variables_initializer()
    with fl.Session(graph=imported.graph) as sess:
        sess.run(init)
        got = sess.run(imported.outputs["probs"], {imported.inputs["x"]: x})
    np.testing.assert_allclose(got, reference(x), rtol=1e-4, atol=1e-6)


def test_every_missing_op_is_listed_at_once_with_counts(tmp_path):
    nodes = [helper.make_node("NoSuchOp", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("NoSuchOp", ["b"], ["c"]),
             helper.make_node("TfIdfVectorizer", ["c"], ["d"], mode="TF", min_gram_length=1,
                              max_gram_length=1, max_skip_count=0, ngram_counts=[0],
                              ngram_indexes=[0], pool_int64s=[1]),
             helper.make_node("FancyOp", ["d"], ["y"], domain="com.example")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    path = str(tmp_path / "missing.onnx")
    onnx.save(model, path)
    with pytest.raises(UnsupportedOpsError) as err:
        load_onnx_model(path)
    text = str(err.value)
    assert "3 ONNX op(s) flowc cannot lower (4 node(s))" in text
    assert "NoSuchOp (not implemented): 2 node(s), first #0" in text
    assert "TfIdfVectorizer (not implemented): 1 node(s), first #3" in text
    assert "FancyOp (domain 'com.example'): 1 node(s), first #4" in text


def test_a_value_fed_at_run_time_that_shapes_the_graph_is_named_and_can_be_bound(tmp_path, rng):
    nodes = [helper.make_node("Slice", ["x", "starts", "ends"], ["y"], name="slice")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                           helper.make_tensor_value_info("starts", TensorProto.INT64, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
                   [_init("ends", np.array([2, 6], np.int64))])
    path = _save(model, tmp_path, "slice.onnx")
    with pytest.raises(NotConstantError) as err:
        load_onnx_model(path)
    assert err.value.input_name == "starts"
    assert f"{path}: node #0: Slice 'slice'" in str(err.value)
    model = load_onnx_model(path, constant_inputs={"starts": np.array([1, -3], np.int64)})
    assert [f.node.name for f in model.feeds] == ["x"]
    x = rng.random((2, 6), dtype=np.float32)
    with fl.Session(graph=model.graph) as sess:
        (y,) = sess.run([fl.Tensor(f) for f in model.fetches], {"x": x})
    np.testing.assert_array_equal(y, x[1:, -3:])


def test_a_flowc_error_points_at_the_onnx_node(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w"], ["y"], name="bad_matmul")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   [_init("w", np.ones((4, 5), np.float32))])
    path = str(tmp_path / "bad.onnx")
    onnx.save(model, path)
    with pytest.raises(fl.FlowcError) as err:
        load_onnx_model(path)
    assert f"{path}:1:0" in str(err.value) and "bad_matmul" in str(err.value)


def test_a_shape_computed_from_a_dynamic_batch_reshapes_at_run_time(tmp_path, rng):
    """PyTorch's ``x.view(x.size(0), -1)`` on a dynamic batch: Shape -> Gather -> Unsqueeze
    -> Concat -> Reshape, with the shape known only when the batch is."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"], name="flatten_view")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6])],
                   [_init("zero", np.array(0, np.int64)), _init("axes", np.array([0], np.int64)),
                    _init("minus_one", np.array([-1], np.int64))])
    model = load_onnx_model(_save(model, tmp_path, "view.onnx"))
    for batch in (1, 4):
        x = rng.random((batch, 2, 3), dtype=np.float32)
        with fl.Session(graph=model.graph) as sess:
            (y,) = sess.run([fl.Tensor(f) for f in model.fetches], {"x": x})
        np.testing.assert_array_equal(y, x.reshape(batch, 6))


def test_a_slice_to_a_dynamic_dims_length_runs_at_run_time(tmp_path, rng):
    """BERT's ``position_ids[:, :seq_len]`` exported on a dynamic sequence axis: the Slice's
    end is Shape(input_ids)[1], known only at run time but read from the input's shape, not
    its values: no input needs binding, and each fed length slices its own prefix."""
    positions = np.arange(64, dtype=np.int64)[None, :] * 10
    nodes = [helper.make_node("Shape", ["ids"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zero"], ["ends"]),
             helper.make_node("Slice", ["positions", "zero", "ends", "axes"], ["p"],
                              name="position_slice"),
             helper.make_node("Add", ["ids", "p"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64,
                                                         ["batch", "seq"])],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, ["batch", "seq"])],
                   [_init("positions", positions), _init("one", np.array(1, np.int64)),
                    _init("zero", np.array([0], np.int64)), _init("axes", np.array([1], np.int64))])
    model = load_onnx_model(_save(model, tmp_path, "positions.onnx"))
    assert [f.node.name for f in model.feeds] == ["ids"]
    for batch, seq in ((2, 8), (3, 5)):
        ids = rng.integers(0, 100, (batch, seq)).astype(np.int64)
        with fl.Session(graph=model.graph) as sess:
            (y,) = sess.run([fl.Tensor(f) for f in model.fetches], {"ids": ids})
        np.testing.assert_array_equal(y, ids + positions[:, :seq])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_and_scatter_elements_on_dynamic_shapes(tmp_path, rng, axis):
    """GatherElements / ScatterElements whose indices' shape is known only at run time
    (RoBERTa's position ids, gathered on a dynamic batch and sequence), negative indices too."""
    nodes = [helper.make_node("GatherElements", ["x", "i"], ["g"], axis=axis),
             helper.make_node("ScatterElements", ["x", "i", "u"], ["s"], axis=axis,
                              reduction="add")]
    dims = ["n", "m"]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims),
                           helper.make_tensor_value_info("i", TensorProto.INT64, ["a", "b"]),
                           helper.make_tensor_value_info("u", TensorProto.FLOAT, ["a", "b"])],
                   [helper.make_tensor_value_info("g", TensorProto.FLOAT, ["a", "b"]),
                    helper.make_tensor_value_info("s", TensorProto.FLOAT, dims)], [], opset=18)
    model = load_onnx_model(_save(model, tmp_path, "elements.onnx"))
    for shape, ishape in (((4, 5), (3, 2)), ((2, 3), (2, 3))):
        x = rng.random(shape, dtype=np.float32)
        i = rng.integers(-shape[axis], shape[axis], ishape).astype(np.int64)
        u = rng.random(ishape, dtype=np.float32)
        with fl.Session(graph=model.graph) as sess:
            g, s = sess.run([fl.Tensor(f) for f in model.fetches], {"x": x, "i": i, "u": u})
        full = np.where(i < 0, i + shape[axis], i)
        grid = list(np.indices(ishape))
        grid[axis] = full
        np.testing.assert_array_equal(g, x[tuple(grid)])
        want = x.copy()
        np.add.at(want, tuple(grid), u)
        np.testing.assert_allclose(s, want, rtol=1e-6)


def test_pads_computed_from_the_known_dims_of_a_dynamic_batch_fold(tmp_path, rng):
    """Swin's ``F.pad(x, (0, (4 - W % 4) % 4))`` exported on a dynamic batch: W is
    ``Shape(x)[3]``, known although the batch is not, so the pads fold at import time and the
    padded width stays static."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "three"], ["w"], axis=0),
             helper.make_node("Mod", ["w", "four"], ["r"]),
             helper.make_node("Sub", ["four", "r"], ["q"]),
             helper.make_node("Mod", ["q", "four"], ["pad"]),
             helper.make_node("Unsqueeze", ["pad", "zero"], ["pad1"]),
             helper.make_node("Concat", ["zeros7", "pad1"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"], name="window_pad")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 3, 8])],
                   [_init("three", np.array(3, np.int64)), _init("four", np.array(4, np.int64)),
                    _init("zero", np.array([0], np.int64)),
                    _init("zeros7", np.zeros(7, np.int64))])
    model = load_onnx_model(_save(model, tmp_path, "window_pad.onnx"))
    assert fl.Tensor(model.fetches[0]).shape.as_list() == [None, 2, 3, 8]
    for batch in (1, 3):
        x = rng.random((batch, 2, 3, 5), dtype=np.float32)
        with fl.Session(graph=model.graph) as sess:
            (y,) = sess.run([fl.Tensor(f) for f in model.fetches], {"x": x})
        np.testing.assert_array_equal(y, np.pad(x, [(0, 0), (0, 0), (0, 0), (0, 3)]))


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_to_sizes_with_a_dynamic_batch(tmp_path, rng, mode):
    """``F.interpolate(x, size=(8, 6))`` exported on a dynamic batch: sizes are
    ``Concat(Shape(x)[:2], [8, 6])`` (the TorchScript exporter's Slice, the dynamo exporter's
    Shape(start, end)), the batch known only at run time; and scales that keep the batch.
    Checked against onnx's reference Resize."""
    from onnx.reference import ReferenceEvaluator
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "two"], ["nc"]),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode),
             helper.make_node("Resize", ["x", "", "scales"], ["z"], mode=mode),
             helper.make_node("Shape", ["x"], ["nc2"], start=0, end=2),    # dynamo's form
             helper.make_node("Concat", ["nc2", "hw"], ["sizes2"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes2"], ["w"], mode=mode)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 4, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 8, 6]),
                    helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 2, 8, 1]),
                    helper.make_tensor_value_info("w", TensorProto.FLOAT, ["N", 2, 8, 6])],
                   [_init("zero", np.array([0], np.int64)), _init("two", np.array([2], np.int64)),
                    _init("hw", np.array([8, 6], np.int64)),
                    _init("scales", np.array([1, 1, 2, 0.5], np.float32))])
    path = _save(model, tmp_path, "interpolate.onnx")
    reference = ReferenceEvaluator(path)
    imported = load_onnx_model(path)
    assert [fl.Tensor(f).shape.as_list() for f in imported.fetches] == \
        [[None, 2, 8, 6], [None, 2, 8, 1], [None, 2, 8, 6]]
    for batch in (1, 3):
        x = rng.random((batch, 2, 4, 3), dtype=np.float32)
        with fl.Session(graph=imported.graph) as sess:
            got = sess.run([fl.Tensor(f) for f in imported.fetches], {"x": x})
        for have, want in zip(got, reference.run(None, {"x": x})):
            np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6)


def test_values_computed_from_static_shapes_and_bound_inputs_are_folded(tmp_path, rng):
    """A center crop as ONNX's function body writes it: Slice starts from Shape(x) (static)
    and a graph input. The error names that graph input (not the intermediate value), and
    once it is bound the starts fold at import time."""
    nodes = [helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("Sub", ["xs", "size"], ["diff"]),
             helper.make_node("Div", ["diff", "two"], ["starts"]),
             helper.make_node("Add", ["starts", "size"], ["ends"]),
             helper.make_node("Slice", ["x", "starts", "ends"], ["y"], name="crop")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 5]),
                           helper.make_tensor_value_info("size", TensorProto.INT64, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                   [_init("two", np.array([2], np.int64))])
    path = _save(model, tmp_path, "crop.onnx")
    with pytest.raises(NotConstantError) as err:
        load_onnx_model(path)
    assert err.value.input_name == "size"
    assert "input 'starts'" in str(err.value) and "graph input 'size'" in str(err.value)
    model = load_onnx_model(path, constant_inputs={"size": np.array([2, 3], np.int64)})
    x = rng.random((6, 5), dtype=np.float32)
    with fl.Session(graph=model.graph) as sess:
        (y,) = sess.run([fl.Tensor(f) for f in model.fetches], {"x": x})
    np.testing.assert_array_equal(y, x[2:4, 1:4])


def _pool_by_loops(x, kernel, strides, dilations, pads):
    """3-D max and mean (pads not counted) with the flat argmax, window by window in numpy."""
    n, c = x.shape[:2]
    padded = np.pad(x, [(0, 0), (0, 0)] + pads, constant_values=np.nan)
    out = [(p - (k - 1) * d - 1) // s + 1 for p, k, s, d in
           zip(padded.shape[2:], kernel, strides, dilations)]
    flat = np.pad(np.arange(x.size).reshape(x.shape), [(0, 0), (0, 0)] + pads, constant_values=-1)
    y_max, y_mean, arg = (np.zeros([n, c] + out, x.dtype), np.zeros([n, c] + out, x.dtype),
                          np.zeros([n, c] + out, np.int64))
    for pos in np.ndindex(*out):
        sl = tuple(slice(o * s, o * s + (k - 1) * d + 1, d) for o, s, k, d in
                   zip(pos, strides, kernel, dilations))
        window = padded[(slice(None), slice(None)) + sl].reshape(n, c, -1)
        where = flat[(slice(None), slice(None)) + sl].reshape(n, c, -1)
        y_max[(...,) + pos] = np.nanmax(window, axis=2)
        y_mean[(...,) + pos] = np.nanmean(window, axis=2)
        best = np.nanargmax(window, axis=2)
        arg[(...,) + pos] = np.take_along_axis(where, best[..., None], axis=2)[..., 0]
    return y_max, y_mean, arg


def test_3d_dilated_pooling_and_max_pool_indices_match_numpy(tmp_path, rng):
    """Windows flowc's MaxPool/AvgPool kernels don't take (3-D, dilated, with the Indices
    output) are lowered by window offsets; checked window by window against numpy."""
    attrs = dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], dilations=[2, 1, 2],
                 pads=[1, 0, 1, 0, 1, 1])
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "i"], name="max", **attrs),
             helper.make_node("AveragePool", ["x"], ["m"], name="mean", **attrs)]
    out = [2, 3, 4, 5, 3]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 8, 6])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, out),
                    helper.make_tensor_value_info("i", TensorProto.INT64, out),
                    helper.make_tensor_value_info("m", TensorProto.FLOAT, out)], [], opset=19)
    model = load_onnx_model(_save(model, tmp_path, "pool3d.onnx"))
    x = rng.standard_normal((2, 3, 5, 8, 6)).astype(np.float32)
    with fl.Session(graph=model.graph) as sess:
        y, i, m = sess.run([fl.Tensor(f) for f in model.fetches], {"x": x})
    want_max, want_mean, want_arg = _pool_by_loops(x, [2, 3, 2], [1, 2, 2], [2, 1, 2],
                                                   [(1, 0), (0, 1), (1, 1)])
    np.testing.assert_array_equal(y, want_max)
    np.testing.assert_array_equal(i, want_arg)
    np.testing.assert_allclose(m, want_mean, rtol=1e-5)


def test_training_mode_batch_norm_uses_batch_statistics_and_updates_the_running_ones(tmp_path, rng):
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"],
                            ["y", "running_mean", "running_var"], name="bn", training_mode=1,
                            momentum=0.7, epsilon=1e-3)
    c = 4
    params = {"s": rng.random(c), "b": rng.random(c), "mean": rng.random(c), "var": rng.random(c)}
    params = {k: v.astype(np.float32) for k, v in params.items()}
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, c, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, c, 5]),
                    helper.make_tensor_value_info("running_mean", TensorProto.FLOAT, [c]),
                    helper.make_tensor_value_info("running_var", TensorProto.FLOAT, [c])],
                   [_init(k, v) for k, v in params.items()], opset=15)
    model = load_onnx_model(_save(model, tmp_path, "bn.onnx"))
    x = rng.standard_normal((3, c, 5)).astype(np.float32)
    with fl.Session(graph=model.graph) as sess:
        y, mean, var = sess.run([fl.Tensor(f) for f in model.fetches], {"x": x})
    batch_mean, batch_var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    want = (x - batch_mean[:, None]) / np.sqrt(batch_var[:, None] + 1e-3)
    np.testing.assert_allclose(y, want * params["s"][:, None] + params["b"][:, None], rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(mean, 0.7 * params["mean"] + 0.3 * batch_mean, rtol=1e-5)
    np.testing.assert_allclose(var, 0.7 * params["var"] + 0.3 * batch_var, rtol=1e-5)


def _conv_transpose_by_loops(x, w, b, strides, dilations, pads, output_padding, group):
    n, cin = x.shape[:2]
    cig, cog = cin // group, w.shape[1]
    full = [s * (i - 1) + op + (k - 1) * d + 1 for i, s, op, k, d in
            zip(x.shape[2:], strides, output_padding, w.shape[2:], dilations)]
    y = np.zeros([n, cog * group] + full, np.float64)
    for pos in np.ndindex(*x.shape[2:]):
        for tap in np.ndindex(*w.shape[2:]):
            at = tuple(p * s + k * d for p, s, k, d in zip(pos, strides, tap, dilations))
            for g in range(group):
                xs = x[(slice(None), slice(g * cig, (g + 1) * cig)) + pos]          # [n, cig]
                ws = w[(slice(g * cig, (g + 1) * cig), slice(None)) + tap]          # [cig, cog]
                y[(slice(None), slice(g * cog, (g + 1) * cog)) + at] += xs @ ws
    crop = tuple(slice(p0, f - p1) for (p0, p1), f in zip(pads, full))
    return (y[(slice(None), slice(None)) + crop] + b.reshape(1, -1, 1, 1, 1)).astype(x.dtype)


def test_3d_conv_transpose_with_strides_dilations_groups_matches_numpy(tmp_path, rng):
    attrs = dict(strides=[2, 1, 3], dilations=[1, 2, 1], pads=[1, 0, 2, 0, 1, 1],
                 output_padding=[1, 0, 2], group=2)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="up", **attrs)
    x = rng.standard_normal((2, 4, 3, 4, 2)).astype(np.float32)
    w = rng.standard_normal((4, 3, 2, 3, 2)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    want = _conv_transpose_by_loops(x, w, b, [2, 1, 3], [1, 2, 1], [(1, 0), (0, 1), (2, 1)],
                                    [1, 0, 2], 2)
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, want.shape)],
                   [_init("w", w), _init("b", b)])
    model = load_onnx_model(_save(model, tmp_path, "up3d.onnx"))
    with fl.Session(graph=model.graph) as sess:
        (y,) = sess.run([fl.Tensor(f) for f in model.fetches], {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_training_mode_dropout_keeps_and_scales_with_flowc_random_numbers(tmp_path, rng):
    """Training-mode Dropout draws its mask from flowc's Philox streams: kept elements are
    scaled by 1 / (1 - ratio), about 1 - ratio of them are kept, and training_mode fed as
    False makes it the identity."""
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], name="drop", seed=3)
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [100, 100]),
                            helper.make_tensor_value_info("t", TensorProto.BOOL, [])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [100, 100]),
                    helper.make_tensor_value_info("mask", TensorProto.BOOL, [100, 100])],
                   [_init("r", np.array(0.3, np.float32))])
    model = load_onnx_model(_save(model, tmp_path, "dropout.onnx"))
    x = rng.standard_normal((100, 100)).astype(np.float32) + 5.0
    with fl.Session(graph=model.graph) as sess:
        fetches = [fl.Tensor(f) for f in model.fetches]
        y, mask = sess.run(fetches, {"x": x, "t": np.bool_(True)})
        y_off, mask_off = sess.run(fetches, {"x": x, "t": np.bool_(False)})
    np.testing.assert_allclose(y, np.where(mask, x / np.float32(0.7), 0), rtol=1e-6)
    kept = mask.mean()
    assert abs(kept - 0.7) < 6 * np.sqrt(0.7 * 0.3 / mask.size), kept
    np.testing.assert_array_equal(y_off, x)
    assert mask_off.all()


# (input shape NCHW or NCW, group, out channels, kernel, attrs): depthwise convolutions
# (group == input channels, any multiplier) and general grouped ones
GROUPED_CONVS = [
    ("depthwise", (2, 4, 7, 6), 4, 4, (3, 3), dict(pads=[1, 1, 1, 1])),
    ("depthwise_x3", (1, 4, 8, 7), 4, 12, (3, 2), dict(strides=[2, 1], pads=[1, 0, 2, 1])),
    ("depthwise_dilated", (2, 3, 9, 9), 3, 6, (3, 3), dict(dilations=[2, 1],
                                                           auto_pad="SAME_UPPER")),
    ("depthwise_1d", (2, 5, 11), 5, 10, (3,), dict(strides=[2], pads=[1, 1])),
    ("grouped", (2, 4, 6, 5), 2, 6, (3, 3), dict(pads=[1, 1, 1, 1])),
    ("grouped_x2", (1, 6, 7, 7), 3, 6, (2, 3), dict(strides=[2, 2], dilations=[1, 2])),
]


@pytest.mark.parametrize("case", GROUPED_CONVS, ids=[c[0] for c in GROUPED_CONVS])
def test_grouped_and_depthwise_conv_match_onnx_reference(tmp_path, rng, case):
    from onnx.reference import ReferenceEvaluator
    what, xshape, group, cout, kernel, attrs = case
    x = rng.standard_normal(xshape).astype(np.float32)
    w = rng.standard_normal((cout, xshape[1] // group, *kernel)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", group=group,
                            kernel_shape=list(kernel), **attrs)
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                  [f"d{i}" for i in range(len(xshape))])],
                   [_init("w", w), _init("b", b)])
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    loaded = load_onnx_model(_save(model, tmp_path, f"{what}.onnx"))
    ops = [n.op for n in loaded.graph]
    if what.startswith("depthwise"):
        assert ops.count("DepthwiseConv2dNative") == 1
        assert "Conv2D" not in ops and "Split" not in ops and "ConcatV2" not in ops
    else:
        assert ops.count("Conv2D") == 1 and "DepthwiseConv2dNative" not in ops
        assert "Split" not in ops and "ConcatV2" not in ops
    with fl.Session(graph=loaded.graph) as sess:
        (y,) = sess.run([fl.Tensor(f) for f in loaded.fetches], {"x": x})
    assert y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine", ["blas", "onednn"])
def test_resnext_block_with_group_8_is_one_grouped_kernel(tmp_path, rng, monkeypatch, engine):
    """A ResNeXt bottleneck (1x1 -> grouped 3x3, group 8 -> 1x1, + the shortcut, ReLUs): the
    grouped Conv imports as one Conv2D, which compiles to one grouped _FusedConv2D (bias and
    ReLU fused) with no Split/ConcatV2, and matches ONNX's reference evaluator."""
    from onnx.reference import ReferenceEvaluator
    from compiler.codegen import onednn
    from compiler.step import make_step_graph, optimize
    if engine == "onednn" and not onednn.available():
        pytest.skip("oneDNN is not installed")
    monkeypatch.setenv("FLOWC_CONV_ENGINE", engine)
    c, mid = 32, 64
    x = rng.standard_normal((2, c, 10, 9)).astype(np.float32)
    inits = [_init("w1", (rng.standard_normal((mid, c, 1, 1)) * 0.2).astype(np.float32)),
             _init("b1", rng.standard_normal(mid).astype(np.float32)),
             _init("w2", (rng.standard_normal((mid, mid // 8, 3, 3)) * 0.2).astype(np.float32)),
             _init("b2", rng.standard_normal(mid).astype(np.float32)),
             _init("w3", (rng.standard_normal((c, mid, 1, 1)) * 0.2).astype(np.float32)),
             _init("b3", rng.standard_normal(c).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], group=8),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["c3", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)], inits)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    loaded = load_onnx_model(_save(model, tmp_path, "resnext.onnx"))
    ops = [n.op for n in loaded.graph]
    assert ops.count("Conv2D") == 3 and "Split" not in ops and "ConcatV2" not in ops
    feeds = [n.output(0) for n in loaded.graph if n.op == "Placeholder"]
    step = make_step_graph(loaded.graph, feeds, list(loaded.fetches))
    optimize(step)
    opt = [n for n in step.graph if n.op in ("Conv2D", "_FusedConv2D", "Split", "ConcatV2")]
    assert [n.op for n in opt] == ["_FusedConv2D"] * 3
    grouped = [n for n in opt if n.inputs[1].type.shape[2] * 8 == n.inputs[0].type.shape[3]]
    assert len(grouped) == 1 and list(grouped[0].attrs["fused_ops"]) == ["BiasAdd", "Relu"]
    with fl.Session(graph=loaded.graph) as sess:
        (y,) = sess.run([fl.Tensor(f) for f in loaded.fetches], {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
