"""TensorFlow-named array functions (``fl.reshape``, ``fl.concat``, ``fl.gather``, ...) and
``Tensor.__getitem__`` (numpy-style basic indexing built from StridedSlice, as in TensorFlow).

Shape-like arguments (shapes, axes, begin/size, multiples, paddings) may be Python values,
numpy arrays, tensors, or lists mixing Python ints and scalar tensors; Python values become
int32 constants (int64 when they do not fit), as TensorFlow does.
"""
from __future__ import annotations

import builtins
from typing import List, Optional, Sequence

import numpy as np

from dsl.math_ops import cast
from dsl.ops import apply_op, constant, convert_to_tensor
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType, as_dtype

__all__ = [
    "reshape", "transpose", "concat", "split", "slice", "strided_slice", "stack", "unstack",
    "squeeze", "expand_dims", "tile", "pad", "fill", "zeros", "ones", "zeros_like", "ones_like",
    "one_hot", "range", "gather", "shape", "size", "rank", "identity", "stop_gradient", "newaxis",
    "reverse", "bitcast", "identity_n", "space_to_batch_nd", "space_to_batch", "batch_to_space_nd",
    "batch_to_space",
]

newaxis = None
_INDEX_TYPES = (DType.i32, DType.i64)
_I32 = np.iinfo(np.int32)


# --- shape-like arguments ----------------------------------------------------------------------
def _leaves(value) -> list:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _leaves(v)]
    return [value]


def _index_dtype(*values) -> DType:
    """i64 if any tensor or numpy array among ``values`` is int64 or a Python int needs it."""
    for v in (x for value in values for x in _leaves(value)):
        if isinstance(v, Tensor):
            if v.dtype is DType.i64:
                return DType.i64
        elif isinstance(v, np.ndarray):
            if v.dtype == np.int64 or (v.size and v.dtype.kind in "iu" and
                                       (v.max() > _I32.max or v.min() < _I32.min)):
                return DType.i64
        elif isinstance(v, (int, np.integer)) and not _I32.min <= v <= _I32.max:
            return DType.i64
    return DType.i32


def _as_index(value, dtype: Optional[DType] = None) -> Tensor:
    """A shape-like argument as an int32/int64 tensor (``dtype``, or inferred from the value)."""
    dtype = dtype or _index_dtype(value)
    if isinstance(value, Tensor):
        if value.dtype not in _INDEX_TYPES:
            raise TypeError(f"{value.name} is {value.dtype}; shape-like arguments must be int32 "
                            "or int64")
        return cast(value, dtype)
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in _leaves(value)):
        return stack([_as_index(v, dtype) for v in value])
    return constant(value, dtype=dtype)


def _axis_tensor(axis, name: str = "axis") -> Tensor:
    if axis is None:
        raise ValueError(f"{name} must be given")
    return _as_index(axis)


def _tensors(values: Sequence, dtype=None) -> List[Tensor]:
    """Tensors of one dtype: that of the first tensor among ``values`` (or ``dtype``)."""
    if isinstance(values, Tensor) or not isinstance(values, (list, tuple)):
        raise TypeError("expected a list of tensors")
    first = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = dtype if dtype is not None else (first.dtype if first is not None else None)
    return [convert_to_tensor(v, dtype=dtype) for v in values]


# --- shapes ------------------------------------------------------------------------------------
def reshape(tensor, shape, name: Optional[str] = None) -> Tensor:
    """``tensor`` with ``shape`` (one size may be -1); a view, no copy."""
    return apply_op("Reshape", [convert_to_tensor(tensor), _as_index(shape)],
                    name=name or "Reshape")


def bitcast(input, type, name: Optional[str] = None) -> Tensor:  # noqa: A002  (tf.bitcast)
    """The bytes of ``input`` read as ``type`` (Bitcast): to a smaller type a last dim of the
    size ratio is added, to a larger one the last dim (the ratio) goes."""
    return apply_op("Bitcast", [convert_to_tensor(input)], {"type": as_dtype(type)},
                    name=name or "Bitcast")


