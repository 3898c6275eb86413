"""The compiler's subcommands: ``compile`` (model -> artifact), ``check`` (build and infer
shapes), ``ir`` (inspect the IR after a pass), ``export`` (write a GraphDef or ONNX) and
``opt`` (run passes on IR text).

Steps are inference steps unless ``--training`` (or ``--step train``) switches the model's
``training`` input on; ``--checkpoint`` bakes trained weights into artifacts and exports."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import List, Optional, Sequence

from compiler.cli.graph_dot import graph_to_dot, render_dot, render_format
from compiler.cli.graph_json import graph_to_json
from compiler.codegen.control_flow import saved_bytes_per_iteration
from compiler.codegen.instrument import Instrumentation
from compiler.gc_pause import gc_paused
from compiler.flags import options_from_args, pipeline_flags_given
from compiler.freeze import (checkpoint_values, extract_subgraph, freeze_variables,
                             initialize_variables, variables_of)
from compiler.options import resolve_options
from compiler.ir.graph import Graph
from compiler.ir.printer import print_graph
from compiler.model_loader import (Model, ModelError, apply_training_mode, load_model,
                                   read_ir_file, select)
from compiler.passes.manager import PassManager, get_pass
from compiler.options import PipelineError, PipelineOptions
from compiler.passes.partition import split_by_device
from compiler.codegen.cuda_target_options import cuda_target_options
from compiler.step import StepGraph, make_step_graph, optimize, step_key, write_artifact
from runtime.artifact import MANIFEST
from runtime.checkpoint import CheckpointError
from runtime.checkpoint_state import resolve_checkpoint
from runtime.errors import FlowcError
from runtime.signing import load_key


def _spec_text(name: str, out) -> str:
    return f"{name} {out.type}"


def load_selected(args: argparse.Namespace, path: Optional[str] = None) -> Model:
    """The model of ``args`` (``MODEL``, or ``path``), its step chosen (``--step``,
    ``--fetch``, ``--feed``) and its training switch set (``--training``)."""
    model = select(load_model(path or args.model, getattr(args, "signature", None),
                              getattr(args, "tag", ())), args.fetch, args.feed, args.step)
    return apply_training_mode(model, getattr(args, "training", False))


def freeze_step(step: StepGraph, checkpoint: str, model: str) -> List[str]:
    """Bake the values ``checkpoint`` holds for the variables ``step`` reads into it as
    constants (the step is pruned first); the variable names. A checkpoint that does not
    match, or a step that writes a variable, is an error naming the model."""
    PassManager(PipelineOptions(passes=("prune",))).run(step.graph)
    variables = variables_of(step.graph)
    if not variables:
        return []
    values = checkpoint_values(checkpoint, variables, model)
    return freeze_variables(step.graph, values, variables, keep_reads=False)


def _weights_note(names: Sequence[str], checkpoint: str) -> str:
    if not names:
        return f"  weights: none (the step reads no variables; --checkpoint {checkpoint} unused)"
    return (f"  weights: {len(names)} variable(s) from {resolve_checkpoint(checkpoint)}, "
            "baked in as constants")


def step_for(model: Model) -> StepGraph:
    """The step graph of a model: its feeds become Placeholders, its fetches ``_Retval``s."""
    if not model.fetches and not model.targets:
        raise ModelError(f"{model.path}: nothing to compute: the model has no fetches")
    feeds = model.feed_outputs()
    step = make_step_graph(model.graph, feeds, model.fetches, model.targets)
    step.fetch_names = list(model.fetch_names)
    step.feed_names = model.feed_names_of(feeds)
    return step


def check_output_folder(path: str) -> None:
    """Writing an artifact replaces ``path``: allow that only for an empty folder or an artifact."""
    if not os.path.exists(path):
        return
    if not os.path.isdir(path):
        raise ModelError(f"-o {path}: exists and is not a folder")
    if os.listdir(path) and not os.path.isfile(os.path.join(path, MANIFEST)):
        raise ModelError(f"-o {path}: refusing to replace a folder that is not a flowc artifact "
                         f"(it is not empty and has no {MANIFEST})")


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile a model file into an artifact folder."""
    options = options_from_args(args)
    if getattr(args, "emit", "artifact") == "c-library":
        if getattr(args, "sign_key", None):
            raise ModelError("--sign-key signs an artifact's manifest for `flowc run "
                             "--verify-key`; a C library (--emit c-library) is linked by your "
                             "program, not loaded by flowc")
        return _compile_c_library(args, options)
    # the key is read first: a missing or short key is refused before anything is compiled
    sign_key = load_key(args.sign_key, "--sign-key") if getattr(args, "sign_key", None) else None
    if getattr(args, "name", None):
        raise ModelError("--name applies to --emit c-library (the C name of the library)")
    check_output_folder(args.output)
    target = getattr(args, "target", "c")
    arch = getattr(args, "cuda_arch", None)
    if target == "cuda":
        options = cuda_target_options(options, arch)
    with gc_paused():                   # objects that live on (compiler/gc_pause.py)
        model = load_selected(args)
        step = step_for(model)
        checkpoint = getattr(args, "checkpoint", None)
        frozen = freeze_step(step, checkpoint, args.model) if checkpoint else None
        optimize(step, options)
        instrumentation = Instrumentation.from_options(resolve_options(options))  # --profile
        write_artifact(step, args.output, step_key(step, instrumentation), instrumentation,
                       cuda_arch=arch, sign_key=sign_key)
    feeds = ", ".join(_spec_text(n, p.output(0)) for n, p in zip(step.feed_names, step.feeds))
    fetches = ", ".join(_spec_text(n, r.inputs[0]) for n, r in zip(step.fetch_names, step.retvals))
    print(f"wrote {args.output}")
    print(f"  feeds:   {feeds or '(none)'}")
    print(f"  fetches: {fetches or '(none)'}")
    if frozen is not None:
        print(_weights_note(frozen, checkpoint))
    for frame, count, nbytes in saved_bytes_per_iteration(step.graph):
        print(f"  loop {frame}: saves {count} values for its gradient, {nbytes} bytes per "
              "iteration" + (" (?: a dim known at run time)" if "?" in nbytes else ""))
    if getattr(args, "memory_report", False):
        from compiler.passes.memory_plan import format_memory_report
        for device, plan in step.memory_plans.items():
            sys.stdout.write(format_memory_report(device, plan))
    return 0


