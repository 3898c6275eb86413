"""Every built-in op is complete: signature, shape function, reference kernel and a C path."""
import pytest

from compiler.ops import BUILTIN_OPS
from compiler.ir.op_registry import all_ops

# Handled by the code generator itself rather than by a kernel.
EMITTER_OPS = {"Const", "Placeholder", "NoOp", "_Retval", "_Sink"}


@pytest.mark.parametrize("name", sorted(BUILTIN_OPS))
def test_op_is_complete(name):
    op = all_ops()[name]
    assert op.shape_fn is not None, f"{name} has no shape function"
    if name != "Placeholder":
        assert op.kernel is not None, f"{name} has no numpy reference kernel"
    if name not in EMITTER_OPS:
        assert op.c_kernel is not None or op.c_alias is not None, f"{name} has no C kernel"
    for arg in op.inputs + op.outputs:
        assert arg.dtype is not None or arg.type_attr or arg.type_list_attr, (name, arg.name)


def test_the_issue_op_list_is_registered():
    required = """Const Placeholder PlaceholderWithDefault Identity NoOp StopGradient Shape Size Rank
    Neg Abs Sign Exp Log Log1p Sqrt Rsqrt Square Reciprocal Tanh Sigmoid Relu Relu6 Elu Softplus
    Floor Ceil Round Cast LogicalNot Add AddV2 Sub Mul RealDiv Maximum Minimum Pow FloorDiv
    FloorMod SquaredDifference Equal NotEqual Less LessEqual Greater GreaterEqual LogicalAnd
    LogicalOr SelectV2 AddN Sum Mean Max Min Prod All Any ArgMax ArgMin MatMul BatchMatMulV2
    BiasAdd Softmax LogSoftmax Reshape Transpose ConcatV2 Split SplitV Slice StridedSlice Pack
    Unpack Squeeze ExpandDims Tile Pad Fill ZerosLike OnesLike OneHot Range GatherV2""".split()
    missing = [n for n in required if n not in all_ops()]
    assert not missing, missing
