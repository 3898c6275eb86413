"""Loading a model file for the command line: IR text (``*.ir``) or a Python file (``*.py``).

An IR file is parsed as one graph. Its fetches are the inputs of its ``_Retval`` nodes when it
has any (a step graph, such as an artifact's ``graph.ir``; the ``_Retval`` nodes are dropped),
otherwise every output of its sink nodes (nodes nothing reads).

A Python file is imported as a module (``__name__`` is not ``"__main__"``) and its ``build()``
is called with no arguments. ``build()`` returns one of:

- a graph: fetches default as for IR text;
- ``(graph, fetches)`` or ``(graph, fetches, feeds)``;
- a dict with ``"graph"`` and optionally ``"fetches"``, ``"feeds"``, ``"targets"`` and
  ``"training"`` (the model's train/eval switch, a scalar bool ``placeholder_with_default``
  that ``--training`` switches on).

``fetches`` is a list of tensors (``fl.Tensor``, an IR ``Output`` or a tensor name such as
``"probs"`` or ``"split:1"``), or a dict mapping the fetch names the artifact will use to
tensors. ``feeds`` is a list of tensors or tensor names; when absent, every ``Placeholder`` the
fetches need is fed. ``targets`` are operations run for their effects.

Other front ends register a loader for their suffix with ``register_model_loader``, or
declare one in the ``flowc.model_loaders`` entry-point group (name: the suffix without its
dot; value: the loader function). The text DSL declares ``flow = dsl.flow:load_flow_model``
that way, so it is found without the compiler importing it.

The compiler never imports ``dsl``: builder tensors are recognised by their ``output``
attribute, operations by their ``node`` attribute.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from compiler.errors import CompileError, IRSyntaxError
from compiler.ir.construct import make_node
from compiler.ir.reachability import needed_nodes
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.parser import parse_graph
from compiler.ir.source_text import read_source
from compiler.ir.types import TensorType
from runtime.dtypes import DType
from runtime.errors import FlowcError

MODEL_SUFFIXES = (".ir", ".py")


class ModelError(FlowcError):
    """A model file cannot be loaded, or it names fetches or feeds that do not exist."""


@dataclass
class Model:
    """A loaded model: the graph to compile and what a step feeds, fetches and runs."""
    path: str
    graph: Graph                              # the graph steps are cut from
    as_built: Graph                           # what the file described (``flowc ir`` prints it)
    fetches: List[Output]
    fetch_names: List[str]
    feeds: Optional[List[Output]] = None      # None: every Placeholder the fetches need
    targets: List[Node] = field(default_factory=list)
    # the artifact's names of ``feeds`` (a SavedModel's signature keys); None: tensor names
    feed_names: Optional[List[str]] = None
    # other steps the file defines, built on demand (``--step train``: a .flow file's
    # training step adds the optimizer's ops to the graph, so it is not built unless asked)
    steps: Dict[str, Callable[[], "Model"]] = field(default_factory=dict)
    # the train/eval switch: a scalar bool ``PlaceholderWithDefault`` (default false) that
    # dropout and batch normalization read as ``training=`` (the .flow built-in ``training``,
    # a Python build()'s "training"); steps that do not feed it are inference steps
    training: Optional[Output] = None
    training_mode: bool = False               # compile with the switch on (``--step train``)

    def feed_outputs(self) -> List[Output]:
        """The fed tensors: the model's, or every Placeholder the fetches and targets need."""
        if self.feeds is not None:
            return list(self.feeds)
        need = needed_nodes(self.fetches, self.targets, set())
        return [n.output(0) for n in self.graph if n in need and n.op == "Placeholder"]

    def feed_names_of(self, feeds: Sequence[Output]) -> List[str]:
        """The names the artifact gives ``feeds``: the model's own name of a feed where it
        has one (a signature key), its tensor name otherwise."""
        own = dict(zip(self.feeds or (), self.feed_names or ()))
        return [own.get(f, tensor_name(f)) for f in feeds]


def tensor_name(out: Output) -> str:
    """TensorFlow's tensor name: ``node`` for output 0, ``node:i`` otherwise."""
    return out.node.name if out.index == 0 else f"{out.node.name}:{out.index}"


