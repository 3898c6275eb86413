"""GPU devices for the lean runtime: CUDA contexts, artifact modules and GPU-resident
variables, through pycuda (the ``gpu`` extra). Importing this module never fails; pycuda is
imported when first needed, and every entry point says plainly why it cannot run (no pycuda,
no CUDA driver, no GPU, a module built for another architecture).

A GPU device's module in an artifact (kind ``cuda``, written by ``flowc compile --target
cuda``) is a host shared object with the C module ABI of ``runtime/csrc/flowc_rt.h``: its
``flowc_entry`` copies feeds to the device, launches the step's kernels on a stream of its
own and copies fetches back, so it runs under the same ``Executable`` as a CPU module. What
this module adds:

- ``gpu_devices()``: the ``/device:GPU:k`` names this process can host (empty without a GPU);
- ``CudaContext``: the device's primary context, made current on the calling thread (the
  CUDA runtime in the generated module uses the same primary context, so pycuda memory and
  the module's buffers are one address space);
- ``CudaModule``: checks that the device code (``.fatbin``, SASS plus PTX) loads on this GPU
  before anything runs, then loads the host object;
- ``load_cuda_artifact``: ``runtime.artifact.load_artifact`` for artifacts with GPU devices;
- ``read_gpu_variable`` / ``release_gpu_variable``: a GPU variable's value lives in device
  memory (``flowc_var.value.data`` is a device pointer); these read it into numpy and free it.
  A session's ``ResourceStore`` does the same through the module's own exports
  (``flowc_cuda_var_to_host``/``_from_host``/``_release``), with no pycuda context needed.

With ``FLOWC_CUDA_SIMULATOR=N`` the process has N simulated GPUs instead of its real ones:
modules are built for the architecture ``sim`` (flowc's CUDA simulator,
``runtime/csrc/cuda_sim``: the same generated source, compiled by the system C++ compiler,
its kernels run on the host) and no pycuda or driver is involved. A ``sim`` artifact loads
with or without the variable set.

What has run on a GPU, and what has only compiled: ``docs/cuda.md``.
"""
from __future__ import annotations

import os
import re
import threading
from typing import List, Optional, Tuple

import numpy as np

from runtime.artifact import Artifact, load_artifact, load_cpu_module
from runtime.artifact_files import ArtifactFolder
from runtime.errors import ArtifactError, FlowcError
from runtime.module import CModule, ffi
from runtime.signing import Key
from runtime.verified_files import VerificationRecord

_CUDA_CDEF = """
int flowc_cuda_entry(const flowc_tensor *feeds, flowc_tensor *fetches, const flowc_runtime *rt,
                     void *rendezvous, int64_t timeout_ms, void *stream, flowc_status *st);
void flowc_cuda_var_release(flowc_var *v);
int flowc_cuda_var_to_host(const flowc_var *v, void *dst, size_t nbytes);
int flowc_cuda_var_from_host(flowc_var *v, const void *src, size_t nbytes);
"""
_cdef_lock = threading.Lock()
_cdef_done = False


class CudaUnavailable(FlowcError):
    """This process cannot use a GPU (the message says why)."""


SIMULATED_ARCH = "sim"


def simulated() -> bool:
    """Whether this process runs its GPUs on flowc's CUDA simulator (FLOWC_CUDA_SIMULATOR=N:
    N simulated GPUs; 1 for any value that is not a number)."""
    return os.environ.get("FLOWC_CUDA_SIMULATOR", "") not in ("", "0")


def simulated_gpu_count() -> int:
    value = os.environ.get("FLOWC_CUDA_SIMULATOR", "")
    return max(1, int(value)) if value.isdigit() else 1


def _driver():
    """pycuda.driver, initialized; CudaUnavailable naming what is missing."""
    try:
        import pycuda.driver as cuda
    except ImportError:
        raise CudaUnavailable("pycuda is not installed (pip install 'flowc[gpu]'); GPU devices "
                              "need it") from None
    try:
        cuda.init()
    except Exception as e:  # noqa: BLE001  (pycuda raises its own error types)
        raise CudaUnavailable(f"the CUDA driver did not initialize: {e}") from None
    return cuda


def cuda_status() -> Tuple[bool, str]:
    """(whether a GPU is usable, why not): for skips and messages."""
    if simulated():
        return True, ""
    try:
        cuda = _driver()
    except CudaUnavailable as e:
        return False, str(e)
    if cuda.Device.count() == 0:
        return False, "the CUDA driver reports no GPU"
    return True, ""


def gpu_devices(job: str = "localhost", task: int = 0) -> List[str]:
    """Full names of the GPUs this process can host (none without pycuda or a GPU)."""
    ok, _ = cuda_status()
    if not ok:
        return []
    if simulated():
        return [f"/job:{job}/replica:0/task:{task}/device:GPU:{k}"
                for k in range(simulated_gpu_count())]
    import pycuda.driver as cuda
    return [f"/job:{job}/replica:0/task:{task}/device:GPU:{k}"
            for k in range(cuda.Device.count())]


