"""``fl.SparseTensor`` and the TF1 functions over it (``tf.sparse_placeholder``,
``tf.sparse_tensor_to_dense``, ``tf.sparse_to_dense``, ``tf.sparse_reduce_sum``,
``tf.sparse_tensor_dense_matmul``, ``tf.sparse_reorder``, ``tf.sparse_add``, ``tf.sparse_retain``,
``tf.sparse.reshape``, ``tf.nn.embedding_lookup_sparse``).

A sparse tensor is a tuple of three dense tensors, as the paper prescribes: ``indices`` (int64
``[N, rank]``), ``values`` (``[N]``) and ``dense_shape`` (int64 ``[rank]``). ``Session.run``
feeds a ``SparseTensor`` key from a ``SparseTensorValue`` (or an ``(indices, values, shape)``
tuple) and fetches one as a ``SparseTensorValue``.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from dsl.context import name_scope
from dsl.ops import apply_op, convert_to_tensor, placeholder, placeholder_with_default
from dsl.tensor import Tensor, static_shape
from dsl.tensor_shape import TensorShape
from runtime.dtypes import DType, as_dtype

__all__ = ["SparseTensor", "SparseTensorValue", "sparse_placeholder", "sparse_tensor_to_dense",
           "sparse_to_dense", "sparse_reduce_sum", "sparse_tensor_dense_matmul",
           "sparse_reorder", "sparse_add", "sparse_retain", "sparse_reshape"]


class SparseTensorValue(NamedTuple):
    """A fetched (or fed) ``fl.SparseTensor``: numpy indices, values and dense shape."""
    indices: np.ndarray
    values: np.ndarray
    dense_shape: np.ndarray


class SparseTensor:
    """A sparse tensor as three dense tensors (``tf.SparseTensor``)."""

    def __init__(self, indices, values, dense_shape):
        with name_scope("SparseTensor"):
            self._indices = convert_to_tensor(indices, dtype=DType.i64)
            self._values = convert_to_tensor(values)
            self._dense_shape = convert_to_tensor(dense_shape, dtype=DType.i64)
        ind, val, shp = (static_shape(t) for t in (self._indices, self._values,
                                                      self._dense_shape))
        if ind is not None and len(ind) != 2:
            raise ValueError(f"SparseTensor indices must be a matrix [N, rank], got shape {ind}")
        if val is not None and len(val) != 1:
            raise ValueError(f"SparseTensor values must be a vector [N], got shape {val}")
        if shp is not None and len(shp) != 1:
            raise ValueError(f"SparseTensor dense_shape must be a vector, got shape {shp}")

    @classmethod
    def from_value(cls, value) -> "SparseTensor":
        if isinstance(value, SparseTensor):
            return value
        return cls(*value)

    indices = property(lambda self: self._indices)
    values = property(lambda self: self._values)
    dense_shape = property(lambda self: self._dense_shape)
    dtype = property(lambda self: self._values.dtype)
    op = property(lambda self: self._values.op)
    graph = property(lambda self: self._values.graph)

    @property
    def shape(self) -> TensorShape:
        """The static dense shape: the dense_shape's value where it is known."""
        from compiler.ir.construct import constant_value
        value = constant_value(self._dense_shape.output)
        if value is not None:
            return TensorShape([int(d) if d >= 0 else None for d in np.reshape(value, -1)])
        if self._dense_shape.op.type == "PlaceholderWithDefault":
            value = constant_value(self._dense_shape.op.inputs[0].output)
            if value is not None:
                return TensorShape([int(d) if d >= 0 else None for d in np.reshape(value, -1)])
        rank = self.rank
        return TensorShape(None) if rank is None else TensorShape([None] * rank)

    def get_shape(self) -> TensorShape:
        return self.shape

    @property
    def rank(self) -> Optional[int]:
        """The number of dense dims, where the indices' or the dense shape's static shape says."""
        ind, shp = static_shape(self._indices), static_shape(self._dense_shape)
        if ind is not None and ind[1] is not None:
            return ind[1]
        if shp is not None and shp[0] is not None:
            return shp[0]
        return None

    def _session_fetch(self):
        """Fetched by Session.run as a SparseTensorValue."""
        return ((self._indices, self._values, self._dense_shape),
                lambda parts: SparseTensorValue(*parts))

    def _session_feed(self, value) -> list:
        """The (tensor, array) feeds of a SparseTensorValue or (indices, values, shape) tuple."""
        if isinstance(value, SparseTensor):
            raise TypeError("cannot feed a SparseTensor a symbolic SparseTensor; feed a "
                            "SparseTensorValue")
        if not isinstance(value, (tuple, list)) or len(value) != 3:
            raise TypeError(f"a SparseTensor is fed a SparseTensorValue or an (indices, values, "
                            f"dense_shape) tuple, got {type(value).__name__}")
        return list(zip((self._indices, self._values, self._dense_shape), value))

    def __repr__(self) -> str:
        return (f"SparseTensor(indices={self._indices.name}, values={self._values.name}, "
                f"dense_shape={self._dense_shape.name})")


