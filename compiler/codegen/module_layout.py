"""The pieces of one generated C module and how they are put together: as one translation unit
(the readable source an artifact keeps) or as several units that the C compiler builds at the
same time, one per core, and links into the one shared object (``build.py``).

A module is: a prelude (includes), module-level variables the code writes (``SharedVariable``:
defined once, declared ``extern`` in the other units), helpers (pure ``static`` functions,
repeated in every unit that needs them), the tensor-slot macros, the outlined kernels, the part
functions that call them in order (with the constants and slot tables only they read), and the
entry with the exported ABI.

Split, a module is *glue units* and *kernel units*. The glue units hold the parts, spread over
them by estimated compile cost, the first one also the entry and the definitions of the shared
variables. The kernel units hold the kernels, grouped by their code alone (``kernel_chunks``):
a kernel unit's text depends only on its kernels and the helpers they use, never on the model
around them, so its compiled object is cached by that text and a later module with the same
kernels links it instead of compiling it again (``unit_build.py``). Every symbol that crosses
units is hidden: the shared object exports the same ABI as the one-unit build.
A helper's function-local ``static`` is one per unit; the only one (``flowc_parallel_threads``'
once-flag that puts OpenBLAS on one thread) guards an idempotent call.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import textwrap
from dataclasses import dataclass, field
from typing import FrozenSet, List, Sequence

import runtime

HIDDEN = "__attribute__((visibility(\"hidden\")))"

KERNEL_PARAMS = ("flowc_tensor *restrict flowc_T, const int32_t *flowc_s, "
                 "const flowc_runtime *flowc_rt, const char *flowc_node, const char *flowc_loc, "
                 "flowc_status *st")
PART_PARAMS = ("flowc_tensor *restrict flowc_T, char *flowc_arena, const flowc_tensor *feeds, "
               "const flowc_runtime *flowc_rt, flowc_status *st")

# Compile cost is estimated in bytes of kernel C (gcc -O3 -march=native builds about 45 of them
# a millisecond on a 2-core x86 machine). Measured per kernel on the MLP training step: a
# kernel costs a fixed ~20 ms (its function, its calls of header helpers) plus its code, and
# each loop (vectorized, often with an OpenMP twin) ~10 ms more.
KERNEL_BASE_COST = 900
LOOP_COST = 500
# The entry's unit also compiles the exported ABI (rendezvous, queue and pool functions from
# the runtime header): about 70 ms more (MLP training step: units of 0.79 and 0.76 s this way).
ENTRY_COST = 3_000
# The least estimated cost worth a unit of its own: another cc process costs ~80 ms (parsing
# the runtime header, cblas.h, omp.h, the helpers) and the link ~60 ms, more than a second
# core saves on a small module (which stays one unit).
MIN_UNIT_COST = 10_000
# A kernel unit holds CHUNK_MIN_KERNELS to CHUNK_MAX_KERNELS kernels (about 20 on average, see
# ``ModuleLayout.kernel_chunks``): each unit costs a compiler process and compiles the helpers
# its kernels share once more (a ResNet-18's 23 kernels, mostly convolutions, took 1.2 s of
# CPU as three units and 0.9 s as two; 0.6 s as one unit with the rest of the module), and a
# unit is what a later module reuses whole.
CHUNK_MIN_KERNELS = 16
CHUNK_MAX_KERNELS = 48
CHUNK_CUT = 4
# The parts only sequence kernel calls and are built at -O1: a byte of them costs the compiler
# about a third of a byte of an -O3 kernel.
PART_COST_WEIGHT = 0.3


@dataclass(frozen=True)
class SharedVariable:
    """A module-level variable the generated code writes (a pool pointer, profile counters)."""
    ctype: str              # "flowc_pool *", "int64_t"
    declarator: str         # "flowc_pool_used", "flowc_prof_ns[12]"
    comment: str = ""

    @property
    def name(self) -> str:
        return re.match(r"\w+", self.declarator).group(0)

    def render(self, storage: str) -> str:
        line = f"{storage} {self.ctype}{'' if self.ctype.endswith('*') else ' '}{self.declarator};"
        return (f"/* {self.comment} */\n" if self.comment else "") + line


@dataclass
class Kernel:
    """An outlined kernel function: ``int <name>(KERNEL_PARAMS) <body>``."""
    name: str
    comment: str            # the C comment that names the node that first used it
    body: str               # "{ ... }\n", its tensors' lines noting the nodes they came from

    def render(self, storage: str) -> str:
        return (f"{self.comment}\n{storage} __attribute__((noinline)) int {self.name}("
                f"{KERNEL_PARAMS}) {self.body}")

    def render_plain(self, storage: str) -> str:
        """The function without anything that names a node: the same in every module."""
        return (f"{storage} __attribute__((noinline)) int {self.name}({KERNEL_PARAMS}) "
                f"{_NODE_NOTE.sub('', self.body)}")

    @property
    def cost(self) -> float:
        return KERNEL_BASE_COST + len(self.body) + LOOP_COST * self.body.count("for (")


@dataclass
class Part:
    """``flowc_partN``: a run of nodes (their kernel calls and frees), with the constants and
    slot tables only it reads."""
    lines: List[str]
    constants: List[str] = field(default_factory=list)
    slot_tables: List[str] = field(default_factory=list)

    @property
    def cost(self) -> float:
        return PART_COST_WEIGHT * sum(len(line) for line in self.lines) + \
            sum(len(c) for c in self.constants)


@dataclass
class ModuleLayout:
    graph_name: str
    includes: List[str]                 # "#include ..." lines
    shared: List[SharedVariable]
    helpers: List[str]                  # static helpers and comments: repeated in every unit
    slot_macros: List[str]              # "#define t_x (flowc_T[0])" and their comment
    kernels: List[Kernel]
    parts: List[Part]
    entry_state: List[str]              # module-level state of the entry only (arena pool)
    entry: List[str]                    # the exported ABI: version, pool, queues, flowc_entry

    # --- one unit ---------------------------------------------------------------------------
    def joined(self) -> str:
        """The whole module as one translation unit."""
        return self._render(range(len(self.kernels)), range(len(self.parts)), unit=0, units=1,
                            split=False)

    # --- several units ----------------------------------------------------------------------
    def unit_count(self, jobs: int, min_unit_cost: float = MIN_UNIT_COST) -> int:
        """How many units to build with ``jobs`` compiler processes: one for a module under
        ``2 * min_unit_cost`` (or one job), else its glue units (``glue_count``) and its
        kernel units (``kernel_chunks``)."""
        items = len(self.kernels) + len(self.parts)
        if jobs <= 1 or items < 2 or self.cost < 2 * min_unit_cost:
            return 1
        return self.glue_count(jobs, min_unit_cost) + len(self.kernel_chunks())

    def glue_count(self, jobs: int, min_unit_cost: float = MIN_UNIT_COST) -> int:
        """How many glue units the parts are spread over: up to ``jobs`` of at least
        ``min_unit_cost`` each (0: ``jobs`` whatever their size), one per part at most."""
        cost = ENTRY_COST + sum(p.cost for p in self.parts)
        fit = int(cost // min_unit_cost) if min_unit_cost > 0 else jobs
        return max(1, min(jobs, fit, len(self.parts)))

    @property
    def cost(self) -> float:
        return sum(k.cost for k in self.kernels) + sum(p.cost for p in self.parts)

    def kernel_chunks(self) -> List[List[int]]:
        """The kernels (indices) of each kernel unit, grouped by their code alone: sorted by
        op and name (a hash of the code), a unit ends after ``CHUNK_MAX_KERNELS`` kernels or,
        from ``CHUNK_MIN_KERNELS`` on, after a kernel whose name hashes to 0 mod
        ``CHUNK_CUT``. A kernel added to or missing from a model changes only its own unit:
        the others keep their text and their cached objects."""
        order = sorted(range(len(self.kernels)),
                       key=lambda i: (_op_of(self.kernels[i].name), self.kernels[i].name))
        chunks: List[List[int]] = []
        current: List[int] = []
        for i in order:
            current.append(i)
            cut = int(hashlib.sha256(self.kernels[i].name.encode()).hexdigest()[:8], 16)
            if len(current) >= CHUNK_MAX_KERNELS or \
                    (len(current) >= CHUNK_MIN_KERNELS and cut % CHUNK_CUT == 0):
                chunks.append(current)
                current = []
        if current:
            chunks.append(current)
        return chunks

    def assign_parts(self, units: int) -> List[List[int]]:
        """Part indices per glue unit: the costliest first, each to the unit with the least
        estimated cost so far (the first unit starts with the entry's)."""
        load = [0.0] * units
        load[0] = ENTRY_COST + PART_COST_WEIGHT * sum(len(line) for line in self.entry)
        parts: List[List[int]] = [[] for _ in range(units)]
        for i in sorted(range(len(self.parts)), key=lambda i: (-self.parts[i].cost, i)):
            u = min(range(units), key=lambda k: (load[k], k))
            load[u] += self.parts[i].cost
            parts[u].append(i)
        return [sorted(p) for p in parts]

    def split(self, units: int) -> List[str]:
        """The module as ``units`` translation units (``[joined()]`` for one): the glue units,
        then the kernel units (``render_kernels``)."""
        if units <= 1:
            return [self.joined()]
        chunks = self.kernel_chunks()
        glue = max(1, units - len(chunks))
        return ([self.render_glue(parts, u, glue) for u, parts in enumerate(self.assign_parts(glue))]
                + [self.render_kernels(chunk) for chunk in chunks])

    # --- rendering --------------------------------------------------------------------------
    def render_glue(self, parts: Sequence[int], unit: int, units: int) -> str:
        """Glue unit ``unit`` of ``units``: the parts ``parts`` (the first unit: the entry too)
        calling the kernels, which live in the kernel units."""
        return self._render((), parts, unit=unit, units=units, split=True)

    def render_kernels(self, kernels: Sequence[int]) -> str:
        """The kernel unit of ``kernels``: the runtime header, the helpers they use, and the
        functions, hidden. Nothing in it names a node or depends on the rest of the module,
        so the same kernels make the same text (and object) in every module."""
        functions = [self.kernels[k].render_plain(HIDDEN) for k in sorted(
            kernels, key=lambda k: self.kernels[k].name)]
        code = "\n".join(functions)
        helpers = self._helpers_for(code)
        text = "\n".join(helpers) + "\n" + code
        header = textwrap.wrap("Generated by flowc: kernels " + ", ".join(sorted(
            self.kernels[k].name for k in kernels)) + ". Compiled once, cached by this text "
            "and linked into every module that uses them. Do not edit.", 92)
        out = ["/* " + header[0]] + ["   " + line for line in header[1:]]
        out[-1] += " */"
        out.append(self.includes[0])
        if "cblas_" in text:
            out.append("#include <cblas.h>")
        out.append("")
        used = set(_IDENT.findall(text))
        for v in self.shared:
            if v.name in used:
                out.append(v.render(f"extern {HIDDEN}"))
        out.extend(helpers)
        out.append("")
        out.extend(functions)
        return "\n".join(out) + "\n"

    def _helpers_for(self, code: str) -> List[str]:
        """The helpers ``code`` uses, with the helpers they use (in module order). A helper
        defines the ``flowc_``/``FLOWC_`` names on its lines that start in the first column
        and that the runtime header does not; one that defines none (an ``#include``) is
        always taken."""
        defined, uses = self._helper_names()
        wanted = set(_IDENT.findall(code))
        taken = [not d for d in defined]
        changed = True
        while changed:
            changed = False
            for k, names in enumerate(defined):
                if not taken[k] and names & wanted:
                    taken[k] = True
                    wanted |= uses[k]
                    changed = True
        return [h for h, t in zip(self.helpers, taken) if t]

    def _helper_names(self):
        if getattr(self, "_names_cache", None) is None:
            header = runtime_header_names()
            defined: List[FrozenSet[str]] = []
            uses: List[FrozenSet[str]] = []
            for h in self.helpers:
                top = "\n".join(line for line in h.splitlines() if line[:1] not in ("", " ", "\t"))
                defined.append(frozenset(_IDENT.findall(top)) - header)
                uses.append(frozenset(_IDENT.findall(h)))
            self._names_cache = (defined, uses)
        return self._names_cache

    def _render(self, kernels: Sequence[int], parts: Sequence[int], unit: int, units: int,
                split: bool) -> str:
        here = set(kernels)
        parts_here = set(parts)
        if split:
            header = (f"Generated by flowc from graph @{self.graph_name}: glue unit "
                      f"{unit + 1} of {units}, compiled at the same time as the others and "
                      "linked with them and the kernel units into one module. Do not edit. "
                      f"This unit: parts {_names(f'flowc_part{p}' for p in parts)}"
                      + ("; the entry." if unit == 0 else "."))
            lines = textwrap.wrap(header, 92)
            out = ["/* " + lines[0]] + ["   " + line for line in lines[1:]]
            out[-1] += " */"
        else:
            out = [f"/* Generated by flowc from graph @{self.graph_name}. Do not edit. */"]
        out.extend(self.includes)
        out.append("")
        for v in self.shared:
            if not split:
                out.append(v.render("static"))
            elif unit == 0:
                out.append(v.render(HIDDEN))
            else:
                out.append(v.render(f"extern {HIDDEN}"))
        for p in sorted(parts_here):
            out.extend(self.parts[p].constants)
        if split:           # the helpers the parts and the entry use (the kernels are elsewhere)
            out.extend(self._helpers_for("\n".join(
                [line for p in parts_here for line in self.parts[p].lines]
                + (self.entry + self.entry_state if unit == 0 else []))))
        else:
            out.extend(self.helpers)
        out.append("")
        out.extend(self.slot_macros)
        out.append("")
        out.append("/* Kernels: nodes with identical code share one function; each call passes the")
        out.append("   node's tensor slots, name and source location. */")
        if split:
            called = [i for i, k in enumerate(self.kernels) if i not in here]
            for i in called:
                out.append(f"{HIDDEN} int {self.kernels[i].name}({KERNEL_PARAMS});")
        storage = HIDDEN if split else "static"
        for i in kernels:
            out.append(self.kernels[i].render(storage))
        for p in sorted(parts_here):
            out.extend(self.parts[p].slot_tables)
        out.append("")
        if unit == 0:
            out.extend(self.entry_state)
        # The parts only sequence kernel calls: optimizing them hard buys nothing and costs
        # most of the compile time of large graphs. Dead-store elimination finds nothing to
        # remove in them (each store of a slot is read by a later call) and was a third of
        # their compile time (it walks every store past every call).
        if parts_here:
            out.append("#pragma GCC push_options")
            out.append("#pragma GCC optimize (\"O1\", \"no-tree-dse\")")
            for i in sorted(parts_here):
                out.append(f"{storage} __attribute__((noinline)) int flowc_part{i}({PART_PARAMS}) {{")
                out.append("    (void)feeds; (void)flowc_arena; (void)flowc_rt;")
                out.extend(("    " + line) if line else "" for line in self.parts[i].lines)
                out.append("    return 0;")
                out.append("fail:")
                out.append("    return st->code ? st->code : FLOWC_ERROR;")
                out.append("}")
                out.append("")
            out.append("#pragma GCC pop_options")
            out.append("")
        if unit == 0:
            for i in range(len(self.parts)):
                if i not in parts_here:
                    out.append(f"{HIDDEN} int flowc_part{i}({PART_PARAMS});")
            out.extend(self.entry)
        return "\n".join(out) + "\n"


_IDENT = re.compile(r"\b(?:flowc|FLOWC)_\w+")
# The note after a kernel's tensor line naming the node the tensor came from.
_NODE_NOTE = re.compile(r"(?<=\]\];)  /\* %[^\n]*? \*/$", re.M)


def _op_of(kernel_name: str) -> str:
    """The op a kernel was named after (``k3fa9c2d1e0b4_Conv2D``: Conv2D)."""
    return kernel_name.split("_", 1)[1] if "_" in kernel_name else kernel_name


@functools.lru_cache(maxsize=1)
def runtime_header_names() -> FrozenSet[str]:
    """The ``flowc_``/``FLOWC_`` names the C runtime's headers define or mention: every unit
    has them, so they never tie a kernel to a helper."""
    folder = os.path.join(os.path.dirname(os.path.abspath(runtime.__file__)), "csrc")
    names = set()
    for fn in sorted(os.listdir(folder)):
        if fn.endswith(".h"):
            with open(os.path.join(folder, fn)) as f:
                names.update(_IDENT.findall(f.read()))
    return frozenset(names)


def _names(names) -> str:
    names = list(names)
    return ", ".join(names) if names else "none"
