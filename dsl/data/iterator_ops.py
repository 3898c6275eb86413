"""``fl.data.Iterator`` (TensorFlow 1.x's ``tf.data.Iterator``) and the ``make_*_iterator``
functions.

An iterator is a resource in the runtime (``IteratorV2``, keyed by its shared name) that
``MakeIterator`` (the ``initializer``) starts over a dataset; ``get_next()`` is an
``IteratorGetNext`` op, which raises ``fl.errors.OutOfRangeError`` at the end of the dataset.
A one-shot iterator (``OneShotIterator``) starts itself the first time ``get_next()`` runs.
"""
from __future__ import annotations

from typing import Optional

from dsl.data import structure as nest
from dsl.data.dataset_ops import Dataset
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor, static_shape
from dsl.tensor_shape import TensorShape
from runtime.dtypes import as_dtype


class Iterator:
    """Elements of a dataset, one ``get_next()`` run at a time."""

    def __init__(self, iterator_resource: Tensor, initializer: Optional[Operation], structure,
                 types, shapes):
        self._iterator_resource = iterator_resource
        self._initializer = initializer
        self._structure = structure
        self._types = list(types)
        self._shapes = list(shapes)

    @staticmethod
    def _one_shot(dataset: Dataset) -> "Iterator":
        fed = _placeholders_feeding(dataset._variant_tensor.op.node)
        if fed:
            raise ValueError(f"a one-shot iterator cannot capture placeholder '{fed[0]}' (its "
                             "dataset is made once, with nothing fed); use "
                             "make_initializable_iterator and feed it to the initializer")
        h = apply_op("OneShotIterator", [], {
            "dataset_factory": dataset._variant_tensor.op.name,
            "output_types": dataset._types, "output_shapes": dataset._shapes},
            name="OneShotIterator")
        return Iterator(h, None, dataset._structure, dataset._types, dataset._shapes)

    @staticmethod
    def _initializable(dataset: Dataset, shared_name: Optional[str] = None) -> "Iterator":
        h = apply_op("IteratorV2", [], {"shared_name": shared_name or "",
                                        "output_types": dataset._types,
                                        "output_shapes": dataset._shapes}, name="Iterator")
        it = Iterator(h, None, dataset._structure, dataset._types, dataset._shapes)
        it._initializer = it.make_initializer(dataset)
        return it

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name: Optional[str] = None,
                       output_classes=None) -> "Iterator":
        """An iterator not yet bound to a dataset: ``make_initializer(dataset)`` binds it to
        any dataset of this structure (a reinitializable iterator)."""
        types = [as_dtype(t) for t in nest.flatten(output_types)]
        if output_shapes is None:
            shapes = [None] * len(types)
        else:
            shapes = [static_shape(TensorShape(s))
                      for s in _flatten_shapes(output_types, output_shapes)]
        h = apply_op("IteratorV2", [], {"shared_name": shared_name or "",
                                        "output_types": types, "output_shapes": shapes},
                     name="Iterator")
        return Iterator(h, None, nest.map_structure(lambda _: None, output_types), types, shapes)

    @property
    def initializer(self) -> Operation:
        if self._initializer is None:
            raise ValueError("this iterator has no initializer: a one-shot iterator starts "
                             "itself; one made by from_structure takes make_initializer(dataset)")
        return self._initializer

    def make_initializer(self, dataset: Dataset, name: Optional[str] = None) -> Operation:
        if dataset._types != self._types:
            raise TypeError(f"the dataset's elements are ({', '.join(t.ir_name for t in dataset._types)}); "
                            f"this iterator yields ({', '.join(t.ir_name for t in self._types)})")
        return apply_op("MakeIterator", [dataset._variant_tensor, self._iterator_resource], {},
                        name=name or "MakeIterator")

    def get_next(self, name: Optional[str] = None):
        """The next element (the dataset's structure of tensors); running it past the end
        raises ``fl.errors.OutOfRangeError``."""
        outs = apply_op("IteratorGetNext", [self._iterator_resource],
                        {"output_types": self._types, "output_shapes": self._shapes},
                        name=name or "IteratorGetNext")
        outs = outs if isinstance(outs, list) else [outs]
        return nest.pack(self._structure, outs)

    @property
    def output_types(self):
        return nest.pack(self._structure, self._types)

    @property
    def output_shapes(self):
        return nest.pack(self._structure, [TensorShape(s) for s in self._shapes])

    @property
    def output_classes(self):
        return nest.pack(self._structure, [Tensor] * len(self._types))


def _placeholders_feeding(node) -> list:
    """The names of the Placeholder nodes ``node`` depends on (data or control)."""
    seen, stack, found = set(), [node], []
    while stack:
        n = stack.pop()
        if n.name in seen:
            continue
        seen.add(n.name)
        if n.op == "Placeholder":
            found.append(n.name)
        stack.extend(o.node for o in n.inputs)
        stack.extend(getattr(n, "control_inputs", ()) or ())
    return found


def _flatten_shapes(types, shapes) -> list:
    """Shapes given with the structure of ``types`` (a shape is a list or tuple of dims, so
    it is flattened along ``types``, not by itself)."""
    if isinstance(types, dict):
        return [s for k in sorted(types) for s in _flatten_shapes(types[k], shapes[k])]
    if isinstance(types, tuple):
        return [s for t, sh in zip(types, shapes) for s in _flatten_shapes(t, sh)]
    return [shapes]


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    """``tf.compat.v1.data.make_one_shot_iterator``."""
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset: Dataset, shared_name: Optional[str] = None) -> Iterator:
    """``tf.compat.v1.data.make_initializable_iterator``."""
    return dataset.make_initializable_iterator(shared_name)


def get_output_types(dataset_or_iterator):
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator):
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator):
    return dataset_or_iterator.output_classes
