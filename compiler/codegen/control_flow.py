"""Structured C control flow recovered from the dataflow primitives (DESIGN §3 Codegen).

A conditional is a set of ``Switch`` nodes on one predicate and the ``Merge`` nodes that join
its branches; a loop is a frame: ``Enter`` .. ``Merge`` .. ``LoopCond`` .. ``Switch`` ..
``NextIteration``/``Exit``. The emitter gives every node a *guard* (the conjunction of
branch conditions under which its value is live) and every node a loop frame, then emits
each frame as a C ``for (;;)`` loop and each guarded node inside ``if`` blocks:

* cond ``Switch``: records its predicate in a flag ``cf_pK`` and forwards its data (both
  outputs alias it; only users on the taken side run);
* cond ``Merge``: copies the input whose guard holds;
* loop: ``Enter`` aliases, each loop ``Merge`` owns a copy of its variable, the loop tests
  ``LoopCond`` after the condition's nodes (``Exit`` copies the variables out and breaks),
  runs the body, and ``NextIteration`` replaces the variable. Buffers allocated inside an
  iteration are freed at its end.

Patterns outside what ``fl.cond``/``fl.while_loop`` build raise a ``CodegenError`` naming the
node.
"""
from __future__ import annotations

from typing import Dict, List, Set, Tuple

from compiler.errors import CodegenError, FlowcError
from compiler.ir.frames import (Guard, cond_guards, is_control_flow,
                                 is_loop_merge, is_loop_switch, static_frames, union_guards)
from compiler.ir.graph import Node, Output
from compiler.codegen.kernel_context import c_string
from compiler.ir.op_registry import get_op
from runtime.dtypes import DType


_COPY_HELPER = """\
/* Control flow: copy a tensor into a buffer of its own (loop variables, cond results). */
static int flowc_cf_copy(flowc_tensor *dst, const flowc_tensor *src, size_t itemsize) {
    int64_t n = 1;
    for (int32_t d = 0; d < src->rank; d++) n *= src->dims[d];
    void *data = flowc_alloc((size_t)(n > 0 ? n : 1) * itemsize);
    if (!data) return -1;
    if (n > 0) memcpy(data, src->data, (size_t)n * itemsize);
    *dst = *src;
    dst->data = data;
    return 0;
}"""


