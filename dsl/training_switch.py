"""The train/eval switch, as TensorFlow 1.x has it: a ``training`` argument that is a Python
bool or a scalar bool tensor, usually ``fl.placeholder_with_default(False, [])`` fed ``True``
in training steps (``flowc train`` does that for the ``.flow`` built-in ``training``).

Ops that behave differently in training (dropout, batch normalization) take the switch as
``training=`` and build through ``smart_select``: with a Python bool (or a constant) only
the side it picks is built; with a tensor both sides are built and a ``SelectV2`` picks one,
so the step stays one straight-line sequence of kernels (no ``Switch``/``Merge``). A step
that does not feed the switch is an inference step: its ``PlaceholderWithDefault`` is its
default there, ``fold-constants`` turns the select into the inference side, and the ops only
training needed (dropout's random numbers) leave the compiled step.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

import numpy as np

from dsl.context import name_scope
from dsl.ops import convert_to_tensor
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType

__all__ = ["constant_switch", "smart_select"]

Switch = Union[bool, Tensor]


def constant_switch(training: Any) -> Optional[bool]:
    """The value of a switch known while the graph is built (a Python or numpy bool, or a
    ``Const`` tensor), or None for a tensor known only when a step runs. Anything else that
    is not a scalar bool is a ``TypeError``."""
    if isinstance(training, (bool, np.bool_)):
        return bool(training)
    if isinstance(training, Tensor):
        if training.dtype is not DType.bool or (static_shape(training) is not None
                                                and len(static_shape(training)) != 0):
            raise TypeError(f"training must be a scalar bool tensor, got {training.name} "
                            f"{training.output.type}")
        node = training.op.node
        if node.op == "Const":
            return bool(np.asarray(node.attrs["value"]))
        return None
    raise TypeError(f"training must be a Python bool or a scalar bool tensor, got "
                    f"{type(training).__name__} {training!r}")


def smart_select(training: Switch, when_training: Callable[[], Any],
                 when_inference: Callable[[], Any], name: Optional[str] = None) -> Any:
    """``when_training()`` if ``training`` else ``when_inference()``: TensorFlow's
    ``smart_cond``, but for a tensor switch a ``SelectV2`` of both sides instead of a
    ``cond``. Each side returns a tensor or a list/tuple of tensors of the same structure."""
    known = constant_switch(training)
    if known is not None:
        return when_training() if known else when_inference()
    yes, no = when_training(), when_inference()
    from dsl.math_ops import where
    with name_scope(name or "smart_select"):
        if isinstance(yes, (list, tuple)):
            if not isinstance(no, (list, tuple)) or len(yes) != len(no):
                raise ValueError("the training and inference sides return different structures")
            return type(yes)(where(training, a, convert_to_tensor(b)) for a, b in zip(yes, no))
        return where(training, yes, no)
