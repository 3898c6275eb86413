"""Compile generated C into shared objects with the system compiler, cached on disk by the hash
of source + compiler identity + flags + the CPU ``-march=native`` builds for. A corrupt cache
entry is rebuilt, never loaded. A large module is compiled as several translation units at
once, its kernel units cached one by one so another module reuses them (``unit_build.py``).
With ``FLOWC_SANITIZE`` set, modules are built with AddressSanitizer and UBSan
(``runtime/sanitize.py``)."""
from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import runtime
from runtime import sanitize
from compiler.build_cache import cache_root, cached_digest, keep_failed_source, publish
from compiler.codegen.elementwise import last_level_cache_bytes
from compiler.codegen.module_layout import MIN_UNIT_COST, ModuleLayout
from compiler.codegen.onednn import onednn_flags, onednn_tag
from compiler.codegen.unit_build import compile_units, run_compiler
from compiler.errors import BuildError
from compiler.options import number_setting, setting

RUNTIME_INCLUDE = os.path.join(os.path.dirname(os.path.abspath(runtime.__file__)), "csrc")
# -fno-math-errno and -fno-trapping-math change no result (generated code never reads errno
# or the floating-point exception flags, and never enables traps) but let gcc if-convert and
# vectorize loops with comparisons (ReLU, clamps, NaN selects); no -ffast-math: NaN, Inf,
# signed zeros and the order of float operations are kept.
BASE_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-std=gnu11", "-fno-math-errno",
              "-fno-trapping-math",
              "-Wall", "-Wno-unused-variable", "-Wno-unused-label", "-Wno-unused-but-set-variable")


def cache_dir() -> str:
    return cache_root()


def compiler_command() -> str:
    return os.environ.get("CC", "cc")


