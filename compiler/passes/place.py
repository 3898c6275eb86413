"""place: give every node a full device name (``Node.assigned_device``).

The rules, in order (TensorFlow's placer, simplified and deterministic):

1. **Feasible devices.** A node can run on a device type its op has kernels for (the C code
   generator: CPU; the CUDA code generator: GPU, ``compiler/codegen/cuda_kernels.py``; ops
   the emitters handle themselves: every type). A node that asks for a GPU but has no GPU
   kernel falls back to a CPU of its task, with a note in the report.
2. **Colocation groups** (union-find): a node that takes a resource handle (a variable's reads,
   assignments, gathers, scatters) joins the group of the handle's producer; a node with a
   ``_class = ["loc:@name"]`` attr (``fl.colocate_with``) joins ``name``'s group; the nodes of
   a loop, and a cond's branches with their Switch and Merge, form one group (generated code
   runs a loop or a cond on one device; control-flow ops have CPU kernels only, so a GPU
   session runs them on a CPU). A group is placed as one.
3. **Constraints.** The requested device specs of a group's members are merged; two members
   that ask for different values of one field are an error naming both, where each was written,
   and the chain of colocations that binds them. The group gets the first device (in a fixed
   order) that matches the merged spec and that every member has kernels for.
4. **Unconstrained state** (a group holding a variable or queue handle nobody placed) goes to
   the default device, so every step finds it in the same place.
5. **Unconstrained groups** with a GPU as the default device (a session on a machine with a
   GPU, ``--target cuda``) go to that GPU wherever they have GPU kernels, as in TensorFlow.
   The others go with their data: in graph order, a group takes the device of
   its first input already placed; groups still unplaced (sources such as constants, and what
   only they feed) then take, in reverse graph order, the device of their first placed
   consumer; whatever is left goes to the default device (the first CPU).

The pass records why each node went where it did (``PlacementReport``), printed with
``--log-device-placement``; ``flowc ir --after place`` shows the assignment.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set

from networkx.utils import UnionFind

from compiler.devices import Device, default_device, device_list, format_spec, local_devices, parse_device_spec
from compiler.errors import FlowcError, GraphError
from compiler.ir.frames import cond_guards, has_control_flow, is_loop_merge, static_frames
from compiler.ir.graph import Graph, Node
from compiler.ir.op_registry import get_op, has_gpu_kernel, has_op
from compiler.passes.manager import Pass, PassContext, register_pass
from runtime.dtypes import DType

# What computes nothing: with a GPU as the default device these still go with their inputs.
_FOLLOWERS = {"_Retval", "_Sink", "NoOp"}

# Ops the emitter implements itself on every device type.
_EVERYWHERE = {"Placeholder", "Const", "NoOp", "_Sink", "_Retval", "_Send", "_Recv", "Identity"}


class PlacementError(GraphError):
    """No device satisfies a node's constraints; the message names the chain of nodes."""


def kernel_device_types(node: Node) -> Set[str]:
    """The device types ``node``'s op has kernels for."""
    if node.op in _EVERYWHERE:
        return {"CPU", "GPU"}
    if not has_op(node.op):
        return set()
    op = get_op(node.op)
    types = set()
    if op.c_kernel is not None or op.c_alias is not None:
        types.add("CPU")
    if has_gpu_kernel(node):
        types.add("GPU")
    return types


@dataclass
class Placement:
    device: str
    reason: str


@dataclass
class PlacementReport:
    devices: List[str]
    placements: Dict[str, Placement] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)     # GPU requests that fell back to a CPU

    def text(self, graph: Optional[Graph] = None) -> str:
        names = [n.name for n in graph] if graph is not None else list(self.placements)
        width = max((len(n) for n in names), default=0)
        lines = [f"placement on {len(self.devices)} device(s): {', '.join(self.devices)}"]
        for name in names:
            p = self.placements.get(name)
            if p is not None:
                lines.append(f"  {name:<{width}}  {p.device}  ({p.reason})")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


def _where(node: Node) -> str:
    return f" (at {node.location})" if node.location else ""


def _devices(ctx: PassContext) -> List[Device]:
    opts = ctx.options
    if opts.devices:
        return sorted(device_list(opts.devices), key=Device.sort_key)
    return local_devices(cpus=max(1, opts.cpu_devices))


