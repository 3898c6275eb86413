"""Compiling one step: the graph cut to what the fetches and targets need, optimized, emitted
as C, built, and written as an artifact the runtime loads.

A step is keyed by its signature: the graph version, the fed tensors, the fetched tensors and
the target nodes. Fed tensors become ``Placeholder`` nodes (a ``PlaceholderWithDefault`` the
step does not feed becomes an ``Identity`` of its default), fetches ``_Retval`` nodes and
targets control inputs of one ``_Sink``.
"""
from __future__ import annotations

import concurrent.futures
import errno
import functools
import hashlib
import json
import marshal
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from compiler.build_cache import cache_root
from compiler.codegen.build import (build_shared_object, cc_jobs, compiler_identity,
                                    compiler_command, target_cpu)
from compiler.codegen.emitter import LOADED, emit_c
from compiler.codegen.instrument import Instrumentation, origins_of
from compiler.codegen.onednn import onednn_tag
from compiler.errors import CompileError
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.attr_text import INLINE_ELEMENTS, format_attr
from compiler.ir.printer import print_graph
from compiler.ir.types import DType, TensorType
from compiler.passes.manager import PassManager
from compiler.options import PipelineOptions, code_tag
from compiler.passes.partition import device_label, split_by_device
from runtime.artifact import FORMAT, FORMAT_VERSION, sha256_file, write_manifest
from runtime.errors import FeedError
from runtime.module import ABI_VERSION, TensorSpec
from runtime.verified_files import VerificationRecord

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


@dataclass
class StepGraph:
    graph: Graph
    feeds: List[Node]           # Placeholder nodes, in feed order
    feed_names: List[str]       # the tensor names the user fed
    retvals: List[Node]         # _Retval nodes, in fetch order
    fetch_names: List[str]
    origins: dict = field(default_factory=dict)   # name -> (op, location) before optimizing
    plan_memory: bool = True    # the plan-memory pass ran (its plan is on the nodes; codegen uses it)
    memory_plans: Dict[str, object] = field(default_factory=dict)  # device -> its arena plan


def tensor_name(out: Output) -> str:
    return out.node.name if out.index == 0 else out.name


def feed_placeholder_name(out: Output) -> str:
    """The name of the ``Placeholder`` that stands for fed tensor ``out`` in a step graph."""
    return out.node.name if out.node.op == "Placeholder" else f"{out.node.name}/_feed{out.index}"


def make_step_graph(graph: Graph, feeds: Sequence[Output], fetches: Sequence[Output],
                    targets: Sequence[Node] = (),
                    feed_shapes: Optional[Sequence[Optional[tuple]]] = None,
                    feed_values: Optional[Sequence[Optional[np.ndarray]]] = None) -> StepGraph:
    """Copy ``graph`` into a step graph for the given feeds, fetches and targets.

    ``feed_shapes[i]``, where given and not None, is the shape the i-th feed takes in this
    step instead of its own: a feed of unknown rank is compiled for the rank it is fed
    (``dsl/rank_specialized.py``), a step whose shapes only the values fed decide for their
    shapes. ``feed_values[i]``, where given and not None, is a value the step is compiled
    for: the feed's users read it as a constant (an axis or a permutation fed), and the
    feed itself stays in the step's signature (its value is then not read)."""
    g, mapping = graph.copy()
    feed_nodes: List[Node] = []
    fed = {}                    # fed output -> the placeholder output standing for it
    for k, f in enumerate(feeds):
        src = Output(mapping[f.node], f.index)
        shape = feed_shapes[k] if feed_shapes is not None else None
        value = feed_values[k] if feed_values is not None else None
        if src.node.op == "Placeholder":
            if shape is not None:
                src.node.attrs["shape"] = shape
                src.node.output_types[0] = TensorType(src.dtype, shape)
            feed_nodes.append(src.node)
            if value is not None:
                _read_as_constant(g, src, value)
            continue
        ph = g.add_node("Placeholder", (), {"dtype": src.dtype, "shape": shape or src.shape},
                        name=feed_placeholder_name(f),
                        output_types=[TensorType(src.dtype, shape) if shape else src.type],
                        location=src.node.location)
        g.replace_all_uses_with(src, ph.output(0))
        feed_nodes.append(ph)
        fed[src] = ph.output(0)
        if value is not None:
            fed[src] = _read_as_constant(g, ph.output(0), value)
    for n in g:
        if n.op == "PlaceholderWithDefault":
            # Not fed in this step (a fed one was replaced above): it is its default, so
            # what depends only on constants through it folds (an unfed ``training`` switch
            # is false, and the training-only ops behind it leave the step).
            n.op = "Identity"
            n.attrs = {"T": n.attrs["dtype"]}
    retvals = []
    for i, f in enumerate(fetches):
        src = Output(mapping[f.node], f.index)
        src = fed.get(src, src)           # fetching a fed tensor returns the fed value
        r = g.add_node("_Retval", [src], {"T": src.dtype, "index": i}, name=f"_retval{i}")
        retvals.append(r)
    if targets:
        g.add_node("_Sink", (), {}, name="_sink", control_inputs=[mapping[t] for t in targets])
    g.topo_sort()
    return StepGraph(g, feed_nodes, [tensor_name(f) for f in feeds], retvals,
                     [tensor_name(f) for f in fetches])


