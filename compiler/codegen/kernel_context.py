"""What an op's C emitter sees: its inputs and outputs as ``TensorRef``s, attrs, the target,
and helpers to render templates and report run-time errors naming the node."""
from __future__ import annotations

import json
from typing import Dict, List, Optional, Sequence

from compiler.codegen import templates
from compiler.codegen.target import CTarget
from compiler.errors import CodegenError, StaticValueNeeded
from compiler.ir.graph import Node
from compiler.ir.op_registry import get_op, has_op
from compiler.ir.types import TensorType
from runtime.dtypes import DType
from runtime.module import MAX_RANK


def c_string(text: str) -> str:
    return json.dumps(text)


class TensorRef:
    """A tensor in generated code: a ``flowc_tensor`` variable plus what is known statically.

    Dimension expressions are integer literals where the dim is known at compile time
    (baked into the loops) and ``var.dims[k]`` otherwise.
    """

    def __init__(self, var: str, ttype: TensorType, target: CTarget, node: Optional[Node] = None,
                 address: Optional[str] = None):
        self.var = var
        # A C expression of the buffer's address (``flowc_arena + 64``) for a value that has no
        # tensor slot (the emitter's ``slotless`` values): code reads ``data``, never ``var``.
        self.address = address
        self.type = ttype
        self.dtype: DType = ttype.dtype
        self.target = target
        self.shape = ttype.shape
        if ttype.shape is None:
            hint = "make the shape-like inputs constant"
            if node is not None and has_op(node.op):
                hint = get_op(node.op).extra.get("c_rank_hint", hint)
            raise StaticValueNeeded("an output has unknown rank; the C backend needs ranks "
                                    f"known at compile time ({hint})", node)
        if len(ttype.shape) > MAX_RANK:
            raise CodegenError(f"an output has rank {len(ttype.shape)}; the C backend supports "
                               f"at most {MAX_RANK} dims", node)
        # Dynamic dims known to equal another tensor's dim are spelled like it, so kernels can
        # see that two tensors have the same shape (set by the emitter).
        self.dim_alias: List[Optional[str]] = [None] * len(ttype.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def ctype(self) -> str:
        return self.target.c_type(self.dtype)

    @property
    def data(self) -> str:
        if self.address is not None:
            return f"(({self.ctype} *)({self.address}))"
        return f"(({self.ctype} *){self.var}.data)"

    @property
    def static(self) -> bool:
        return all(d is not None for d in self.shape)

    def dim(self, k: int) -> str:
        if k < 0:
            k += self.rank
        d = self.shape[k]
        if d is not None:
            return str(d)
        return self.dim_alias[k] or f"{self.var}.dims[{k}]"

    @property
    def dims(self) -> List[str]:
        return [self.dim(k) for k in range(self.rank)]

    def dim_product(self, start: int = 0, stop: Optional[int] = None) -> str:
        return product(self.dims[start:stop])

    @property
    def size(self) -> str:
        return product(self.dims)

    def stride(self, k: int) -> str:
        """Elements between consecutive indices of dim ``k`` (row-major)."""
        return product(self.dims[k + 1:])

    def __str__(self) -> str:
        return self.var


def shape_printf(ref: TensorRef):
    """``ref``'s shape for a run-time message: a printf format written as the interpreter
    writes shapes (``[2, 3]``) and its arguments, one ``long long`` per dim."""
    return ("[" + ", ".join("%lld" for _ in range(ref.rank)) + "]",
            [f"(long long)({d})" for d in ref.dims])


def product(exprs: Sequence[str]) -> str:
    """C expression for a product of dims, folding literals."""
    const = 1
    symbolic = []
    for e in exprs:
        if e.lstrip("-").isdigit():
            const *= int(e)
        else:
            symbolic.append(e)
    if const == 0:
        return "0"
    parts = ([str(const)] if const != 1 or not symbolic else []) + symbolic
    if len(parts) == 1:
        return parts[0]
    return "(" + " * ".join(f"(int64_t){p}" if i == 0 and not p.isdigit() else p
                            for i, p in enumerate(parts)) + ")"


class KernelContext:
    """Handed to ``OpDef.c_kernel(kc)`` and ``OpDef.c_output_dims(kc)``."""

    def __init__(self, node: Node, inputs: List[TensorRef], outputs: List[TensorRef],
                 target: CTarget, module: "ModuleState"):
        self.node = node
        self.inputs = inputs
        self.outputs = outputs
        self.target = target
        self.module = module
        self.attrs = node.attrs
        self.checks: List[str] = []
        self._tmp_counts: Dict[str, int] = {}

    @property
    def out(self) -> TensorRef:
        return self.outputs[0]

    def attr(self, name: str):
        return self.node.attrs[name]

    def input_value(self, i: int):
        """The value of input ``i`` if it is known at compile time (a constant), else None."""
        from compiler.ir.construct import constant_value
        return constant_value(self.node.inputs[i])

    def tmp(self, prefix: str = "t") -> str:
        """A C name for a local of this node's code, numbered per node, not per module: a
        node's code is a C block of its own, and two nodes with the same code must get the
        same text so they share one kernel function."""
        n = self._tmp_counts.get(prefix, 0)
        self._tmp_counts[prefix] = n + 1
        return f"{prefix}{n}"

    def literal(self, value, dtype: DType) -> str:
        return self.target.literal(value, dtype)

    def math(self, fn: str, dtype: DType) -> str:
        return self.target.math(fn, dtype)

    def fail(self, fmt: str, *args: str, code: str = "FLOWC_INVALID_ARGUMENT",
             cleanup: str = "") -> str:
        """A C statement that reports an error naming this node and leaves the step; C code
        ``cleanup`` runs after the message is made (it may free what the message reads).

        The node's name and location are the kernel function's ``flowc_node``/``flowc_loc``
        parameters, so nodes with identical code share one compiled kernel.
        """
        extra = "".join(", " + a for a in args)
        cleanup = f" {cleanup}" if cleanup else ""
        return (f"{{ flowc_fail(st, {code}, flowc_node, flowc_loc, "
                f"{c_string(fmt)}{extra});{cleanup} goto fail; }}")

    def check(self, condition: str, fmt: str, *args: str) -> None:
        """Emit, before the outputs are allocated, a run-time check that ``condition`` holds."""
        if condition in ("1", "true"):
            return
        self.checks.append(f"if (!({condition})) {self.fail(fmt, *args)}")

    def check_scalar(self, i: int, name: str) -> None:
        """A run-time check that input ``i``, which the kernel reads as one value (``data[0]``),
        has one element: a fed ``[?]`` may be empty, and reading it would read past its buffer.
        In the interpreter's words: ``name must be a scalar, got shape [0]``."""
        ref = self.inputs[i]
        if ref.rank == 0 or ref.size == "1":
            return
        fmt, args = shape_printf(ref)
        line = f"if (!({ref.size} == 1)) " + self.fail(f"{name} must be a scalar, got shape {fmt}",
                                                       *args)
        if line not in self.checks:         # an op's dims and its kernel may both ask
            self.checks.append(line)

    def type_checks(self, ref: TensorRef, what: str) -> List[str]:
        """C statements that fail unless the tensor ``ref.var`` (filled at run time: a feed, a
        received tensor) has ``ref``'s rank, dtype and static dims; ``what`` names it."""
        var = ref.var
        checks = [f"if ({var}.rank != {ref.rank} || {var}.dtype != {ref.dtype.code}) "
                  + self.fail(f"{what} has the wrong rank or dtype (expected {ref.type})")]
        for d, dim in enumerate(ref.shape):
            if dim is not None:
                checks.append(f"if ({var}.dims[{d}] != {dim}) "
                              + self.fail(f"{what} dim {d} is %lld, expected {dim}",
                                          f"(long long){var}.dims[{d}]"))
        return checks

    def check_dims_equal(self, a: str, b: str, what: str) -> None:
        """Dims must match; checked here if both are literals, else at run time."""
        if a.isdigit() and b.isdigit():
            if a != b:
                raise CodegenError(f"{what}: {a} != {b}", self.node)
            return
        self.check(f"{a} == {b}", what + ": %lld != %lld", f"(long long)({a})", f"(long long)({b})")

    def require(self, feature: str) -> None:
        """Ask for a module-level feature (``blas``)."""
        self.module.features.add(feature)

    def render(self, template: str, **variables) -> str:
        env = dict(kc=self, node=self.node, inputs=self.inputs, outputs=self.outputs,
                   out=self.outputs[0] if self.outputs else None, target=self.target)
        env.update(variables)
        return templates.render(self.target.name, template, **env)

    def error(self, message: str) -> CodegenError:
        return CodegenError(message, self.node)

    def static_error(self, message: str) -> StaticValueNeeded:
        """The error for something the C code needs at compile time that the step computes
        at run time (a Session compiles the step per shapes or values fed instead)."""
        return StaticValueNeeded(message, self.node)


class ModuleState:
    """Module-wide state while emitting one translation unit."""

    def __init__(self):
        self.features: set = set()
        self.globals: List[str] = []
        self._counts: Dict[str, int] = {}
        self.variables: list = []          # (name, dtype, shape): the step's rt->vars
        self.streams: List[str] = []       # random-op streams: the step's rt->streams
        self.queues: list = []             # (name, components, capacity): the step's rt->queues
        # Module-level variables the code writes (``SharedVariable``, defined once in a module
        # built as several units) and exported functions (beside the entry, in one unit).
        self.shared: list = []
        self.exports: List[str] = []

    def queue_index(self, name: str, components: int, capacity: int) -> int:
        """The index of queue ``name`` in ``rt->queues`` (added on first use)."""
        for k, (n, c, cap) in enumerate(self.queues):
            if n == name:
                return k
        self.queues.append((name, components, capacity))
        return len(self.queues) - 1

    def variable_index(self, name: str, dtype: DType, shape) -> int:
        """The index of variable ``name`` in ``rt->vars`` (added on first use)."""
        for k, (n, d, s) in enumerate(self.variables):
            if n == name:
                if d is not dtype:
                    raise CodegenError(f"variable '{name}' is used as {d.ir_name} and as "
                                       f"{dtype.ir_name} in one step")
                return k
        self.variables.append((name, dtype, None if shape is None else tuple(shape)))
        return len(self.variables) - 1

    def stream_index(self, name: str) -> int:
        """The index of random stream ``name`` in ``rt->streams`` (added on first use)."""
        if name not in self.streams:
            self.streams.append(name)
        return self.streams.index(name)

    def add_global(self, text: str) -> None:
        """Add a module-level C definition (a helper function) once, however often asked."""
        if text not in self.globals:
            self.globals.append(text)

    def add_shared(self, variable) -> None:
        """Add a module-level variable the code writes (a ``module_layout.SharedVariable``)."""
        if variable not in self.shared:
            self.shared.append(variable)

    def add_export(self, text: str) -> None:
        """Add an exported function (defined once, beside the entry)."""
        if text not in self.exports:
            self.exports.append(text)

    def fresh(self, prefix: str) -> str:
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}{n}"
