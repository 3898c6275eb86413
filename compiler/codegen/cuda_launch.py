"""Building one ``__global__`` kernel for a node and the host code that launches it.

A kernel's parameters are the device pointers of the node's tensors and the host values of
whatever the kernel cannot know at compile time (dynamic dims, strides): ``value(expr)`` keeps
a literal as a literal (baked into the kernel) and turns any other host expression into a
parameter. Kernels with identical text are emitted once per module and shared by every node
that launches them, as the C emitter shares kernel functions.

Data errors found on the device (an index out of range) are reported through the step's
error flags: ``report(message)`` returns a device statement that raises the flag of an error
site (node, location, message) registered with the module; the host entry checks the flags
when the step's stream is done and names the first node that failed.
"""
from __future__ import annotations

import re
from typing import List, Optional, Sequence, Tuple

from compiler.codegen.kernel_context import KernelContext, ModuleState, TensorRef

_LITERAL = re.compile(r"^-?\d+$")


class CudaModuleState(ModuleState):
    """ModuleState plus what only a CUDA module has: kernels by text, device error sites."""

    def __init__(self):
        super().__init__()
        self.kernels: List[str] = []
        self._kernel_names: dict = {}
        self.error_sites: List[Tuple[str, str, str, str]] = []   # (node, location, message, code)

    def kernel(self, hint: str, text: str) -> str:
        """Add kernel ``text`` (with ``FLOWC_KERNEL_NAME`` for its name) once; its name."""
        name = self._kernel_names.get(text)
        if name is None:
            safe = re.sub(r"\W", "_", hint)
            name = f"flowc_k{len(self._kernel_names)}_{safe}"
            self._kernel_names[text] = name
            self.kernels.append(text.replace("FLOWC_KERNEL_NAME", name))
        return name

    def error_site(self, node: str, location: str, message: str, code: str) -> int:
        """The index (from 1; 0 is 'any error') of a device error site."""
        site = (node, location, message, code)
        if site not in self.error_sites:
            self.error_sites.append(site)
        return self.error_sites.index(site) + 1


def is_literal(expr: str) -> bool:
    return bool(_LITERAL.match(expr.strip()))


class CudaLaunch:
    """The parameters of one kernel being written for ``kc``'s node, and its launch."""

    def __init__(self, kc: KernelContext, hint: Optional[str] = None):
        self.kc = kc
        self.hint = hint or kc.node.op
        self.params: List[str] = []
        self.args: List[str] = []
        self._values: dict = {}
        self._pointers: dict = {}
        self.uses_errors = False
        self.guards_state = False

    @property
    def module(self) -> CudaModuleState:
        return self.kc.module

    def _param(self, decl: str, name: str, arg: str) -> str:
        self.params.append(f"{decl} {name}")
        self.args.append(arg)
        return name

    def ptr(self, ref: TensorRef, writable: bool = False) -> str:
        """A device pointer parameter to ``ref``'s data (const unless ``writable``)."""
        key = (ref.var, writable)
        if key not in self._pointers:
            name = f"p{len(self.params)}"
            decl = f"{'' if writable else 'const '}{ref.ctype} *__restrict__"
            self._pointers[key] = self._param(decl, name, f"({ref.ctype} *){ref.var}.data")
        return self._pointers[key]

    def raw_ptr(self, ctype: str, arg: str, writable: bool = True) -> str:
        """A device pointer parameter from a host expression ``arg``."""
        name = f"p{len(self.params)}"
        return self._param(f"{'' if writable else 'const '}{ctype} *__restrict__", name,
                           f"({ctype} *)({arg})")

    def value(self, expr: str, ctype: str = "int64_t") -> str:
        """``expr`` as the kernel sees it: a literal stays one, anything else is a parameter."""
        expr = str(expr)
        if is_literal(expr):
            return expr
        key = (expr, ctype)
        if key not in self._values:
            name = f"v{len(self.params)}"
            self._values[key] = self._param(ctype, name, f"({ctype})({expr})")
        return self._values[key]

    def report(self, message: str, code: str = "FLOWC_INVALID_ARGUMENT",
               values: Sequence[str] = ()) -> str:
        """A device statement raising the error flag of this node's ``message``. With
        ``values`` (device expressions, at most 6) ``message`` is a printf format taking them
        as ``long long`` (the C kernel's own message, ``%lld`` for each): the first report
        of the site keeps its values and the host formats them in."""
        n = self.kc.node
        if len(values) > 6:
            raise ValueError("a device error carries at most 6 values")
        fmt = message if values else message.replace("%", "%%")
        site = self.module.error_site(n.name, str(n.location) if n.location else "", fmt,
                                      code)
        self.uses_errors = True
        if not values:
            return f"flowc_raise(flowc_err, {self._site_param(site)});"
        args = [f"(long long)({v})" for v in values] + ["0LL"] * (6 - len(values))
        return f"flowc_raise_at(flowc_err, {self._site_param(site)}, {', '.join(args)});"

    def _site_param(self, site: int) -> str:
        key = ("site", site)
        if key not in self._values:
            self._values[key] = self._param("int32_t", f"s{len(self.params)}", str(site))
        return self._values[key]

    def guard_state(self) -> None:
        """The kernel does nothing once an earlier kernel of the step raised an error, so a
        failing step leaves variables unchanged (as the C backend does)."""
        self.guards_state = True

    def launch(self, body: str, count: str, *, hint: Optional[str] = None,
               threads: Optional[str] = None, shared: str = "0") -> str:
        """Host code launching ``body`` (a kernel body over the parameters made so far) with
        enough threads for a grid-stride loop over ``count`` items (``threads`` overrides the
        block count expression; ``shared``: dynamic shared memory bytes)."""
        params = list(self.params)
        args = list(self.args)
        if self.uses_errors or self.guards_state:
            params.insert(0, "int32_t *__restrict__ flowc_err")
            args.insert(0, "flowc_err")
        prologue = "    if (flowc_err[0]) return;\n" if self.guards_state else ""
        signature = f"FLOWC_KERNEL_NAME({', '.join(params) or 'void'})"
        text = (f"{self.kc.target.kernel_qualifier} {signature} {{\n{prologue}"
                + "\n".join("    " + line if line else "" for line in body.strip("\n").splitlines())
                + "\n}\n")
        name = self.module.kernel(hint or self.hint, text)
        count = str(count)
        grid = threads or f"flowc_grid({count})"
        return (f"if ((int64_t)({count}) > 0) {{\n"
                f"    FLOWC_LAUNCH({name}, {grid}, FLOWC_BLOCK, {shared}, flowc_stream)({', '.join(args)});\n"
                f"    FLOWC_LAUNCHED();\n}}")


def device_loop(index: str, count: str) -> str:
    """The header of a grid-stride loop (every generated kernel's shape)."""
    return (f"for (int64_t {index} = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; "
            f"{index} < (int64_t)({count}); {index} += (int64_t)gridDim.x * blockDim.x)")

