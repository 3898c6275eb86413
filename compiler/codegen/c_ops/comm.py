"""The C lowering of ``_Send`` and ``_Recv`` (``compiler/ops/comm.py``).

In generated C a send copies the tensor into the step's rendezvous and never blocks; a receive
waits for it (with the step's deadline) and owns the buffer it gets (``flowc_rt.h``).

A pair whose ends are on different tasks (``/job:ps/task:0`` and ``/job:worker/task:0``) goes
through the transport instead: its kernels call the runtime's host ops ``_RemoteSend`` and
``_RemoteRecv`` (``runtime/transport.py``) with the rendezvous key and the address of the
step's rendezvous (which identifies the running step to the task server). ``remote_send_c``
and ``remote_recv_c`` are that host code, shared with the CUDA emitter.
"""
from __future__ import annotations

import json

from compiler.codegen.c_ops.io import c_bytes_literal
from compiler.codegen.kernel_context import KernelContext, c_string
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.comm import is_cross_task, rendezvous_key
from runtime.dtypes import DType


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


set_c_kernel("_Send", _send_c)

set_c_kernel("_Recv", _recv_c, c_owns_outputs=True)
