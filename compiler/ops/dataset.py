"""Datasets and iterators as graph ops (TensorFlow's ``tf.data`` kernels, TF1 graph mode).

A dataset op's output is a handle (TensorFlow's ``variant``, flowc's ``resource`` scalar) to a
dataset description that the runtime records when the op runs (``runtime/datasets.py``):
``TensorSliceDataset``, ``TensorDataset``, ``RangeDataset``, ``ShuffleDataset``,
``BatchDatasetV2``, ``RepeatDataset``, ``MapDataset``, ``FilterDataset``, ``PrefetchDataset``,
``TakeDataset``, ``SkipDataset``, ``ZipDataset``. Their inputs and attrs are TensorFlow's, but:

- function attrs (``MapDataset``'s ``f``, ``FilterDataset``'s ``predicate``,
  ``OneShotIterator``'s ``dataset_factory``) are strings: flowc has no function values. A
  function is a part of the same graph, named by ``f_args`` (its argument placeholders) and
  ``f_rets`` (its result tensors) (``predicate_args``/``predicate_rets``); the session runs it
  as a step of its own. A one-shot iterator's ``dataset_factory`` names the dataset node to run.
  Captured tensors are read by that step from the graph, so there are no ``other_arguments``.

``IteratorV2`` makes an iterator resource (keyed by its shared name, the node name when empty),
``MakeIterator(dataset, iterator)`` (re)starts it over a dataset, ``IteratorGetNext`` takes the
next element (``OutOfRangeError`` at the end), ``OneShotIterator`` makes an iterator that
starts itself the first time it runs. Every op is stateful (never folded, merged or pruned
from a step that needs it). The C lowering (``compiler/codegen/c_ops/dataset.py``) reaches the
same runtime state through the host-call hook.
"""
from __future__ import annotations

from typing import List

import numpy as np

from compiler.errors import ExecutionError, ShapeError
from compiler.ir.op_registry import register_op
from compiler.ir.types import TensorType, shape_str
from compiler.ops.handles import resource_source
from runtime.datasets import DATASET_OPS, dataset_state, get_next, one_shot
from runtime.dtypes import DType
from runtime.errors import OpError

ITERATOR_OPS = ("IteratorV2", "OneShotIterator")
_TYPES = ["output_types: list(type)", "output_shapes: list(shape) = []"]


def iterator_key(node) -> str:
    return node.attrs.get("shared_name") or node.name


def dataset_source(out):
    """The dataset node a handle comes from (through Identity), or None."""
    return resource_source(out, DATASET_OPS)


def iterator_source(out):
    """The IteratorV2/OneShotIterator node a handle comes from (through Identity), or None."""
    return resource_source(out, ITERATOR_OPS)


def _dataset_of(node, i: int):
    src = dataset_source(node.inputs[i])
    if src is None:
        raise ShapeError(f"input {i} must be a dataset (made by one of {', '.join(DATASET_OPS)})",
                         node)
    return src


def _iterator_of(node, i: int):
    src = iterator_source(node.inputs[i])
    if src is None:
        raise ShapeError(f"input {i} must be an iterator handle made by IteratorV2 or "
                         "OneShotIterator", node)
    return src


def dataset_inputs(node) -> List[int]:
    """The positions of ``node``'s inputs that are datasets (the others are tensors)."""
    return [i for i, o in enumerate(node.inputs) if o.dtype is DType.resource]


def json_attrs(attrs: dict) -> dict:
    """The attrs as JSON values (dtypes by IR name, shapes as lists with None)."""
    out = {}
    for k, v in attrs.items():
        if isinstance(v, DType):
            out[k] = v.ir_name
        elif isinstance(v, (list, tuple)):
            out[k] = [x.ir_name if isinstance(x, DType) else
                      (None if x is None else list(x)) if isinstance(x, (list, tuple)) or x is None
                      else x for x in v]
        elif isinstance(v, (bool, int, float, str)) or v is None:
            out[k] = v
    return out


