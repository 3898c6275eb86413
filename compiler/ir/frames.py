"""Control-flow structure of a graph: loop frames, loop Merges and Switches, cond guards.

TensorFlow's dataflow control flow (``Switch``/``Merge`` for conds, ``Enter``/``Merge``/
``LoopCond``/``Switch``/``NextIteration``/``Exit`` for loops) carries its structure implicitly;
the analyses here recover it. They sit on the IR floor because every layer above asks the same
questions: the interpreter runs frames, placement keeps a loop on one device, partitioning
checks it, gradients walk frames backwards, and the C emitter turns frames into ``for (;;)``
loops and guards into ``if`` blocks. Which ops are control flow is the registry's
``OpDef.is_control_flow`` flag, written once with each op.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Tuple

from compiler.errors import CodegenError, ExecutionError, FlowcError
from compiler.ir.graph import Node, Output
from compiler.ir.op_registry import get_op, has_op

Frame = Tuple[str, ...]                  # the names of the loop frames a node is in, outermost first
Literal = Tuple[Output, int]             # (a cond Switch's predicate, the branch taken: 0 or 1)
Guard = Tuple[Literal, ...]              # the branch conditions under which a value is live


def is_control_flow(node: Node) -> bool:
    """``node``'s op is one of the dataflow control-flow primitives."""
    return has_op(node.op) and get_op(node.op).is_control_flow


def has_control_flow(nodes: Iterable[Node]) -> bool:
    return any(is_control_flow(n) for n in nodes)


def is_loop_switch(n: Node) -> bool:
    """A loop's Switch (its predicate is the loop's ``LoopCond``), not a cond's."""
    return n.op == "Switch" and n.inputs[1].node.op == "LoopCond"


def is_loop_merge(n: Node) -> bool:
    """A loop variable's Merge (one input is the ``NextIteration`` back edge), not a cond's."""
    return n.op == "Merge" and any(i.node.op == "NextIteration" for i in n.inputs)


def static_frames(nodes: Iterable[Node]) -> Tuple[Dict[Node, Frame], Dict[Node, Frame]]:
    """For each node, the loop frames it runs in and the frames its outputs live in (they
    differ for Enter, which opens its ``frame_name``, and Exit, which leaves its frame).

    ``nodes`` must be in graph order. A node reading values of several frames runs in the
    innermost one; the others must enclose it (a value computed outside a loop may be read in
    it: it is loop-invariant).
    """
    run_in: Dict[Node, Frame] = {}
    out_in: Dict[Node, Frame] = {}
    for n in nodes:
        frame: Frame = ()
        for src in [i.node for i in n.inputs] + list(n.control_inputs):
            f = out_in.get(src)
            if f is None:                      # a back edge (NextIteration): same frame
                continue
            if len(f) > len(frame):
                f, frame = frame, f
            if frame[:len(f)] != f:
                raise ExecutionError(f"reads values of two unrelated loop frames "
                                     f"({'/'.join(f) or 'top level'} and "
                                     f"{'/'.join(frame) or 'top level'})", n)
        run_in[n] = frame
        if n.op == "Enter":
            out_in[n] = frame + (n.attrs["frame_name"],)
        elif n.op == "Exit":
            if not frame:
                raise ExecutionError("Exit outside of any loop frame", n)
            out_in[n] = frame[:-1]
        else:
            out_in[n] = frame
    return run_in, out_in


def union_guards(*guards: Guard) -> Guard:
    """The conjunction of ``guards`` (each literal once, in first-seen order)."""
    out: List[Literal] = []
    for g in guards:
        for lit in g:
            if lit not in out:
                out.append(lit)
    return tuple(out)


def cond_guards(order: List[Node]) -> Tuple[Dict[Node, Guard], Dict[Output, Guard]]:
    """For each node (and output), the branch conditions under which it is live: the
    (predicate, branch) literals of the cond Switches above it, minus those a Merge joined.
    Loop Switches add no literal (the loop structure decides). ``order``: graph order."""
    guard: Dict[Node, Guard] = {}
    out_guard: Dict[Output, Guard] = {}
    for n in order:
        if n.op == "Merge" and not is_loop_merge(n):
            gs = [out_guard[i] for i in n.inputs]
            g = tuple(l for l in gs[0] if all(l in h for h in gs[1:]))
        elif n.op == "Merge":
            g = union_guards(*[out_guard[i] for i in n.inputs if i.node.op != "NextIteration"])
        else:
            g = union_guards(*[out_guard[i] for i in n.inputs], *[guard[c] for c in n.control_inputs])
        guard[n] = g
        for out in n.outputs:
            if n.op == "Switch" and not is_loop_switch(n):
                out_guard[out] = union_guards(g, ((n.inputs[1], out.index),))
            else:
                out_guard[out] = g
    return guard, out_guard


def check_loops_on_one_device(order: List[Node]) -> None:
    """Raise a CodegenError naming the loop and its devices if a loop frame's nodes are placed
    on more than one device (frames and dead values on the wire are a later step)."""
    try:
        run_in, out_in = static_frames(order)
    except FlowcError as e:
        raise CodegenError(str(e)) from None          # the message names the node
    devices: Dict[Tuple[str, ...], Dict[str, Node]] = {}
    for n in order:
        home = out_in[n] if n.op == "Enter" else run_in[n]
        for k in range(1, len(home) + 1):
            devices.setdefault(home[:k], {}).setdefault(n.assigned_device, n)
    for frame, devs in devices.items():
        if len(devs) > 1:
            names = sorted(devs)
            first = devs[names[0]]
            raise CodegenError(
                f"control flow across devices is not supported yet: loop frame "
                f"'{'/'.join(frame)}' has nodes on " + " and ".join(
                    f"{d} ('{devs[d].name}')" for d in names)
                + "; place the whole loop on one device", first)
