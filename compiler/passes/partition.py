"""partition: cut a placed graph into per-device subgraphs joined by ``_Send``/``_Recv``.

Every data edge whose ends are on different devices becomes ``producer -> _Send`` on the
source device and ``_Recv -> consumer`` on the destination, with one ``_Send``/``_Recv`` pair
per (tensor, destination device) however many consumers read it there; a small constant is
copied to the destination instead (``COPY_CONSTANT_BYTES``), so it stays a compile-time
constant there. A control edge across
devices is carried by a dummy scalar: a ``Const`` on the source device that waits for the
producer, sent to the destination, whose ``_Recv`` becomes the consumer's control input. The
pairs are numbered (``slot``): the index of their entry in the step's rendezvous.

The graph stays one graph (each node keeps its device); ``split_by_device`` gives the
subgraph of each device, which is what code generation compiles and what
``flowc ir --after partition`` prints, one graph per device.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

from compiler.errors import GraphError
from compiler.ir.frames import check_loops_on_one_device
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.types import TensorType
from compiler.passes.manager import Pass, PassContext, register_pass
from runtime.dtypes import DType


# A constant read on another device is copied there when it is at most this many bytes (a
# shape, an axis, a scalar): the consumer keeps a compile-time constant (a reduction's axes,
# a gather's axis must be one) and no step sends it. Larger ones are sent.
COPY_CONSTANT_BYTES = 4096


def _copyable(node: Node) -> bool:
    if node.op != "Const" or node.control_inputs:
        return False
    value = node.attrs.get("value")
    return isinstance(value, np.ndarray) and value.nbytes <= COPY_CONSTANT_BYTES


def _name(out: Output) -> str:
    return out.node.name + (f"_{out.index}" if out.index else "")


def device_label(device: str) -> str:
    """``cpu_1`` for ``/job:localhost/.../device:CPU:1`` (file and graph names)."""
    tail = device.rsplit("/device:", 1)[-1] if "/device:" in device else device
    prefix = ""
    if "/task:" in device and not device.startswith("/job:localhost/"):
        job = device.split("/job:", 1)[1].split("/", 1)[0]
        task = device.split("/task:", 1)[1].split("/", 1)[0]
        prefix = f"{job}_{task}_"
    return (prefix + tail.replace(":", "_")).lower()


@register_pass("partition")
class Partition(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        devices = {n.assigned_device for n in graph}
        if "" in devices:
            unplaced = next(n for n in graph if not n.assigned_device)
            raise GraphError("partition needs every node placed (run the place pass first)",
                             unplaced)
        if len(devices) <= 1:
            return False
        check_loops_on_one_device(list(graph))
        slot = 0
        received: Dict[Tuple[Output, str], Output] = {}
        controls: Dict[Tuple[Node, str], Node] = {}
        for node in list(graph):
            if node.op in ("_Send", "_Recv"):
                continue
            dst = node.assigned_device
            inputs = list(node.inputs)
            for k, inp in enumerate(inputs):
                if inp.node.assigned_device == dst:
                    continue
                key = (inp, dst)
                if key not in received:
                    if _copyable(inp.node):
                        received[key] = self._copy(graph, inp.node, node, dst)
                    else:
                        received[key] = self._pair(graph, inp, node, dst, slot)
                        slot += 1
                node.set_input(k, received[key])
            for c in list(node.control_inputs):
                if c.assigned_device == dst:
                    continue
                key = (c, dst)
                if key not in controls:
                    controls[key] = self._control_pair(graph, c, node, dst, slot)
                    slot += 1
                node.remove_control_input(c)
                node.add_control_input(controls[key])
        ctx.rendezvous_slots = slot
        return True

    @staticmethod
    def _copy(graph: Graph, const: Node, consumer: Node, dst: str) -> Output:
        """A copy of the small constant ``const`` on ``dst``, before ``consumer``."""
        with graph.inserting_before(consumer):
            copy = graph.add_node("Const", [], dict(const.attrs),
                                  name=graph.unique_name(f"{const.name}/{device_label(dst)}"),
                                  output_types=list(const.output_types),
                                  location=const.location)
        copy.assigned_device = dst
        return copy.output(0)

    @staticmethod
    def _pair(graph: Graph, src: Output, consumer: Node, dst: str, slot: int) -> Output:
        sender = src.node.assigned_device
        tensor_name = f"edge_{slot}_{_name(src)}"
        common = {"tensor_name": tensor_name, "send_device": sender, "recv_device": dst,
                  "slot": slot}
        with graph.inserting_after(src.node):
            send = graph.add_node("_Send", [src], dict(common, T=src.dtype),
                                  name=f"{_name(src)}/_send_{slot}", location=src.node.location)
        send.assigned_device = sender
        with graph.inserting_before(consumer):
            recv = graph.add_node("_Recv", [], dict(common, tensor_type=src.dtype,
                                                    shape=src.shape),
                                  name=f"{_name(src)}/_recv_{slot}", output_types=[src.type],
                                  location=src.node.location)
        recv.assigned_device = dst
        return recv.output(0)

    @staticmethod
    def _control_pair(graph: Graph, src: Node, consumer: Node, dst: str, slot: int) -> Node:
        sender = src.assigned_device
        tensor_name = f"edge_{slot}_{src.name}_control"
        common = {"tensor_name": tensor_name, "send_device": sender, "recv_device": dst,
                  "slot": slot}
        with graph.inserting_after(src):
            dummy = graph.add_node("Const", [], {"dtype": DType.bool, "value": np.array(True)},
                                   name=f"{src.name}/_control_{slot}",
                                   output_types=[TensorType(DType.bool, ())],
                                   control_inputs=[src], location=src.location)
            dummy.assigned_device = sender
            send = graph.add_node("_Send", [dummy.output(0)], dict(common, T=DType.bool),
                                  name=f"{src.name}/_send_{slot}", location=src.location)
            send.assigned_device = sender
        with graph.inserting_before(consumer):
            recv = graph.add_node("_Recv", [], dict(common, tensor_type=DType.bool, shape=()),
                                  name=f"{src.name}/_recv_{slot}",
                                  output_types=[TensorType(DType.bool, ())], location=src.location)
        recv.assigned_device = dst
        return recv


def split_by_device(graph: Graph) -> Dict[str, Graph]:
    """The subgraph of each device of a partitioned graph (device order: as first placed)."""
    devices: List[str] = []
    for n in graph:
        if n.assigned_device not in devices:
            devices.append(n.assigned_device)
    if len(devices) == 1:
        return {devices[0]: graph}
    return {dev: subgraph(graph, f"{graph.name}.{device_label(dev)}",
                          lambda n, dev=dev: n.assigned_device == dev)
            for dev in devices}


def subgraph(graph: Graph, name: str, keep) -> Graph:
    """A copy of ``graph`` with only the nodes ``keep(node)`` holds for; an edge from a kept
    node to a dropped one is an error (the partition pass puts a _Send/_Recv pair there).
    The dropped nodes are cut loose first, so a loop's back edges among them do not stop
    their removal."""
    g, _ = graph.copy(name=name)
    drop = [n for n in g if not keep(n)]
    for n in drop:
        for i in n.inputs:
            if keep(i.node):
                raise GraphError(f"edge from '{i.node.name}' on {i.node.assigned_device} to "
                                 f"'{n.name}' on {n.assigned_device} was not partitioned", n)
    for n in drop:
        n.set_inputs([])
        n.set_control_inputs([])
    for n in drop:
        g.erase_node(n)
    return g
