"""``flowc compile --emit c-library``: one step compiled into a shared library with a small C API.

What tfcompile did for TensorFlow, without Bazel: the step's module (the same C the artifact
would carry), the standalone runtime of ``runtime/csrc/flowc_library.c`` (variables, random
streams, inputs and outputs, errors) and a generated API file are compiled by ``cc`` into
``DIR/lib<name>.so``, described by ``DIR/<name>.h``. The variables' values are read from a
checkpoint at compile time and assembled into the library (``.incbin`` of ``src/weights.bin``):
a program that links it runs the model with no Python and no files to load.

Only what the library can run alone is accepted: one CPU device, and no op that needs the
Python runtime (checkpoint files, queues, remote tensors); a step that has them is refused
with one error listing every such node. See docs/c_library.md.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from compiler.codegen import templates
from compiler.codegen.build import (BASE_FLAGS, RUNTIME_INCLUDE, compiler_command,
                                    feature_flags, sanitize_flags)
from compiler.codegen.emitter import EmittedModule, emit_c
from compiler.codegen.kernel_context import c_string
from compiler.devices import parse_device_spec
from compiler.errors import BuildError, CompileError
from compiler.ir.graph import Node
from compiler.ir.op_registry import all_ops
from runtime.artifact import sha256_file
from runtime.checkpoint import read_checkpoint
from runtime.dtypes import DType

FORMAT = "flowc-c-library"
FORMAT_VERSION = 1
INFO_FILE = "library.json"
TEMPLATES = "c_library"
WEIGHTS_FILE = "weights.bin"
WEIGHTS_ALIGN = 64
# C files of runtime/csrc the library is built from (flowc_rt.h: the module's ABI).
RUNTIME_SOURCES = ("flowc_rt.h", "flowc_library.h", "flowc_library.c")

# Ops whose kernels call back into the Python runtime (``flowc_rt->host_call``).
HOST_CALL_OPS = {
    "SaveV2": "writes checkpoint files through the Python runtime",
    "RestoreV2": "reads checkpoint files through the Python runtime",
    "_RemoteSend": "sends a tensor to another task through the Python runtime",
    "_RemoteRecv": "receives a tensor from another task through the Python runtime",
    "PyFunc": "calls a Python function (py_func) through the Python runtime",
    "PyFuncStateless": "calls a Python function (py_func) through the Python runtime",
}
_C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A kernel call the emitter writes: ``if (kN_Op(flowc_T, s_x, flowc_rt, "node", "loc", st))``.
_KERNEL_CALL = re.compile(r'if \((k[0-9a-f]+_\w+)\(flowc_T, \w+, flowc_rt, ("(?:[^"\\]|\\.)*"), '
                          r'("(?:[^"\\]|\\.)*"), st\)\)')
_KERNEL_DEF = re.compile(r"static __attribute__\(\(noinline\)\) int (k[0-9a-f]+_\w+)\(")


class CLibraryError(CompileError):
    """A step cannot become a standalone C library (ops that need the Python runtime, several
    devices, variables without a checkpoint, a bad library name or output folder)."""


@dataclass
class CLibrary:
    path: str                    # the output folder
    name: str
    header: str                  # DIR/<name>.h
    library: str                 # DIR/lib<name>.so
    inputs: List[dict]
    outputs: List[dict]


def library_name(model_path: str, name: Optional[str] = None) -> str:
    """The C name of a model's library: ``name``, or the model file's stem made an identifier."""
    if name is None:
        stem = os.path.splitext(os.path.basename(model_path))[0]
        name = re.sub(r"\W", "_", stem, flags=re.ASCII) or "model"
        if name[0].isdigit():
            name = "model_" + name
    if not _IDENT.match(name) or name in _C_KEYWORDS:
        raise CLibraryError(f"--name {name!r}: a library name must be a C identifier "
                            "(letters, digits and '_', not starting with a digit, not a keyword)")
    return name


def check_library_folder(path: str) -> None:
    """Writing a library replaces ``path``: allow that for an empty folder or a library."""
    if not os.path.exists(path):
        return
    if not os.path.isdir(path):
        raise CLibraryError(f"-o {path}: exists and is not a folder")
    if not os.listdir(path):
        return
    info = os.path.join(path, INFO_FILE)
    try:
        with open(info) as f:
            if json.load(f).get("format") == FORMAT:
                return
    except (OSError, ValueError, AttributeError):
        pass
    raise CLibraryError(f"-o {path}: refusing to replace a folder that is not a flowc C library "
                        f"(it is not empty and has no {INFO_FILE})")


# --- what a standalone library cannot run ----------------------------------------------------
def _queue_ops() -> set:
    return {name for name, op in all_ops().items()
            if getattr(op.kernel, "__module__", "") == "compiler.ops.queue"
            or name.startswith("Queue") or name.startswith("FIFOQueue")}


def _where(n: Node) -> str:
    return (f"{n.location}: " if n.location else "") + f"'{n.name}' ({n.op})"


def refused_nodes(nodes: Sequence[Node]) -> List[str]:
    """One line per node the library cannot run alone (in graph order)."""
    queue_ops = _queue_ops()
    lines = []
    for n in nodes:
        if n.op in HOST_CALL_OPS:
            lines.append(f"{_where(n)}: {HOST_CALL_OPS[n.op]}")
        elif n.op in queue_ops:
            lines.append(f"{_where(n)}: uses a queue, which lives in the Python runtime")
    return lines


def _host_call_sites(source: str) -> List[str]:
    """Nodes whose generated kernel calls the Python runtime (ops not named above, such as
    user ops whose C template makes host calls)."""
    fns = []
    defs = list(_KERNEL_DEF.finditer(source))
    for i, m in enumerate(defs):
        end = defs[i + 1].start() if i + 1 < len(defs) else len(source)
        if "host_call(" in source[m.end():end]:
            fns.append(m.group(1))
    sites = []
    for m in _KERNEL_CALL.finditer(source):
        if m.group(1) in fns:
            node, loc = json.loads(m.group(2)), json.loads(m.group(3))
            sites.append((f"{loc}: " if loc else "") + f"'{node}': its kernel calls the Python "
                         "runtime (a host op)")
    if fns and not sites:
        sites.append(f"kernels {', '.join(fns)} call the Python runtime (host ops)")
    return sites


def _refuse(lines: List[str]) -> None:
    raise CLibraryError("this step needs the Python runtime, which a C library does not have; "
                        "compile only the inference signature (the model's outputs), without "
                        "these nodes:\n  " + "\n  ".join(lines))


def _single_cpu_device(nodes: Sequence[Node]) -> str:
    devices: List[str] = []
    for n in nodes:
        if n.assigned_device and n.assigned_device not in devices:
            devices.append(n.assigned_device)
    if len(devices) > 1:
        raise CLibraryError(f"the step is placed on {len(devices)} devices "
                            f"({', '.join(devices)}); a C library runs one CPU device: drop the "
                            "device annotations or compile with one CPU device")
    if devices:
        kind = parse_device_spec(devices[0]).get("device", "CPU").split(":")[0].upper()
        if kind != "CPU":
            raise CLibraryError(f"the step is placed on {devices[0]}; a C library runs on the "
                                "CPU only")
    return devices[0] if devices else ""


# --- tables for the templates ----------------------------------------------------------------
def _spec_text(dtype: DType, shape) -> str:
    dims = ",".join("?" if d is None else str(d) for d in shape)
    return f"{dtype.ir_name}[{dims}]"


def _dims_init(shape) -> str:
    return ", ".join("-1" if d is None else str(int(d)) for d in shape) or "0"


def _macros(prefix: str, names: Sequence[str]) -> List[str]:
    out: List[str] = []
    for name in names:
        base = prefix + (re.sub(r"\W", "_", name, flags=re.ASCII).upper().strip("_") or "T")
        macro, k = base, 2
        while macro in out:
            macro, k = f"{base}_{k}", k + 1
        out.append(macro)
    return out


def _tensor_table(prefix: str, names: Sequence[str], nodes: Sequence[Node],
                  types: Sequence) -> List[dict]:
    rows = []
    for i, (name, node, ttype, macro) in enumerate(zip(names, nodes, types,
                                                       _macros(prefix, names))):
        if ttype.shape is None:
            raise CLibraryError(f"'{name}' has unknown rank; a C library needs every input and "
                                "output rank known at compile time", node)
        rows.append({"index": i, "name": name, "macro": macro,
                     "spec": _spec_text(ttype.dtype, ttype.shape),
                     "c_name": c_string(name), "c_node": c_string(node.name),
                     "c_location": c_string(str(node.location) if node.location else ""),
                     "dtype": ttype.dtype.code, "rank": len(ttype.shape),
                     "dims": _dims_init(ttype.shape),
                     "json": {"name": name, "dtype": ttype.dtype.ir_name,
                              "shape": list(ttype.shape), "node": node.name,
                              "location": str(node.location) if node.location else ""}})
    return rows


def _weights(variables: Sequence[Tuple[str, DType, object]], checkpoint: Optional[str]
             ) -> Tuple[bytes, List[dict]]:
    """The variables' values from ``checkpoint`` as one blob, and the table of where each is."""
    if not variables:
        return b"", []
    if not checkpoint:
        names = ", ".join(f"'{n}'" for n, _, _ in variables)
        raise CLibraryError(f"the step reads {len(variables)} variable(s) ({names}); give "
                            "--checkpoint PREFIX to bake their values into the library")
    values = read_checkpoint(checkpoint, [n for n, _, _ in variables],
                             [d for _, d, _ in variables], [s for _, _, s in variables])
    blob = bytearray()
    table = []
    for (name, dtype, _), value in zip(variables, values):
        arr = np.ascontiguousarray(value, dtype=dtype.np)
        if arr.ndim > 8:
            raise CLibraryError(f"variable '{name}' has rank {arr.ndim}; the C runtime holds at "
                                "most 8 dims")
        blob.extend(b"\0" * (-len(blob) % WEIGHTS_ALIGN))
        table.append({"c_name": c_string(name), "name": name, "dtype": dtype.code,
                      "rank": arr.ndim, "dims": _dims_init(arr.shape), "shape": list(arr.shape),
                      "offset": len(blob), "nbytes": arr.nbytes, "ir_dtype": dtype.ir_name})
        blob.extend(arr.tobytes())
    return bytes(blob), table


