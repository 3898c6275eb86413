"""The ops over a sparse tensor held as three dense tensors (indices ``[N, R]``, values ``[N]``,
dense shape ``[R]``), as TensorFlow defines them: SparseToDense, SparseTensorDenseMatMul,
SparseReduceSum, SparseReorder, SparseTensorDenseAdd, SparseReshape, SparseAdd and
SparseAddGrad.

- Every index is checked against the dense shape; one outside it is an error naming the
  entry, found before anything is written (the C kernels check first too:
  ``compiler/codegen/c_ops/sparse_tensor.py``).
- SparseToDense with ``validate_indices`` (its default) also refuses indices that are not in
  row-major order or that repeat, as TensorFlow does; without it a repeated index keeps the
  last value.
- SparseTensorDenseAdd and SparseReduceSum sum repeated indices; SparseReorder sorts the
  entries into row-major order, keeping the order of equal indices.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op


def _entries(node, indices: np.ndarray, shape: Sequence[int], what: str = "indices") -> np.ndarray:
    """``indices`` as int64 rows ``[N, R]``; raises naming the first row outside ``shape``."""
    rows = np.asarray(indices, np.int64)
    if rows.ndim != 2:
        raise ExecutionError(f"{what} must be a matrix [N, rank], got shape {list(rows.shape)}",
                             node)
    bounds = np.asarray(shape, np.int64)
    if rows.shape[1] != len(bounds):
        raise ExecutionError(f"{what} has {rows.shape[1]} columns but the dense shape "
                             f"{list(bounds)} has rank {len(bounds)}", node)
    bad = np.nonzero(((rows < 0) | (rows >= bounds)).any(axis=1))[0]
    if bad.size:
        k = int(bad[0])
        raise ExecutionError(f"{what}[{k}] = [{', '.join(str(int(v)) for v in rows[k])}] is out "
                             f"of bounds of the dense shape {[int(b) for b in bounds]}", node)
    return rows


def _dense_shape(node, shape: np.ndarray, what: str = "dense_shape") -> List[int]:
    dims = [int(d) for d in np.reshape(shape, -1)]
    if any(d < 0 for d in dims):
        raise ExecutionError(f"{what} must be non-negative, got {dims}", node)
    return dims


def _known_len(ctx, i: int) -> Optional[int]:
    """The length of vector input ``i`` (a dense shape): its value's or its static dim."""
    v = ctx.input_value(i)
    if v is not None:
        return int(np.size(v))
    s = ctx.input_shape(i)
    return s[0] if s is not None and len(s) == 1 else None


def _shape_from_value(ctx, i: int) -> Optional[tuple]:
    v = ctx.input_value(i)
    if v is not None:
        dims = tuple(int(d) for d in np.reshape(v, -1))
        if any(d < 0 for d in dims):
            raise ctx.error(f"dense shape must be non-negative, got {list(dims)}")
        return dims
    n = _known_len(ctx, i)
    return None if n is None else (None,) * n


def _check_sparse_args(ctx, indices: int, values: int, shape: int) -> None:
    """indices [N, R], values [N], shape [R] where the dims are known."""
    ind, val, shp = ctx.input_shape(indices), ctx.input_shape(values), ctx.input_shape(shape)
    if ind is not None and len(ind) != 2:
        raise ctx.error(f"indices must be a matrix [N, rank], got rank {len(ind)}")
    if val is not None and len(val) != 1:
        raise ctx.error(f"values must be a vector [N], got rank {len(val)}")
    if shp is not None and len(shp) != 1:
        raise ctx.error(f"dense shape must be a vector [rank], got rank {len(shp)}")
    if ind is not None and val is not None and None not in (ind[0], val[0]) and ind[0] != val[0]:
        raise ctx.error(f"indices has {ind[0]} rows but values has {val[0]} entries")
    if ind is not None and shp is not None and None not in (ind[1], shp[0]) and ind[1] != shp[0]:
        raise ctx.error(f"indices has {ind[1]} columns but the dense shape has {shp[0]} dims")


