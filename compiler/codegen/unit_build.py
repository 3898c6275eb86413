"""Build one module from several translation units (``module_layout.py``): its glue units and
its kernel units, each compiled to an object by its own cc process, up to ``jobs`` at once,
then linked into the one shared object.

A kernel unit's object is cached by the unit's text, the runtime header, the compiler, its
flags and the target CPU (``objects/<key>.o`` in the cache folder): a later module with the
same kernels links the cached object and compiles only its glue and its new kernels. On a
failure every unit's source and the whole module's are kept for a person to read, and the
error names the unit. A build that takes more than ``PROGRESS_AFTER_S`` shows a progress bar
on a terminal (stderr).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence

from compiler.build_cache import cache_root, is_cached, publish
from compiler.errors import BuildError

# Unit-only compile flags: each unit repeats the module's static helpers, most of them unused
# there (gcc drops them without a word once this warning is off). A kernel unit takes only the
# helpers its kernels name: one it missed would be an implicit declaration, made an error.
UNIT_FLAGS = ("-Wno-unused-function",)
KERNEL_UNIT_FLAGS = ("-Werror=implicit-function-declaration",)

# Seconds a build runs before it shows its progress bar.
PROGRESS_AFTER_S = 2.0

_OPENMP = re.compile(r"#pragma omp|\bomp_\w+\(|_OPENMP")


def unit_file(name: str, k: int) -> str:
    return f"{name}.unit{k}.c"


def kernel_file(name: str, k: int) -> str:
    return f"{name}.kernels{k}.c"


@dataclass
class _Job:
    source: str                 # the unit's C file
    obj: str                    # where cc writes its object
    flags: List[str]
    cached: Optional[str]       # the cache entry the object becomes (kernel units)
    label: str                  # "unit 2 of 3", "kernel unit 1 of 5"


# Headers of the libraries a kernel may include (kc.require("blas"), kc.require("onednn")),
# found through the -I flags of the module's link line.
LIBRARY_HEADERS = ("cblas.h", "dnnl.h")


def kernel_unit_flags(flags: Sequence[str], link: Sequence[str], text: str) -> List[str]:
    """The compile flags of a kernel unit: the module's, with OpenMP only when the unit uses
    it and the include folders of the module's libraries (OpenBLAS, oneDNN) only when it
    includes one of their headers (so the unit's object is the same whatever else its module
    needs)."""
    out = [f for f in flags if f != "-shared"] + list(UNIT_FLAGS) + list(KERNEL_UNIT_FLAGS)
    if _OPENMP.search(text):
        out.append("-fopenmp")
    if any(header in text for header in LIBRARY_HEADERS):
        out.extend(f for f in link if f.startswith("-I"))
    return out


def kernel_object_key(text: str, flags: Sequence[str], toolchain: bytes) -> str:
    """The cache key of a kernel unit's object: its text, its flags and ``toolchain`` (the
    runtime header, the compiler's identity and the target CPU)."""
    return hashlib.sha256(b"\0".join([b"kernel unit", text.encode(), " ".join(flags).encode(),
                                      toolchain])).hexdigest()


def kernel_object_path(key: str) -> str:
    d = os.path.join(cache_root(), "objects", key[:2])
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, key + ".o")


