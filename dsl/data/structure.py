"""Nested structures of a dataset's elements (TensorFlow's ``nest``, as ``tf.data`` uses it):
tuples (namedtuples too) and dicts are structure, anything else is one component. Dict
components are flattened in the order of their sorted keys, as TensorFlow does."""
from __future__ import annotations

from typing import Any, List


def is_structure(value) -> bool:
    return isinstance(value, (tuple, dict))


def flatten(value) -> List[Any]:
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in flatten(value[k])]
    if isinstance(value, tuple):
        return [x for v in value for x in flatten(v)]
    return [value]


def pack(structure, flat: List[Any]):
    """``flat`` (as ``flatten`` gives it) in the shape of ``structure``."""
    it = iter(flat)

    def build(s):
        if isinstance(s, dict):
            return {k: build(s[k]) for k in sorted(s)}
        if isinstance(s, tuple):
            items = [build(v) for v in s]
            return type(s)(*items) if hasattr(s, "_fields") else tuple(items)
        return next(it)
    out = build(structure)
    if next(it, None) is not None:
        raise ValueError("more values than the structure has components")
    return out


def map_structure(fn, structure):
    return pack(structure, [fn(x) for x in flatten(structure)])
