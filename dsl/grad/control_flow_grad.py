"""Gradients of the conditional primitives (TensorFlow 1.x's rule): the gradient of a
``Switch`` is a ``Merge`` of the gradients of its two outputs, and the gradient of a
``Merge`` is a ``Switch`` of its output gradient on the same predicate. Only one branch is
live at run time, so only its gradient flows.

A ``while_loop`` is differentiated as a whole (``while_loop_grad``): the forward loop pushes
each value the backward pass needs onto a stack (``StackPushV2``, one stack per value) and a
backward loop pops them in reverse order (``StackPopV2``), as TensorFlow 1.x does. Values may
have shapes known only at run time (the batch size of a recurrent network), and loops may be
nested (the inner loop's gradient loop is built inside the outer one's body).
"""
from __future__ import annotations

from dsl.gradients import MissingGradientError, NotDifferentiable, RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import static_shape

for _op in ("StackV2", "StackPushV2", "StackPopV2", "StackCloseV2"):
    NotDifferentiable(_op)


def _loop_error(op):
    return MissingGradientError(
        f"gradients through while_loop are not supported yet (node '{op.name}', {op.type}, "
        f"frame of a loop{', at ' + str(op.node.location) if op.node.location else ''})")


@RegisterGradient("Switch")
def _switch_grad(op, grad_false, grad_true):
    pred = op.inputs[1]
    if pred.op.type == "LoopCond":
        raise _loop_error(op)
    if grad_false is None and grad_true is None:
        return [None, None]
    # A zero for the branch that got no gradient, live only when that branch is (a Switch of
    # the forward input on the same predicate), so exactly one input of the Merge is live.
    if grad_false is None or grad_true is None:
        gate = apply_op("Switch", [op.inputs[0], pred], name="cond_grad_gate")
        if grad_false is None:
            grad_false = apply_op("ZerosLike", [gate[0]], name="cond_grad_zeros")
        if grad_true is None:
            grad_true = apply_op("ZerosLike", [gate[1]], name="cond_grad_zeros")
    merged = apply_op("Merge", [[grad_false, grad_true]], name="cond_grad")
    return [merged[0], None]


@RegisterGradient("Merge")
def _merge_grad(op, grad, grad_index=None):
    if any(i.op.type == "NextIteration" for i in op.inputs):
        raise _loop_error(op)
    preds = getattr(op.graph, "_cond_preds", {})
    pred = preds.get(op.node)
    if pred is None:
        raise MissingGradientError(f"the gradient of Merge '{op.name}' needs the predicate of "
                                   "its cond; build conditionals with fl.cond")
    from dsl.tensor import Tensor
    if grad is None:
        return [None] * len(op.inputs)
    if len(op.inputs) != 2:
        raise MissingGradientError(f"the gradient of Merge '{op.name}' with "
                                   f"{len(op.inputs)} inputs is not supported")
    sw = apply_op("Switch", [grad, Tensor(pred)], name="cond_grad")
    return [sw[0], sw[1]]


