"""Conditionals and loops (``fl.cond``, ``fl.while_loop``, ``fl.case``) built from the
dataflow primitives, as TensorFlow 1.x builds them.

``cond`` sends every tensor a branch reads from outside through a ``Switch`` on the predicate,
so the branch's ops only run (produce live values) when it is taken; the results of the two
branches meet in ``Merge`` nodes. ``while_loop`` opens a frame: ``Enter`` (loop variables, and
loop-invariant tensors the body reads from outside, with ``is_constant``), ``Merge`` of the
initial value and the ``NextIteration`` back edge, ``LoopCond``, a ``Switch`` per variable
into the body or to ``Exit``.

TensorFlow's rule holds: only ops *created inside* ``true_fn``/``false_fn`` (or ``cond``/
``body``) belong to the branch (or loop). An op created outside and merely used inside runs
regardless of the predicate. See docs/control_flow.md.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set

from compiler.ir.graph import Node, Output
from compiler.ir.location import caller_location
from compiler.errors import OpError
from dsl.context import get_default_graph, name_scope
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Operation, Tensor, static_shape
from dsl.tensor_array_ops import TensorArray
from runtime.dtypes import DType

from dsl.grad import control_flow_grad  # noqa: F401  (registers the gradients of Switch/Merge)

__all__ = ["cond", "while_loop", "case"]


# --- nested structures of tensors ----------------------------------------------------------
def _flatten(value) -> List[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flatten(v)]
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _flatten(value[k])]
    return [value]


def _pack(structure, flat: List[Any]):
    it = iter(flat)

    def build(s):
        if isinstance(s, TensorArray):        # a loop carries its flow
            return s._with_flow(next(it))
        if isinstance(s, tuple):
            return tuple(build(v) for v in s)
        if isinstance(s, list):
            return [build(v) for v in s]
        if isinstance(s, dict):
            return {k: build(s[k]) for k in sorted(s)}
        return next(it)
    return build(structure)


def _same_structure(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_structure(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(a) == sorted(b) and all(_same_structure(a[k], b[k]) for k in a)
    return not isinstance(a, (list, tuple, dict)) and not isinstance(b, (list, tuple, dict))


# --- capturing the ops a function creates -----------------------------------------------------
def _created_since(g, before: Set[Node]) -> List[Node]:
    """The nodes created since ``before``, less those made outside every construct
    (``Graph.lifted``)."""
    lifted = g.__dict__.get("_lifted_nodes", ())
    return [n for n in g if n not in before and n not in lifted]


def _capture(created: List[Node], inside: Set[Node], boundary: Callable[[Output], Output],
             pivot_for: Callable[[Node], Optional[Node]],
             shape_boundary: Optional[Callable[[Node], Optional[Output]]] = None) -> None:
    """Route every data input of ``created`` that comes from outside ``inside`` through
    ``boundary`` (a Switch for a cond branch, a constant Enter for a loop), and give ops
    without data inputs, or with only loop invariants as inputs, a control input on their
    context's pivot, so that they run only when (and as often as) their context does.

    ``shape_boundary(shape_node)``: for a ``Shape`` of a tensor from outside, a value that
    stands for the whole ``Shape`` node (or None: route its input as usual); the node is then
    dropped, so only the shape crosses the boundary, not the tensor."""
    dropped: List[Node] = []
    for n in created:
        if n.op == "Enter" and n not in inside:
            continue
        if (shape_boundary is not None and n.op == "Shape" and n.inputs[0].node not in inside
                and not n.control_inputs):
            got = shape_boundary(n)
            if got is not None:
                n.graph.replace_all_uses_with(n.output(0), got)
                if not n.users:
                    dropped.append(n)
                    continue
        for k, i in enumerate(n.inputs):
            if i.node not in inside:
                n.set_input(k, boundary(i))
        free = all(i.node.op == "Enter" and i.node.attrs.get("is_constant") for i in n.inputs)
        if free and not any(c in inside for c in n.control_inputs):
            # reads only constants or loop invariants (TensorFlow's _MaybeAddControlDependency):
            # without the pivot it would also run when the loop exits
            pivot = pivot_for(n)
            if pivot is not None and pivot not in n.control_inputs:
                n.add_control_input(pivot)
    for n in dropped:
        n.graph.erase_node(n)


def _cond_preds(g) -> Dict[Node, Output]:
    """Merge node of a cond -> its predicate (read by the gradient of Merge)."""
    if not hasattr(g, "_cond_preds"):
        g._cond_preds = {}
    return g._cond_preds


# --- cond ---------------------------------------------------------------------------------------
def _build_branch(g, fn: Callable, pred: Tensor, branch: int, pivot: Tensor, what: str):
    before = set(g)
    with name_scope(what):
        result = fn()
        if isinstance(result, Operation):
            result = [result]
        flat = _flatten(result) if result is not None else []
        outs = []
        from dsl.array_ops import identity
        from dsl.context import control_dependencies
        for v in flat:
            if isinstance(v, Operation):
                # an operation: a value of the branch that is ready once it has run
                with control_dependencies([v]):
                    outs.append(identity(pred, name="op_done"))
                continue
            outs.append(identity(convert_to_tensor(v)))
    # (nodes made meanwhile outside any control flow, such as variables, are not the branch's)
    foreign = g.__dict__.get("_nodes_of_other_loops", ())
    created = [n for n in _created_since(g, before) if n not in foreign]
    inside = set(created)
    switches: Dict[Output, Output] = {}

    def boundary(out: Output) -> Output:
        if out not in switches:
            with g.inserting_before(created[0]):
                sw = apply_op("Switch", [Tensor(out), pred], name="Switch")
            inside.add(sw[0].output.node)
            switches[out] = sw[branch].output
        return switches[out]

    _capture(created, inside, boundary, lambda n: pivot.output.node)
    return result, outs


def cond(pred, true_fn: Callable = None, false_fn: Callable = None, strict: bool = False,
         name: Optional[str] = None, fn1=None, fn2=None):
    """``true_fn()`` if ``pred`` else ``false_fn()`` (``tf.cond``): both branches are built,
    only the taken one runs. The two must return the same structure of tensors, with the
    same dtypes."""
    true_fn = true_fn or fn1
    false_fn = false_fn or fn2
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond needs callables true_fn and false_fn")
    g = get_default_graph()
    with name_scope(name or "cond"):
        pred = convert_to_tensor(pred)
        if pred.dtype is not DType.bool or (static_shape(pred) is not None and len(static_shape(pred)) != 0):
            raise OpError(f"the predicate of cond must be a scalar bool, got {pred.dtype}"
                          f"{list(static_shape(pred)) if static_shape(pred) is not None else ''}", None,
                          caller_location())
        p_f, p_t = apply_op("Switch", [pred, pred], name="Switch")
        from dsl.array_ops import identity
        pivot_t = identity(p_t, name="switch_t")
        pivot_f = identity(p_f, name="switch_f")
        res_t, outs_t = _build_branch(g, true_fn, pred, 1, pivot_t, "true")
        res_f, outs_f = _build_branch(g, false_fn, pred, 0, pivot_f, "false")
        if not _same_structure(res_t, res_f) or len(outs_t) != len(outs_f):
            raise OpError("the branches of cond return different structures: "
                          f"{_describe(res_t)} and {_describe(res_f)}", None, caller_location())
        flat_t = _flatten(res_t) if res_t is not None else []
        flat_f = _flatten(res_f) if res_f is not None else []
        merged = []
        for k, (t, f) in enumerate(zip(outs_t, outs_f)):
            is_op = [isinstance(flat_t[k], Operation), isinstance(flat_f[k], Operation)]
            if is_op[0] != is_op[1]:
                raise OpError("one branch of cond returns an operation where the other "
                              "returns a tensor", None, caller_location())
            if t.dtype != f.dtype:
                raise OpError(f"the branches of cond return {f.dtype} (false) and {t.dtype} "
                              "(true) for the same output", None, caller_location())
            m = apply_op("Merge", [[f, t]], name="Merge")
            _cond_preds(g)[m[0].output.node] = pred.output
            merged.append(Operation(m[0].output.node) if is_op[0] else m[0])
    if res_t is None:
        return None
    if isinstance(res_t, Operation):
        return merged[0]
    return _pack(res_t, merged)


def _describe(v) -> str:
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_describe(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_describe(v[k])}" for k in sorted(v)) + "}"
    return "None" if v is None else type(v).__name__


def case(pred_fn_pairs, default: Optional[Callable] = None, exclusive: bool = False,
         name: Optional[str] = None):
    """The function of the first true predicate (``tf.case``), else ``default``: nested conds."""
    if isinstance(pred_fn_pairs, dict):
        pairs = list(pred_fn_pairs.items())
    else:
        pairs = list(pred_fn_pairs)
    if not pairs and default is None:
        raise ValueError("case needs at least one (pred, fn) pair or a default")
    if default is None:
        pairs, (last_pred, default) = pairs[:-1], pairs[-1]
    with name_scope(name or "case"):
        def chain(k: int):
            if k == len(pairs):
                return default()
            p, fn = pairs[k]
            return cond(p, fn, lambda: chain(k + 1))
        return chain(0)


# --- while_loop -----------------------------------------------------------------------------------
def while_loop(cond: Callable, body: Callable, loop_vars, shape_invariants=None,
               parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
               name: Optional[str] = None, maximum_iterations=None, return_same_structure=False,
               _external: Optional[Callable] = None, _external_shape: Optional[Callable] = None):
    """Repeat ``body`` while ``cond`` is true (``tf.while_loop``); returns the loop variables
    after the last iteration, in the structure of ``loop_vars``.

    ``maximum_iterations`` adds an iteration counter to the loop (as TensorFlow does): the
    loop stops after that many iterations even if ``cond`` is still true.

    (``_external(out, invariant)``, internal: how the loop reads a tensor ``out`` from outside
    its frame; None means the default, ``invariant(out)``: a loop-invariant ``Enter``. Gradient
    loops use it to read the values the forward loop saved. ``_external_shape(shape_node,
    invariant)``, likewise for a ``Shape`` of a tensor from outside: gradient loops read a saved
    shape instead of saving the whole tensor.)
    """
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop needs callables cond and body")
    single = not isinstance(loop_vars, (list, tuple, dict))
    structure = [loop_vars] if single else loop_vars
    if maximum_iterations is not None:
        user_cond, user_body, user_structure = cond, body, structure
        from dsl.math_ops import logical_and

        def cond(i, lv):  # noqa: F811
            return logical_and(i < maximum_iterations, _call(user_cond, lv, user_structure))

        def body(i, lv):  # noqa: F811
            return [i + 1, _as_structure(_call(user_body, lv, user_structure), user_structure)]

        structure = [0, structure]
        if shape_invariants is not None:
            shape_invariants = [[], [shape_invariants] if single else shape_invariants]
    elif shape_invariants is not None and single:
        shape_invariants = [shape_invariants]
    g = get_default_graph()
    flat_inv = (None if shape_invariants is None else
                _flatten_like(structure, shape_invariants))
    flat_init = [_loop_value(v) for v in _flatten(structure)]
    if not flat_init:
        raise ValueError("while_loop needs at least one loop variable")
    with name_scope(name or "while") as scope:
        frame = scope.rstrip("/")
        before = set(g)
        enters = [apply_op("Enter", [v], {"frame_name": frame, "is_constant": False,
                                          "parallel_iterations": parallel_iterations},
                           name="Enter") for v in flat_init]
        merges = [apply_op("Merge", [[e, e]], name="Merge")[0] for e in enters]
        if flat_inv is not None:
            for k, (m, inv) in enumerate(zip(merges, flat_inv)):
                _relax(m, inv, k)
        cond_start = set(g)
        pred = convert_to_tensor(_call(cond, _pack(structure, merges), structure))
        if pred.dtype is not DType.bool or (static_shape(pred) is not None and len(static_shape(pred)) != 0):
            raise OpError(f"the condition of while_loop must return a scalar bool, got "
                          f"{pred.dtype}{list(static_shape(pred)) if static_shape(pred) is not None else ''}",
                          None, caller_location())
        cond_nodes = set(_created_since(g, cond_start))
        lc = apply_op("LoopCond", [pred], name="LoopCond")
        switches = [apply_op("Switch", [m, lc], name="Switch") for m in merges]
        from dsl.array_ops import identity
        body_in = [identity(sw[1], name="Identity") for sw in switches]
        result = _call(body, _pack(structure, body_in), structure)
        result = _as_structure(result, structure)
        flat_out = [_loop_value(v) for v in _flatten(result)]
        if len(flat_out) != len(flat_init):
            raise OpError(f"the body of while_loop returns {len(flat_out)} tensors for "
                          f"{len(flat_init)} loop variables", None, caller_location())
        for k, (a, b) in enumerate(zip(flat_init, flat_out)):
            if a.dtype != b.dtype:
                raise OpError(f"loop variable {k} is {a.dtype} before the loop and {b.dtype} "
                              "after an iteration", None, caller_location())
            if not _shape_fits(static_shape(b), static_shape(merges[k])):
                raise OpError(f"loop variable {k} has shape {_shape_str(static_shape(merges[k]))} before "
                              f"the loop and {_shape_str(static_shape(b))} after an iteration; give "
                              "shape_invariants for a loop variable whose shape changes",
                              None, caller_location())
        nexts = [apply_op("NextIteration", [b], name="NextIteration") for b in flat_out]
        # (nodes a gradient added to other loops meanwhile are not this loop's)
        foreign = g.__dict__.get("_nodes_of_other_loops", ())
        created = [n for n in _created_since(g, before) if n not in foreign]
        inside = set(created)
        enter_set = {e.output.node for e in enters}
        invariants: Dict[Output, Output] = {}
        replaced: Dict[Output, Output] = {}
        first_merge = merges[0].output.node

        def invariant(out: Output) -> Output:
            if out not in invariants:
                with g.inserting_before(first_merge):
                    e = apply_op("Enter", [Tensor(out)], {"frame_name": frame, "is_constant": True,
                                                          "parallel_iterations": parallel_iterations},
                                 name="Enter")
                inside.add(e.output.node)
                invariants[out] = e.output
            return invariants[out]

        def boundary(out: Output) -> Output:
            if out not in replaced:
                got = _external(out, invariant) if _external is not None else None
                replaced[out] = got if got is not None else invariant(out)
            return replaced[out]

        def pivot_for(n: Node) -> Optional[Node]:
            return first_merge if n in cond_nodes else body_in[0].output.node

        shapes: Dict[tuple, Output] = {}

        def shape_boundary(shape_node: Node) -> Optional[Output]:
            key = (shape_node.inputs[0], shape_node.attrs.get("out_type"))
            if key not in shapes:
                shapes[key] = _external_shape(shape_node, invariant)
                if shapes[key] is not None:        # made in the loop: its users read it as is
                    inside.add(shapes[key].node)
            return shapes[key]

        _capture([n for n in created if n not in enter_set], inside, boundary, pivot_for,
                 shape_boundary if _external_shape is not None else None)
        for m, nx in zip(merges, nexts):
            m.output.node.set_input(1, nx.output)
        exits = [apply_op("Exit", [sw[0]], name="Exit") for sw in switches]
    out = _pack(structure, exits)
    if maximum_iterations is not None:
        out = out[1]
    if single and maximum_iterations is None:
        return out[0]
    if single:
        return out[0]
    return out


def _loop_value(v) -> Tensor:
    """The tensor a loop carries for loop variable ``v`` (a TensorArray's flow)."""
    return v.flow if isinstance(v, TensorArray) else convert_to_tensor(v)


def _flatten_like(structure, value) -> List[Any]:
    """``value`` (shapes) flattened along ``structure`` (the loop variables)."""
    if isinstance(structure, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(structure):
            raise ValueError("shape_invariants must have the structure of loop_vars")
        return [x for s, v in zip(structure, value) for x in _flatten_like(s, v)]
    if isinstance(structure, dict):
        return [x for k in sorted(structure) for x in _flatten_like(structure[k], value[k])]
    return [value]


def _relax(merge: Tensor, invariant, k: int) -> None:
    """Give loop variable ``k`` the (less specific) shape ``invariant`` inside the loop."""
    from compiler.ir.types import TensorType, normalize_shape
    if invariant is not None and not isinstance(invariant, (list, tuple)):
        invariant = getattr(invariant, "dims", invariant)
    shape = None if invariant is None else normalize_shape(
        [None if d is None or d == -1 else int(d) for d in invariant])
    if not _shape_fits(static_shape(merge), shape):
        raise OpError(f"loop variable {k} has shape {_shape_str(static_shape(merge))}, which does not "
                      f"fit its shape invariant {_shape_str(shape)}", None, caller_location())
    node = merge.output.node
    node.output_types[0] = TensorType(merge.dtype, shape)


def _call(fn: Callable, values, structure):
    if isinstance(structure, dict):
        return fn(**values)
    return fn(*values)


def _as_structure(result, structure):
    if isinstance(structure, (list, tuple)) and len(structure) == 1 and not isinstance(
            result, (list, tuple)):
        result = [result]
    if isinstance(result, tuple) and isinstance(structure, list):
        result = list(result)
    if isinstance(result, list) and isinstance(structure, tuple):
        result = tuple(result)
    return result


def _shape_fits(after, before) -> bool:
    if before is None:
        return True
    if after is None or len(after) != len(before):
        return False
    return all(b is None or a == b for a, b in zip(after, before))


def _shape_str(s) -> str:
    return "[*]" if s is None else "[" + ",".join("?" if d is None else str(d) for d in s) + "]"
