"""The ``flowc`` command line: ``compile``, ``check``, ``ir``, ``export``, ``opt`` and ``run``, plus the
commands other packages add through the ``flowc.commands`` entry-point group (``train``).

User errors (a missing file, IR that does not parse, an unknown pass or fetch, a tampered
artifact) print ``flowc: error: ...`` to stderr and exit with status 1; a malformed command
line exits with status 2. Only a bug in flowc shows a Python traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, NoReturn, Optional

from compiler.errors import SourceError
from runtime.errors import FlowcError

PROG = "flowc"


class _Parser(argparse.ArgumentParser):
    """argparse, with errors worded as ``flowc: error: ...``. With ``intermixed=True`` (a
    command whose optional positional follows another, ``flowc cluster ACTION [FILE]``) the
    positionals may come before, between or after the options: plain argparse hands the
    optional one nothing when an option follows the first, and then refuses it as
    unrecognized when it comes last."""

    def __init__(self, *args, intermixed: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self._intermixed = intermixed
        self._intermixing = False

    def parse_known_args(self, args=None, namespace=None):
        if not self._intermixed or self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True          # parse_known_intermixed_args calls back in here
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{PROG}: error: {message}\n")


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("flowc")
    except Exception:
        return "unknown (not installed)"


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The argument parser of every subcommand (plugin commands fully only for ``command``,
    the one about to run; None: all of them)."""
    from compiler.flags import add_pipeline_arguments

    parser = _Parser(prog=PROG, description="flowc: compile TensorFlow-style dataflow graphs to C "
                     "and run the compiled artifacts.")
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    model_help = ("model file: IR text (*.ir), a text-DSL file (*.flow, see docs/dsl.md), a "
                  "Python file whose build() returns (graph, fetches[, feeds]), a TensorFlow "
                  "GraphDef (*.pb, *.pbtxt), an ONNX model (*.onnx), or a TensorFlow SavedModel "
                  "folder (with --signature); see compiler/model_loader.py")
    p = sub.add_parser("compile", help="compile a model into an artifact folder",
                       description="Compile a model file into an artifact folder (manifest.json, "
                       "generated C, shared object, IR) that `flowc run` loads.")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("-o", "--output", metavar="DIR", required=True,
                   help="artifact folder to write (with --emit c-library: the library's folder)")
    p.add_argument("--emit", choices=("artifact", "c-library"), default="artifact",
                   help="what to write: an artifact folder (default), or a shared library "
                        "lib<name>.so with a C API header <name>.h (see docs/c_library.md)")
    p.add_argument("--checkpoint", metavar="PREFIX_OR_DIR",
                   help="bake the trained weights in: the values of the variables the step "
                        "reads, from this checkpoint (a prefix, or a folder: its latest, e.g. "
                        "`flowc train --checkpoint-dir`); an artifact gets them as constants, a "
                        "C library as its variables' initial values")
    p.add_argument("--name", metavar="NAME",
                   help="with --emit c-library: the C name of the library and its functions "
                        "(default: the model file's name)")
    p.add_argument("--target", choices=("c", "cuda"), default="c",
                   help="c: every op on CPU devices (default); cuda: ops go to /device:GPU:0 "
                        "where they have a GPU kernel (the rest stay on CPU:0), compiled with "
                        "nvcc; no GPU is needed to compile (see docs/cuda.md)")
    p.add_argument("--cuda-arch", metavar="SM", default=None,
                   help="GPU architecture for --target cuda (default sm_90, or FLOWC_CUDA_ARCH)")
    _add_selection(p)
    p.add_argument("--sign-key", metavar="FILE",
                   help="sign the artifact's manifest with the key in FILE (HMAC-SHA256; at "
                        "least 16 bytes, e.g. `head -c 32 /dev/urandom > FILE`), so that `flowc "
                        "run --verify-key FILE` refuses it if anyone without the key changes it")
    p.add_argument("--memory-report", action="store_true",
                   help="print each device module's memory plan: peak bytes (the arena size), "
                   "buffers, how many share memory, and the largest buffers")
    add_pipeline_arguments(p)
    p.set_defaults(handler="compile")

    p = sub.add_parser("check", help="check a model: build it and infer shapes, print a summary",
                       description="Load a model, cut its step graph and run the prune and "
                       "infer-shapes passes; print 'MODEL: ok' with its inputs, outputs and node "
                       "count, or its first error. Every MODEL is checked, and the exit status is "
                       "1 if any has an error.")
    p.add_argument("models", metavar="MODEL", nargs="+", help=model_help)
    _add_selection(p)
    p.set_defaults(handler="check")

    p = sub.add_parser("ir", help="print a model's IR, as built or after a pass",
                       description="Print the IR of a model: as built, or its step graph after "
                       "the named pass of the pipeline.")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("--after", metavar="PASS",
                   help="run the pipeline up to and including PASS and print the result")
    p.add_argument("--format", choices=("text", "dot", "json", "tensorboard"), default="text",
                   help="output format: IR text, Graphviz DOT, JSON (see docs/dsl.md), or an "
                        "event file for TensorBoard's graph view (needs --logdir)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write to FILE instead of stdout; with --format dot, a .svg, .png or "
                        ".pdf FILE is rendered by Graphviz's dot program")
    p.add_argument("--logdir", metavar="DIR",
                   help="with --format tensorboard: the folder to write the event file to")
    p.add_argument("--elide-constants", action="store_true",
                   help="summarize constants of more than 16 elements (type, size, digest); "
                        "easier to read, but the output no longer parses as IR")
    _add_selection(p)
    add_pipeline_arguments(p)
    p.set_defaults(handler="ir")

    p = sub.add_parser("export", help="write a model as another system's format",
                       description="Write a model's graph (as built, or after --after PASS) as a "
                       "TensorFlow GraphDef: binary for FILE.pb, text for FILE.pbtxt (node names, "
                       "ops, attrs, devices and control inputs map one to one; source locations "
                       "travel in the _flowc_location attr); or its step graph as an ONNX model "
                       "(opset 17) for the ops that map back. --checkpoint bakes trained "
                       "weights in. See docs/interop.md.")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("--format", choices=("graphdef", "onnx"), default=None,
                   help="output format (default: from FILE's suffix: .pb/.pbtxt GraphDef, "
                        ".onnx ONNX)")
    p.add_argument("-o", "--output", metavar="FILE", required=True,
                   help="file to write (.pb: binary GraphDef, .pbtxt: text GraphDef, .onnx)")
    p.add_argument("--after", metavar="PASS",
                   help="export the step graph after this pass instead of the graph as built")
    p.add_argument("--checkpoint", metavar="PREFIX_OR_DIR",
                   help="bake the trained weights in: the variables the fetches read become "
                        "constants of their values in this checkpoint (a prefix, or a folder: "
                        "its latest); a GraphDef holds only what the fetches need, as "
                        "TensorFlow's freeze_graph writes it")
    p.add_argument("--keep-variables", action="store_true",
                   help="with --checkpoint, GraphDef only: keep the graph as built, its "
                        "variables initialized to their checkpoint values (running the init op "
                        "restores the trained weights)")
    _add_selection(p)
    add_pipeline_arguments(p)
    p.set_defaults(handler="export")

    p = sub.add_parser("opt", help="run passes on IR text and print the result",
                       description="Run passes on an IR text file and print the IR; with no "
                       "--passes the file is printed unchanged (the round trip).")
    p.add_argument("file", metavar="FILE.ir", help="IR text file")
    p.add_argument("--format", choices=("text", "dot", "json"), default="text",
                   help="output format")
    add_pipeline_arguments(p)
    p.set_defaults(handler="opt")

    p = sub.add_parser("run", help="run an artifact with the runtime alone",
                       description="Load an artifact with the runtime alone, run one step and "
                       "print the fetched values (or save them with --save).")
    p.add_argument("artifact", metavar="DIR", help="artifact folder written by `flowc compile`")
    p.add_argument("--feed", metavar="NAME=FILE.npy", action="append", default=[],
                   help="value of a feed, from a .npy file (repeatable)")
    p.add_argument("--feeds", metavar="FILE.npz", action="append", default=[],
                   help="values of feeds, from a .npz file (numpy.savez): each array feeds the "
                        "tensor of its name (repeatable; combines with --feed, but no name may "
                        "be given twice)")
    p.add_argument("--fetch", metavar="NAME", action="append", default=[],
                   help="print only this fetch (repeatable; default: all of the artifact's)")
    p.add_argument("--save", metavar="PATH",
                   help="write the fetched values instead: .npy for one fetch, .npz for several")
    p.add_argument("--threshold", metavar="N", type=int, default=1000,
                   help="print arrays with more than N elements summarised (numpy's threshold)")
    p.add_argument("--checkpoint", metavar="PREFIX_OR_DIR",
                   help="set the artifact's variables from this checkpoint first (a prefix, "
                        "or a folder: its latest, e.g. `flowc train --checkpoint-dir`)")
    p.add_argument("--profile", metavar="STEPS", nargs="?", type=int, const=1,
                   help="run STEPS steps (default 1) of an artifact compiled with --profile "
                   "and print the time of each kernel (docs/profiling.md)")
    p.add_argument("--repeat", metavar="N", type=int, default=1,
                   help="run the step N times (variables carry over from run to run, as in "
                        "a training loop), print the last run's fetches, and the time per run "
                        "(median and fastest) on stderr")
    p.add_argument("--verify-key", metavar="FILE",
                   help="refuse the artifact unless its manifest is signed with the key in FILE "
                        "(`flowc compile --sign-key FILE`); without it, hashes catch damage but "
                        "not edits")
    p.set_defaults(handler="run")
    from compiler.cli.serve import add_serve_command
    add_serve_command(sub)
    _add_plugin_commands(sub, command)
    return parser


