"""TensorFlow 2's function library in a GraphDef, lowered at import to flowc's dataflow ops.

A TensorFlow 2 graph (a ``tf.function`` frozen without lowering its control flow, a SavedModel's
signature) calls functions of ``GraphDef.library``: ``PartitionedCall`` and
``StatefulPartitionedCall`` (attr ``f``), a node whose op is a function's name, and the
functional control flow ``While``/``StatelessWhile``, ``If``/``StatelessIf`` and
``Case``/``StatelessCase``, whose conditions, bodies and branches are functions. flowc has no
function values: this module rewrites such a GraphDef into a flat one that
``compiler/interop/graphdef.py`` imports like any other, as TensorFlow's own graph passes do:

- calls are inlined (TensorFlow's ``InlineFunctionBody``), recursively: a function's node ``n``
  becomes ``<call>/n``; its inputs are resolved as TensorFlow's ``FunctionDef`` writes them
  (``arg``, ``arg:i``, ``node:out_arg``, ``node:out_arg:i``, the output argument names being
  those of the op's definition, flowc's being TensorFlow's); ``ret`` gives the call's outputs,
  ``control_ret`` what ``^call`` waits for; attrs written as placeholders take the caller's
  values (``f``'s attrs, or a direct call's). The caller's name stays, as a ``NoOp`` that
  waits for the call (so ``^call`` still means "after the call"); readers of ``call:i`` read the
  returned tensor itself. ``lowered_output(lowering, "call:i")`` gives it to a caller that
  needs the name (a SavedModel's signature names ``StatefulPartitionedCall:0``);
- ``While`` becomes a loop frame (``LowerWhileHelper``): per loop variable ``Enter``, ``Merge``,
  ``Switch`` on the condition's ``LoopCond``, ``Identity`` into the body, ``NextIteration``
  and ``Exit``; a variable the body returns unchanged is a loop invariant (an ``is_constant``
  ``Enter``, its output the input), as TensorFlow's loop-invariant motion makes it;
- ``If`` becomes a cond (``LowerIfOp``): the inputs ``Switch`` on the predicate, each branch is
  inlined on its side, the outputs ``Merge``; ``Case`` becomes a chain of such conds
  (``branch_index == 0``, else ``== 1``, ..., else the last branch, as out-of-range indices
  take the last one).

Nodes of a function with no inputs (constants) get a control input on their context's pivot
(the call's control inputs, a loop's, a branch's), so they run where and as often as their
context does, as flowc's ``cond`` and ``while_loop`` build them. ``output_shapes`` and shape
invariants are not needed: the importer types a loop's ``Merge`` to the fixpoint of its
iterations. TensorFlow's lists (``variant`` tensors) are flowc's dense lists
(``compiler/ops/tensor_list.py``): a ``variant`` type attr is left for the importer to take
from the node's input, and ``compiler/interop/tf_lists.py`` gives lists whose element shape
is unknown the shape of their first item.

Every failure is a ``GraphDefImportError`` naming the file, the node and the function.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from compiler.interop.graphdef import (LOCATION_ATTR, GraphDefImportError, _split_input,
                                       graphdef_to_graph)
from compiler.interop.protos import tf_protos
from compiler.ir.op_registry import get_op, has_op
from compiler.ops.tensor_list import LIST_OPS

CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
WHILE_OPS = ("While", "StatelessWhile", "_While")
IF_OPS = ("If", "StatelessIf", "_If")
CASE_OPS = ("Case", "StatelessCase")
FUNCTIONAL_OPS = CALL_OPS + WHILE_OPS + IF_OPS + CASE_OPS
# TensorFlow's lowering of Case (a graph frozen after it ran): a Switch to one of N outputs
SWITCH_N = "_SwitchN"

DT_BOOL, DT_INT32, DT_VARIANT = 10, 3, 21


class _Fail(Exception):
    """A problem found while lowering; the caller adds the file and the top-level node."""


@dataclass
class _Context:
    """Where inlined nodes run: ``pivot`` is the node that nodes without inputs wait for (None
    at the top level); ``invariants`` the loop-invariant ``Enter``s of the innermost loop
    (nodes reading only those get the pivot too, as ``while_loop`` gives them)."""
    pivot: Optional[str] = None
    invariants: Set[str] = field(default_factory=set)


@dataclass
class Lowering:
    """The flat GraphDef, and where each call's outputs went (``"call:i"`` -> tensor)."""
    graph_def: object
    outputs: Dict[str, str]


