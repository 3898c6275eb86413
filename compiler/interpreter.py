"""The numpy reference interpreter: the oracle every compiled kernel and pass is tested against.

It runs the nodes the fetches and targets need, in graph order, with each op's numpy kernel.
Graphs with control flow (Switch/Merge/Enter/Exit/NextIteration/LoopCond) run on a dataflow
scheduler with dead values and loop-iteration tags instead (``_ControlFlowRun``).
Subclasses can override ``run_node`` to build analyses on top of it (the torch.fx pattern).
"""
from __future__ import annotations

import heapq
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from compiler.errors import ExecutionError, CompileError, node_error
from compiler.ir.construct import run_reference
from compiler.ir.frames import has_control_flow, static_frames
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.reachability import needed_nodes
from runtime.errors import (FeedError, FlowcError, OpError, ResourceExhaustedError,
                            UnimplementedError)
from runtime.feeds import check_feed


def _missing_feed(node: Node) -> FeedError:
    where = f", defined at {node.location}" if node.location else ""
    return FeedError(f"you must feed a value for placeholder '{node.name}' "
                     f"({node.output_types[0]}){where}", node)


class Interpreter:
    def __init__(self, graph: Graph, state=None):
        from runtime.resources import ResourceStore
        self.graph = graph
        self.state = state if state is not None else ResourceStore()

    def run(self, fetches: Sequence[Output], feeds: Optional[Dict[Output, object]] = None,
            targets: Sequence[Node] = ()) -> List[np.ndarray]:
        feeds = dict(feeds or {})
        env: Dict[Output, np.ndarray] = {}
        for out, value in feeds.items():
            env[out] = check_feed(out.node.name if out.index == 0 else out.name, value,
                                  out.dtype, out.shape)
        need = needed_nodes(fetches, targets, set(feeds))
        if has_control_flow(need):
            cf = _ControlFlowRun(self, list(self.graph), need, env)
            cf.run()
            return [cf.fetch(f) for f in fetches]
        for node in self.graph:
            if node not in need:
                continue
            if all(o in env for o in node.outputs) and node.outputs:
                continue
            if node.op == "Placeholder":
                raise _missing_feed(node)
            values = [env[i] for i in node.inputs]
            results = self.run_node(node, values)
            if len(results) != node.num_outputs:
                raise ExecutionError(f"the reference kernel returned {len(results)} values for "
                                     f"{node.num_outputs} outputs", node)
            for i, r in enumerate(results):
                env.setdefault(Output(node, i), r)       # a fed output keeps its fed value
        return [env[f] for f in fetches]

    def run_node(self, node: Node, values: List[np.ndarray]) -> List[np.ndarray]:
        """The node's outputs from its reference kernel. A failure is one of TensorFlow's error
        classes naming the node, the class the C kernels report it with: an ``OpError`` raised
        without a node (a queue's, an accumulator's) gets this one; out of memory is a
        ``ResourceExhaustedError``; any other exception of a kernel an ``ExecutionError``
        (``InvalidArgumentError``)."""
        try:
            with np.errstate(all="ignore"):
                return run_reference(node, values, self.state)
        except OpError as e:
            raise e.add_node(node.name, node.location, node.op)
        except FlowcError:
            raise
        except MemoryError as e:
            raise node_error(ResourceExhaustedError, f"out of memory: {e}", node) from e
        except NotImplementedError as e:
            raise node_error(UnimplementedError, str(e) or "not implemented", node) from e
        except Exception as e:
            raise ExecutionError(f"{type(e).__name__}: {e}", node) from e


# --- dynamic control flow ------------------------------------------------------------------
# A value of a run is keyed by (output, tag). A tag names a frame instance and an iteration
# at each loop level: ((frame_name, iteration), ...), () at the top level (timely dataflow's
# timestamps). A dead value (the untaken output of a Switch, and everything computed from it)
# is the DEAD marker; Merge forwards its one live input.

class _Dead:
    def __repr__(self) -> str:
        return "DEAD"


DEAD = _Dead()

Tag = Tuple[Tuple[str, int], ...]


