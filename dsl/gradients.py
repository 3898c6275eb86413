"""Automatic differentiation as a user-level library: `fl.gradients` and the gradient registry.

As in TensorFlow 1.x: ``gradients(ys, xs)`` walks backward from ``ys`` over the ops between
``ys`` and ``xs``, calls one gradient function per op (looked up by op type, or by the type a
``Graph.gradient_override_map`` block gave it) and sums partial gradients with ``AddN``.
Gradient functions live in ``dsl/grad/`` (one module per op family).

Variables: the gradient with respect to a variable is the gradient with respect to its
handle, which collects the partial gradients of every read of it (TensorFlow's rule).

Sparse gradients: the gradients of ``GatherV2`` (axis 0) and ``ResourceGather`` are
``IndexedSlices`` (values, indices). Partial sparse gradients are summed by concatenation,
they pass through ``Identity``/``ReadVariableOp`` as they are, and any other gradient
function gets them densified. ``gradients`` returns an ``IndexedSlices`` for an x whose
gradient stayed sparse; optimizers apply it with scatter updates that touch only those rows.

Source locations: the ops a gradient function adds carry the location of the forward op
they differentiate (errors and profiles of the backward pass point at that line).

Control flow: ``cond`` is differentiated op by op (Switch <-> Merge); a ``while_loop`` as a
whole when its first Exit is reached (``dsl/grad/control_flow_grad.py``).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Set

from compiler.ir.graph import Node, Output
from compiler.ir.location import location_override
from dsl.context import get_default_graph, name_scope
from dsl.indexed_slices import IndexedSlices
from dsl.tensor import Operation, Tensor
from runtime.dtypes import DType
from runtime.errors import FlowcError

__all__ = ["gradients", "RegisterGradient", "NotDifferentiable", "NoGradient",
           "MissingGradientError", "GradientShapeError"]

GradFn = Callable[..., Sequence[Optional[Tensor]]]

_registry: Dict[str, Optional[GradFn]] = {}


class MissingGradientError(FlowcError, LookupError):
    """An op on a path from ys to xs has no gradient function."""


class GradientShapeError(FlowcError, ValueError):
    """A gradient function needs a shape or value that is not known when the graph is built."""


class RegisterGradient:
    """Decorator registering ``fn(op, *output_grads) -> [input_grad, ...]`` for an op type.

    ``fn`` gets one gradient per output of ``op``: a Tensor, or None for an output nothing
    downstream differentiates (see ``fill_zeros``); it returns one per input (None: no gradient).
    """

    def __init__(self, op_type: str):
        if not isinstance(op_type, str) or not op_type:
            raise TypeError(f"RegisterGradient needs an op type name, got {op_type!r}")
        self._op_type = op_type

    def __call__(self, fn: GradFn) -> GradFn:
        if self._op_type in _registry:
            raise KeyError(f"a gradient for '{self._op_type}' is already registered")
        _registry[self._op_type] = fn
        return fn


def NotDifferentiable(op_type: str) -> None:  # noqa: N802  (TensorFlow's name)
    """Declare that ``op_type`` has no gradient: its inputs get None, without an error."""
    if op_type in _registry:
        raise KeyError(f"a gradient for '{op_type}' is already registered")
    _registry[op_type] = None


NoGradient = NotDifferentiable


def registered_gradients() -> Dict[str, Optional[GradFn]]:
    """Op type -> gradient function (None for NotDifferentiable ops)."""
    return dict(_registry)


def get_gradient_function(op: Operation) -> Optional[GradFn]:
    """The gradient function of ``op`` (honouring overrides); None when not differentiable."""
    overrides = getattr(op.graph, "_gradient_overrides", {})
    op_type = overrides.get(op.node, op.type)
    if op_type not in _registry:
        raise KeyError(op_type)
    return _registry[op_type]


def fill_zeros(op: Operation, grads: Sequence[Optional[Tensor]]) -> List[Tensor]:
    """``grads`` with zeros for the outputs of ``op`` that got no gradient."""
    from dsl.array_ops import zeros_like
    return [zeros_like(out) if g is None else g for out, g in zip(op.outputs, grads)]


def _is_differentiable(out: Output) -> bool:
    """Only floating-point tensors (and handles of floating-point variables) carry gradients."""
    dtype = out.dtype
    if dtype is DType.resource:
        dtype = out.node.attrs.get("dtype") if out.node.op == "VarHandleOp" else None
        return isinstance(dtype, DType) and dtype.is_floating
    return dtype is not None and dtype.is_floating


# Ops whose gradient functions take sparse (IndexedSlices) gradients as they are.
_SPARSE_THROUGH = {"Identity", "ReadVariableOp", "Snapshot"}


def _as_x(x) -> Tensor:
    """xs may be variables: differentiate with respect to their handle."""
    from dsl.ops import convert_to_tensor
    handle = getattr(x, "handle", None)
    if handle is not None and isinstance(handle, Tensor):
        return handle
    return convert_to_tensor(x)


def _dense(g):
    return g.to_dense() if isinstance(g, IndexedSlices) else g


def _as_list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _forward_reach(xs: List[Output], stop: Set[Node]) -> Set[Node]:
    """Nodes reachable from ``xs`` along data edges (ops in ``stop`` end the walk)."""
    starts = {x.node for x in xs}
    seen: Set[Node] = set()
    todo = list(starts)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in stop and n not in starts:
            continue
        todo.extend(u for u in n.users if any(i.node is n for i in u.inputs))
    return seen


def _between(ys: List[Output], reach: Set[Node], stop: Set[Node]) -> Set[Node]:
    """Nodes on a data path from an x to a y."""
    seen: Set[Node] = set()
    todo = [y.node for y in ys if y.node in reach]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in stop:
            continue
        todo.extend(i.node for i in n.inputs if i.node in reach)
    return seen


def _path(node: Node, ys: List[Output], xs: List[Output], between: Set[Node]) -> List[str]:
    """Names of a y, ..., ``node``, ..., an x: a path that needs ``node``'s gradient."""
    def walk(start: Node, step, goal: Set[Node]) -> List[Node]:
        prev: Dict[Node, Optional[Node]] = {start: None}
        todo = [start]
        while todo:
            n = todo.pop(0)
            if n in goal:
                path = []
                while n is not None:
                    path.append(n)
                    n = prev[n]
                return path
            for m in step(n):
                if m in between and m not in prev:
                    prev[m] = n
                    todo.append(m)
        return [start]
    up = walk(node, lambda n: n.users, {y.node for y in ys})                        # y .. node
    down = walk(node, lambda n: [i.node for i in n.inputs], {x.node for x in xs})  # x .. node
    return [n.name for n in up] + [n.name for n in reversed(down[:-1])]