# --- while_loop --------------------------------------------------------------------------------
class _Loop:
    """The structure fl.while_loop built, found from one of its Exit nodes."""

    def __init__(self, exit_node):
        from compiler.ir.frames import static_frames
        sw = exit_node.inputs[0].node
        if sw.op != "Switch" or sw.inputs[1].node.op != "LoopCond":
            raise MissingGradientError(f"Exit '{exit_node.name}' is not the exit of a loop built "
                                       "by fl.while_loop")
        g = exit_node.graph
        self.graph = g
        self.loop_cond = sw.inputs[1].node
        nodes = list(g)
        self.position = {n: k for k, n in enumerate(nodes)}
        self.run_in, self.out_in = static_frames(nodes)
        self.frame = self.run_in[sw]
        self.name = self.frame[-1]
        self.switches = [n for n in nodes if n.op == "Switch" and n.inputs[1].node is self.loop_cond]
        self.vars = []          # (enter, merge, switch, body_in, next_value, exit or None)
        for s in self.switches:
            merge = s.inputs[0].node
            enter = next(i.node for i in merge.inputs if i.node.op == "Enter")
            nxt = next(i.node for i in merge.inputs if i.node.op == "NextIteration")
            body_in = next((u for u in s.users if u.op == "Identity" and u.inputs[0] == s.output(1)),
                           None)
            ex = next((u for u in s.users if u.op == "Exit"), None)
            self.vars.append((enter, merge, s, body_in, nxt.inputs[0], ex))
        self.invariants = [n for n in nodes if n.op == "Enter" and n.attrs.get("is_constant")
                           and self.out_in[n] == self.frame]
        self.members = {n for n in nodes if (self.out_in[n] if n.op == "Enter" else self.run_in[n])
                        [:len(self.frame)] == self.frame}
        self.parallel_iterations = self.vars[0][0].attrs.get("parallel_iterations", 10)
        # the first Enter of each enclosing frame, outermost first (where a stack's handle
        # enters each level) and the LoopConds of the loops nested in this one
        self.level_enters = []
        for k in range(1, len(self.frame) + 1):
            self.level_enters.append(min(
                (n for n in nodes if n.op == "Enter" and self.out_in[n] == self.frame[:k]),
                key=lambda n: self.position[n]))
        self.inner_loop_conds = [n for n in nodes if n.op == "LoopCond" and n in self.members
                                 and self.run_in[n] != self.frame]

    def add_var(self, init_fn, update_fn, value=None):
        """Add a loop variable after the fact: ``init_fn()`` before the loop, ``update_fn(v)``
        in the body (placed after ``value``'s node when given); returns its Switch and the
        NextIteration node."""
        from dsl.array_ops import identity
        from dsl.tensor import Tensor
        g = self.graph
        with g.inserting_before(self.loop_cond):
            init = init_fn()
            enter = apply_op("Enter", [init], {"frame_name": self.name,
                                               "parallel_iterations": self.parallel_iterations},
                             name=f"{self.name}/Enter")
            merge = apply_op("Merge", [[enter, enter]], name=f"{self.name}/Merge")[0]
        lc = Tensor(self.loop_cond.output(0))
        with g.inserting_after(self.loop_cond):
            sw = apply_op("Switch", [merge, lc], name=f"{self.name}/Switch")
            body_in = identity(sw[1], name=f"{self.name}/Identity")
        anchor = body_in.output.node
        if value is not None and self.position.get(value.node, -1) > self.position[self.loop_cond]:
            anchor = value.node
        with g.inserting_after(anchor):
            new = update_fn(body_in)
            nxt = apply_op("NextIteration", [new], name=f"{self.name}/NextIteration")
        merge.output.node.set_input(1, nxt.output)
        return sw, body_in, nxt.output.node

    def constant(self, value, name):
        """A constant in the context the loop runs in (the body of an enclosing loop, a
        branch of a cond): it waits for the loop's first initial value."""
        from dsl.context import control_dependencies
        from dsl.ops import constant
        with control_dependencies([self.vars[0][0].inputs[0].node]):
            return constant(value, name=f"{self.name}/{name}")

    def handle_in_frame(self, handle):
        """``handle`` (made outside every loop) entered, level by level, into this loop."""
        h = handle
        for enter in self.level_enters:
            with self.graph.inserting_after(enter):
                h = apply_op("Enter", [h], {"frame_name": enter.attrs["frame_name"],
                                            "is_constant": True,
                                            "parallel_iterations": self.parallel_iterations},
                             name=f"{self.name}/stack_enter")
        return h

    def counter(self):
        """A loop variable counting the iterations; returns its Exit, its value in the body
        and its NextIteration."""
        sw, body_in, nxt = self.add_var(lambda: self.constant(0, "grad_count_init"),
                                        lambda v: v + 1)
        exits = [v[5] for v in self.vars if v[5] is not None]
        after = max(exits, key=lambda n: self.position[n]) if exits else sw.output.node
        with self.graph.inserting_after(after):
            ex = apply_op("Exit", [sw[0]], name=f"{self.name}/Exit")
        # a value of the enclosing loop's frame, which that loop's gradient may need to save
        self.graph.__dict__.setdefault("_forward_frame_of", {})[ex.output.node] = self.frame[:-1]
        return ex, body_in, nxt