class _Groups:
    """Colocation groups, with the reason each member joined (for error messages)."""

    def __init__(self, graph: Graph):
        self.uf = UnionFind()
        self.why: Dict[Node, str] = {}
        for n in graph:
            self.uf[n]
            for i in n.inputs:
                if i.dtype is DType.resource:
                    self._join(n, i.node, f"'{n.name}' uses the resource '{i.node.name}'")
            for entry in n.attrs.get("_class") or ():
                if isinstance(entry, str) and entry.startswith("loc:@"):
                    # The name is a group key: nodes naming it go together, with the named
                    # node when the step has it (a step may have pruned it away).
                    self.uf.union(n, entry)
                    self.why.setdefault(n, f"'{n.name}' is colocated with '{entry[5:]}'")
                    other = graph.get(entry[5:])
                    if other is not None:
                        self._join(n, other, f"'{n.name}' is colocated with '{other.name}'")
        if has_control_flow(graph):
            self._join_control_flow(list(graph))

    def _join_control_flow(self, order: List[Node]) -> None:
        """A loop, and a cond's branches with their Switch and Merge, run on one device (the
        generated code keeps a loop's frames and a cond's dead branches on one device): every
        node of an outermost loop frame joins one group, and every node a cond guards joins
        the Switch or guarded node it reads, as a cond's Merge joins its branches."""
        try:
            run_in, out_in = static_frames(order)
        except FlowcError:
            return                                 # the verifier and codegen say what is wrong
        loops: Dict[str, Node] = {}
        for n in order:
            home = out_in[n] if n.op == "Enter" else run_in[n]
            if home:
                first = loops.setdefault(home[0], n)
                if first is not n:
                    self._join(n, first, f"the nodes of loop '{home[0]}' run on one device")
        guard, out_guard = cond_guards(order)
        for n in order:
            merges = n.op == "Merge" and not is_loop_merge(n)
            if not (guard[n] or merges):
                continue
            for i in n.inputs:
                if i.node.op == "Switch" or out_guard.get(i):
                    self._join(n, i.node, "a cond's branches run on one device with its "
                                          "Switch and Merge")

    def _join(self, a: Node, b: Node, why: str) -> None:
        self.uf.union(a, b)
        self.why.setdefault(a, why)

    def sets(self, graph: Graph) -> List[List[Node]]:
        order = {n: k for k, n in enumerate(graph)}
        groups: Dict[object, List[Node]] = {}
        for n in graph:
            groups.setdefault(self.uf[n], []).append(n)
        return sorted((sorted(g, key=order.__getitem__) for g in groups.values()),
                      key=lambda g: order[g[0]])


def variables_without_gpu_kernels(graph: Graph) -> List[Node]:
    """The ``VarHandleOp`` nodes of ``graph`` whose colocation group (every op on their
    handle, every op colocated with them) has an op without a GPU kernel.

    Placement looks at one step at a time: a step that only initializes such a variable would
    put it on a GPU, where a later step with the op that has no GPU kernel cannot use it. As
    TensorFlow places the whole graph once, sessions (local and distributed) run this on the
    whole graph and keep these variables on a CPU."""
    groups = _Groups(graph)
    found: List[Node] = []
    for group in groups.sets(graph):
        handles = [n for n in group if n.op == "VarHandleOp"]
        if handles and not all("GPU" in kernel_device_types(n) for n in group):
            found.extend(handles)
    return found


def _merged_spec(group: List[Node], groups: _Groups) -> Dict[str, str]:
    fields: Dict[str, str] = {}
    source: Dict[str, Node] = {}
    for n in group:
        if not n.device:
            continue
        for key, value in parse_device_spec(n.device).items():
            if key in fields and fields[key] != value and not _compatible(key, fields[key], value):
                first = source[key]
                chain = "; ".join(dict.fromkeys(groups.why[m] for m in group if m in groups.why))
                raise PlacementError(
                    f"conflicting devices: node '{n.name}' asks for {n.device}{_where(n)}, but "
                    f"node '{first.name}' asks for {first.device}{_where(first)}, and they must "
                    f"be on one device ({chain})")
            if key not in fields or fields[key].endswith("*"):
                fields[key] = value
                source[key] = n
    return fields


