"""Running a ``*.flow`` syntax tree: one method per grammar rule, each calling the Python
builder (``dsl``) with the node's ``file:line:col`` as the location of the ops it creates."""
from __future__ import annotations

import difflib
import functools
import inspect
import operator
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import lark

import dsl
from compiler.errors import CompileError
from compiler.ir.location import SourceLocation, location_override
from compiler.ir.source_text import read_source
from dsl.flow.errors import FlowError, Source
from dsl.flow.limits import (LiteralError, checked, checked_mul, checked_pow, deepest,
                             dim_literal, float_literal, int_literal)
from dsl.flow.names import DTYPES, Missing, builtin_names, describe_value, resolve_builtin
from dsl.flow.parser import parse_text
from dsl.flow.strings import StringError, decode_string
from dsl.flow.training import INITIALIZERS, TRAIN_SETTINGS, Declared, TrainingDecl, optimizers
from dsl.init_ops import Initializer, glorot_uniform_initializer, zeros_initializer
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType
from runtime.errors import FlowcError

MAX_CALL_DEPTH = 64


class Binding:
    """A name's value and where it was defined (``file:line:col``, worked out only when an
    error message asks: a model binds thousands of names)."""

    __slots__ = ("value", "_file", "_item")

    def __init__(self, value: Any, file: "FileUnit", item):
        self.value, self._file, self._item = value, file, item

    @property
    def where(self) -> str:
        return self._file.where(self._item)


class _Poisoned:
    """The value of a name whose definition failed (its error is already reported)."""

    def __repr__(self) -> str:
        return "<poisoned>"


POISONED = _Poisoned()
_UNRESOLVED = object()

# Statements that define the name in their second child.
_DEFINING = {"input_stmt", "let_stmt", "var_stmt", "output_stmt", "def_stmt", "metric_stmt"}


class _Cascade(FlowError):
    """A statement used a poisoned name: it fails without an error message of its own."""

    def __init__(self, name: str):
        super().__init__(f"'{name}' is not defined (see the error that defines it)")


@dataclass
class Function:
    """A user function (``def``), expanded at each call site."""
    name: str
    params: List[str]
    body: lark.Tree
    scope: "Scope"
    token: lark.Token


@dataclass
class Scope:
    """Names of one file (``parent`` None) or one function call."""
    file: "FileUnit"
    parent: Optional["Scope"] = None
    function: Optional[str] = None
    names: Dict[str, Binding] = field(default_factory=dict)

    def lookup(self, name: str) -> Optional[Binding]:
        scope: Optional[Scope] = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None

    def visible(self) -> List[str]:
        out: List[str] = []
        scope: Optional[Scope] = self
        while scope is not None:
            out += list(scope.names)
            scope = scope.parent
        return out


@dataclass
class FileUnit:
    """One ``*.flow`` file being run: its text, shown path and absolute path."""
    source: Source
    path: str
    # id(tree node) -> (the node, its location): a function's body builds ops once per call
    _locations: Dict[int, Tuple[Any, SourceLocation]] = field(default_factory=dict, repr=False,
                                                              compare=False)

    def where(self, item) -> str:
        line, col = _position(item)
        return f"{self.source.filename}:{line}:{col}"

    def error(self, message: str, item) -> FlowError:
        return self.source.error(message, *_position(item))

    def location(self, item) -> SourceLocation:
        found = self._locations.get(id(item))
        if found is None:                     # the entry keeps the node, so its id stays its own
            found = self._locations[id(item)] = (
                item, SourceLocation(self.source.filename, *_position(item)))
        return found[1]


class _Return(Exception):
    """Carries a ``return`` value out of nested blocks of a function body."""

    def __init__(self, value: Any):
        super().__init__()
        self.value = value


class _Building(location_override):
    """``Evaluator.building``: a class, not a generator, as the DSL enters one per builder
    call; nodes made inside are at ``item``."""

    __slots__ = ("file", "item", "what")

    def __init__(self, file: FileUnit, item, what: str):
        self.file, self.item, self.what = file, item, what

    def __enter__(self) -> None:
        self.location = self.file.location(self.item)
        location_override.__enter__(self)

    def __exit__(self, exc_type, exc, tb) -> bool:
        location_override.__exit__(self)
        if exc_type is None or not issubclass(exc_type, Exception) or \
                issubclass(exc_type, (FlowError, _Return)):
            return False
        # any builder failure is the user's error here
        raise self.file.error(self.what + _builder_message(exc), self.item) from None


def _unparen(tree):
    """The expression inside parentheses (``(x)`` is ``x``)."""
    while isinstance(tree, lark.Tree) and tree.data == "paren":
        tree = tree.children[1]
    return tree


def _position(item) -> Tuple[int, int]:
    """Where ``item`` starts: its first token's line and column. The grammar keeps the token
    that starts each statement and expression in the tree (lark's ``propagate_positions`` would
    cost more than half of parsing). A parenthesized expression is at its own first token, but
    a node that starts with one, as ``(a + b) * c``, is at the '('."""
    if type(item) is lark.Token:
        return item.line or 1, item.column or 1
    item = _unparen(item)
    while not isinstance(item, lark.Token):
        for child in getattr(item, "children", ()):
            if child is not None:
                item = child
                break
        else:
            return 1, 1
    return item.line or 1, item.column or 1