COMMANDS_GROUP = "flowc.commands"


def _add_plugin_commands(sub, command: Optional[str] = None) -> None:
    """Subcommands other packages declare in the ``flowc.commands`` entry-point group (the
    text DSL's ``train``): each entry point is a function that takes the subparsers object,
    adds its parser and sets ``handler`` to a function of the parsed arguments returning the
    exit status. The compiler never imports those packages itself, and loads a plugin only
    when its command runs (``command``, or every plugin when None): other commands do not
    pay for importing it; ``flowc --help`` lists it by name."""
    from importlib.metadata import entry_points
    taken = set(sub.choices)
    for ep in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        if ep.name in taken:
            continue
        taken.add(ep.name)
        if command is not None and ep.name != command:
            p = sub.add_parser(ep.name, help=f"see `flowc {ep.name} --help` "
                               f"(from {ep.value.split(':')[0]})", add_help=False)
            p.add_argument("args", nargs=argparse.REMAINDER)
            continue
        try:
            ep.load()(sub)
        except Exception as e:  # noqa: BLE001  (a broken plugin must not break flowc)
            p = sub.add_parser(ep.name, help=f"(unavailable: {ep.value} failed to load)")
            p.add_argument("args", nargs=argparse.REMAINDER)
            p.set_defaults(handler=_unavailable(ep.name, ep.value, e))


