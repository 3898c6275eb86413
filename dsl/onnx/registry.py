"""The lowering table: ONNX op type -> [(first opset, last opset or None, lowering function)].

Each family module (``dsl/onnx/ops_*.py``) declares its own ``LOWERINGS`` dict; this module
finds them all (a new family is a new ``ops_*.py`` file, nothing to list here), merges them
and answers "how is op X of opset N lowered?". An op lowered by two modules is an error.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from typing import Callable, Dict, List, Optional, Tuple

Lowering = Callable
Entry = Tuple[int, Optional[int], Lowering]

DEFAULT_DOMAINS = ("", "ai.onnx")


def family_modules() -> List[str]:
    """The lowering modules, ``dsl.onnx.ops_*``, in name order."""
    here = os.path.dirname(os.path.abspath(__file__))
    return sorted(f"dsl.onnx.{m.name}" for m in pkgutil.iter_modules([here])
                  if m.name.startswith("ops_"))


def _merge(*tables: Dict[str, List[Entry]]) -> Dict[str, List[Entry]]:
    merged: Dict[str, List[Entry]] = {}
    for table in tables:
        for op, entries in table.items():
            if op in merged:
                raise ValueError(f"ONNX op {op} is lowered by two modules")
            merged[op] = sorted(entries, key=lambda e: e[0])
    return merged


LOWERINGS: Dict[str, List[Entry]] = _merge(
    *(importlib.import_module(name).LOWERINGS for name in family_modules()))


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
