"""``tf.compat`` as TF1 code uses it: ``dimension_value``/``dimension_at_index``, and ``v1``,
which is this API itself (TF 1.15 code often spells ``tf.compat.v1.placeholder``)."""
import sys

from dsl.tensor_shape import dimension_at_index, dimension_value

__all__ = ["dimension_value", "dimension_at_index", "v1"]


def __getattr__(name: str):
    if name == "v1":
        return sys.modules["dsl"]
    raise AttributeError(f"module 'dsl.compat' has no attribute {name!r}")