_LOADERS: Dict[str, Callable[[str], "Model"]] = {}


def register_model_loader(suffix: str, loader: Callable[[str], "Model"]) -> None:
    """Let a front end load model files ending in ``suffix`` (the text DSL registers
    ``.flow``); the compiler itself never imports a front end."""
    _LOADERS[suffix] = loader


def _entry_point_loader(suffix: str) -> Optional[Callable[[str], "Model"]]:
    """The loader an installed package declares for ``suffix`` (``flowc.model_loaders``)."""
    from importlib.metadata import entry_points
    for ep in entry_points(group="flowc.model_loaders"):
        if "." + ep.name == suffix:
            _LOADERS[suffix] = ep.load()
            return _LOADERS[suffix]
    return None


def load_model(path: str, signature: Optional[str] = None,
               tags: Optional[Sequence[str]] = None) -> Model:
    """Load ``path`` (``*.ir``, ``*.py``, a registered suffix, or a TensorFlow SavedModel
    folder) into a ``Model``. ``signature`` and ``tags`` choose a SavedModel's signature and
    MetaGraphDef (``compiler/interop/saved_model.py``); other models have neither."""
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such file")
    saved_model = _saved_model_folder(path)
    if saved_model is not None:
        from compiler.interop.saved_model import load_saved_model
        return load_saved_model(saved_model, signature, tags)
    if signature or tags:
        option = "--signature" if signature else "--tag"
        raise ModelError(f"{option} applies to TensorFlow SavedModel folders (with a "
                         f"saved_model.pb); {path} is not one")
    if os.path.isdir(path):
        raise ModelError(f"{path} is a directory, and not a SavedModel (no saved_model.pb in "
                         f"it); expected a model file ({', '.join(known_suffixes())}) or a "
                         "SavedModel folder")
    suffix = os.path.splitext(path)[1]
    if suffix == ".ir":
        return _load_ir(path)
    if suffix == ".py":
        return _load_python(path)
    loader = _LOADERS.get(suffix) or _entry_point_loader(suffix)
    if loader is not None:
        return loader(path)
    raise ModelError(f"{path}: unsupported model file type '{suffix or '(none)'}'; "
                     f"flowc takes {', '.join(known_suffixes())}")


SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")


def _saved_model_folder(path: str) -> Optional[str]:
    """The SavedModel folder ``path`` is (a folder with a saved_model.pb or .pbtxt) or
    names the saved_model.pb of (a file of that name beside a variables/ folder), else None."""
    if os.path.isdir(path):
        if any(os.path.isfile(os.path.join(path, f)) for f in SAVED_MODEL_FILES):
            return path
        return None
    folder = os.path.dirname(path) or "."
    if os.path.basename(path) in SAVED_MODEL_FILES and \
            os.path.isdir(os.path.join(folder, "variables")):
        return folder
    return None


def known_suffixes() -> List[str]:
    """Every model file suffix flowc can load: its own, registered loaders' and those the
    ``flowc.model_loaders`` entry points declare."""
    found = list(MODEL_SUFFIXES) + list(_LOADERS)
    try:
        from importlib.metadata import entry_points
        found += ["." + ep.name for ep in entry_points(group="flowc.model_loaders")]
    except Exception:                  # metadata unreadable: the ones known so far
        pass
    return list(dict.fromkeys(found))


def read_ir_file(path: str) -> Graph:
    """Parse an IR text file (syntax errors, and bytes that are not UTF-8, show file:line:col
    and a caret)."""
    try:
        text = read_source(path, IRSyntaxError)        # not UTF-8: an error at the bad byte
    except FileNotFoundError:
        raise ModelError(f"{path}: no such file") from None
    except OSError as e:
        raise ModelError(f"{path}: cannot read: {e.strerror or e}") from None
    return parse_graph(text, path)


def _load_ir(path: str) -> Model:
    return model_of_graph(path, read_ir_file(path))


