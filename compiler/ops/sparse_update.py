"""``_ResourceScatterSubScaled``: ``var[indices] -= scale * updates`` in one pass over the rows.

Made by the ``fuse-updates`` pass from the sparse gradient-descent step that
``GradientDescentOptimizer`` builds for an ``IndexedSlices`` gradient (an embedding's),
``ResourceScatterSub(var, indices, Mul(values, lr))``, when the scaled values have no other use:
each row is read once and scaled as it is subtracted, so the scaled copy of the gradient rows is
never written out. Repeated ids add up, in order, as in ``ResourceScatterSub``; every index is
checked before any row changes. Its C kernel is ``ResourceScatterSub``'s with the scale
(``compiler/codegen/c_ops/sparse_update.py``), and so is its GPU kernel
(``compiler/codegen/cuda_ops/state.py``).
"""
from __future__ import annotations

import numpy as np

from compiler.ir.types import shape_str
from compiler.ir.op_registry import register_op
from compiler.ops.state import _scatter_shape, update_rows


def _shape(ctx) -> list:
    scale = ctx.input_shape(3)
    if scale is not None and len(scale) != 0:
        raise ctx.error(f"scale must be a scalar, got shape {shape_str(scale)}")
    return _scatter_shape(ctx)


def _kernel(ctx, handle, indices, updates, scale):
    def apply(new, flat, upd):
        np.subtract.at(new, flat, (scale * upd).astype(new.dtype))
    update_rows(ctx, handle, indices, updates, apply)      # atomic per variable
    return []


register_op("_ResourceScatterSubScaled",
            inputs=["resource: resource", "indices: Tindices", "updates: dtype", "scale: dtype"],
            attrs=["dtype: {f32, f64}", "Tindices: {i32, i64}"],
            shape=_shape, kernel=_kernel, stateful=True,
            doc="Rows ``indices`` of the variable -= scale * ``updates``, touching only those "
                "rows; every index is checked before any row changes.")
