"""ONNX control flow: ``If``, ``Loop`` and ``Scan``, lowered to flowc's own conditionals and
loops (``fl.cond``, ``fl.while_loop``: TensorFlow 1.x's Switch/Merge and Enter/Exit frames,
which the C backend turns back into ``if`` and ``while``). Their subgraphs are lowered in place
(``LoweringContext.lower_subgraph``) inside the branch or loop body, so their ops belong to it,
and the values of enclosing scopes they read cross into it as flowc's builders route outside
tensors (a ``Switch`` per branch, a loop-invariant ``Enter``).

- ``If``: a cond over the two branches, any number of outputs; when the condition is known at
  import time only the taken branch is lowered (inlined).
- ``Loop``: a while loop over (iteration number, condition, loop-carried values), every
  combination of the optional trip count ``M`` and condition; the body's condition output
  decides the next iteration, as in onnxruntime (and the onnx reference). A loop-carried
  value whose shape changes between iterations gets a less specific shape in the loop.
- ``Scan`` (opset 9+: input/output axes and directions; opset 8: batched, with
  ``sequence_lens``): a while loop over the scan axis whose iterations read their element with
  a ``GatherV2`` of the index.

Scan outputs go, one element per iteration, into a ``TensorArrayV3`` (``TensorArrayWriteV3``
at the iteration's index, its flow a loop variable) and are stacked after the loop with
``TensorArrayGatherV3``: one copy per element, and the stacked result has the iteration count
as its first dim (moved to ``scan_output_axes`` by a transpose). What the arrays hold is only
known once the body is lowered (an untyped subgraph output); when the body shows a guess
wrong (that dtype, or a loop-carried value that changes shape), the loop is built again with
what it showed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Set, Tuple

import numpy as np
import onnx

import dsl as fl
from compiler.ir.graph import Node
from compiler.ir.types import Shape
from dsl.context import get_default_graph, name_scope
from dsl.control_flow_ops import cond as fl_cond, while_loop
from dsl.onnx.dtypes import flowc_dtype
from dsl.onnx.folding import static_value
from dsl.onnx.values import index_const, index_scalar, normalize_axis, rank_of, shape_i64
from dsl.ops import apply_op
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType

_MAX_BUILDS = 8          # a loop is rebuilt at most this often (each build learns something)


# --- small helpers --------------------------------------------------------------------------
def _one_element(ctx, x: Tensor, what: str, dtype: Optional[DType] = None) -> Tensor:
    """``x`` as a scalar (ONNX lets a condition or a trip count be a 1-element tensor)."""
    if dtype is not None and x.dtype != dtype:
        raise ctx.error(f"its {what} must be {dtype}, got {x.dtype}")
    shape = static_shape(x)
    if shape is not None and len(shape) == 0:
        return x
    if shape is not None and any(d is not None and d != 1 for d in shape):
        raise ctx.error(f"its {what} must have one element, got shape {list(shape)}")
    return apply_op("Reshape", [x, index_const([])])


def _declared(vi: onnx.ValueInfoProto) -> Tuple[DType, Shape]:
    """What a subgraph output declares of itself: (its dtype, f32 if none; its shape)."""
    if vi.type.WhichOneof("value") != "tensor_type":
        return DType.f32, None
    tt = vi.type.tensor_type
    shape = None
    if tt.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    return flowc_dtype(tt.elem_type) or DType.f32, shape


def _check_tensor_values(ctx, graph: onnx.GraphProto) -> None:
    """Sequences and optionals have no flowc value: refuse them by name."""
    for vi in list(graph.input) + list(graph.output):
        kind = vi.type.WhichOneof("value")
        if kind not in (None, "tensor_type"):
            raise ctx.error(f"subgraph '{graph.name}' has a {kind} value '{vi.name}'; flowc "
                            "has dense tensors only")


def _fits(shape: Shape, invariant: Shape) -> bool:
    if invariant is None:
        return True
    if shape is None or len(shape) != len(invariant):
        return False
    return all(i is None or s == i for s, i in zip(shape, invariant))


def _generalize(invariant: Shape, shape: Shape) -> Shape:
    """The most specific shape both ``invariant`` and ``shape`` fit."""
    if invariant is None or shape is None or len(shape) != len(invariant):
        return None
    return tuple(i if i == s else None for i, s in zip(invariant, shape))


def _erase_since(before: Set[Node]) -> None:
    """Remove the nodes made since ``before`` (a loop about to be built again)."""
    g = get_default_graph()
    created = [n for n in g if n not in before]
    for n in created:
        n.set_inputs([])
        n.set_control_inputs([])
    for n in reversed(created):
        g.erase_node(n)


# --- If ----------------------------------------------------------------------------------------
def lower_if(ctx):
    for name in ("then_branch", "else_branch"):
        _check_tensor_values(ctx, ctx.subgraph(name))
    pred = _one_element(ctx, ctx.input(0), "condition", DType.bool)
    known = static_value(pred.output)
    if known is not None:                # the branch not taken is never imported
        taken = "then_branch" if bool(np.asarray(known).reshape(-1)[0]) else "else_branch"
        return [apply_op("Identity", [t]) for t in ctx.lower_subgraph(taken, [])]
    then_outs: List[Tensor] = []

    def then_fn():
        then_outs.extend(ctx.lower_subgraph("then_branch", []))
        return list(then_outs)

    def else_fn():
        outs = ctx.lower_subgraph("else_branch", [])
        if len(outs) != len(then_outs):
            raise ctx.error(f"then_branch has {len(then_outs)} outputs, else_branch {len(outs)}")
        for k, (t, e) in enumerate(zip(then_outs, outs)):
            if t.dtype != e.dtype:
                raise ctx.error(f"output {k} is {t.dtype} in then_branch and {e.dtype} in "
                                "else_branch")
            if static_shape(t) is None or static_shape(e) is None or len(static_shape(t)) != len(static_shape(e)):
                raise ctx.not_constant(0, f"output {k} has rank {_rank_str(t)} in then_branch "
                                          f"and {_rank_str(e)} in else_branch; flowc needs "
                                          "one rank, so the condition must be known at "
                                          "compile time")
        return list(outs)

    return list(fl_cond(pred, then_fn, else_fn, name="if"))


def _rank_str(t: Tensor) -> str:
    return "unknown" if static_shape(t) is None else str(len(static_shape(t)))


# --- loops that stack what each iteration makes ------------------------------------------------
class _Respecify(Exception):
    """The body showed a guess wrong: build the loop again with these."""

    def __init__(self, invariants: List[Shape], elements: List[Tuple[DType, Shape]]):
        super().__init__("rebuild the loop")
        self.invariants, self.elements = invariants, elements


@dataclass
class _Stacked:
    """A loop's scan output: its TensorArray after the loop, and what an element is."""
    handle: Tensor
    flow: Tensor
    dtype: DType
    element_shape: Shape            # (what the body's static shape says)

    def stack(self, count: Optional[Tensor] = None) -> Tensor:
        """Elements 0 .. count-1 (default: all written) as one tensor [count, ...]."""
        if count is None:
            count = apply_op("TensorArraySizeV3", [self.handle, self.flow])
        indices = fl.range(0, fl.cast(count, fl.int32))
        return apply_op("TensorArrayGatherV3", [self.handle, indices, self.flow],
                        {"dtype": self.dtype, "element_shape": self.element_shape})