def _compile_c_library(args: argparse.Namespace, options: PipelineOptions) -> int:
    """``compile --emit c-library``: the step as lib<name>.so and <name>.h in the output folder."""
    from compiler.codegen.c_library import check_library_folder, library_name, write_c_library
    name = library_name(os.path.normpath(args.model), args.name)   # a folder's own name
    check_library_folder(args.output)
    model = load_selected(args)
    step = step_for(model)
    optimize(step, options)
    checkpoint = args.checkpoint
    if checkpoint:
        try:
            checkpoint = resolve_checkpoint(checkpoint)
        except CheckpointError as e:
            raise ModelError(f"{args.model}: --checkpoint {args.checkpoint}: "
                             f"{getattr(e, 'message', None) or e}") from None
    try:
        lib = write_c_library(step, args.output, name, checkpoint, source=args.model)
    except CheckpointError as e:
        problems = getattr(e, "mismatches", None)
        if not problems:
            raise
        raise ModelError(f"checkpoint {checkpoint} does not match model {args.model}: "
                         + "; ".join(problems)) from None
    print(f"wrote {lib.header} and {lib.library}")
    print(f"  inputs:  {_specs_text(lib.inputs)}")
    print(f"  outputs: {_specs_text(lib.outputs)}")
    return 0


def _specs_text(specs) -> str:
    return ", ".join(f"{t['name']} {t['dtype']}["
                     + ",".join("?" if d is None else str(d) for d in t["shape"]) + "]"
                     for t in specs) or "(none)"