class _AddingToForwardLoops:
    """Marks the nodes made inside it as belonging to forward loops (their counters, stacks
    and pushes), so that a gradient loop being built at the time (a nested loop's gradient is
    built inside its parent's) does not take them into its body."""

    def __init__(self, g):
        self.g = g

    def __enter__(self):
        self.before = set(self.g)

    def __exit__(self, *exc):
        marked = self.g.__dict__.setdefault("_nodes_of_other_loops", set())
        marked.update(n for n in self.g if n not in self.before)
        return False


def _live(loop, t):
    """``t``, or zeros in iterations where it is dead (it is on an untaken branch of a cond in
    the loop body), so the accumulator saving it gets a value every iteration.

    With the conds' literals (p1, k1) .. (pm, km) above ``t``: Merge(t, Z1, .., Zm), where Zj
    is live iff p1..p(j-1) held and pj did not (a zeros Const gated by a Switch chain)."""
    from compiler.ir.frames import cond_guards
    from dsl.array_ops import identity
    from dsl.context import control_dependencies
    from dsl.ops import constant
    from dsl.tensor import Tensor
    import numpy as np
    # The guards of the forward loop's values, found once per loop: nodes added since (the
    # pushes, these gates) change no existing node's guard. (Once per saved value was
    # quadratic in the graph's size: minutes for a graph of a few dozen RNNs.)
    out_guard = loop.__dict__.get("_out_guard")
    if out_guard is None or t.output not in out_guard:
        _, out_guard = cond_guards(list(loop.graph))
        loop._out_guard = out_guard
    lits = [(p, k) for p, k in out_guard[t.output]
            if p.node in loop.members and loop.out_in[p.node] == loop.frame]
    if not lits:
        return t
    shape = _static_shape(t, "a value on a branch of a cond, saved by the forward loop")
    zs = []
    gate = Tensor(lits[0][0])                 # live whenever the body runs
    for p, k in lits:
        sw = apply_op("Switch", [gate, Tensor(p)], name="live_gate")
        with control_dependencies([identity(sw[1 - k], name="live_not")]):
            zs.append(constant(np.zeros(shape, dtype=t.dtype.np), name="live_zeros"))
        gate = sw[k]
    return apply_op("Merge", [[t] + zs], name="live")[0]


def _static_shape(t, what):
    s = static_shape(t)
    if s is None or any(d is None for d in s):
        raise MissingGradientError(
            f"the gradient of while_loop needs the static shape of {what} '{t.name}', "
            f"got {s if s is None else list(s)}")
    return list(s)


def while_loop_grad(exit_node, grads, between, sum_fn):
    """Differentiate a whole while_loop at once (called by ``gradients`` at the first Exit it
    meets): a backward loop runs the body's gradient as many times as the forward loop ran,
    popping each iteration's forward values from the stacks the forward loop pushed them on.
    Adds the gradients of the loop's initial values and loop-invariant inputs to ``grads``;
    returns the loop's nodes (done).

    Order: a push waits for its iteration's counter, and the counter's next value waits for
    the iteration's pushes (the same for pops in the backward loop), so the interpreter's
    dataflow scheduler pushes and pops in iteration order however far iterations overlap."""
    g = exit_node.graph
    snapshots = g.__dict__.setdefault("_loop_snapshots", {})
    sw = exit_node.inputs[0].node
    loop = snapshots.get(sw.inputs[1].node) if sw.op == "Switch" else None
    loop = loop or _Loop(exit_node)
    # The loops nested in this one are differentiated while its backward body is built, when
    # the graph holds half-built nodes: take their structure now (afresh unless this loop is
    # itself being differentiated inside another one's gradient).
    outermost_call = not g.__dict__.get("_loop_grads_in_progress", 0)
    for lc in loop.inner_loop_conds:
        inner_exit = next((u for s2 in lc.users if s2.op == "Switch" for u in s2.users
                           if u.op == "Exit"), None)
        if inner_exit is not None and (outermost_call or lc not in snapshots):
            snapshots[lc] = _Loop(inner_exit)
    g._loop_grads_in_progress = g.__dict__.get("_loop_grads_in_progress", 0) + 1
    try:
        return _differentiate(loop, g, grads, between, sum_fn)
    finally:
        g._loop_grads_in_progress -= 1