StepFn = Callable[[Tensor, List[Tensor]], Tuple[List[Tensor], List[Tensor]]]


def _accumulating_loop(ctx, carried: Sequence[Tensor],
                       scan_elements: Sequence[Tuple[DType, Shape]],
                       cond_fn: Callable[[Tensor, List[Tensor]], Tensor], step_fn: StepFn,
                       size: Optional[Tensor] = None,
                       write_at: Optional[Sequence[Optional[Callable]]] = None,
                       name: str = "loop"):
    """A ``while_loop`` over ``[t, *carried]`` (``t``: the iteration number, i64 from 0) while
    ``cond_fn(t, carried)``; ``step_fn(t, carried)`` gives the next carried values and this
    iteration's scan elements, element k written into TensorArray k at ``write_at[k](t)``
    (default ``t``). The arrays have ``size`` elements (i64 scalar), else grow; an element
    not written (past a Scan-8 entry's length) reads as zeros.

    ``scan_elements``: a guess of each scan element's (dtype, shape), which the arrays are
    made with before the body is lowered; a wrong guess (or a carried value that changes
    shape) rebuilds the loop with what the body showed.

    Returns (the final iteration number, the final carried values, a ``_Stacked`` per scan
    output)."""
    invariants = [static_shape(c) for c in carried]
    elements = list(scan_elements)
    g = get_default_graph()
    for _ in range(_MAX_BUILDS):
        before = set(g)
        try:
            return _build_loop(ctx, carried, invariants, elements, cond_fn, step_fn, size,
                               write_at, name)
        except _Respecify as r:
            _erase_since(before)
            invariants, elements = r.invariants, r.elements
    raise ctx.error("the loop body's types did not settle")     # (each build learns something)