def _unavailable(name: str, value: str, err: Exception):
    def handler(args: argparse.Namespace) -> int:
        raise FlowcError(f"command '{name}' is unavailable: loading {value} failed: "
                         f"{type(err).__name__}: {err}")
    return handler


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fetch", metavar="NAME", action="append", default=[],
                   help="fetch this tensor (a fetch name of the model or a tensor name; "
                   "repeatable; default: the model's fetches)")
    p.add_argument("--feed", metavar="NAME", action="append", default=[],
                   help="feed this tensor (repeatable; default: every Placeholder needed)")
    p.add_argument("--step", metavar="NAME",
                   help="another step the model file defines instead of its outputs: 'train' "
                        "for a .flow file with training declarations (the optimizer's update "
                        "of every variable, fetching the loss, the 'training' input on), 'eval' "
                        "(the loss and metrics)")
    p.add_argument("--training", action="store_true",
                   help="training mode: switch the model's 'training' input on (dropout "
                        "drops, batch normalization uses batch statistics); without it steps "
                        "and exports are inference steps")
    p.add_argument("--signature", metavar="NAME",
                   help="a SavedModel's signature to compile (default: serving_default, or its "
                        "only one); its input and output keys name the feeds and fetches")
    p.add_argument("--tag", metavar="TAG", action="append", default=[],
                   help="a SavedModel's MetaGraphDef by its tags (repeatable, or comma-separated "
                        "as in saved_model_cli's --tag_set; default: serve, or its only one)")


def _dispatch(args: argparse.Namespace) -> int:
    if callable(args.handler):                   # a command from the flowc.commands group
        return args.handler(args)
    if args.handler == "run":
        from compiler.cli.run_artifact import cmd_run
        return cmd_run(args)
    from compiler.cli import commands
    return {"compile": commands.cmd_compile, "check": commands.cmd_check, "ir": commands.cmd_ir,
            "opt": commands.cmd_opt, "export": commands.cmd_export}[args.handler](args)


def report(err: FlowcError) -> None:
    """Print ``flowc: error: ...`` (and its notes) for a user error."""
    print(f"{PROG}: error: {_message(err)}", file=sys.stderr)
    for note in getattr(err, "__notes__", ()):
        print(f"{PROG}: note: {note}", file=sys.stderr)


def _message(err: FlowcError) -> str:
    """The error's text; ``file:line:col: error: msg`` loses its second ``error:``."""
    text = str(err)
    if isinstance(err, SourceError):
        where = f"{err.file}:{err.line}:{err.col}: "
        text = text.replace(where + "error: ", where, 1)
    return text


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``flowc`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), "")
    args = build_parser(command).parse_args(argv)
    try:
        return _dispatch(args)
    except FlowcError as e:
        report(e)
        return 1
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"{PROG}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
