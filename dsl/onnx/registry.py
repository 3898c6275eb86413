"""The lowering table: ONNX op type -> [(first opset, last opset or None, lowering function)].

Each family module (``dsl/onnx/ops_*.py``) declares its own ``LOWERINGS`` dict; this module
finds them all (a new family is a new ``ops_*.py`` file, nothing to list here), merges them
and answers "how is op X of opset N lowered?". An op lowered by two modules is an error.
A module whose ops belong to another operator set than ONNX's default one names it in
``DOMAIN`` (``ai.onnx.preview.training``, ``ai.onnx.ml``); its opsets are that domain's.
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


def _tables() -> Dict[str, Dict[str, List[Entry]]]:
    """domain ("" for ONNX's default one) -> its merged lowering table."""
    by_domain: Dict[str, list] = {}
    for name in family_modules():
        module = importlib.import_module(name)
        domain = getattr(module, "DOMAIN", "")
        by_domain.setdefault("" if domain in DEFAULT_DOMAINS else domain, []).append(
            module.LOWERINGS)
    return {domain: _merge(*tables) for domain, tables in by_domain.items()}


_TABLES = _tables()
LOWERINGS: Dict[str, List[Entry]] = _TABLES.get("", {})
# the other operator sets' tables, by domain
DOMAIN_LOWERINGS: Dict[str, Dict[str, List[Entry]]] = {
    d: t for d, t in _TABLES.items() if d != ""}


def find_lowering(op_type: str, domain: str, opset: int) -> Tuple[Optional[Lowering], str]:
    """(the lowering of ``op_type`` at ``opset`` of ``domain``, "") or (None, why there is
    none)."""
    table = LOWERINGS if domain in DEFAULT_DOMAINS else DOMAIN_LOWERINGS.get(domain)
    if table is None:
        return None, f"domain '{domain}'"
    entries = table.get(op_type)
    if not entries:
        return None, "not implemented"
    for first, last, fn in entries:
        if first <= opset and (last is None or opset <= last):
            return fn, ""
    ranges = ", ".join(f"{a}-{b if b is not None else ''}" for a, b, _ in entries)
    return None, f"opset {opset} not supported (supported: {ranges})"


def supported_ops() -> List[str]:
    """The ONNX op types flowc lowers; those of other domains as ``domain.Op``."""
    return sorted(LOWERINGS) + sorted(f"{d}.{op}" for d, t in DOMAIN_LOWERINGS.items() for op in t)
