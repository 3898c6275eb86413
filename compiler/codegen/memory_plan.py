"""Static memory planning for one compiled module: the buffers whose sizes are known at compile
time get offsets in one arena, and buffers whose lifetimes do not overlap share memory.

Two layers:

* ``plan_offsets`` is pure (live intervals in, offsets out): the greedy-by-size strategy of
  TFLite's arena planner and XLA's heap simulator. Buffers are placed largest first; each one
  goes into the smallest gap, between the buffers already placed that are live at the same
  time, that fits it (best fit), else above them all.
* ``plan_step_memory`` reads a device's step graph the way the emitter does (storage roots,
  values handed to the caller) and builds those intervals: a buffer is live from the node that
  writes it to the last node that reads it or any view of it. An elementwise kernel writes in
  place into an input that dies at that node when shape and dtype match: the two become one
  buffer. Feeds, constants, variables, received tensors and fetched values are never planned,
  so never overwritten.

Positions are the nodes' indices in the module's static order; intervals are inclusive, so a
node's outputs never share memory with its inputs unless the node is marked in place.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Hashable, List, Mapping, Optional, Sequence, Set

import numpy as np

from compiler.ir.graph import Node, Output
from compiler.ir.op_registry import get_op
from runtime.dtypes import DType

ALIGNMENT = 64

# Nodes whose outputs the emitter does not allocate (feeds, constants, bookkeeping).
_NOT_ALLOCATED = frozenset({"Placeholder", "Const", "NoOp", "_Sink", "_Retval"})


def aligned(nbytes: int, alignment: int = ALIGNMENT) -> int:
    """``nbytes`` rounded up to ``alignment``; an empty buffer still takes one unit."""
    return max(alignment, (nbytes + alignment - 1) // alignment * alignment)


@dataclass(frozen=True)
class LiveBuffer:
    """A buffer to place: its bytes and the positions where it holds a value (inclusive)."""
    key: Hashable
    nbytes: int
    start: int
    end: int


@dataclass
class ArenaPlan:
    """Where each buffer lives in the arena, and the arena's size (the peak)."""
    offsets: Dict[Hashable, int]
    size: int


def plan_offsets(buffers: Sequence[LiveBuffer], alignment: int = ALIGNMENT) -> ArenaPlan:
    """Offsets (multiples of ``alignment``) such that buffers live at the same time never
    overlap, packed greedily by size with best fit."""
    n = len(buffers)
    for b in buffers:
        if b.end < b.start or b.nbytes < 0:
            raise ValueError(f"buffer {b.key!r}: bad interval [{b.start}, {b.end}] "
                             f"or size {b.nbytes}")
    sizes = [aligned(b.nbytes, alignment) for b in buffers]
    order = sorted(range(n), key=lambda i: (-sizes[i], buffers[i].start, buffers[i].end, i))
    # the buffers placed so far, as arrays: one vectorized test finds those live at the same time
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    lows = np.empty(n, np.int64)
    highs = np.empty(n, np.int64)
    offsets: Dict[Hashable, int] = {}
    top = 0
    for count, i in enumerate(order):
        b, size = buffers[i], sizes[i]
        live = np.flatnonzero((starts[:count] <= b.end) & (ends[:count] >= b.start))
        offset = _best_fit(lows[live], highs[live], size)
        starts[count], ends[count] = b.start, b.end
        lows[count], highs[count] = offset, offset + size
        offsets[b.key] = offset
        top = max(top, offset + size)
    return ArenaPlan(offsets, top)


def _best_fit(lows: np.ndarray, highs: np.ndarray, size: int) -> int:
    """The lowest offset of the smallest gap of at least ``size`` bytes between the occupied
    ranges [lows[k], highs[k]); above them all when no gap fits."""
    if lows.size < 64:                         # few ranges: plain Python is faster
        best, best_gap, covered = None, None, 0
        for low, high in sorted(zip(lows.tolist(), highs.tolist())):
            gap = low - covered
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = covered, gap
            covered = max(covered, high)
        return covered if best is None else best
    by_low = np.argsort(lows, kind="stable")
    lows, highs = lows[by_low], highs[by_low]
    covered = np.maximum.accumulate(highs)                 # highest byte used below each range
    gap_starts = np.concatenate(([0], covered[:-1]))
    gaps = lows - gap_starts
    fits = np.flatnonzero(gaps >= size)
    if fits.size == 0:
        return int(covered[-1])
    best = fits[np.argmin(gaps[fits])]
    return int(gap_starts[best])


# --- a step graph's buffers --------------------------------------------------------------------
@dataclass
class PlannedBuffer:
    """One value the plan placed: the output that writes it, its bytes, offset and lifetime."""
    output: Output
    nbytes: int
    offset: int
    start: int
    end: int
    in_place_of: Optional[Output] = None      # the dying input whose memory it took over

    @property
    def node(self) -> Node:
        return self.output.node


