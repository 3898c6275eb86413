"""The C lowering of the print ops (``compiler/ops/logging.py``): the kernel hands its tensors
to the runtime's printing code (``runtime/printing.py``) through the host-call hook, so the
compiled step prints exactly what the interpreter prints. ``Print``'s output is its input
(``c_alias``). A C library has no Python to print with: it refuses the step at run time."""
from __future__ import annotations

import json

from compiler.codegen.c_ops.io import c_bytes_literal
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _host_call(kc: KernelContext, op: str, attrs: dict) -> str:
    literal = c_bytes_literal(json.dumps(attrs, separators=(",", ":")))
    lines = [
        "if (!flowc_rt || !flowc_rt->host_call) "
        + kc.fail("this runtime cannot run host calls (needed to print)",
                  code="FLOWC_FAILED_PRECONDITION"),
        f"flowc_tensor in[{max(len(kc.inputs), 1)}];",
    ]
    lines += [f"in[{i}] = {t.var};" for i, t in enumerate(kc.inputs)]
    lines += [
        f'const int rc = flowc_rt->host_call(flowc_rt->host, "{op}", flowc_node, {literal}, '
        f"{len(kc.inputs)}, in, 0, NULL, st);",
        "if (rc != 0) {",
        "    if (!st->code) st->code = FLOWC_ERROR;",
        '    if (!st->node[0]) snprintf(st->node, sizeof st->node, "%s", flowc_node);',
        '    if (!st->location[0]) snprintf(st->location, sizeof st->location, "%s", flowc_loc);',
        "    goto fail;",
        "}",
    ]
    return "\n".join(lines)


def _print_c(kc: KernelContext) -> str:
    return _host_call(kc, "Print", {k: kc.attrs[k] for k in ("message", "first_n", "summarize")})


def _print_v2_c(kc: KernelContext) -> str:
    return _host_call(kc, "_PrintV2", {k: kc.attrs[k] for k in (
        "template", "placeholder", "summarize", "output_stream", "end")})


set_c_kernel("Print", _print_c, lambda kc: [kc.inputs[0].dims])
set_c_kernel("_PrintV2", _print_v2_c)
