"""``fl.nest`` (TensorFlow 1.x's ``tf.nest``): nested structures of values.

Lists, tuples (namedtuples too) and dicts are structure; anything else (a tensor, a number,
None) is one leaf. A dict's leaves come in the order of its sorted keys, as TensorFlow's; a
packed dict keeps the key order of the structure it was packed as. ``fl.map_fn``, ``fl.scan``
and the folds (``dsl/functional_ops.py``) read their arguments' structures through these.
"""
from __future__ import annotations

import collections.abc
from typing import Any, Callable, List

__all__ = ["is_nested", "flatten", "pack_sequence_as", "assert_same_structure",
           "map_structure"]


def is_nested(value) -> bool:
    """Whether ``value`` is a structure (list, tuple or dict) rather than a leaf."""
    return isinstance(value, (list, tuple, collections.abc.Mapping))


is_sequence = is_nested          # TF 1.x's older name


def _children(value) -> List[Any]:
    if isinstance(value, collections.abc.Mapping):
        return [value[k] for k in _sorted_keys(value)]
    return list(value)


def _sorted_keys(mapping) -> list:
    try:
        return sorted(mapping)
    except TypeError:
        raise TypeError("nest only supports dicts with sortable keys.") from None


def flatten(structure) -> List[Any]:
    """The leaves of ``structure``, depth first (a leaf gives ``[leaf]``)."""
    if not is_nested(structure):
        return [structure]
    return [x for child in _children(structure) for x in flatten(child)]


def _sequence_like(instance, items: List[Any]):
    """``items`` (in flatten order) in a container of ``instance``'s kind."""
    if isinstance(instance, collections.abc.Mapping):
        by_key = dict(zip(_sorted_keys(instance), items))
        if isinstance(instance, collections.defaultdict):
            out = collections.defaultdict(instance.default_factory)
            for k in instance:
                out[k] = by_key[k]
            return out
        return type(instance)((k, by_key[k]) for k in instance)
    if isinstance(instance, tuple) and hasattr(instance, "_fields"):
        return type(instance)(*items)
    return type(instance)(items)


def pack_sequence_as(structure, flat_sequence):
    """``flat_sequence`` (leaves in ``flatten`` order) in the shape of ``structure``."""
    if not is_nested(flat_sequence):
        raise TypeError(f"flat_sequence must be a sequence, got {type(flat_sequence).__name__}")
    flat_sequence = list(flat_sequence)
    if not is_nested(structure):
        if len(flat_sequence) != 1:
            raise ValueError(f"Structure is a scalar but len(flat_sequence) == "
                             f"{len(flat_sequence)} > 1")
        return flat_sequence[0]
    count = len(flatten(structure))
    if count != len(flat_sequence):
        raise ValueError(f"Could not pack sequence. Structure had {count} elements, but "
                         f"flat_sequence had {len(flat_sequence)} elements.  Structure: "
                         f"{structure}, flat_sequence: {flat_sequence}.")
    it = iter(flat_sequence)

    def build(s):
        if not is_nested(s):
            return next(it)
        return _sequence_like(s, [build(c) for c in _children(s)])
    return build(structure)


def _same_type(a, b) -> bool:
    if type(a) is type(b):
        return True
    named = [isinstance(x, tuple) and hasattr(x, "_fields") for x in (a, b)]
    if all(named):                          # namedtuples of one name and fields are alike
        return type(a).__name__ == type(b).__name__ and a._fields == b._fields
    mapping = [isinstance(x, collections.abc.Mapping) for x in (a, b)]
    return all(mapping)


def assert_same_structure(nest1, nest2, check_types: bool = True) -> None:
    """Raise unless ``nest1`` and ``nest2`` nest alike: ValueError for a different nesting
    or number of leaves, TypeError (with ``check_types``) for different sequence types."""
    def fail():
        raise ValueError("The two structures don't have the same nested structure.\n\n"
                         f"First structure: {nest1}\n\nSecond structure: {nest2}")

    def walk(a, b):
        if is_nested(a) != is_nested(b):
            fail()
        if not is_nested(a):
            return
        if check_types and not _same_type(a, b):
            raise TypeError("The two structures don't have the same sequence type. First "
                            f"structure has type {type(a)}, while second structure has type "
                            f"{type(b)}.")
        if isinstance(a, collections.abc.Mapping) and isinstance(b, collections.abc.Mapping):
            if set(a) != set(b):
                raise ValueError("The two dictionaries don't have the same set of keys. First "
                                 f"structure has keys {sorted(a)}, while second structure has "
                                 f"keys {sorted(b)}.")
        ca, cb = _children(a), _children(b)
        if len(ca) != len(cb):
            fail()
        for x, y in zip(ca, cb):
            walk(x, y)
    walk(nest1, nest2)


def map_structure(func: Callable, *structure, check_types: bool = True):
    """``func`` applied leaf by leaf to structures that nest alike; the result has the first
    structure's shape."""
    if not callable(func):
        raise TypeError(f"func must be callable, got: {func}")
    if not structure:
        raise ValueError("Must provide at least one structure")
    for other in structure[1:]:
        assert_same_structure(structure[0], other, check_types=check_types)
    flats = [flatten(s) for s in structure]
    return pack_sequence_as(structure[0], [func(*leaves) for leaves in zip(*flats)])