class _ControlFlowRun:
    """One run of a graph with control-flow ops: a dataflow scheduler over (node, tag)."""

    def __init__(self, interp: "Interpreter", order: List[Node], need: Set[Node],
                 env: Dict[Output, np.ndarray]):
        self.interp = interp
        self.position = {n: i for i, n in enumerate(order)}
        self.run_in, self.out_in = static_frames(order)
        self.need = need
        self.values: Dict[Tuple[Output, Tag], object] = {}
        self.done: Dict[Tuple[Node, Tag], bool] = {}        # (node, output tag) -> dead?
        self.fired: Set[Tuple[Node, Tag]] = set()
        self.waiting: Dict[Node, Set[Tag]] = {}
        self.merges: Dict[Tuple[Node, Tag], Set[int]] = {}   # dead inputs seen so far
        self.dead_exits: Dict[Tuple[Node, Tag], bool] = {}
        self.heap: list = []
        self.seq = 0
        self.data_users: Dict[Output, List[Tuple[Node, int]]] = {}
        self.ctrl_users: Dict[Node, List[Node]] = {}
        for n in order:
            if n not in need:
                continue
            for k, i in enumerate(n.inputs):
                self.data_users.setdefault(i, []).append((n, k))
            for c in n.control_inputs:
                self.ctrl_users.setdefault(c, []).append(n)
        self.fed = dict(env)
        self.started: Dict[tuple, int] = {}                  # frame instance -> last iteration
        self.invariants: Dict[str, List[Node]] = {}          # frame name -> constant Enters
        for n in order:
            if n in need and n.op == "Enter" and n.attrs.get("is_constant"):
                self.invariants.setdefault(n.attrs["frame_name"], []).append(n)

    # --- tags ---------------------------------------------------------------------------
    def _input_tag(self, out: Output, tag: Tag) -> Tag:
        p = out.node
        d = len(self.out_in[p])
        if p.op == "Enter" and p.attrs.get("is_constant"):
            return tag[:d - 1] + ((self.out_in[p][-1], 0),)
        return tag[:d]

    def _control_tag(self, c: Node, tag: Tag) -> Tag:
        return tag[:len(self.out_in[c])]

    # --- scheduling -----------------------------------------------------------------------
    def _push(self, node: Node, tag: Tag, payload=None) -> None:
        self.fired.add((node, tag))
        self.seq += 1
        heapq.heappush(self.heap, (self.position[node], self.seq, node, tag, payload))

    def _try(self, node: Node, tag: Tag) -> None:
        if (node, tag) in self.fired:
            return
        for i in node.inputs:
            if (i, self._input_tag(i, tag)) not in self.values:
                self.waiting.setdefault(node, set()).add(tag)
                return
        for c in node.control_inputs:
            if (c, self._control_tag(c, tag)) not in self.done:
                self.waiting.setdefault(node, set()).add(tag)
                return
        self.waiting.get(node, set()).discard(tag)
        self._push(node, tag)

    def _candidates(self, consumer: Node, producer: Node, tag: Tag) -> List[Tag]:
        """Tags at which ``consumer`` may have become ready now that ``producer`` gave a value
        at ``tag``."""
        depth = len(self.run_in[consumer])
        if producer.op == "Enter" and producer.attrs.get("is_constant"):
            # a loop invariant: every iteration of the frame instance reads it
            base = tag[:-1]
            name = tag[-1][0]
            out = [t for t in self.waiting.get(consumer, ()) if t[:len(base)] == base
                   and len(t) > len(base) and t[len(base)][0] == name]
            if depth == len(tag):
                out += [base + ((name, k),) for k in range(self.started.get(base + (name,), 0) + 1)]
            return out
        if depth > len(tag):
            return [t for t in self.waiting.get(consumer, ()) if t[:len(tag)] == tag]
        return [tag]

    def _store(self, node: Node, tag: Tag, results) -> None:
        """Record the node's outputs (a list of values, or DEAD for all) at ``tag``."""
        dead = results is DEAD
        self.done[(node, tag)] = dead
        for k, out in enumerate(node.outputs):
            value = DEAD if dead else results[k]
            if out in self.fed:
                value = self.fed[out]
            self.values[(out, tag)] = value
            for user, idx in self.data_users.get(out, ()):
                if user.op == "Merge":
                    self._merge_input(user, tag, idx, value)
                else:
                    for t in self._candidates(user, node, tag):
                        self._try(user, t)
        for user in self.ctrl_users.get(node, ()):
            for t in self._candidates(user, node, tag):
                self._try(user, t)

    def _merge_input(self, merge: Node, tag: Tag, index: int, value) -> None:
        if (merge, tag) in self.fired:
            return
        if value is not DEAD:
            self._push(merge, tag, (value, index))
            return
        dead = self.merges.setdefault((merge, tag), set())
        dead.add(index)
        back = [k for k, i in enumerate(merge.inputs) if i.node.op == "NextIteration"]
        if back and (not tag or tag[-1][1] == 0):
            expected = set(range(len(merge.inputs))) - set(back)
        elif back:
            expected = set(back)
        else:
            expected = set(range(len(merge.inputs)))
        if expected <= dead:
            self._push(merge, tag, DEAD)

    # --- running --------------------------------------------------------------------------
    def run(self) -> None:
        for out, value in self.fed.items():
            if all(o in self.fed for o in out.node.outputs):
                if (out.node, ()) not in self.fired:
                    self.fired.add((out.node, ()))
                    self._store(out.node, (), [self.fed[o] for o in out.node.outputs])
        for n in self.need:
            if not n.inputs and not n.control_inputs:
                self._try(n, ())
        while True:
            while self.heap:
                _, _, node, tag, payload = heapq.heappop(self.heap)
                self._execute(node, tag, payload)
            if not self.dead_exits:
                break
            # The loops are quiet: an Exit that only ever saw dead values (its loop was
            # entered with dead values) is dead in the parent frame, innermost first.
            deepest = max(len(t) for _, t in self.dead_exits)
            for (node, tag) in [k for k in self.dead_exits if len(k[1]) == deepest]:
                del self.dead_exits[(node, tag)]
                self._store(node, tag, DEAD)

    def _execute(self, node: Node, tag: Tag, payload) -> None:
        if node.op == "Merge":
            if payload is DEAD:
                self._store(node, tag, DEAD)
            else:
                value, index = payload
                self._store(node, tag, [value, np.array(index, dtype=np.int32)])
            return
        values = [self.values[(i, self._input_tag(i, tag))] for i in node.inputs]
        dead = any(v is DEAD for v in values) or any(
            self.done[(c, self._control_tag(c, tag))] for c in node.control_inputs)
        op = node.op
        if op == "Exit":
            parent = tag[:-1]
            if dead:
                if (node, parent) not in self.done:
                    self.dead_exits[(node, parent)] = True
                return
            self.dead_exits.pop((node, parent), None)
            self._store(node, parent, values)
            return
        if op == "NextIteration":
            if dead:
                return                           # deadness stops at the back edge
            name, it = tag[-1]
            new = tag[:-1] + ((name, it + 1),)
            self._store(node, new, values)
            self._start_iteration(new)
            return
        if op == "Enter":
            self._store(node, tag + ((node.attrs["frame_name"], 0),), DEAD if dead else values)
            return
        if dead:
            self._store(node, tag, DEAD)
            return
        if op == "Switch":
            taken = bool(np.asarray(values[1]))
            self._store(node, tag, [DEAD, values[0]] if taken else [values[0], DEAD])
            return
        if op == "LoopCond":
            self._store(node, tag, values)
            return
        if op == "Placeholder":
            raise _missing_feed(node)
        results = self.interp.run_node(node, values)
        if len(results) != node.num_outputs:
            raise ExecutionError(f"the reference kernel returned {len(results)} values for "
                                 f"{node.num_outputs} outputs", node)
        self._store(node, tag, list(results))

    def _start_iteration(self, tag: Tag) -> None:
        """A new iteration of a frame instance: its loop invariants reach it too (TF's
        ActivateLoopInvs), so nodes reading only invariants run in every iteration."""
        key = tag[:-1] + (tag[-1][0],)
        if self.started.get(key, 0) >= tag[-1][1]:
            return
        self.started[key] = tag[-1][1]
        for e in self.invariants.get(tag[-1][0], ()):
            if (e.output(0), tag[:-1] + ((tag[-1][0], 0),)) not in self.values:
                continue
            users = [u for u, _ in self.data_users.get(e.output(0), ())] + self.ctrl_users.get(e, [])
            for u in users:
                if len(self.run_in[u]) == len(tag):
                    self._try(u, tag)

    def fetch(self, out: Output) -> np.ndarray:
        if out in self.fed:
            return self.fed[out]
        value = self.values.get((out, ()))
        if value is None:
            raise ExecutionError(f"fetched tensor '{out.name}' was never computed (a loop it "
                                 "depends on did not finish, or it is inside a loop frame)",
                                 out.node)
        if value is DEAD:
            raise ExecutionError(f"fetched tensor '{out.name}' is dead: it is on a branch of a "
                                 "cond that was not taken", out.node)
        return value