def _compatible(key: str, a: str, b: str) -> bool:
    if key != "device":
        return a == "*" or b == "*"
    ta, _, ia = a.partition(":")
    tb, _, ib = b.partition(":")
    return ta == tb and ("*" in (ia, ib))


def _colocation_target(n: Node) -> Optional[str]:
    """The node ``n`` was made ``colocate_with`` (its device is that node's request), if any."""
    for entry in n.attrs.get("_class") or ():
        if isinstance(entry, str) and entry.startswith("loc:@") and entry[5:] != n.name:
            return entry[5:]
    return None


def _makes_state(n: Node) -> bool:
    """A node that creates runtime state: a resource handle not taken from another node."""
    return (any(t.dtype is DType.resource for t in n.output_types)
            and not any(i.dtype is DType.resource for i in n.inputs))


def _gpu_fallback(group: List[Node], spec: Dict[str, str], feasible: List[Device],
                  devices: List[Device]):
    """A group that asks for a GPU but has an op without a GPU kernel: the CPUs of the same
    task (TensorFlow's soft placement, for this one reason), and the note that says so."""
    kind = spec.get("device", "").partition(":")[0]
    if kind != "GPU" or not any(d.matches(spec) for d in devices):
        return [], None
    loose = {k: v for k, v in spec.items() if k != "device"}
    cpus = [d for d in feasible if d.type == "CPU" and d.matches(loose)]
    lacking = [n for n in group if "GPU" not in kernel_device_types(n)]
    if not cpus or not lacking:
        return [], None
    return cpus, f"no GPU kernel for {lacking[0].op}, on a CPU: "