def transpose(a, perm=None, name: str = "transpose", conjugate: bool = False) -> Tensor:
    """Permute the dims of ``a``; ``perm`` defaults to reversing them."""
    a = convert_to_tensor(a)
    if perm is None:
        if static_shape(a) is not None:
            perm = list(builtins.range(len(static_shape(a)) - 1, -1, -1))
        else:
            perm = range(rank(a) - 1, -1, -1)
    return apply_op("Transpose", [a, _as_index(perm)], name=name)


def squeeze(input, axis=None, name: Optional[str] = None,  # noqa: A002
            squeeze_dims=None) -> Tensor:
    """Remove dims of size 1: those in ``axis`` (an int or list), or all of them."""
    if axis is not None and squeeze_dims is not None:
        raise ValueError("cannot specify both 'axis' and 'squeeze_dims'")
    axis = squeeze_dims if axis is None else axis
    dims = [] if axis is None else [int(a) for a in np.reshape(axis, -1)]
    return apply_op("Squeeze", [convert_to_tensor(input)], {"squeeze_dims": dims},
                    name=name or "Squeeze")


def expand_dims(input, axis=None, name: Optional[str] = None, dim=None) -> Tensor:  # noqa: A002
    """Insert a dim of size 1 at ``axis``; a view, no copy."""
    if axis is not None and dim is not None:
        raise ValueError("cannot specify both 'axis' and 'dim'")
    axis = dim if axis is None else axis
    return apply_op("ExpandDims", [convert_to_tensor(input), _axis_tensor(axis)],
                    name=name or "ExpandDims")


def reverse(tensor, axis, name: Optional[str] = None) -> Tensor:
    """``tensor`` with its elements along each of ``axis`` (a list of ints) in reverse order
    (``tf.reverse``, the op ReverseV2)."""
    axes = np.reshape(np.asarray(axis, dtype=np.int64), -1)
    dtype = DType.i64 if axes.size and (axes.min() < _I32.min or axes.max() > _I32.max) \
        else DType.i32
    return apply_op("ReverseV2", [convert_to_tensor(tensor), axes.astype(dtype.np)],
                    name=name or "ReverseV2")


def shape(input, name: Optional[str] = None, out_type=DType.i32) -> Tensor:  # noqa: A002
    """The shape of ``input`` as a 1-D tensor."""
    return apply_op("Shape", [convert_to_tensor(input)], {"out_type": as_dtype(out_type)},
                    name=name or "Shape")


def size(input, name: Optional[str] = None, out_type=DType.i32) -> Tensor:  # noqa: A002
    """The number of elements of ``input``."""
    return apply_op("Size", [convert_to_tensor(input)], {"out_type": as_dtype(out_type)},
                    name=name or "Size")


