"""``_Send`` and ``_Recv``: a tensor crossing from one device's subgraph to another's.

The partition pass inserts one ``_Send`` per (tensor, destination device) and one ``_Recv`` on
the destination, paired by ``tensor_name`` and a rendezvous ``slot`` (numbered per step). The
rendezvous key, as the paper writes it, is ``src_device;dst_device;tensor_name;frame:iteration``.

The interpreter runs a partitioned graph as one graph, so its ``_Recv`` finds the value its
``_Send`` left in the interpreter's state. A pair whose ends are on different tasks
(``/job:ps/task:0`` and ``/job:worker/task:0``, ``is_cross_task``) goes through the transport
(``runtime/transport.py``); the generated code is ``compiler/codegen/c_ops/comm.py``'s.
"""
from __future__ import annotations

import re

import numpy as np

from compiler.errors import node_error
from compiler.ir.types import TensorType
from compiler.ir.op_registry import register_op
from runtime.errors import FailedPreconditionError, InternalError

_COMM_ATTRS = ["tensor_name: string", "send_device: string", "recv_device: string",
               "slot: int = 0"]


def rendezvous_key(attrs: dict, frame: str = "0:0") -> str:
    return f"{attrs['send_device']};{attrs['recv_device']};{attrs['tensor_name']};{frame}"


_TASK = re.compile(r"^(/job:[^/]+/replica:[^/]+/task:[^/]+)/")


def task_of(device: str) -> str:
    """``/job:ps/replica:0/task:0`` for a device of that task ('' for a bare device name)."""
    m = _TASK.match(device or "")
    return m.group(1) if m else ""


def is_cross_task(attrs: dict) -> bool:
    """Whether a ``_Send``/``_Recv`` pair joins two tasks (it then goes over the transport)."""
    return task_of(attrs["send_device"]) != task_of(attrs["recv_device"])


def _mailbox(ctx) -> dict:
    state = ctx.state
    box = getattr(state, "rendezvous", None)
    if box is None:
        box = {}
        try:
            state.rendezvous = box
        except AttributeError:
            raise node_error(FailedPreconditionError, "_Send/_Recv need the interpreter's state",
                             ctx.node) from None
    return box


def _send_kernel(ctx, x):
    _mailbox(ctx)[rendezvous_key(ctx.attrs)] = np.array(x, copy=True)
    return []


def _recv_kernel(ctx):
    key = rendezvous_key(ctx.attrs)
    box = _mailbox(ctx)
    if key not in box:
        raise node_error(InternalError, f"nothing was sent for {key}", ctx.node)
    return [box.pop(key)]


register_op("_Send", inputs=["tensor: T"], attrs=_COMM_ATTRS + ["T: type"],
            shape=lambda ctx: [], kernel=_send_kernel, stateful=True,
            is_communication=True, half_native=True,
            doc="Sends its input to ``recv_device`` under ``tensor_name`` (inserted by partition).")

register_op("_Recv", outputs=["tensor: tensor_type"],
            attrs=_COMM_ATTRS + ["tensor_type: type", "shape: shape"],
            shape=lambda ctx: [TensorType(ctx.attr("tensor_type"), ctx.attr("shape"))],
            kernel=_recv_kernel, stateful=True, is_communication=True, half_native=True,
            doc="Receives the tensor ``tensor_name`` from ``send_device`` (inserted by partition).")
