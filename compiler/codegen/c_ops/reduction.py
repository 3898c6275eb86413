"""The C lowering of reductions (``compiler/ops/reduction.py``): Sum, Mean, Max, Min, Prod, All,
Any and ArgMax / ArgMin, over constant axes.

The C kernels collapse the input into groups of adjacent reduced / kept dims, so a reduction
over the last axis (or the leading axes) becomes one contiguous loop (``reduction.c.j2``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from compiler.codegen.kernel_context import KernelContext as CKernelContext, product
from compiler.ir.construct import constant_value
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.reduction import normalize_axes
from runtime.dtypes import DType


def module_helper(kc: CKernelContext, name: str, text: str) -> str:
    """Add a module-level C helper once per module (``name`` must identify ``text``)."""
    kc.module.add_global(text)
    return name


@dataclass(frozen=True)
class Reducer:
    """How one reduction is written in C: accumulator type, identity, combine and finalize."""
    acc: str
    init: str
    combine: Callable[[str, str], str]
    final: Callable[[str, str], str]          # (accumulator, element count) -> output value
    final_is_cast: bool = True                # final(acc) is just a conversion
    convert: Optional[Callable[[str], str]] = None    # element -> accumulator (default: a cast)

    def load(self, element: str) -> str:
        """What the input element ``element`` contributes, as an accumulator value."""
        return self.convert(element) if self.convert else f"({self.acc}){element}"


# The accumulator of a floating Prod: a mantissa and an unbounded exponent (prod_acc.c.j2).
PROD_ACC = "flowc_prod_acc"


def _float_prod(kc: CKernelContext, ctype: str) -> Reducer:
    """Prod of floats as the reference kernel computes it (``_float_prod`` in
    ``compiler/ops/reduction.py``): the exact product rounded once at the end, so one that
    overflows is inf with its sign in whatever order lanes, chunks or GPU threads multiply."""
    kc.module.add_global(kc.render("prod_acc.c.j2"))
    return Reducer(PROD_ACC, "flowc_prod_one()", lambda a, b: f"flowc_prod_mul({a}, {b})",
                   lambda acc, n: f"({ctype})flowc_prod_value({acc})", final_is_cast=False,
                   convert=lambda e: f"flowc_prod_load((double)({e}))")


def _sum_acc(dtype: DType, wide: bool = False) -> str:
    if dtype.is_floating:
        return "double"
    return "uint64_t" if wide or dtype.itemsize > 4 else "uint32_t"


def _max_combine(dtype: DType, greater: str) -> Callable[[str, str], str]:
    if dtype.is_floating:
        # Bitwise | (not ||) keeps the select branch-free, so it vectorizes; NaN sticks.
        return lambda a, b: f"((({b}) {greater} ({a})) | (({b}) != ({b}))) ? ({b}) : ({a})"
    return lambda a, b: f"({b}) {greater} ({a}) ? ({b}) : ({a})"


def _mean_final(dtype: DType, ctype: str) -> Callable[[str, str], str]:
    if dtype.is_floating:
        return lambda acc, n: f"({ctype})(({acc}) / (double)({n}))"
    if dtype.is_signed:
        return lambda acc, n: (f"(({n}) == 0 ? ({ctype})0 : "
                               f"({ctype})((int64_t)({acc}) / (int64_t)({n})))")
    return lambda acc, n: f"(({n}) == 0 ? ({ctype})0 : ({ctype})(({acc}) / (uint64_t)({n})))"


def c_reducer(op: str, kc: CKernelContext) -> Reducer:
    """The C description of reduction ``op`` for the node's input dtype."""
    dtype = kc.inputs[0].dtype
    ctype = kc.inputs[0].ctype
    t = kc.target

    def cast(acc: str, count: str) -> str:
        return f"({ctype})({acc})"

    if op == "Sum":
        return Reducer(_sum_acc(dtype), "0", lambda a, b: f"({a}) + ({b})", cast)
    if op == "Mean":
        return Reducer(_sum_acc(dtype, wide=True), "0", lambda a, b: f"({a}) + ({b})",
                       _mean_final(dtype, ctype), final_is_cast=False)
    if op == "Prod":
        if dtype.is_floating:
            return _float_prod(kc, ctype)
        return Reducer(_sum_acc(dtype), "1", lambda a, b: f"({a}) * ({b})", cast)
    if op == "Max":
        return Reducer(ctype, t.min_value(dtype), _max_combine(dtype, ">"), cast)
    if op == "Min":
        return Reducer(ctype, t.max_value(dtype), _max_combine(dtype, "<"), cast)
    if op == "All":
        return Reducer("bool", "true", lambda a, b: f"({a}) && ({b})", cast)
    if op == "Any":
        return Reducer("bool", "false", lambda a, b: f"({a}) || ({b})", cast)
    raise kc.error(f"no C reducer for {op}")


