"""The C lowering of the checkpoint ops (``compiler/ops/io.py``): ``SaveV2`` and ``RestoreV2``.

The C kernels (``codegen_templates/c/io.c.j2``) reach the runtime's checkpoint code
(``runtime/checkpoint.py``) through its host-call hook (``flowc_rt->host_call``), with the
op's attrs as a JSON C string, so both backends write and read the same files.
``c_bytes_literal`` (a C string literal of UTF-8 bytes) is shared with other families' C code.
"""
from __future__ import annotations

import json
from typing import List

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def c_bytes_literal(text: str) -> str:
    """A C string literal of ``text``'s UTF-8 bytes (octal escapes for anything unusual)."""
    out = []
    for b in text.encode("utf-8"):
        ch = chr(b)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7f:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _attrs_literal(kc: KernelContext, restore: bool) -> str:
    attrs = {"tensor_names": list(kc.attrs["tensor_names"])}
    if restore:
        attrs["dtypes"] = [d.ir_name for d in kc.attrs["dtypes"]]
        attrs["shapes"] = [None if s is None else list(s) for s in kc.attrs["shapes"]]
    return c_bytes_literal(json.dumps(attrs, separators=(",", ":")))


def _save_c(kc: KernelContext) -> str:
    return kc.render("io.c.j2", op="SaveV2", attrs_json=_attrs_literal(kc, False))


def _restore_c(kc: KernelContext) -> str:
    return kc.render("io.c.j2", op="RestoreV2", attrs_json=_attrs_literal(kc, True))


def _restore_c_dims(kc: KernelContext) -> List[List[str]]:
    """Static dims as literals; a dim the file decides is 0 here (the runtime allocates the
    output and sets its dims)."""
    return [[str(d) if d is not None else "0" for d in o.shape] for o in kc.outputs]


set_c_kernel("SaveV2", _save_c)

set_c_kernel("RestoreV2", _restore_c, _restore_c_dims)
