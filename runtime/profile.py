"""Per-kernel profiles of compiled steps: the counters a ``--profile`` build keeps, read after
a run and turned into a report.

A profiled module (``compiler/codegen/instrument.py``) adds the nanoseconds and calls of each
node's kernel to counters it exports (``flowc_profile_ns/calls``); the artifact manifest holds
its kernel table (node, op, source location, and for a ``Fused`` kernel the nodes it
replaced). ``reset`` zeroes the counters, ``read`` builds a ``Profile``: kernels sorted by
time with their share of the total, per device, and a summary per op type.

The counters belong to the module, not to one call: steps of the same executable that run
at the same time add to the same counters.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from runtime.errors import FlowcError
from runtime.module import ffi


class NotProfiledError(FlowcError):
    """A profile was asked of an executable compiled without ``--profile``."""


@dataclass(frozen=True)
class SourceNode:
    """A node of the graph as written: one of the ops a Fused kernel replaced."""
    node: str
    op: str
    location: str


@dataclass(frozen=True)
class KernelStats:
    """The time one node's kernel took over the profiled steps."""
    device: str
    node: str
    op: str
    location: str
    total_ns: int
    calls: int
    forward: str = ""                   # the forward node, for a gradient node
    fused_from: Tuple[SourceNode, ...] = ()

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.calls if self.calls else 0.0

    def to_json(self) -> dict:
        d = {"device": self.device, "node": self.node, "op": self.op,
             "location": self.location, "total_ns": self.total_ns, "calls": self.calls}
        if self.forward:
            d["forward"] = self.forward
        if self.fused_from:
            d["fused_from"] = [vars(s) for s in self.fused_from]
        return d


@dataclass(frozen=True)
class OpSummary:
    """All kernels of one op type."""
    op: str
    total_ns: int
    calls: int
    kernels: int


@dataclass
class DeviceProfile:
    device: str
    kernels: List[KernelStats]          # sorted by time, longest first

    @property
    def total_ns(self) -> int:
        return sum(k.total_ns for k in self.kernels)


@dataclass
class Profile:
    """Kernel times of ``steps`` runs of one step, per device; ``wall_ns`` is the time the
    runs took as the caller saw it (kernels plus feeding, fetching and waiting)."""
    devices: List[DeviceProfile]
    steps: int = 1
    wall_ns: int = 0

    @property
    def kernels(self) -> List[KernelStats]:
        """Every kernel of every device, longest first."""
        return sorted((k for d in self.devices for k in d.kernels),
                      key=lambda k: (-k.total_ns, k.device, k.node))

    @property
    def total_ns(self) -> int:
        return sum(d.total_ns for d in self.devices)

    def by_op(self) -> List[OpSummary]:
        """One summary per op type, longest first."""
        acc: Dict[str, List[int]] = {}
        for k in self.kernels:
            a = acc.setdefault(k.op, [0, 0, 0])
            a[0] += k.total_ns
            a[1] += k.calls
            a[2] += 1
        return sorted((OpSummary(op, *a) for op, a in acc.items()),
                      key=lambda s: (-s.total_ns, s.op))

    def to_json(self) -> dict:
        return {"steps": self.steps, "wall_ns": self.wall_ns, "total_ns": self.total_ns,
                "devices": [{"device": d.device, "total_ns": d.total_ns,
                             "kernels": [k.to_json() for k in d.kernels]}
                            for d in self.devices],
                "by_op": [vars(s) for s in self.by_op()]}

    def format(self, top: Optional[int] = None) -> str:
        """The report: a table of kernels per device (time, share, calls, node, op, source
        line; the nodes each Fused kernel replaced under it), then the per-op summary."""
        total = self.total_ns
        lines = [f"profile: {self.steps} step{'s' if self.steps != 1 else ''}, "
                 f"{_ms(self.wall_ns)} wall, {_ms(total)} in "
                 f"{sum(len(d.kernels) for d in self.devices)} kernels"
                 + (f" ({100.0 * total / self.wall_ns:.0f}% of wall)" if self.wall_ns else "")]
        for d in self.devices:
            lines.append("")
            lines.append(f"device {d.device}: {_ms(d.total_ns)}")
            lines.append(f"  {'time':>10} {'%':>6} {'calls':>7}  {'node':<32} {'op':<16} source")
            shown = d.kernels if top is None else d.kernels[:top]
            for k in shown:
                lines.append(f"  {_us(k.total_ns):>10} {_pct(k.total_ns, total):>6} {k.calls:>7}  "
                             f"{k.node:<32} {k.op:<16} {k.location or '-'}"
                             + (f"  (gradient of '{k.forward}')" if k.forward else ""))
                for s in k.fused_from:
                    lines.append(f"  {'':>10} {'':>6} {'':>7}    fused {s.node} "
                                 f"({s.op or '?'}) {s.location or '-'}")
            if len(shown) < len(d.kernels):
                rest = d.kernels[len(shown):]
                lines.append(f"  {_us(sum(k.total_ns for k in rest)):>10} "
                             f"{_pct(sum(k.total_ns for k in rest), total):>6} "
                             f"{sum(k.calls for k in rest):>7}  ({len(rest)} more kernels)")
        lines.append("")
        lines.append("per op type:")
        lines.append(f"  {'time':>10} {'%':>6} {'calls':>7} {'kernels':>7}  op")
        for s in self.by_op():
            lines.append(f"  {_us(s.total_ns):>10} {_pct(s.total_ns, total):>6} {s.calls:>7} "
                         f"{s.kernels:>7}  {s.op}")
        lines.append(f"  {_us(total):>10} {_pct(total, total):>6} "
                     f"{sum(s.calls for s in self.by_op()):>7} "
                     f"{sum(s.kernels for s in self.by_op()):>7}  total")
        return "\n".join(lines) + "\n"


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f} ms"


