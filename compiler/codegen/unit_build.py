"""Build one module from several translation units: each compiled to an object by its own cc
process, all at once, then linked into the one shared object. On a failure every unit's source
and the whole module's are kept for a person to read, and the error names the unit."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import List, Sequence

from compiler.build_cache import cache_root
from compiler.errors import BuildError

# Unit-only compile flags: each unit repeats the module's static helpers, most of them unused
# there (gcc drops them without a word once this warning is off).
UNIT_FLAGS = ("-Wno-unused-function",)


def unit_file(name: str, k: int) -> str:
    return f"{name}.unit{k}.c"


def compile_units(cc: str, units: Sequence[str], flags: Sequence[str], link: Sequence[str],
                  tmpdir: str, name: str, out: str, key: str) -> None:
    """Compile ``units`` (C sources) in ``tmpdir`` at once and link them into ``out``.

    ``flags`` are the module's compile flags (``-shared`` is the link's); ``link`` its link
    flags (OpenBLAS, OpenMP); ``tmpdir`` holds ``name``.c (the whole module) and the files
    the units include with ``.incbin``; ``key`` names the kept sources on a failure.
    """
    compile_flags = ([f for f in flags if f != "-shared"] + list(UNIT_FLAGS)
                     + [f for f in link if f.startswith("-I") or f == "-fopenmp"])
    sources, objects, procs = [], [], []
    for k, text in enumerate(units):
        src = os.path.join(tmpdir, unit_file(name, k))
        with open(src, "w") as f:
            f.write(text)
        sources.append(src)
        objects.append(os.path.join(tmpdir, f"{name}.unit{k}.o"))
    try:
        for src, obj in zip(sources, objects):
            procs.append(subprocess.Popen(
                [cc] + compile_flags + [f"-Wa,-I{tmpdir}", "-c", src, "-o", obj],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        errors = [p.communicate()[1] for p in procs]
    finally:
        for p in procs:                     # interrupted: no compiler left running
            if p.poll() is None:
                p.kill()
                p.wait()
    for k, p in enumerate(procs):
        if p.returncode != 0:
            _reject(sources, tmpdir, name, key, k, errors[k])
    proc = subprocess.run([cc, "-shared", "-fPIC"] + objects + ["-o", out] + list(link) + ["-lm"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        _reject(sources, tmpdir, name, key, None, proc.stderr)


def _reject(sources: List[str], tmpdir: str, name: str, key: str, failed, stderr: str) -> None:
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
        what = f"the C compiler rejected generated code (unit {failed + 1} of {len(sources)})"
        where = (f"source kept at {os.path.join(keep, unit_file(name, failed))}; every unit "
                 f"and the whole module ({name}.c) in {keep}")
    raise BuildError(f"{what} ({where}):\n" + stderr[-4000:])
