"""Optional instrumentation of generated code: per-kernel timers (``--profile``) and checks
that every floating-point output is finite (``--check-numerics``).

Nothing here runs unless asked: a default build emits no timer and no check. With
``profile`` each node's kernel call is wrapped in a ``clock_gettime(CLOCK_MONOTONIC)`` pair
that adds the elapsed nanoseconds and one call to the module's counters (indexed by kernel;
``flowc_profile_size/ns/calls/reset`` export them to the runtime, ``runtime/profile.py``
turns them into a report). The kernel table (node, op, source location and, for a ``Fused``
node, the nodes it replaced) goes into the artifact manifest. With ``check_numerics`` each
floating-point output is scanned after its kernel and the step stops at the first op that
produced NaN or Inf with an ``InvalidArgumentError`` naming the node, its op and its source
location (gradient nodes carry their forward op's location and say which op they differentiate).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from compiler.codegen.kernel_context import ModuleState, TensorRef, c_string
from compiler.codegen.module_layout import SharedVariable
from compiler.ir.graph import Node
from compiler.ir.op_registry import get_op
from runtime.dtypes import DType

# name -> (op, location text) of every node of a step graph before optimization: what a
# Fused node's ``fused_from`` names are looked up in.
Origins = Dict[str, Tuple[str, str]]

# The C expression that is true for a non-finite element ``v`` of each floating dtype, and
# whether it is NaN (bf16 is stored as its upper 16 bits, in a uint16_t).
_NAN = {DType.f32: "isnan(v)", DType.f64: "isnan(v)", DType.f16: "isnan((float)v)",
        DType.bf16: "((v & 0x7f80) == 0x7f80 && (v & 0x007f) != 0)"}
_INF = {DType.f32: "isinf(v)", DType.f64: "isinf(v)", DType.f16: "isinf((float)v)",
        DType.bf16: "((v & 0x7fff) == 0x7f80)"}

_GRADIENT_SCOPE = re.compile(r"(?:^|/)gradients(?:_\d+)?/(?P<forward>.+?)_grad(?:_\d+)?/")


@dataclass(frozen=True)
class Instrumentation:
    """What to add to generated code. Both off (the default) adds nothing."""
    profile: bool = False
    check_numerics: bool = False

    def __bool__(self) -> bool:
        return self.profile or self.check_numerics

    @property
    def tag(self) -> str:
        """A stable name of this instrumentation, for cache keys ('' when off)."""
        return "+".join(n for n, on in (("profile", self.profile),
                                        ("check-numerics", self.check_numerics)) if on)

    def to_json(self) -> dict:
        return {"profile": self.profile, "check_numerics": self.check_numerics}

    @staticmethod
    def from_options(options) -> "Instrumentation":
        """The instrumentation ``PipelineOptions`` ask for (their ``profile`` and
        ``check_numerics`` fields)."""
        return Instrumentation(bool(getattr(options, "profile", False)),
                               bool(getattr(options, "check_numerics", False)))


def forward_of(name: str) -> Optional[str]:
    """The forward node a gradient node differentiates (``gradients/y_grad/Mul`` -> ``y``),
    or None for a node ``fl.gradients`` did not make."""
    m = _GRADIENT_SCOPE.search(name)
    return m.group("forward") if m else None


def origins_of(nodes) -> Origins:
    """name -> (op, location) of ``nodes`` (a step graph before optimization)."""
    return {n.name: (n.op, str(n.location) if n.location else "") for n in nodes}


def kernel_record(n: Node, origins: Origins) -> dict:
    """What the profile report says about node ``n``'s kernel."""
    record = {"node": n.name, "op": n.op,
              "location": str(n.location) if n.location else "",
              "forward": forward_of(n.name) or ""}
    if n.op == "Fused":
        record["expr"] = n.attrs.get("expr", "")
        record["fused_from"] = [
            {"node": name, "op": origins.get(name, ("", ""))[0],
             "location": origins.get(name, ("", ""))[1]}
            for name in n.attrs.get("fused_from", [])]
    return record


_PROFILE_HELPERS = """\
/* --profile: per-kernel time (ns) and calls, read by the runtime after a step. */
static inline int64_t flowc_prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}"""


def _counters(n: int) -> List[SharedVariable]:
    size = max(n, 1)
    return [SharedVariable("int64_t", f"flowc_prof_ns[{size}]", "--profile: ns per kernel"),
            SharedVariable("int64_t", f"flowc_prof_calls[{size}]", "--profile: calls per kernel")]


_COUNTER_ADD = """\
static inline void flowc_prof_add(int32_t k, int64_t t0) {
    __atomic_fetch_add(&flowc_prof_ns[k], flowc_prof_now() - t0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&flowc_prof_calls[k], 1, __ATOMIC_RELAXED);
}"""