def _us(ns: int) -> str:
    """A duration in the unit that reads best: 850ns, 12.3us, 4.567ms."""
    if ns < 1000:
        return f"{ns}ns"
    if ns < 1000000:
        return f"{ns / 1e3:.1f}us"
    return f"{ns / 1e6:.3f}ms"


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


# --- reading the counters ----------------------------------------------------------------
def device_executables(executable) -> List[Tuple[str, object]]:
    """(device, Executable) of each device of a step (one for a one-device executable)."""
    parts = getattr(executable, "parts", None)
    if parts is not None:
        return [(p.device, p.executable) for p in parts]
    table = executable.kernel_table or {}
    return [(table.get("device", ""), executable)]


def is_profiled(executable) -> bool:
    """Whether every module of ``executable`` was compiled with ``--profile`` (a GPU module
    times each node's work with CUDA events, ``docs/profiling.md``)."""
    return all(exe.kernel_table is not None for _, exe in device_executables(executable))


def _require_profiled(executable) -> None:
    if not is_profiled(executable):
        raise NotProfiledError("this step was compiled without profiling; compile it with "
                               "--profile (or run it with RunOptions(trace_level=FULL_TRACE))")


def reset(executable) -> None:
    """Zero the kernel counters of every device of ``executable``."""
    _require_profiled(executable)
    for _, exe in device_executables(executable):
        exe.module.lib.flowc_profile_reset()


def read(executable, steps: int = 1, wall_ns: int = 0) -> Profile:
    """The counters of every device of ``executable`` (since the last ``reset``) as a Profile."""
    _require_profiled(executable)
    devices = []
    for device, exe in device_executables(executable):
        lib = exe.module.lib
        table = exe.kernel_table["kernels"]
        n = int(lib.flowc_profile_size())
        if n != len(table):
            raise NotProfiledError(f"{exe.module.path} has {n} kernel counters but its manifest "
                                   f"lists {len(table)} kernels")
        ns = ffi.unpack(lib.flowc_profile_ns(), n) if n else []
        calls = ffi.unpack(lib.flowc_profile_calls(), n) if n else []
        kernels = [KernelStats(device, k["node"], k["op"], k.get("location", ""), int(t), int(c),
                               k.get("forward", ""),
                               tuple(SourceNode(s["node"], s.get("op", ""), s.get("location", ""))
                                     for s in k.get("fused_from", ())))
                   for k, t, c in zip(table, ns, calls)]
        kernels.sort(key=lambda k: (-k.total_ns, k.node))
        devices.append(DeviceProfile(device, kernels))
    return Profile(devices, steps, wall_ns)


def profile_runs(executable, run: Callable[[], object], steps: int = 1) -> Tuple[list, Profile]:
    """Call ``run()`` ``steps`` times with fresh counters; its results and the Profile."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    reset(executable)
    results = []
    t0 = time.perf_counter_ns()
    for _ in range(steps):
        results.append(run())
    wall = time.perf_counter_ns() - t0
    return results, read(executable, steps, wall)