class CudaContext:
    """The primary context of GPU ``index``, current on the thread while entered."""

    def __init__(self, index: int = 0):
        self.simulated = simulated()
        if self.simulated:
            if not 0 <= index < simulated_gpu_count():
                raise CudaUnavailable(f"there is no GPU {index} (the CUDA simulator has "
                                      f"{simulated_gpu_count()})")
            self.index, self.device, self.context, self.arch = index, None, None, SIMULATED_ARCH
            return
        cuda = _driver()
        if index >= cuda.Device.count():
            raise CudaUnavailable(f"there is no GPU {index} (the driver reports "
                                  f"{cuda.Device.count()})")
        self.index = index
        self.device = cuda.Device(index)
        self.context = self.device.retain_primary_context()
        major, minor = self.device.compute_capability()
        self.arch = f"sm_{major}{minor}"

    def __enter__(self) -> "CudaContext":
        if not self.simulated:
            self.context.push()
        return self

    def __exit__(self, *exc) -> None:
        if self.simulated:
            return
        import pycuda.driver as cuda
        cuda.Context.pop()


def _declare_cuda_abi() -> None:
    global _cdef_done
    with _cdef_lock:
        if not _cdef_done:
            ffi.cdef(_CUDA_CDEF)
            _cdef_done = True


class CudaModule(CModule):
    """A GPU device's module: the device code checked against this GPU, then the host object
    (the C module ABI, plus ``flowc_cuda_entry`` and ``flowc_cuda_var_release``)."""

    def __init__(self, path: str, fatbin: Optional[str], arch: str,
                 context: Optional[CudaContext], *, fatbin_image: Optional[bytes] = None):
        """``fatbin``: the device code's file (named in messages); ``fatbin_image``: its bytes
        where the caller has read and checked them already (the artifact loader), else they
        are read from ``fatbin``."""
        if arch == SIMULATED_ARCH:         # host code only: no device code, no GPU needed
            _declare_cuda_abi()
            super().__init__(path)
            self.context = context
            return
        if context is None or context.simulated:
            raise ArtifactError(f"{path}: a module built for {arch} needs a GPU; the CUDA "
                                f"simulator runs modules built for '{SIMULATED_ARCH}' "
                                "(--cuda-arch sim)")
        if fatbin_image is None and fatbin is None:
            raise ArtifactError(f"{path}: a module built for {arch} needs its device code "
                                "(fatbin), and none is given")
        with context:
            image = fatbin_image
            if image is None:
                with open(fatbin, "rb") as f:
                    image = f.read()
            import pycuda.driver as cuda
            try:
                self.device_module = cuda.module_from_buffer(image)
            except Exception as e:  # noqa: BLE001
                raise ArtifactError(f"{fatbin}: the device code (built for {arch}) does not load "
                                    f"on GPU {context.index} ({context.arch}): {e}") from None
        _declare_cuda_abi()
        super().__init__(path)
        self.context = context


def load_cuda_artifact(path: str, context: Optional[CudaContext] = None, *,
                       verify_key: Optional[Key] = None,
                       verified: Optional[VerificationRecord] = None) -> Artifact:
    """Load an artifact whose devices may include GPUs (``kind: cuda``); CPU devices load as
    ``runtime.artifact.load_artifact`` loads them, and the artifact is checked as it checks
    it (``verify_key`` too) before any module is loaded or any GPU is touched. Each GPU
    module's device code is checked in its own GPU's context (``context`` for the GPU it is
    of; the GPUs' primary contexts, which the CUDA runtime in the modules uses too). Runs with
    pycuda calls of their own must happen with ``context`` entered. ``verified``: the
    compile cache's record of files hashed before (``runtime/verified_files.py``)."""
    contexts = {context.index: context} if context is not None else {}

    def load_module(folder: ArtifactFolder, index: int, d: dict) -> CModule:
        kind = d["kind"]
        entry = f"devices[{index}].module"
        if kind == "cuda":
            arch = d.get("arch", "?")
            ctx = None
            fatbin = image = None
            if arch != SIMULATED_ARCH:
                gpu = gpu_index(d["device"])
                ctx = contexts.get(gpu) or contexts.setdefault(gpu, CudaContext(gpu))
                if d.get("fatbin"):
                    fatbin = os.path.join(folder.path, d["fatbin"])
                    image = folder.read(d["fatbin"])
            with folder.open_module(d["module"], entry) as module:
                return CudaModule(module, fatbin, arch, ctx, fatbin_image=image)
        if kind == "cpu":
            return load_cpu_module(folder, index, d)
        raise ArtifactError(f"{folder.path}: device {d['device']} is of unknown kind {kind!r}")

    return load_artifact(path, load_module, verify_key=verify_key, verified=verified)


def gpu_index(device: str) -> int:
    """``k`` of a ``.../device:GPU:k`` name (0 where it names none)."""
    m = re.search(r"/device:GPU:(\d+)$", device or "")
    return int(m.group(1)) if m else 0


def read_gpu_variable(var) -> np.ndarray:
    """The value of a GPU variable (a cffi ``flowc_var *``) as a numpy array (a device to
    host copy); call with the variable's context entered."""
    from runtime.dtypes import DType
    if not simulated():
        import pycuda.driver as cuda
    if not var.initialized or var.value.data == ffi.NULL:
        raise FlowcError(f"variable '{ffi.string(var.name).decode()}' is not initialized")
    dtype = DType.from_code(var.value.dtype)
    shape = tuple(var.value.dims[k] for k in range(var.value.rank))
    out = np.empty(shape, dtype.np)
    if out.nbytes and simulated():
        ffi.memmove(ffi.from_buffer(out), var.value.data, out.nbytes)
    elif out.nbytes:
        cuda.memcpy_dtoh(out, int(ffi.cast("uintptr_t", var.value.data)))
    return out


def release_gpu_variable(module: CudaModule, var) -> None:
    """Free a GPU variable's device buffer (the runtime must not ``free()`` it)."""
    module.lib.flowc_cuda_var_release(var)
