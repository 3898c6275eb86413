"""Det: TensorFlow's MatrixDeterminant over the last two dims."""
from __future__ import annotations

from dsl.ops import apply_op


def lower_det(ctx):
    return apply_op("MatrixDeterminant", [ctx.input(0)])


LOWERINGS = {
    "Det": [(11, None, lower_det)],
}
