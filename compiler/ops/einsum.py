"""Einsum, as TensorFlow defines it: ``Einsum(inputs: N * T) {equation}``, numpy's
Einstein summation (``"bij,bjk->bik"``; an implicit output is the labels that occur once, in
alphabetical order; ``...`` stands for broadcast dims, right-aligned as in numpy).

A label repeated within one operand takes its diagonal; a label absent from the output is
summed over; ``...`` dims of size 1 broadcast. The C lowering
(``compiler/codegen/c_ops/einsum.py``) turns a two-operand contraction into transposes and
a batched matrix product, as TensorFlow's kernel does, and runs a loop nest for the rest.

``parse_equation`` (labels per operand and for the output, ``...`` expanded into one label per
broadcast dim) is shared with the C lowering, the gradient and ``fl.einsum``.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op

_LETTERS = set(string.ascii_letters)
# the labels ``...`` expands to: not letters, so they never clash with the user's
ELLIPSIS_LABELS = [chr(0x3b1 + k) for k in range(24)]      # α, β, γ, ...


@dataclass(frozen=True)
class Equation:
    inputs: List[List[str]]        # per operand, one label per dim (``...`` expanded)
    output: List[str]
    broadcast: frozenset           # the labels ``...`` expanded to

    def text(self) -> str:
        """The equation with explicit labels only (``...`` spelled as its labels)."""
        return ",".join("".join(labels) for labels in self.inputs) + "->" + "".join(self.output)

    @property
    def labels(self) -> List[str]:
        seen: List[str] = []
        for labels in self.inputs + [self.output]:
            for c in labels:
                if c not in seen:
                    seen.append(c)
        return seen


def parse_equation(equation: str, ranks: Sequence[Optional[int]]) -> Equation:
    """Parse ``equation`` for operands of ``ranks`` (None: unknown, allowed without ``...``);
    raises ValueError saying what is wrong."""
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->", 1)
        if "->" in rhs:
            raise ValueError(f"equation '{equation}' has more than one '->'")
    else:
        lhs, rhs = eq, None
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"equation '{equation}' names {len(terms)} operands, got {len(ranks)}")
    spans = []
    for term, rank in zip(terms + ([rhs] if rhs is not None else []),
                          list(ranks) + ([None] if rhs is not None else [])):
        if term.count("...") > 1 or term.replace("...", "").strip(string.ascii_letters):
            raise ValueError(f"invalid subscripts '{term}' in equation '{equation}' (letters "
                             "and at most one '...')")
        explicit = len(term.replace("...", ""))
        if "..." in term:
            if rank is not None and rank < explicit:
                raise ValueError(f"'{term}' has {explicit} labels and '...' for an operand of "
                                 f"rank {rank}")
            spans.append(None if rank is None else rank - explicit)
        else:
            if rank is not None and rank != explicit:
                raise ValueError(f"'{term}' has {explicit} labels for an operand of rank {rank}")
            spans.append(0)
    known = [s for s, t in zip(spans, terms) if "..." in t]
    if any(s is None for s in known):
        raise ValueError(f"equation '{equation}' uses '...' on an operand of unknown rank")
    width = max(known, default=0)
    if width > len(ELLIPSIS_LABELS):
        raise ValueError(f"'...' spans {width} dims; at most {len(ELLIPSIS_LABELS)}")
    dots = ELLIPSIS_LABELS[:width]

    def expand(term: str, span: int) -> List[str]:
        if "..." not in term:
            return list(term)
        before, after = term.split("...")
        return list(before) + dots[width - span:] + list(after)
    inputs = [expand(t, s) for t, s in zip(terms, spans)]
    if rhs is None:
        counts: Dict[str, int] = {}
        for labels in inputs:
            for c in labels:
                counts[c] = counts.get(c, 0) + 1
        used_dots = [d for d in dots if d in counts]
        output = used_dots + sorted(c for c, n in counts.items() if n == 1 and c in _LETTERS)
    else:
        if "..." in rhs:
            output = expand(rhs, width)
        else:
            output = list(rhs)
        if len(set(output)) != len(output):
            raise ValueError(f"output subscripts '{rhs}' repeat a label")
        present = {c for labels in inputs for c in labels}
        for c in output:
            if c not in present:
                raise ValueError(f"output label '{c}' of equation '{equation}' is in no input")
    return Equation(inputs, output, frozenset(dots))


def label_sizes(eq: Equation,
                shapes: Sequence[Sequence[Optional[int]]]) -> Dict[str, Optional[int]]:
    """Each label's size (None: unknown); a broadcast label's size-1 dims stretch. Raises
    ValueError for dims that cannot match."""
    dims: Dict[str, List[Optional[int]]] = {}
    for k, (labels, shape) in enumerate(zip(eq.inputs, shapes)):
        seen: Dict[str, Optional[int]] = {}
        for c, d in zip(labels, shape):
            if seen.get(c) is not None and d is not None and seen[c] != d:
                raise ValueError(f"operand {k} repeats label '{c}' on dims of sizes "
                                 f"{seen[c]} and {d}")
            seen[c] = d if d is not None else seen.get(c)
            dims.setdefault(c, []).append(d)
    sizes: Dict[str, Optional[int]] = {}
    for c, ds in dims.items():
        known = {d for d in ds if d is not None}
        stretched = {d for d in known if d != 1} if c in eq.broadcast else known
        if len(stretched) > 1:
            what = "'...' dims" if c in eq.broadcast else f"label '{c}'"
            raise ValueError(f"{what} of sizes {sorted(stretched)} cannot be matched")
        if stretched:
            sizes[c] = stretched.pop()
        else:
            sizes[c] = 1 if known and None not in ds else None
    return sizes


def _einsum_shape(ctx) -> list:
    n = ctx.attr("N")
    shapes = [ctx.input_shape(i) for i in range(n)]
    ranks = [None if s is None else len(s) for s in shapes]
    try:
        eq = parse_equation(ctx.attr("equation"), ranks)
        if any(s is None for s in shapes):
            if any(r is None for r in ranks) and any(c in eq.broadcast for c in eq.output):
                return [None]
            known = [s if s is not None else [None] * len(labels)
                     for s, labels in zip(shapes, eq.inputs)]
            sizes = label_sizes(eq, known)
        else:
            sizes = label_sizes(eq, shapes)
    except ValueError as e:
        raise ctx.error(str(e)) from None
    return [tuple(sizes.get(c) for c in eq.output)]


def _einsum_ref(ctx, *operands):
    try:
        eq = parse_equation(ctx.attrs["equation"], [x.ndim for x in operands])
        label_sizes(eq, [x.shape for x in operands])
    except ValueError as e:
        raise ExecutionError(str(e), ctx.node) from None
    letters = {c: chr(ord("a") + k) if k < 26 else chr(ord("A") + k - 26)
               for k, c in enumerate(eq.labels)}
    spec = ",".join("".join(letters[c] for c in labels) for labels in eq.inputs) \
        + "->" + "".join(letters[c] for c in eq.output)
    dtype = operands[0].dtype
    with np.errstate(over="ignore"):
        out = np.einsum(spec, *operands, optimize=len(operands) > 2)
    return np.asarray(out, dtype=dtype)


register_op("Einsum", inputs=["inputs: N * T"], outputs=["output: T"],
            attrs=["equation: string", "N: int >= 1", "T: {float, i32, i64}"],
            shape=_einsum_shape, kernel=_einsum_ref, group="matmul",
            doc="Einstein summation over the operands (numpy's einsum equations).")
