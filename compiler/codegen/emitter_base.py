"""What the C and the CUDA emitters share: one step graph (its feeds are ``Placeholder`` nodes,
its fetches ``_Retval`` nodes) becomes one translation unit whose entry runs every node's code
in a static order. ``EmitterBase`` keeps the tensors' C names and slots, the storage roots
(views share their input's buffer), last uses, and the comment heading each node's code;
``compiler/codegen/emitter.py`` (C) and ``compiler/codegen/cuda_emitter.py`` (CUDA) subclass
it with what differs: where buffers live, how kernels run, how the entry is assembled.
"""
from __future__ import annotations

import hashlib
import re
from typing import Collection, Dict, List

import numpy as np

from compiler.codegen.kernel_context import TensorRef
from compiler.errors import CodegenError
from compiler.ir.attr_text import INLINE_ELEMENTS
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.op_registry import computes_half_in_f32
from compiler.ir.printer import node_text
from compiler.passes.memory_plan import PLAN_ATTRS, storage_roots
from runtime.dtypes import DType

_NOT_IDENT = re.compile(r"\W")


def ident(name: str) -> str:
    """``name`` as a C identifier: other characters become ``_``; never a leading digit."""
    s = _NOT_IDENT.sub("_", name)
    return s if s and not s[0].isdigit() else "_" + s


def comment(text: str) -> str:
    """``text`` safe inside a C comment."""
    return text.replace("*/", "* /")


class EmitterBase:
    """The state and steps every target's emitter has; ``target`` is a ``CTarget``."""

    def __init__(self, graph: Graph, feeds: List[Node], retvals: List[Node], target):
        self.graph = graph
        self.feeds = feeds
        self.retvals = retvals
        self.target = target
        self.refs: Dict[Output, TensorRef] = {}
        self.root: Dict[Output, Output] = {}       # storage root of each value
        self._const_digests: Dict[str, str] = {}   # big Const's name -> its bytes' SHA-256
        self.decls: List[str] = []                 # one ``#define`` per tensor slot
        self.slot: Dict[str, int] = {}
        self.ref_of: Dict[str, Output] = {}
        self.body: List[str] = []                  # per-node code, split into parts
        self.part_starts: List[int] = [0]
        self._names: set = set()

    # --- naming ------------------------------------------------------------------------
    def _var(self, out: Output) -> str:
        """A fresh C name for ``out``: ``t_<node>[_<index>]``, numbered if taken."""
        base = "t_" + ident(out.node.name) + (f"_{out.index}" if out.index else "")
        name, k = base, 1
        while name in self._names:
            name = f"{base}_{k}"
            k += 1
        self._names.add(name)
        return name

    def _ref(self, out: Output) -> TensorRef:
        """The tensor of ``out`` (a slot of the step's tensor table, named once)."""
        if out not in self.refs:
            var = self._var(out)
            self.refs[out] = TensorRef(var, out.type, self.target, out.node)
            self.slot[var] = len(self.decls)
            self.ref_of[var] = out
            self.decls.append(f"#define {var} (flowc_T[{len(self.decls)}])")
        return self.refs[out]

    # --- analyses ----------------------------------------------------------------------
    def _check_fetchable(self) -> None:
        for r in self.retvals:
            if r.inputs[0].dtype is DType.resource:
                raise CodegenError("a resource handle cannot be fetched; fetch a read of it",
                                   r.inputs[0].node)
        for n in self.graph:
            if computes_half_in_f32(n):
                raise CodegenError(f"{n.op} computes on f16/bf16 values, which its kernels take "
                                   "only as f32: run the legalize-types pass (it is in the "
                                   "default pipeline)", n)

    def _find_roots(self, order: List[Node], copies: Collection[Node] = ()) -> None:
        """The storage root of every value: views (``c_alias``) share their input's, unless
        the node is one of ``copies`` (it writes a copy instead)."""
        self.root.update(storage_roots(order, copies))

    def _last_uses(self, order: List[Node], position: Dict[Node, int]) -> Dict[Output, int]:
        """The position of the last node reading each storage root."""
        last_use: Dict[Output, int] = {}
        for n in order:
            for i in n.inputs:
                last_use[self.root[i]] = position[n]
        return last_use

    def _feed_index(self, n: Node) -> int:
        """Which feed the Placeholder ``n`` is (a CodegenError if it is not fed)."""
        if n not in self.feeds:
            raise CodegenError("placeholder is not fed", n)
        return self.feeds.index(n)

    def _node_line(self, n: Node) -> str:
        """``n``'s IR line (big constants elided, the memory plan's attrs left out: the C says
        where buffers live), safe inside a C comment."""
        value = n.attrs.get("value") if n.op == "Const" else None
        big = isinstance(value, np.ndarray) and value.size > INLINE_ELEMENTS \
            and value.dtype.kind != "O"
        lhs, rhs, trailer = node_text(n, elide_constants=True, hide_attrs=PLAN_ATTRS,
                                      value_file=("", self._const_digest(n)) if big else None)
        return comment(lhs + " = " + rhs + trailer)

    def _const_digest(self, n: Node) -> str:
        """SHA-256 (hex) of Const ``n``'s value as little-endian bytes, hashed once per module
        (its comment names it, and its ``.bin`` blob's manifest entry is it)."""
        digest = self._const_digests.get(n.name)
        if digest is None:
            value = n.attrs["value"]
            data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))
            digest = hashlib.sha256(data.reshape(-1).view(np.uint8)).hexdigest()
            self._const_digests[n.name] = digest
        return digest

    def _node_comment(self, n: Node) -> str:
        """The comment heading ``n``'s code."""
        return f"/* {self._node_line(n)} */"