def _build_loop(ctx, carried, invariants, elements, cond_fn, step_fn, size, write_at, name):
    n = len(carried)
    with name_scope(name):
        size32 = fl.cast(size, fl.int32) if size is not None else fl.constant(0, dtype=fl.int32)
        arrays = [apply_op("TensorArrayV3", [size32],
                           {"dtype": d, "element_shape": s, "dynamic_size": size is None,
                            "clear_after_read": True})
                  for d, s in elements]

        def body(t, *rest):
            now, flows = list(rest[:n]), list(rest[n:])
            nxt, elems = step_fn(t, now)
            if len(nxt) != n or len(elems) != len(elements):
                raise ctx.error(f"the body gives {len(nxt)} loop-carried values and "
                                f"{len(elems)} scan outputs; expected {n} and {len(elements)}")
            new_inv = list(invariants)
            for k, (v, c) in enumerate(zip(nxt, now)):
                if v.dtype != c.dtype:
                    raise ctx.error(f"loop-carried value {k} is {c.dtype} before the loop and "
                                    f"{v.dtype} after an iteration")
                if not _fits(static_shape(v), invariants[k]):
                    new_inv[k] = _generalize(invariants[k], static_shape(v))
            new_elements = [(e.dtype, static_shape(e)) for e in elems]
            if new_inv != invariants or new_elements != elements:
                raise _Respecify(new_inv, new_elements)
            written = []
            for k, (e, (handle, _), flow) in enumerate(zip(elems, arrays, flows)):
                at = write_at[k] if write_at is not None and write_at[k] is not None else None
                index = fl.cast(at(t) if at is not None else t, fl.int32)
                written.append(apply_op("TensorArrayWriteV3", [handle, index, e, flow]))
            return [t + 1, *nxt, *written]

        def cond(t, *rest):
            return cond_fn(t, list(rest[:n]))

        start = fl.constant(np.int64(0), dtype=fl.int64)
        out = while_loop(cond, body, [start, *carried, *[a[1] for a in arrays]],
                         shape_invariants=[(), *invariants, *[()] * len(arrays)], name="while")
    stacked = [_Stacked(a[0], f, d, s) for a, f, (d, s) in zip(arrays, out[1 + n:], elements)]
    return out[0], list(out[1:1 + n]), stacked


