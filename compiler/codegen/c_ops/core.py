"""The C lowering of the core ops (``compiler/ops/core.py``): the dynamic output dims of the
identities (``PlaceholderWithDefault``, ``Identity``, ``StopGradient``, ``Snapshot``: views of
their input) and the kernels of the shape queries ``Shape``, ``Size`` and ``Rank``. ``Const``,
``Placeholder``, ``NoOp``, ``_Retval`` and ``_Sink`` have no kernel: the emitter handles them."""
from __future__ import annotations

from compiler.ir.op_registry import set_c_kernel


def _same_dims(kc):
    return [kc.inputs[0].dims]


def _shape_kernel(kc):
    x = kc.inputs[0]
    return "\n".join(f"{kc.out.data}[{k}] = ({kc.out.ctype}){x.dim(k)};" for k in range(x.rank))


for _name in ("PlaceholderWithDefault", "Identity", "StopGradient", "Snapshot"):
    set_c_kernel(_name, None, _same_dims)

set_c_kernel("Shape", _shape_kernel)

set_c_kernel("Size", lambda kc: f"{kc.out.data}[0] = ({kc.out.ctype}){kc.inputs[0].size};")

set_c_kernel("Rank", lambda kc: f"{kc.out.data}[0] = {kc.inputs[0].rank};")