def _pipeline_until(options: PipelineOptions, after: str) -> PipelineOptions:
    """The options' pipeline cut just after pass ``after`` (which must be in it)."""
    get_pass(after)                               # unknown name: error listing known passes
    options = resolve_options(options)            # FLOWC_FLAGS, under the command line
    names = options.pipeline()
    if after not in names:
        raise PipelineError(f"pass '{after}' does not run in this pipeline "
                            f"({', '.join(names) or 'empty'})")
    return dataclasses.replace(options, passes=tuple(names[:names.index(after) + 1]), disable=())


CHECK_PASSES = ("prune", "infer-shapes")


def check_model(path: str, fetch: Sequence[str] = (), feed: Sequence[str] = (),
                step: Optional[str] = None, training: bool = False,
                signature: Optional[str] = None, tags: Sequence[str] = ()) -> str:
    """Build a model, cut its step graph and infer shapes; the ok summary, or a FlowcError."""
    model = apply_training_mode(select(load_model(path, signature, tags), fetch, feed, step),
                                training)
    step = step_for(model)
    PassManager(PipelineOptions(passes=CHECK_PASSES)).run(step.graph)
    inputs = ", ".join(_spec_text(n, p.output(0)) for n, p in zip(step.feed_names, step.feeds))
    outputs = ", ".join(_spec_text(n, r.inputs[0]) for n, r in zip(step.fetch_names, step.retvals))
    return (f"{path}: ok\n  inputs:  {inputs or '(none)'}\n  outputs: {outputs or '(none)'}\n"
            f"  nodes:   {len(model.graph)} as built, {len(step.graph)} in the step graph\n")


def cmd_check(args: argparse.Namespace) -> int:
    """Check every model; print each one's summary or error. Status 1 if any has an error."""
    from compiler.cli import report
    failed = 0
    for path in args.models:
        try:
            sys.stdout.write(check_model(path, args.fetch, args.feed, args.step,
                                         getattr(args, "training", False),
                                         args.signature, args.tag))
        except FlowcError as e:
            report(e)
            failed += 1
    if failed and len(args.models) > 1:
        print(f"flowc: {failed} of {len(args.models)} models have errors", file=sys.stderr)
    return 1 if failed else 0


def _tensorboard(graph: Graph, logdir: Optional[str]) -> None:
    """Write ``graph`` to an event file in ``logdir`` for TensorBoard's graph view."""
    if not logdir:
        raise ModelError("--format tensorboard needs --logdir DIR (the folder TensorBoard reads)")
    from compiler.interop.tensorboard import write_graph_event
    path = write_graph_event(graph, logdir)
    print(f"wrote {path} (view it with: tensorboard --logdir {logdir})")


def _format(graph: Graph, fmt: str, elide_constants: bool = False) -> str:
    if fmt == "dot":
        return graph_to_dot(graph)
    if fmt == "json":
        return graph_to_json(graph)
    return print_graph(graph, elide_constants=elide_constants)


def _emit(graph: Graph, fmt: str, elide_constants: bool = False,
          output: Optional[str] = None) -> None:
    """Print the graph, or write it to ``output`` (rendered by Graphviz for .svg/.png/.pdf)."""
    text = _format(graph, fmt, elide_constants)
    if output is None:
        sys.stdout.write(text)
    elif render_format(output):
        if fmt != "dot":
            raise ModelError(f"-o {output}: only --format dot can be rendered to an image")
        render_dot(text, output)
    else:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)


