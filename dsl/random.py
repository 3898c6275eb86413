"""``fl.random``: TF's ``tf.random`` names for the random ops (``dsl/random_ops.py``)."""
from __future__ import annotations

from dsl.random_ops import (categorical, multinomial, random_normal as normal,
                            random_shuffle as shuffle, random_uniform as uniform,
                            set_random_seed as set_seed, truncated_normal)

__all__ = ["categorical", "multinomial", "normal", "uniform", "set_seed", "shuffle",
           "truncated_normal"]