def _check_values(node, indices: np.ndarray, values: np.ndarray) -> None:
    if indices.ndim != 2:
        raise ExecutionError(f"indices must be a matrix [N, rank], got shape "
                             f"{list(indices.shape)}", node)
    if values.ndim != 1 or len(values) != len(indices):
        raise ExecutionError(f"values must be a vector of {len(indices)} entries (one per index), "
                             f"got shape {list(values.shape)}", node)


# --- SparseToDense -----------------------------------------------------------------------------
def _sparse_to_dense_shape(ctx) -> list:
    ind, val, dflt = ctx.input_shape(0), ctx.input_shape(2), ctx.input_shape(3)
    if ind is not None and len(ind) > 2:
        raise ctx.error(f"sparse_indices must be a scalar, vector or matrix, got rank {len(ind)}")
    if val is not None and len(val) > 1:
        raise ctx.error(f"sparse_values must be a scalar or vector, got rank {len(val)}")
    if dflt is not None and len(dflt) != 0:
        raise ctx.error(f"default_value must be a scalar, got rank {len(dflt)}")
    return [_shape_from_value(ctx, 1)]


def sparse_to_dense_rows(node, indices: np.ndarray, rank: int) -> np.ndarray:
    """SparseToDense's ``sparse_indices`` (scalar, vector [N] for rank 1, or [N, rank]) as
    int64 rows ``[N, rank]``."""
    ind = np.asarray(indices, np.int64)
    if ind.ndim == 0:
        return ind.reshape(1, 1)
    if ind.ndim == 1:
        return ind.reshape(-1, 1) if rank == 1 else ind.reshape(1, -1)
    return ind


def _sparse_to_dense_ref(ctx, indices, output_shape, values, default):
    node = ctx.node
    dims = _dense_shape(node, output_shape, "output_shape")
    rows = _entries(node, sparse_to_dense_rows(node, indices, len(dims)), dims, "sparse_indices")
    n = len(rows)
    if values.ndim == 1 and len(values) != n:
        raise ExecutionError(f"sparse_values has {len(values)} entries but sparse_indices has "
                             f"{n} rows", node)
    if np.ndim(default) != 0:
        raise ExecutionError("default_value must be a scalar", node)
    if ctx.attrs["validate_indices"] and n > 1:
        flat = np.ravel_multi_index(tuple(rows.T), dims) if dims else np.zeros(n, np.int64)
        step = np.diff(flat)
        bad = np.nonzero(step <= 0)[0]
        if bad.size:
            k = int(bad[0]) + 1
            word = ("repeated" if step[k - 1] == 0 else
                    f"out of order (after [{', '.join(str(int(v)) for v in rows[k - 1])}])")
            at = ", ".join(str(int(v)) for v in rows[k])
            raise ExecutionError(f"sparse_indices[{k}] = [{at}] is {word}", node)
    out = np.full(dims, default, dtype=values.dtype)
    vals = np.broadcast_to(values, (n,))
    for row, v in zip(rows, vals):
        out[tuple(row)] = v
    return out


register_op("SparseToDense",
            inputs=["sparse_indices: Tindices", "output_shape: Tindices", "sparse_values: T",
                    "default_value: T"],
            outputs=["dense: T"],
            attrs=["validate_indices: bool = true", "T: {all}", "Tindices: {i32, i64}"],
            shape=_sparse_to_dense_shape, kernel=_sparse_to_dense_ref, group="movement",
            doc="A dense tensor of output_shape: default_value, with sparse_values at "
                "sparse_indices.")