def needs_lowering(gd) -> bool:
    """Whether ``gd`` calls functions, has functional control flow or TensorLists."""
    if len(gd.library.function):
        return True
    return any(nd.op in FUNCTIONAL_OPS or nd.op in LIST_OPS or nd.op == SWITCH_N
               or _has_variant_type(nd) for nd in gd.node)


def _has_variant_type(nd) -> bool:
    return any(v.WhichOneof("value") == "type" and v.type == DT_VARIANT for v in nd.attr.values())


def import_functional(gd, path: str, name: Optional[str] = None,
                      rewrite: Optional[Callable[[object], None]] = None):
    """The flowc graph of a GraphDef with functions, control flow ops or TensorLists (see
    ``import_lowered``)."""
    return import_lowered(gd, path, name, rewrite)[0]


def import_lowered(gd, path: str, name: Optional[str] = None,
                   rewrite: Optional[Callable[[object], None]] = None):
    """(the flowc graph, the ``Lowering``) of a GraphDef with functions, control flow ops or
    TensorLists: lowered (``lower_functions``), imported, and imported again with the element
    shapes of its lists made known (``compiler/interop/tf_lists.py``). ``lowered_output``
    names the graph's tensor that a call's output became (a SavedModel signature's
    ``StatefulPartitionedCall:0``); the outputs of a call that the GraphDef reads nowhere are
    kept only if the call itself is read by nothing (it is then one of the model's ends).
    ``rewrite``, when given, changes the flat GraphDef in place before it is imported (a
    SavedModel's variables become constants)."""
    from compiler.interop.tf_lists import check_list_shapes, refine_list_shapes
    lowering = lower_functions(gd, path)
    flat = lowering.graph_def
    if rewrite is not None:
        rewrite(flat)
    graph = graphdef_to_graph(flat, path, name, lowered=True)
    for _ in range(4):
        refined = refine_list_shapes(flat, graph, path)
        if refined is None:
            break
        flat = refined
        graph = graphdef_to_graph(flat, path, name, lowered=True)
    check_list_shapes(graph)
    return graph, Lowering(flat, lowering.outputs)


def lowered_output(lowering: Lowering, tensor: str) -> str:
    """The tensor of the flat graph that ``tensor`` (``node`` or ``node:i`` of the original
    GraphDef) is: a call's output is the returned tensor."""
    name, idx, _ = _split_input(tensor)
    key = f"{name}:{idx}"
    seen = set()
    while key in lowering.outputs and key not in seen:
        seen.add(key)
        key = _normal(lowering.outputs[key])
    name, _, idx = key.rpartition(":")
    return name if idx == "0" else key


def lower_functions(gd, path: str = "<graphdef>") -> Lowering:
    """``gd`` with every function call inlined and its functional control flow lowered to
    flowc's (see the module docstring)."""
    lowering = _Lowerer(gd, path)
    lowering.run()
    return Lowering(lowering.out, lowering.alias)


def _normal(ref: str) -> str:
    name, idx, _ = _split_input(ref)
    return f"{name}:{idx}"


def _ref(name: str, idx: int) -> str:
    return name if idx == 0 else f"{name}:{idx}"