def rank(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """The number of dims of ``input`` (int32 scalar)."""
    return apply_op("Rank", [convert_to_tensor(input)], name=name or "Rank")


def identity(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    return apply_op("Identity", [convert_to_tensor(input)], name=name or "Identity")


def identity_n(input, name: Optional[str] = None) -> List[Tensor]:  # noqa: A002
    """The tensors of the list ``input``, unchanged (``tf.identity_n``, the op IdentityN)."""
    outs = apply_op("IdentityN", [[convert_to_tensor(x) for x in input]],
                    name=name or "IdentityN")
    return list(outs) if isinstance(outs, (list, tuple)) else [outs]


def space_to_batch_nd(input, block_shape, paddings,  # noqa: A002
                      name: Optional[str] = None) -> Tensor:
    """``tf.space_to_batch_nd`` (the op SpaceToBatchND): the M dims after the batch padded by
    ``paddings`` [M, 2] and cut into blocks of ``block_shape`` [M] that move into the batch."""
    dtype = _index_dtype(block_shape)
    return apply_op("SpaceToBatchND", [convert_to_tensor(input), _as_index(block_shape, dtype),
                                       _as_index(paddings, _index_dtype(paddings))],
                    name=name or "SpaceToBatchND")


space_to_batch = space_to_batch_nd      # tf.space_to_batch (TF2) takes the same arguments


def batch_to_space_nd(input, block_shape, crops,  # noqa: A002
                      name: Optional[str] = None) -> Tensor:
    """``tf.batch_to_space`` (the op BatchToSpaceND): the inverse of ``space_to_batch_nd``,
    then ``crops`` [M, 2] cut from both ends of each of the M spatial dims."""
    return apply_op("BatchToSpaceND", [convert_to_tensor(input),
                                       _as_index(block_shape, _index_dtype(block_shape)),
                                       _as_index(crops, _index_dtype(crops))],
                    name=name or "BatchToSpaceND")


batch_to_space = batch_to_space_nd      # tf.batch_to_space (TF2) takes the same arguments


def stop_gradient(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """``input``, with no gradient flowing through it."""
    return apply_op("StopGradient", [convert_to_tensor(input)], name=name or "StopGradient")


# --- joining and splitting ----------------------------------------------------------------------
def concat(values, axis, name: str = "concat") -> Tensor:
    """Join ``values`` along ``axis`` (a single value is returned through Identity)."""
    values = _tensors(values)
    if len(values) == 1:
        return identity(values[0], name=name)
    return apply_op("ConcatV2", [values, _axis_tensor(axis)], name=name)


def stack(values, axis: int = 0, name: Optional[str] = None) -> Tensor:
    """Stack tensors of one shape along a new dim ``axis`` (Pack)."""
    return apply_op("Pack", [_tensors(values)], {"axis": int(axis)}, name=name or "stack")


def unstack(value, num: Optional[int] = None, axis: int = 0, name: str = "unstack") -> List[Tensor]:
    """Split dim ``axis`` of ``value`` into a list of ``num`` tensors (inferred when static)."""
    value = convert_to_tensor(value)
    if num is None:
        s = static_shape(value)
        if s is None or not -len(s) <= axis < len(s) or s[axis] is None:
            raise ValueError(f"Cannot infer argument `num` from shape {value.output.type}")
        num = s[axis]
    if num == 0:
        return []
    return apply_op("Unpack", [value], {"num": int(num), "axis": int(axis)}, name=name)


def split(value, num_or_size_splits, axis=0, num: Optional[int] = None,
          name: str = "split") -> List[Tensor]:
    """Split ``value`` along ``axis`` into that many equal parts, or parts of the given sizes."""
    value = convert_to_tensor(value)
    n = num_or_size_splits
    if isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)):
        return apply_op("Split", [_as_index(axis, DType.i32), value],
                        {"num_split": int(num_or_size_splits)}, name=name)
    sizes = _as_index(num_or_size_splits)
    if num is None:
        s = static_shape(sizes)
        if s is None or len(s) != 1 or s[0] is None:
            raise ValueError(f"Cannot infer argument `num` from shape {sizes.output.type}")
        num = s[0]
    return apply_op("SplitV", [value, sizes, _as_index(axis, DType.i32)], {"num_split": int(num)},
                    name=name)


# --- slicing ------------------------------------------------------------------------------------
def slice(input_, begin, size, name: Optional[str] = None) -> Tensor:  # noqa: A001
    """The box of ``size`` elements starting at ``begin`` (a size of -1: to the end)."""
    dtype = _index_dtype(begin, size)
    return apply_op("Slice", [convert_to_tensor(input_), _as_index(begin, dtype),
                              _as_index(size, dtype)], name=name or "Slice")


def strided_slice(input_, begin, end, strides=None, begin_mask: int = 0, end_mask: int = 0,
                  ellipsis_mask: int = 0, new_axis_mask: int = 0, shrink_axis_mask: int = 0,
                  var=None, name: Optional[str] = None) -> Tensor:
    """numpy-style slicing with TensorFlow's masks (see ``Tensor.__getitem__``)."""
    dtype = _index_dtype(begin, end, strides)
    begin, end = _as_index(begin, dtype), _as_index(end, dtype)
    strides = apply_op("OnesLike", [begin]) if strides is None else _as_index(strides, dtype)
    masks = {"begin_mask": begin_mask, "end_mask": end_mask, "ellipsis_mask": ellipsis_mask,
             "new_axis_mask": new_axis_mask, "shrink_axis_mask": shrink_axis_mask}
    return apply_op("StridedSlice", [convert_to_tensor(input_), begin, end, strides], masks,
                    name=name or "StridedSlice")


def _check_index(idx):
    """A valid single index: a Python/numpy int or a scalar int32/int64 tensor."""
    if isinstance(idx, Tensor):
        if idx.dtype in _INDEX_TYPES and (static_shape(idx) is None or static_shape(idx) == ()):
            return idx
    elif isinstance(idx, (int, np.integer)) and not isinstance(idx, (bool, np.bool_)):
        return int(idx)
    raise TypeError("Only integers, slices (`:`), ellipsis (`...`), fl.newaxis (`None`) and "
                    f"scalar int32/int64 tensors are valid indices, got {idx!r}")


def _getitem(tensor: Tensor, slice_spec) -> Tensor:
    """``tensor[spec]``: ints (dim removed), slices with steps, ``...``, None (new axis), and
    scalar int tensors, built into one StridedSlice exactly as TensorFlow does."""
    if not isinstance(slice_spec, tuple):
        slice_spec = (slice_spec,)
    begin, end, strides = [], [], []
    masks = dict.fromkeys(("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                           "shrink_axis_mask"), 0)
    for index, s in enumerate(slice_spec):
        bit = 1 << index
        if isinstance(s, builtins.slice):
            for bound, values, mask in ((s.start, begin, "begin_mask"), (s.stop, end, "end_mask")):
                if bound is None:
                    values.append(0)
                    masks[mask] |= bit
                else:
                    values.append(_check_index(bound))
            strides.append(1 if s.step is None else _check_index(s.step))
        elif s is Ellipsis or s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["ellipsis_mask" if s is Ellipsis else "new_axis_mask"] |= bit
        else:
            s = _check_index(s)
            begin.append(s)
            end.append(s + 1)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
    dtype = _index_dtype(begin, end, strides)
    return strided_slice(tensor, _as_index(begin, dtype), _as_index(end, dtype),
                         _as_index(strides, dtype), name="strided_slice", **masks)


Tensor.__getitem__ = _getitem


def gather(params, indices, validate_indices=None, name: Optional[str] = None, axis=None,
           batch_dims: int = 0) -> Tensor:
    """Slices of ``params`` along ``axis`` (default: ``batch_dims``) at ``indices``; an index
    out of range is a run-time error."""
    params = convert_to_tensor(params)
    indices = indices if isinstance(indices, Tensor) else _as_index(indices)
    axis = batch_dims if axis is None else axis
    return apply_op("GatherV2", [params, indices, _axis_tensor(axis)],
                    {"batch_dims": int(batch_dims)}, name=name or "GatherV2")


# --- building tensors ---------------------------------------------------------------------------
def tile(input, multiples, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """Repeat ``input`` multiples[k] times along each dim k."""
    return apply_op("Tile", [convert_to_tensor(input), _as_index(multiples)], name=name or "Tile")


def pad(tensor, paddings, mode: str = "CONSTANT", name: Optional[str] = None,
        constant_values=0) -> Tensor:
    """Pad with zeros: paddings[k] = [before, after] elements around dim k."""
    if str(mode).upper() != "CONSTANT":
        raise NotImplementedError(f"pad mode {mode!r} is not supported; only 'CONSTANT'")
    if isinstance(constant_values, Tensor) or np.any(np.asarray(constant_values) != 0):
        raise NotImplementedError("pad supports only constant_values=0 (op Pad)")
    return apply_op("Pad", [convert_to_tensor(tensor), _as_index(paddings)], name=name or "Pad")


def fill(dims, value, name: Optional[str] = None) -> Tensor:
    """A tensor of shape ``dims`` filled with the scalar ``value``."""
    return apply_op("Fill", [_as_index(dims), convert_to_tensor(value)], name=name or "Fill")


def zeros(shape, dtype=DType.f32, name: Optional[str] = None) -> Tensor:
    """A tensor of zeros of ``shape``."""
    return fill(shape, constant(0, dtype=as_dtype(dtype)), name=name or "zeros")


def ones(shape, dtype=DType.f32, name: Optional[str] = None) -> Tensor:
    """A tensor of ones of ``shape``."""
    return fill(shape, constant(1, dtype=as_dtype(dtype)), name=name or "ones")


def zeros_like(tensor, dtype=None, name: Optional[str] = None, optimize: bool = True) -> Tensor:
    """Zeros with the shape of ``tensor`` (and its dtype unless ``dtype`` is given)."""
    tensor = convert_to_tensor(tensor)
    if dtype is not None and as_dtype(dtype) != tensor.dtype:
        return zeros(shape(tensor), dtype=dtype, name=name)
    return apply_op("ZerosLike", [tensor], name=name or "zeros_like")


def ones_like(tensor, dtype=None, name: Optional[str] = None, optimize: bool = True) -> Tensor:
    """Ones with the shape of ``tensor`` (and its dtype unless ``dtype`` is given)."""
    tensor = convert_to_tensor(tensor)
    if dtype is not None and as_dtype(dtype) != tensor.dtype:
        return ones(shape(tensor), dtype=dtype, name=name)
    return apply_op("OnesLike", [tensor], name=name or "ones_like")


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None,
            name: Optional[str] = None) -> Tensor:
    """One-hot vectors of ``depth`` along ``axis`` (default last); indices outside
    [0, depth) give rows of ``off_value``. The dtype comes from ``dtype``, else from
    on/off values, else float32."""
    if dtype is None:
        given = [convert_to_tensor(v) for v in (on_value, off_value) if v is not None]
        dtype = given[0].dtype if given else DType.f32
    dtype = as_dtype(dtype)
    on = convert_to_tensor(1 if on_value is None else on_value, dtype=dtype)
    off = convert_to_tensor(0 if off_value is None else off_value, dtype=dtype)
    indices = indices if isinstance(indices, Tensor) else _as_index(indices)
    depth = _as_index(depth, DType.i32)
    attrs = {"axis": -1 if axis is None else int(axis)}
    return apply_op("OneHot", [indices, depth, on, off], attrs, name=name or "one_hot")


_RANGE_ORDER = (DType.i32, DType.i64, DType.f32, DType.f64)


def range(start, limit=None, delta=1, dtype=None, name: str = "range") -> Tensor:  # noqa: A001
    """start, start + delta, ... before ``limit`` (``range(n)`` counts from 0); the dtype is
    ``dtype`` or the widest of the arguments' (int32 < int64 < float32 < float64)."""
    if limit is None:
        start, limit = 0, start
    args = [start, limit, delta]
    if dtype is None:
        dtypes = [a.dtype if isinstance(a, Tensor) else convert_to_tensor(a).dtype for a in args]
        dtype = max(dtypes, key=lambda d: _RANGE_ORDER.index(d) if d in _RANGE_ORDER else -1)
    dtype = as_dtype(dtype)
    tensors = [cast(a, dtype) if isinstance(a, Tensor) else constant(a, dtype=dtype) for a in args]
    return apply_op("Range", tensors, name=name)