@dataclass
class StepRequest:
    """A step not made yet: what ``make_step_graph`` takes, and the devices asked of some of
    its nodes (``devices``: node name -> device spec, set on the step's copies of them).
    ``compile_step`` keys it (``source_key``) from the graph's digest, remembered per graph
    revision, and these few arguments: a step already in the cache is loaded without copying
    the graph, which for a 10,000-node graph was most of a warm start."""
    graph: Graph
    feeds: Sequence[Output]
    fetches: Sequence[Output]
    targets: Sequence[Node] = ()
    feed_shapes: Optional[Sequence[Optional[tuple]]] = None
    feed_values: Optional[Sequence[Optional[np.ndarray]]] = None
    devices: Dict[str, str] = field(default_factory=dict)

    def make(self) -> StepGraph:
        """The step graph (``make_step_graph``), its nodes in ``devices`` on their devices."""
        step = make_step_graph(self.graph, self.feeds, self.fetches, self.targets,
                               self.feed_shapes, self.feed_values)
        for name, device in sorted(self.devices.items()):
            step.graph.node(name).device = device
        return step

    def identity(self) -> bytes:
        """What decides the step graph ``make`` gives: the graph's digest, the feeds, fetches
        and targets by name, the shapes and values fed for, the devices asked, and the state
        of the graph's name counter for the names ``make_step_graph`` gives new nodes."""
        h = hashlib.sha256(b"step request\0" + graph_digest(self.graph))
        values = None if self.feed_values is None else [
            None if v is None else [np.asarray(v).dtype.str, list(np.shape(v)),
                                    hashlib.sha256(np.ascontiguousarray(v).reshape(-1)
                                                   .view(np.uint8)).hexdigest()]
            for v in self.feed_values]
        shapes = None if self.feed_shapes is None else [
            None if s is None else [None if d is None else int(d) for d in s]
            for s in self.feed_shapes]
        counts = self.graph._name_counts
        new_names = ([feed_placeholder_name(f) for f in self.feeds]
                     + [f"{feed_placeholder_name(f)}/_value" for f in self.feeds]
                     + [f"_retval{i}" for i in range(len(self.fetches))] + ["_sink"])
        h.update(json.dumps([[f.name for f in self.feeds], [f.name for f in self.fetches],
                             sorted(t.name for t in self.targets), shapes, values,
                             sorted(self.devices.items()),
                             [counts.get(n, 0) for n in new_names]]).encode())
        return h.digest()


def _read_as_constant(g: Graph, placeholder: Output, value: np.ndarray) -> Output:
    """Make the users of ``placeholder`` read ``value`` as a constant instead."""
    value = np.ascontiguousarray(value, dtype=placeholder.dtype.np)
    const = g.add_node("Const", (), {"dtype": placeholder.dtype, "value": value},
                       name=f"{placeholder.node.name}/_value",
                       output_types=[TensorType(placeholder.dtype, tuple(value.shape))],
                       location=placeholder.node.location)
    g.replace_all_uses_with(placeholder, const.output(0))
    return const.output(0)


