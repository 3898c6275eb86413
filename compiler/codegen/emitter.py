"""Emit one C translation unit for a step graph: one entry function that runs every kernel in
a static order, with shapes known at compile time baked in and no per-op dispatch.

The step graph's feeds are ``Placeholder`` nodes (in ``feeds`` order) and its fetches are
``_Retval`` nodes. With a memory plan (``compiler/passes/memory_plan.py``, recorded on the
nodes by the plan-memory pass), every buffer of static size lives at
a planned offset of the module's arena, which is kept across calls in a pool; buffers of dynamic
size are allocated per output and freed after their last use. Fetched buffers are handed to the
caller (copied only if the caller could not own them).
"""
from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from compiler.codegen.control_flow import StructuredEmitter
from compiler.codegen.emitter_base import EmitterBase, ident
from compiler.ir.frames import has_control_flow
from compiler.codegen.instrument import Instrumentation, Instrumenter, Origins
from compiler.codegen.kernel_context import KernelContext, ModuleState, TensorRef, c_string
from compiler.codegen.kernel_memo import KernelMemo
from compiler.codegen.module_layout import Kernel, ModuleLayout, Part, SharedVariable
from compiler.codegen.target import C, CTarget
from compiler.errors import CodegenError
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.op_registry import get_op
from compiler.passes.memory_plan import (StepMemoryPlan, in_place_copies, plan_fetches,
                                         plan_step_memory, recorded_plan)
from runtime.dtypes import DType

from runtime.module import ABI_VERSION

# The entry runs the nodes through functions of this many nodes each: gcc's optimizer is
# superlinear in function size, so this keeps compile time linear in the graph.
NODES_PER_PART = 128

# Constants of at least this many bytes are raw files (``.bin`` blobs), not C text of their
# numbers, which is slow to write and slower to parse (a MobileNetV2's mid-sized filters as C
# initializers were half its glue's compile time). A module either assembles them into its
# read-only data with ``.incbin`` (``EMBEDDED``: self-contained, as the C library needs) or
# reads them through a table the runtime fills at load with the artifact's mapped, hashed
# blobs (``LOADED``: each constant stored once in an artifact, not in both blob and module).
BLOB_MIN_BYTES = 4 * 1024
EMBEDDED = "embedded"
LOADED = "loaded"

# Without a memory plan, static buffers up to this size live in one per-step arena instead of
# the allocator (each in its own slot).
ARENA_MAX_BUFFER = 256
# Elementwise ops on at most this many elements (static shapes) are emitted in place, not as
# calls of outlined kernels: their code is shorter than a call.
INLINE_MAX_ELEMENTS = 16

_SIMPLE_DIM = re.compile(r"^t_\w+\.dims\[\d+\]$")
_TENSOR_NAME = re.compile(r"\b(t_\w+)\b")

# Ops the emitter handles itself.
_NO_CODE = {"NoOp", "_Sink"}


@dataclass
class EmittedModule:
    source: str
    features: set = field(default_factory=set)
    variables: list = field(default_factory=list)     # (name, dtype, shape) in rt->vars order
    streams: list = field(default_factory=list)       # random-op stream names, rt->streams order
    queues: list = field(default_factory=list)        # (name, components, capacity), rt->queues
    instrumentation: dict = field(default_factory=dict)  # manifest record (codegen/instrument.py)
    memory: Optional[StepMemoryPlan] = None           # the arena plan (None: no plan)
    # Big constants as raw files (file name -> bytes): embedded, the source includes them with
    # ``.incbin`` and whoever compiles it puts them beside it (and passes -Wa,-I<that folder>);
    # loaded, the artifact stores them and the runtime binds them (``loaded_constants``).
    blobs: Dict[str, bytes] = field(default_factory=dict)
    # Which blob holds which Const's ``value`` (node name -> (file, the array)), so the
    # artifact's IR can name the file instead of printing the bytes again.
    blob_of: Dict[str, tuple] = field(default_factory=dict)
    blob_digests: Dict[str, str] = field(default_factory=dict)   # blob file -> its SHA-256
    # With ``constants=LOADED``: the blobs the module reads through ``flowc_consts``, in table
    # order, as (file, bytes); the runtime binds them (``flowc_bind_constants``) at load.
    # Empty: the module holds its constants itself (``.incbin``) and binds nothing.
    loaded_constants: List[Tuple[str, int]] = field(default_factory=list)
    # The module's pieces, to build it as several translation units in parallel (None: one).
    layout: Optional[ModuleLayout] = None


def _kernel_replaces_buffer(code: str, var: str) -> bool:
    """Whether a kernel's C code frees, reallocates or reassigns tensor ``var``'s buffer itself
    (then the buffer must come from ``flowc_alloc``, not the pool)."""
    v = re.escape(var)
    return re.search(rf"\b{v}\s*=[^=]|\b{v}\.data\s*=[^=]|free\(\s*{v}\.data|"
                     rf"realloc\(\s*{v}\.data|memset\(\s*&{v}\b", code) is not None