# --- shape functions ------------------------------------------------------------------------
def _types_and_shapes(ctx) -> List[TensorType]:
    types, shapes = list(ctx.attr("output_types")), list(ctx.attr("output_shapes") or [])
    if not types:
        raise ctx.error("output_types is empty: an element needs at least one component")
    if shapes and len(shapes) != len(types):
        raise ctx.error(f"{len(shapes)} output_shapes for {len(types)} output_types")
    return [TensorType(t, None if not shapes or shapes[k] is None else tuple(shapes[k]))
            for k, t in enumerate(types)]


def _check_scalars(ctx, names) -> None:
    for i, what in names:
        s = ctx.input_shape(i)
        if s is not None and len(s) != 0:
            raise ctx.error(f"{what} must be a scalar, got shape {shape_str(s)}")


def _dataset_shape(scalars=(), slices=False):
    def fn(ctx):
        node = ctx.node
        for i in dataset_inputs(node):
            _dataset_of(node, i)
        _check_scalars(ctx, scalars)
        elems = _types_and_shapes(ctx)
        if slices:
            got = [t.dtype for t in ctx.input_types]
            if got != [e.dtype for e in elems]:
                raise ctx.error(f"components of types ({', '.join(t.ir_name for t in got)}) for "
                                f"output_types ({', '.join(e.dtype.ir_name for e in elems)})")
        return [TensorType(DType.resource, ())]
    return fn


def _iterator_shape(ctx):
    _types_and_shapes(ctx)
    return [TensorType(DType.resource, ())]


def _make_iterator_shape(ctx):
    ds, it = _dataset_of(ctx.node, 0), _iterator_of(ctx.node, 1)
    want, got = list(it.attrs["output_types"]), list(ds.attrs["output_types"])
    if want != got:
        raise ctx.error(f"the iterator yields ({', '.join(t.ir_name for t in want)}); the "
                        f"dataset has elements of ({', '.join(t.ir_name for t in got)})")
    return []


def _get_next_shape(ctx):
    it = _iterator_of(ctx.node, 0)
    if list(it.attrs["output_types"]) != list(ctx.attr("output_types")):
        raise ctx.error("output_types differ from the iterator's")
    return _types_and_shapes(ctx)


# --- reference kernels ----------------------------------------------------------------------
class DatasetHandle:
    def __init__(self, key: str):
        self.key = key


def _state(ctx):
    if ctx.state is None:
        raise ExecutionError(f"{ctx.node.op} needs the runtime's state (a session)", ctx.node)
    return ctx.state


def _naming_node(fn):
    """Runtime errors keep their type and gain the node's name and source location."""
    def kernel(ctx, *args):
        try:
            return fn(ctx, *args)
        except OpError as e:
            raise e.add_node(ctx.node.name, ctx.node.location, ctx.node.op) from None
    return kernel


@_naming_node
def _dataset_kernel(ctx, *args):
    node = ctx.node
    ds = set(dataset_inputs(node))
    keys = [_dataset_of(node, i).name for i in sorted(ds)]
    values = [np.asarray(a) for i, a in enumerate(args) if i not in ds]
    dataset_state(_state(ctx)).define(node.name, node.op, json_attrs(ctx.attrs), keys, values)
    return [np.array(DatasetHandle(node.name), dtype=object)]


def _iterator_kernel(ctx):
    return [np.array(DatasetHandle(iterator_key(ctx.node)), dtype=object)]


@_naming_node
def _one_shot_kernel(ctx):
    one_shot(_state(ctx), iterator_key(ctx.node), ctx.attrs["dataset_factory"])
    return [np.array(DatasetHandle(iterator_key(ctx.node)), dtype=object)]


@_naming_node
def _make_iterator_kernel(ctx, dataset, iterator):
    dataset_state(_state(ctx)).make_iterator(iterator_key(_iterator_of(ctx.node, 1)),
                                             _dataset_of(ctx.node, 0).name)
    return []


@_naming_node
def _get_next_kernel(ctx, iterator):
    return get_next(_state(ctx), iterator_key(_iterator_of(ctx.node, 0)),
                    list(ctx.attrs["output_types"]))


