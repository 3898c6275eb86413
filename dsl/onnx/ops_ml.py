"""The ``ai.onnx.ml`` operator set: TreeEnsemble (opset 5), Binarizer (``x > threshold`` as
x's type) and ArrayFeatureExtractor (a GatherV2 along the last axis: indices out of range are
its error; a vector becomes one row, as in onnxruntime).

The trees are attributes, known at import, so the whole ensemble becomes a few dense flowc
ops and no data-dependent control flow:

1. every split at once: the features ``GatherV2(X, nodes_featureids)`` compared with
   ``nodes_splits`` by each node's mode (``<=``, ``<``, ``>=``, ``>``, ``==``, ``!=``, set
   membership), or true for a missing (NaN) value where the node says so: ``cond`` [B, nodes];
2. every root-to-leaf path of every tree (enumerated at import) needs some nodes true and
   some false: a sample reaches the leaf when ``cond @ T + (1 - cond) @ F`` (constant 0/1
   matrices, exact small counts) equals the path's length;
3. the reached leaves' weights are aggregated per target: SUM and AVERAGE as a MatMul, MIN
   and MAX as a reduction over the leaves of each target (empty: float's max / lowest, as the
   reference starts from).

Set members are assigned to membership nodes in the order the reference builds the trees
(depth first, true branch first), consuming ``membership_values`` up to each NaN.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

import dsl as fl
from dsl.onnx.values import binary, index_const, index_scalar, rank_of
from dsl.ops import apply_op

DOMAIN = "ai.onnx.ml"

_COMPARE = {0: "LessEqual", 1: "Less", 2: "GreaterEqual", 3: "Greater", 4: "Equal",
            5: "NotEqual"}
_MEMBER = 6


def _array(ctx, name, default=None):
    value = ctx.attr(name, default)
    return None if value is None else np.asarray(value)


def _paths(ctx, attrs) -> Tuple[List[Tuple[int, List[Tuple[int, bool]]]], Dict[int, list]]:
    """(leaf index, [(node, must be true)]) of every path, and each membership node's set."""
    members = iter([] if attrs["members"] is None else attrs["members"].tolist())
    sets: Dict[int, list] = {}
    paths = []
    n_nodes = len(attrs["modes"])

    def walk(index: int, is_leaf: bool, path: list, depth: int) -> None:
        if depth > n_nodes:
            raise ctx.error("the trees have a cycle")
        if is_leaf:
            if not 0 <= index < len(attrs["weights"]):
                raise ctx.error(f"leaf {index} is not in leaf_weights")
            paths.append((index, path))
            return
        if not 0 <= index < n_nodes:
            raise ctx.error(f"node {index} is not in the node lists")
        if int(attrs["modes"][index]) == _MEMBER:
            values = []
            for v in members:
                if np.isnan(v):
                    break
                values.append(v)
            sets[index] = values
        walk(int(attrs["true_ids"][index]), bool(attrs["true_leafs"][index]),
             path + [(index, True)], depth + 1)
        walk(int(attrs["false_ids"][index]), bool(attrs["false_leafs"][index]),
             path + [(index, False)], depth + 1)

    for root in attrs["roots"].tolist():
        root_is_leaf = (attrs["true_leafs"][root] and attrs["false_leafs"][root]
                        and attrs["true_ids"][root] == attrs["false_ids"][root])
        walk(int(root), bool(root_is_leaf), [], 0)
    return paths, sets


def _conditions(x, attrs, sets):
    """cond [B, nodes] as x's float type (1.0 where a sample takes a node's true branch)."""
    features = fl.constant(attrs["features"].astype(np.int64), dtype=fl.int64)
    xf = apply_op("GatherV2", [x, features, index_scalar(1)])           # [B, nodes]
    splits = fl.constant(attrs["splits"].astype(x.dtype.np), dtype=x.dtype)
    modes = attrs["modes"].astype(int)
    cond = None
    for mode, op in _COMPARE.items():
        if not (modes == mode).any():
            continue
        term = binary("LogicalAnd", binary(op, xf, splits), fl.constant(modes == mode))
        cond = term if cond is None else binary("LogicalOr", cond, term)
    if sets:
        width = max(1, max(len(v) for v in sets.values()))
        table = np.full((len(modes), width), np.nan)
        for node, values in sets.items():
            table[node, :len(values)] = values
        hit = binary("Equal", apply_op("ExpandDims", [xf, index_scalar(-1)]),
                     fl.constant(table.astype(x.dtype.np), dtype=x.dtype))
        term = apply_op("Any", [hit, index_scalar(-1)])
        term = binary("LogicalAnd", term, fl.constant(modes == _MEMBER))
        cond = term if cond is None else binary("LogicalOr", cond, term)
    if cond is None:
        cond = binary("Less", xf, xf)                                  # no nodes: all false
    track = attrs["missing_true"]
    if track is not None and track.any():
        missing = binary("LogicalAnd", apply_op("IsNan", [xf]), fl.constant(track.astype(bool)))
        cond = binary("LogicalOr", cond, missing)
    return fl.cast(cond, x.dtype)