def _sparse(sp, what: str = "sp_input") -> SparseTensor:
    if isinstance(sp, SparseTensorValue):
        return SparseTensor(*sp)
    if not isinstance(sp, SparseTensor):
        raise TypeError(f"{what} must be a SparseTensor, got {type(sp).__name__}")
    return sp


def sparse_placeholder(dtype, shape=None, name: Optional[str] = None) -> SparseTensor:
    """A SparseTensor fed at run time (``tf.sparse_placeholder``): three placeholders; a
    given ``shape`` (``None`` or -1 for unknown dims) is the dense shape's default."""
    sub = (lambda s: f"{name}/{s}") if name is not None else (lambda s: None)
    if shape is None:
        rank = None
        dense_shape = placeholder(DType.i64, [None], name=sub("shape"))
    else:
        dims = [-1 if d is None else int(d) for d in shape]
        rank = len(dims)
        default = convert_to_tensor(np.asarray(dims, np.int64), name=sub("shape_default"))
        dense_shape = placeholder_with_default(default, [rank], name=sub("shape"))
    return SparseTensor(placeholder(DType.i64, [None, rank], name=sub("indices")),
                        placeholder(as_dtype(dtype), [None], name=sub("values")), dense_shape)


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0,
                    validate_indices: bool = True, name: Optional[str] = None) -> Tensor:
    """A dense tensor of ``output_shape`` with ``sparse_values`` at ``sparse_indices`` and
    ``default_value`` elsewhere (``tf.sparse_to_dense``)."""
    values = convert_to_tensor(sparse_values)
    indices = convert_to_tensor(sparse_indices)
    if not indices.dtype.is_integer:
        raise TypeError(f"sparse_indices must be integers, got {indices.dtype}")
    if indices.dtype not in (DType.i32, DType.i64):
        indices = apply_op("Cast", [indices], {"DstT": DType.i64})
    shape = convert_to_tensor(output_shape, dtype=indices.dtype)
    default = convert_to_tensor(default_value, dtype=values.dtype)
    return apply_op("SparseToDense", [indices, shape, values, default],
                    {"validate_indices": bool(validate_indices)}, name=name or "SparseToDense")


def sparse_tensor_to_dense(sp_input, default_value=None, validate_indices: bool = True,
                           name: Optional[str] = None) -> Tensor:
    """The dense tensor of ``sp_input`` (``tf.sparse.to_dense``); its indices must be in
    row-major order without repeats unless ``validate_indices=False``."""
    sp = _sparse(sp_input)
    if default_value is None:
        default_value = np.zeros((), sp.dtype.np)
    return sparse_to_dense(sp.indices, sp.dense_shape, sp.values, default_value,
                           validate_indices=validate_indices, name=name or "SparseToDense")


def _rank_axes(sp: SparseTensor, axis) -> np.ndarray:
    if axis is None:
        rank = sp.rank
        if rank is None:
            raise ValueError("sparse_reduce_sum(axis=None) needs the rank of the SparseTensor "
                             "known (the indices' last dim or the dense shape's length)")
        return np.arange(rank, dtype=np.int32)
    return np.asarray(axis, np.int32).reshape(-1)