# --- SparseTensorDenseMatMul -------------------------------------------------------------------
def _sparse_matmul_shape(ctx) -> list:
    ind, val, b = ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(3)
    if ind is not None and (len(ind) != 2 or ind[1] not in (None, 2)):
        raise ctx.error(f"a_indices must be a matrix [N, 2], got {list(ind)}")
    if val is not None and len(val) != 1:
        raise ctx.error(f"a_values must be a vector, got rank {len(val)}")
    if b is not None and len(b) != 2:
        raise ctx.error(f"b must be a matrix, got rank {len(b)}")
    a = _shape_from_value(ctx, 2)
    if a is not None and len(a) != 2:
        raise ctx.error(f"a_shape must have 2 elements (a matrix), got {len(a)}")
    adj_a, adj_b = ctx.attr("adjoint_a"), ctx.attr("adjoint_b")
    rows = None if a is None else a[1 if adj_a else 0]
    inner_a = None if a is None else a[0 if adj_a else 1]
    cols = None if b is None else b[0 if adj_b else 1]
    inner_b = None if b is None else b[1 if adj_b else 0]
    if None not in (inner_a, inner_b) and inner_a != inner_b:
        raise ctx.error(f"cannot multiply A and B because inner dimension does not match: "
                        f"{inner_a} vs. {inner_b}")
    return [(rows, cols)]


def _sparse_matmul_ref(ctx, indices, values, a_shape, b):
    node = ctx.node
    adj_a, adj_b = ctx.attrs["adjoint_a"], ctx.attrs["adjoint_b"]
    dims = _dense_shape(node, a_shape, "a_shape")
    if len(dims) != 2:
        raise ExecutionError(f"a_shape must be a matrix shape, got {dims}", node)
    _check_values(node, np.asarray(indices), values)
    rows = _entries(node, indices, dims, "a_indices")
    bm = b.T if adj_b else b
    m, k = (dims[1], dims[0]) if adj_a else (dims[0], dims[1])
    if bm.shape[0] != k:
        raise ExecutionError(f"cannot multiply A and B because inner dimension does not match: "
                             f"{k} vs. {bm.shape[0]}", node)
    acc = np.float64 if values.dtype.kind == "f" else values.dtype
    out = np.zeros((m, bm.shape[1]), acc)
    r, c = (rows[:, 1], rows[:, 0]) if adj_a else (rows[:, 0], rows[:, 1])
    np.add.at(out, r, values.astype(acc)[:, None] * bm[c].astype(acc))
    return out.astype(values.dtype)


register_op("SparseTensorDenseMatMul",
            inputs=["a_indices: Tindices", "a_values: T", "a_shape: i64", "b: T"],
            outputs=["product: T"],
            attrs=["T: {f32, f64, i32, i64}", "Tindices: {i32, i64} = i64",
                   "adjoint_a: bool = false", "adjoint_b: bool = false"],
            shape=_sparse_matmul_shape, kernel=_sparse_matmul_ref, group="other",
            doc="The sparse matrix A (indices, values, shape) times the dense matrix B.")


# --- SparseReduceSum ---------------------------------------------------------------------------
def reduced_axes(node, axes, rank: int, error) -> List[int]:
    """Reduction axes in [-rank, rank) as sorted non-negative axes (all when empty)."""
    out = set()
    for a in np.reshape(np.asarray(axes), -1):
        a = int(a)
        if not -rank <= a < rank:
            raise error(f"invalid reduction axis {a} for a rank-{rank} sparse tensor")
        out.add(a % rank if rank else 0)
    return sorted(out)


def _sparse_reduce_shape(ctx) -> list:
    _check_sparse_args(ctx, 0, 1, 2)
    dense = _shape_from_value(ctx, 2)
    axes = ctx.input_value(3)
    if dense is None or axes is None:
        return [None]
    keep = reduced_axes(ctx.node, axes, len(dense), ctx.error)
    if ctx.attr("keep_dims"):
        return [tuple(1 if k in keep else d for k, d in enumerate(dense))]
    return [tuple(d for k, d in enumerate(dense) if k not in keep)]


