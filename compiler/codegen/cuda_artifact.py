"""A GPU device's files in an artifact: the generated ``.cu``, the host shared object nvcc
built from it (kernels embedded), and the device code on its own as cubin, fatbin and PTX
(what ``runtime/cuda_module.py`` checks against the GPU before running, and what a reader or
another loader can use). The manifest entry has kind ``cuda`` and the architecture."""
from __future__ import annotations

import os
import shutil
from typing import Dict

from compiler.codegen.cuda_build import CudaBuildResult
from compiler.codegen.emitter import EmittedModule
from runtime.artifact import sha256_file


def write_gpu_module(folder: str, label: str, emitted: EmittedModule, built: CudaBuildResult,
                     files: Dict[str, str]) -> dict:
    """Write ``label.cu``, ``label.so``, ``label.fatbin``, ``label.ptx``, ``label.cubin`` into
    ``folder``, add their hashes to ``files``; the device's manifest entry (without the
    feeds, fetches and state, which the caller adds)."""
    names = {"source": f"{label}.cu", "module": f"{label}.so"}
    with open(os.path.join(folder, names["source"]), "w") as f:
        f.write(emitted.source)
    shutil.copyfile(built.path, os.path.join(folder, names["module"]))
    for kind, path in sorted(built.files.items()):
        names[kind] = f"{label}.{kind}"
        shutil.copyfile(path, os.path.join(folder, names[kind]))
    for name in names.values():
        files[name] = sha256_file(os.path.join(folder, name))
    return {"kind": "cuda", "arch": built.arch, **names,
            "features": sorted(emitted.features)}
