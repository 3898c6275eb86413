"""``_Send`` and ``_Recv``: a tensor crossing from one device's subgraph to another's.

The partition pass inserts one ``_Send`` per (tensor, destination device) and one ``_Recv`` on
the destination, paired by ``tensor_name`` and a rendezvous ``slot`` (numbered per step). The
rendezvous key, as the paper writes it, is ``src_device;dst_device;tensor_name;frame:iteration``.

In generated C a send copies the tensor into the step's rendezvous and never blocks; a receive
waits for it (with the step's deadline) and owns the buffer it gets (``flowc_rt.h``). The
interpreter runs a partitioned graph as one graph, so its ``_Recv`` finds the value its
``_Send`` left in the interpreter's state.

A pair whose ends are on different tasks (``/job:ps/task:0`` and ``/job:worker/task:0``) goes
through the transport instead: its kernels call the runtime's host ops ``_RemoteSend`` and
``_RemoteRecv`` (``runtime/transport.py``) with the rendezvous key and the address of the
step's rendezvous (which identifies the running step to the task server).
"""
from __future__ import annotations

import json
import re

import numpy as np

from compiler.codegen.kernel_context import KernelContext, c_string
from compiler.errors import ExecutionError
from compiler.ir.types import TensorType
from compiler.ops.io import c_bytes_literal
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType

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


def _host_attrs(kc: KernelContext) -> str:
    a = kc.node.attrs
    return c_bytes_literal(json.dumps({"key": rendezvous_key(a), "send_device": a["send_device"],
                                       "recv_device": a["recv_device"]},
                                      separators=(",", ":")))


# The step's rendezvous address as an i64 scalar tensor: how the task server knows which of
# its running steps a host call belongs to.
_STEP_REF = ("int64_t flowc_step_ref = (int64_t)(intptr_t)flowc_rt->rendezvous;\n"
             "flowc_tensor flowc_ref_t; memset(&flowc_ref_t, 0, sizeof flowc_ref_t);\n"
             "flowc_ref_t.data = &flowc_step_ref; flowc_ref_t.rank = 0; "
             "flowc_ref_t.dtype = {code};\n")

_HOST_FAIL = ("if (rc != 0) {{\n"
              "    if (!st->code) st->code = FLOWC_ERROR;\n"
              "    if (!st->node[0]) snprintf(st->node, sizeof st->node, \"%s\", flowc_node);\n"
              "    if (!st->location[0]) snprintf(st->location, sizeof st->location, \"%s\", flowc_loc);\n"
              "    {cleanup}goto fail;\n"
              "}}")


def _need_host(kc: KernelContext, cleanup: str = "") -> str:
    return ("if (!flowc_rt || !flowc_rt->host_call) "
            + kc.fail("this runtime cannot reach other tasks (run the step on a task server)",
                      code="FLOWC_FAILED_PRECONDITION", cleanup=cleanup) + "\n")


def remote_send_c(kc: KernelContext, tensor: str, cleanup: str = "") -> str:
    """Host code sending the host tensor ``tensor`` to the other task of ``kc``'s pair (a
    GPU's send stages it in host memory first); ``cleanup`` runs before a failure leaves."""
    cleanup = f"{cleanup} " if cleanup else ""
    return (_need_host(kc, cleanup.strip()) + "{\n" + _STEP_REF.format(code=DType.i64.code)
            + f"flowc_tensor flowc_in[2]; flowc_in[0] = {tensor}; flowc_in[1] = flowc_ref_t;\n"
            + "const int rc = flowc_rt->host_call(flowc_rt->host, \"_RemoteSend\", flowc_node, "
            + f"{_host_attrs(kc)}, 2, flowc_in, 0, NULL, st);\n"
            + _HOST_FAIL.format(cleanup=cleanup) + "\n}")


def remote_recv_c(kc: KernelContext, out: str, rank: int, dtype_code: int) -> str:
    """Host code receiving into the host tensor ``out`` (its buffer is the caller's to free)
    from the other task of ``kc``'s pair."""
    return (_need_host(kc) + "{\n" + _STEP_REF.format(code=DType.i64.code)
            + f"memset(&{out}, 0, sizeof {out});\n"
            + f"{out}.rank = {rank}; {out}.dtype = {dtype_code};\n"
            + "const int rc = flowc_rt->host_call(flowc_rt->host, \"_RemoteRecv\", flowc_node, "
            + f"{_host_attrs(kc)}, 1, &flowc_ref_t, 1, &{out}, st);\n"
            + _HOST_FAIL.format(cleanup="") + "\n}")


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
    if is_cross_task(kc.node.attrs):
        return remote_send_c(kc, x.var)
    return (f"if (flowc_rv_send(flowc_rt->rendezvous, {kc.attr('slot')}, &{x.var}, "
            f"sizeof({x.ctype}), flowc_node, flowc_loc, st)) goto fail;")


def _recv_c(kc: KernelContext) -> str:
    out = kc.out
    key = c_string(rendezvous_key(kc.node.attrs))
    receive = (remote_recv_c(kc, out.var, out.rank, out.dtype.code)
               if is_cross_task(kc.node.attrs) else
               f"if (flowc_rv_recv(flowc_rt->rendezvous, {kc.attr('slot')}, &{out.var}, "
               f"{key}, flowc_node, flowc_loc, st)) goto fail;")
    return "\n".join([receive] + kc.type_checks(out, "the received tensor"))


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