class StructuredEmitter:
    """Emits the body of a step graph with control flow into ``em.body`` (one part)."""

    def __init__(self, em, order: List[Node]):
        self.em = em
        self.order = order
        self.position = {n: i for i, n in enumerate(order)}
        try:
            self.run_in, self.out_in = static_frames(order)
        except FlowcError as e:
            raise CodegenError(str(e)) from None          # the message names the node
        self.home: Dict[Node, Tuple[str, ...]] = {
            n: (self.out_in[n] if n.op == "Enter" else self.run_in[n]) for n in order}
        self.guard: Dict[Node, Guard] = {}
        self.out_guard: Dict[Output, Guard] = {}
        self.flags: Dict[Output, str] = {}
        self._compute_guards()
        self._check_single_device()
        self.saved = {frame: (count, text) for frame, count, text in
                      saved_bytes_per_iteration(order)}

    def _check_single_device(self) -> None:
        """A loop or cond whose nodes span devices needs dead values and frames on the wire:
        not built yet, so say which."""
        for n in self.order:
            if not get_op(n.op, n).is_communication:
                continue
            where = (f"loop frame '{'/'.join(self.home[n])}'" if self.home[n] else
                     "a branch of a cond" if self.guard[n] else None)
            if where is None:
                continue
            raise CodegenError(
                f"control flow across devices is not supported yet: {where} has nodes on "
                f"{n.attrs.get('send_device', '?')} and {n.attrs.get('recv_device', '?')} "
                f"(edge {n.op} '{n.name}'); place the whole loop or cond on one device", n)

    # --- analysis ---------------------------------------------------------------------
    def _compute_guards(self) -> None:
        self.guard, self.out_guard = cond_guards(self.order)
        for g in list(self.out_guard.values()):
            for pred, _ in g:
                if pred not in self.flags:
                    self.flags[pred] = f"cf_p{len(self.flags)}"

    def _cond(self, guard: Guard) -> str:
        return " && ".join(("" if k else "!") + self.flags[p] for p, k in guard)

    # --- structure --------------------------------------------------------------------
    def _members(self, frame: Tuple[str, ...]) -> List[Node]:
        return [n for n in self.order if self.home[n][:len(frame)] == frame]

    def _item_of(self, n: Node, frame: Tuple[str, ...]):
        h = self.home[n]
        return n if h == frame else ("frame", h[:len(frame) + 1])

    def _items(self, frame: Tuple[str, ...], members: List[Node]) -> list:
        """The level's nodes and child frames, in a dependency order close to graph order."""
        member_set = set(members)
        items, first = [], {}
        for n in members:
            it = self._item_of(n, frame)
            if it not in first:
                first[it] = self.position[n]
                items.append(it)
        deps: Dict[object, Set[object]] = {it: set() for it in items}
        for n in members:
            it = self._item_of(n, frame)
            srcs = [i.node for i in n.inputs if not (n.op == "Merge" and i.node.op == "NextIteration")]
            for p in srcs + list(n.control_inputs):
                if p in member_set:
                    pit = self._item_of(p, frame)
                    if pit != it:
                        deps[it].add(pit)
        import heapq
        users: Dict[object, List[object]] = {it: [] for it in items}
        for it, ds in deps.items():
            for d in ds:
                users[d].append(it)
        count = {it: len(ds) for it, ds in deps.items()}
        key = {it: k for k, it in enumerate(sorted(items, key=lambda i: first[i]))}
        ready = [(key[it], it) for it in items if count[it] == 0]
        heapq.heapify(ready)
        out = []
        while ready:
            _, it = heapq.heappop(ready)
            out.append(it)
            for u in users[it]:
                count[u] -= 1
                if count[u] == 0:
                    heapq.heappush(ready, (key[u], u))
        if len(out) != len(items):
            stuck = next(it for it in items if count[it] > 0)
            node = stuck if isinstance(stuck, Node) else None
            raise CodegenError(f"cannot order the control flow of frame "
                               f"{'/'.join(frame) or 'top level'} (a cycle outside NextIteration)", node)
        return out

    # --- emission ---------------------------------------------------------------------
    def emit(self) -> None:
        em = self.em
        em.module.add_global(_COPY_HELPER)
        for r in em.retvals:
            if self.home[r]:
                raise CodegenError("a fetch inside a loop frame", r)
        for flag in self.flags.values():
            em.body.append(f"int {flag} = 0; (void){flag};")
        items = self._items((), self._members(()))
        index_of = {}
        for k, it in enumerate(items):
            for n in (self._members(it[1]) if isinstance(it, tuple) else [it]):
                index_of[n] = k
        last: Dict[Output, int] = {}
        for n in self.order:
            for i in n.inputs:
                root = em.root[i]
                last[root] = max(last.get(root, -1), index_of[n])
        frees: Dict[int, List[Output]] = {}
        for n in self.order:
            if self.out_in[n] != ():
                continue
            for out in n.outputs:
                if em.root[out] == out and out not in em.transferred:
                    frees.setdefault(last.get(out, index_of[n]), []).append(out)
        for k, it in enumerate(items):
            self._emit_item(it, ())
            for root in frees.get(k, []):
                self._free(root)
        self._dead_fetch_checks()

    def fix_roots(self) -> None:
        """Control-flow nodes that forward a value share its storage (Merge/Exit copy)."""
        em = self.em
        for n in self.order:
            if n.op in ("Switch", "Enter", "LoopCond", "NextIteration"):
                for out in n.outputs:
                    em.root[out] = em.root[n.inputs[0]]
        # views of those (an Identity of a Switch) share the same storage: follow the chains
        for out in list(em.root):
            root = em.root[out]
            while em.root.get(root, root) != root:
                root = em.root[root]
            em.root[out] = root

    def outside_loops(self, n: Node) -> bool:
        """Whether ``n`` runs outside every loop frame (its buffers may be pool blocks)."""
        return self.run_in[n] == ()

    def _free(self, root: Output) -> None:
        em = self.em
        if root in em.owned:
            ref = em.refs[root]
            em.body.append(f"{em._release(root)}({ref.var}.data); {ref.var}.data = NULL;")

    def _emit_item(self, it, frame) -> None:
        if isinstance(it, tuple):
            self._emit_loop(it[1])
        else:
            self._emit_guarded(it)

    def _emit_guarded(self, n: Node) -> None:
        g = self.guard[n]
        if g:
            self.em.body.append(f"if ({self._cond(g)}) {{")
        self._emit_node(n)
        if g:
            self.em.body.append("}")

    def _alias(self, out: Output, src: Output) -> None:
        em = self.em
        a, b = em._ref(out), em._ref(src)
        em.body.append(f"{a.var} = {b.var};")

    def _copy(self, n: Node, dst: Output, src: Output) -> List[str]:
        em = self.em
        a, b = em._ref(dst), em._ref(src)
        loc = str(n.location) if n.location else ""
        if dst not in em.owned:
            em.owned.append(dst)
        return [f"if (flowc_cf_copy(&{a.var}, &{b.var}, sizeof({a.ctype}))) {{ "
                f"flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, {c_string(n.name)}, {c_string(loc)}, "
                f"\"out of memory\"); goto fail; }}"]

    def _emit_node(self, n: Node) -> None:
        em = self.em
        op = n.op
        if not is_control_flow(n):
            em._emit_node(n)
            return
        em.body.append(f"/* {n.op} %{n.name} */")
        if op == "Switch":
            if not is_loop_switch(n):
                pred = em._ref(n.inputs[1])
                em.body.append(f"{self.flags[n.inputs[1]]} = ({pred.data}[0] != 0);")
            for out in n.outputs:
                self._alias(out, n.inputs[0])
            return
        if op in ("Enter", "LoopCond", "NextIteration"):
            self._alias(n.output(0), n.inputs[0])
            return
        if op == "Merge":
            g = self.guard[n]
            first = True
            for k, i in enumerate(n.inputs):
                extra = tuple(l for l in self.out_guard[i] if l not in g)
                if not extra and len(n.inputs) > 1:
                    raise CodegenError("cannot tell which input of this Merge is live: it is not "
                                       "the join of a cond built like fl.cond", n)
                lines = [f"free({em._ref(n.output(0)).var}.data);"] + self._copy(n, n.output(0), i)
                if n.output_users(1):
                    vi = em._ref(n.output(1))
                    if n.output(1) not in em.owned:
                        em.owned.append(n.output(1))
                    lines.append(f"free({vi.var}.data); {vi.var}.rank = 0; "
                                 f"{vi.var}.dtype = {vi.dtype.code}; "
                                 f"{vi.var}.data = flowc_alloc(sizeof(int32_t));")
                    lines.append(f"if (!{vi.var}.data) {{ flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, "
                                 f"{c_string(n.name)}, \"\", \"out of memory\"); goto fail; }}")
                    lines.append(f"((int32_t *){vi.var}.data)[0] = {k};")
                em.body.append(("if" if first else "else if") + f" ({self._cond(extra)}) {{")
                em.body.extend("    " + l for l in lines)
                em.body.append("}")
                first = False
            return
        raise CodegenError(f"{op} outside the loop structure fl.while_loop builds", n)

    def _emit_loop(self, frame: Tuple[str, ...]) -> None:
        em = self.em
        members = self._members(frame)
        enters = [n for n in members if n.op == "Enter" and self.home[n] == frame]
        exits = [n for n in members if n.op == "Exit" and self.run_in[n] == frame]
        merges = [n for n in members if self.home[n] == frame and is_loop_merge(n)]
        switches = [n for n in members if self.home[n] == frame and is_loop_switch(n)]
        conds = {s.inputs[1].node for s in switches}
        name = "/".join(frame)
        if len(conds) != 1 or not merges:
            raise CodegenError(f"loop frame '{name}' does not have the structure fl.while_loop "
                               "builds (one LoopCond, Merge nodes with a NextIteration input)",
                               enters[0] if enters else None)
        lc = next(iter(conds))
        for m in merges:
            if m.output_users(1):
                raise CodegenError("the value_index of a loop Merge cannot be used", m)
            if len(m.inputs) != 2:
                raise CodegenError("a loop Merge must have two inputs (Enter, NextIteration)", m)
        guard = union_guards(*[self.guard[e] for e in enters])
        saved = self.saved.get(name)
        em.body.append(f"/* loop frame {name}" + (f": saves {saved[0]} values on stacks, {saved[1]} "
                                                  "bytes per iteration" if saved else "") + " */")
        em.body.append(f"if ({self._cond(guard)}) {{" if guard else "{")
        for e in enters:
            self._emit_node(e)
        for m in merges:
            init = next(i for i in m.inputs if i.node.op != "NextIteration")
            em.body.extend(self._copy(m, m.output(0), init))
        storage = self._preallocate(members) if len(frame) == 1 else []
        em.body.append("while (1) {")
        inner = [n for n in members if n not in enters and n not in exits and n not in merges]
        items = self._items(frame, inner)
        # the condition part: items that do not depend on the loop's Switches
        after: Set[object] = set(switches)
        deps_after: List[object] = []
        for it in items:
            if it in switches:
                continue
            nodes = self._members(it[1]) if isinstance(it, tuple) else [it]
            if any(p.node in after or self._item_of(p.node, frame) in after
                   for n in nodes for p in n.inputs) or any(
                    c in after for n in nodes for c in n.control_inputs):
                after.add(it)
        pre = [it for it in items if it not in after]
        post = [it for it in items if it in after and it not in switches]
        level_roots: List[Output] = []
        for it in pre:
            self._emit_item(it, frame)
        for s in switches:
            self._emit_node(s)
        lcv = em._ref(lc.output(0))
        em.body.append(f"if (!({lcv.data}[0])) {{")
        for x in exits:
            em.body.extend("    " + l for l in self._copy(x, x.output(0), x.inputs[0]))
        self._free_level(frame, members, exits)
        em.body.append("    break;")
        em.body.append("}")
        for it in post:
            self._emit_item(it, frame)
        self._update_variables(frame, merges)
        self._free_level(frame, members, exits)
        em.body.append("}")
        for m in merges:
            v = em._ref(m.output(0)).var
            em.body.append(f"free({v}.data); {v}.data = NULL;")
        for out in storage:
            v = em.refs[out].var
            em.body.append(f"free({v}.data); {v}.data = NULL;")
        em.body.append("}")

    def _update_variables(self, frame: Tuple[str, ...], merges: List[Node]) -> None:
        """The end of an iteration: each loop variable takes its next value. A next value that
        is another variable's current one (variables that swap) is copied first, before any
        variable changes; then each variable takes over the body's buffer (swapping it with
        its own when the loop allocated it at its entry), or copies into its own buffer
        (same static size), or copies into a new one."""
        em = self.em
        merge_roots = {em.root[m.output(0)] for m in merges}
        nexts = {m: next(i for i in m.inputs if i.node.op == "NextIteration") for m in merges}
        reads_variable = [m for m in merges if em.root[nexts[m]] in merge_roots
                          and em.root[nexts[m]] != em.root[m.output(0)]]
        for k, m in enumerate(reads_variable):
            em.body.append(f"flowc_tensor cf_next{k};")
            em.body.extend(self._copy_into(m, f"cf_next{k}", em._ref(nexts[m]).var,
                                           em._ref(m.output(0)).ctype))
        stolen: Set[Output] = set()
        for m in merges:
            if m in reads_variable:
                continue
            nxt = nexts[m]
            v = em._ref(m.output(0)).var
            root = em.root[nxt]
            if root == em.root[m.output(0)]:
                em.body.append(f"/* {m.name}: the variable is unchanged */")
                continue
            same_size = _static_nbytes(m.output(0)) is not None and \
                _static_nbytes(m.output(0)) == _static_nbytes(nxt)
            if same_size:
                if (root in em.preallocated and root not in stolen
                        and self.out_in[root.node] == frame):
                    # the body's buffer becomes the variable's, and the variable's old buffer
                    # the body's for the next iteration: no copy, no allocation
                    stolen.add(root)
                    em.body.append(f"{{ void *cf_old = {v}.data; {v} = {em._ref(nxt).var}; "
                                   f"{em.refs[root].var}.data = cf_old; }}")
                else:
                    em.body.append(f"memcpy({v}.data, {em._ref(nxt).var}.data, "
                                   f"{_static_nbytes(nxt)});")
                continue
            em.body.append("{")
            em.body.append(f"    flowc_tensor cf_old = {v};")
            if (root in em.owned and root not in stolen and self.out_in[root.node] == frame
                    and root not in em.preallocated
                    and not is_loop_merge(root.node) and root.node.op != "Exit"):
                # the next value's buffer was allocated by this iteration: take it over
                stolen.add(root)
                em.body.append(f"    {v} = {em._ref(nxt).var};")
                em.body.append(f"    {em.refs[root].var}.data = NULL;")
            else:
                em.body.extend("    " + l for l in self._copy(m, m.output(0), nxt))
            em.body.append("    free(cf_old.data);")
            em.body.append("}")
        for k, m in enumerate(reads_variable):
            v = em._ref(m.output(0)).var
            em.body.append(f"free({v}.data); {v} = cf_next{k};")

    def _copy_into(self, n: Node, dst: str, src: str, ctype: str) -> List[str]:
        loc = str(n.location) if n.location else ""
        return [f"if (flowc_cf_copy(&{dst}, &{src}, sizeof({ctype}))) {{ "
                f"flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, {c_string(n.name)}, {c_string(loc)}, "
                f"\"out of memory\"); goto fail; }}"]

    def _preallocate(self, members: List[Node]) -> List[Output]:
        """Allocate, at the entry of an outermost loop, the buffer of every value of static
        size its iterations (nested loops' included) compute: the iterations write into these
        instead of allocating and freeing their own. Returns the outputs (freed after the
        loop; on an error, with the step's other buffers)."""
        em = self.em
        storage = []
        for n in members:
            op = get_op(n.op, n)
            if (is_control_flow(n) or n.op in ("Const", "Placeholder", "_Retval")
                    or (op.c_alias is not None and n not in em.copies_input)
                    or (op.extra.get("c_owns_outputs")
                        and not op.extra.get("c_fills_static_outputs"))):
                continue
            for out in n.outputs:
                nbytes = _static_nbytes(out)
                if nbytes is None or em.root[out] != out:
                    continue
                storage.append(out)
        if storage:
            em.body.append(f"/* {len(storage)} buffers of static size for the loop's iterations, "
                           f"{sum(_static_nbytes(o) for o in storage)} bytes: allocated once */")
        for out in storage:
            ref = em._ref(out)
            loc = str(out.node.location) if out.node.location else ""
            em.body.append(f"{ref.var}.data = flowc_alloc({max(_static_nbytes(out), 1)});")
            em.body.append(f"if (!{ref.var}.data) {{ flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, "
                           f"{c_string(out.node.name)}, {c_string(loc)}, \"out of memory\"); "
                           "goto fail; }")
            em.preallocated.add(out)
            if out not in em.owned:
                em.owned.append(out)
        return storage

    def _free_level(self, frame, members, exits) -> None:
        """Free the buffers this iteration allocated at this frame's level."""
        em = self.em
        for n in members:
            if self.out_in[n] != frame or is_loop_merge(n):
                continue
            for out in n.outputs:
                if em.root.get(out) == out and out in em.owned and out not in em.preallocated:
                    ref = em.refs[out]
                    em.body.append(f"{em._release(out)}({ref.var}.data); {ref.var}.data = NULL;")

    def _dead_fetch_checks(self) -> None:
        em = self.em
        for r in em.retvals:
            src = r.inputs[0]
            g = self.out_guard[src]
            if g:
                loc = str(r.location) if r.location else ""
                msg = (f"fetched tensor '{src.name}' is dead: it is on a branch of a cond "
                       "that was not taken")
                em.body.append(f"if (!({self._cond(g)})) {{ flowc_fail(st, FLOWC_INVALID_ARGUMENT, "
                               f"{c_string(src.node.name)}, {c_string(loc)}, {c_string(msg)}); "
                               "goto fail; }")