def _sparse_reduce_ref(ctx, indices, values, shape, axes):
    node = ctx.node
    dims = _dense_shape(node, shape, "input_shape")
    _check_values(node, indices, values)
    rows = _entries(node, indices, dims, "input_indices")

    def error(msg):
        return ExecutionError(msg, node)
    red = reduced_axes(node, axes, len(dims), error)
    kept = [1 if k in red else d for k, d in enumerate(dims)]
    acc = np.float64 if values.dtype.kind == "f" else values.dtype
    out = np.zeros(kept, acc)
    at = rows.copy()
    at[:, red] = 0
    with np.errstate(over="ignore"):
        np.add.at(out, tuple(at.T), values.astype(acc))
    out = out.astype(values.dtype)
    if not ctx.attrs["keep_dims"]:
        out = out.reshape([d for k, d in enumerate(dims) if k not in red])
    return out


register_op("SparseReduceSum",
            inputs=["input_indices: i64", "input_values: T", "input_shape: i64",
                    "reduction_axes: i32"],
            outputs=["output: T"],
            attrs=["keep_dims: bool = false", "T: {numeric}"],
            shape=_sparse_reduce_shape, kernel=_sparse_reduce_ref, group="other",
            doc="The sum of a sparse tensor's entries over reduction_axes, as a dense tensor.")


# --- SparseReorder -----------------------------------------------------------------------------
def _sparse_reorder_shape(ctx) -> list:
    _check_sparse_args(ctx, 0, 1, 2)
    return [ctx.input_shape(0), ctx.input_shape(1)]