def emit_c(graph: Graph, feeds: Sequence[Node], retvals: Sequence[Node],
           target: CTarget = C, instrumentation: Instrumentation = Instrumentation(),
           origins: Origins = None, plan_memory: bool = True,
           constants: str = EMBEDDED) -> EmittedModule:
    """``instrumentation``: timers and numerics checks to add (none by default); ``origins``
    names the nodes Fused kernels replaced, for the profile's kernel table. ``plan_memory``:
    place static buffers in a planned, pooled arena with reuse (modules with control flow keep
    allocating at run time); off, every buffer gets its own memory. ``constants``: where the
    big constants' bytes live, ``EMBEDDED`` in the module (``.incbin`` of their blobs) or
    ``LOADED`` from the artifact's blobs, bound by the runtime before the first call (an
    artifact then stores each once)."""
    if constants not in (EMBEDDED, LOADED):
        raise ValueError(f"constants must be {EMBEDDED!r} or {LOADED!r}, not {constants!r}")
    return _Emitter(graph, list(feeds), list(retvals), target, instrumentation, origins,
                    plan_memory, constants).emit()


class _Emitter(EmitterBase):
    def __init__(self, graph: Graph, feeds: List[Node], retvals: List[Node], target: CTarget,
                 instrumentation: Instrumentation = Instrumentation(), origins: Origins = None,
                 plan_memory: bool = True, constants: str = EMBEDDED):
        super().__init__(graph, feeds, retvals, target)
        self.plan_memory = plan_memory
        self.constants_mode = constants
        self.loaded_constants: List[Tuple[str, int]] = []   # (blob file, bytes): flowc_consts
        self.memory: Optional[StepMemoryPlan] = None     # the arena plan, when there is one
        self.in_place: set = set()                        # nodes writing over a dying input
        # Nodes of ops that add into their input's buffer (``c_in_place``) whose input is not
        # theirs alone to write: they add into a copy (``in_place_copies``).
        self.copies_input: set = set()
        # Their kernels read and write one buffer through two pointers: no ``restrict``.
        self.aliasing_target = copy.copy(target)
        self.aliasing_target.restrict = ""
        self.module = ModuleState()
        self.owned: List[Output] = []              # roots allocated by this function
        self.tail: List[str] = []                  # handing fetches to the caller
        # (part, text): constants and slot tables live in the unit of the part that reads them
        self.constants: List[Tuple[int, str]] = []
        self.kernels: List[Kernel] = []
        self.transferred: set = set()              # buffers handed to the caller
        # static buffers of loop bodies, allocated once at the loop's entry (control_flow.py)
        self.preallocated: set = set()
        self.arena_size = 0                        # bytes of small per-step buffers
        self.kernel_names: Dict[str, str] = {}      # canonical kernel code -> C function
        self.blobs: Dict[str, bytes] = {}           # big constants' files (see _emit_blob)
        self.blob_of: Dict[str, tuple] = {}         # node name -> (its blob file, the array)
        self.blob_digests: Dict[str, str] = {}      # blob file -> SHA-256 of its bytes
        self.slot_tables: List[Tuple[int, str]] = []
        # Buffers from the process's buffer pool (flowc_pool_alloc; released with
        # flowc_pool_release): fetched results and dynamic-size buffers of modules without
        # control flow, and in modules with control flow those of nodes outside every loop,
        # unless their kernel replaces or frees the buffer itself.
        self.use_pool = False
        self.structured = None
        self.pooled: set = set()
        self.instrument = (Instrumenter(instrumentation, self.module, origins)
                           if instrumentation else None)
        # Nodes whose code is emitted in place (``_tiny_elementwise``), and the values only
        # such code reads: they live at a planned arena offset and get no tensor slot.
        self.inline_nodes: Optional[set] = None
        self.slotless: Dict[Output, int] = {}
        self.memo = KernelMemo()                    # kernels rendered once per module

    # --- emission ----------------------------------------------------------------------
    def emit(self) -> EmittedModule:
        order = [n for n in self.graph]
        position = {n: i for i, n in enumerate(order)}
        self._check_fetchable()
        # storage roots
        self._find_roots(order)
        self.copies_input = in_place_copies(order, self.root)
        if self.copies_input:
            self._find_roots(order, self.copies_input)
        structured = StructuredEmitter(self, order) if has_control_flow(order) else None
        if structured is not None:
            structured.fix_roots()
        self.use_pool = structured is None
        self.structured = structured
        last_use = self._last_uses(order, position)
        # which roots are handed to the caller
        self.fetch_plan, transferred = plan_fetches(
            sorted(self.retvals, key=lambda r: r.attrs["index"]), self.root, self.copies_input)
        self.transferred.update(transferred)
        if self.plan_memory and structured is None:
            # the plan the plan-memory pass recorded on the nodes; planned here only for a
            # graph it did not run on (or that has nothing to plan)
            self.memory = recorded_plan(order, self.root)
            if self.memory is None:
                self.memory = plan_step_memory(order, self.root, transferred)
            self.arena_size = self.memory.arena_size
            self.in_place = {b.node for b in self.memory.buffers if b.in_place_of is not None}
        self.inline_nodes = {n for n in order if self._tiny_elementwise(n)}
        if self.memory is not None and self.instrument is None:
            self.slotless = self._slotless_values(order)
        frees_after: Dict[int, List[Output]] = {}
        for n in order:
            for out in n.outputs:
                root = self.root[out]
                if root == out and root not in transferred:
                    pos = last_use.get(root, position[n])
                    frees_after.setdefault(pos, []).append(root)

        if structured is not None:
            # Loops and conditionals are C blocks of one function (flags and loop state are
            # its locals): no splitting into parts.
            structured.emit()
            order = []
        for i, n in enumerate(order):
            if i and i % NODES_PER_PART == 0:
                self.part_starts.append(len(self.body))
            self._emit_node(n)
            for root in frees_after.get(position[n], []):
                if root in self.owned:
                    ref = self.refs[root]
                    self.body.append(f"{self._release(root)}({ref.var}.data); {ref.var}.data = NULL;")
        self._emit_fetches()
        instrumented = self.instrument.finish() if self.instrument is not None else {}
        layout = self._assemble()
        return EmittedModule(layout.joined(), set(self.module.features),
                             list(self.module.variables), list(self.module.streams),
                             list(self.module.queues), instrumented, self.memory,
                             dict(self.blobs), dict(self.blob_of), dict(self.blob_digests),
                             list(self.loaded_constants), layout)

    def _slotless_values(self, order: List[Node]) -> Dict[Output, int]:
        """Values written and read only by code emitted in place, at a planned arena offset,
        and not fetched: their code addresses the arena directly (``flowc_arena + offset``)
        and they need no tensor slot, so nothing stores their data pointer, rank or dims.
        (A step of 10,000 scalar ops spent most of its compile time on those stores.)"""
        found: Dict[Output, int] = {}
        for n in order:
            if n not in self.inline_nodes or n in self.copies_input:
                continue
            if not all(u in self.inline_nodes for u in n.users):
                continue
            for out in n.outputs:
                offset = self.memory.offsets.get(out)
                if offset is not None and self.root[out] == out and out not in self.transferred:
                    found[out] = offset
        return found

    def _ref(self, out: Output) -> TensorRef:
        if out not in self.refs and out in self.slotless:
            var = self._var(out)
            self.refs[out] = TensorRef(var, out.type, self.target, out.node,
                                       address=f"flowc_arena + {self.slotless[out]}")
            self.ref_of[var] = out
            return self.refs[out]
        return super()._ref(out)

    def _release(self, root: Output) -> str:
        """The C function that gives an owned buffer back: the op's own (``c_release``: a
        stack handle frees its elements too; a tuple: one per output), the pool's, or free."""
        own = get_op(root.node.op).extra.get("c_release")
        if isinstance(own, tuple):
            own = own[root.index]
        if own is not None:
            return own
        return "flowc_pool_release" if root in self.pooled else "free"

    def _emit_fetches(self) -> None:
        """The tail: hand every fetched buffer to the caller as a pool block, which the caller
        releases with the module's ``flowc_free``. A fetch the caller cannot own (a feed, a
        constant, a view, a second fetch of one buffer) is copied into a new block; so is one
        whose buffer is not a pool block (received, dequeued, made in a loop), whose buffer is
        then freed. The copies come first, each into ``fetches[k].data`` (NULL from the entry's
        start), so when one cannot be allocated the entry's ``fail:`` releases the copies made
        so far with the step's own buffers, and nothing is handed over."""
        moves = []                                  # (k, src, copy, rehome)
        for r, src, copy in self.fetch_plan:
            rehome = not copy and self.root[src] not in self.pooled
            moves.append((r.attrs["index"], src, copy, rehome))
        self.copied_fetches = [k for k, _, copy, rehome in moves if copy or rehome]
        self.fetch_indices = [k for k, _, _, _ in moves]
        for k, src, copy, rehome in moves:
            if not (copy or rehome):
                continue
            ref = self._ref(src)
            nbytes = f"(size_t){ref.size} * sizeof({ref.ctype})"
            why = "the caller cannot own it" if copy else "into a pool block"
            self.tail.append(f"/* fetch {k}: %{src.node.name} (copied: {why}) */")
            self.tail.append(f"fetches[{k}].data = flowc_pool_alloc(flowc_pool_used, {nbytes});")
            self.tail.append(f"if (!fetches[{k}].data) {{ flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, "
                             f"{c_string(src.node.name)}, \"\", \"out of memory copying a fetch "
                             f"of %zu bytes\", {nbytes}); goto fail; }}")
            self.tail.append(f"if ({ref.size} > 0) memcpy(fetches[{k}].data, {ref.var}.data, {nbytes});")
        for k, src, copy, rehome in moves:
            ref = self._ref(src)
            if copy or rehome:
                self.tail.append(f"{{ void *flowc_copy = fetches[{k}].data; fetches[{k}] = {ref.var}; "
                                 f"fetches[{k}].data = flowc_copy; }}")
            else:
                self.tail.append(f"/* fetch {k}: %{src.node.name} */")
                self.tail.append(f"fetches[{k}] = {ref.var};")
        for k, src, copy, rehome in moves:
            if rehome:
                ref = self._ref(self.root[src])
                self.tail.append(f"free({ref.var}.data); {ref.var}.data = NULL;")

    def _emit_node(self, n: Node) -> None:
        op = get_op(n.op, n)
        self.body.append("")
        self.body.append(self._node_comment(n))
        if n.op in _NO_CODE or n.op == "_Retval":
            return
        if n.op == "Placeholder":
            self._emit_feed(n)
            return
        if n.op == "Const":
            self._emit_const(n)
            return
        inputs = [self._ref(i) for i in n.inputs]
        outputs = [self._ref(o) for o in n.outputs]
        kc = KernelContext(n, inputs, outputs,
                           self.aliasing_target if n in self.in_place else self.target, self.module)
        if op.extra.get("c_owns_outputs"):
            # The kernel fills its outputs whole (a receive): no dims or allocation here, but
            # the buffers are this step's to free.
            code = op.c_kernel(kc)
            self.owned.extend(o for o in (Output(n, k) for k in range(len(outputs)))
                              if o not in self.preallocated)
            self._push(n, [self._outline(n, "\n".join(kc.checks + [code]))])
            return
        dims = None
        if op.c_output_dims is not None and (not all(o.static for o in outputs)
                                             or not all(i.static for i in inputs)):
            dims = op.c_output_dims(kc)
        lines: List[str] = []
        for k, o in enumerate(outputs):
            dim_exprs = []
            for d in range(o.rank):
                if o.shape[d] is not None:
                    dim_exprs.append(str(o.shape[d]))
                elif dims is not None:
                    dim_exprs.append(dims[k][d])
                else:
                    raise CodegenError(f"output {k} has a dynamic shape {o.type} and the op has no "
                                       "C shape function (c_output_dims)", n)
            if o.address is not None:            # slotless: nothing reads its metadata
                continue
            lines.append(f"{o.var}.rank = {o.rank}; {o.var}.dtype = {o.dtype.code};")
            for d, e in enumerate(dim_exprs):
                lines.append(f"{o.var}.dims[{d}] = {e};")
                if o.shape[d] is None and _SIMPLE_DIM.match(e):
                    o.dim_alias[d] = e
        checks = list(kc.checks)
        kc.checks.clear()
        copies = n in self.copies_input
        if op.c_alias is not None and not copies:
            src = inputs[op.c_alias]
            lines.append(f"{outputs[0].var}.data = {src.var}.data;")
            if op.c_kernel is None:
                self._push(n, [self._outline(n, "\n".join(checks + lines))])
                return
        placed: List[str] = []
        allocated: List[int] = []
        if op.c_alias is None or copies:
            for k, o in enumerate(outputs):
                if o.dtype is DType.resource:          # the kernel points it at runtime state
                    continue
                if Output(n, k) in self.preallocated:   # a loop allocated it at its entry
                    continue
                offset = self._arena_slot(Output(n, k), o)
                if offset is not None:
                    if o.address is None:
                        placed.append(f"{o.var}.data = flowc_arena + {offset};")
                    continue
                allocated.append(k)
        if op.c_kernel is None:
            raise CodegenError("op has no C kernel", n)
        code = self.memo.c_kernel(op, kc)
        checks += kc.checks
        for k in allocated:
            o = outputs[k]
            nbytes = f"(size_t){o.size} * sizeof({o.ctype})"
            pooled = self._may_pool(n) and not _kernel_replaces_buffer(code, o.var)
            alloc = f"flowc_pool_alloc(flowc_pool_used, {nbytes})" if pooled else f"flowc_alloc({nbytes})"
            lines.append(f"{o.var}.data = {alloc};")
            lines.append(f"if (!{o.var}.data) {kc.fail('out of memory allocating %zu bytes', nbytes, code='FLOWC_RESOURCE_EXHAUSTED')}")
            self.owned.append(Output(n, k))
            if pooled:
                self.pooled.add(Output(n, k))
        if copies:                      # the kernel adds into its own copy of the input
            src, o = inputs[op.c_alias], outputs[0]
            lines.append(f"if ({o.size} > 0) memcpy({o.var}.data, {src.var}.data, "
                         f"(size_t){o.size} * sizeof({o.ctype}));")
        body = "\n".join(checks + lines + ["{"] + ["    " + l for l in code.strip("\n").splitlines()] + ["}"])
        self._push(n, placed + [self._outline(n, body)])

    def _may_pool(self, n: Node) -> bool:
        """Whether ``n``'s outputs may be pool blocks: always without control flow; with it,
        outside every loop (a loop's buffers change hands with its variables, which
        ``flowc_cf_copy`` allocates)."""
        return self.use_pool or (self.structured is not None and self.structured.outside_loops(n))

    def _arena_slot(self, out: Output, ref: TensorRef):
        """Offset in the step's arena for a static, not fetched buffer (else None).

        With a memory plan, the planned offset (buffers share memory by liveness). Without,
        small buffers get a slot of their own so they skip malloc/free (a graph of scalar ops
        would otherwise spend most of its time in the allocator); they live for the whole
        step, and big buffers are freed after their last use.
        """
        if self.memory is not None:
            return self.memory.offsets.get(out)
        if not ref.static or out in self.transferred:
            return None
        nbytes = ref.dtype.itemsize
        for d in ref.shape:
            nbytes *= d
        if nbytes > ARENA_MAX_BUFFER:
            return None
        offset = self.arena_size
        self.arena_size += max(64, (nbytes + 63) // 64 * 64)
        return offset

    def _push(self, n: Node, lines: List[str]) -> None:
        if self.instrument is not None:             # --profile / --check-numerics
            lines = self.instrument.wrap(n, lines, [self._ref(o) for o in n.outputs])
        self.body.extend(lines)

    def _outline(self, n: Node, code: str) -> str:
        """Put a node's code (checks, output dims, allocation, kernel) in its own function and
        return the call that runs it.

        gcc's optimizer is superlinear in function size: one function per kernel keeps the
        entry small and compile time linear in the graph. Tensors keep the names the body uses (every tensor is a slot of the step's ``flowc_T`` array, named by a
        macro); the body's ``goto fail`` lands on the function's own error return.
        """
        if self._tiny_elementwise(n):
            return self._inline(n, code)
        names = [m for m in dict.fromkeys(_TENSOR_NAME.findall(code)) if m in self.slot]
        index = {name: i for i, name in enumerate(names)}
        canonical = _TENSOR_NAME.sub(
            lambda m: f"(*T{index[m.group(1)]})" if m.group(1) in index else m.group(0), code)
        fn = self.kernel_names.get(canonical)
        if fn is None:
            # named by its code, not by its place in the module: the same kernel has the same
            # name in every module, so its compiled object can be reused (build.py)
            digest = hashlib.sha256(f"{len(names)}\0{canonical}".encode()).hexdigest()
            fn = f"k{digest[:12]}_{ident(n.op)}"
            self.kernel_names[canonical] = fn
            refs = [f"flowc_tensor *const T{i} = &flowc_T[flowc_s[{i}]];"
                    f"  /* %{self.ref_of[v].node.name}{':' + str(self.ref_of[v].index) if self.ref_of[v].index else ''} */"
                    for i, v in enumerate(names)]
            body = "\n".join(("    " + line) if line else ""
                             for line in refs + canonical.strip("\n").splitlines())
            self.kernels.append(Kernel(
                fn, f"/* first used by {self._node_line(n)} */",
                f"{{\n    (void)flowc_rt;\n{body}\n    return 0;\nfail:\n"
                f"    return st->code ? st->code : FLOWC_ERROR;\n}}\n"))
        slots = "s_" + ident(n.name)
        while slots in self._names:
            slots += "_"
        self._names.add(slots)
        self.slot_tables.append((self._part(), f"static const int32_t {slots}[] = {{"
                                 + ", ".join(str(self.slot[v]) for v in names) + "};"
                                 if names else f"static const int32_t {slots}[1] = {{0}};"))
        loc = str(n.location) if n.location else ""
        return (f"if ({fn}(flowc_T, {slots}, flowc_rt, {c_string(n.name)}, {c_string(loc)}, st)) "
                "goto fail;")

    def _tiny_elementwise(self, n: Node) -> bool:
        """An elementwise op on a few elements of static shape (a scalar op): its code is a
        handful of instructions, less than the call of an outlined kernel."""
        if self.inline_nodes is not None:
            return n in self.inline_nodes
        if not get_op(n.op, n).elementwise:
            return False
        for out in (*n.inputs, *n.outputs):
            shape = out.type.shape
            if shape is None:
                return False
            size = 1
            for d in shape:
                if d is None:
                    return False
                size *= d
            if size > INLINE_MAX_ELEMENTS:
                return False
        return True

    def _inline(self, n: Node, code: str) -> str:
        """A node's code in place, in a block that names the node and its location for the
        error paths (an outlined kernel gets them as arguments)."""
        for out in (*n.inputs, *n.outputs):
            ref = self.refs.get(out)
            if ref is not None and ref.address is not None and ref.var in code and \
                    re.search(rf"\b{ref.var}\b", code):
                raise CodegenError(f"internal: the code of {n.op} names the tensor slot of "
                                   f"{out.name}, which has none (it is addressed in the arena)", n)
        loc = str(n.location) if n.location else ""
        # the step function indents the first line of each entry: the others carry their own
        if "flowc_node" not in code and "flowc_loc" not in code:      # code that cannot fail
            body = "\n".join("    " + line if line else "" for line in code.strip("\n").splitlines())
            return f"{{\n{body}\n    }}"
        lines = ["(void)flowc_node; (void)flowc_loc;", *code.strip("\n").splitlines()]
        body = "\n".join("        " + line if line else "" for line in lines)
        return (f"{{ const char *flowc_node = {c_string(n.name)}, *flowc_loc = {c_string(loc)};\n"
                f"{body}\n    }}")

    def _emit_feed(self, n: Node) -> None:
        k = self._feed_index(n)
        ref = self._ref(n.output(0))
        kc = KernelContext(n, [], [ref], self.target, self.module)
        loc = str(n.location) if n.location else ""
        self.body.append(f"{ref.var} = feeds[{k}];")
        checks = kc.type_checks(ref, "feed")
        self.body.append(f"{{ const char *flowc_node = {c_string(n.name)}, *flowc_loc = {c_string(loc)};")
        self.body.extend("    " + c for c in checks)
        self.body.append("}")
        if self.instrument is not None:             # --check-numerics: fed values too
            self.body.extend(self.instrument.check(n, 0, ref))

    def _emit_const(self, n: Node) -> None:
        value: np.ndarray = n.attrs["value"]
        ref = self._ref(n.output(0))
        dtype = n.output_types[0].dtype
        name = "c_" + ref.var[2:]
        if value.nbytes >= BLOB_MIN_BYTES:
            self._emit_blob(n, ref, name, value)
            return
        flat = value.reshape(-1) if value.size else np.zeros(1, value.dtype)
        items = ", ".join(self.target.literals(flat, dtype))
        self.constants.append((self._part(), f"/* %{n.name} : {n.output_types[0]} */\n"
                              f"static const {ref.ctype} {name}[{flat.size}] __attribute__((aligned(64))) = {{{items}}};"))
        self.body.append(f"{ref.var}.data = (void *){name}; {ref.var}.rank = {ref.rank}; "
                         f"{ref.var}.dtype = {dtype.code};")
        for d, dim in enumerate(value.shape):
            self.body.append(f"{ref.var}.dims[{d}] = {dim};")

    def _emit_blob(self, n: Node, ref: TensorRef, name: str, value: np.ndarray) -> None:
        """A big constant: its bytes go to ``<name>.bin`` (a C initializer of a million numbers
        takes the compiler minutes and gigabytes). Embedded, the assembler includes the file
        in the module's read-only data (``.incbin``); loaded, the module reads it through
        ``flowc_consts[k]``, which the runtime points at the artifact's mapped file."""
        dtype = n.output_types[0].dtype
        data = np.ascontiguousarray(value, dtype=dtype.np.newbyteorder("<")).tobytes()
        file = f"{name}.bin"
        self.blobs[file] = data
        if value.dtype == dtype.np:             # the bytes the IR text would print
            self.blob_of[n.name] = (file, value)
            self.blob_digests[file] = self._const_digest(n)
        else:
            self.blob_digests[file] = hashlib.sha256(data).hexdigest()
        note = f"/* %{n.name} : {n.output_types[0]} ({len(data)} bytes, from {file}"
        if self.constants_mode == LOADED:
            k = len(self.loaded_constants)
            self.loaded_constants.append((file, len(data)))
            self.constants.append((self._part(), f"{note}: flowc_consts[{k}]) */"))
            pointer = f"(void *)flowc_consts[{k}]"
        else:
            self.constants.append((self._part(),
                f"{note}) */\n"
                f"__asm__(\".section .rodata\\n.balign 64\\n{name}:\\n.incbin \\\"{file}\\\"\\n"
                f".previous\");\n"
                f"extern const {ref.ctype} {name}[] __attribute__((visibility(\"hidden\")));"))
            pointer = f"(void *){name}"
        self.body.append(f"{ref.var}.data = {pointer}; {ref.var}.rank = {ref.rank}; "
                         f"{ref.var}.dtype = {dtype.code};")
        for d, dim in enumerate(value.shape):
            self.body.append(f"{ref.var}.dims[{d}] = {dim};")

    def _part(self) -> int:
        """The part the node being emitted belongs to."""
        return len(self.part_starts) - 1

    def _assemble(self) -> ModuleLayout:
        includes = ["#include \"flowc_rt.h\""]
        if "blas" in self.module.features:
            includes.append("#include <cblas.h>")
        pool = SharedVariable("flowc_pool *", "flowc_pool_used", "The process's buffer pool, "
                              "set by the runtime (flowc_use_pool); NULL: none.")
        helpers = list(self.module.globals)
        slot_macros = ["/* Every tensor of the step is a slot of flowc_T (one array per call, so the entry",
                       "   stays small for the C compiler and steps can run concurrently). */"]
        slot_macros.extend(self.decls)
        bounds = self.part_starts + [len(self.body)]
        parts = [Part(self.body[a:b]) for a, b in zip(bounds, bounds[1:])]
        for k, text in self.constants:
            parts[k].constants.append(text)
        for k, text in self.slot_tables:
            parts[k].slot_tables.append(text)
        shared = [pool] + list(self.module.shared)
        if self.loaded_constants:
            shared.append(SharedVariable(
                "const void *", f"flowc_consts[{len(self.loaded_constants)}]",
                "The big constants' bytes: the artifact's .bin blobs, mapped and hashed by the "
                "runtime and bound with flowc_bind_constants before the first call."))
        return ModuleLayout(self.graph.name, includes, shared,
                            helpers, slot_macros, list(self.kernels), parts,
                            self._pool_globals(), self._entry(len(parts)))

    def _entry(self, nparts: int) -> List[str]:
        """The exported ABI: the module's version, pool, rendezvous and queue functions and
        ``flowc_entry``, which runs the parts and hands over the fetches."""
        out = [f"int flowc_abi_version(void) {{ return {ABI_VERSION}; }}"]
        out.append("/* Fetched buffers are pool blocks: the caller gives them back with flowc_free. */")
        out.append("void flowc_free(void *p) { flowc_pool_release(p); }")
        out.append("void flowc_use_pool(void *pool) { flowc_pool_used = (flowc_pool *)pool; }")
        out.append("void flowc_pool_drop_idle(void *pool) { flowc_pool_trim((flowc_pool *)pool); }")
        out.append("size_t flowc_rendezvous_size(void) { return sizeof(flowc_rendezvous); }")
        out.append("int flowc_rendezvous_init(void *rv, int32_t nslots, int64_t timeout_ms) "
                   "{ return flowc_rv_init((flowc_rendezvous *)rv, nslots, timeout_ms); }")
        out.append("void flowc_rendezvous_abort(void *rv) { flowc_rv_abort((flowc_rendezvous *)rv); }")
        out.append("void flowc_rendezvous_destroy(void *rv) { flowc_rv_destroy((flowc_rendezvous *)rv); }")
        out.append("size_t flowc_queue_struct_size(void) { return sizeof(flowc_queue); }")
        out.append("int flowc_queue_create(void *q, int32_t ncomponents, int64_t capacity, const char *name) "
                   "{ return flowc_queue_init((flowc_queue *)q, ncomponents, capacity, name); }")
        out.append("void flowc_queue_free(void *q) { flowc_queue_destroy((flowc_queue *)q); }")
        out.append("void flowc_queue_shut(void *q, int32_t cancel) { flowc_queue_close((flowc_queue *)q, cancel); }")
        out.append("int64_t flowc_queue_length(void *q) { return flowc_queue_count((flowc_queue *)q); }")
        out.append("")
        out.append("int flowc_entry(const flowc_tensor *feeds, flowc_tensor *fetches, "
                   "const flowc_runtime *rt, void *rendezvous, int64_t timeout_ms, flowc_status *st) {")
        out.append("    (void)feeds; (void)fetches;")
        out.append("    flowc_runtime flowc_rt_call = *rt;   /* this call's view: rendezvous, deadline */")
        out.append("    flowc_rt_call.rendezvous = rendezvous;")
        out.append("    flowc_rt_call.timeout_ms = timeout_ms;")
        out.append("    const flowc_runtime *flowc_rt = &flowc_rt_call;")
        out.append("    st->code = 0;")
        if self.loaded_constants:
            out.append("    if (!flowc_consts[0])")
            out.append("        return flowc_fail(st, FLOWC_FAILED_PRECONDITION, \"\", \"\", "
                       "\"the module's big constants are not bound (flowc_bind_constants): "
                       "load it as an artifact (runtime.load_artifact)\");")
        for k in self.copied_fetches:
            out.append(f"    fetches[{k}].data = NULL;   /* a copy, made in the tail */")
        out.extend("    " + line for line in self._step_memory())
        for i in range(nparts):
            out.append(f"    if (flowc_part{i}(flowc_T, flowc_arena, feeds, flowc_rt, st)) goto fail;")
        out.extend(("    " + line) if line else "" for line in self.tail)
        out.extend("    " + line for line in self._release_step_memory())
        out.append("    return 0;")
        out.append("fail:")
        by_release: Dict[str, List[Output]] = {}
        for r in self.owned:
            by_release.setdefault(self._release(r), []).append(r)
        names = {"free": "owned", "flowc_pool_release": "pooled"}
        for release, roots in by_release.items():
            name = names.get(release, f"released_by_{release}")
            slots = ", ".join(str(self.slot[self.refs[r].var]) for r in roots)
            out.append(f"    static const int32_t {name}[] = {{{slots}}};")
            out.append(f"    for (int i = 0; i < {len(roots)}; i++) {release}(flowc_T[{name}[i]].data);")
        for k in self.copied_fetches:
            out.append(f"    flowc_pool_release(fetches[{k}].data);")
        for k in self.fetch_indices:
            out.append(f"    fetches[{k}].data = NULL;")
        out.extend("    " + line for line in self._release_step_memory())
        out.append("    return st->code ? st->code : FLOWC_ERROR;")
        out.append("}")
        out.extend(self.module.exports)
        out.extend(self._bind_constants())
        return out

    def _bind_constants(self) -> List[str]:
        """``flowc_bind_constants``, exported where the module reads its big constants from
        the artifact's blobs: the runtime passes each blob's mapped bytes (64-byte aligned)
        and size, checked against what the module was generated for; NULL unbinds."""
        if not self.loaded_constants:
            return []
        sizes = ", ".join(str(nbytes) for _, nbytes in self.loaded_constants)
        n = len(self.loaded_constants)
        return ["",
                f"static const uint64_t flowc_const_bytes[{n}] = {{{sizes}}};",
                "/* 0: bound; -1: not this module's count of constants; k + 1: constant k is",
                "   missing, of another size or not 64-byte aligned (nothing is bound). */",
                "int flowc_bind_constants(const void *const *data, const uint64_t *nbytes, "
                "int32_t n) {",
                "    if (!data) {",
                f"        for (int32_t k = 0; k < {n}; k++) flowc_consts[k] = NULL;",
                "        return 0;",
                "    }",
                f"    if (n != {n}) return -1;",
                f"    for (int32_t k = 0; k < {n}; k++)",
                "        if (!data[k] || nbytes[k] != flowc_const_bytes[k] || "
                "((uintptr_t)data[k] & 63)) return k + 1;",
                f"    for (int32_t k = {n - 1}; k >= 0; k--) flowc_consts[k] = data[k];"
                "   /* [0] last: it says bound */",
                "    return 0;",
                "}"]

    # --- the step's memory: tensor slots and arena ----------------------------------------------
    def _pool_globals(self) -> List[str]:
        """With a memory plan: the block size and the module's pool of blocks."""
        if self.memory is None:
            return []
        return ["/* Memory plan: each call runs in one block from this module's pool (tensor slots,",
                f"   then the arena of planned buffers: {len(self.memory.buffers)} buffers, "
                f"{self.memory.total_bytes} bytes without reuse). */",
                f"#define FLOWC_SLOTS_BYTES ((size_t)(({max(len(self.decls), 1)} "
                "* sizeof(flowc_tensor) + 63) & ~(size_t)63))",
                f"#define FLOWC_ARENA_BYTES ((size_t){self.arena_size})",
                "static flowc_arena_pool flowc_arenas;",
                "__attribute__((destructor)) static void flowc_arenas_release(void) "
                "{ flowc_arena_pool_drain(&flowc_arenas); }",
                ""]

    def _step_memory(self) -> List[str]:
        """Entry lines that set up ``flowc_T`` (zeroed slots) and ``flowc_arena``."""
        oom = "return flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, \"\", \"\", \"out of memory\");"
        if self.memory is not None:
            return ["char *flowc_block = (char *)flowc_arena_take(&flowc_arenas, "
                    "FLOWC_SLOTS_BYTES + FLOWC_ARENA_BYTES);",
                    f"if (!flowc_block) {oom}",
                    "flowc_tensor *flowc_T = (flowc_tensor *)flowc_block;",
                    "memset(flowc_T, 0, FLOWC_SLOTS_BYTES);",
                    "char *flowc_arena = flowc_block + FLOWC_SLOTS_BYTES;"]
        lines = [f"flowc_tensor *flowc_T = (flowc_tensor *)calloc({max(len(self.decls), 1)}, sizeof(flowc_tensor));",
                 f"if (!flowc_T) {oom}"]
        if self.arena_size:
            lines.append(f"char *flowc_arena = (char *)flowc_alloc({self.arena_size});")
            lines.append(f"if (!flowc_arena) {{ free(flowc_T); {oom} }}")
        else:
            lines.append("char *flowc_arena = NULL;")
        return lines

    def _release_step_memory(self) -> List[str]:
        if self.memory is not None:
            return ["flowc_arena_give(&flowc_arenas, flowc_block);"]
        return ["free(flowc_arena);", "free(flowc_T);"]