# --- Loop --------------------------------------------------------------------------------------
def lower_loop(ctx):
    body = ctx.subgraph("body")
    _check_tensor_values(ctx, body)
    carried = [ctx.input(k) for k in range(2, len(ctx.inputs))]
    n = len(carried)
    if len(body.input) != n + 2:
        raise ctx.error(f"the body has {len(body.input)} inputs; a Loop with {n} loop-carried "
                        f"values needs {n + 2} (iteration number, condition, values)")
    n_scans = len(body.output) - 1 - n
    if n_scans < 0:
        raise ctx.error(f"the body has {len(body.output)} outputs; a Loop with {n} "
                        f"loop-carried values needs at least {n + 1}")
    trip = None
    if ctx.has_input(0):
        trip = _one_element(ctx, ctx.input(0), "trip count M")
        if trip.dtype != DType.i64:
            trip = fl.cast(trip, fl.int64)
    if ctx.has_input(1):
        cond0 = _one_element(ctx, ctx.input(1), "condition", DType.bool)
    else:
        cond0 = fl.constant(True, dtype=fl.bool_)
    guesses = [_declared(vi) for vi in body.output[1 + n:]]

    def keep_going(t, now):
        return now[0] if trip is None else fl.logical_and(t < trip, now[0])

    def step(t, now):
        outs = ctx.lower_subgraph("body", [t, *now])
        cond_out = _one_element(ctx, outs[0], "body's condition output", DType.bool)
        return [cond_out, *outs[1:1 + n]], outs[1 + n:]

    _, final, stacked = _accumulating_loop(ctx, [cond0, *carried], guesses, keep_going, step)
    return final[1:] + [s.stack() for s in stacked]


# --- Scan --------------------------------------------------------------------------------------
def _scan_length(ctx, xs: Sequence[Tensor], axes: Sequence[int]) -> Tensor:
    """The common length of the scan inputs along their axes (i64 scalar; a constant when a
    shape says it)."""
    known = {static_shape(x)[a] for x, a in zip(xs, axes) if static_shape(x)[a] is not None}
    if len(known) > 1:
        raise ctx.error(f"the scan inputs have different lengths {sorted(known)} along their "
                        "scan axes")
    if known:
        return index_scalar(known.pop())
    if not xs:
        raise ctx.error("a Scan needs at least one scan input")
    return apply_op("GatherV2", [shape_i64(xs[0]), index_scalar(axes[0]), index_scalar(0)])


def _scan(ctx, states: Sequence[Tensor], xs: Sequence[Tensor], axes: Sequence[int],
          in_reverse: Sequence[bool], out_reverse: Sequence[bool], length: Tensor,
          out_size: Tensor, name: str = "scan"):
    """Run the body over ``length`` elements of the scan inputs; returns the final states and
    each scan output stacked to ``out_size`` elements ([out_size, ...]; the elements past
    ``length`` are zeros)."""
    body = ctx.subgraph("body")
    n = len(states)
    if len(body.input) != n + len(xs):
        raise ctx.error(f"the body has {len(body.input)} inputs; {n} states and {len(xs)} scan "
                        f"inputs need {n + len(xs)}")
    n_out = len(body.output) - n
    if n_out < 0:
        raise ctx.error(f"the body has {len(body.output)} outputs; {n} states need at least {n}")
    if len(out_reverse) != n_out:
        raise ctx.error(f"{len(out_reverse)} scan output directions for {n_out} scan outputs")
    guesses = [_declared(vi) for vi in body.output[n:]]

    def reverse(t):
        return length - 1 - t

    def step(t, now):
        elems = [apply_op("GatherV2", [x, reverse(t) if rev else t, index_scalar(a)])
                 for x, a, rev in zip(xs, axes, in_reverse)]
        outs = ctx.lower_subgraph("body", [*now, *elems])
        return outs[:n], outs[n:]

    _, final, stacked = _accumulating_loop(
        ctx, states, guesses, lambda t, now: t < length, step, size=out_size,
        write_at=[reverse if rev else None for rev in out_reverse], name=name)
    return final, [s.stack(out_size) for s in stacked]


def _move_first_axis(x: Tensor, axis: int) -> Tensor:
    if axis == 0:
        return x
    rank = len(static_shape(x))
    perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
    return apply_op("Transpose", [x, index_const(perm)])


def _directions(ctx, name: str, count: int) -> List[bool]:
    values = ctx.attr(name, [0] * count)
    if len(values) != count:
        raise ctx.error(f"{name} has {len(values)} entries for {count} tensors")
    if any(v not in (0, 1) for v in values):
        raise ctx.error(f"{name} must be 0 (forward) or 1 (reverse), got {list(values)}")
    return [bool(v) for v in values]


