"""The master's compile path: a step graph to a loaded executable, through the on-disk artifact
cache. ``fl.Session`` (``compile_step``), a distributed task building the partition its master
registered (``compiler.distributed.build_partition``, which ``flowc serve`` hands its server) and
anything else that compiles steps go through here, so the cache behaves one way everywhere.

The cache (``FLOWC_CACHE_DIR``/artifacts) holds artifacts named by ``step_key``: the content
hash of the optimized step, every feed's and fetch's spec (name, dtype, shape: also of a fed
placeholder the step does not use), its instrumentation, GPU architectures, code-changing
settings and toolchain. A ``by-source`` index maps the hash of a step *before* its passes to
that key, so a step compiled before loads without running the passes. A session hands in a
``StepRequest`` (the graph, feeds, fetches, targets): its hash is made from the graph's digest,
which the graph remembers until it next changes (every edit bumps its version), so a new
session over a cached step neither copies the graph nor visits its nodes. An entry that does
not load (damaged, or written by a process that died) is reported and rebuilt in place, never
served.

Beside each entry ``<key>.verified`` records its files as hashed when written or last checked
(``runtime/verified_files.py``): a start from the cache hashes only a file that changed since
(a changed file is hashed, and refused when it no longer has its manifest hash).
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Callable, Dict, Optional, Union

from compiler.build_cache import artifact_cache_dir
from compiler.codegen.instrument import Instrumentation
from compiler.gc_pause import gc_paused
from compiler.options import PipelineOptions, resolve_options
from compiler.step import (StepGraph, StepRequest, cached_step_key, gpu_archs_tag, optimize,
                           record_step_key, source_key, step_key, write_artifact)
from runtime.artifact import Artifact, load_artifact
from runtime.errors import FlowcError
from runtime.verified_files import VerificationRecord

log = logging.getLogger("flowc")

# (the artifact's folder, verified=its VerificationRecord or None) -> the loaded artifact
Loader = Callable[..., Artifact]
CudaArch = Union[None, str, Dict[str, str]]


def artifact_path(key: str) -> str:
    """Where the artifact of ``key`` lives in the cache."""
    return os.path.join(artifact_cache_dir(), key[:2], key)


def verification_record(path: str) -> VerificationRecord:
    """The record of the cached artifact at ``path``'s files hashed before (beside it)."""
    return VerificationRecord(path + ".verified")


def load_cached(path: str, load: Loader = load_artifact) -> Optional[Artifact]:
    """The artifact at ``path``, or None where there is none or it does not load; a failed
    load is logged with its reason (the caller rebuilds the entry)."""
    if not os.path.isdir(path):
        return None
    try:
        return load(path, verified=verification_record(path))
    except (FlowcError, OSError, ValueError, KeyError, TypeError) as e:
        log.warning("flowc: the cached artifact %s does not load (%s: %s); rebuilding it",
                    path, type(e).__name__, e)
        return None


def load_or_write(step: StepGraph, key: str, load: Loader = load_artifact, *,
                  instrumentation: Instrumentation = Instrumentation(),
                  cuda_arch: CudaArch = None) -> Artifact:
    """The artifact of the optimized ``step`` (named ``key``) from the cache, written there
    first where it is missing or does not load."""
    path = artifact_path(key)
    artifact = load_cached(path, load)
    if artifact is None:
        record = verification_record(path)
        write_artifact(step, path, signature=key, instrumentation=instrumentation,
                       replace=os.path.isdir(path), cuda_arch=cuda_arch, verified=record)
        artifact = load(path, verified=record)
    return artifact


STEPS_TABLE = "steps.tsv"


def _dump_per_step(step: StepGraph, options: PipelineOptions, instrumentation: Instrumentation,
                   archs: str) -> PipelineOptions:
    """``--dump-to DIR`` when a session or ``flowc train`` compiles several steps: each step's
    dumps go to ``DIR/step-<hash>`` (the hash of the step before its passes, so the same step
    always lands in the same folder) and ``DIR/steps.tsv`` says which step each folder is."""
    identity = source_key(step, dataclasses.replace(options, dump_to=None), instrumentation, archs)
    folder = f"step-{(identity or 'unhashed')[:12]}"
    os.makedirs(options.dump_to, exist_ok=True)
    table = os.path.join(options.dump_to, STEPS_TABLE)
    line = "\t".join([folder, ",".join(step.fetch_names) or "-", ",".join(step.feed_names) or "-",
                      str(len(step.graph))]) + "\n"
    known = []
    if os.path.exists(table):
        with open(table, encoding="utf-8") as f:
            known = [row for row in f.readlines()[1:] if not row.startswith(folder + "\t")]
    with open(table, "w", encoding="utf-8") as f:
        f.write("folder\tfetches\tfeeds\tnodes\n")
        f.writelines(known + [line])
    return dataclasses.replace(options, dump_to=os.path.join(options.dump_to, folder))


def compile_step(step: Union[StepGraph, StepRequest], options: PipelineOptions,
                 cuda_arch: CudaArch = None, load: Loader = load_artifact,
                 profiled: bool = False) -> Artifact:
    """Compile ``step`` (not yet optimized) with ``options`` (``FLOWC_FLAGS`` merged under
    them) to a loaded artifact: from the cache when the same step was compiled before, with
    no passes run; else run the passes, build, and remember the step for next time.
    A ``StepRequest`` is made into its step graph only when the cache does not have it.
    ``profiled``: with kernel timers whatever the options say (a traced run's own build)."""
    effective = resolve_options(options)
    instrumentation = Instrumentation.from_options(effective)
    if profiled:
        instrumentation = dataclasses.replace(instrumentation, profile=True)
    archs = gpu_archs_tag(cuda_arch)
    cache = artifact_cache_dir()
    with gc_paused():               # the key's text of every node: short-lived, no cycles
        source = source_key(step, effective, instrumentation, archs)
    key = cached_step_key(cache, source)
    artifact = load_cached(artifact_path(key), load) if key else None
    if artifact is None:
        if isinstance(step, StepRequest):
            with gc_paused():       # a copy of the graph: objects that live on
                step = step.make()
        if effective.dump_to:
            options = _dump_per_step(step, effective, instrumentation, archs)
        # the passes and the emitter make a graph's worth of objects that live on: scanning
        # them again and again was a tenth of the 10,000-op chain's compile
        with gc_paused():
            optimize(step, options)
            key = step_key(step, instrumentation, archs)
            artifact = load_or_write(step, key, load, instrumentation=instrumentation,
                                     cuda_arch=cuda_arch)
        record_step_key(cache, source, key)
    return artifact
