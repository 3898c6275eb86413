"""Each distinct kernel's C is rendered once per module: nodes with the same op, attrs, dtypes,
static shapes and small constant inputs get the same code up to the names of their tensors,
so the second and later ones reuse the first one's text with their own names put in (a step of
10,000 scalar adds rendered its template 10,000 times; a MobileNet its 1,400 per-channel
convolutions).

The code is rendered once with placeholder tensors (``flowc_memo_t<k>_`` for the k-th distinct
tensor's slot, ``flowc_memo_a<k>_`` for the address of one that has no slot) and stored with
the checks the kernel added; each node gets that text with its own names substituted.

Only flowc's own stateless lowerings (``compiler/codegen/c_ops/``) of nodes whose tensors all
have static shapes are memoized: their code depends on nothing else of the node. They read the
values of constant inputs only for shape-like (integer) inputs — axes, permutations, sizes,
paddings — and for one-element operands (Range's start, limit and delta): so integer and bool
constants (up to ``MAX_KEYED_CONSTANT`` elements) and one-element constants are part of the
key by value, other constants (filters, weights, tables) only by their type. User templates
may read anything of the node (its name), and stateful ops name their resources: both are
rendered per node.
"""
from __future__ import annotations

import hashlib
import re
from typing import Dict, List, Tuple

import numpy as np

from compiler.codegen.kernel_context import KernelContext, TensorRef
from compiler.ir.construct import constant_value
from compiler.ir.graph import Output
from compiler.passes.memory_plan import PLAN_ATTRS
from runtime.dtypes import DType

# Integer and bool constant inputs of at most this many elements are keyed by value.
MAX_KEYED_CONSTANT = 4096

_OWN_LOWERINGS = "compiler.codegen.c_ops."
# Attrs that say where a node came from, which no lowering reads: the memory plan's (the
# emitter places the buffers) and the names of the nodes a Fused node replaced (the profile's).
_UNREAD_ATTRS = frozenset(PLAN_ATTRS) | {"fused_from"}
_PLACEHOLDER = re.compile(r"flowc_memo_([ta])(\d+)_")


def memoizable(op, kc: KernelContext) -> bool:
    """Whether ``op``'s C for ``kc`` depends only on what ``KernelMemo`` keys it by."""
    module = getattr(op.c_kernel, "__module__", None) or ""
    if not module.startswith(_OWN_LOWERINGS) or op.stateful:
        return False
    for ref in (*kc.inputs, *kc.outputs):
        if ref.dtype is DType.resource or not ref.static:
            return False
    return True


def _value_key(value) -> object:
    """A hashable, exact stand-in for an attr value."""
    if isinstance(value, DType):
        return ("dtype", value.ir_name)
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape,
                hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_value_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _value_key(v)) for k, v in value.items())))
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, repr(value))


class KernelMemo:
    """The kernels rendered so far in one module, by key."""

    def __init__(self):
        self._codes: Dict[tuple, Tuple[str, List[str]]] = {}
        self._constants: Dict[Output, object] = {}
        self.renders = 0            # how many times a lowering ran (the rest were reused)

    def _constant_key(self, out: Output) -> object:
        key = self._constants.get(out, self)
        if key is self:
            value = constant_value(out)
            if value is None:
                key = None
            else:
                value = np.asarray(value)
                by_value = value.size == 1 or (value.dtype.kind in "biu"
                                               and value.size <= MAX_KEYED_CONSTANT)
                key = _value_key(value) if by_value else ("data", value.dtype.str, value.shape)
            self._constants[out] = key
        return key

    def c_kernel(self, op, kc: KernelContext) -> str:
        """``op.c_kernel(kc)``, its checks appended to ``kc.checks`` as the kernel would."""
        if not memoizable(op, kc):
            self.renders += 1
            return op.c_kernel(kc)
        refs = [*kc.inputs, *kc.outputs]
        distinct: Dict[str, int] = {}
        pattern = tuple(distinct.setdefault(r.var, len(distinct)) for r in refs)
        node = kc.node
        attrs = tuple(sorted((k, _value_key(v)) for k, v in node.attrs.items()
                             if k not in _UNREAD_ATTRS))
        key = (op.name, attrs, pattern, kc.target.restrict,
               tuple((r.dtype, tuple(r.shape), r.address is not None) for r in refs),
               tuple(self._constant_key(i) for i in node.inputs))
        hit = self._codes.get(key)
        if hit is None:
            self.renders += 1
            stand_in: Dict[str, TensorRef] = {}
            for r in refs:
                if r.var not in stand_in:
                    k = distinct[r.var]
                    stand_in[r.var] = TensorRef(
                        f"flowc_memo_t{k}_", r.type, r.target, node,
                        address=None if r.address is None else f"flowc_memo_a{k}_")
            memo_kc = KernelContext(node, [stand_in[r.var] for r in kc.inputs],
                                    [stand_in[r.var] for r in kc.outputs], kc.target, kc.module)
            hit = (op.c_kernel(memo_kc), list(memo_kc.checks))
            self._codes[key] = hit
        order = list(distinct)          # distinct tensors' vars, by placeholder number
        by_number = {i: refs[pattern.index(i)] for i in range(len(order))}

        def name(m: re.Match) -> str:
            ref = by_number[int(m.group(2))]
            return ref.var if m.group(1) == "t" else ref.address

        code, checks = hit
        kc.checks.extend(_PLACEHOLDER.sub(name, c) for c in checks)
        return _PLACEHOLDER.sub(name, code)