class _Lowerer:
    def __init__(self, gd, path: str):
        self.gd = gd
        self.path = path
        self.pb = tf_protos()
        self.functions = {f.signature.name: f for f in gd.library.function}
        self.out = self.pb.GraphDef()
        self.out.versions.CopyFrom(gd.versions)
        self.names: Set[str] = {nd.name for nd in gd.node}
        self.alias: Dict[str, str] = {}
        self.active: List[str] = []            # the functions being inlined, outermost first
        self.location = ""

    # --- the top level --------------------------------------------------------------------------
    def run(self) -> None:
        for k, nd in enumerate(self.gd.node):
            self.location = f"{self.path}:{k + 1}:0"
            try:
                if self._is_call_like(nd.op):
                    data, ctrl = _split_inputs(nd.input)
                    self._lower(nd, nd.name, data, ctrl, _Context())
                else:
                    self._emit_copy(nd, nd.name, list(nd.input))
            except _Fail as e:
                raise GraphDefImportError(f"{self.path}: node {k + 1} '{nd.name}' ({nd.op}): "
                                          f"{e}") from None
        self._resolve_aliases()
        self._drop_dead_inlined_nodes()
        self._drop_variant_types()

    def _is_call_like(self, op: str) -> bool:
        return op in FUNCTIONAL_OPS or op == SWITCH_N or (op in self.functions and not has_op(op))

    # --- emitting nodes ---------------------------------------------------------------------------
    def _unique(self, base: str) -> str:
        name, k = base, 0
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def _node(self, name: str, op: str, inputs: Sequence[str] = (), **attrs):
        nd = self.out.node.add(name=name, op=op)
        nd.input.extend(inputs)
        for key, value in attrs.items():
            nd.attr[key].CopyFrom(value)
        nd.attr[LOCATION_ATTR].s = self.location.encode()
        return nd

    def _emit_copy(self, nd, name: str, inputs: Sequence[str], attrs=None):
        out = self.out.node.add()
        out.CopyFrom(nd)
        out.name = name
        del out.input[:]
        out.input.extend(inputs)
        if attrs is not None:
            out.ClearField("attr")
            for key, value in attrs.items():
                out.attr[key].CopyFrom(value)
        if LOCATION_ATTR not in out.attr:
            out.attr[LOCATION_ATTR].s = self.location.encode()
        return out

    def _attr(self, **kw):
        a = self.pb.AttrValue()
        for key, value in kw.items():
            if key == "s":
                a.s = value.encode()
            else:
                setattr(a, key, value)
        return a

    def _int_const(self, name: str, value: int, control: Sequence[str]) -> str:
        t = self.pb.TensorProto(dtype=DT_INT32)
        t.int_val.append(int(value))
        a = self.pb.AttrValue()
        a.tensor.CopyFrom(t)
        self._node(name, "Const", ["^" + c for c in control], value=a,
                   dtype=self._attr(type=DT_INT32))
        return name

    # --- calls ------------------------------------------------------------------------------------
    def _lower(self, nd, flat: str, data: List[str], ctrl: List[str], ctx: _Context) -> None:
        """Lower the call-like node ``nd`` named ``flat`` (inputs already in flat names)."""
        op = nd.op
        if op in WHILE_OPS:
            outs, waits = self._lower_while(nd, flat, data, ctrl, ctx)
        elif op in IF_OPS:
            outs, waits = self._lower_if(nd, flat, data, ctrl, ctx)
        elif op in CASE_OPS:
            outs, waits = self._lower_case(nd, flat, data, ctrl, ctx)
        elif op == SWITCH_N:
            outs, waits = self._lower_switch_n(nd, flat, data, ctrl)
        else:
            if op in CALL_OPS:
                f = self._func_attr(nd, "f")
                fname, bindings = f.name, dict(f.attr)
            else:
                fname, bindings = op, {k: v for k, v in nd.attr.items() if not k.startswith("_")}
            outs, control_rets = self._inline(fname, flat, data, bindings, ctx, ctrl)
            waits = [_split_input(o)[0] for o in outs] + control_rets
        for i, o in enumerate(outs):
            self.alias[f"{flat}:{i}"] = o
        self._node(self._reserve(flat), "NoOp", sorted({"^" + w for w in waits}))

    def _reserve(self, flat: str) -> str:
        """``flat`` itself: the name was set aside for this node (its caller's name)."""
        self.names.add(flat)
        return flat

    def _func_attr(self, nd, key: str):
        if key not in nd.attr or nd.attr[key].WhichOneof("value") != "func":
            raise _Fail(f"has no function attr '{key}'")
        return nd.attr[key].func

    def _function(self, name: str):
        fdef = self.functions.get(name)
        if fdef is None:
            raise _Fail(f"calls function '{name}', which the GraphDef's library does not define")
        if name in self.active:
            raise _Fail(f"function '{name}' calls itself ({' -> '.join(self.active + [name])}): "
                        "recursion cannot be inlined")
        return fdef

    def _inline(self, fname: str, prefix: str, args: List[str], bindings: Dict, ctx: _Context,
                call_ctrl: Sequence[str]) -> Tuple[List[str], List[str]]:
        """Inline function ``fname`` as ``prefix/...`` on the flat tensors ``args``; returns
        its outputs (flat tensors) and the nodes its control outputs name."""
        fdef = self._function(fname)
        self.active.append(fname)
        try:
            return self._inline_body(fdef, prefix, args, bindings, ctx, call_ctrl)
        except _Fail as e:
            if str(e).startswith("in function"):
                raise
            raise _Fail(f"in function '{fname}': {e}") from None
        finally:
            self.active.pop()

    def _inline_body(self, fdef, prefix, args, bindings, ctx, call_ctrl):
        sig = fdef.signature
        arg_map: Dict[str, List[str]] = {}
        k = 0
        for a in sig.input_arg:
            n = self._arg_count(a, bindings)
            arg_map[a.name] = args[k:k + n]
            k += n
        if k != len(args):
            raise _Fail(f"takes {k} input tensors, the call gives {len(args)}")
        if call_ctrl:
            gate = self._unique(f"{prefix}/input_control_node")
            self._node(gate, "NoOp", ["^" + c for c in call_ctrl])
            ctx = _Context(gate, ctx.invariants)
        inner = {nd.name: nd for nd in fdef.node_def}
        flat = {name: self._unique(f"{prefix}/{name}") for name in inner}

        def resolve(text: str) -> List[str]:
            return self._resolve(text, arg_map, inner, flat, bindings)

        for nd in fdef.node_def:
            data: List[str] = []
            ctrl: List[str] = []
            for text in nd.input:
                if text.startswith("^"):
                    if text[1:] not in flat:
                        raise _Fail(f"node '{nd.name}': control input '{text}' names no node "
                                    "of the function")
                    ctrl.append(flat[text[1:]])
                else:
                    data.extend(resolve(text))
            attrs = {key: self._bind(value, bindings, nd.name, key)
                     for key, value in nd.attr.items()}
            if self._free(data, ctrl, ctx):
                ctrl.append(ctx.pivot)
            if self._is_call_like(nd.op):
                call = self.pb.NodeDef(name=nd.name, op=nd.op, device=nd.device)
                for key, value in attrs.items():
                    call.attr[key].CopyFrom(value)
                self._lower(call, flat[nd.name], data, ctrl, ctx)
            else:
                self._emit_copy(nd, flat[nd.name], data + ["^" + c for c in ctrl], attrs)
        outs: List[str] = []
        for a in sig.output_arg:
            if a.name not in fdef.ret:
                raise _Fail(f"output '{a.name}' has no ret")
            got = resolve(fdef.ret[a.name])
            want = self._arg_count(a, bindings)
            if len(got) != want:
                raise _Fail(f"output '{a.name}' is {len(got)} tensors, its signature says {want}")
            outs.extend(got)
        control_rets = []
        for key, node in fdef.control_ret.items():
            if node not in flat:
                raise _Fail(f"control output '{key}' names no node of the function: '{node}'")
            control_rets.append(flat[node])
        return outs, control_rets

    @staticmethod
    def _free(data: List[str], ctrl: List[str], ctx: _Context) -> bool:
        """A node that would run outside its context: no inputs, or (in a loop) only loop
        invariants and no control input."""
        if ctx.pivot is None or ctrl:
            return False
        return all(_normal(d) in ctx.invariants for d in data)

    def _arg_count(self, arg, bindings: Dict) -> int:
        if arg.number_attr:
            return int(self._binding(bindings, arg.number_attr).i)
        if arg.type_list_attr:
            return len(self._binding(bindings, arg.type_list_attr).list.type)
        return 1

    @staticmethod
    def _binding(bindings: Dict, key: str):
        if key not in bindings:
            raise _Fail(f"the call does not give attr '{key}' the function's signature needs")
        return bindings[key]

    def _bind(self, value, bindings: Dict, node: str, key: str):
        """``value`` with attr placeholders replaced by the caller's attrs."""
        which = value.WhichOneof("value")
        if which == "placeholder":
            if value.placeholder not in bindings:
                raise _Fail(f"node '{node}': attr '{key}' is the placeholder "
                            f"'{value.placeholder}', which the call does not give")
            return bindings[value.placeholder]
        if which == "func" and any(v.WhichOneof("value") == "placeholder"
                                   for v in value.func.attr.values()):
            out = self.pb.AttrValue()
            out.CopyFrom(value)
            for k, v in value.func.attr.items():
                out.func.attr[k].CopyFrom(self._bind(v, bindings, node, key))
            return out
        return value

    # --- FunctionDef input names ------------------------------------------------------------------
    def _resolve(self, text: str, arg_map, inner, flat, bindings) -> List[str]:
        parts = text.split(":")
        head = parts[0]
        if head in arg_map and head not in inner:
            refs = arg_map[head]
            if len(parts) == 1:
                return list(refs)
            if len(parts) == 2 and parts[1].isdigit() and int(parts[1]) < len(refs):
                return [refs[int(parts[1])]]
            raise _Fail(f"input '{text}' does not name a tensor of argument '{head}'")
        if head not in inner:
            raise _Fail(f"input '{text}' names no argument or node of the function")
        nd = inner[head]
        if len(parts) == 1:
            return [_ref(flat[head], 0)]
        if len(parts) == 2 and parts[1].isdigit():     # a GraphDef-style "node:i"
            return [_ref(flat[head], int(parts[1]))]
        start, count = self._output_range(nd, parts[1], bindings)
        if len(parts) == 2:
            return [_ref(flat[head], start + i) for i in range(1 if count is None else count)]
        if len(parts) == 3 and parts[2].isdigit():
            i = int(parts[2])
            if count is not None and i >= count:
                raise _Fail(f"input '{text}': output '{parts[1]}' of '{head}' has {count} "
                            "tensors")
            return [_ref(flat[head], start + i)]
        raise _Fail(f"input '{text}' is not 'arg', 'node:output' or 'node:output:index'")

    def _output_range(self, nd, arg_name: str, bindings) -> Tuple[int, Optional[int]]:
        """(first flat output, number of outputs) of output argument ``arg_name`` of ``nd``."""
        attrs = {k: self._bind(v, bindings, nd.name, k) for k, v in nd.attr.items()}
        if nd.op in FUNCTIONAL_OPS:
            key = "T" if nd.op in WHILE_OPS else "Tout"
            if arg_name != "output":
                raise _Fail(f"{nd.op} '{nd.name}' has no output '{arg_name}' (it has 'output')")
            return 0, len(attrs[key].list.type) if key in attrs else None
        if nd.op in self.functions and not has_op(nd.op):
            args = [(a, a.number_attr, a.type_list_attr) for a in
                    self.functions[nd.op].signature.output_arg]
            counts = [self._arg_count(a, attrs) for a, _, _ in args]
            names = [a.name for a, _, _ in args]
        elif has_op(nd.op):
            op = get_op(nd.op)
            names = [a.name for a in op.outputs]
            counts = [self._op_arg_count(op, a, attrs) for a in op.outputs]
        else:
            return 0, None        # an op flowc lacks: the importer lists it with the others
        if arg_name not in names:
            raise _Fail(f"node '{nd.name}' ({nd.op}) has no output '{arg_name}' (its outputs: "
                        f"{', '.join(names) or 'none'})")
        k = names.index(arg_name)
        return sum(counts[:k]), counts[k]

    @staticmethod
    def _op_arg_count(op, arg, attrs) -> int:
        if arg.number_attr:
            if arg.number_attr in attrs:
                return int(attrs[arg.number_attr].i)
            a = op.attrs[arg.number_attr]
            return int(a.default) if a.has_default else 1
        if arg.type_list_attr:
            return len(attrs[arg.type_list_attr].list.type) if arg.type_list_attr in attrs else 0
        return 1

    # --- While ------------------------------------------------------------------------------------
    def _lower_while(self, nd, flat, data, ctrl, ctx):
        cond, body = self._func_attr(nd, "cond"), self._func_attr(nd, "body")
        body_def = self._function(body.name)
        self._function(cond.name)
        parallel = max(1, nd.attr["parallel_iterations"].i) if "parallel_iterations" in nd.attr \
            else 10
        frame = flat
        invariant = self._invariant_vars(body_def, len(data))
        if data and all(invariant):
            invariant[0] = False                 # a loop needs one variable that changes

        def enter(src: str, constant: bool, k: int) -> str:
            return self._node(self._unique(f"{frame}/Enter" + ("" if k == 0 else f"_{k}")),
                              "Enter", [src] + ["^" + c for c in ctrl],
                              frame_name=self._attr(s=frame), is_constant=self._attr(b=constant),
                              parallel_iterations=self._attr(i=parallel)).name
        loop_args: List[str] = []
        merges: Dict[int, str] = {}
        nexts: Dict[int, str] = {}
        invariants: Set[str] = set()
        for k, src in enumerate(data):
            e = enter(src, invariant[k], k)
            if invariant[k]:
                invariants.add(f"{e}:0")
                loop_args.append(e)
                continue
            nexts[k] = self._unique(f"{frame}/NextIteration" + ("" if k == 0 else f"_{k}"))
            merges[k] = self._node(self._unique(f"{frame}/Merge" + ("" if k == 0 else f"_{k}")),
                                   "Merge", [e, nexts[k]], N=self._attr(i=2)).name
            loop_args.append(merges[k])
        if not merges:
            raise _Fail("a While needs at least one loop variable")
        first_merge = merges[min(merges)]
        pred, _ = self._inline(cond.name, f"{frame}/cond", loop_args, dict(cond.attr),
                               _Context(first_merge, invariants), [])
        if len(pred) != 1:
            raise _Fail(f"its condition '{cond.name}' returns {len(pred)} tensors, not one bool")
        lc = self._node(self._unique(f"{frame}/LoopCond"), "LoopCond", pred).name
        body_args = list(loop_args)
        exits: Dict[int, str] = {}
        for k, m in merges.items():
            sfx = "" if k == 0 else f"_{k}"
            sw = self._node(self._unique(f"{frame}/Switch{sfx}"), "Switch", [m, lc]).name
            exits[k] = self._node(self._unique(f"{frame}/Exit{sfx}"), "Exit", [sw]).name
            body_args[k] = self._node(self._unique(f"{frame}/Identity{sfx}"), "Identity",
                                      [f"{sw}:1"]).name
        pivot = body_args[min(merges)]
        rets, control_rets = self._inline(body.name, f"{frame}/body", body_args, dict(body.attr),
                                          _Context(pivot, invariants), [])
        if len(rets) != len(data):
            raise _Fail(f"its body '{body.name}' returns {len(rets)} tensors for {len(data)} "
                        "loop variables")
        for k, nxt in nexts.items():
            self._node(self._reserve(nxt), "NextIteration",
                       [rets[k]] + ["^" + c for c in control_rets])
        outs = [exits[k] if k in exits else data[k] for k in range(len(data))]
        return outs, list(exits.values())

    @staticmethod
    def _invariant_vars(body_def, n: int) -> List[bool]:
        """Per loop variable, whether the body returns its argument unchanged (directly or
        through ``Identity`` nodes)."""
        sig = body_def.signature
        if len(sig.input_arg) != n or len(sig.output_arg) != n or any(
                a.number_attr or a.type_list_attr for a in sig.input_arg):
            return [False] * n
        identities = {nd.name: nd.input[0] for nd in body_def.node_def
                      if nd.op == "Identity" and nd.input and not nd.input[0].startswith("^")}

        def source(text: str) -> str:
            for _ in range(len(identities) + 1):
                name, out, _ = (text.split(":") + ["", ""])[:3]
                if name not in identities or out not in ("", "output") or _ not in ("", "0"):
                    return text
                text = identities[name]
            return text
        return [source(body_def.ret.get(o.name, "")) == i.name
                for i, o in zip(sig.input_arg, sig.output_arg)]

    # --- If, Case ---------------------------------------------------------------------------------
    def _lower_if(self, nd, flat, data, ctrl, ctx):
        if not data:
            raise _Fail("an If needs its predicate input")
        then_f, else_f = self._func_attr(nd, "then_branch"), self._func_attr(nd, "else_branch")
        pred = self._as_bool(nd, flat, data[0], ctrl, ctx)

        def branch(f, side: str):
            return lambda args, c: self._inline(f.name, f"{flat}/{side}", args, dict(f.attr), c,
                                                [])
        return self._cond(flat, pred, data[1:], branch(then_f, "then"), branch(else_f, "else"),
                          ctrl)

    def _as_bool(self, nd, flat, pred: str, ctrl, ctx) -> str:
        """The predicate as a bool (If takes a number too: nonzero is true)."""
        tcond = nd.attr["Tcond"].type if "Tcond" in nd.attr else DT_BOOL
        if tcond == DT_BOOL:
            return pred
        return self._node(self._unique(f"{flat}/pred"), "Cast", [pred],
                          DstT=self._attr(type=DT_BOOL)).name

    def _cond(self, flat: str, pred: str, inputs: List[str],
              then_fn: Callable, else_fn: Callable, ctrl) -> Tuple[List[str], List[str]]:
        """A cond on ``pred`` (flowc's ``cond``: Switch, both branches, Merge)."""
        control = ["^" + c for c in ctrl]
        sw = self._node(self._unique(f"{flat}/switch_pred"), "Switch", [pred, pred] + control).name
        pivot_t = self._node(self._unique(f"{flat}/switch_t"), "Identity", [f"{sw}:1"]).name
        pivot_f = self._node(self._unique(f"{flat}/switch_f"), "Identity", [sw]).name
        switches = [self._node(self._unique(f"{flat}/Switch" + ("" if k == 0 else f"_{k}")),
                               "Switch", [x, pred] + control).name
                    for k, x in enumerate(inputs)]
        outs_t, cr_t = then_fn([f"{s}:1" for s in switches], _Context(pivot_t))
        outs_f, cr_f = else_fn(list(switches), _Context(pivot_f))
        if len(outs_t) != len(outs_f):
            raise _Fail(f"its branches return {len(outs_t)} and {len(outs_f)} tensors")
        outs = [self._node(self._unique(f"{flat}/Merge" + ("" if k == 0 else f"_{k}")), "Merge",
                           [t, f], N=self._attr(i=2)).name
                for k, (t, f) in enumerate(zip(outs_t, outs_f))]
        waits = list(outs)
        if cr_t or cr_f:                       # the branch taken ran its control outputs
            done_t = self._node(self._unique(f"{flat}/then_done"), "Identity",
                                [pivot_t] + ["^" + c for c in cr_t]).name
            done_f = self._node(self._unique(f"{flat}/else_done"), "Identity",
                                [pivot_f] + ["^" + c for c in cr_f]).name
            waits.append(self._node(self._unique(f"{flat}/branch_executed"), "Merge",
                                    [done_t, done_f], N=self._attr(i=2)).name)
        return outs, waits

    def _lower_case(self, nd, flat, data, ctrl, ctx):
        if not data:
            raise _Fail("a Case needs its branch_index input")
        if "branches" not in nd.attr or not nd.attr["branches"].list.func:
            raise _Fail("has no branches")
        branches = list(nd.attr["branches"].list.func)

        def inline(k):
            f = branches[k]
            return lambda args, c: self._inline(f.name, f"{flat}/branch{k}", args, dict(f.attr),
                                                c, [])

        def level(k: int, scope: str, index: str, inputs: List[str], c: _Context, control):
            """Branch k if index == k, else the levels after it (the last: the default)."""
            if k == len(branches) - 1:
                return inline(k)(inputs, c)
            gate = [c.pivot] if c.pivot else []
            const = self._int_const(self._unique(f"{scope}/index_{k}"), k, gate)
            pred = self._node(self._unique(f"{scope}/is_{k}"), "Equal", [index, const]).name
            return self._cond(f"{scope}/case_{k}", pred, [index] + inputs,
                              lambda args, cc: inline(k)(args[1:], cc),
                              lambda args, cc: level(k + 1, scope, args[0], args[1:], cc, []),
                              control)

        return level(0, flat, data[0], data[1:], ctx, ctrl)

    def _lower_switch_n(self, nd, flat, data, ctrl):
        """``_SwitchN(data, output_index)``: a chain of Switches on ``output_index == k``
        (an index out of range takes the last output, as TensorFlow's kernel does)."""
        if len(data) != 2 or "num_outs" not in nd.attr:
            raise _Fail("a _SwitchN takes data and output_index and has attr num_outs")
        n = nd.attr["num_outs"].i
        if n < 1:
            raise _Fail(f"num_outs is {n}")
        value, index = data
        near = [_split_input(index)[0]]          # constants where the index is computed
        control = ["^" + c for c in ctrl]
        outs, rest = [], value
        for k in range(n - 1):
            const = self._int_const(self._unique(f"{flat}/index_{k}"), k, near)
            pred = self._node(self._unique(f"{flat}/is_{k}"), "Equal", [index, const]).name
            sw = self._node(self._unique(f"{flat}/Switch_{k}"), "Switch",
                            [rest, pred] + control).name
            outs.append(f"{sw}:1")
            rest = sw
        outs.append(rest)
        return outs, [_split_input(value)[0]]

    # --- after all nodes are emitted --------------------------------------------------------------
    def _resolve_aliases(self) -> None:
        """Readers of a call's outputs read the returned tensors themselves."""
        for nd in self.out.node:
            changed = False
            inputs = []
            for text in nd.input:
                if text.startswith("^"):
                    inputs.append(text)
                    continue
                key = _normal(text)
                seen = set()
                while key in self.alias and key not in seen:
                    seen.add(key)
                    key = _normal(self.alias[key])
                name, _, idx = key.rpartition(":")
                new = _ref(name, int(idx))
                changed |= new != text
                inputs.append(new)
            if changed:
                del nd.input[:]
                nd.input.extend(inputs)

    def _drop_dead_inlined_nodes(self) -> None:
        """Drop what nothing needs once calls are inlined (a function's outputs the caller does
        not read, a cond's unused pivot, a constant only an unused loop variable read), so the
        outputs nothing reads are the GraphDef's own: kept are what its nodes nothing read
        (a call among them: what the call waits for), its placeholders, stateful ops, and
        what they read."""
        read = {_split_input(i)[0] for nd in self.gd.node for i in nd.input}
        sinks = {nd.name for nd in self.gd.node
                 if (nd.name not in read or nd.op == "Placeholder") and not _leftover(nd, read)}
        by_name = {nd.name: nd for nd in self.out.node}
        live: Set[str] = set()
        todo = [nd.name for nd in self.out.node if nd.name in sinks
                or (has_op(nd.op) and get_op(nd.op).stateful)]
        while todo:
            name = todo.pop()
            if name in live or name not in by_name:
                continue
            live.add(name)
            todo.extend(_split_input(i)[0] for i in by_name[name].input)
        if len(live) == len(self.out.node):
            return
        kept = [nd for nd in self.out.node if nd.name in live]
        del self.out.node[:]
        self.out.node.extend(kept)

    def _drop_variant_types(self) -> None:
        """A ``variant`` type attr of a node whose input it types (an Identity of a list): the
        importer takes the type from the input (a list is a dense tensor of its elements)."""
        for nd in self.out.node:
            if not has_op(nd.op):
                continue
            op = get_op(nd.op)
            typed_inputs = {a.type_attr for a in op.inputs if a.type_attr}
            for key in [k for k, v in nd.attr.items()
                        if v.WhichOneof("value") == "type" and v.type == DT_VARIANT]:
                if key in typed_inputs:
                    del nd.attr[key]


def _leftover(nd, read: Set[str]) -> bool:
    """A placeholder nothing reads that TensorFlow's freezing of lowered control flow leaves
    behind (``unused_control_flow_input``), or that holds a list (no feed can)."""
    return nd.op == "Placeholder" and nd.name not in read and (
        nd.name.startswith("unused_control_flow_input")
        or (nd.attr["dtype"].type == DT_VARIANT if "dtype" in nd.attr else False))


def _split_inputs(inputs) -> Tuple[List[str], List[str]]:
    data = [t for t in inputs if not t.startswith("^")]
    ctrl = [t[1:] for t in inputs if t.startswith("^")]
    return data, ctrl