def model_of_graph(path: str, parsed: Graph) -> Model:
    """The model of a whole graph read from a file: its ``_Retval``s are the fetches (a step
    graph written out), or else every output nothing reads."""
    retvals = sorted((n for n in parsed if n.op == "_Retval"), key=lambda n: n.attrs.get("index", 0))
    if not retvals:
        fetches = sink_outputs(parsed)
        return Model(path, parsed, parsed, fetches, [tensor_name(f) for f in fetches])
    graph, mapping = parsed.copy()
    fetches = [Output(mapping[r].inputs[0].node, mapping[r].inputs[0].index) for r in retvals]
    for r in retvals:
        graph.erase_node(mapping[r])
    return Model(path, graph, parsed, fetches, [tensor_name(f) for f in fetches])


def sink_outputs(graph: Graph) -> List[Output]:
    """Every output of every node that nothing reads, in graph order."""
    return [o for n in graph if not n.users for o in n.outputs]


def _load_python(path: str) -> Model:
    module = _import_file(path)
    build = getattr(module, "build", None)
    if not callable(build):
        raise ModelError(f"{path} defines no build() function; a Python model's build() returns "
                         "(graph, fetches) or (graph, fetches, feeds)")
    try:
        result = build()
    except FlowcError:
        raise
    except Exception as e:
        raise ModelError(f"{_user_frame(e, path)}build() raised {type(e).__name__}: {e}") from e
    return _from_build_result(path, result)


def _import_file(path: str):
    name = "flowc_model_" + "".join(c if c.isalnum() else "_" for c in
                                    os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(os.path.abspath(path))
    sys.modules[name] = module                  # as an import would (dataclasses look it up)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except FlowcError:
        raise
    except SyntaxError as e:
        raise ModelError(f"{e.filename}:{e.lineno}:{e.offset or 0}: syntax error: {e.msg}") from None
    except Exception as e:
        raise ModelError(f"{_user_frame(e, path)}importing {path} raised "
                         f"{type(e).__name__}: {e}") from e
    finally:
        if sys.path and sys.path[0] == folder:
            del sys.path[0]
    return module


def _user_frame(err: BaseException, path: str) -> str:
    """``file:line: `` of the innermost frame in the model file, to point at the user's code."""
    target = os.path.abspath(path)
    frames = [f for f in traceback.extract_tb(err.__traceback__) if os.path.abspath(f.filename) == target]
    return f"{path}:{frames[-1].lineno}: " if frames else ""


def _from_build_result(path: str, result: Any) -> Model:
    parts: Dict[str, Any]
    if isinstance(result, Graph):
        parts = {"graph": result}
    elif isinstance(result, dict):
        unknown = set(result) - {"graph", "fetches", "feeds", "targets", "training"}
        if unknown:
            raise ModelError(f"{path}: build() returned a dict with unknown key(s) "
                             f"{', '.join(sorted(map(str, unknown)))}; "
                             "allowed: graph, fetches, feeds, targets, training")
        parts = dict(result)
    elif isinstance(result, tuple) and len(result) in (2, 3):
        parts = dict(zip(("graph", "fetches", "feeds"), result))
    else:
        raise ModelError(f"{path}: build() returned {type(result).__name__}; expected a graph, "
                         "(graph, fetches), (graph, fetches, feeds) or a dict")
    graph = parts.get("graph")
    if not isinstance(graph, Graph):
        raise ModelError(f"{path}: build() returned {type(graph).__name__} where the graph belongs")
    targets = [_as_node(graph, t, path) for t in _as_list(parts.get("targets"), "targets", path)]
    fetch_spec = parts.get("fetches")
    if fetch_spec is None:
        fetches = [] if targets else sink_outputs(graph)
        names = [tensor_name(f) for f in fetches]
    elif isinstance(fetch_spec, dict):
        names = [str(k) for k in fetch_spec]
        fetches = [_as_output(graph, v, path, "fetch") for v in fetch_spec.values()]
    else:
        fetches = [_as_output(graph, v, path, "fetch") for v in _as_list(fetch_spec, "fetches", path)]
        names = [tensor_name(f) for f in fetches]
    feeds = None
    if parts.get("feeds") is not None:
        feeds = [_as_output(graph, v, path, "feed") for v in _as_list(parts["feeds"], "feeds", path)]
    switch = None
    if parts.get("training") is not None:
        switch = _as_output(graph, parts["training"], path, "training switch")
    return Model(path, graph, graph, fetches, names, feeds, targets, training=switch)


def _as_list(value: Any, what: str, path: str) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, (str, Output)) or hasattr(value, "output") or hasattr(value, "node"):
        return [value]
    raise ModelError(f"{path}: build() gave {what} as {type(value).__name__}; expected a list")


