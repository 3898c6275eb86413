"""The pieces of one generated C module and how they are put together: as one translation unit
(the readable source an artifact keeps) or as several units that the C compiler builds at the
same time, one per core, and links into the one shared object (``build.py``).

A module is: a prelude (includes), module-level variables the code writes (``SharedVariable``:
defined once, declared ``extern`` in the other units), helpers (pure ``static`` functions,
repeated in every unit), the tensor-slot macros, the outlined kernels, the part functions that
call them in order (with the constants and slot tables only they read), and the entry with the
exported ABI. Split, the first unit holds the entry and the definitions of the shared variables;
kernels and parts are spread over the units by their estimated compile cost. Every symbol that
crosses units is hidden: the shared object exports the same ABI as the one-unit build.
A helper's function-local ``static`` is one per unit; the only one (``flowc_parallel_threads``'
once-flag that puts OpenBLAS on one thread) guards an idempotent call.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import List, Sequence

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
# The parts only sequence kernel calls and are built at -O1: a byte of them costs the compiler
# about a third of a byte of an -O3 kernel.
PART_COST_WEIGHT = 0.3


@dataclass(frozen=True)
class SharedVariable:
    """A module-level variable the generated code writes (a pool pointer, profile counters)."""
    ctype: str              # "flowc_pool *", "int64_t"
    declarator: str         # "flowc_pool_used", "flowc_prof_ns[12]"
    comment: str = ""

    def render(self, storage: str) -> str:
        line = f"{storage} {self.ctype}{'' if self.ctype.endswith('*') else ' '}{self.declarator};"
        return (f"/* {self.comment} */\n" if self.comment else "") + line


@dataclass
class Kernel:
    """An outlined kernel function: ``int <name>(KERNEL_PARAMS) <body>``."""
    name: str
    comment: str            # the C comment that names the node that first used it
    body: str               # "{ ... }\n"

    def render(self, storage: str) -> str:
        return (f"{self.comment}\n{storage} __attribute__((noinline)) int {self.name}("
                f"{KERNEL_PARAMS}) {self.body}")

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
        return self._render(range(len(self.kernels)), range(len(self.parts)), unit=0, units=1)

    # --- several units ----------------------------------------------------------------------
    def unit_count(self, jobs: int, min_unit_cost: float = MIN_UNIT_COST) -> int:
        """How many units are worth building with ``jobs`` compiler processes: one for a
        module under ``2 * min_unit_cost``, else up to ``jobs`` of at
        least ``min_unit_cost`` each (0: ``jobs`` units whatever the module's size)."""
        items = len(self.kernels) + len(self.parts)
        cost = self.cost
        if jobs <= 1 or items < 2 or cost < 2 * min_unit_cost:
            return 1
        fit = int(cost // min_unit_cost) if min_unit_cost > 0 else jobs
        return max(1, min(jobs, fit, items))

    @property
    def cost(self) -> float:
        return sum(k.cost for k in self.kernels) + sum(p.cost for p in self.parts)

    def split(self, units: int) -> List[str]:
        """The module as ``units`` translation units (``[joined()]`` for one)."""
        if units <= 1:
            return [self.joined()]
        kernels, parts = self.assign(units)
        return [self._render(kernels[u], parts[u], unit=u, units=units) for u in range(units)]

    def assign(self, units: int):
        """Kernel and part indices per unit: the costliest first, each to the unit with the
        least estimated cost so far (the first unit starts with the entry's)."""
        load = [0.0] * units
        load[0] = ENTRY_COST + PART_COST_WEIGHT * sum(len(line) for line in self.entry)
        items = [(k.cost, 0, i) for i, k in enumerate(self.kernels)]
        items += [(p.cost, 1, i) for i, p in enumerate(self.parts)]
        kernels: List[List[int]] = [[] for _ in range(units)]
        parts: List[List[int]] = [[] for _ in range(units)]
        for cost, kind, i in sorted(items, key=lambda t: (-t[0], t[1], t[2])):
            u = min(range(units), key=lambda k: (load[k], k))
            load[u] += cost
            (parts if kind else kernels)[u].append(i)
        return [sorted(k) for k in kernels], [sorted(p) for p in parts]

    # --- rendering --------------------------------------------------------------------------
    def _render(self, kernels: Sequence[int], parts: Sequence[int], unit: int, units: int) -> str:
        split = units > 1
        here = set(kernels)
        parts_here = set(parts)
        if split:
            header = (f"Generated by flowc from graph @{self.graph_name}: translation unit "
                      f"{unit + 1} of {units}, compiled at the same time as the others and "
                      "linked with them into one module. Do not edit. This unit: kernels "
                      f"{_names(self.kernels[k].name for k in kernels)}; parts "
                      f"{_names(f'flowc_part{p}' for p in parts)}"
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
        # most of the compile time of large graphs.
        if parts_here:
            out.append("#pragma GCC push_options")
            out.append("#pragma GCC optimize (\"O1\")")
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


def _names(names) -> str:
    names = list(names)
    return ", ".join(names) if names else "none"
