"""The C lowering of IdentityN: each input copied to its output (IdentityN has several outputs,
so they cannot all be views of its inputs as Identity's is)."""
from __future__ import annotations

from compiler.ir.op_registry import set_c_kernel


def _identity_n_c(kc) -> str:
    return "\n".join(f"if ({x.size} > 0) memcpy({o.data}, {x.data}, (size_t)({x.size}) * "
                     f"sizeof({x.ctype}));" for x, o in zip(kc.inputs, kc.outputs))


set_c_kernel("IdentityN", _identity_n_c, lambda kc: [x.dims for x in kc.inputs])