def reorder_permutation(rows: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """The stable permutation that puts index rows in row-major order."""
    if rows.shape[1] == 0:
        return np.arange(len(rows))
    return np.lexsort(tuple(rows[:, k] for k in range(rows.shape[1] - 1, -1, -1)))


def _sparse_reorder_ref(ctx, indices, values, shape):
    node = ctx.node
    dims = _dense_shape(node, shape, "input_shape")
    _check_values(node, indices, values)
    rows = _entries(node, indices, dims, "input_indices")
    perm = reorder_permutation(rows, dims)
    return rows[perm], values[perm]


register_op("SparseReorder", inputs=["input_indices: i64", "input_values: T", "input_shape: i64"],
            outputs=["output_indices: i64", "output_values: T"], attrs=["T: {all}"],
            shape=_sparse_reorder_shape, kernel=_sparse_reorder_ref, group="other",
            doc="The sparse tensor's entries sorted into row-major (canonical) order.")


# --- SparseTensorDenseAdd ----------------------------------------------------------------------
def _sparse_dense_add_shape(ctx) -> list:
    _check_sparse_args(ctx, 0, 1, 2)
    b = ctx.input_shape(3)
    a = _shape_from_value(ctx, 2)
    if a is not None and b is not None:
        if len(a) != len(b):
            raise ctx.error(f"a_shape has {len(a)} dims but b has rank {len(b)}")
        for k, (x, y) in enumerate(zip(a, b)):
            if None not in (x, y) and x != y:
                raise ctx.error(f"a_shape dim {k} ({x}) does not equal b dim {k} ({y})")
    return [b]


def _sparse_dense_add_ref(ctx, indices, values, shape, b):
    node = ctx.node
    dims = _dense_shape(node, shape, "a_shape")
    if list(b.shape) != dims:
        raise ExecutionError(f"a_shape {dims} does not equal b's shape {list(b.shape)}", node)
    _check_values(node, indices, values)
    rows = _entries(node, indices, dims, "a_indices")
    out = np.array(b, copy=True)
    with np.errstate(over="ignore"):
        np.add.at(out, tuple(rows.T), values)
    return out


register_op("SparseTensorDenseAdd",
            inputs=["a_indices: Tindices", "a_values: T", "a_shape: Tindices", "b: T"],
            outputs=["output: T"], attrs=["T: {numeric}", "Tindices: {i32, i64}"],
            shape=_sparse_dense_add_shape, kernel=_sparse_dense_add_ref, group="other",
            doc="The dense b plus the sparse A (repeated indices summed).")


# --- SparseReshape -----------------------------------------------------------------------------
def _sparse_reshape_shape(ctx) -> list:
    ind, new = ctx.input_shape(0), ctx.input_shape(2)
    if ind is not None and len(ind) != 2:
        raise ctx.error(f"input_indices must be a matrix [N, rank], got rank {len(ind)}")
    if new is not None and len(new) != 1:
        raise ctx.error(f"new_shape must be a vector, got rank {len(new)}")
    rank = _known_len(ctx, 2)
    return [(None if ind is None else ind[0], rank), (rank,)]


def reshaped_dims(node, dims: Sequence[int], new_shape: Sequence[int]) -> List[int]:
    """``new_shape`` with its -1 (at most one) inferred so it holds as many elements as
    ``dims``; raises naming ``node`` when it cannot."""
    dense = int(np.prod(dims, dtype=np.int64))
    out, unknown, known = [], None, 1
    for j, d in enumerate(int(v) for v in new_shape):
        if d == -1:
            if unknown is not None:
                raise ExecutionError(f"only one output dimension may be -1, not both {unknown} "
                                     f"and {j}", node)
            unknown = j
        elif d < 0:
            raise ExecutionError(f"size {j} must be non-negative, not {d}", node)
        else:
            known *= d
        out.append(d)
    if unknown is not None:
        if known == 0 or dense % known:
            raise ExecutionError(f"input to reshape is a SparseTensor with {dense} dense values, "
                                 f"but the requested shape {out} cannot hold them", node)
        out[unknown] = dense // known
    elif known != dense:
        raise ExecutionError(f"input to reshape is a SparseTensor with {dense} dense values, but "
                             f"the requested shape has {known}", node)
    return out


def _sparse_reshape_ref(ctx, indices, shape, new_shape):
    node = ctx.node
    dims = _dense_shape(node, shape, "input_shape")
    rows = _entries(node, indices, dims, "input_indices")
    out = reshaped_dims(node, dims, np.reshape(new_shape, -1))
    if len(rows) == 0:
        return np.zeros((0, len(out)), np.int64), np.asarray(out, np.int64)
    flat = np.ravel_multi_index(tuple(rows.T), dims) if dims else np.zeros(len(rows), np.int64)
    moved = np.stack(np.unravel_index(flat, out), axis=1) if out else np.zeros((len(rows), 0))
    return moved.astype(np.int64), np.asarray(out, np.int64)


register_op("SparseReshape", inputs=["input_indices: i64", "input_shape: i64", "new_shape: i64"],
            outputs=["output_indices: i64", "output_shape: i64"],
            shape=_sparse_reshape_shape, kernel=_sparse_reshape_ref, group="other",
            doc="The indices of a sparse tensor reshaped to new_shape (one dim may be -1).")


# --- SparseAdd, SparseAddGrad --------------------------------------------------------------------
def _row_cmp(x: np.ndarray, i: int, y: np.ndarray, j: int) -> int:
    for u, v in zip(x[i], y[j]):
        if u != v:
            return -1 if u < v else 1
    return 0


def sparse_add_merge(a_rows: np.ndarray, b_rows: np.ndarray):
    """TensorFlow's SparseAdd merge of two row-major-ordered index lists: yields
    (from_a, i, from_b, j) per output entry (i or j is None when only one side has it)."""
    i = j = 0
    while i < len(a_rows) and j < len(b_rows):
        c = _row_cmp(a_rows, i, b_rows, j)
        if c < 0:
            yield i, None
            i += 1
        elif c > 0:
            yield None, j
            j += 1
        else:
            yield i, j
            i += 1
            j += 1
    for k in range(i, len(a_rows)):
        yield k, None
    for k in range(j, len(b_rows)):
        yield None, k


def _sparse_add_shape(ctx) -> list:
    _check_sparse_args(ctx, 0, 1, 2)
    _check_sparse_args(ctx, 3, 4, 5)
    if ctx.input_shape(6) is not None and len(ctx.input_shape(6)) != 0:
        raise ctx.error("thresh must be a scalar")
    a, b = ctx.input_shape(2), ctx.input_shape(5)
    rank = _known_len(ctx, 2) or _known_len(ctx, 5)
    if None not in (a, b) and None not in (a[0], b[0]) and a[0] != b[0]:
        raise ctx.error(f"operands do not have the same ranks: {a[0]} and {b[0]}")
    return [(None, rank), (None,), (rank,)]


def _sparse_add_ref(ctx, a_ind, a_val, a_shape, b_ind, b_val, b_shape, thresh):
    node = ctx.node
    dims = _dense_shape(node, a_shape, "a_shape")
    if _dense_shape(node, b_shape, "b_shape") != dims:
        raise ExecutionError(f"operands' shapes do not match: {dims} and "
                             f"{[int(d) for d in np.reshape(b_shape, -1)]}", node)
    _check_values(node, a_ind, a_val)
    _check_values(node, b_ind, b_val)
    a_rows = _entries(node, a_ind, dims, "a_indices")
    b_rows = _entries(node, b_ind, dims, "b_indices")
    if np.ndim(thresh) != 0:
        raise ExecutionError("thresh must be a scalar", node)
    rows, values = [], []
    with np.errstate(over="ignore"):
        for i, j in sparse_add_merge(a_rows, b_rows):
            if j is None:
                rows.append(a_rows[i]), values.append(a_val[i])
            elif i is None:
                rows.append(b_rows[j]), values.append(b_val[j])
            else:
                total = a_val[i] + b_val[j]
                if np.abs(total) >= thresh:
                    rows.append(a_rows[i]), values.append(total)
    out_rows = np.asarray(rows, np.int64).reshape(len(rows), len(dims))
    return out_rows, np.asarray(values, a_val.dtype).reshape(len(rows)), np.asarray(dims, np.int64)


register_op("SparseAdd",
            inputs=["a_indices: i64", "a_values: T", "a_shape: i64", "b_indices: i64",
                    "b_values: T", "b_shape: i64", "thresh: Treal"],
            outputs=["sum_indices: i64", "sum_values: T", "sum_shape: i64"],
            attrs=["T: {numeric}", "Treal: {realnumber}"],
            shape=_sparse_add_shape, kernel=_sparse_add_ref, group="other",
            doc="The sum of two sparse tensors in row-major order; sums of entries at the same "
                "index below thresh in magnitude are dropped.")


def _sparse_add_grad_shape(ctx) -> list:
    a, b = ctx.input_shape(1), ctx.input_shape(2)
    return [(None if a is None else a[0],), (None if b is None else b[0],)]


def _sparse_add_grad_ref(ctx, grad, a_ind, b_ind, sum_ind):
    a_rows, b_rows = np.asarray(a_ind, np.int64), np.asarray(b_ind, np.int64)
    sum_rows = np.asarray(sum_ind, np.int64)
    a_grad, b_grad = np.zeros(len(a_rows), grad.dtype), np.zeros(len(b_rows), grad.dtype)
    k = 0
    for i, j in sparse_add_merge(a_rows, b_rows):
        if k >= len(sum_rows):
            break
        side, at = (a_rows, i) if i is not None else (b_rows, j)
        if _row_cmp(side, at, sum_rows, k) == 0:
            if i is not None:
                a_grad[i] = grad[k]
            if j is not None:
                b_grad[j] = grad[k]
            k += 1
    return a_grad, b_grad


register_op("SparseAddGrad",
            inputs=["backprop_val_grad: T", "a_indices: i64", "b_indices: i64",
                    "sum_indices: i64"],
            outputs=["a_val_grad: T", "b_val_grad: T"], attrs=["T: {numeric}"],
            shape=_sparse_add_grad_shape, kernel=_sparse_add_grad_ref, group="other",
            doc="SparseAdd's gradient: the sum's value gradients routed back to a and b.")


__all__: List[str] = ["sparse_to_dense_rows", "reduced_axes", "reorder_permutation",
                       "reshaped_dims", "sparse_add_merge"]