@functools.lru_cache(maxsize=None)
def compiler_identity(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise BuildError(f"C compiler '{cc}' not found; install gcc or set CC") from None
    return out.stdout.strip()


@functools.lru_cache(maxsize=1)
def target_cpu() -> str:
    """The CPU that ``-march=native`` compiles for, as text for cache keys: the processor's
    vendor, family, model and feature flags (``/proc/cpuinfo``), and its last-level cache
    (which generated code reads, ``elementwise.py``). Objects built on one CPU are never taken
    for another's (a newer CPU's instructions would fault on an older one)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break                       # the first processor's entry is enough
                name, _, value = line.partition(":")
                name = name.strip()
                if name in ("vendor_id", "cpu family", "model", "model name", "stepping",
                            "flags", "Features", "CPU implementer", "CPU part"):
                    fields[name] = " ".join(value.split())
    except OSError:
        pass
    if not fields:
        fields = {"machine": platform.machine(), "processor": platform.processor()}
    fields["llc"] = str(last_level_cache_bytes())
    return ";".join(f"{k}={v}" for k, v in sorted(fields.items()))


@functools.lru_cache(maxsize=None)
def blas_flags() -> tuple:
    """Include and link flags for OpenBLAS from the scipy-openblas32 wheel."""
    import scipy_openblas32 as ob
    libdir = ob.get_lib_dir()
    return (f"-I{ob.get_include_dir()}", f"-L{libdir}", f"-l{ob.get_library()}",
            f"-Wl,-rpath,{libdir}")


@dataclass
class BuildResult:
    path: str            # the shared object, inside the cache
    key: str             # content hash that named it
    cached: bool         # True when nothing was compiled
    sha256: str = ""     # of the shared object's bytes (hashed once, when it entered the cache)


# Flags of each module-level feature a kernel may ask for (``kc.require``), added to the
# compile and link line of only the modules that use it.
OPENMP_FLAGS = ("-fopenmp",)


def feature_flags(features: Sequence[str]) -> List[str]:
    """Compile and link flags for the features a module asked for: ``blas`` (flowc's
    OpenBLAS), ``openmp`` (parallel loops, see codegen_templates/c/parallel.c.j2), ``onednn``
    (oneDNN's convolutions, compiler/codegen/onednn.py)."""
    flags: List[str] = []
    if "openmp" in features:
        flags.extend(OPENMP_FLAGS)
    if "blas" in features:
        flags.extend(blas_flags())
    if "onednn" in features:
        flags.extend(onednn_flags())
    return flags


def cc_jobs() -> int:
    """How many compiler processes may build one module at once: ``FLOWC_CC_JOBS`` (1 builds
    every module as one translation unit), else one per core."""
    return number_setting("FLOWC_CC_JOBS", max(1, os.cpu_count() or 1), int, 1,
                          "a positive integer", BuildError)


def min_unit_cost() -> float:
    """The least estimated compile cost worth a translation unit of its own
    (``FLOWC_CC_MIN_UNIT_COST``, default ``module_layout.MIN_UNIT_COST``; 0 splits every module
    of two or more functions, which tests use to build small modules as several units)."""
    return number_setting("FLOWC_CC_MIN_UNIT_COST", MIN_UNIT_COST, float, 0, "a number >= 0",
                          BuildError)


def sanitize_flags(loaded_here: bool = True) -> tuple:
    """The compile and link flags of the sanitizers ``FLOWC_SANITIZE`` names (``()``: none;
    ``runtime/sanitize.py``). Raises BuildError for an unknown name and, when what is built
    will be ``loaded_here`` (into this process), for AddressSanitizer without its runtime
    preloaded: loading the module would stop the process."""
    try:
        names = sanitize.parse(setting("FLOWC_SANITIZE"))
        if loaded_here:
            sanitize.check_loadable(names, compiler_command())
    except sanitize.SanitizerError as e:
        raise BuildError(str(e)) from None
    return sanitize.compile_flags(names)


def build_shared_object(source: str, features: Sequence[str] = (), name: str = "module",
                        blobs: Optional[Dict[str, bytes]] = None,
                        layout: Optional[ModuleLayout] = None,
                        jobs: Optional[int] = None,
                        blob_digests: Optional[Dict[str, str]] = None) -> BuildResult:
    """``blobs``: files the source includes with ``.incbin`` (written beside it);
    ``blob_digests``: their SHA-256s (hex) where the caller has them already.
    ``layout``: the pieces ``source`` was joined from; with it a large module is compiled as
    up to ``jobs`` (default ``cc_jobs()``) translation units at once and linked into one
    shared object. The cache key is the whole source's: how it was split changes no result."""
    cc = compiler_command()
    sanitizers = list(sanitize_flags())
    flags = list(BASE_FLAGS) + sanitizers + [f"-I{RUNTIME_INCLUDE}"]
    link = feature_flags(features) + sanitizers      # the link of several units needs them too
    blobs = dict(blobs or {})
    with open(os.path.join(RUNTIME_INCLUDE, "flowc_rt.h"), "rb") as f:
        header = f.read()
    toolchain = b"\0".join([header, compiler_identity(cc).encode(), target_cpu().encode(),
                           onednn_tag().encode()])     # its headers, for the kernel objects' keys
    parts = [source.encode(), toolchain, " ".join(flags + link).encode()]
    digests = dict(blob_digests or {})
    for fname in sorted(blobs):
        digest = digests.get(fname) or hashlib.sha256(blobs[fname]).hexdigest()
        parts += [fname.encode(), bytes.fromhex(digest)]
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()
    d = os.path.join(cache_dir(), "objects", key[:2])
    os.makedirs(d, exist_ok=True)
    so = os.path.join(d, key + ".so")
    digest = cached_digest(so)
    if digest is not None:
        return BuildResult(so, key, True, digest)
    units = 1
    jobs = cc_jobs() if jobs is None else jobs
    if layout is not None:
        units = layout.unit_count(jobs, min_unit_cost())
    tmpdir = tempfile.mkdtemp(prefix="flowc-build-", dir=d)
    try:
        src = os.path.join(tmpdir, name + ".c")
        with open(src, "w") as f:
            f.write(source)
        for fname, data in blobs.items():
            with open(os.path.join(tmpdir, fname), "wb") as f:
                f.write(data)
        out = os.path.join(tmpdir, name + ".so")
        if units > 1:
            compile_units(cc, layout, layout.glue_count(jobs, min_unit_cost()), flags, link,
                          tmpdir, name, out, key, toolchain, jobs)
        else:
            cmd = [cc] + flags + [f"-Wa,-I{tmpdir}", src, "-o", out] + link + ["-lm"]
            returncode, stderr = run_compiler(cmd, f"compiling {name}", out + ".err")
            if returncode != 0:
                keep = keep_failed_source(src, key)
                raise BuildError(f"the C compiler rejected generated code (source kept at {keep}):\n"
                                 + stderr[-4000:])
        return BuildResult(so, key, False, publish(out, so))
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