def _differentiate(loop, g, grads, between, sum_fn):
    """The body of ``while_loop_grad`` for the loop ``loop``."""
    from dsl.array_ops import identity, zeros_like
    from dsl.context import control_dependencies, name_scope
    from dsl.control_flow_ops import while_loop
    from dsl.gradients import _is_differentiable, gradients
    from dsl.ops import constant
    from dsl.tensor import Tensor
    grad_exits = g.__dict__.setdefault("_grad_loop_exits", [])
    mark = len(grad_exits)
    float_vars = [v for v in loop.vars if _is_differentiable(v[2].output(0))]
    inv = [e for e in loop.invariants if _is_differentiable(e.output(0)) and e in between]
    exit_grads = []
    for enter, merge, s, body_in, nxt, ex in float_vars:
        gl = grads.get(ex.output(0)) if ex is not None else None
        exit_grads.append(sum_fn(gl, f"{ex.name}_sum") if gl else None)
    if all(x is None for x in exit_grads) or not float_vars:
        return loop.members
    scope = f"{loop.name}_grad"
    with _AddingToForwardLoops(g):
        n_iter, count_in, count_next = loop.counter()
    pushes = []
    state = {"pops": []}

    def saved_value(out):
        """The forward value ``out`` of this iteration, pushed on a stack of its own; returns
        the stack's handle."""
        with _AddingToForwardLoops(g):
            return _push(out)

    def _push(out):
        t = Tensor(out)
        outermost = loop.level_enters[0]
        with g.inserting_before(outermost):
            # in the context of the outermost loop (a loop in a cond branch makes its stacks
            # there); a nested loop's stack holds the values of all its runs, which its
            # gradient pops in reverse, run by run
            with control_dependencies([outermost.inputs[0].node]):
                size = constant(-1, name=f"{loop.name}/stack_max_size")
            handle = apply_op("StackV2", [size], {"elem_type": t.dtype,
                                                  "stack_name": f"{loop.name}/{out.name}"},
                              name=f"{loop.name}/stack")
        h_in = loop.handle_in_frame(handle)
        anchor = count_in.output.node
        if loop.position.get(out.node, len(loop.position)) > loop.position[loop.loop_cond]:
            anchor = out.node           # (a node added after the fact is in the body)
        with g.inserting_after(anchor):
            with control_dependencies([count_in]):
                push = apply_op("StackPushV2", [h_in, _live(loop, t)], name=f"{loop.name}/push")
        pushes.append(push.output.node)
        return handle

    def external(out, invariant):
        node = out.node
        if node in loop.invariants:
            return invariant(node.inputs[0])
        home = loop.out_in.get(node) if node in loop.members else \
            g.__dict__.get("_forward_frame_of", {}).get(node)
        if home == loop.frame and node.op == "Const":
            # a constant of the body (an axis, a shape): the backward loop makes its own
            with g.inserting_after(state["j"].output.node):
                with control_dependencies([state["j"]]):
                    v = constant(node.attrs["value"], dtype=out.dtype, name="saved_const")
            return v.output
        if home == loop.frame:
            h = invariant(saved_value(out).output)
            j = state["j"]
            with g.inserting_after(j.output.node):
                with control_dependencies([j]):
                    v = apply_op("StackPopV2", [Tensor(h)],
                                 {"elem_type": out.dtype, "elem_shape": static_shape(out)},
                                 name="pop")
            state["pops"].append(v)
            return v.output
        return None

    def external_shape(shape_node, invariant):
        """A ``Shape`` of a value of this loop's iterations: a constant in the backward loop
        when the shape is static, else the shape saved on a stack (never the whole value: a
        loop variable that grows by ``concat`` would be saved whole every iteration)."""
        out = shape_node.inputs[0]
        node = out.node
        out_type = shape_node.output_types[0].dtype
        shape = out.type.shape
        if shape is not None and all(d is not None for d in shape):
            # (a loop invariant's too: its static shape keeps the gradient's shapes static)
            import numpy as np
            with g.inserting_after(state["j"].output.node):
                with control_dependencies([state["j"]]):
                    v = constant(np.array(shape, dtype=out_type.np), name="saved_shape")
            return v.output
        home = loop.out_in.get(node) if node in loop.members else \
            g.__dict__.get("_forward_frame_of", {}).get(node)
        if home != loop.frame or node in loop.invariants:
            return None
        foreign = g.__dict__.get("_nodes_of_other_loops", ())
        if any(u.op != "Shape" and u not in loop.members and u not in foreign
               for u in node.output_users(out.index)):
            return None        # the backward loop reads the value itself: it is saved anyway
        with _AddingToForwardLoops(g):
            with g.inserting_after(node):
                fwd_shape = apply_op("Shape", [Tensor(out)], {"out_type": out_type},
                                     name=f"{loop.name}/saved_shape")
            g.__dict__.setdefault("_forward_frame_of", {})[fwd_shape.output.node] = loop.frame
        return external(fwd_shape.output, invariant)

    def cond(j, *rest):
        return j < n_iter

    def body(j, *gs):
        state["j"] = j
        g_vars = list(gs[:len(float_vars)])
        g_inv = list(gs[len(float_vars):])
        xs = [Tensor(v[3].output(0)) for v in float_vars] + [Tensor(e.output(0)) for e in inv]
        ys = [Tensor(v[4]) for v in float_vars]
        nested_from = len(grad_exits)
        d = gradients(ys, xs, grad_ys=g_vars, stop_gradients=xs)
        # the gradient loops of nested loops finish in this iteration, before the next one
        nested = grad_exits[nested_from:]
        d = [_dense(x, like) for x, like in zip(d, xs)]
        new_vars = [dk if dk is not None else zeros_like(gk) for dk, gk in zip(d, g_vars)]
        new_inv = [gi + dk if dk is not None else gi
                   for gi, dk in zip(g_inv, d[len(float_vars):])]
        with control_dependencies(state["pops"] + nested):
            nj = j + 1
        return [nj] + new_vars + new_inv

    with name_scope(scope):
        init = [eg if eg is not None else zeros_like(Tensor(v[5].output(0)) if v[5] is not None
                                                     else Tensor(v[0].inputs[0]))
                for eg, v in zip(exit_grads, float_vars)]
        init += [zeros_like(Tensor(e.inputs[0])) for e in inv]
        out = while_loop(cond, body, [0] + init, parallel_iterations=loop.parallel_iterations,
                         _external=external, _external_shape=external_shape,
                         name="while")
    # the loops nested in this one are done with: only this loop's exits are the enclosing
    # gradient body's to wait for
    del grad_exits[mark:]
    grad_exits.extend(out)
    if pushes:
        # the counter's next value waits for this iteration's pushes
        last = max(pushes, key=lambda n: _position(g, n))
        with g.inserting_after(last), _AddingToForwardLoops(g):
            with control_dependencies(pushes):
                synced = identity(Tensor(count_next.inputs[0]), name=f"{loop.name}/pushed")
            nxt = apply_op("NextIteration", [synced], name=f"{loop.name}/NextIteration")
        merge = next(u for u in count_next.users if u.op == "Merge")
        merge.set_input(1, nxt.output)
        g.erase_node(count_next)
    for v, gv in zip(float_vars, out[1:1 + len(float_vars)]):
        src = v[0].inputs[0]
        if src.node in between:
            grads.setdefault(src, []).append(gv)
    for e, gi in zip(inv, out[1 + len(float_vars):]):
        src = e.inputs[0]
        if src.node in between:
            grads.setdefault(src, []).append(gi)
    return loop.members


def _dense(grad, like):
    """``grad`` as a dense tensor (an IndexedSlices, the gradient of a gather, summed into its
    rows), with the static shape of ``like`` when it has one."""
    if not hasattr(grad, "to_dense"):
        return grad
    shape = static_shape(like)
    if shape is None or not shape or any(d is None for d in shape):
        return grad.to_dense()
    import numpy as np
    from dsl.math_ops import unsorted_segment_sum
    rows = np.array(shape[0], dtype=grad.indices.dtype.np)
    return unsorted_segment_sum(grad.values, grad.indices, rows, name="to_dense")


def _position(g, node) -> int:
    for k, n in enumerate(g):
        if n is node:
            return k
    raise KeyError(node.name)
