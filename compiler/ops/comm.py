"""``_Send`` and ``_Recv``: a tensor crossing from one device's subgraph to another's.

The partition pass inserts one ``_Send`` per (tensor, destination device) and one ``_Recv`` on
the destination, paired by ``tensor_name`` and a rendezvous ``slot`` (numbered per step). The
rendezvous key, as the paper writes it, is ``src_device;dst_device;tensor_name;frame:iteration``.

In generated C a send copies the tensor into the step's rendezvous and never blocks; a receive
waits for it (with the step's deadline) and owns the buffer it gets (``flowc_rt.h``). The
interpreter runs a partitioned graph as one graph, so its ``_Recv`` finds the value its
``_Send`` left in the interpreter's state.
"""
from __future__ import annotations

import numpy as np

from compiler.codegen.kernel_context import KernelContext, c_string
from compiler.errors import ExecutionError
from compiler.ir.types import TensorType
from compiler.ops.registry import register_op

_COMM_ATTRS = ["tensor_name: string", "send_device: string", "recv_device: string",
               "slot: int = 0"]


def rendezvous_key(attrs: dict, frame: str = "0:0") -> str:
    return f"{attrs['send_device']};{attrs['recv_device']};{attrs['tensor_name']};{frame}"


def _mailbox(ctx) -> dict:
    state = ctx.state
    box = getattr(state, "rendezvous", None)
    if box is None:
        box = {}
        try:
            state.rendezvous = box
        except AttributeError:
            raise ExecutionError("_Send/_Recv need the interpreter's state", ctx.node) from None
    return box


def _send_kernel(ctx, x):
    _mailbox(ctx)[rendezvous_key(ctx.attrs)] = np.array(x, copy=True)
    return []


def _recv_kernel(ctx):
    key = rendezvous_key(ctx.attrs)
    box = _mailbox(ctx)
    if key not in box:
        raise ExecutionError(f"nothing was sent for {key}", ctx.node)
    return [box.pop(key)]


def _send_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    return (f"if (flowc_rv_send(flowc_rt->rendezvous, {kc.attr('slot')}, &{x.var}, "
            f"sizeof({x.ctype}), flowc_node, flowc_loc, st)) goto fail;")


def _recv_c(kc: KernelContext) -> str:
    out = kc.out
    key = c_string(rendezvous_key(kc.node.attrs))
    checks = [f"if ({out.var}.rank != {out.rank} || {out.var}.dtype != {out.dtype.code}) "
              + kc.fail(f"received a tensor of the wrong rank or dtype (expected {out.type})")]
    for d, dim in enumerate(out.shape):
        if dim is not None:
            checks.append(f"if ({out.var}.dims[{d}] != {dim}) "
                          + kc.fail(f"received dim {d} = %lld, expected {dim}",
                                    f"(long long){out.var}.dims[{d}]"))
    return "\n".join([f"if (flowc_rv_recv(flowc_rt->rendezvous, {kc.attr('slot')}, &{out.var}, "
                      f"{key}, flowc_node, flowc_loc, st)) goto fail;"] + checks)


register_op("_Send", inputs=["tensor: T"], attrs=_COMM_ATTRS + ["T: type"],
            shape=lambda ctx: [], kernel=_send_kernel, c_kernel=_send_c, stateful=True,
            is_communication=True,
            doc="Sends its input to ``recv_device`` under ``tensor_name`` (inserted by partition).")

register_op("_Recv", outputs=["tensor: tensor_type"],
            attrs=_COMM_ATTRS + ["tensor_type: type", "shape: shape"],
            shape=lambda ctx: [TensorType(ctx.attr("tensor_type"), ctx.attr("shape"))],
            kernel=_recv_kernel, c_kernel=_recv_c, stateful=True, is_communication=True,
            c_owns_outputs=True,
            doc="Receives the tensor ``tensor_name`` from ``send_device`` (inserted by partition).")