def constant_axes(kc: CKernelContext, i: int = 1) -> List[int]:
    """The node's constant reduction axes; the C backend cannot reduce over run-time axes."""
    value = constant_value(kc.node.inputs[i])
    if value is None:
        raise kc.static_error("the C backend needs the reduction axes to be known at compile "
                              "time (a constant); these are computed at run time")
    return normalize_axes(value, kc.inputs[0].rank, kc.error)


def collapse_groups(dims: Sequence[str], reduced: Sequence[int]) -> List[Tuple[str, bool]]:
    """Merge adjacent dims that are all reduced or all kept: [(extent, is_reduced), ...].

    Static size-1 dims are dropped (they change no index); the result is never empty.
    """
    groups: List[Tuple[List[str], bool]] = []
    for k, d in enumerate(dims):
        if d == "1":
            continue
        r = k in reduced
        if groups and groups[-1][1] == r:
            groups[-1][0].append(d)
        else:
            groups.append(([d], r))
    if not groups:
        return [("1", False)]
    return [(product(ds), r) for ds, r in groups]


def _reduce_output_dims(kc: CKernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    axes = constant_axes(kc)
    keep = kc.attr("keep_dims")
    return [[("1" if k in axes else d) for k, d in enumerate(x.dims) if keep or k not in axes]]


def _output_strides(groups: List[Tuple[str, bool]]) -> List[str]:
    """Per group, its stride in the output (kept groups only; "0" for reduced groups)."""
    strides = []
    for j, (_, r) in enumerate(groups):
        later = [e for e, rr in groups[j + 1:] if not rr]
        strides.append("0" if r else product(later))
    return strides


def _lanes(acc_ctype: str) -> int:
    """Independent accumulators for a contiguous reduction: four 256-bit vectors' worth (four
    chains for Prod's mantissa-exponent pairs, which do not vectorize)."""
    if acc_ctype == PROD_ACC:
        return 4
    return 16 if acc_ctype in ("double", "int64_t", "uint64_t") else 32


def emit_reduction(kc: CKernelContext, op: str) -> str:
    """C for a reduction: a contiguous fast path when only trailing dims are reduced."""
    x = kc.inputs[0]
    axes = constant_axes(kc)
    red = c_reducer(op, kc)
    groups = collapse_groups(x.dims, axes)
    count = product([x.dim(a) for a in axes])
    out_size = product([e for e, r in groups if not r])
    helper = f"flowc_reduce_{op.lower()}_{x.dtype.ir_name}"
    module_helper(kc, helper, kc.render("reduction.c.j2", part="helper", fn=helper, red=red,
                                        lanes=_lanes(red.acc)))
    rows = groups[-1][1] and not any(r for _, r in groups[:-1])
    acc_is_out = red.acc == x.ctype
    return (kc.render("reduction.c.j2", part="body", fn=helper, red=red,
                                  groups=groups, ostrides=_output_strides(groups), count=count,
                                  out_size=out_size, rows=rows, acc_is_out=acc_is_out))


for _name in ("Sum", "Mean", "Prod", "Max", "Min", "All", "Any"):
    set_c_kernel(_name, lambda kc, name=_name: emit_reduction(kc, name), _reduce_output_dims)


# --- ArgMax / ArgMin -----------------------------------------------------------------------
def _arg_output_dims(kc: CKernelContext) -> List[List[str]]:
    (axis,) = constant_axes(kc)
    return [[d for k, d in enumerate(kc.inputs[0].dims) if k != axis]]


def emit_arg_reduction(kc: CKernelContext, greater: str) -> str:
    """C for ArgMax (``greater`` is ">") or ArgMin ("<") over one constant axis."""
    x = kc.inputs[0]
    (axis,) = constant_axes(kc)
    extent = x.dim(axis)
    kc.check(f"{extent} > 0", f"reduction axis {axis} is empty (size 0)")
    return (kc.render("argminmax.c.j2", outer=x.dim_product(0, axis),
                                  extent=extent, inner=x.dim_product(axis + 1),
                                  greater=greater, floating=x.dtype.is_floating))


for _name, _cmp in (("ArgMax", ">"), ("ArgMin", "<")):
    set_c_kernel(_name, lambda kc, c=_cmp: emit_arg_reduction(kc, c), _arg_output_dims)