def sparse_reduce_sum(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None,
                      name: Optional[str] = None) -> Tensor:
    """The sum of ``sp_input``'s entries over ``axis`` (all when None), a dense tensor
    (``tf.sparse.reduce_sum``)."""
    if reduction_axes is not None:
        if axis is not None:
            raise ValueError("cannot specify both 'axis' and 'reduction_axes'")
        axis = reduction_axes
    if keep_dims is not None:
        if keepdims is not None:
            raise ValueError("cannot specify both 'keepdims' and 'keep_dims'")
        keepdims = keep_dims
    sp = _sparse(sp_input)
    return apply_op("SparseReduceSum", [sp.indices, sp.values, sp.dense_shape,
                                        _rank_axes(sp, axis)],
                    {"keep_dims": bool(keepdims)}, name=name or "SparseReduceSum")


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a: bool = False, adjoint_b: bool = False,
                               name: Optional[str] = None) -> Tensor:
    """The sparse matrix ``sp_a`` times the dense matrix ``b``
    (``tf.sparse.sparse_dense_matmul``)."""
    sp = _sparse(sp_a, "sp_a")
    b = convert_to_tensor(b, dtype=sp.dtype)
    return apply_op("SparseTensorDenseMatMul", [sp.indices, sp.values, sp.dense_shape, b],
                    {"adjoint_a": bool(adjoint_a), "adjoint_b": bool(adjoint_b)},
                    name=name or "SparseTensorDenseMatMul")


def sparse_reorder(sp_input, name: Optional[str] = None) -> SparseTensor:
    """``sp_input`` with its entries in row-major (canonical) order (``tf.sparse.reorder``)."""
    sp = _sparse(sp_input)
    indices, values = apply_op("SparseReorder", [sp.indices, sp.values, sp.dense_shape],
                               name=name or "SparseReorder")
    return SparseTensor(indices, values, sp.dense_shape)


def sparse_add(a, b, threshold=0, thresh=None):
    """``a + b`` (``tf.sparse_add``): two SparseTensors (both in row-major order) give a
    SparseTensor, where sums at a shared index smaller than ``threshold`` in magnitude are
    dropped; a SparseTensor and a dense tensor give a dense tensor."""
    if thresh is not None:
        threshold = thresh
    a_sparse, b_sparse = (isinstance(x, (SparseTensor, SparseTensorValue)) for x in (a, b))
    if not a_sparse and not b_sparse:
        raise TypeError("at least one input should be a SparseTensor")
    if a_sparse and b_sparse:
        a, b = _sparse(a, "a"), _sparse(b, "b")
        real = {DType.f16: DType.f16, DType.bf16: DType.bf16, DType.f64: DType.f64}.get(
            a.dtype, a.dtype if a.dtype.is_integer else DType.f32)
        ind, val, shape = apply_op("SparseAdd", [a.indices, a.values, a.dense_shape, b.indices,
                                                 convert_to_tensor(b.values, dtype=a.dtype),
                                                 b.dense_shape,
                                                 convert_to_tensor(threshold, dtype=real)],
                                   name="SparseAdd")
        return SparseTensor(ind, val, shape)
    if b_sparse:
        a, b = b, a
    sp = _sparse(a, "a")
    dense = convert_to_tensor(b, dtype=sp.dtype)
    indices = sp.indices
    return apply_op("SparseTensorDenseAdd", [indices, sp.values, sp.dense_shape, dense],
                    name="SparseTensorDenseAdd")


def sparse_retain(sp_input, to_retain) -> SparseTensor:
    """The entries of ``sp_input`` where the bool vector ``to_retain`` is true
    (``tf.sparse.retain``)."""
    sp = _sparse(sp_input)
    keep = convert_to_tensor(to_retain, dtype=DType.bool)
    ks, vs = static_shape(keep), static_shape(sp.values)
    if ks is not None and len(ks) != 1:
        raise ValueError(f"to_retain must be a vector, got shape {ks}")
    if ks is not None and vs is not None and None not in (ks[0], vs[0]) and ks[0] != vs[0]:
        raise ValueError(f"to_retain has {ks[0]} entries but sp_input has {vs[0]} values")
    where = apply_op("Reshape", [apply_op("Where", [keep]), np.array([-1], np.int32)])
    indices = apply_op("GatherV2", [sp.indices, where, np.int32(0)])
    values = apply_op("GatherV2", [sp.values, where, np.int32(0)])
    return SparseTensor(indices, values, apply_op("Identity", [sp.dense_shape]))


