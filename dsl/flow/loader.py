"""Loading ``*.flow`` files into graphs, and the ``.flow`` model loader of ``flowc``."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Optional

from compiler.ir.source_text import read_source
from compiler.model_loader import Model, sink_outputs, tensor_name
from dsl.context import Graph
from dsl.flow.errors import FlowError, FlowErrors
from dsl.flow.evaluator import Evaluator
from compiler.gc_pause import gc_paused
from dsl.flow.training import TrainingDecl
from dsl.tensor import Tensor


@dataclass
class FlowProgram:
    """What a ``*.flow`` file built: its graph, its ``output`` declarations in order, and its
    training declarations (``loss``, ``metric``, ``optimizer``, ``data``, ``train(...)``)."""
    graph: Graph
    outputs: Dict[str, Tensor]
    training: TrainingDecl = field(default_factory=TrainingDecl)
    path: str = "<flow>"
    # the built-in ``training`` input, when the model uses it (a bool scalar
    # placeholder_with_default(false)): ``flowc train`` feeds it true in training steps
    training_switch: Optional[Tensor] = None


def graph_name(path: str) -> str:
    """The graph's name: the file's stem, with characters a graph name refuses replaced."""
    stem = os.path.splitext(os.path.basename(path))[0]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)
    return name if re.match(r"^[A-Za-z_]", name) else "flow_" + name


def build_flow(text: str, filename: str = "<flow>", graph: Optional[Graph] = None,
               check_data: bool = True) -> FlowProgram:
    """Run the DSL ``text`` (imports relative to ``filename``'s folder) into ``graph``.
    ``check_data``: a ``data`` declaration naming a missing file is an error."""
    graph = graph if graph is not None else Graph(graph_name(filename))
    evaluator = Evaluator(check_data=check_data)
    with graph.as_default(), gc_paused():
        try:
            evaluator.run_text(text, filename, filename)
        except RecursionError:
            raise FlowError("the program is nested too deeply", filename, 1, 1) from None
    if len(evaluator.errors) == 1:
        raise evaluator.errors[0]
    if evaluator.errors:
        raise FlowErrors(evaluator.errors)
    return FlowProgram(graph, {name: t for name, (t, _) in evaluator.outputs.items()},
                       evaluator.training, filename, evaluator.training_switch)


def load_flow(path: str, graph: Optional[Graph] = None, check_data: bool = True) -> FlowProgram:
    """Read and run the ``*.flow`` file at ``path``."""
    try:
        text = read_source(path, FlowError)        # not UTF-8: an error at the first bad byte
    except FileNotFoundError:
        raise FlowError("no such file", path, 1, 1) from None
    except OSError as e:
        raise FlowError(f"cannot read: {e.strerror or e}", path, 1, 1) from None
    return build_flow(text, path, graph, check_data)


def load_flow_model(path: str) -> Model:
    """The ``Model`` of a ``*.flow`` file: its outputs are the fetches (by their names);
    without outputs, every output nothing reads."""
    program = load_flow(path)
    if program.outputs:
        fetches = [t.output for t in program.outputs.values()]
        names = list(program.outputs)
    else:
        fetches = sink_outputs(program.graph)
        names = [tensor_name(f) for f in fetches]
    steps = {}
    if program.training.loss is not None:
        steps["eval"] = lambda: _eval_step(program)
        if program.training.optimizer is not None:
            steps["train"] = lambda: _train_step(program)
    return Model(path, program.graph, program.graph, fetches, names, steps=steps,
                 training=_switch(program))


def _switch(program: FlowProgram):
    return program.training_switch.output if program.training_switch is not None else None


def _eval_step(program: FlowProgram) -> Model:
    """The evaluation step of a file's training declarations: the loss and each metric."""
    decl = program.training
    fetches = {"loss": decl.loss.value}
    fetches.update((name, d.value) for name, d in decl.metrics.items())
    return Model(program.path, program.graph, program.graph,
                 [t.output for t in fetches.values()], list(fetches), training=_switch(program))


def _train_step(program: FlowProgram) -> Model:
    """The step ``flowc train`` runs: the optimizer's update of every trainable variable and
    of the global step, fetching the loss (builds the optimizer's ops into the graph), with
    the built-in ``training`` input on, as ``flowc train`` feeds it."""
    from dsl import train as train_lib
    decl = program.training
    with program.graph.as_default():
        global_step = train_lib.get_or_create_global_step()
        train_op = decl.optimizer.value.minimize(decl.loss.value, global_step=global_step)
    return Model(program.path, program.graph, program.graph, [decl.loss.value.output], ["loss"],
                 targets=[train_op.node], training=_switch(program), training_mode=True)