def _closest(name: str, candidates: List[str]) -> str:
    match = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"; did you mean '{match[0]}'?" if match else ""


def _builder_message(err: BaseException) -> str:
    """A builder error's text without the location prefix the DSL prints anyway."""
    if isinstance(err, CompileError):
        text = str(err)
        if err.location is not None and text.startswith(f"{err.location}: "):
            text = text[len(f"{err.location}: "):]
        return text
    if isinstance(err, FlowcError):
        return str(err)
    if isinstance(err, RecursionError):
        return "the expression is nested too deeply"
    if isinstance(err, ZeroDivisionError):
        return "division by zero"
    return f"{type(err).__name__}: {err}" if not isinstance(err, (TypeError, ValueError)) \
        else str(err)


# The built-in input that switches a model between training and inference (docs/dsl.md).
TRAINING = "training"

_BINARY: Dict[str, Tuple[str, Callable]] = {
    "add": ("+", operator.add), "sub": ("-", operator.sub), "mul": ("*", checked_mul),
    "div": ("/", operator.truediv), "matmul": ("@", operator.matmul),
    "pow": ("**", checked_pow), "lt": ("<", operator.lt), "le": ("<=", operator.le),
    "gt": (">", operator.gt), "ge": (">=", operator.ge),
}


class Evaluator:
    """Runs one model: the main file and what it imports, into the default graph."""

    def __init__(self, check_data: bool = True):
        self.outputs: Dict[str, Tuple[Tensor, str]] = {}
        self.training = TrainingDecl()
        self.check_data = check_data             # a missing ``data`` file is an error
        self.imported: Dict[str, Dict[str, Binding]] = {}
        self.errors: List[FlowError] = []        # every error of the model, in order
        self.import_stack: List[str] = []
        self.depth = 0
        self.builtins: Dict[Tuple[str, ...], Any] = {}   # resolved builtin names, this run
        # the built-in ``training`` input, made on first use (see ``training_input``)
        self.training_switch: Optional[Tensor] = None
        # rule name -> the method evaluating it (the names are the grammar's own tokens: the
        # same objects every time, so a lookup compares no text)
        self.expressions: Dict[str, Callable] = {}
        # id(dotted name tree) -> (the tree, its parts, the name): calls repeat in functions
        self.dotted_names: Dict[int, Tuple[Any, Tuple[str, ...], str]] = {}

    def builtin(self, parts: Tuple[str, ...]) -> Any:
        """``resolve_builtin(parts)``, remembered for the run (a model calls the same few
        builtins thousands of times); raises ``Missing``."""
        value = self.builtins.get(parts, _UNRESOLVED)
        if value is _UNRESOLVED:
            value = self.builtins[parts] = resolve_builtin(parts)
        return value

    def training_input(self, scope: Scope, item) -> Tensor:
        """The built-in ``training`` input: ``placeholder_with_default(false, [])`` named
        ``training``, made the first time a file uses the name without binding it itself,
        at the top of the graph (outside blocks, functions, ``if`` and ``while``), one per
        model. ``flowc train`` feeds it true in training steps; everything else leaves it
        false."""
        if self.training_switch is None:
            with self.building(scope, item), dsl.get_default_graph().lifted():
                default = dsl.constant(False, name=f"{TRAINING}/default")
                self.training_switch = dsl.placeholder_with_default(default, [], name=TRAINING)
        return self.training_switch

    def dotted(self, tree) -> Tuple[Tuple[str, ...], str]:
        """The parts of a ``dotted`` name tree (``nn``, ``relu``) and the name they spell."""
        found = self.dotted_names.get(id(tree))
        if found is None:                     # the entry keeps the tree, so its id stays its own
            parts = tuple([str(t) for t in tree.children])
            found = self.dotted_names[id(tree)] = (tree, parts, ".".join(parts))
        return found[1], found[2]

    # --- files -------------------------------------------------------------------------------
    def run_text(self, text: str, filename: str, path: str) -> Dict[str, Binding]:
        """Run ``text`` (from ``filename``, shown as given) and return its top-level names."""
        unit = FileUnit(Source(text, filename), os.path.abspath(path))
        tree = parse_text(unit.source)
        scope = Scope(unit)
        self.import_stack.append(unit.path)
        try:
            self.run_statements(tree.children, scope)
        finally:
            self.import_stack.pop()
        return scope.names

    def run_statements(self, statements, scope: Scope) -> None:
        returned = None
        for stmt in statements:
            if returned is not None:
                raise scope.file.error("unreachable code after 'return'", stmt)
            if stmt.data == "return_stmt":
                returned = stmt
            if scope.function is not None:          # a function body: its call reports
                getattr(self, stmt.data)(stmt, scope)
                continue
            # Top level: record the error and go on with the next statement, so one run
            # reports every error; names the statement should have defined are poisoned, and
            # statements that use them fail silently (no cascade of follow-on errors).
            try:
                getattr(self, stmt.data)(stmt, scope)
            except _Cascade:
                self._poison(stmt, scope)
            except FlowError as e:
                self.errors.append(e)
                self._poison(stmt, scope)
            except RecursionError:
                self.errors.append(_too_deep(stmt, scope))
                self._poison(stmt, scope)

    def _poison(self, stmt, scope: Scope) -> None:
        if stmt.data == "while_stmt":
            for carry in stmt.children:
                if isinstance(carry, lark.Tree) and carry.data == "carry":
                    name = str(carry.children[0])
                    if name not in scope.names:
                        scope.names[name] = Binding(POISONED, scope.file, carry.children[0])
            return
        if stmt.data in _DEFINING and len(stmt.children) > 1:
            tok = stmt.children[1]
            if isinstance(tok, lark.Token) and str(tok) not in scope.names:
                scope.names[str(tok)] = Binding(POISONED, scope.file, tok)

    def define(self, scope: Scope, name_tok: lark.Token, value: Any) -> None:
        name = str(name_tok)
        if name in scope.names:
            raise scope.file.error(f"'{name}' is already defined at {scope.names[name].where}",
                                   name_tok)
        scope.names[name] = Binding(value, scope.file, name_tok)

    def building(self, scope: Scope, item, what: str = "") -> "_Building":
        """Builder calls inside get ``item``'s location; their errors become FlowErrors."""
        return _Building(scope.file, item, what)

    # --- statements --------------------------------------------------------------------------
    def input_stmt(self, tree, scope: Scope) -> None:
        _, name_tok, type_tree = tree.children
        dtype, shape = self.type(type_tree, scope)
        with self.building(scope, tree):
            value = dsl.placeholder(dtype, shape, name=str(name_tok))
        self.define(scope, name_tok, value)

    def type(self, tree, scope: Scope):
        name_tok, shape_tree = tree.children[0], (tree.children[1:] or [None])[0]
        dtype = DTYPES.get(str(name_tok))
        if dtype is None:
            known = ", ".join(d.name for d in DType if d in DTYPES.values())
            raise scope.file.error(f"unknown type '{name_tok}'"
                                   f"{_closest(str(name_tok), list(DTYPES))} (types: {known})",
                                   name_tok)
        if shape_tree is None:
            return dtype, []
        dims = [] if shape_tree.children == [None] else shape_tree.children
        return dtype, [None if d.data == "unknown_dim" else self.dim(d.children[0], scope)
                       for d in dims]

    def dim(self, tok: lark.Token, scope: Scope) -> int:
        """A dim of a type: int64, as TensorFlow's."""
        try:
            return dim_literal(tok)
        except LiteralError as e:
            raise scope.file.error(str(e), tok) from None

    def let_stmt(self, tree, scope: Scope) -> None:
        _, name_tok, expr = tree.children
        self.define(scope, name_tok, self.eval(expr, scope))

    def var_stmt(self, tree, scope: Scope) -> None:
        _, name_tok, type_tree, expr = tree.children
        name = str(name_tok)
        dtype, shape = self.type(type_tree, scope)
        if any(d is None for d in shape):
            raise scope.file.error(f"variable '{name}' needs a fully known shape, not "
                                   f"[{', '.join('?' if d is None else str(d) for d in shape)}]",
                                   type_tree)
        if name in scope.names:
            self.define(scope, name_tok, None)           # the "already defined" error
        initial = self.initial_value(expr, scope, dtype, shape)
        with self.building(scope, tree):
            variable = dsl.Variable(initial, shape=shape, dtype=dtype, name=name)
        self.define(scope, name_tok, variable)

    def initial_value(self, expr, scope: Scope, dtype: DType, shape: List[int]) -> Any:
        """What ``fl.Variable`` gets for ``var NAME: TYPE [= expr]``: an initializer (the default
        is glorot_uniform for floating types, zeros otherwise, as ``tf.get_variable``), or a
        function building the value under the variable's ``Initializer`` scope."""
        if expr is None:
            return glorot_uniform_initializer() if dtype.is_floating else zeros_initializer()
        node = _unparen(expr)
        if isinstance(node, lark.Tree) and node.data == "call":
            dotted, args_tree = node.children
            parts = [str(t) for t in dotted.children]
            if len(parts) == 1 and parts[0] in INITIALIZERS and scope.lookup(parts[0]) is None:
                cls = INITIALIZERS[parts[0]]
                args, kwargs = self.arguments(args_tree, scope)
                self.check_keywords(cls, parts[0], kwargs, args_tree, scope)
                self.check_signature(cls, parts[0], args, kwargs, node, scope)
                with self.building(scope, node, f"{parts[0]}: "):
                    return cls(*args, **kwargs)

        def build_value():
            value = self.eval(expr, scope)
            if isinstance(value, Initializer):
                with self.building(scope, expr):
                    return value(list(shape), dtype=dtype)
            if not isinstance(value, (Tensor, int, float, list)) and \
                    not hasattr(value, "_as_graph_tensor"):
                raise scope.file.error(f"a variable's initial value must be a tensor or an "
                                       f"initializer, not {describe_value(value)}", expr)
            return value
        return build_value

    # --- training declarations ---------------------------------------------------------------
    def _top_level(self, scope: Scope, tree, what: str) -> None:
        if scope.function is not None:
            raise scope.file.error(f"'{what}' belongs at the top level of a file, not inside "
                                   f"function '{scope.function}'", tree)

    def _scalar(self, value: Any, what: str, tree, scope: Scope) -> Tensor:
        """``value`` as a scalar number tensor, or an error saying what it is instead."""
        if hasattr(value, "_as_graph_tensor"):
            value = value._as_graph_tensor()
        if not isinstance(value, Tensor):
            raise scope.file.error(f"{what} must be a scalar tensor, not {describe_value(value)}",
                                   tree)
        if static_shape(value) is None or len(static_shape(value)) != 0:
            raise scope.file.error(f"{what} must be a scalar, but it is {value.output.type}; "
                                   "reduce it (reduce_mean, reduce_sum)", tree)
        if value.dtype is DType.bool or value.dtype is DType.resource:
            raise scope.file.error(f"{what} must be a number, but it is {value.output.type}; "
                                   "cast it (cast(..., f32))", tree)
        return value

    def loss_stmt(self, tree, scope: Scope) -> None:
        _, expr = tree.children
        self._top_level(scope, tree, "loss")
        if self.training.loss is not None:
            raise scope.file.error(f"the loss is already declared at {self.training.loss.where}",
                                   tree)
        value = self._scalar(self.eval(expr, scope, default_name="loss"), "the loss", expr,
                             scope)
        if not value.dtype.is_floating:
            raise scope.file.error(f"the loss must be floating-point, but it is "
                                   f"{value.output.type}; cast it (cast(..., f32))", expr)
        self.training.loss = Declared(value, scope.file.where(tree))

    def metric_stmt(self, tree, scope: Scope) -> None:
        _, name_tok, expr = tree.children
        name = str(name_tok)
        self._top_level(scope, tree, "metric")
        if name in self.training.metrics:
            raise scope.file.error(f"metric '{name}' is already declared at "
                                   f"{self.training.metrics[name].where}", name_tok)
        if name == "loss":
            raise scope.file.error("a metric cannot be called 'loss': the loss is reported "
                                   "under that name", name_tok)
        value = self._declared_value(name_tok, expr, scope)
        value = self._scalar(value, f"metric '{name}'", expr if expr is not None else name_tok,
                             scope)
        self.training.metrics[name] = Declared(value, scope.file.where(name_tok))

    def optimizer_stmt(self, tree, scope: Scope) -> None:
        _, name_tok, args_tree = tree.children
        name = str(name_tok)
        self._top_level(scope, tree, "optimizer")
        if self.training.optimizer is not None:
            raise scope.file.error("the optimizer is already declared at "
                                   f"{self.training.optimizer.where}", tree)
        try:
            known = optimizers()
        except LookupError as e:
            raise scope.file.error(str(e), name_tok) from None
        cls = known.get(name)
        if cls is None:
            raise scope.file.error(f"unknown optimizer '{name}'{_closest(name, list(known))} "
                                   f"(optimizers: {', '.join(known)})", name_tok)
        args, kwargs = self.arguments(args_tree, scope)
        self.check_keywords(cls, name, kwargs, args_tree, scope)
        self.check_signature(cls, name, args, kwargs, tree, scope)
        with self.building(scope, tree, f"{name}: "):
            optimizer = cls(*args, **kwargs)
        self.training.optimizer = Declared(optimizer, scope.file.where(tree))
        self.training.optimizer_name = name

    def data_stmt(self, tree, scope: Scope) -> None:
        _, string_tok = tree.children
        self._top_level(scope, tree, "data")
        if self.training.data is not None:
            raise scope.file.error(f"the data is already declared at {self.training.data.where}",
                                   tree)
        rel = self.path(string_tok, scope, "a data file")
        target = os.path.normpath(os.path.join(os.path.dirname(scope.file.path), rel))
        shown = os.path.normpath(os.path.join(os.path.dirname(scope.file.source.filename), rel))
        if self.check_data and not os.path.isfile(target):
            raise scope.file.error(f"data file '{rel}' not found (no file {shown})", string_tok)
        self.training.data = Declared(target, scope.file.where(string_tok))
        self.training.data_shown = shown

    def train_stmt(self, tree, scope: Scope) -> None:
        _, args_tree = tree.children
        self._top_level(scope, tree, "train")
        if self.training.settings:
            first = next(iter(self.training.settings.values()))
            raise scope.file.error(f"train(...) is already declared at {first.where}", tree)
        for arg in (args_tree.children if args_tree is not None else []):
            if not (isinstance(arg, lark.Tree) and arg.data == "kwarg"):
                raise scope.file.error("train(...) takes settings by name: "
                                       f"{', '.join(k + '=...' for k in TRAIN_SETTINGS)}", arg)
            key_tok, value_tree = arg.children
            key = str(key_tok)
            if key not in TRAIN_SETTINGS:
                raise scope.file.error(f"unknown train setting '{key}'"
                                       f"{_closest(key, list(TRAIN_SETTINGS))} (settings: "
                                       f"{', '.join(TRAIN_SETTINGS)})", key_tok)
            if key in self.training.settings:
                raise scope.file.error(f"argument '{key}' is given twice", key_tok)
            value = self.eval(value_tree, scope)
            low = 0 if key == "seed" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise scope.file.error(f"train setting '{key}' must be an integer >= {low}, not "
                                       f"{value!r}" if isinstance(value, (int, float)) else
                                       f"train setting '{key}' must be an integer >= {low}, not "
                                       f"{describe_value(value)}", value_tree)
            self.training.settings[key] = Declared(value, scope.file.where(key_tok))

    def _declared_value(self, name_tok, expr, scope: Scope) -> Any:
        """What ``output NAME [= expr]`` (or ``metric``) declares: the expression, bound to
        NAME, or the value NAME already has."""
        name = str(name_tok)
        if expr is not None:
            value = self.eval(expr, scope, default_name=name)
            self.define(scope, name_tok, value)
            return value
        binding = scope.lookup(name)
        if binding is None and name == TRAINING:
            return self.training_input(scope, name_tok)
        if binding is None:
            raise scope.file.error(f"unknown name '{name}'{_closest(name, scope.visible())}",
                                   name_tok)
        if binding.value is POISONED:
            raise _Cascade(name)
        return binding.value

    def output_stmt(self, tree, scope: Scope) -> None:
        _, name_tok, expr = tree.children
        name = str(name_tok)
        if scope.function is not None:
            raise scope.file.error("'output' belongs at the top level of a file, not inside "
                                   f"function '{scope.function}'", tree)
        if name in self.outputs:
            raise scope.file.error(f"output '{name}' is already declared at "
                                   f"{self.outputs[name][1]}", name_tok)
        value = self._declared_value(name_tok, expr, scope)
        if hasattr(value, "_as_graph_tensor"):             # a variable: its value
            value = value._as_graph_tensor()
        if not isinstance(value, Tensor):
            raise scope.file.error(f"output '{name}' must be a tensor, not "
                                   f"{describe_value(value)}", tree)
        self.outputs[name] = (value, scope.file.where(name_tok))

    def import_stmt(self, tree, scope: Scope) -> None:
        _, string_tok = tree.children
        if scope.function is not None or scope.parent is not None:
            raise scope.file.error("'import' belongs at the top level of a file", tree)
        rel = self.path(string_tok, scope, "an import")
        target = os.path.normpath(os.path.join(os.path.dirname(scope.file.path), rel))
        shown = os.path.normpath(os.path.join(os.path.dirname(scope.file.source.filename), rel))
        if target in self.import_stack:
            start = self.import_stack.index(target)
            chain = [os.path.basename(p) for p in self.import_stack[start:] + [target]]
            raise scope.file.error(f"import cycle: {' -> '.join(chain)}", tree)
        names = self.imported.get(target)
        if names is None:
            try:
                text = read_source(target, FlowError, shown)   # not UTF-8: error at the byte
            except FileNotFoundError:
                raise scope.file.error(f"cannot import '{rel}': no such file", string_tok) from None
            except OSError as e:
                raise scope.file.error(f"cannot import '{rel}': {e.strerror or 'cannot read'}",
                                       string_tok) from None
            names = self.run_text(text, shown, target)
            self.imported[target] = names
        for name, binding in names.items():
            mine = scope.names.get(name)
            if mine is binding:
                continue
            if mine is not None:
                raise scope.file.error(f"import of '{rel}' redefines '{name}' (defined at "
                                       f"{mine.where})", tree)
            scope.names[name] = binding

    def def_stmt(self, tree, scope: Scope) -> None:
        _, name_tok, params_tree, body = tree.children
        params = [] if params_tree is None else [str(p) for p in params_tree.children]
        seen: Dict[str, lark.Token] = {}
        for p in (params_tree.children if params_tree is not None else []):
            if str(p) in seen:
                raise scope.file.error(f"parameter '{p}' appears twice", p)
            seen[str(p)] = p
        returned = False
        for stmt in body.children:
            if returned:
                raise scope.file.error("unreachable code after 'return'", stmt)
            returned = stmt.data == "return_stmt"
        self.define(scope, name_tok, Function(str(name_tok), params, body, scope, name_tok))

    # --- control flow ----------------------------------------------------------------------
    def _block_value(self, block, scope: Scope, what: str, token) -> Any:
        """Run ``block`` in a scope of its own; its value is what its ``return`` gives."""
        local = Scope(scope.file, parent=scope, function=what)
        try:
            self.run_statements(block.children, local)
        except _Return as r:
            return r.value
        raise scope.file.error(f"the {what} block ends without 'return' (its value)", token)

    def e_if_expr(self, tree, scope: Scope) -> Any:
        """``if (p) { ... return a } else { ... return b }``: ``fl.cond``; ops written in a
        branch run only when it is taken."""
        if_tok, pred_tree, then_block, _else, else_block = tree.children
        pred = self.eval(pred_tree, scope)
        with self.building(scope, if_tok, "if: "):
            return dsl.cond(pred, lambda: self._block_value(then_block, scope, "if", if_tok),
                            lambda: self._block_value(else_block, scope, "else", if_tok))

    def while_stmt(self, tree, scope: Scope) -> None:
        """``while (cond) carry (i = 0, acc = x) { ... return [i + 1, acc * 2] }``: an
        ``fl.while_loop`` over the carried names, which hold their final values after it."""
        while_tok, cond_tree, _carry_tok, *carries, body = tree.children
        names = [c.children[0] for c in carries]
        seen = set()
        for tok in names:
            if str(tok) in seen:
                raise scope.file.error(f"'{tok}' is carried twice", tok)
            seen.add(str(tok))
        inits = [self.eval(c.children[1], scope) for c in carries]

        def local(values) -> Scope:
            inner = Scope(scope.file, parent=scope, function="while")
            for tok, value in zip(names, values):
                inner.names[str(tok)] = Binding(value, scope.file, tok)
            return inner

        def cond(*values):
            return self.eval(cond_tree, local(values))

        def step(*values):
            inner = local(values)
            value = self._block_value(body, inner, "while", while_tok)
            if len(names) == 1:
                return [value]
            if not isinstance(value, (list, tuple)) or len(value) != len(names):
                raise scope.file.error(
                    f"the while body must return the {len(names)} carried values "
                    f"[{', '.join(map(str, names))}] in a list", while_tok)
            return list(value)

        with self.building(scope, while_tok, "while: "):
            results = dsl.while_loop(cond, step, inits)
        for tok, value in zip(names, results if isinstance(results, (list, tuple)) else [results]):
            self.define(scope, tok, value)

    def return_stmt(self, tree, scope: Scope) -> None:
        if scope.function is None:
            raise scope.file.error("'return' outside a function", tree)
        raise _Return(self.eval(tree.children[1], scope))

    def device_block(self, tree, scope: Scope) -> None:
        _, spec_tok, body = tree.children
        spec = self.string(spec_tok, scope)
        with self.building(scope, spec_tok):
            ctx = dsl.device(spec)
            ctx.__enter__()
        try:
            self.run_statements(body.children, scope)
        finally:
            ctx.__exit__(None, None, None)

    def scope_block(self, tree, scope: Scope) -> None:
        _, name_tok, body = tree.children
        name = self.string(name_tok, scope)
        with self.building(scope, name_tok, "bad name_scope: "):
            ctx = dsl.name_scope(name)
            ctx.__enter__()
        try:
            self.run_statements(body.children, scope)
        finally:
            ctx.__exit__(None, None, None)

    def colocate_block(self, tree, scope: Scope) -> None:
        _, expr, body = tree.children
        colocate_with = getattr(dsl, "colocate_with", None)
        if colocate_with is None:
            raise scope.file.error("colocate_with is not supported yet (it comes with placement)",
                                   tree)
        value = self.eval(expr, scope)
        with self.building(scope, expr):
            ctx = colocate_with(value)
            ctx.__enter__()
        try:
            self.run_statements(body.children, scope)
        finally:
            ctx.__exit__(None, None, None)

    # --- expressions -------------------------------------------------------------------------
    def eval(self, tree, scope: Scope, default_name: Optional[str] = None) -> Any:
        """The value of an expression tree (a tensor, a Python value, a list, a type)."""
        if type(tree) is not lark.Tree or tree.data == "paren":
            tree = _unparen(tree)
            if isinstance(tree, lark.Token):
                raise scope.file.error(f"unexpected {tree!s}", tree)
        if default_name is not None and tree.data == "call":
            return self.call(tree, scope, default_name)
        method = self.expressions.get(tree.data)
        if method is None:
            method = self.expressions[tree.data] = getattr(self, "e_" + tree.data)
        return method(tree, scope)

    def string(self, tok: lark.Token, scope: Scope) -> str:
        """A string literal's value (strings.py); a bad escape is an error at the escape."""
        try:
            return decode_string(str(tok))
        except StringError as e:
            line, col = _position(tok)
            raise scope.file.source.error(str(e), line, col + e.offset) from None

    def path(self, tok: lark.Token, scope: Scope, what: str) -> str:
        """A string literal naming a file: no NUL (no file system has one in a name)."""
        value = self.string(tok, scope)
        if "\x00" in value:
            raise scope.file.error(f"the path of {what} cannot hold a NUL character", tok)
        return value

    def e_int(self, tree, scope: Scope, negated: bool = False) -> int:
        tok = tree.children[0]
        try:
            return int_literal(tok, negated)
        except LiteralError as e:
            raise scope.file.error(str(e), tok) from None

    def e_float(self, tree, scope: Scope) -> float:
        tok = tree.children[0]
        try:
            return float_literal(tok)
        except LiteralError as e:
            raise scope.file.error(str(e), tok) from None

    def e_string(self, tree, scope: Scope) -> str:
        return self.string(tree.children[0], scope)

    def e_true(self, tree, scope: Scope) -> bool:
        return True

    def e_false(self, tree, scope: Scope) -> bool:
        return False

    def e_list(self, tree, scope: Scope) -> list:
        return [self.eval(c, scope) for c in tree.children[1:] if c is not None]

    def e_name(self, tree, scope: Scope) -> Any:
        parts, _ = self.dotted(tree.children[0])
        binding = scope.lookup(parts[0])
        if binding is not None:
            if binding.value is POISONED:
                raise _Cascade(parts[0])
            if len(parts) > 1:
                raise scope.file.error(f"'{parts[0]}' has no member '{parts[1]}'", tree)
            if isinstance(binding.value, Function):
                raise scope.file.error(f"function '{parts[0]}' must be called: "
                                       f"{parts[0]}(...)", tree)
            return binding.value
        if parts == (TRAINING,):
            return self.training_input(scope, tree)
        try:
            return self.builtin(parts)
        except Missing:
            name = ".".join(parts)
            raise scope.file.error(f"unknown name '{name}'"
                                   f"{_closest(name, scope.visible() + builtin_names())}",
                                   tree) from None

    def _binary(self, tree, scope: Scope, symbol: str, fn: Callable) -> Any:
        left, right = tree.children
        a, b = self.eval(left, scope), self.eval(right, scope)
        with self.building(scope, tree, f"cannot apply '{symbol}': "):
            result = fn(a, b)
            if type(result) is int:              # two plain integers: an int64
                checked(result, f"{a} {symbol} {b}")
            return result

    def e_neg(self, tree, scope: Scope) -> Any:
        operand = tree.children[1]
        if type(operand) is lark.Tree and operand.data == "int":
            return self.e_int(operand, scope, negated=True)     # -9223372036854775808 fits
        value = self.eval(operand, scope)
        with self.building(scope, tree, "cannot negate: "):
            result = -value
            if type(result) is int:
                checked(result, f"-({value})")
            return result

    def e_pos(self, tree, scope: Scope) -> Any:
        value = self.eval(tree.children[1], scope)
        if not isinstance(value, (Tensor, int, float)) or isinstance(value, bool):
            raise scope.file.error(f"unary '+' needs a number or a tensor, not "
                                   f"{describe_value(value)}", tree)
        return value

    def e_eq(self, tree, scope: Scope) -> Any:
        return self._binary(tree, scope, "==", self._equal(dsl.equal, operator.eq))

    def e_ne(self, tree, scope: Scope) -> Any:
        return self._binary(tree, scope, "!=", self._equal(dsl.not_equal, operator.ne))

    @staticmethod
    def _equal(tensor_fn: Callable, python_fn: Callable) -> Callable:
        def compare(a, b):
            if isinstance(a, Tensor) or isinstance(b, Tensor):
                return tensor_fn(a, b)
            return python_fn(a, b)
        return compare

    def e_and_op(self, tree, scope: Scope) -> Any:
        return self._binary(tree, scope, "and", self._logical(dsl.logical_and, operator.and_))

    def e_or_op(self, tree, scope: Scope) -> Any:
        return self._binary(tree, scope, "or", self._logical(dsl.logical_or, operator.or_))

    def e_not_op(self, tree, scope: Scope) -> Any:
        value = self.eval(tree.children[1], scope)
        if isinstance(value, bool):
            return not value
        with self.building(scope, tree, "cannot apply 'not': "):
            return dsl.logical_not(value)

    @staticmethod
    def _logical(tensor_fn: Callable, python_fn: Callable) -> Callable:
        def combine(a, b):
            if isinstance(a, bool) and isinstance(b, bool):
                return python_fn(a, b)
            return tensor_fn(a, b)
        return combine

    def e_index(self, tree, scope: Scope) -> Any:
        value_tree, subs = tree.children
        value = self.eval(value_tree, scope)
        items = []
        for sub in subs.children:
            if isinstance(sub, lark.Tree) and sub.data == "slice":
                bounds = [None if c is None else self.eval(c, scope) for c in sub.children]
                items.append(slice(*bounds))
            else:
                items.append(self.eval(sub, scope))
        key = items[0] if len(items) == 1 else tuple(items)
        if hasattr(value, "_as_graph_tensor"):             # a variable: its value
            value = value._as_graph_tensor()
        if not isinstance(value, (Tensor, list)):
            raise scope.file.error(f"cannot index {describe_value(value)}", tree)
        with self.building(scope, tree, "bad index: "):
            return value[key]

    # --- calls -------------------------------------------------------------------------------
    def call(self, tree, scope: Scope, default_name: Optional[str] = None) -> Any:
        dotted, args_tree = tree.children
        parts, name = self.dotted(dotted)
        args, kwargs = self.arguments(args_tree, scope)
        binding = scope.lookup(parts[0])
        if binding is not None:
            if len(parts) > 1:
                raise scope.file.error(f"'{parts[0]}' has no member '{parts[1]}'", dotted)
            if not isinstance(binding.value, Function):
                raise scope.file.error(f"'{name}' is {describe_value(binding.value)}, not a "
                                       "function", tree)
            return self.call_function(binding.value, args, kwargs, tree, scope)
        try:
            fn = self.builtin(parts)
        except Missing:
            raise scope.file.error(f"unknown function '{name}'"
                                   f"{_closest(name, scope.visible() + builtin_names())}",
                                   dotted) from None
        if not callable(fn):
            raise scope.file.error(f"'{name}' is {describe_value(fn)}, not a function", tree)
        given = kwargs
        if default_name is not None and "name" not in kwargs and _takes_name(fn):
            kwargs = dict(kwargs, name=default_name)
        with self.building(scope, tree, f"{name}: "):
            try:
                return fn(*args, **kwargs)
            except TypeError:
                # Arguments that do not fit the signature fail before the builder runs: say
                # so with the signature (checked only now: binding costs as much as a call).
                self.check_signature(fn, name, args, given, tree, scope)
                raise

    e_call = call

    def arguments(self, args_tree, scope: Scope) -> Tuple[list, dict]:
        args: list = []
        kwargs: Dict[str, Any] = {}
        for arg in (args_tree.children if args_tree is not None else []):
            if isinstance(arg, lark.Tree) and arg.data == "kwarg":
                key_tok, value_tree = arg.children
                if str(key_tok) in kwargs:
                    raise scope.file.error(f"argument '{key_tok}' is given twice", key_tok)
                kwargs[str(key_tok)] = self.eval(value_tree, scope)
            else:
                if kwargs:
                    raise scope.file.error("a positional argument cannot follow a keyword "
                                           "argument", arg)
                args.append(self.eval(arg, scope))
        return args, kwargs

    def check_keywords(self, fn: Callable, name: str, kwargs: dict, args_tree,
                       scope: Scope) -> None:
        """An unknown keyword argument, at the argument, with "did you mean"."""
        sig = _signature(fn)
        if sig is None or any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            return
        for arg in (args_tree.children if args_tree is not None else []):
            if isinstance(arg, lark.Tree) and arg.data == "kwarg":
                key = str(arg.children[0])
                if key not in sig.parameters:
                    raise scope.file.error(
                        f"{name}() has no argument '{key}'{_closest(key, list(sig.parameters))} "
                        f"(it takes {', '.join(sig.parameters)})", arg.children[0])

    def check_signature(self, fn: Callable, name: str, args: list, kwargs: dict, tree,
                        scope: Scope) -> None:
        sig = _signature(fn)
        if sig is None:
            return
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:
            raise scope.file.error(f"wrong arguments for {name}{_plain_signature(sig)}: {e}",
                                   tree) from None

    def call_function(self, fn: Function, args: list, kwargs: dict, tree, scope: Scope) -> Any:
        n = len(fn.params)
        unknown = [k for k in kwargs if k not in fn.params]
        twice = [p for p in fn.params[:len(args)] if p in kwargs]
        if unknown or twice:
            raise scope.file.error(f"{fn.name}() has no parameter '{unknown[0]}' (it takes "
                                   f"{', '.join(fn.params) or 'none'})" if unknown else
                                   f"{fn.name}() got '{twice[0]}' twice (by position and by "
                                   "name)", tree)
        if len(args) + len(kwargs) != n:
            raise scope.file.error(f"{fn.name}() takes {n} argument{'s' if n != 1 else ''} "
                                   f"({', '.join(fn.params)}), got {len(args) + len(kwargs)}",
                                   tree)
        if self.depth >= MAX_CALL_DEPTH:
            raise scope.file.error(f"calls nest more than {MAX_CALL_DEPTH} deep in "
                                   f"'{fn.name}' (recursion?)", tree)
        local = Scope(fn.scope.file, parent=fn.scope, function=fn.name)
        for param, value in zip(fn.params, args):
            local.names[param] = Binding(value, fn.scope.file, fn.token)
        for param, value in kwargs.items():
            local.names[param] = Binding(value, fn.scope.file, fn.token)
        self.depth += 1
        try:
            self.run_statements(fn.body.children, local)
        except _Return as r:
            return r.value
        finally:
            self.depth -= 1
        raise fn.scope.file.error(f"function '{fn.name}' ends without 'return'", fn.token)