def _sum(grads: list, name: str):
    """One gradient: the single partial, their AddN, or (all sparse) their concatenation."""
    from dsl.ops import apply_op
    if len(grads) == 1:
        return grads[0]
    if all(isinstance(g, IndexedSlices) for g in grads):
        from dsl.array_ops import concat
        indices = [g.indices for g in grads]
        if len({i.dtype for i in indices}) > 1:
            from dsl.math_ops import cast
            indices = [cast(i, DType.i64) for i in indices]
        return IndexedSlices(concat([g.values for g in grads], 0, name=name + "/values"),
                             concat(indices, 0, name=name + "/indices"), grads[0].dense_shape)
    return apply_op("AddN", [[_dense(g) for g in grads]], name=name)


def gradients(ys, xs, grad_ys=None, name: str = "gradients",
              stop_gradients=None) -> List[Optional[Tensor]]:
    """d(sum of ys)/d(x) for each x in ``xs``, as ``tf.gradients``; None where not connected."""
    from dsl.array_ops import ones_like
    from dsl.ops import convert_to_tensor
    ys_t = [convert_to_tensor(y) for y in _as_list(ys)]
    xs_t = [_as_x(x) for x in _as_list(xs)]
    g = ys_t[0].graph if ys_t else get_default_graph()
    for t in ys_t + xs_t:
        if t.graph is not g:
            raise ValueError(f"tensor {t.name} is from another graph than {ys_t[0].name}")
    gys = [None] * len(ys_t) if grad_ys is None else _as_list(grad_ys)
    if len(gys) != len(ys_t):
        raise ValueError(f"gradients got {len(ys_t)} ys but {len(gys)} grad_ys")
    stop = {convert_to_tensor(s).output.node for s in _as_list(stop_gradients or [])}
    ys_o = [y.output for y in ys_t]
    xs_o = [x.output for x in xs_t]
    reach = _forward_reach(xs_o, stop)
    between = _between(ys_o, reach, stop)
    grads: Dict[Output, List[Tensor]] = {}
    with g.as_default(), name_scope(name):
        for k, (y, gy) in enumerate(zip(ys_t, gys)):
            if not _is_differentiable(y.output):
                continue
            if gy is None:
                gy = ones_like(y, name=f"grad_ys_{k}")
            else:
                gy = convert_to_tensor(gy, dtype=y.dtype)
            grads.setdefault(y.output, []).append(gy)
        order = {n: k for k, n in enumerate(g)}
        x_nodes = {x.node for x in xs_o}
        done: Set[Node] = set()
        for node in sorted(between, key=order.__getitem__, reverse=True):
            if node in stop or node in done:
                continue
            if node.op == "Exit":            # a while_loop: differentiated as a whole
                from dsl.grad.control_flow_grad import while_loop_grad
                done |= while_loop_grad(node, grads, between, _sum)
                continue
            out_grads = [grads.get(o) for o in node.outputs]
            if not any(out_grads):
                continue
            wanted = [i for i in node.inputs if i.node in between and _is_differentiable(i)]
            if not wanted:
                continue
            op = Operation(node)
            try:
                fn = get_gradient_function(op)
            except KeyError as e:
                path = " -> ".join(_path(node, ys_o, xs_o, between))
                raise MissingGradientError(
                    f"no gradient is registered for op type '{e.args[0]}' (node '{node.name}'), "
                    f"needed on the path {path}") from None
            if fn is None:
                continue
            with name_scope(f"{node.name}_grad"):
                summed = [_sum(gl, f"{o.node.name}_{o.index}_sum") if gl else None
                          for o, gl in zip(node.outputs, out_grads)]
                if node.op not in _SPARSE_THROUGH:
                    summed = [_dense(gs) for gs in summed]
                # the gradient's ops point at the forward op they differentiate
                with location_override(node.location):
                    in_grads = list(fn(op, *summed))
            if len(in_grads) != len(node.inputs):
                raise ValueError(f"the gradient function of {node.op} returned {len(in_grads)} "
                                 f"gradients for node '{node.name}' with {len(node.inputs)} inputs")
            for inp, gi in zip(node.inputs, in_grads):
                if gi is None or inp.node not in between or not _is_differentiable(inp):
                    continue
                if inp.node in stop and inp.node not in x_nodes:
                    continue
                if not isinstance(gi, IndexedSlices):
                    gi = convert_to_tensor(gi)
                grads.setdefault(inp, []).append(gi)
        result: List[Optional[Tensor]] = []
        for x in xs_o:
            gl = grads.get(x)
            if not gl or not _is_differentiable(x):
                result.append(None)
            else:
                result.append(_sum(gl, f"{x.node.name}_{x.index}_sum"))
    return result


from dsl import grad as _grad  # noqa: E402,F401  (registers the gradient functions)