def lower_tree_ensemble(ctx):
    x = ctx.input(0)
    if rank_of(x, ctx) != 2 or not x.dtype.is_floating:
        raise ctx.error("X must be a [batch, features] float tensor")
    attrs = {"features": _array(ctx, "nodes_featureids"), "splits": _array(ctx, "nodes_splits"),
             "modes": _array(ctx, "nodes_modes"), "true_ids": _array(ctx, "nodes_truenodeids"),
             "false_ids": _array(ctx, "nodes_falsenodeids"),
             "true_leafs": _array(ctx, "nodes_trueleafs"),
             "false_leafs": _array(ctx, "nodes_falseleafs"),
             "targets": _array(ctx, "leaf_targetids"), "weights": _array(ctx, "leaf_weights"),
             "roots": _array(ctx, "tree_roots"),
             "missing_true": _array(ctx, "nodes_missing_value_tracks_true"),
             "members": _array(ctx, "membership_values")}
    n_targets = int(ctx.attr("n_targets"))
    aggregate = int(ctx.attr("aggregate_function", 1))
    post = int(ctx.attr("post_transform", 0))
    paths, sets = _paths(ctx, attrs)
    n_nodes, n_paths = len(attrs["modes"]), len(paths)
    must_true = np.zeros((n_nodes, n_paths))
    must_false = np.zeros((n_nodes, n_paths))
    for p, (_, path) in enumerate(paths):
        for node, branch in path:
            (must_true if branch else must_false)[node, p] += 1
    lengths = np.asarray([len(path) for _, path in paths], np.float64)
    t = x.dtype
    cond = _conditions(x, attrs, sets)
    count = binary("AddV2",
                   apply_op("MatMul", [cond, fl.constant(must_true.astype(t.np), dtype=t)]),
                   apply_op("MatMul", [binary("Sub", fl.constant(np.asarray(1, t.np)), cond),
                                       fl.constant(must_false.astype(t.np), dtype=t)]))
    reached = binary("Equal", count, fl.constant(lengths.astype(t.np), dtype=t))  # [B, paths]
    leaf = np.asarray([index for index, _ in paths], np.int64)
    targets = attrs["targets"].astype(np.int64)[leaf]
    weights = attrs["weights"].astype(np.float64)[leaf]
    if ((targets < 0) | (targets >= n_targets)).any():
        raise ctx.error(f"a leaf's target is outside [0, {n_targets})")
    onehot = np.zeros((n_paths, n_targets))
    onehot[np.arange(n_paths), targets] = 1
    if aggregate in (0, 1):
        scale = 1.0 / len(attrs["roots"]) if aggregate == 0 else 1.0
        y = apply_op("MatMul", [fl.cast(reached, t),
                                fl.constant((onehot * weights[:, None] * scale).astype(t.np),
                                            dtype=t)])
    elif aggregate in (2, 3):
        info = np.finfo(t.np)
        empty = info.max if aggregate == 2 else info.min
        vals = fl.where(reached, fl.constant(weights.astype(t.np), dtype=t),
                        fl.constant(np.asarray(empty, t.np)))                # [B, paths]
        mask = fl.constant(onehot.T.astype(bool))                              # [targets, paths]
        per = fl.where(mask, apply_op("ExpandDims", [vals, index_scalar(1)]),
                       fl.constant(np.asarray(empty, t.np)))
        y = apply_op("Min" if aggregate == 2 else "Max", [per, index_scalar(-1)])
    else:
        raise ctx.error(f"unknown aggregate_function {aggregate}")
    if post == 1:
        y = apply_op("Softmax", [y])
    elif post == 2:
        y = apply_op("Sigmoid", [y])
    elif post != 0:
        raise ctx.error(f"post_transform {post} is not supported (NONE, SOFTMAX, LOGISTIC)")
    return apply_op("Reshape", [y, index_const([-1, n_targets])])


def lower_binarizer(ctx):
    x = ctx.input(0)
    threshold = fl.constant(np.asarray(ctx.attr("threshold", 0.0), x.dtype.np), dtype=x.dtype)
    return fl.cast(binary("Greater", x, threshold), x.dtype)


def lower_array_feature_extractor(ctx):
    x, indices = ctx.input(0), ctx.input(1)
    if rank_of(x, ctx) == 1:
        x = apply_op("ExpandDims", [x, index_scalar(0)])
    flat = apply_op("Reshape", [fl.cast(indices, fl.int64), index_const([-1])])
    return apply_op("GatherV2", [x, flat, index_scalar(-1)])


LOWERINGS = {
    "TreeEnsemble": [(5, None, lower_tree_ensemble)],
    "Binarizer": [(1, None, lower_binarizer)],
    "ArrayFeatureExtractor": [(1, None, lower_array_feature_extractor)],
}