# --- registrations --------------------------------------------------------------------------
def _dataset(name, inputs, attrs=(), scalars=(), slices=False, doc=""):
    register_op(name, inputs=inputs, outputs=["handle: resource"], attrs=list(attrs) + _TYPES,
                shape=_dataset_shape(scalars, slices), kernel=_dataset_kernel, stateful=True,
                group="source", half_native=True, doc=doc)


_dataset("TensorSliceDataset", ["components: Toutput_types"], ["Toutput_types: list(type)"],
         slices=True, doc="The rows of the components, one element per row.")
_dataset("TensorDataset", ["components: Toutput_types"], ["Toutput_types: list(type)"],
         slices=True, doc="One element: the components.")
_dataset("RangeDataset", ["start: i64", "stop: i64", "step: i64"],
         scalars=[(0, "start"), (1, "stop"), (2, "step")],
         doc="start, start + step, ... before stop (int64 elements).")
_dataset("ShuffleDataset", ["input_dataset: resource", "buffer_size: i64", "seed: i64",
                            "seed2: i64"], ["reshuffle_each_iteration: bool = true"],
         scalars=[(1, "buffer_size"), (2, "seed"), (3, "seed2")],
         doc="The input's elements in a random order, through a buffer of buffer_size.")
_dataset("BatchDatasetV2", ["input_dataset: resource", "batch_size: i64", "drop_remainder: bool"],
         ["parallel_copy: bool = false"], scalars=[(1, "batch_size"), (2, "drop_remainder")],
         doc="batch_size consecutive elements stacked (the last batch smaller unless dropped).")
_dataset("RepeatDataset", ["input_dataset: resource", "count: i64"], scalars=[(1, "count")],
         doc="The input count times (-1: forever).")
_dataset("TakeDataset", ["input_dataset: resource", "count: i64"], scalars=[(1, "count")],
         doc="The first count elements (-1: all).")
_dataset("SkipDataset", ["input_dataset: resource", "count: i64"], scalars=[(1, "count")],
         doc="All but the first count elements (-1: none).")
_dataset("PrefetchDataset", ["input_dataset: resource", "buffer_size: i64"],
         ["slack_period: int = 0", "legacy_autotune: bool = true", "buffer_size_min: int = 0"],
         scalars=[(1, "buffer_size")],
         doc="The input, made ahead by a thread of its own (buffer_size elements; -1: 2).")
_dataset("MapDataset", ["input_dataset: resource"],
         ["f: string", "f_args: list(string)", "f_rets: list(string)",
          "use_inter_op_parallelism: bool = true", "preserve_cardinality: bool = false"],
         doc="f applied to each element (f: a part of the graph the session runs as a step).")
_dataset("FilterDataset", ["input_dataset: resource"],
         ["predicate: string", "predicate_args: list(string)", "predicate_rets: list(string)"],
         doc="The elements for which predicate (a part of the graph) is true.")
_dataset("ZipDataset", ["input_datasets: N * resource"], ["N: int >= 1"],
         doc="Elements of the inputs side by side, until the shortest ends.")

register_op("IteratorV2", outputs=["handle: resource"],
            attrs=["shared_name: string = ''", "container: string = ''"] + _TYPES,
            shape=_iterator_shape, kernel=_iterator_kernel, stateful=True, group="source",
            doc="A handle to the iterator shared_name (the node's name): MakeIterator starts it.")
register_op("OneShotIterator", outputs=["handle: resource"],
            attrs=["dataset_factory: string", "container: string = ''",
                   "shared_name: string = ''"] + _TYPES,
            shape=_iterator_shape, kernel=_one_shot_kernel, stateful=True, group="source",
            doc="An iterator that starts itself over dataset_factory (a dataset node) once.")
register_op("MakeIterator", inputs=["dataset: resource", "iterator: resource"],
            shape=_make_iterator_shape, kernel=_make_iterator_kernel, stateful=True,
            doc="(Re)start the iterator at the dataset's first element.")
register_op("IteratorGetNext", inputs=["iterator: resource"], outputs=["components: output_types"],
            attrs=_TYPES, shape=_get_next_shape, kernel=_get_next_kernel, stateful=True,
            half_native=True,
            doc="The iterator's next element; OutOfRangeError at the end of the dataset.")
