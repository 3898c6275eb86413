"""Static memory planning for one compiled module: the buffers whose sizes are known at compile
time get offsets in one arena, and buffers whose lifetimes do not overlap share memory. The
``plan-memory`` pass (``plan_memory.py``) runs it per device and records the plan in the IR
(``record_plan``); the C emitter reads it back (``recorded_plan``).

The analyses the plan shares with the emitter live here too: storage roots (``storage_roots``:
views share their input's buffer), in-place accumulations that must write a copy
(``in_place_copies``) and which roots are handed to the caller (``plan_fetches``).

Two layers of planning:

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
from typing import Collection, Dict, Hashable, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from compiler.errors import CompileError
from compiler.ir.frames import is_loop_switch
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


# --- the analyses shared with the emitter ------------------------------------------------------
def storage_roots(order: Sequence[Node], copies: Collection[Node] = ()) -> Dict[Output, Output]:
    """The storage root of every value: views (``c_alias``) share their input's, unless the
    node is one of ``copies`` (it writes a copy instead)."""
    root: Dict[Output, Output] = {}
    for n in order:
        op = get_op(n.op, n)
        for out in n.outputs:
            if op.c_alias is not None and out.index == 0 and n.inputs and n not in copies:
                root[out] = root[n.inputs[op.c_alias]]
            else:
                root[out] = out
    return root


_FORWARDS = ("Switch", "Enter", "LoopCond", "NextIteration")   # pass their input's buffer on


def _value_of(out: Output) -> Tuple[Output, bool]:
    """The value ``out`` is a name for: views (``c_alias`` ops without a kernel) and the control
    flow that forwards a buffer (``_FORWARDS``) followed back to the node that wrote it; and
    whether the way back passes a buffer others see in other iterations or branches (an
    ``Enter``: a loop invariant; a cond's ``Switch``: what both branches and later nodes read)."""
    shared = False
    while True:
        n = out.node
        op = get_op(n.op, n)
        if n.op in _FORWARDS:
            if n.op == "Enter" or (n.op == "Switch" and not is_loop_switch(n)):
                shared = True
            out = n.inputs[0]
        elif op.c_alias is not None and op.c_kernel is None and n.inputs:
            out = n.inputs[op.c_alias]
        else:
            return out, shared


def in_place_copies(order: Sequence[Node], root: Mapping[Output, Output]) -> set:
    """Nodes of ops that write their ``c_alias`` input's buffer (``c_in_place``: an
    accumulation made by fuse-accumulate, an ``InplaceUpdate``) that must write a copy instead:
    the buffer is a constant's (read-only memory), a feed's (the caller's array), a loop
    invariant or a cond's input, or the value it holds is read by another node.

    Reads are counted per value, not per buffer: the in-place node's own result, which shares
    the buffer, is read by the ``NextIteration`` that makes it a loop variable's next value
    (the compiled loop then keeps the variable where it is), and a loop's ``Exit`` reads the
    variable only when the body does not run. ``root`` (the storage roots) is not needed for
    this and kept for the callers' sake."""
    del root
    readers: Dict[Output, int] = {}
    for n in order:
        op = get_op(n.op, n)
        if n.op in _FORWARDS or (op.c_alias is not None and op.c_kernel is None):
            continue                                  # passes the value on, reads nothing
        if n.op == "Exit" and is_loop_switch(n.inputs[0].node):
            continue                                  # runs when the body does not
        for v in {_value_of(i)[0] for i in n.inputs}:
            readers[v] = readers.get(v, 0) + 1
    copies = set()
    for n in order:
        op = get_op(n.op, n)
        if not (op.extra.get("c_in_place") and n.inputs):
            continue
        v, shared = _value_of(n.inputs[op.c_alias])
        if shared or v.node.op in ("Const", "Placeholder") or readers.get(v, 0) > 1:
            copies.add(n)
    return copies


def module_roots(order: Sequence[Node]) -> Tuple[Dict[Output, Output], set]:
    """The storage roots of a module's values and the in-place accumulations that write a copy
    (``in_place_copies``), as the emitter sees them."""
    root = storage_roots(order)
    copies = in_place_copies(order, root)
    if copies:
        root = storage_roots(order, copies)
    return root, copies


def plan_fetches(retvals: Sequence[Node], root: Mapping[Output, Output], copies: Collection[Node]
                 ) -> Tuple[List[Tuple[Node, Output, bool]], Set[Output]]:
    """Which roots are handed to the caller: ``(retval, fetched value, copy)`` per fetch in
    ``retvals`` order, and the set of roots handed over. A fetch is copied when the caller
    cannot own its buffer (a feed, a constant, a view) or the buffer was handed over already."""
    transferred: Set[Output] = set()
    fetches = []
    for r in retvals:
        src = r.inputs[0]
        r_root = root[src]
        owner = r_root.node.op not in ("Placeholder", "Const") and (
            get_op(r_root.node.op).c_alias is None or r_root.node in copies)
        if owner and r_root not in transferred:
            transferred.add(r_root)
            fetches.append((r, src, False))
        else:
            fetches.append((r, src, True))
    return fetches, transferred


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


# --- the plan in the IR ------------------------------------------------------------------------
# Attrs the plan-memory pass sets: per planned node its outputs' offsets in the arena (-1: not
# planned); on the device's first planned node the arena's size; on a node that writes in place
# the index of the input whose memory it takes over. A device without planned buffers has none.
OFFSETS_ATTR = "_arena_offsets"
SIZE_ATTR = "_arena_size"
IN_PLACE_ATTR = "_arena_in_place_of"
PLAN_ATTRS = (OFFSETS_ATTR, SIZE_ATTR, IN_PLACE_ATTR)


def clear_plan(nodes: Sequence[Node]) -> bool:
    """Remove recorded plan attrs; whether there were any."""
    changed = False
    for n in nodes:
        for a in PLAN_ATTRS:
            if a in n.attrs:
                del n.attrs[a]
                changed = True
    return changed


def record_plan(order: Sequence[Node], plan: StepMemoryPlan,
                root: Mapping[Output, Output]) -> bool:
    """Set the plan's attrs on the nodes of one module (``order``); whether any were set."""
    took = {b.output: b.in_place_of for b in plan.buffers if b.in_place_of is not None}
    first = True
    for n in order:
        offsets = [plan.offsets.get(out, -1) for out in n.outputs]
        if all(o < 0 for o in offsets):
            continue
        n.attrs[OFFSETS_ATTR] = offsets
        if first:
            n.attrs[SIZE_ATTR] = plan.arena_size
            first = False
        src = took.get(Output(n, 0))
        if src is not None:
            n.attrs[IN_PLACE_ATTR] = next(k for k, i in enumerate(n.inputs) if root[i] == src)
    return not first


def recorded_plan(order: Sequence[Node], root: Mapping[Output, Output]
                  ) -> Optional[StepMemoryPlan]:
    """The plan ``record_plan`` left on a module's nodes, or None when there is none. Live
    ranges come from ``order`` (the report shows them); an offset on a value the plan could not
    have placed (a pass changed the graph after plan-memory) is an error."""
    sized = [n for n in order if SIZE_ATTR in n.attrs]
    if not sized:
        return None
    position = {n: i for i, n in enumerate(order)}
    last_use: Dict[Output, int] = {}
    for n in order:
        for i in n.inputs:
            last_use[root[i]] = position[n]
    plan = StepMemoryPlan(int(sized[0].attrs[SIZE_ATTR]))
    for n in order:
        offsets = n.attrs.get(OFFSETS_ATTR)
        if offsets is None:
            continue
        if len(offsets) != n.num_outputs:
            raise CompileError(f"stale memory plan: {OFFSETS_ATTR} of %{n.name} has "
                               f"{len(offsets)} entries for {n.num_outputs} outputs", n)
        op = get_op(n.op, n)
        allocated = not (n.op in _NOT_ALLOCATED or op.c_alias is not None
                         or op.extra.get("c_owns_outputs"))
        k = n.attrs.get(IN_PLACE_ATTR)
        for out, offset in zip(n.outputs, offsets):
            if offset < 0:
                continue
            nbytes = static_nbytes(out)
            if (not allocated or nbytes is None or root[out] != out
                    or offset + nbytes > plan.arena_size):
                raise CompileError(f"stale memory plan: output {out.index} of %{n.name} cannot "
                                   "live in the arena (run plan-memory last)", n)
            start = position[n]
            src = root[n.inputs[k]] if k is not None and out.index == 0 else None
            plan.offsets[out] = offset
            plan.buffers.append(PlannedBuffer(out, nbytes, offset, start,
                                              max(start, last_use.get(out, start)), src))
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
