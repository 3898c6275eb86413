"""The dataset and iterator ops by their TensorFlow names (``compiler/ops/dataset.py``): the
compiled step against the reference interpreter (``check_against_interpreter``, one run each,
so the first element), and the shape functions' errors."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.dtypes import DType

I64 = DType.i64


def _c(v):
    return fl.constant(np.int64(v))


def _types(types, shapes):
    return {"output_types": types, "output_shapes": shapes}


def _first(handle, types, shapes, name="it"):
    it = fl.apply_op("IteratorV2", [], {"shared_name": name, **_types(types, shapes)}, name=name)
    init = fl.apply_op("MakeIterator", [handle, it], {})
    with fl.control_dependencies([init]):
        out = fl.apply_op("IteratorGetNext", [it], _types(types, shapes))
    return out if isinstance(out, list) else [out]


def test_slice_shuffle_batch_first_batch_matches(graph):
    x = np.arange(24, dtype=np.float32).reshape(12, 2)
    y = np.arange(12, dtype=np.int32)
    types = [DType.f32, DType.i32]
    ds = fl.apply_op("TensorSliceDataset", [[fl.constant(x), fl.constant(y)]],
                     {"Toutput_types": types, **_types(types, [(2,), ()])})
    ds = fl.apply_op("ShuffleDataset", [ds, _c(5), _c(11), _c(12)],
                     {"reshuffle_each_iteration": True, **_types(types, [(2,), ()])})
    ds = fl.apply_op("BatchDatasetV2", [ds, _c(4), fl.constant(True)],
                     _types(types, [(4, 2), (4,)]))
    a, b = _first(ds, types, [(4, 2), (4,)])
    got = check_against_interpreter(graph, [a, b])
    np.testing.assert_array_equal(got["0"], x[got["1"]])
    assert len(set(got["1"].tolist())) == 4


@pytest.mark.parametrize("op,args,want", [
    ("RepeatDataset", [2], [3, 4, 5, 3]),
    ("TakeDataset", [2], [3, 4]),
    ("SkipDataset", [1], [4, 5]),
    ("PrefetchDataset", [2], [3, 4, 5]),
])
def test_transformations_first_batch_matches(graph, op, args, want):
    r = fl.apply_op("RangeDataset", [_c(3), _c(6), _c(1)], _types([I64], [()]))
    ds = fl.apply_op(op, [r] + [_c(a) for a in args], _types([I64], [()]))
    ds = fl.apply_op("BatchDatasetV2", [ds, _c(4), fl.constant(False)], _types([I64], [(None,)]))
    (v,) = _first(ds, [I64], [(None,)])
    got = check_against_interpreter(graph, [v])
    assert got["0"].tolist() == want


def test_zip_and_tensor_dataset(graph):
    r = fl.apply_op("RangeDataset", [_c(0), _c(10), _c(3)], _types([I64], [()]))
    t = fl.apply_op("TensorDataset", [[fl.constant([1.5, 2.5])]],
                    {"Toutput_types": [DType.f32], **_types([DType.f32], [(2,)])})
    z = fl.apply_op("ZipDataset", [[r, t]], {"N": 2, **_types([I64, DType.f32], [(), (2,)])})
    a, b = _first(z, [I64, DType.f32], [(), (2,)])
    got = check_against_interpreter(graph, [a, b])
    assert int(got["0"]) == 0 and got["1"].tolist() == [1.5, 2.5]


def test_shape_functions_check_handles_and_types(graph):
    r = fl.apply_op("RangeDataset", [_c(0), _c(3), _c(1)], _types([I64], [()]))
    it = fl.apply_op("IteratorV2", [], _types([DType.f32], [()]))
    with pytest.raises(ShapeError, match="the iterator yields"):
        fl.apply_op("MakeIterator", [r, it], {})
    with pytest.raises(ShapeError, match="must be a dataset"):
        fl.apply_op("RepeatDataset", [it, _c(1)], _types([DType.f32], [()]))
    with pytest.raises(ShapeError, match="must be a scalar"):
        fl.apply_op("TakeDataset", [r, fl.constant(np.array([1, 2], np.int64))],
                    _types([I64], [()]))
    with pytest.raises(ShapeError, match="components of types"):
        fl.apply_op("TensorSliceDataset", [[fl.constant([1, 2])]],
                    {"Toutput_types": [DType.i32], **_types([DType.f32], [()])})
