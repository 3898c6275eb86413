"""The global step: an int64 scalar variable counting training steps (TF1's
``tf.train.get_or_create_global_step`` and friends).

It is named ``global_step``, is not trainable, starts at 0, and lives in the GLOBAL_STEP and
GLOBAL_VARIABLES collections. ``Optimizer.apply_gradients(..., global_step=step)`` adds one
to it after the updates of each step. As in TensorFlow, it is created under the enclosing
device scope (``replica_device_setter`` puts it on a parameter server); with none, placement
keeps it on the default device.
"""
from __future__ import annotations

from typing import Optional

from dsl.context import Graph, control_dependencies, get_default_graph, name_scope
from dsl.init_ops import zeros_initializer
from dsl.variables import GraphKeys, Variable
from runtime.dtypes import DType

__all__ = ["get_global_step", "create_global_step", "get_or_create_global_step", "global_step",
           "assert_global_step"]


def get_global_step(graph: Optional[Graph] = None) -> Optional[Variable]:
    """The graph's global step variable, or None if it has none."""
    g = graph or get_default_graph()
    found = g.get_collection(GraphKeys.GLOBAL_STEP)
    if len(found) > 1:
        raise TypeError(f"there are {len(found)} variables in the GLOBAL_STEP collection; "
                        "a graph has at most one global step")
    return found[0] if found else None


def create_global_step(graph: Optional[Graph] = None) -> Variable:
    """Create the global step of ``graph`` (default: the default graph); ValueError if it
    already has one."""
    g = graph or get_default_graph()
    if get_global_step(g) is not None:
        raise ValueError("global_step already exists.")
    with g.as_default(), control_dependencies(None), name_scope(None):
        return Variable(zeros_initializer(), shape=[], dtype=DType.i64, trainable=False,
                        name="global_step",
                        collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP])


def get_or_create_global_step(graph: Optional[Graph] = None) -> Variable:
    """The graph's global step, created if it has none yet."""
    g = graph or get_default_graph()
    return get_global_step(g) or create_global_step(g)


def assert_global_step(global_step_tensor) -> None:
    """TypeError unless ``global_step_tensor`` is an integer scalar variable or tensor."""
    dtype = getattr(global_step_tensor, "dtype", None)
    shape = getattr(global_step_tensor, "shape", None)
    if dtype is None or not dtype.is_integer:
        raise TypeError(f"existing global step {global_step_tensor!r} is not an integer "
                        f"(it is {dtype})")
    if shape is not None and len(shape) != 0:
        raise TypeError(f"existing global step {global_step_tensor!r} is not a scalar "
                        f"(its shape is {list(shape)})")


def global_step(sess, global_step_tensor) -> int:
    """The current value of the global step, as a Python int."""
    return int(sess.run(global_step_tensor))