def sparse_reshape(sp_input, shape, name: Optional[str] = None) -> SparseTensor:
    """``sp_input`` reshaped to ``shape`` (one dim may be -1), its values in the same order
    (``tf.sparse.reshape``)."""
    sp = _sparse(sp_input)
    new_shape = convert_to_tensor(shape, dtype=DType.i64)
    indices, dense_shape = apply_op("SparseReshape", [sp.indices, sp.dense_shape, new_shape],
                                    name=name or "SparseReshape")
    return SparseTensor(indices, sp.values, dense_shape)


def expand_sparse_feeds(feed_dict: dict) -> dict:
    """``feed_dict`` with each SparseTensor key replaced by its three tensors' feeds."""
    out = {}
    for key, value in feed_dict.items():
        if isinstance(key, SparseTensor):
            out.update(key._session_feed(value))
        else:
            out[key] = value
    return out


def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy: str = "mod",
                            name: Optional[str] = None, combiner: Optional[str] = None,
                            max_norm=None) -> Tensor:
    """Per row of ``sp_ids``, the embeddings of its ids combined by ``combiner`` ("sum",
    "mean" (the default) or "sqrtn"), weighted by ``sp_weights`` (None: weight 1)
    (``tf.nn.embedding_lookup_sparse``). Row ``i`` of the result is row ``i`` of the batch, up to
    the last row with an id; a row without ids (or whose weights sum to 0) is 0."""
    from dsl.embedding_ops import embedding_lookup
    if combiner is None:
        combiner = "mean"
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    sp_ids = _sparse(sp_ids, "sp_ids")
    if sp_weights is not None:
        sp_weights = _sparse(sp_weights, "sp_weights")
    if isinstance(params, np.ndarray):
        params = convert_to_tensor(params)
    with name_scope(name or "embedding_lookup_sparse"):
        rows = apply_op("StridedSlice", [sp_ids.indices, np.array([0, 0], np.int64),
                                         np.array([0, 1], np.int64), np.array([1, 1], np.int64)],
                        {"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 2})
        segment_ids = apply_op("Cast", [rows], {"DstT": DType.i32})
        last = apply_op("Max", [segment_ids, np.array([0], np.int32)], {"keep_dims": False})
        count = apply_op("Maximum", [apply_op("AddV2", [last, np.int32(1)]), np.int32(0)])
        embeddings = embedding_lookup(params, sp_ids.values,
                                      partition_strategy=partition_strategy, max_norm=max_norm)
        dt = embeddings.dtype
        if sp_weights is None:
            weights = apply_op("OnesLike", [apply_op("Cast", [sp_ids.values], {"DstT": dt})])
        else:
            weights = convert_to_tensor(sp_weights.values, dtype=dt)
        weighted = apply_op("Mul", [embeddings, apply_op("ExpandDims", [weights, np.int32(-1)])])
        total = apply_op("UnsortedSegmentSum", [weighted, segment_ids, count])
        if combiner == "sum":
            return total
        if combiner == "sqrtn":
            weights = apply_op("Mul", [weights, weights])
        weight_sum = apply_op("UnsortedSegmentSum", [weights, segment_ids, count])
        if combiner == "sqrtn":
            weight_sum = apply_op("Sqrt", [weight_sum])
        # TensorFlow divides with div_no_nan: a row whose weights sum to 0 (or has no ids) is 0
        zero = apply_op("Equal", [weight_sum, np.zeros((), dt.np)])
        safe = apply_op("SelectV2", [zero, np.ones((), dt.np), weight_sum])
        mean = apply_op("RealDiv", [total, apply_op("ExpandDims", [safe, np.int32(-1)])])
        return apply_op("SelectV2", [apply_op("ExpandDims", [zero, np.int32(-1)]),
                                     np.zeros((), dt.np), mean])