# --- building --------------------------------------------------------------------------------
def _link_flags(features: Sequence[str]) -> List[str]:
    """Link flags; BLAS is looked for next to the library first (``$ORIGIN``), then where the
    scipy-openblas32 wheel is installed."""
    flags = list(feature_flags(features))
    if flags:
        flags.insert(0, "-Wl,-rpath,$ORIGIN")
    return flags + ["-lm", "-lpthread"]


def _build(folder: str, name: str, sources: Sequence[str], features: Sequence[str]) -> List[str]:
    """Compile ``sources`` (relative to ``folder``) into ``folder/lib<name>.so``; the command."""
    # FLOWC_SANITIZE: the library (module and runtime) is built with the sanitizers; the
    # program that loads it then needs their runtime first (runtime/sanitize.py)
    flags = list(BASE_FLAGS) + list(sanitize_flags(loaded_here=False)) + [
        "-fvisibility=hidden", "-Isrc", "-I.", "-Wa,-Isrc", f"-Wl,-soname,lib{name}.so"]
    cmd = [compiler_command()] + flags + list(sources) + ["-o", f"lib{name}.so"] \
        + _link_flags(features)
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"the C compiler rejected the library sources of '{name}':\n"
                         + proc.stderr[-4000:])
    return cmd


def write_c_library(step, out_dir: str, name: str, checkpoint: Optional[str] = None,
                    source: str = "") -> CLibrary:
    """Compile an optimized step graph (``compiler.step.StepGraph``) into ``out_dir``:
    ``<name>.h``, ``lib<name>.so``, ``library.json`` and the sources in ``src/``."""
    check_library_folder(out_dir)
    nodes = list(step.graph)
    _single_cpu_device(nodes)
    refused = refused_nodes(nodes)
    if refused:
        _refuse(refused)
    feeds = list(step.feeds)
    retvals = sorted(step.retvals, key=lambda r: r.attrs["index"])
    emitted: EmittedModule = emit_c(step.graph, feeds, retvals)
    late = _host_call_sites(emitted.source)
    if late:
        _refuse(late)
    if emitted.queues:
        _refuse([f"queue '{q[0]}': queues live in the Python runtime" for q in emitted.queues])
    blob, variables = _weights(emitted.variables, checkpoint)
    inputs = _tensor_table(f"{name.upper()}_INPUT_", step.feed_names, feeds,
                           [n.output_types[0] for n in feeds])
    outputs = _tensor_table(f"{name.upper()}_OUTPUT_", step.fetch_names,
                            [r.inputs[0].node for r in retvals],
                            [r.inputs[0].type for r in retvals])
    blas = "blas" in emitted.features
    weights_note = (f"{len(variables)} variable(s) from checkpoint {os.path.basename(checkpoint)}, "
                    "baked into the library" if variables else "none (the step reads no variables)")
    env = dict(name=name, NAME=name.upper(), guard=f"FLOWC_{name.upper()}_H",
               source=os.path.basename(source) if source else step.graph.name,
               weights_note=weights_note, inputs=inputs, outputs=outputs, variables=variables,
               streams=len(emitted.streams), blas=blas, weights_file=WEIGHTS_FILE,
               weights_symbol=f"flowc_{name}_weights", weights_size=len(blob),
               c_model_name=c_string(name))
    header = templates.render(TEMPLATES, "header.h.j2", **env)
    api = templates.render(TEMPLATES, "api.c.j2", **env)

    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".flowc-clib-", dir=parent)
    try:
        os.chmod(tmp, 0o755)                      # mkdtemp's 0700 would hide it from others
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        files: Dict[str, str] = {
            f"{name}.h": header,
            f"src/{name}_module.c": emitted.source,
            f"src/{name}_api.c": api,
        }
        for rel, text in files.items():
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(text)
        for fn in RUNTIME_SOURCES:
            shutil.copyfile(os.path.join(RUNTIME_INCLUDE, fn), os.path.join(src, fn))
        if variables:
            with open(os.path.join(src, WEIGHTS_FILE), "wb") as f:
                f.write(blob)
        for fname, data in emitted.blobs.items():       # big constants (.incbin, -Wa,-Isrc)
            with open(os.path.join(src, fname), "wb") as f:
                f.write(data)
        cmd = _build(tmp, name, [f"src/{name}_module.c", f"src/{name}_api.c",
                                 "src/flowc_library.c"], sorted(emitted.features))
        info = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "name": name,
            "model": os.path.basename(source) if source else "",
            "checkpoint": os.path.basename(checkpoint) if (checkpoint and variables) else None,
            "inputs": [t["json"] for t in inputs], "outputs": [t["json"] for t in outputs],
            "variables": [{"name": v["name"], "dtype": v["ir_dtype"], "shape": v["shape"],
                           "sha256": hashlib.sha256(
                               blob[v["offset"]:v["offset"] + v["nbytes"]]).hexdigest()}
                          for v in variables],
            "random_streams": list(emitted.streams), "blas": blas,
            "build": " ".join(shlex.quote(c) for c in cmd) + "   (run in this folder)",
            "files": {rel: sha256_file(os.path.join(tmp, rel))
                      for rel in sorted([f"{name}.h", f"lib{name}.so"])},
        }
        with open(os.path.join(tmp, INFO_FILE), "w") as f:
            json.dump(info, f, indent=2, sort_keys=True)
            f.write("\n")
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return CLibrary(out_dir, name, os.path.join(out_dir, f"{name}.h"),
                    os.path.join(out_dir, f"lib{name}.so"),
                    [t["json"] for t in inputs], [t["json"] for t in outputs])
