"""``fl.data.Dataset`` (TensorFlow 1.x's ``tf.data.Dataset`` in graph mode).

A ``Dataset`` is a graph tensor (a dataset op's handle) plus the structure of its elements:
their nesting (tuples, dicts), dtypes and static shapes. Each transformation adds one dataset
op (``compiler/ops/dataset.py``); nothing runs until an iterator over the dataset is
initialized in a session. ``map`` and ``filter`` trace their function once, into the same
graph: placeholders for the element's components, the function's ops on them; the session runs
that part of the graph as a step of its own (compiled like any other) for each element.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from dsl.context import name_scope
from dsl.data import structure as nest
from dsl.ops import apply_op, convert_to_tensor, placeholder
from dsl.tensor import Tensor, static_shape
from dsl.tensor_shape import TensorShape
from runtime.dtypes import DType, as_dtype

AUTOTUNE = -1


def _i64(value, what: str) -> Tensor:
    if isinstance(value, Tensor):
        if value.dtype is DType.i64:
            return value
        if not value.dtype.is_integer:
            raise TypeError(f"{what} must be an integer, got a {value.dtype.ir_name} tensor")
        from dsl.math_ops import cast
        return cast(value, DType.i64)
    return convert_to_tensor(np.int64(value), dtype=DType.i64)


def _static_int(value) -> Optional[int]:
    if isinstance(value, Tensor):
        return None
    return int(value)


class Dataset:
    """A dataset: ``_variant_tensor`` (its op's handle) and the structure of its elements."""

    def __init__(self, variant: Tensor, structure, types: Sequence[DType],
                 shapes: Sequence[Optional[tuple]]):
        self._variant_tensor = variant
        self._structure = structure            # nesting, with None for each component
        self._types = list(types)
        self._shapes = [None if s is None else tuple(s) for s in shapes]

    # --- what an element is --------------------------------------------------------------
    @property
    def output_types(self):
        return nest.pack(self._structure, self._types)

    @property
    def output_shapes(self):
        return nest.pack(self._structure, [TensorShape(s) for s in self._shapes])

    @property
    def output_classes(self):
        return nest.pack(self._structure, [Tensor] * len(self._types))

    def _attrs(self, types=None, shapes=None) -> dict:
        return {"output_types": list(self._types if types is None else types),
                "output_shapes": list(self._shapes if shapes is None else shapes)}

    def _derive(self, op: str, inputs: list, attrs: Optional[dict] = None, structure=None,
                types=None, shapes=None) -> "Dataset":
        types = self._types if types is None else types
        shapes = self._shapes if shapes is None else shapes
        a = {"output_types": list(types), "output_shapes": list(shapes)}
        a.update(attrs or {})
        h = apply_op(op, [self._variant_tensor] + inputs, a, name=op)
        return Dataset(h, self._structure if structure is None else structure, types, shapes)

    def __iter__(self):
        raise TypeError("a dataset is iterated in a session: make an iterator "
                        "(make_one_shot_iterator or make_initializable_iterator) and run its "
                        "get_next()")

    # --- sources -------------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors) -> "Dataset":
        """One element per row of ``tensors`` (a tensor, or a tuple or dict of them, with
        the same number of rows)."""
        comps = [convert_to_tensor(t) for t in nest.flatten(tensors)]
        comp_shapes = [static_shape(c) for c in comps]
        for c, shape in zip(comps, comp_shapes):
            if shape is not None and len(shape) == 0:
                raise ValueError(f"from_tensor_slices: {c.name} is a scalar; every component "
                                 "needs a leading dim to slice")
        rows = {s[0] for s in comp_shapes if s is not None and s[0] is not None}
        if len(rows) > 1:
            raise ValueError(f"from_tensor_slices: components have different numbers of rows "
                             f"{sorted(rows)}")
        types = [c.dtype for c in comps]
        shapes = [None if s is None else tuple(s[1:]) for s in comp_shapes]
        h = apply_op("TensorSliceDataset", [comps],
                     {"Toutput_types": types, "output_types": types, "output_shapes": shapes},
                     name="TensorSliceDataset")
        return Dataset(h, nest.map_structure(lambda _: None, tensors), types, shapes)

    @staticmethod
    def from_tensors(tensors) -> "Dataset":
        """One element: ``tensors``."""
        comps = [convert_to_tensor(t) for t in nest.flatten(tensors)]
        types = [c.dtype for c in comps]
        shapes = [static_shape(c) for c in comps]
        h = apply_op("TensorDataset", [comps],
                     {"Toutput_types": types, "output_types": types, "output_shapes": shapes},
                     name="TensorDataset")
        return Dataset(h, nest.map_structure(lambda _: None, tensors), types, shapes)

    @staticmethod
    def range(*args, output_type=DType.i64) -> "Dataset":
        """``range(stop)``, ``range(start, stop)``, ``range(start, stop, step)``."""
        if not 1 <= len(args) <= 3:
            raise ValueError(f"range takes 1 to 3 arguments, got {len(args)}")
        start, stop, step = ((0, args[0], 1) if len(args) == 1 else
                             (args[0], args[1], 1) if len(args) == 2 else args)
        h = apply_op("RangeDataset", [_i64(start, "start"), _i64(stop, "stop"),
                                      _i64(step, "step")],
                     {"output_types": [DType.i64], "output_shapes": [()]}, name="RangeDataset")
        ds = Dataset(h, None, [DType.i64], [()])
        out = as_dtype(output_type)
        if out is not DType.i64:
            from dsl.math_ops import cast
            ds = ds.map(lambda x: cast(x, out))
        return ds

    @staticmethod
    def zip(datasets) -> "Dataset":
        """Elements of ``datasets`` (a tuple or dict of datasets) side by side."""
        flat = nest.flatten(datasets)
        if not flat or not all(isinstance(d, Dataset) for d in flat):
            raise TypeError("zip takes a tuple or dict of datasets")
        types = [t for d in flat for t in d._types]
        shapes = [s for d in flat for s in d._shapes]
        h = apply_op("ZipDataset", [[d._variant_tensor for d in flat]],
                     {"N": len(flat), "output_types": types, "output_shapes": shapes},
                     name="ZipDataset")
        structure = nest.pack(datasets, [d._structure for d in flat])
        return Dataset(h, structure, types, shapes)

    # --- transformations -----------------------------------------------------------------
    def shuffle(self, buffer_size, seed: Optional[int] = None,
                reshuffle_each_iteration: Optional[bool] = None) -> "Dataset":
        """The elements in a random order through a buffer of ``buffer_size`` elements; the
        order is deterministic for a given seed (numpy's PCG64, not TensorFlow's order)."""
        from dsl.random_ops import op_seeds
        s, s2 = op_seeds(seed)
        return self._derive("ShuffleDataset", [_i64(buffer_size, "buffer_size"),
                                               _i64(s, "seed"), _i64(s2, "seed2")],
                            {"reshuffle_each_iteration": True if reshuffle_each_iteration is None
                             else bool(reshuffle_each_iteration)})

    def batch(self, batch_size, drop_remainder: bool = False) -> "Dataset":
        n = _static_int(batch_size)
        lead = n if drop_remainder and n is not None else None
        shapes = [None if s is None else (lead,) + s for s in self._shapes]
        return self._derive("BatchDatasetV2", [_i64(batch_size, "batch_size"),
                                               convert_to_tensor(bool(drop_remainder))
                                               if not isinstance(drop_remainder, Tensor)
                                               else drop_remainder],
                            shapes=shapes)

    def repeat(self, count=None) -> "Dataset":
        return self._derive("RepeatDataset", [_i64(-1 if count is None else count, "count")])

    def take(self, count) -> "Dataset":
        return self._derive("TakeDataset", [_i64(count, "count")])

    def skip(self, count) -> "Dataset":
        return self._derive("SkipDataset", [_i64(count, "count")])

    def prefetch(self, buffer_size) -> "Dataset":
        return self._derive("PrefetchDataset", [_i64(buffer_size, "buffer_size")])

    def map(self, map_func, num_parallel_calls=None, deterministic=None) -> "Dataset":
        """``map_func`` applied to each element (called with the components of a tuple
        element as its arguments, with anything else as one argument). It is traced once;
        ``num_parallel_calls`` is accepted, and elements are mapped one at a time."""
        with name_scope("MapDataset_f") as scope:
            args, rets = self._trace(map_func)
            rets_struct = rets if nest.is_structure(rets) else rets
            flat = [convert_to_tensor(r) for r in nest.flatten(rets_struct)]
            if not flat:
                raise ValueError("the map function returned no tensors")
        structure = nest.map_structure(lambda _: None, rets_struct)
        types = [t.dtype for t in flat]
        shapes = [static_shape(t) for t in flat]
        return self._derive("MapDataset", [], {"f": scope.rstrip("/"),
                                               "f_args": [a.name for a in args],
                                               "f_rets": [t.name for t in flat]},
                            structure=structure, types=types, shapes=shapes)

    def filter(self, predicate) -> "Dataset":
        """The elements for which ``predicate`` (called as ``map``'s function) is true."""
        with name_scope("FilterDataset_predicate") as scope:
            args, ret = self._trace(predicate)
            ret = convert_to_tensor(ret)
        ret_shape = static_shape(ret)
        if ret.dtype is not DType.bool or (ret_shape is not None and len(ret_shape) != 0):
            raise ValueError(f"the filter predicate must return a scalar bool, got "
                             f"{ret.dtype.ir_name}{list(ret_shape or [])}")
        return self._derive("FilterDataset", [], {"predicate": scope.rstrip("/"),
                                                  "predicate_args": [a.name for a in args],
                                                  "predicate_rets": [ret.name]})

    def _trace(self, fn) -> Tuple[List[Tensor], Any]:
        """Call ``fn`` on placeholders for an element; returns them and what it returned."""
        args = [placeholder(t, s, name=f"arg{k}")
                for k, (t, s) in enumerate(zip(self._types, self._shapes))]
        element = nest.pack(self._structure, args)
        out = fn(*element) if isinstance(element, tuple) and not hasattr(element, "_fields") \
            else fn(element)
        if isinstance(out, list):                  # TensorFlow 2 takes a list as a tuple
            out = tuple(out)
        return args, out

    def apply(self, transformation_func) -> "Dataset":
        return transformation_func(self)

    # --- iterators -----------------------------------------------------------------------
    def make_one_shot_iterator(self):
        from dsl.data.iterator_ops import Iterator
        return Iterator._one_shot(self)

    def make_initializable_iterator(self, shared_name: Optional[str] = None):
        from dsl.data.iterator_ops import Iterator
        return Iterator._initializable(self, shared_name)


DatasetV1 = Dataset