@register_pass("place")
class Place(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        devices = _devices(ctx)
        names = [d.name for d in devices]
        report = PlacementReport(names)
        groups = _Groups(graph)
        assigned: Dict[Node, Device] = {}
        reason: Dict[Node, str] = {}
        pending: List[List[Node]] = []
        for group in groups.sets(graph):
            spec = _merged_spec(group, groups)
            feasible = [d for d in devices if all(d.type in kernel_device_types(n) for n in group)]
            if not feasible:
                missing = next(n for n in group if not kernel_device_types(n) & {d.type for d in devices})
                raise PlacementError(f"node '{missing.name}' ({missing.op}) has no kernel for any "
                                     f"available device ({', '.join(names)}){_where(missing)}")
            if spec:
                matching = [d for d in feasible if d.matches(spec)]
                fallback_note = None
                if not matching:
                    matching, fallback_note = _gpu_fallback(group, spec, feasible, devices)
                if not matching and ctx.options.allow_soft_placement:
                    loose = {k: v for k, v in spec.items() if k != "device"}
                    matching = [d for d in feasible if d.matches(loose)] or feasible
                if not matching:
                    asked = [n for n in group if n.device]
                    who = ", ".join(f"'{n.name}' asks for {n.device}{_where(n)}" for n in asked)
                    kinds = sorted({d.type for d in devices if d.matches(spec)})
                    why = ("no available device matches it" if not kinds else
                           f"the group has ops without a kernel for {'/'.join(kinds)}")
                    raise PlacementError(f"cannot place {format_spec(spec)}: {who}; {why} "
                                         f"(available: {', '.join(names)})")
                requester = next((n for n in group if n.device and not _colocation_target(n)),
                                 None) or next(n for n in group if n.device)
                for n in group:
                    assigned[n] = matching[0]
                    target = _colocation_target(n)
                    reason[n] = (fallback_note or "") + (
                                 f"colocated with '{target}', which requests {n.device}"
                                 if target and n.device else
                                 f"requested {n.device}" if n.device else
                                 f"colocated with '{requester.name}', which requests "
                                 f"{requester.device}")
                if fallback_note:
                    report.notes.append(f"{requester.name} ({requester.op}): {fallback_note}"
                                        f"requested {requester.device}, placed on "
                                        f"{matching[0].short}")
            else:
                pending.append(group)
        fallback = default_device(devices)
        if ctx.options.default_device:           # a distributed session: the target's task
            fallback = next((d for d in devices if d.matches(ctx.options.default_device)),
                            fallback)

        def place_default(group: List[Node], why: str = "default device") -> None:
            feasible = [d for d in devices if all(d.type in kernel_device_types(n) for n in group)]
            dev = fallback if fallback in feasible else feasible[0]
            if dev != fallback and fallback is not None and fallback.type == "GPU":
                lacking = next(n for n in group if "GPU" not in kernel_device_types(n))
                why = f"no GPU kernel for {lacking.op}: on {dev.short} instead of {fallback.short}"
                report.notes.append(f"{lacking.name}: {why}")
            for n in group:
                assigned[n] = dev
                reason[n] = why

        # State (a variable, a queue) nobody placed stays on the default device: following
        # its data would put it where each step's graph happens to lead, and a later step
        # would look for it on another device (or task) than the step that created it.
        for group in pending:
            if any(_makes_state(n) for n in group):
                place_default(group, "default device (state without a device request stays "
                                     "there)")
        pending = [g for g in pending if not any(_makes_state(n) for n in g)]
        # Sources that go with their consumers: constants; with a GPU default also feeds
        # (a fed filename read by a CPU op stays on the CPU instead of visiting the GPU).
        sources = {"Const"}
        if fallback is not None and fallback.type == "GPU":
            sources.add("Placeholder")
            pending = self._prefer_gpu(pending, fallback, sources, assigned, reason)
        while pending:
            before = len(pending)
            pending = self._follow_inputs(pending, assigned, reason)
            pending = self._follow_consumers(graph, pending, assigned, reason)
            if len(pending) == before:
                break

        # In graph order, a group follows an input placed meanwhile, else takes the default;
        # constants then go with their consumers (a shape-like constant stays a compile-time
        # constant beside the op that reads it).
        consts = [g for g in pending if all(n.op in sources for n in g)]
        const_ids = {id(g) for g in consts}
        for group in pending:
            if id(group) not in const_ids and self._follow_inputs([group], assigned, reason):
                place_default(group)
        for group in self._follow_consumers(graph, consts, assigned, reason):
            place_default(group)
        changed = False
        for n in graph:
            name = assigned[n].name
            if n.assigned_device != name:
                n.assigned_device = name
                changed = True
            report.placements[n.name] = Placement(name, reason[n])
        ctx.placement_report = report
        if ctx.options.log_device_placement:
            print(report.text(graph), file=sys.stderr)
        return changed

    def _prefer_gpu(self, pending, gpu: Device, sources, assigned, reason):
        """With a GPU as the default device, an unconstrained group that has GPU kernels goes
        there whatever its inputs' devices (TensorFlow's rule: a GPU kernel wins); constants
        and feeds still go with their consumers, and a step's fetches, its sink and NoOps
        with their inputs (no GPU module just to pass a CPU's value on). Returns the groups
        left."""
        left = []
        for group in pending:
            if (all(n.op in sources for n in group) or not self._feasible(group, gpu)
                    or all(n.op in _FOLLOWERS for n in group)):
                left.append(group)
                continue
            for n in group:
                assigned[n] = gpu
                reason[n] = "default device (it has a GPU kernel)"
        return left

    @staticmethod
    def _feasible(group, dev: Device) -> bool:
        return all(dev.type in kernel_device_types(n) for n in group)

    def _follow(self, groups, neighbours, what: str, assigned, reason):
        """Place each group on the device of its first placed neighbour; returns the rest."""
        left = []
        for group in groups:
            found = None
            for n in group:
                found = next(((assigned[m], m) for m in neighbours(n)
                              if m in assigned and self._feasible(group, assigned[m])), None)
                if found is not None:
                    break
            if found is None:
                left.append(group)
                continue
            for n in group:
                assigned[n] = found[0]
                reason[n] = f"with its {what} '{found[1].name}'"
        return left

    def _follow_inputs(self, pending, assigned, reason):
        # data inputs first, then control inputs (a _Sink goes with what it waits for)
        return self._follow(pending, lambda n: [i.node for i in n.inputs] + list(n.control_inputs),
                            "input", assigned, reason)

    def _follow_consumers(self, graph, pending, assigned, reason):
        order = {n: k for k, n in enumerate(graph)}
        left = self._follow(list(reversed(pending)),
                            lambda n: sorted(n.users, key=order.__getitem__), "consumer",
                            assigned, reason)
        return list(reversed(left))