def step_specs(step: StepGraph) -> Tuple[List[TensorSpec], List[TensorSpec]]:
    """The step's feeds and fetches as the manifest records them (name, dtype, shape), in
    feed and fetch order. A feed the pruned step does not use keeps the spec of its
    placeholder, which is no longer in the graph: the cache keys hash these specs, since the
    runtime checks fed values against them."""
    feeds = [TensorSpec(name, n.output_types[0].dtype, n.output_types[0].shape)
             for n, name in zip(step.feeds, step.feed_names)]
    fetches = [TensorSpec(name, r.inputs[0].type.dtype, r.inputs[0].type.shape)
               for r, name in zip(step.retvals, step.fetch_names)]
    return feeds, fetches


def _specs_text(step: StepGraph) -> str:
    """``step_specs`` as stable text for a cache key."""
    feeds, fetches = step_specs(step)
    return json.dumps([[s.to_json() for s in feeds], [s.to_json() for s in fetches]])


def optimize(step: StepGraph, options: Optional[PipelineOptions] = None) -> PassManager:
    pm = PassManager(options or PipelineOptions())
    step.origins = origins_of(step.graph)       # what Fused kernels replaced, for profiles
    pm.run(step.graph)
    step.plan_memory = "plan-memory" in pm.effective_options.pipeline()
    _check_unfed(step)
    return pm


def _check_unfed(step: StepGraph) -> None:
    for n in step.graph:
        if n.op == "Placeholder" and n not in step.feeds:
            where = f" (defined at {n.location})" if n.location else ""
            raise FeedError(f"you must feed a value for placeholder '{n.name}' "
                            f"({n.output_types[0]}){where}", n)


def _is_gpu(device: str) -> bool:
    return "/device:GPU:" in device or device.upper().startswith("GPU:")


