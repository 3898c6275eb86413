"""Resize: every mode of ONNX's Resize is separable, so along each resized axis the output is
an affine map of the input (``out = x @ M + c``). M and c are computed at import time by
running the onnx package's reference Resize on basis vectors (the input shape must be known),
and the map becomes a MatMul along that axis: one code path for nearest, linear and cubic,
every coordinate transformation and antialiasing."""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

import dsl as fl
from dsl.onnx.values import binary, full_shape, index_const, rank_of
from dsl.ops import apply_op


def _reference(ctx, x: np.ndarray, roi, scales, sizes, axes: Optional[List[int]]) -> np.ndarray:
    """The onnx package's reference Resize of ``x`` with this node's attributes."""
    from onnx.reference import ReferenceEvaluator
    attrs = [a for a in ctx.node.attribute if a.name != "axes"]
    names, inits = ["X"], []
    for name, value in (("roi", roi), ("scales", scales), ("sizes", sizes)):
        if value is None:
            names.append("")
        else:
            names.append(name)
            inits.append(numpy_helper.from_array(np.asarray(value), name))
    node = helper.make_node("Resize", names, ["Y"])
    node.attribute.extend(attrs)
    if axes is not None:
        node.attribute.append(helper.make_attribute("axes", axes))
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info(
        "X", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))],
        [helper.make_tensor_value_info("Y", helper.np_dtype_to_tensor_dtype(x.dtype), None)],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ctx.opset)])
    return np.asarray(ReferenceEvaluator(model).run(None, {"X": x})[0])


def _optional(ctx, i, what):
    value = ctx.optional_const(i, what) if ctx.has_input(i) else None
    return None if value is None or value.size == 0 else value


def lower_resize(ctx):
    x = ctx.input(0)
    shape = full_shape(x)
    if shape is None:
        raise ctx.error("needs the input shape known")
    if not x.dtype.is_floating:
        raise ctx.error("resizes floating-point tensors only")
    rank = rank_of(x, ctx)
    roi, scales, sizes = _optional(ctx, 1, "roi"), _optional(ctx, 2, "scales"), _optional(ctx, 3, "sizes")
    axes = ctx.attr("axes", None)
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    probe = np.zeros(shape, x.dtype.np)
    out_shape = list(_reference(ctx, probe, roi, scales, sizes, ctx.attr("axes", None)).shape)
    y = x
    for k, axis in enumerate(axes):
        n, m = shape[axis], out_shape[axis]
        axis_roi = None if roi is None else np.array([roi[k], roi[k + len(axes)]], roi.dtype)
        axis_scales = None if scales is None else np.array([scales[k]], scales.dtype)
        axis_sizes = None if scales is not None else np.array([m], np.int64)
        if scales is not None and sizes is None and float(scales[k]) == 1.0 and roi is None:
            continue
        if scales is None and m == n and roi is None and ctx.attr("keep_aspect_ratio_policy", "stretch") == "stretch":
            continue
        if scales is None and ctx.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
            axis_scales, axis_sizes = np.array([m / n], np.float32), None
        basis = np.eye(n, dtype=np.float64)
        cols = _reference(ctx, basis, axis_roi, axis_scales, axis_sizes, [1])
        offset = _reference(ctx, np.zeros([1, n]), axis_roi, axis_scales, axis_sizes, [1])[0]
        if cols.shape[1] != m:
            raise ctx.error(f"axis {axis}: the per-axis resize gives {cols.shape[1]} elements, "
                            f"the full one {m}")
        matrix = (cols - offset[None, :]).astype(x.dtype.np)          # [n, m]
        perm = [a for a in range(rank) if a != axis] + [axis]
        back = [perm.index(a) for a in range(rank)]
        moved = apply_op("Transpose", [y, index_const(perm)])
        rows = apply_op("Reshape", [moved, index_const([-1, n])])
        mapped = apply_op("MatMul", [rows, fl.constant(matrix, dtype=x.dtype)])
        if np.any(offset != 0):
            mapped = binary("AddV2", mapped, fl.constant(offset.astype(x.dtype.np), dtype=x.dtype))
        moved_shape = [shape[a] if a != axis else m for a in perm]
        moved_shape = [out_shape[a] if a in axes[:k] else d for a, d in zip(perm, moved_shape)]
        y = apply_op("Transpose", [apply_op("Reshape", [mapped, index_const(moved_shape)]),
                                   index_const(back)])
    return y if y is not x else apply_op("Identity", [x])


LOWERINGS = {
    "Resize": [(11, None, lower_resize)],
}