def _as_output(graph: Graph, value: Any, path: str, what: str) -> Output:
    if isinstance(value, str):
        return _lookup(graph, value, what)
    out = getattr(value, "output", value)
    if not isinstance(out, Output):
        raise ModelError(f"{path}: cannot use {value!r} as a {what}: expected a tensor or a "
                         "tensor name")
    if out.node.graph is not graph:
        raise ModelError(f"{path}: {what} {tensor_name(out)} belongs to another graph than the "
                         "one build() returned")
    return out


def _as_node(graph: Graph, value: Any, path: str) -> Node:
    if isinstance(value, str):
        return _lookup(graph, value, "target").node
    node = getattr(value, "node", None)
    if isinstance(node, Node) and node.graph is graph:
        return node
    raise ModelError(f"{path}: cannot use {value!r} as a target: expected an operation of the graph")


def _lookup(graph: Graph, name: str, what: str) -> Output:
    try:
        return graph.output(name)
    except (CompileError, ValueError):
        raise ModelError(f"unknown {what} '{name}': no tensor of that name in graph "
                         f"@{graph.name}") from None


def apply_training_mode(model: Model, training: bool = False) -> Model:
    """Switch the model's ``training`` input on when asked (``--training``) or when its step
    is a training step (``training_mode``): its default becomes true, so steps that do not
    feed it train (dropout drops). Changes the model's graph; without either, nothing
    changes and steps are inference steps."""
    switch = model.training
    if training and switch is None:
        raise ModelError(f"{model.path}: --training: the model has no training switch (a "
                         "'.flow' file gets one by using the built-in 'training'; a Python "
                         "build() returns it as \"training\" in its dict)")
    if not (training or model.training_mode) or switch is None:
        return model
    node = switch.node
    if node.op != "PlaceholderWithDefault" or switch.dtype is not DType.bool \
            or switch.shape != ():
        raise ModelError(f"{model.path}: the training switch '{tensor_name(switch)}' is a "
                         f"{node.op} {switch.type}; it must be a scalar bool "
                         "placeholder_with_default (feed a Placeholder switch instead)")
    old = node.inputs[0].node
    with model.graph.inserting_before(node):
        on = make_node(model.graph, "Const", [], {"value": np.array(True), "dtype": DType.bool},
                       name=f"{node.name}/on", location=node.location,
                       output_types=[TensorType(DType.bool, ())])
    node.set_input(0, on.output(0))
    if old.op == "Const" and not old.users:
        model.graph.erase_node(old)
    return model


def select(model: Model, fetch: Sequence[str] = (), feed: Sequence[str] = (),
           step: Optional[str] = None) -> Model:
    """Choose one of a model's other steps (``--step``), then override its fetches and feeds
    by name (``--fetch`` / ``--feed``).

    A fetch name is one of the model's fetch names or any tensor name of the graph; a feed name
    is a tensor name of the graph.
    """
    if step:
        if step not in model.steps:
            have = ", ".join(sorted(model.steps)) or "none besides the default"
            raise ModelError(f"{model.path}: no step named '{step}' (the file defines: {have})")
        model = model.steps[step]()
    if fetch:
        by_name = dict(zip(model.fetch_names, model.fetches))
        fetches, names = [], []
        for name in dict.fromkeys(fetch):
            if name in by_name:
                fetches.append(by_name[name])
            else:
                try:
                    fetches.append(model.graph.output(name))
                except (CompileError, ValueError):
                    have = ", ".join(model.fetch_names) or "none"
                    raise ModelError(f"unknown fetch '{name}': neither one of the model's fetches "
                                     f"({have}) nor a tensor of graph @{model.graph.name}") from None
            names.append(name)
        model = replace(model, fetches=fetches, fetch_names=names)
    if feed:
        own = dict(zip(model.feed_names or (), model.feeds or ()))
        feeds = [own[n] if n in own else _lookup(model.graph, n, "feed")
                 for n in dict.fromkeys(feed)]
        model = replace(model, feeds=feeds, feed_names=model.feed_names_of(feeds))
    return model
