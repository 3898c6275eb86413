"""Compile generated CUDA with nvcc, cached on disk by content hash like the C modules.

One nvcc run per module builds the host shared object (the entry that launches the kernels,
with the device code embedded as a fatbin: SASS for the target architecture plus PTX that
newer GPUs JIT-compile) and keeps nvcc's intermediate files, from which the cubin, the fatbin
and the PTX are copied next to it. None of this needs a GPU, so artifacts cross-compile.

The architecture is ``sm_90`` (H100/H200) unless ``FLOWC_CUDA_ARCH`` or the caller says
otherwise; nvcc is found as ``FLOWC_NVCC``, on ``PATH``, or under ``CUDA_HOME``/``/usr/local/cuda``.
cuBLAS is used for matrix products where it is found (``FLOWC_CUDA_CUBLAS=0`` turns it off):
with the toolkit, under ``FLOWC_CUBLAS_HOME`` (a folder with ``include/cublas_v2.h`` and
``lib/libcublas.so*``), or as the ``nvidia-cublas`` wheel of nvcc's CUDA major version (what
PyTorch installs); otherwise the generated tiled kernels run.
cuDNN is found the same way (``FLOWC_CUDA_CUDNN=0`` turns it off): with the toolkit, under
``FLOWC_CUDNN_HOME`` (``include/cudnn.h``, ``lib/libcudnn.so*``), or as the
``nvidia-cudnn-cu<major>`` wheel (``nvidia/cudnn``); convolutions then call it where it beats
the generated kernels (``FLOWC_CUDA_CONV``, ``cuda_ops/conv_cudnn.py``).

The architecture ``sim`` builds for flowc's CUDA simulator instead (``runtime/csrc/cuda_sim``):
the system C++ compiler builds the same source into a host object whose kernels run on the
CPU. No nvcc is needed, and there is no device code (no cubin, fatbin or PTX).
"""
from __future__ import annotations

import functools
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from compiler.build_cache import cache_root, is_cached, keep_failed_source, publish
from compiler.codegen.build import RUNTIME_INCLUDE, compiler_identity
from compiler.errors import BuildError
from compiler.options import setting

DEFAULT_ARCH = "sm_90"
SIMULATED_ARCH = "sim"                   # flowc's CUDA simulator: the kernels run on the host
SIMULATOR_INCLUDE = os.path.join(RUNTIME_INCLUDE, "cuda_sim")
_ARCH = re.compile(r"^sm_(\d+)[a-z]?$")
# What each build keeps besides the shared object: suffix in the artifact -> nvcc's file.
_OUTPUTS = {"fatbin": "*.fatbin", "ptx": "*.ptx", "cubin": "*.sm_*.cubin"}


class NvccNotFound(BuildError):
    """The CUDA compiler is not installed (or not where flowc looks)."""


def cuda_arch(arch: Optional[str] = None) -> str:
    """The target architecture, checked: ``sm_90`` unless given or set in FLOWC_CUDA_ARCH
    (``sim`` where FLOWC_CUDA_SIMULATOR=1 makes the simulator the process's GPU)."""
    from runtime.cuda_module import simulated
    arch = (arch or setting("FLOWC_CUDA_ARCH")
            or (SIMULATED_ARCH if simulated() else DEFAULT_ARCH))
    if arch != SIMULATED_ARCH and not _ARCH.match(arch):
        raise BuildError(f"CUDA architecture '{arch}' is not of the form sm_NN (e.g. sm_90), "
                         f"nor '{SIMULATED_ARCH}' (the CUDA simulator)")
    return arch


def find_nvcc() -> Optional[str]:
    """The nvcc executable, or None."""
    explicit = setting("FLOWC_NVCC")
    if explicit:
        return explicit if os.path.isfile(explicit) else None
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "bin", "nvcc")):
            return os.path.join(root, "bin", "nvcc")
    return None


def require_nvcc() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        raise NvccNotFound("nvcc (the CUDA compiler) was not found: install the CUDA toolkit, "
                           "put nvcc on PATH, or set FLOWC_NVCC or CUDA_HOME; it is needed to "
                           "compile for a GPU device (--target cuda), not to run on CPUs")
    return nvcc