def write_artifact(step: StepGraph, out_dir: str, signature: str = "",
                   instrumentation: Instrumentation = Instrumentation(),
                   cuda_arch: Union[None, str, Dict[str, str]] = None,
                   replace: bool = True, sign_key: Union[None, bytes, str] = None,
                   verified: Optional[VerificationRecord] = None) -> str:
    """Emit C for each device of the optimized step graph, build it, and write an artifact.

    The artifact is built in a temporary folder beside ``out_dir`` and moved there whole.
    ``replace``: an artifact already at ``out_dir`` is replaced; without it (a cache entry,
    whose name is its content's hash) one that another process put there first is kept.

    One module per device (``cpu_0.c``/``cpu_0.so``, ...); the manifest says which of the
    step's feeds and fetches each device takes, its variables and random streams, and how many
    rendezvous slots the step's ``_Send``/``_Recv`` pairs use. ``instrumentation`` adds
    kernel timers and numerics checks (``compiler/codegen/instrument.py``; on a GPU,
    ``emit_cuda``'s).
    A GPU device's module is CUDA (``gpu_0.cu`` built by nvcc for ``cuda_arch``: one
    architecture for every GPU, or a device name -> architecture map where the GPUs differ;
    see ``compiler/codegen/cuda_artifact.py``).
    Big constants are stored once, in ``.bin`` blobs the module does not include: the
    device's ``constants`` entry lists them in the order the module's ``flowc_consts`` table
    takes them, and the loader maps and binds them (``runtime/artifact_files.py``).
    Every file written is listed with its SHA-256 in the manifest (the blobs too);
    ``sign_key`` (bytes or a key file) adds an HMAC-SHA256 signature of the manifest
    (``runtime/signing.py``), which ``load_artifact(path, verify_key=...)`` checks.
    Each file is hashed once, from the bytes written (the shared object when it entered the
    build cache); ``verified`` (the compile cache's record, ``runtime/verified_files.py``)
    notes them as written, so loading the artifact does not hash them again.
    """
    feed_specs, fetch_specs = step_specs(step)
    if not any(n.assigned_device for n in step.graph):
        for n in step.graph:                      # not placed (a custom pipeline): one CPU
            n.assigned_device = CPU0
    parts = split_by_device(step.graph)
    feed_index = {n.name: i for i, n in enumerate(step.feeds)}
    fetch_index = {r.name: i for i, r in enumerate(step.retvals)}
    slots = sum(1 for n in step.graph if n.op == "_Send")
    modules = []
    for device, g in parts.items():
        feeds = [n for n in g if n.op == "Placeholder"]
        feeds.sort(key=lambda n: feed_index.get(n.name, -1))
        for n in feeds:
            if n.name not in feed_index:
                raise CompileError(f"placeholder '{n.name}' on {device} is not fed")
        retvals = sorted((n for n in g if n.op == "_Retval"), key=lambda n: fetch_index[n.name])
        for local, r in enumerate(retvals):
            r.attrs["index"] = local             # the module's own fetch numbering
        if _is_gpu(device):
            from compiler.codegen.cuda_emitter import emit_cuda
            emitted = emit_cuda(g, feeds, retvals,
                                check_numerics=instrumentation.check_numerics,
                                profile=instrumentation.profile, origins=step.origins)
        else:
            emitted = emit_c(g, feeds, retvals, instrumentation=instrumentation,
                             origins=step.origins, plan_memory=step.plan_memory,
                             constants=LOADED)
            step.memory_plans[device] = emitted.memory
        for r in retvals:
            r.attrs["index"] = fetch_index[r.name]
        modules.append((device, g, feeds, retvals, emitted))
    # Each device's module is compiled at the same time, and a large one as several units at
    # once: the modules share the compiler processes (``FLOWC_CC_JOBS``, one per core).
    jobs = max(1, cc_jobs() // max(1, len(modules)))
    # every big constant's bytes hashed once (by the emitter): for the module's cache key,
    # the manifest and the IR
    digests = {m[0]: {fname: getattr(m[4], "blob_digests", {}).get(fname)
                      or hashlib.sha256(data).hexdigest()
                      for fname, data in getattr(m[4], "blobs", {}).items()} for m in modules}
    with concurrent.futures.ThreadPoolExecutor(max(1, min(len(modules), os.cpu_count() or 1))) \
            as pool:
        builds = list(pool.map(lambda m: _build_module(m[0], m[4], cuda_arch, jobs,
                                                       digests[m[0]]), modules))
    modules = [m + (b,) for m, b in zip(modules, builds)]
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".flowc-artifact-", dir=parent)
    try:
        files = {}
        devices = []
        files["graph.ir"] = _write_hashed(os.path.join(tmp, "graph.ir"), print_graph(
            step.graph, constant_files=_constant_files(step.graph, modules, digests)).encode())
        for device, g, feeds, retvals, emitted, built in modules:
            label = device_label(device)
            if _is_gpu(device):
                from compiler.codegen.cuda_artifact import write_gpu_module
                entry = write_gpu_module(tmp, label, emitted, built, files)
                entry.update({
                    "device": device,
                    "feeds": [feed_index[n.name] for n in feeds],
                    "fetches": [fetch_index[r.name] for r in retvals],
                    "variables": [TensorSpec(name, dtype, shape).to_json()
                                  for name, dtype, shape in emitted.variables],
                    "random_streams": list(emitted.streams),
                    "queues": [{"name": n, "components": c, "capacity": cap}
                               for n, c, cap in emitted.queues],
                    **emitted.instrumentation})
                devices.append(entry)
                continue
            files[f"{label}.c"] = _write_hashed(os.path.join(tmp, f"{label}.c"),
                                                emitted.source.encode())
            for fname, data in sorted(getattr(emitted, "blobs", {}).items()):  # big constants
                with open(os.path.join(tmp, fname), "wb") as f:
                    f.write(data)
                files[fname] = digests[device][fname]
            shutil.copyfile(built.path, os.path.join(tmp, f"{label}.so"))
            files[f"{label}.so"] = built.sha256 or sha256_file(os.path.join(tmp, f"{label}.so"))
            devices.append({
                "device": device, "kind": "cpu", "module": f"{label}.so", "source": f"{label}.c",
                "features": sorted(emitted.features),
                "constants": [{"file": fname, "nbytes": nbytes}
                              for fname, nbytes in emitted.loaded_constants],
                "feeds": [feed_index[n.name] for n in feeds],
                "fetches": [fetch_index[r.name] for r in retvals],
                "variables": [TensorSpec(name, dtype, shape).to_json()
                              for name, dtype, shape in emitted.variables],
                "random_streams": list(emitted.streams),
                "queues": [{"name": n, "components": c, "capacity": cap}
                           for n, c, cap in emitted.queues],
                **emitted.instrumentation})
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "abi_version": ABI_VERSION,
            "graph": step.graph.name, "signature": signature or modules[0][5].key,
            "feeds": [s.to_json() for s in feed_specs],
            "fetches": [s.to_json() for s in fetch_specs],
            "devices": devices, "rendezvous_slots": slots,
            "ir": "graph.ir", "files": files,
            "compiler": compiler_identity(compiler_command()).splitlines()[0],
        }
        write_manifest(tmp, manifest, sign_key=sign_key)
        installed = _install(tmp, out_dir, replace)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if installed and verified is not None:
        _record_written(verified, out_dir, files)
    return out_dir


