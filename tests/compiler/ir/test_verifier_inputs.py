"""The verifier on inputs that name no tensor (an output a node does not have, as any output of
a ``_Retval``): a ``GraphError`` naming the node that reads it and where it was written, from
``verify`` and from ``verify_node`` alone (the IR parser calls it per node), never an
``IndexError`` from looking up the missing output's type. And on a count attr as large as
int64 allows: the arity error, not a list of 2**63 dtypes (``MemoryError``)."""
import pytest

import compiler  # noqa: F401  (the op registry)
from compiler.errors import GraphError
from compiler.ir.graph import Graph, Output
from compiler.ir.location import SourceLocation
from compiler.ir.types import TensorType
from compiler.ir.verifier import verify, verify_node
from runtime.dtypes import DType

F32_3 = TensorType(DType.f32, (3,))


def _graph_reading(index_of_x: int = 0, through_retval: bool = True):
    g = Graph("g")
    x = g.add_node("Placeholder", (), {"dtype": DType.f32, "shape": (3,)}, name="x",
                   output_types=[F32_3])
    src = g.add_node("_Retval", [x.output(0)], {"T": DType.f32, "index": 0}, name="r") \
        if through_retval else x
    y = g.add_node("Neg", (), {"T": DType.f32}, name="y", output_types=[F32_3],
                   location=SourceLocation("m.flow", 7, 5))
    y.set_inputs([Output(src, index_of_x)])
    return g, y


@pytest.mark.parametrize("check", [verify_node, lambda node: verify(node.graph)])
def test_reading_a_retval_is_an_error_naming_the_reader_and_its_location(check):
    g, y = _graph_reading()
    with pytest.raises(GraphError) as info:
        check(y)
    text = str(info.value)
    assert text.startswith("m.flow:7:5: node 'y' (Neg): input 0 refers to output 0 of %r")
    assert "a _Retval has no outputs" in text


def test_reading_an_output_a_node_lacks_is_an_error_from_verify_node():
    g, y = _graph_reading(index_of_x=2, through_retval=False)
    with pytest.raises(GraphError, match=r"^m\.flow:7:5: node 'y' \(Neg\): input 0 refers to "
                                         r"output 2 of %x, which has 1 output"):
        verify_node(y)


def test_a_count_attr_of_int64_max_is_an_arity_error():
    g = Graph("g")
    x = g.add_node("Placeholder", (), {"dtype": DType.f32, "shape": (3,)}, name="x",
                   output_types=[F32_3])
    m = g.add_node("Merge", (), {"T": DType.f32, "N": 2 ** 63 - 1}, name="m",
                   output_types=[F32_3, TensorType(DType.i32, ())],
                   location=SourceLocation("m.flow", 2, 1))
    m.set_inputs([x.output(0), x.output(0)])
    with pytest.raises(GraphError, match=r"^m\.flow:2:1: node 'm' \(Merge\): has 2 data inputs "
                                         r"but Merge takes 9223372036854775807$"):
        verify_node(m)
