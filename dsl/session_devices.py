"""The devices an ``fl.Session`` places on: its CPUs, and the GPUs this process can host.

As in TensorFlow, a session on a machine with a GPU (and pycuda) gets ``/device:GPU:k``
beside its CPUs, and the GPU becomes the default device: every op with a GPU kernel that the
user did not pin goes there, the rest stay on ``CPU:0``. ``ConfigProto(device_count={"GPU":
0})`` turns GPUs off; without pycuda or a GPU nothing changes (a request for a GPU then falls
back to a CPU under ``allow_soft_placement``, and is an error naming the node without it).

A variable lives on one device for the whole session: a variable whose ops include one
without a GPU kernel anywhere in the graph stays on the CPU (``variables_kept_off_the_gpu``);
otherwise the first step that uses it places it, and later steps ask for that device
(``variable_pins``), so a step that would have put it elsewhere moves its other ops instead
of the variable.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Dict, List, Optional, Sequence

from compiler.devices import local_devices
from compiler.options import resolve_options
from compiler.ir.graph import Graph
from compiler.options import PipelineOptions
from compiler.ops.state import variable_key


def requested_gpu_count(config) -> Optional[int]:
    """How many GPUs ``config`` allows (``device_count={"GPU": n}``); None: all of them."""
    if config is None or "GPU" not in (config.device_count or {}):
        return None
    n = int(config.device_count["GPU"])
    if n < 0:
        raise ValueError(f"device_count GPU must be at least 0, got {n}")
    return n


def session_gpus(config=None) -> List[str]:
    """The ``/device:GPU:k`` names a local session hosts: those the runtime finds (none
    without pycuda or a GPU), at most ``device_count["GPU"]`` of them."""
    limit = requested_gpu_count(config)
    if limit == 0:
        return []
    gpus = list(_detected_gpus())
    return gpus if limit is None else gpus[:limit]


@functools.lru_cache(maxsize=1)
def _detected_gpus() -> tuple:
    """The process's GPUs, asked of the driver once (it imports pycuda only if installed)."""
    from runtime.cuda_module import gpu_devices
    return tuple(gpu_devices())


def placement_options(options: PipelineOptions, gpus: Sequence[str]) -> PipelineOptions:
    """``options`` with ``gpus`` added to the devices and the first GPU made the default
    device (unchanged without GPUs, or where the options name the devices themselves)."""
    if not gpus or options.devices:
        return options
    cpus = [d.name for d in local_devices(cpus=max(1, resolve_options(options).cpu_devices))]
    return dataclasses.replace(options, devices=tuple(cpus) + tuple(gpus),
                               default_device=options.default_device or gpus[0])


def variable_pins(graph: Graph, placed: Dict[str, str],
                  off_gpu: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The device to ask of each variable handle of ``graph`` (node name -> device) in a step
    (``StepRequest.devices``): where an earlier step placed it (``placed``: its shared name ->
    device), where the user did not ask for one; a variable in ``off_gpu``
    (``variables_kept_off_the_gpu``) goes to its CPU even where the user asked for a GPU
    (the soft placement every step would make for part of its ops anyway)."""
    off_gpu = off_gpu or {}
    pins: Dict[str, str] = {}
    if not placed and not off_gpu:
        return pins
    for n in graph:
        if n.op != "VarHandleOp":
            continue
        key = variable_key(n)
        if key in off_gpu and (not n.device or "GPU" in n.device.upper()):
            pins[n.name] = off_gpu[key]
        elif not n.device and placed.get(key):
            pins[n.name] = placed[key]
    return pins


def pin_variables(graph: Graph, placed: Dict[str, str],
                  off_gpu: Optional[Dict[str, str]] = None) -> None:
    """Set ``variable_pins`` on ``graph``'s own nodes (a step graph made apart)."""
    for name, device in variable_pins(graph, placed, off_gpu).items():
        graph.node(name).device = device


def variables_kept_off_the_gpu(graph: Graph, cpu: str) -> Dict[str, str]:
    """Variables of the whole ``graph`` that must live on ``cpu`` (shared name -> ``cpu``):
    their colocation group has an op without a GPU kernel
    (``compiler.passes.place.variables_without_gpu_kernels``)."""
    from compiler.passes.place import variables_without_gpu_kernels
    return {variable_key(n): cpu for n in variables_without_gpu_kernels(graph)}


def variable_devices(graph: Graph) -> Dict[str, str]:
    """Each variable handle of a placed graph: its shared name -> its assigned device."""
    return {variable_key(n): n.assigned_device for n in graph
            if n.op == "VarHandleOp" and n.assigned_device}


def has_gpu_module(manifest: dict) -> bool:
    return any(d.get("kind") == "cuda" for d in manifest.get("devices") or ())