def _constant_files(graph: Graph, modules: list, digests: Dict[str, Dict[str, str]]) -> dict:
    """Node name -> (blob file, SHA-256) of each constant of ``graph`` whose bytes a CPU
    module's ``.bin`` blob holds: the artifact's IR names that file instead of printing
    the bytes a second time (``flowc ir`` and the parser read them from it)."""
    out = {}
    for device, _, _, _, emitted, *_ in modules:
        for name, (file, value) in getattr(emitted, "blob_of", {}).items():
            node = graph.get(name)
            if node is not None and node.attrs.get("value") is value:
                out[name] = (file, digests[device][file])
    return out


def _write_hashed(path: str, data: bytes) -> str:
    """Write ``data`` to ``path``; its SHA-256 (hex)."""
    with open(path, "wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def _record_written(verified: VerificationRecord, out_dir: str, files: Dict[str, str]) -> None:
    """Note in ``verified`` the files just written to ``out_dir`` with the hashes of the bytes
    written (a file that is not there as a regular file is left to the load's check)."""
    for name, digest in files.items():
        try:
            st = os.lstat(os.path.join(out_dir, name))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            verified.note(name, st, digest)
    verified.save()


def _install(tmp: str, out_dir: str, replace: bool) -> bool:
    """Move the finished artifact ``tmp`` to ``out_dir``; whether it is the one installed.
    Two processes that compile the same step into the cache race here: the one that finds
    the other's artifact in place (the rename fails on a folder that is not empty) keeps it
    and drops its own copy."""
    if replace and os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    try:
        os.replace(tmp, out_dir)
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not os.path.isdir(out_dir):
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    return True


def _build_module(device: str, emitted, cuda_arch: Union[None, str, Dict[str, str]],
                  jobs: int = 1, blob_digests: Optional[Dict[str, str]] = None):
    if _is_gpu(device):
        from compiler.codegen.cuda_build import build_cuda_module
        arch = cuda_arch.get(device) if isinstance(cuda_arch, dict) else cuda_arch
        return build_cuda_module(emitted.source, arch, name=device_label(device))
    # a module that reads its constants from the artifact's blobs does not include them: its
    # object (and cache key) depends only on its source
    embedded = None if emitted.loaded_constants else getattr(emitted, "blobs", None)
    return build_shared_object(emitted.source, sorted(emitted.features), blobs=embedded,
                               layout=getattr(emitted, "layout", None), jobs=jobs,
                               blob_digests=blob_digests)


@functools.lru_cache(maxsize=1)
def toolchain_fingerprint() -> str:
    """Hash of everything that shapes generated code: the compiler package, the templates,
    the C runtime header, the system C compiler, the CPU it builds for and the oneDNN found,
    if any. A change to any of them changes step keys, so a cached artifact is never reused
    with code generated by another version or for another CPU."""
    h = hashlib.sha256(compiler_identity(compiler_command()).encode())
    h.update(b"\0cpu\0" + target_cpu().encode())     # what -march=native builds for
    h.update(onednn_tag().encode())           # '' without oneDNN (compiler/codegen/onednn.py)
    h.update(_sources_digest())
    return h.hexdigest()


# A source file changed this recently is not remembered by its identity (``_sources_digest``):
# timestamps tick coarsely, so a change within the same tick could keep it.
_SETTLED_NS = 2 * 10**9


def _sources_digest() -> bytes:
    """SHA-256 of the compiler's, the templates' and the C runtime's sources (names and
    bytes). Every new process needs it for its first cache key, and reading the few hundred
    files took ~8 ms of a 50 ms start: it is remembered in the cache folder under the hash of
    their identities (path, device, inode, size, mtime, ctime), so a changed, added or
    removed file makes another entry and the sources are read again."""
    import codegen_templates
    import runtime
    roots = [os.path.dirname(os.path.abspath(__file__)),
             os.path.dirname(os.path.abspath(codegen_templates.__file__)),
             os.path.join(os.path.dirname(os.path.abspath(runtime.__file__)), "csrc")]
    files = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for fn in sorted(filenames):
                if fn.endswith((".py", ".j2", ".h", ".c", ".lark")):
                    path = os.path.join(dirpath, fn)
                    files.append((os.path.relpath(path, root), path))
    ident = hashlib.sha256()
    newest = 0
    for rel, path in files:
        st = os.stat(path)
        newest = max(newest, st.st_ctime_ns, st.st_mtime_ns)
        ident.update(repr((path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                           st.st_ctime_ns)).encode())
    memo = os.path.join(cache_root(), "sources", ident.hexdigest())
    try:
        with open(memo) as f:
            known = f.read().strip()
        if len(known) == 64 and all(c in "0123456789abcdef" for c in known):
            return bytes.fromhex(known)
    except OSError:
        pass
    h = hashlib.sha256()
    for rel, path in files:
        h.update(rel.encode())
        with open(path, "rb") as f:
            h.update(f.read())
    if time.time_ns() - newest > _SETTLED_NS:
        try:
            os.makedirs(os.path.dirname(memo), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(memo), prefix=".tmp-")
            with os.fdopen(fd, "w") as f:
                f.write(h.hexdigest())
            os.replace(tmp, memo)
        except OSError:
            pass
    return h.digest()


def source_key(step: Union[StepGraph, StepRequest], options: PipelineOptions,
               instrumentation: Instrumentation = Instrumentation(),
               gpu_archs: str = "") -> Optional[str]:
    """Content hash of a step graph *before* its passes, with its feed/fetch names and specs
    (``step_specs``), the effective pipeline options, the instrumentation, the ``FLOWC_*``
    settings that change generated code (``compiler.options.code_tag``) and the toolchain: a
    session that makes a step already compiled finds its artifact (``cached_step_key``)
    without running the passes.
    None when the options ask the passes to show something (IR dumps, pass timings, the
    placement log), which a start from the cache would skip. ``gpu_archs``: what the GPU
    modules are built for (``gpu_archs_tag``), so a build for the CUDA simulator or for
    another GPU is never taken for this one's. A ``StepRequest`` is keyed without being
    made: by its ``identity``, which decides the step graph it makes."""
    if (options.print_ir_after or options.print_ir_after_all or options.print_ir_before_all
            or options.dump_to or options.time_passes or options.log_device_placement):
        return None
    if isinstance(step, StepRequest):
        # the step graph is a function of these (``StepRequest.identity``): its specs too
        h = hashlib.sha256(b"request before passes\0" + step.identity())
        h.update(json.dumps([repr(options)]).encode())
    else:
        h = hashlib.sha256(b"before passes\0" + graph_digest(step.graph))
        h.update(json.dumps([step.feed_names, step.fetch_names, repr(options)]).encode())
        h.update(b"\0specs\0" + _specs_text(step).encode())
    if instrumentation:
        h.update(instrumentation.tag.encode())
    if gpu_archs:
        h.update(b"\0gpu\0" + gpu_archs.encode())
    environment = code_tag()
    if environment:                  # FLOWC_* settings that change the generated code
        h.update(b"\0env\0" + environment.encode())
    h.update(toolchain_fingerprint().encode())
    return h.hexdigest()


# Constants of at least this many bytes in all are hashed by two threads at once (hashlib
# lets go of the GIL): a cached ResNet-18's start is mostly the hash of its 46 MB of weights.
PARALLEL_DIGEST_BYTES = 4 << 20


def graph_digest(graph: Graph) -> bytes:
    """SHA-256 of everything a graph's IR text says (``_graph_digest``), with each big
    constant by the SHA-256 of its bytes (the text of a ResNet's 46 MB of weights took longer
    to make than its C took to compile). Remembered until the graph changes (``Graph.
    remembered``: every edit bumps its revision), so a new session over the same graph does not
    visit its nodes again. The constants hashed are made read-only: an edit in place, which
    no version would see, raises instead."""
    return graph.remembered("digest", lambda: _graph_digest(graph))


# Version 2 of marshal's format: binary floats, and no back-references (version 3 writes
# an object seen twice as a reference, so equal columns could give different bytes).
_MARSHAL_VERSION = 2
_PLAIN = frozenset({str, int, float, bool, type(None)})
_DTYPE_NAMES = {dt: dt.ir_name for dt in DType}
_DTYPE_TAGS = {dt: b"dtype:" + dt.ir_name.encode() for dt in DType}


def _graph_digest(graph: Graph) -> bytes:
    """The SHA-256 of the graph's canonical form: its nodes in order as columns (names, ops,
    inputs, control inputs, attrs sorted by key, output types, devices, assigned devices,
    locations), written by ``marshal`` in one call. Every field of the IR text is there, so
    two graphs whose text differs never share a digest; and each column is one list
    comprehension, so a 10,000-node graph hashes in a fraction of the time its text took.
    A big constant is in the columns by its dtype, shape and place among the big arrays,
    whose SHA-256 follow (two threads at once where they are big)."""
    arrays: List[np.ndarray] = []
    nodes = graph._nodes
    inputs = [i for n in nodes for i in n._inputs]
    controls = [c for n in nodes for c in n._control_inputs]
    types = [t for n in nodes for t in n.output_types]
    attrs = [sorted(n.attrs.items()) for n in nodes]
    plain, tags = _PLAIN, _DTYPE_TAGS
    locations = [n.location for n in nodes]
    files: Dict[str, int] = {}
    columns = (
        "graph columns", graph.name,
        _strings([n.name for n in nodes]),
        _strings([n.op for n in nodes]),
        [len(n._inputs) for n in nodes],
        _strings([i.node.name for i in inputs]),
        [i.index for i in inputs],
        [len(n._control_inputs) for n in nodes],
        _strings([c.name for c in controls]),
        [len(a) for a in attrs],
        _strings([k for a in attrs for k, _ in a]),
        [v if type(v) in plain else tags[v] if type(v) is DType else _attr_record(v, arrays)
         for a in attrs for _, v in a],
        [len(n.output_types) for n in nodes],
        _strings([_DTYPE_NAMES[t.dtype] for t in types]),
        [t.shape for t in types],
        _strings([n.device for n in nodes]),
        _strings([n.assigned_device for n in nodes]),
        [-1 if loc is None else files.setdefault(loc.file, len(files)) for loc in locations],
        list(files),
        [0 if loc is None else loc.line for loc in locations],
        [0 if loc is None else loc.col for loc in locations],
    )
    h = hashlib.sha256(marshal.dumps(columns, _MARSHAL_VERSION))
    for digest in _array_digests(arrays):
        h.update(digest)
    return h.digest()


def _strings(column: List[str]):
    """A column of strings as ``marshal`` writes it fastest: one string, its items joined
    by NUL, where no item has a NUL (else the list; which of the two says which it is)."""
    joined = "\0".join(column)
    if joined.count("\0") == len(column) - 1 if column else True:
        return len(column), joined
    return column


def _attr_record(value, arrays: List[np.ndarray]):
    """An attr value that is not a str, int, float, bool, None or DType, as a tuple marshal
    writes, tagged by bytes (which no attr value is, so none can pass for another): an
    array by its dtype, shape and bytes (a big one by its place in ``arrays``, hashed
    apart), a numpy scalar by its dtype and bytes, a list or tuple item by item. An array
    is made read-only here: edited in place, its graph would keep its digest."""
    t = type(value)
    if t is list or t is tuple:
        return (b"list", [v if type(v) in _PLAIN else _DTYPE_TAGS[v] if type(v) is DType
                          else _attr_record(v, arrays) for v in value])
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
        dtype = (value.dtype.str, str(value.dtype))
        if value.dtype.kind == "O":                 # strings: their text
            return (b"text", format_attr(value))
        if value.size > INLINE_ELEMENTS:
            arrays.append(np.ascontiguousarray(value))
            return (b"big array", dtype, tuple(value.shape), len(arrays) - 1)
        return (b"array", dtype, tuple(value.shape), np.ascontiguousarray(value).tobytes())
    if isinstance(value, (np.bool_, np.number)):
        return (b"numpy", value.dtype.str, value.tobytes())
    # subclasses of str, int, float, list and tuple as the IR writes them; format_attr
    # raises for what the IR cannot hold
    return (b"text", format_attr(value))


def _array_digests(arrays: Sequence[np.ndarray]) -> List[bytes]:
    """The SHA-256 of each array's bytes; two threads at once where they are big."""
    def digest(v: np.ndarray) -> bytes:
        return hashlib.sha256(v.reshape(-1).view(np.uint8)).digest()   # any dtype, bf16 too
    if sum(v.nbytes for v in arrays) < PARALLEL_DIGEST_BYTES or (os.cpu_count() or 1) < 2:
        return [digest(v) for v in arrays]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return list(pool.map(digest, arrays))


def _source_index(cache_dir: str, source: str) -> str:
    return os.path.join(cache_dir, "by-source", source[:2], source)


def cached_step_key(cache_dir: str, source: Optional[str]) -> Optional[str]:
    """The ``step_key`` recorded for ``source`` (a ``source_key``), if any."""
    if source is None:
        return None
    try:
        with open(_source_index(cache_dir, source)) as f:
            key = f.read().strip()
    except OSError:
        return None
    return key if len(key) == 64 and all(c in "0123456789abcdef" for c in key) else None


def record_step_key(cache_dir: str, source: Optional[str], key: str) -> None:
    """Remember that ``source`` compiles to the artifact ``key`` (written atomically; a
    failure to write only costs the next start its passes)."""
    if source is None:
        return
    path = _source_index(cache_dir, source)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            f.write(key)
        os.replace(tmp, path)
    except OSError:
        pass


def gpu_archs_tag(cuda_arch: Union[None, str, Dict[str, str]]) -> str:
    """A stable text of what ``write_artifact``'s ``cuda_arch`` asks for ('' for nothing)."""
    if not cuda_arch:
        return ""
    if isinstance(cuda_arch, str):
        return cuda_arch
    return json.dumps(sorted(cuda_arch.items()))


def step_key(step: StepGraph, instrumentation: Instrumentation = Instrumentation(),
             gpu_archs: str = "") -> str:
    """Content hash of an optimized step graph, its feed/fetch names and specs (``step_specs``:
    also of a fed placeholder the passes pruned, whose spec the manifest keeps and the runtime
    checks feeds against), the instrumentation asked for, the GPU architectures its modules
    are built for, the ``FLOWC_*`` settings that change generated code and the toolchain."""
    h = hashlib.sha256(graph_digest(step.graph))
    h.update(json.dumps([step.feed_names, step.fetch_names, step.plan_memory]).encode())
    h.update(b"\0specs\0" + _specs_text(step).encode())
    if instrumentation:
        h.update(instrumentation.tag.encode())
    if gpu_archs:
        h.update(b"\0gpu\0" + gpu_archs.encode())
    environment = code_tag()
    if environment:                  # FLOWC_* settings that change the generated code
        h.update(b"\0env\0" + environment.encode())
    h.update(toolchain_fingerprint().encode())
    return h.hexdigest()
