"""The C lowering of ``Fused`` (``compiler/ops/fused.py``): the C kernel substitutes each op's
scalar C expression (``op.extra["c_expr"]``) into its consumer's and emits one elementwise
loop (``codegen/elementwise.py``).
"""
from __future__ import annotations

import itertools
import re
from typing import Iterator, Optional

from compiler.codegen.elementwise import broadcast_output_dims, emit_elementwise
from compiler.codegen.kernel_context import KernelContext, TensorRef
from compiler.ir.op_registry import get_op, set_c_kernel
from compiler.ir.types import TensorType
from compiler.ops.fused import Expr, parse_expr, split_op

_ARG = re.compile(r"\ba(\d+)\b")


class _OpContext(KernelContext):
    """One op of a fused expression: its C expression reads its own attrs (LeakyRelu's
    alpha), which the expression carries, not the Fused node's."""

    def __init__(self, node, inputs, outputs, target, module, op_attrs):
        super().__init__(node, inputs, outputs, target, module)
        self.op_attrs = op_attrs

    def attr(self, name: str):
        return self.op_attrs[name] if name in self.op_attrs else super().attr(name)


def _c_expr(kc: KernelContext, expr: Expr, names: Optional[Iterator[int]] = None) -> str:
    """The scalar C expression of ``expr`` over the kernel's inputs ``a0``, ``a1``, ...
    (``names`` numbers the locals it binds, unique within the expression)."""
    names = itertools.count() if names is None else names
    if isinstance(expr, int):
        return f"a{expr}"
    op_name, attrs = split_op(expr[0])
    args = expr[1]
    op = get_op(op_name, kc.node)
    c_expr = op.extra.get("c_expr")
    if c_expr is None:
        raise kc.error(f"op {op_name} in a fused expression has no scalar C expression")
    parts = [_c_expr(kc, a, names) for a in args]
    if callable(c_expr):
        T = kc.out.dtype
        scalar = TensorType(T, ())
        sub = _OpContext(kc.node, [TensorRef(f"a{i}", scalar, kc.target) for i in range(len(args))],
                         [TensorRef("o", scalar, kc.target)], kc.target, kc.module, attrs)
        c_expr = c_expr(sub)
    # An operand the op's expression reads more than once (Square is ``a0 * a0``) is bound
    # to a local first (a GNU statement expression), so the text of a long chain stays
    # linear in its length instead of doubling at each such op.
    uses = [m.group(1) for m in _ARG.finditer(c_expr)]
    binds = []
    for i, part in enumerate(parts):
        if uses.count(str(i)) > 1 and not _ARG.fullmatch(part):
            name = f"fx{next(names)}"
            binds.append(f"const {kc.out.ctype} {name} = {part};")
            parts[i] = name
    text = "(" + _ARG.sub(lambda m: f"({parts[int(m.group(1))]})", c_expr) + ")"
    return f"({{ {' '.join(binds)} {text}; }})" if binds else text


def _c_kernel(kc: KernelContext) -> str:
    return emit_elementwise(kc, _c_expr(kc, parse_expr(kc.attr("expr"))))


set_c_kernel("Fused", _c_kernel, broadcast_output_dims)