def lower_scan(ctx):
    body = ctx.subgraph("body")
    _check_tensor_values(ctx, body)
    m = ctx.attr("num_scan_inputs")
    if ctx.opset < 9:
        return _lower_scan8(ctx, m)
    ins = [ctx.input(i) for i in range(len(ctx.inputs))]
    n = len(ins) - m
    if n < 0:
        raise ctx.error(f"num_scan_inputs is {m} but the node has {len(ins)} inputs")
    states, xs = ins[:n], ins[n:]
    n_out = len(body.output) - n
    axes = ctx.attr("scan_input_axes", [0] * m)
    if len(axes) != m:
        raise ctx.error(f"scan_input_axes has {len(axes)} entries for {m} scan inputs")
    axes = [normalize_axis(int(a), rank_of(x, ctx), ctx) for a, x in zip(axes, xs)]
    in_reverse = _directions(ctx, "scan_input_directions", m)
    out_reverse = _directions(ctx, "scan_output_directions", max(n_out, 0))
    out_axes = ctx.attr("scan_output_axes", [0] * max(n_out, 0))
    if len(out_axes) != n_out:
        raise ctx.error(f"scan_output_axes has {len(out_axes)} entries for {n_out} scan outputs")
    length = _scan_length(ctx, xs, axes)
    final, outs = _scan(ctx, states, xs, axes, in_reverse, out_reverse, length, length)
    moved = [_move_first_axis(y, normalize_axis(int(a), rank_of(y, ctx), ctx))
             for y, a in zip(outs, out_axes)]
    return final + moved


def _lower_scan8(ctx, m: int):
    """Scan-8: inputs and states carry a batch dim 0 and the scan axis is 1; each batch entry
    is scanned on its own over its ``sequence_lens`` entry (default: all); scan outputs are
    padded with zeros to the longest length."""
    ins = [ctx.input(i) for i in range(1, len(ctx.inputs))]
    n = len(ins) - m
    if n < 0 or m < 1:
        raise ctx.error(f"num_scan_inputs is {m} but the node has {len(ins)} state and scan "
                        "inputs")
    states, xs = ins[:n], ins[n:]
    in_reverse = _directions(ctx, "directions", m)
    for x in xs:
        if rank_of(x, ctx) < 2:
            raise ctx.error("a Scan-8 scan input needs a batch dim and a scan dim")
    batch = _scan_length(ctx, xs, [0] * m)
    steps = _scan_length(ctx, xs, [1] * m)
    lens = ctx.optional_input(0)
    if lens is not None and lens.dtype != DType.i64:
        lens = fl.cast(lens, fl.int64)
    n_out = len(ctx.subgraph("body").output) - n
    guesses = [(t.dtype, None if static_shape(t) is None else tuple(static_shape(t)[1:])) for t in states] + [
        (d, None if s is None else (static_shape(xs[0])[1],) + tuple(s)) for d, s in
        (_declared(vi) for vi in ctx.subgraph("body").output[n:])]

    def per_entry(b, now):
        entry_states = [apply_op("GatherV2", [s, b, index_scalar(0)]) for s in states]
        entry_xs = [apply_op("GatherV2", [x, b, index_scalar(0)]) for x in xs]
        length = steps if lens is None else apply_op("GatherV2", [lens, b, index_scalar(0)])
        final, outs = _scan(ctx, entry_states, entry_xs, [0] * m, in_reverse, [False] * n_out,
                            length, steps)
        return [], final + outs

    _, _, stacked = _accumulating_loop(ctx, [], guesses, lambda b, now: b < batch, per_entry,
                                       size=batch, name="batch")
    return [s.stack(batch) for s in stacked]


LOWERINGS = {
    "If": [(1, None, lower_if)],
    "Loop": [(1, None, lower_loop)],
    "Scan": [(8, None, lower_scan)],
}
