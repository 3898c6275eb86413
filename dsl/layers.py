"""``fl.layers`` (``tf.layers``, TensorFlow 1.x): layers that take the train/eval switch.

``dropout(inputs, rate, training=...)`` drops only in training: ``training`` is a Python bool
or a scalar bool tensor (``dsl/training_switch.py``); with a tensor the step holds both sides
and a ``SelectV2`` picks one, so an unfed ``placeholder_with_default(False, [])`` compiles to
an inference step without any dropout ops.
"""
from __future__ import annotations

from typing import Optional

from dsl.array_ops import identity
from dsl.context import name_scope
from dsl.nn_losses import dropout as _nn_dropout
from dsl.ops import convert_to_tensor
from dsl.training_switch import constant_switch, smart_select

__all__ = ["dropout", "Dropout"]


def dropout(inputs, rate=0.5, noise_shape=None, seed: Optional[int] = None, training=False,
            name: Optional[str] = None):
    """``tf.layers.dropout``: in training, zero each element with probability ``rate`` and
    scale the others by ``1 / (1 - rate)`` (``fl.nn.dropout``); otherwise ``inputs``
    unchanged (an ``Identity``). ``training``: a Python bool or a scalar bool tensor."""
    return Dropout(rate, noise_shape=noise_shape, seed=seed, name=name)(inputs, training=training)


class Dropout:
    """``tf.layers.Dropout``: the layer object of ``dropout``; each call makes its ops under
    the layer's name scope."""

    def __init__(self, rate=0.5, noise_shape=None, seed: Optional[int] = None,
                 name: Optional[str] = None, **kwargs):
        unknown = set(kwargs) - {"trainable", "dtype"}
        if unknown:
            raise TypeError(f"Dropout got unexpected keyword argument(s) "
                            f"{', '.join(sorted(unknown))}")
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed
        self.name = name or "dropout"

    def __call__(self, inputs, training=False):
        with name_scope(self.name):
            x = convert_to_tensor(inputs)
            if constant_switch(training) is False:
                return identity(x)                 # as TensorFlow: the layer's output op
            return smart_select(
                training,
                lambda: _nn_dropout(x, rate=self.rate, noise_shape=self.noise_shape,
                                    seed=self.seed),
                lambda: x,
                name="select")

    apply = __call__
