"""``Fused``: a chain of elementwise ops as one kernel (made by the ``fuse`` pass).

Its ``expr`` attr is the chain as nested op calls over the node's inputs ``$0``, ``$1``...,
e.g. ``Relu(AddV2(Mul($0, $1), $2))``; an op with scalar attrs it declares fusable
(``fused_attrs``, e.g. LeakyRelu's alpha) carries them in brackets:
``LeakyRelu[alpha=0.2]($0)``. ``fused_from`` lists the nodes it replaced (their
names; the IR keeps the last one's source location). Elementwise ops commute with
broadcasting, so the fused kernel evaluates the whole expression once per output element,
reading every input broadcast to the output's shape: one loop, no intermediate buffers.

The numpy reference runs each op's own reference kernel; the C kernel is
``compiler/codegen/c_ops/fused.py``'s.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple, Union

import numpy as np

from compiler.errors import ExecutionError, OpError
from compiler.ir.types import TensorType
from compiler.ir.op_registry import ReferenceContext as RefContext
from compiler.ir.op_registry import get_op, register_op

Expr = Union[int, Tuple[str, list]]        # an input index, or (op text, argument exprs)

_TOKEN = re.compile(r"\s*(?:(\$\d+)|([A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?)|([(),]))")
_ATTR = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)=([^,\]]+)")


def op_text(op: str, attrs: Dict[str, Any]) -> str:
    """An op with its fused attrs as the expression writes it: ``LeakyRelu[alpha=0.2]``
    (``repr`` of each value, which reads back exactly)."""
    if not attrs:
        return op
    return op + "[" + ", ".join(f"{k}={v!r}" for k, v in sorted(attrs.items())) + "]"


def _attr_value(text: str):
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        return float(text)


def split_op(text: str) -> Tuple[str, Dict[str, Any]]:
    """``LeakyRelu[alpha=0.2]`` -> ("LeakyRelu", {"alpha": 0.2})."""
    if "[" not in text:
        return text, {}
    name, rest = text.split("[", 1)
    attrs = {}
    for part in rest.rstrip("]").split(","):
        m = _ATTR.fullmatch(part.rstrip())
        if not m:
            raise OpError(f"bad fused op attrs in {text!r}")
        try:
            attrs[m.group(1)] = _attr_value(m.group(2).strip())
        except ValueError:
            raise OpError(f"bad fused op attr value in {text!r}") from None
    return name, attrs


def parse_expr(text: str) -> Expr:
    """``Relu(AddV2($0, $1))`` -> ("Relu", [("AddV2", [0, 1])])."""
    tokens = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise OpError(f"bad fused expression at {pos}: {text!r}")
        tokens.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    k = 0

    def node() -> Expr:
        nonlocal k
        tok = tokens[k]
        k += 1
        if tok.startswith("$"):
            return int(tok[1:])
        if k >= len(tokens) or tokens[k] != "(":
            raise OpError(f"bad fused expression: '{tok}' without arguments in {text!r}")
        k += 1
        args = []
        while tokens[k] != ")":
            args.append(node())
            if tokens[k] == ",":
                k += 1
        k += 1
        return (tok, args)

    try:
        tree = node()
    except IndexError:
        raise OpError(f"bad fused expression (unexpected end): {text!r}") from None
    if k != len(tokens):
        raise OpError(f"bad fused expression (trailing text): {text!r}")
    return tree


def format_expr(expr: Expr) -> str:
    if isinstance(expr, int):
        return f"${expr}"
    op, args = expr
    return f"{op}({', '.join(format_expr(a) for a in args)})"


def _ops(expr: Expr) -> List[str]:
    if isinstance(expr, int):
        return []
    return [split_op(expr[0])[0]] + [o for a in expr[1] for o in _ops(a)]


# --- shape and reference -------------------------------------------------------------------
def _shape(ctx):
    from compiler.ops.math import _broadcast_shape
    tree = parse_expr(ctx.attr("expr"))
    for op in _ops(tree):
        get_op(op, ctx.node)
    return _broadcast_shape(ctx)


def _kernel(ctx, *xs):
    T = ctx.attrs["T"]
    types = [TensorType(T, None)]

    def run(expr):
        if isinstance(expr, int):
            return xs[expr]
        op, attrs = split_op(expr[0])
        vals = [run(a) for a in expr[1]]
        out = get_op(op).kernel(RefContext(ctx.node, {**attrs, "T": T}, types, ctx.state),
                                *vals)
        return np.asarray(out, T.np)

    try:
        result = run(parse_expr(ctx.attrs["expr"]))
    except OpError as e:
        raise ExecutionError(str(e), ctx.node) from None
    return [np.broadcast_to(result, np.broadcast_shapes(*[x.shape for x in xs])).astype(
        T.np, copy=True)]


register_op("Fused", inputs=["inputs: N * T"], outputs=["output: T"],
            attrs=["expr: string", "fused_from: list(string) = []", "N: int >= 1",
                   "T: {f32, f64}"],
            shape=_shape, kernel=_kernel, group="fused",
            doc="A chain of elementwise ops evaluated in one loop (made by the fuse pass).")