def _counter_exports(n: int) -> str:
    size = max(n, 1)
    return f"""\
int32_t flowc_profile_size(void) {{ return {n}; }}
const int64_t *flowc_profile_ns(void) {{ return flowc_prof_ns; }}
const int64_t *flowc_profile_calls(void) {{ return flowc_prof_calls; }}
void flowc_profile_reset(void) {{
    for (int32_t k = 0; k < {size}; k++) {{
        __atomic_store_n(&flowc_prof_ns[k], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&flowc_prof_calls[k], 0, __ATOMIC_RELAXED);
    }}
}}"""


def profile_exports(n: int) -> str:
    """A CUDA module's counters and their exports (C linkage), as a CPU module has them
    (``flowc_profile_size/ns/calls/reset``, read by ``runtime/profile.py``)."""
    size = max(n, 1)
    return (f"static int64_t flowc_prof_ns[{size}], flowc_prof_calls[{size}];\n"
            f"extern \"C\" {{\n{_counter_exports(n)}\n}}")


def _nonfinite_helper(dtype: DType, ctype: str) -> str:
    return f"""\
/* --check-numerics: 1 if the tensor has a NaN, 2 an Inf, 3 both, else 0. */
static int flowc_nonfinite_{dtype.ir_name}(const flowc_tensor *t) {{
    int64_t n = 1;
    for (int32_t d = 0; d < t->rank; d++) n *= t->dims[d];
    const {ctype} *p = (const {ctype} *)t->data;
    int found = 0;
    for (int64_t i = 0; i < n; i++) {{
        const {ctype} v = p[i];
        if ({_NAN[dtype]}) found |= 1;
        else if ({_INF[dtype]}) found |= 2;
    }}
    return found;
}}"""


def checks_outputs(n: Node) -> bool:
    """Whether ``--check-numerics`` scans ``n``'s outputs: views of an input and values
    received from another device were checked where they were made."""
    op = get_op(n.op, n)
    return op.c_alias is None and not op.is_communication


def numerics_subject(n: Node, k: int) -> str:
    """What a numerics error says made the value: the op (and output), and for a gradient
    node the forward op it differentiates."""
    what = f"{n.op} output {k}" if len(n.outputs) > 1 else n.op
    forward = forward_of(n.name)
    if forward:
        what += f" in the backward pass (gradient of '{forward}')"
    return what


class Instrumenter:
    """Adds timers and numerics checks around the code the emitter made for each node."""

    def __init__(self, instrumentation: Instrumentation, module: ModuleState,
                 origins: Optional[Origins] = None):
        self.instrumentation = instrumentation
        self.module = module
        self.origins = origins or {}
        self.kernels: List[dict] = []          # the kernel table: index = counter index

    def wrap(self, n: Node, lines: Sequence[str], outputs: Sequence[TensorRef]) -> List[str]:
        """``lines`` (a node's kernel call) timed and followed by its numerics checks."""
        out = list(lines)
        if self.instrumentation.profile:
            k = len(self.kernels)
            self.kernels.append(kernel_record(n, self.origins))
            self.module.add_global(_PROFILE_HELPERS)
            out = (["{ const int64_t flowc_t0 = flowc_prof_now();"]
                   + ["    " + line for line in out]
                   + [f"    flowc_prof_add({k}, flowc_t0); }}"])
        if self.instrumentation.check_numerics and checks_outputs(n):
            for k, ref in enumerate(outputs):
                out.extend(self.check(n, k, ref))
        return out

    def check(self, n: Node, k: int, ref: TensorRef) -> List[str]:
        """The check that output ``k`` of ``n`` (``ref``) is finite ([] if not floating)."""
        if not self.instrumentation.check_numerics or ref.dtype not in _NAN:
            return []
        self.module.add_global(_nonfinite_helper(ref.dtype, ref.ctype))
        what = numerics_subject(n, k)
        loc = str(n.location) if n.location else ""
        return [f"{{ const int flowc_bad = flowc_nonfinite_{ref.dtype.ir_name}(&{ref.var});",
                f"  if (flowc_bad) {{ flowc_fail(st, FLOWC_INVALID_ARGUMENT, {c_string(n.name)}, "
                f"{c_string(loc)}, \"CheckNumerics: %s: Tensor had %s values\", "
                f"{c_string(what)}, flowc_bad == 1 ? \"NaN\" : flowc_bad == 2 ? \"Inf\" : "
                "\"Inf and NaN\"); goto fail; } }"]

    def finish(self) -> dict:
        """Add the module's counters and exports; return what the manifest records."""
        record = {"instrumentation": self.instrumentation.to_json()}
        if self.instrumentation.profile:
            self.module.add_global(_PROFILE_HELPERS)
            for counter in _counters(len(self.kernels)):
                self.module.add_shared(counter)
            self.module.add_global(_COUNTER_ADD)
            self.module.add_export(_counter_exports(len(self.kernels)))
            record["kernels"] = list(self.kernels)
        return record