def _static_nbytes(out: Output):
    """Bytes of ``out`` when its shape is static, else None (and for resource handles)."""
    t = out.type
    if t.dtype is DType.resource or t.shape is None or any(d is None for d in t.shape):
        return None
    size = t.dtype.itemsize
    for d in t.shape:
        size *= d
    return size


def saved_bytes_per_iteration(nodes) -> List[Tuple[str, int, str]]:
    """Per loop frame that pushes values on stacks (a forward loop being differentiated):
    (frame name, number of pushes, bytes pushed per iteration as a string: a number when the
    shapes are static, else a product with ``?`` for the dims known only at run time)."""
    nodes = list(nodes)
    run_in, _ = static_frames(nodes)
    per: dict = {}
    for n in nodes:
        if n.op != "StackPushV2":
            continue
        t = n.inputs[1].type
        per.setdefault("/".join(run_in[n]), []).append(t)
    out = []
    for frame, types in per.items():
        by_unknowns: Dict[int, int] = {}      # number of run-time dims -> bytes per unit
        for t in types:
            size = t.dtype.itemsize
            dims = list(t.shape) if t.shape is not None else [None]
            for d in dims:
                size *= d if d is not None else 1
            k = sum(d is None for d in dims)
            by_unknowns[k] = by_unknowns.get(k, 0) + size
        # "?" stands for a dim known only at run time (the batch size)
        terms = [str(b) if k == 0 else f"{b}*?" if k == 1 else f"{b}*?^{k}"
                 for k, b in sorted(by_unknowns.items())]
        out.append((frame, len(types), " + ".join(terms)))
    return out
