"""The C lowering of ``PyFunc`` / ``PyFuncStateless`` (``compiler/ops/py_func.py``): the kernel
hands its inputs to the runtime's Python function registry (``runtime/py_funcs.py``) through the
host-call hook, which runs the function and fills the outputs (allocating those whose dims are
not static, and setting their dims). A C library has no Python: its hook refuses the op."""
from __future__ import annotations

import json
from typing import List

from compiler.codegen.c_ops.io import c_bytes_literal
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _py_func_c(kc: KernelContext) -> str:
    attrs = {"token": kc.attrs["token"], "Tout": [t.ir_name for t in kc.attrs["Tout"]]}
    literal = c_bytes_literal(json.dumps(attrs, separators=(",", ":")))
    lines = ["if (!flowc_rt || !flowc_rt->host_call) "
             + kc.fail("this runtime cannot run host calls (a py_func needs Python)",
                       code="FLOWC_FAILED_PRECONDITION"),
             f"flowc_tensor in[{max(len(kc.inputs), 1)}];",
             f"flowc_tensor out[{max(len(kc.outputs), 1)}];"]
    lines += [f"in[{i}] = {t.var};" for i, t in enumerate(kc.inputs)]
    for i, o in enumerate(kc.outputs):
        if not o.static:
            lines += [f"free({o.var}.data);", f"{o.var}.data = NULL;"]
        lines.append(f"out[{i}] = {o.var};")
    lines.append(f'const int rc = flowc_rt->host_call(flowc_rt->host, "{kc.node.op}", flowc_node, '
                 f"{literal}, {len(kc.inputs)}, in, {len(kc.outputs)}, out, st);")
    for i, o in enumerate(kc.outputs):
        if not o.static:
            lines.append(f"{o.var} = out[{i}];   /* the runtime's buffer and dims */")
    lines += [
        "if (rc != 0) {",
        "    if (!st->code) st->code = FLOWC_ERROR;",
        '    if (!st->node[0]) snprintf(st->node, sizeof st->node, "%s", flowc_node);',
        '    if (!st->location[0]) snprintf(st->location, sizeof st->location, "%s", flowc_loc);',
        "    goto fail;",
        "}",
    ]
    return "\n".join(lines)


def _py_func_c_dims(kc: KernelContext) -> List[List[str]]:
    """Static dims as literals; a dim the function decides is 0 here (the runtime allocates
    the output and sets its dims)."""
    return [[str(d) if d is not None else "0" for d in o.shape] for o in kc.outputs]


for _op in ("PyFunc", "PyFuncStateless"):
    set_c_kernel(_op, _py_func_c, _py_func_c_dims)