@dataclass
class StepMemoryPlan:
    """The arena of one module: an offset per planned output, and what the report shows."""
    arena_size: int
    offsets: Dict[Output, int] = field(default_factory=dict)
    buffers: List[PlannedBuffer] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        """What the planned buffers would take without reuse (each its own aligned slot)."""
        return sum(aligned(b.nbytes) for b in self.buffers)

    def sharing_count(self) -> int:
        """How many buffers share some of their bytes with another buffer."""
        spans = sorted((b.offset, b.offset + aligned(b.nbytes)) for b in self.buffers)
        shared = 0
        highest = -1
        for k, (low, high) in enumerate(spans):
            below = highest > low
            above = k + 1 < len(spans) and spans[k + 1][0] < high
            shared += below or above
            highest = max(highest, high)
        return shared

    def in_place_count(self) -> int:
        return sum(1 for b in self.buffers if b.in_place_of is not None)


def static_nbytes(out: Output) -> Optional[int]:
    """Bytes of ``out`` when its shape is fully known and it is dense data, else None."""
    t = out.type
    if t.dtype is DType.resource or t.shape is None or any(d is None for d in t.shape):
        return None
    return t.dtype.itemsize * math.prod(t.shape)


def writes_in_place(node: Node) -> bool:
    """A kernel that computes each output element from the same element of its same-shaped
    inputs (one elementwise loop), so its output may be the memory of such an input."""
    op = get_op(node.op, node)
    if node.num_outputs != 1:
        return False
    return op.group == "fused" or (op.group == "elementwise" and op.extra.get("c_expr") is not None)


def plan_step_memory(order: Sequence[Node], root: Mapping[Output, Output],
                     transferred: Set[Output], in_place: bool = True) -> StepMemoryPlan:
    """The arena plan of a step graph emitted in ``order`` (no control flow): every buffer the
    emitter allocates whose size is static, except those handed to the caller."""
    position = {n: i for i, n in enumerate(order)}
    last_use: Dict[Output, int] = {}
    for n in order:
        for i in n.inputs:
            last_use[root[i]] = position[n]
    sizes: Dict[Output, int] = {}
    for n in order:
        if n.op in _NOT_ALLOCATED:
            continue
        op = get_op(n.op, n)
        if op.c_alias is not None or op.extra.get("c_owns_outputs"):
            continue
        for out in n.outputs:
            nbytes = static_nbytes(out)
            if nbytes is not None and root[out] == out and out not in transferred:
                sizes[out] = nbytes
    group: Dict[Output, Output] = {out: out for out in sizes}    # value -> its buffer's first
    took: Dict[Output, Output] = {}
    if in_place:
        for n in order:
            out = Output(n, 0)
            if out not in sizes or not writes_in_place(n):
                continue
            for i in n.inputs:
                src = root[i]
                if (src in sizes and last_use[src] == position[n] and sizes[src] == sizes[out]
                        and i.dtype is out.dtype and tuple(i.type.shape) == tuple(out.type.shape)):
                    group[out] = group[src]
                    took[out] = src
                    break
    spans: Dict[Output, List[int]] = {}
    for out, nbytes in sizes.items():
        start = position[out.node]
        end = max(start, last_use.get(out, start))
        g = group[out]
        if g in spans:
            span = spans[g]
            span[0], span[1], span[2] = min(span[0], start), max(span[1], end), max(span[2], nbytes)
        else:
            spans[g] = [start, end, nbytes]
    arena = plan_offsets([LiveBuffer(g, s[2], s[0], s[1]) for g, s in spans.items()])
    plan = StepMemoryPlan(arena.size)
    for out, nbytes in sizes.items():
        offset = arena.offsets[group[out]]
        start = position[out.node]
        plan.offsets[out] = offset
        plan.buffers.append(PlannedBuffer(out, nbytes, offset, start,
                                          max(start, last_use.get(out, start)), took.get(out)))
    return plan


# --- the report --------------------------------------------------------------------------------
def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def format_memory_report(device: str, plan: Optional[StepMemoryPlan], largest: int = 10) -> str:
    """What ``flowc compile --memory-report`` prints for one device's module."""
    if plan is None:
        return (f"memory plan for {device}: none (memory planning is off, or the module has "
                "control flow: its buffers are allocated at run time)\n")
    lines = [f"memory plan for {device}:",
             f"  peak bytes (arena size): {plan.arena_size} ({_bytes(plan.arena_size)})",
             f"  buffers: {len(plan.buffers)} planned, {plan.total_bytes} bytes without reuse",
             f"  sharing memory: {plan.sharing_count()} buffers "
             f"({plan.in_place_count()} written in place over a dying input)"]
    biggest = sorted(plan.buffers, key=lambda b: (-b.nbytes, b.start))[:largest]
    if biggest:
        lines.append("  largest buffers:")
        lines.append(f"    {'bytes':>12}  {'offset':>12}  {'live':>11}  node (op)  location")
        for b in biggest:
            n = b.node
            name = n.name + (f":{b.output.index}" if b.output.index else "")
            where = str(n.location) if n.location else "-"
            inplace = f"  in place of %{b.in_place_of.node.name}" if b.in_place_of else ""
            lines.append(f"    {b.nbytes:>12}  {b.offset:>12}  {f'{b.start}-{b.end}':>11}  "
                         f"%{name} ({n.op})  {where}{inplace}")
    return "\n".join(lines) + "\n"
