"""What ``--target cuda`` means for the pipeline: the process gets ``/device:GPU:0`` beside its
CPUs and unconstrained ops default to the GPU (TensorFlow puts an op on a GPU when it has a GPU
kernel); ops without a GPU kernel stay on ``CPU:0`` and the placement report says so. nvcc and
the architecture are checked first, so a missing toolkit is one clear error (the CUDA
simulator's architecture, ``sim``, needs no nvcc)."""
from __future__ import annotations

import dataclasses
from typing import Optional

from compiler.codegen.cuda_build import SIMULATED_ARCH, cuda_arch, require_nvcc
from compiler.devices import local_devices
from compiler.options import PipelineOptions
from compiler.options import resolve_options


def cuda_target_options(options: PipelineOptions, arch: Optional[str] = None) -> PipelineOptions:
    """``options`` with one GPU device added and made the default device."""
    if cuda_arch(arch) != SIMULATED_ARCH:         # the simulator's build needs no nvcc
        require_nvcc()
    resolved = resolve_options(options)
    devices = list(resolved.devices) or [d.name for d in local_devices(
        cpus=max(1, resolved.cpu_devices))]
    gpus = [d for d in devices if "/device:GPU:" in d]
    if not gpus:
        gpu = local_devices(cpus=1, gpus=1)[-1].name
        devices.append(gpu)
        gpus = [gpu]
    return dataclasses.replace(options, devices=tuple(devices),
                               default_device=options.default_device or gpus[0])