def cmd_ir(args: argparse.Namespace) -> int:
    """Print a model's IR as built, or its step graph after one pass of the pipeline."""
    options = options_from_args(args)
    model = load_selected(args)
    if args.after is None and (options.print_ir_after_all or options.print_ir_before_all
                               or options.print_ir_after):
        # printing between passes means running them: the whole pipeline, then its result
        args.after = resolve_options(options).pipeline()[-1]
    if args.after is None:
        if pipeline_flags_given(args):
            print("flowc: note: no passes run without --after; pipeline flags ignored",
                  file=sys.stderr)
        if args.format == "tensorboard":
            _tensorboard(model.as_built, args.logdir)
            return 0
        _emit(model.as_built, args.format, args.elide_constants, args.output)
        return 0
    step = step_for(model)
    PassManager(_pipeline_until(options, args.after)).run(step.graph)
    if args.format == "tensorboard":
        _tensorboard(step.graph, args.logdir)
        return 0
    if args.format == "text" and any(n.op == "_Send" for n in step.graph):
        # a partitioned step: one graph per device, as each device compiles it
        text = "\n".join(_format(g, "text", args.elide_constants)
                         for g in split_by_device(step.graph).values())
        if args.output is None:
            sys.stdout.write(text)
        else:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        return 0
    _emit(step.graph, args.format, args.elide_constants, args.output)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write a model as a TensorFlow GraphDef (as built, or its step graph after a pass) or
    as ONNX (its step graph, the ops that map back); with ``--checkpoint``, its variables as
    constants of their trained values (or, ``--keep-variables``, a GraphDef's variables
    initialized to them)."""
    from compiler.interop.graphdef import write_graphdef
    fmt = args.format or ("onnx" if args.output.endswith(".onnx") else "graphdef")
    options = options_from_args(args)
    checkpoint = getattr(args, "checkpoint", None)
    keep = getattr(args, "keep_variables", False)
    if keep and not checkpoint:
        raise ModelError("--keep-variables sets the variables' initial values from a "
                         "checkpoint: give --checkpoint PREFIX_OR_DIR")
    model = load_selected(args)
    if fmt == "onnx":
        if args.after is not None:
            raise ModelError("--after applies to GraphDef exports; ONNX exports the step graph "
                             "after prune, infer-shapes and fold-constants")
        if keep:
            raise ModelError("--keep-variables: ONNX has no variables; without it the trained "
                             "weights are the model's initializers")
        from compiler.interop.onnx_export import export_model_onnx
        count = export_model_onnx(model, args.output, checkpoint=checkpoint)
        print(f"wrote {args.output} ({count} ONNX nodes)")
        return 0
    note = None
    if args.after is not None:
        step = step_for(model)
        if checkpoint:
            if keep:
                raise ModelError("--keep-variables exports the graph as built, with its "
                                 "initializers; --after exports a step graph (its variables "
                                 "become constants without --keep-variables)")
            note = _weights_note(freeze_step(step, checkpoint, args.model), checkpoint)
        PassManager(_pipeline_until(options, args.after)).run(step.graph)
        graph = step.graph
    elif checkpoint and keep:
        graph = model.as_built
        variables = variables_of(graph)
        names = initialize_variables(graph, checkpoint_values(checkpoint, variables, args.model),
                                     variables)
        note = (f"  weights: {len(names)} variable(s) initialized from "
                f"{resolve_checkpoint(checkpoint)}")
    elif checkpoint:
        # TensorFlow's freeze_graph: what the fetches need, its variables as constants
        graph = extract_subgraph(model.graph, model.fetches, model.targets)
        variables = variables_of(graph)
        names = freeze_variables(graph, checkpoint_values(checkpoint, variables, args.model)
                                 if variables else {}, variables)
        note = _weights_note(names, checkpoint)
    else:
        graph = model.as_built
    write_graphdef(graph, args.output)
    print(f"wrote {args.output} ({len(graph)} nodes)")
    if note:
        print(note)
    return 0


def cmd_opt(args: argparse.Namespace) -> int:
    """Run the named passes on an IR text file and print the result (no passes: unchanged)."""
    options = options_from_args(args)
    graph = read_ir_file(args.file)
    if options.passes or pipeline_flags_given(args):
        PassManager(dataclasses.replace(options, passes=tuple(options.passes or ()))).run(graph)
    _emit(graph, args.format)
    return 0