def compile_units(cc: str, layout, glue_units: int, flags: Sequence[str], link: Sequence[str],
                  tmpdir: str, name: str, out: str, key: str, toolchain: bytes,
                  jobs: int) -> dict:
    """Compile ``layout``'s ``glue_units`` glue units and its kernel units (the cached ones
    only linked) with up to ``jobs`` compilers at once, and link them into ``out``.

    ``flags`` are the module's compile flags (``-shared`` is the link's); ``link`` its link
    flags (OpenBLAS, OpenMP); ``tmpdir`` holds ``name``.c (the whole module) and the files
    the units include with ``.incbin``; ``key`` names the kept sources on a failure;
    ``toolchain`` goes into the kernel objects' keys. Returns counts: glue units, kernel
    units compiled, kernel units found in the cache.
    """
    glue_flags = ([f for f in flags if f != "-shared"] + list(UNIT_FLAGS) + list(KERNEL_UNIT_FLAGS)
                  + [f for f in link if f.startswith("-I") or f == "-fopenmp"])
    parts = layout.assign_parts(glue_units)
    jobs_list: List[_Job] = []
    objects: List[str] = []
    for k, assigned in enumerate(parts):
        src = os.path.join(tmpdir, unit_file(name, k))
        with open(src, "w") as f:
            f.write(layout.render_glue(assigned, k, glue_units))
        obj = os.path.join(tmpdir, f"{name}.unit{k}.o")
        objects.append(obj)
        jobs_list.append(_Job(src, obj, glue_flags, None, f"unit {k + 1} of {glue_units}"))
    chunks = layout.kernel_chunks()
    reused = 0
    for k, chunk in enumerate(chunks):
        text = layout.render_kernels(chunk)
        unit_flags = kernel_unit_flags(flags, link, text)
        cached = kernel_object_path(kernel_object_key(text, unit_flags, toolchain))
        objects.append(cached)
        if is_cached(cached):
            reused += 1
            continue
        src = os.path.join(tmpdir, kernel_file(name, k))
        with open(src, "w") as f:
            f.write(text)
        jobs_list.append(_Job(src, os.path.join(tmpdir, f"{name}.kernels{k}.o"), unit_flags,
                              cached, f"kernel unit {k + 1} of {len(chunks)}"))
    _run_all(cc, jobs_list, tmpdir, name, key, jobs)
    for job in jobs_list:
        if job.cached is not None:
            publish(job.obj, job.cached)
    proc = subprocess.run([cc, "-shared", "-fPIC"] + objects + ["-o", out] + list(link) + ["-lm"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        _reject([j.source for j in jobs_list], tmpdir, name, key, None, proc.stderr)
    return {"glue": glue_units, "kernels_compiled": len(chunks) - reused,
            "kernels_reused": reused}


def _run_all(cc: str, jobs_list: List[_Job], tmpdir: str, name: str, key: str,
             jobs: int) -> None:
    """Run the compiles, ``jobs`` at a time (the costliest sources first); stop them all and
    raise naming the unit when one fails."""
    pending = sorted(jobs_list, key=lambda j: -os.path.getsize(j.source))
    running = {}
    errors = {}
    bar = progress_bar(len(jobs_list), f"compiling {name}")
    try:
        while pending or running:
            while pending and len(running) < max(1, jobs):
                job = pending.pop(0)
                err = open(job.obj + ".err", "w+")
                proc = subprocess.Popen([cc] + job.flags + [f"-Wa,-I{tmpdir}", "-c", job.source,
                                                            "-o", job.obj],
                                        stdout=subprocess.DEVNULL, stderr=err)
                running[proc] = (job, err)
            done = [p for p in running if p.poll() is not None]
            if not done:
                bar.update(0)                   # shows the bar once it is due
                time.sleep(0.005)
                continue
            for proc in done:
                job, err = running.pop(proc)
                err.seek(0)
                text = err.read()
                err.close()
                bar.update(1)
                if proc.returncode != 0:
                    errors[job.label] = (job, text)
            if errors:
                break
    finally:
        bar.close()
        for proc, (job, err) in running.items():      # a failure or an interrupt: no
            if proc.poll() is None:                      # compiler left running
                proc.kill()
                proc.wait()
            err.close()
    if errors:
        label, (job, text) = next(iter(errors.items()))
        _reject([j.source for j in jobs_list], tmpdir, name, key, job, text, label)


def run_compiler(cmd: List[str], what: str, stderr_path: str):
    """Run one compiler command (a progress bar once it takes long, on a terminal); its exit
    status and what it wrote on stderr."""
    bar = progress_bar(1, what)
    try:
        with open(stderr_path, "w+") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
            try:
                while proc.poll() is None:
                    bar.update(0)
                    time.sleep(0.005)
            finally:
                if proc.poll() is None:         # interrupted: no compiler left running
                    proc.kill()
                    proc.wait()
            err.seek(0)
            return proc.returncode, err.read()
    finally:
        bar.close()


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, what: str):
    """A tqdm bar on stderr that appears once the work has run ``PROGRESS_AFTER_S`` seconds,
    only when stderr is a terminal (a no-op elsewhere)."""
    isatty = getattr(sys.stderr, "isatty", None)
    if not (isatty and isatty()):
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=what, unit="unit", file=sys.stderr, delay=PROGRESS_AFTER_S,
                leave=False, dynamic_ncols=True)


def _reject(sources: List[str], tmpdir: str, name: str, key: str, failed: Optional[_Job],
            stderr: str, label: str = "") -> None:
    """Keep the whole module and every unit under the cache's ``failed/<key>/``; raise."""
    keep = os.path.join(cache_root(), "failed", key)
    os.makedirs(keep, exist_ok=True)
    shutil.copy(os.path.join(tmpdir, name + ".c"), os.path.join(keep, name + ".c"))
    for src in sources:
        shutil.copy(src, os.path.join(keep, os.path.basename(src)))
    if failed is None:
        what = f"the linker rejected the {len(sources)} compiled units"
        where = f"sources kept at {keep}"
    else:
        what = f"the C compiler rejected generated code ({label})"
        where = (f"source kept at {os.path.join(keep, os.path.basename(failed.source))}; every "
                 f"unit and the whole module ({name}.c) in {keep}")
    raise BuildError(f"{what} ({where}):\n" + stderr[-4000:])