def _plain_signature(sig: inspect.Signature) -> str:
    """``(features, name=None)``: a signature without annotations."""
    out = []
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            out.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            out.append(f"**{p.name}")
        else:
            out.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return "(" + ", ".join(out) + ")"


def _too_deep(stmt, scope: Scope) -> FlowError:
    """The error of a statement whose evaluation ran out of Python's stack: at its deepest part
    (``[[[...]]]`` a thousand deep, ``1 + 1 + ...`` ten thousand long, blocks in blocks)."""
    item, depth = deepest(stmt)
    return scope.file.error(f"nested too deeply: evaluating this statement ran out of Python's "
                            f"stack (it nests {depth} levels of expressions and blocks here, "
                            "with the calls of functions it makes)", item)


def _signature_of(fn: Callable) -> Optional[inspect.Signature]:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


_cached_signature = functools.lru_cache(maxsize=None)(_signature_of)


def _signature(fn: Callable) -> Optional[inspect.Signature]:
    """``fn``'s signature, or None; cached, as the same builtins are called over and over."""
    try:
        return _cached_signature(fn)
    except TypeError:                       # an unhashable callable
        return _signature_of(fn)


def _takes_name(fn: Callable) -> bool:
    sig = _signature(fn)
    if sig is None:
        return False
    params = sig.parameters
    return "name" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


for _rule, (_symbol, _fn) in _BINARY.items():
    setattr(Evaluator, "e_" + _rule,
            lambda self, tree, scope, _s=_symbol, _f=_fn: self._binary(tree, scope, _s, _f))
