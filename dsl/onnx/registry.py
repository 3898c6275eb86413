"""The lowering table: ONNX op type -> [(first opset, last opset or None, lowering function)].

Each family module (``ops_*.py``) declares its own ``LOWERINGS`` dict; this module merges them
and answers "how is op X of opset N lowered?".
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from dsl.onnx import (ops_control, ops_elementwise, ops_logic, ops_loss, ops_matmul, ops_nn,
                      ops_reduce, ops_resize, ops_shape)

Lowering = Callable
Entry = Tuple[int, Optional[int], Lowering]

DEFAULT_DOMAINS = ("", "ai.onnx")


def _merge(*tables: Dict[str, List[Entry]]) -> Dict[str, List[Entry]]:
    merged: Dict[str, List[Entry]] = {}
    for table in tables:
        for op, entries in table.items():
            if op in merged:
                raise ValueError(f"ONNX op {op} is lowered by two modules")
            merged[op] = sorted(entries, key=lambda e: e[0])
    return merged


LOWERINGS: Dict[str, List[Entry]] = _merge(
    ops_control.LOWERINGS, ops_elementwise.LOWERINGS, ops_logic.LOWERINGS, ops_loss.LOWERINGS, ops_matmul.LOWERINGS, ops_nn.LOWERINGS,
    ops_reduce.LOWERINGS, ops_resize.LOWERINGS, ops_shape.LOWERINGS)


def find_lowering(op_type: str, domain: str, opset: int) -> Tuple[Optional[Lowering], str]:
    """(the lowering of ``op_type`` at ``opset``, "") or (None, why there is none)."""
    if domain not in DEFAULT_DOMAINS:
        return None, f"domain '{domain}'"
    entries = LOWERINGS.get(op_type)
    if not entries:
        return None, "not implemented"
    for first, last, fn in entries:
        if first <= opset and (last is None or opset <= last):
            return fn, ""
    ranges = ", ".join(f"{a}-{b if b is not None else ''}" for a, b, _ in entries)
    return None, f"opset {opset} not supported (supported: {ranges})"


def supported_ops() -> List[str]:
    return sorted(LOWERINGS)
