"""Resize: every mode of ONNX's Resize is separable, so along each resized axis the output is
an affine map of the input (``out = x @ M + c``). M and c are computed at import time by
running the onnx package's reference Resize on basis vectors (the resized dims must be known;
others, a dynamic batch, may be known only at run time), and the map becomes a MatMul along
that axis: one code path for nearest, linear and cubic,
every coordinate transformation and antialiasing."""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

import dsl as fl
from dsl.onnx.folding import partial_value, static_value
from dsl.onnx.ops_attention import dim_of, shape_vector
from dsl.onnx.values import binary, index_const, index_scalar, rank_of, static_shape
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


def _sizes(ctx) -> Optional[np.ndarray]:
    """The sizes input: known at import time, or known but for dims that stay dynamic (``[N,
    C, 64, 64]`` from ``Concat(Shape(x)[:2], [64, 64])``: -1 there, the output takes those
    dims at run time from the sizes tensor)."""
    if not ctx.has_input(3):
        return None
    value = static_value(ctx.input(3).output)
    if value is None:
        known = partial_value(ctx.input(3).output)
        if known is None:
            return ctx.const(3, "sizes")               # the usual error: what to bind
        value = np.array([-1 if d is None else d for d in known], np.int64)
    value = np.asarray(value)
    return None if value.size == 0 else value


def lower_resize(ctx):
    x = ctx.input(0)
    shape = static_shape(x)
    if shape is None:
        raise ctx.error("needs the input rank known")
    if not x.dtype.is_floating:
        raise ctx.error("resizes floating-point tensors only")
    rank = rank_of(x, ctx)
    roi, scales, sizes = _optional(ctx, 1, "roi"), _optional(ctx, 2, "scales"), _sizes(ctx)
    axes = ctx.attr("axes", None)
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    # Dims unknown at import time must stay as they are (scale 1, or a size computed at run
    # time, which the output's Reshape then checks against the element count).
    dynamic = [a for a in range(rank) if shape[a] is None]
    for k, axis in enumerate(axes):
        if axis not in dynamic:
            continue
        if sizes is not None and sizes[k] != -1 or scales is not None and float(scales[k]) != 1.0 \
                or roi is not None:
            raise ctx.error(f"resizes dim {axis}, which is not known at import time")
    if sizes is not None and (sizes == -1).any() and any(
            sizes[k] == -1 and axis not in dynamic for k, axis in enumerate(axes)):
        raise ctx.error("a size computed at run time for a dim known at import time")
    if dynamic and ctx.attr("keep_aspect_ratio_policy", "stretch") != "stretch" \
            and sizes is not None and any(axis in dynamic for axis in axes):
        raise ctx.error("keep_aspect_ratio_policy over a dim not known at import time")
    probe_sizes = None if sizes is None else np.where(sizes == -1, 1, sizes)
    probe = np.zeros([1 if d is None else d for d in shape], x.dtype.np)
    out_shape = list(_reference(ctx, probe, roi, scales, probe_sizes,
                                ctx.attr("axes", None)).shape)
    out_dims = [dim_of(x, a) if shape[a] is None else out_shape[a] for a in range(rank)]
    if sizes is not None:                               # a dynamic dim's size, as given
        for k, axis in enumerate(axes):
            if sizes[k] == -1:
                out_dims[axis] = apply_op("GatherV2", [fl.cast(ctx.input(3), fl.int64),
                                                       index_scalar(k), index_scalar(0)])
    y = x
    for k, axis in enumerate(axes):
        if axis in dynamic:
            continue
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
        done = set(axes[:k]) | {axis}               # resized so far (their output dims)
        moved_shape = [out_dims[a] if a in done or shape[a] is None else shape[a]
                       for a in perm]
        y = apply_op("Transpose", [apply_op("Reshape", [mapped, shape_vector(moved_shape)]),
                                   index_const(back)])
    # A dynamic dim's size given at run time reshapes the result: equal to the dim, or the
    # element count does not match and the Reshape fails.
    if y is x and sizes is not None and (sizes == -1).any():
        return apply_op("Reshape", [x, shape_vector(out_dims)])
    return y if y is not x else apply_op("Identity", [x])


LOWERINGS = {
    "Resize": [(11, None, lower_resize)],
}