@functools.lru_cache(maxsize=None)
def nvcc_identity(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise NvccNotFound(f"nvcc at {nvcc} cannot run: {e}") from None
    return out.stdout.strip()


@functools.lru_cache(maxsize=None)
def cublas_home(nvcc: str) -> Optional[str]:
    """A folder with cuBLAS's ``include/cublas_v2.h`` this nvcc builds against ('' for the
    toolkit's own, which nvcc finds by itself), or None (none found, or FLOWC_CUDA_CUBLAS=0).
    Looked for in the toolkit, then FLOWC_CUBLAS_HOME, then the ``nvidia-cublas`` wheel
    (``nvidia/cu<major>`` or, for CUDA 12, ``nvidia/cublas``) of nvcc's major version."""
    if setting("FLOWC_CUDA_CUBLAS") == "0":
        return None
    root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    patterns = [os.path.join(root, "include", "cublas_v2.h"),
                os.path.join(root, "targets", "*", "include", "cublas_v2.h")]
    if any(glob.glob(p) for p in patterns):
        return ""
    major = _cuda_major(nvcc)
    return _library_home("FLOWC_CUBLAS_HOME", [f"cu{major}", "cublas"], major, "cublas_v2.h",
                         "libcublas.so*", _cublas_major)


def _library_home(explicit_setting: str, wheel_folders: List[str], major: Optional[str],
                  header: str, library: str, major_of) -> Optional[str]:
    """The first folder with ``include/<header>`` and ``lib/<library>`` whose CUDA major
    version (``major_of(folder)``, None where unknown) is nvcc's: the one the setting names,
    then ``nvidia/<wheel folder>`` in each site-packages folder (wheels only where nvcc's
    major version is known)."""
    candidates = []
    explicit = setting(explicit_setting)
    if explicit:
        candidates.append(explicit)
    if major:
        import site
        import sys
        for base in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
            candidates += [os.path.join(base, "nvidia", folder) for folder in wheel_folders]
    for home in candidates:
        if (os.path.isfile(os.path.join(home, "include", header))
                and major_of(home) in (None, major)
                and glob.glob(os.path.join(home, "lib", library))):
            return os.path.realpath(home)
    return None


def cublas_available(nvcc: str) -> bool:
    """Whether generated matrix products call cuBLAS (``cublas_home``)."""
    return cublas_home(nvcc) is not None


@functools.lru_cache(maxsize=None)
def cudnn_home(nvcc: str) -> Optional[str]:
    """A folder with cuDNN's ``include/cudnn.h`` this nvcc builds against ('' for the
    toolkit's own), or None (none found, or FLOWC_CUDA_CUDNN=0). Looked for as cuBLAS is: in
    the toolkit, then FLOWC_CUDNN_HOME, then the ``nvidia-cudnn-cu<major>`` wheel
    (``nvidia/cudnn``) of nvcc's major version; a folder known to be another CUDA major
    version's (its wheel's name says so) is not taken."""
    if setting("FLOWC_CUDA_CUDNN") == "0":
        return None
    root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    patterns = [os.path.join(root, "include", "cudnn.h"),
                os.path.join(root, "targets", "*", "include", "cudnn.h")]
    if any(glob.glob(p) for p in patterns) and any(
            glob.glob(os.path.join(root, sub, "libcudnn.so*"))
            for sub in ("lib64", "lib", os.path.join("targets", "*", "lib"))):
        return ""
    return _library_home("FLOWC_CUDNN_HOME", ["cudnn"], _cuda_major(nvcc), "cudnn.h",
                         "libcudnn.so*", _cudnn_cuda_major)


def _cudnn_cuda_major(home: str) -> Optional[str]:
    """The CUDA major version a cuDNN folder is for, where its wheel says
    (``nvidia_cudnn_cu<N>-*.dist-info`` beside ``nvidia/``); None where nothing says."""
    site_dir = os.path.dirname(os.path.dirname(os.path.realpath(home)))
    for info in glob.glob(os.path.join(site_dir, "nvidia_cudnn_cu*.dist-info")):
        m = re.match(r"nvidia_cudnn_cu(\d+)-", os.path.basename(info))
        if m:
            return m.group(1)
    return None


CONV_MODES = ("auto", "cudnn", "generated")


def conv_mode() -> str:
    """``FLOWC_CUDA_CONV``: auto (default: per shape, the faster of cuDNN and the generated
    kernel, timed on the first call), cudnn (cuDNN wherever it takes the shape) or generated
    (never cuDNN)."""
    text = setting("FLOWC_CUDA_CONV").strip().lower() or "auto"
    if text not in CONV_MODES:
        raise BuildError(f"FLOWC_CUDA_CONV must be one of {', '.join(CONV_MODES)}, not {text!r}")
    return text


def cudnn_available(nvcc: str) -> bool:
    """Whether generated convolutions may call cuDNN (``cudnn_home``, and FLOWC_CUDA_CONV is
    not ``generated``)."""
    return conv_mode() != "generated" and cudnn_home(nvcc) is not None


def _cuda_major(nvcc: str) -> Optional[str]:
    m = re.search(r"release (\d+)\.", nvcc_identity(nvcc))
    return m.group(1) if m else None


def _cublas_major(home: str) -> Optional[str]:
    """The CUDA major version a cuBLAS folder is for (its header's CUBLAS_VER_MAJOR)."""
    for name in ("cublas_api.h", "cublas_v2.h"):
        try:
            with open(os.path.join(home, "include", name)) as f:
                m = re.search(r"#define\s+CUBLAS_VER_MAJOR\s+(\d+)", f.read())
        except OSError:
            continue
        if m:
            return m.group(1)
    return None


def cublas_link_flags(nvcc: str) -> List[str]:
    """What building and linking against cuBLAS adds to nvcc's command ([] without it)."""
    home = cublas_home(nvcc)
    return [] if home is None else _library_flags(home, "cublas")


def cudnn_link_flags(nvcc: str) -> List[str]:
    """What building and linking against cuDNN adds to nvcc's command ([] without it)."""
    if not cudnn_available(nvcc):
        return []
    return _library_flags(cudnn_home(nvcc), "cudnn")


def _library_flags(home: str, name: str) -> List[str]:
    """-I, -L, the run path and -l of library ``name`` in ``home`` ('' for the toolkit's)."""
    if not home:
        return [f"-l{name}"]
    lib = os.path.join(home, "lib")
    names = sorted(glob.glob(os.path.join(lib, f"lib{name}.so*")))
    # a wheel has lib<name>.so.<major> only: the linker takes it by its file name
    link = ([f"-l{name}"] if os.path.exists(os.path.join(lib, f"lib{name}.so"))
            else [f"-l:{os.path.basename(names[0])}"])
    return [f"-I{os.path.join(home, 'include')}", f"-L{lib}", "-Xlinker", f"-rpath={lib}"] + link


def nvcc_flags(arch: str, cublas: bool, cudnn: bool = False) -> List[str]:
    cc = arch[3:]
    # Host code only sequences launches: -O1 for it (device code is optimized by ptxas at its
    # default -O3); kernels are compiled in parallel (--split-compile).
    flags = ["-O1", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-lineinfo",
             "--split-compile=0",
             f"-gencode=arch=compute_{cc},code=[sm_{cc},compute_{cc}]",
             "-Xcudafe", "--diag_suppress=declared_but_not_referenced",
             "-Xcudafe", "--diag_suppress=set_but_not_used",
             "-Xcudafe", "--diag_suppress=550", "-Xcudafe", "--diag_suppress=177",
             f"-I{RUNTIME_INCLUDE}"]
    if cublas:
        flags += ["-DFLOWC_CUBLAS"]
    if cudnn:
        # conv_cudnn.cu.j2: 1 under FLOWC_CUDA_CONV=cudnn, 0 (timed per shape) under auto
        flags += ["-DFLOWC_CUDNN", f"-DFLOWC_CUDNN_ALWAYS={int(conv_mode() == 'cudnn')}"]
    return flags


@dataclass
class CudaBuildResult:
    path: str                    # the host shared object (kernels embedded), in the cache
    key: str                     # the content hash that named it
    cached: bool                 # True when nvcc did not run
    arch: str
    files: Dict[str, str] = field(default_factory=dict)   # "fatbin"/"ptx"/"cubin" -> path


def build_cuda_module(source: str, arch: Optional[str] = None, name: str = "module",
                      features: Sequence[str] = ()) -> CudaBuildResult:
    """Compile ``source`` (a generated ``.cu``) for ``arch``; a BuildError naming nvcc's
    complaint (and keeping the source) if it is rejected, NvccNotFound without nvcc."""
    arch = cuda_arch(arch)
    if arch == SIMULATED_ARCH:
        return _build_simulated(source, name)
    nvcc = require_nvcc()
    cublas = cublas_available(nvcc)
    cudnn = cudnn_available(nvcc)
    flags = nvcc_flags(arch, cublas, cudnn)
    link = cublas_link_flags(nvcc) + cudnn_link_flags(nvcc)
    key = _key(source, [os.path.join(RUNTIME_INCLUDE, "flowc_rt.h")], nvcc_identity(nvcc),
               flags + link)
    files = {kind: os.path.join(cache_root(), "cuda", key[:2], f"{key}.{kind}")
             for kind in _OUTPUTS}

    def build(src: str, out: str, tmpdir: str) -> None:
        keep = os.path.join(tmpdir, "keep")
        os.makedirs(keep)
        _run([nvcc] + flags + ["--keep", "--keep-dir", keep, src, "-o", out] + link, src, key,
             "nvcc rejected generated CUDA")
        for kind, pattern in _OUTPUTS.items():
            matches = sorted(p for p in glob.glob(os.path.join(keep, pattern))
                             if "_dlink" not in os.path.basename(p))
            if not matches:
                raise BuildError(f"nvcc did not leave a {kind} file for {name}")
            shutil.copyfile(matches[0], files[kind])   # before the stamp: publish() is last

    so, cached = _in_cache("cuda", key, name, source, build,
                           ready=lambda: all(os.path.exists(p) for p in files.values()))
    return CudaBuildResult(so, key, cached, arch, files)


def simulator_flags() -> List[str]:
    return ["-x", "c++", "-std=c++17", "-O1", "-shared", "-fPIC", "-ffp-contract=off",
            "-U_FORTIFY_SOURCE",
            "-w", f"-I{SIMULATOR_INCLUDE}", f"-I{RUNTIME_INCLUDE}"]


def _build_simulated(source: str, name: str) -> CudaBuildResult:
    """``source`` built by the system C++ compiler against the CUDA simulator's header."""
    cxx = os.environ.get("CXX", "c++")
    flags = simulator_flags()
    key = _key(source, [os.path.join(RUNTIME_INCLUDE, "flowc_rt.h"),
                        os.path.join(SIMULATOR_INCLUDE, "cuda_runtime.h")],
               compiler_identity(cxx), flags)

    def build(src: str, out: str, tmpdir: str) -> None:
        _run([cxx] + flags + [src, "-o", out, "-lm", "-lpthread"], src, key,
             f"{cxx} rejected generated CUDA built for the CUDA simulator")

    so, cached = _in_cache("cuda-sim", key, name, source, build)
    return CudaBuildResult(so, key, cached, SIMULATED_ARCH)


def _key(source: str, headers: List[str], compiler: str, flags: List[str]) -> str:
    """The content hash naming a build: the source, the headers it includes, the compiler's
    version and the flags."""
    parts = [source.encode()]
    for path in headers:
        with open(path, "rb") as f:
            parts.append(f.read())
    parts += [compiler.encode(), " ".join(flags).encode()]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def _run(cmd: List[str], src: str, key: str, what: str) -> None:
    """Run a compiler; a BuildError quoting it, with the source kept, if it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        kept = keep_failed_source(src, key)
        raise BuildError(f"{what} (source kept at {kept}):\n"
                         + (proc.stderr or proc.stdout)[-4000:])


def _in_cache(kind: str, key: str, name: str, source: str, build, ready=lambda: True):
    """(the cached ``.so`` of ``key``, whether it was there): else ``build(src, out, tmpdir)``
    makes it from ``source`` in a scratch folder and it is published, stamp last."""
    d = os.path.join(cache_root(), kind, key[:2])
    os.makedirs(d, exist_ok=True)
    so = os.path.join(d, key + ".so")
    if ready() and is_cached(so):
        return so, True
    tmpdir = tempfile.mkdtemp(prefix=f"flowc-{kind}-", dir=d)
    try:
        src = os.path.join(tmpdir, name + ".cu")
        with open(src, "w") as f:
            f.write(source)
        out = os.path.join(tmpdir, name + ".so")
        build(src, out, tmpdir)
        publish(out, so)
        return so, False
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
