"""simplify's building blocks: the broadcast check every identity relies on, and adding a rule."""
import numpy as np
import pytest

from compiler.ir.construct import make_node
from compiler.ir.graph import Graph
from compiler.ir.types import TensorType
from compiler.ir.op_registry import has_op
from compiler.passes.manager import run_passes
from compiler.passes.simplify import Replace, broadcast_keeps_shape, find_rewrite
from runtime.dtypes import DType


def t(shape):
    return TensorType(DType.f32, shape)


def test_broadcast_keeps_shape():
    assert broadcast_keeps_shape(t((None, 3)), ())
    assert broadcast_keeps_shape(t((None, 3)), (3,))
    assert broadcast_keeps_shape(t((None, 3)), (1, 1))
    assert broadcast_keeps_shape(t((2, 3)), (2, 1))
    assert broadcast_keeps_shape(t(None), ())
    assert not broadcast_keeps_shape(t((None, 3)), (2, 3))      # ? might be 1
    assert not broadcast_keeps_shape(t((None, 3)), (1, 1, 3))   # more dims
    assert not broadcast_keeps_shape(t(None), (1,))             # unknown rank might be 0
    assert not broadcast_keeps_shape(t((3,)), None)


def test_a_rule_table_can_be_extended():
    g = Graph()
    x = make_node(g, "Placeholder", [], {"dtype": DType.f32, "shape": (4,)}, name="x")
    two = make_node(g, "Const", [], {"value": np.array(2.0, np.float32), "dtype": DType.f32})
    p = make_node(g, "Mul", [x.output(0), two.output(0)])
    make_node(g, "_Retval", [p.output(0)], {"index": 0})
    assert find_rewrite(p) is None                       # x * 2 is no identity of the default table

    def times_two_is_x(node):                            # a (wrong) rule, to see the table used
        return Replace(node.inputs[0])
    assert find_rewrite(p, {"Mul": [times_two_is_x]}) == Replace(x.output(0))
    assert find_rewrite(p, {"AddV2": [times_two_is_x]}) is None


@pytest.mark.skipif(not has_op("Tile"), reason="Tile not registered yet")
def test_tile_by_ones_is_its_input():
    g = Graph()
    x = make_node(g, "Placeholder", [], {"dtype": DType.f32, "shape": (2, 3)}, name="x")
    ones = make_node(g, "Const", [], {"value": np.array([1, 1], np.int32), "dtype": DType.i32})
    twos = make_node(g, "Const", [], {"value": np.array([1, 2], np.int32), "dtype": DType.i32})
    same = make_node(g, "Tile", [x.output(0), ones.output(0)])
    wider = make_node(g, "Tile", [x.output(0), twos.output(0)])
    r0 = make_node(g, "_Retval", [same.output(0)], {"index": 0})
    r1 = make_node(g, "_Retval", [wider.output(0)], {"index": 1})
    run_passes(g, ["simplify"])
    assert r0.inputs[0] == x.output(0)
    assert r1.inputs[0] == wider.output(0) and same not in g


@pytest.mark.parametrize("device", ["", "/device:GPU:0"])
def test_a_grouped_conv_stays_one_conv2d_on_every_device(device):
    """Several channels per group: one Conv2D (the C and the CUDA kernels both take groups),
    on a CPU and on a GPU alike; one channel per group: a depthwise convolution."""
    g = Graph()
    x = make_node(g, "Placeholder", [], {"dtype": DType.f32, "shape": (1, 5, 5, 4)}, name="x")
    convs = []
    for k, f_shape in enumerate([(3, 3, 2, 6), (3, 3, 1, 8)]):
        f = make_node(g, "Placeholder", [], {"dtype": DType.f32, "shape": f_shape}, name=f"f{k}")
        convs.append(make_node(g, "Conv2D", [x.output(0), f.output(0)],
                               {"strides": [1, 1, 1, 1], "padding": "SAME"}, device=device))
        make_node(g, "_Retval", [convs[-1].output(0)], {"index": k})
    run_passes(g, ["simplify"])
    assert convs[0] in g
    assert convs[1] not in g
    ops = sorted(n.op for n in g)
    assert ops.count("Conv2D") == 1 and ops.count("DepthwiseConv2dNative") == 1
    assert not {"Split", "ConcatV2"} & set(ops)
    assert all(n.device == device for n in g if n.op in ("Conv2D", "DepthwiseConv2dNative"))
