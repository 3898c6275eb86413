"""TensorBoard event files of flowc graphs (the graph view), written with tensorboardX."""
from __future__ import annotations

import os

from compiler.interop.graphdef import graph_to_graphdef
from compiler.interop.protos import event_protos
from compiler.ir.graph import Graph


def write_graph_event(graph: Graph, logdir: str) -> str:
    """Write ``graph`` as a GraphDef event into a new event file in ``logdir``; its path.

    TensorBoard groups nodes by name scope (``dense1/...``), shows devices as colours
    (``--color by device``) and each edge's shape from the ``_output_shapes`` attr.
    """
    pb = event_protos()
    from tensorboardX.writer import FileWriter
    gd = graph_to_graphdef(graph)
    before = set(os.listdir(logdir)) if os.path.isdir(logdir) else set()
    writer = FileWriter(logdir, filename_suffix=".flowc-graph")
    try:
        writer.add_event(pb.event_pb2.Event(graph_def=gd.SerializeToString()))
    finally:
        writer.close()
    new = sorted(set(os.listdir(logdir)) - before)
    return os.path.join(logdir, new[-1]) if new else logdir
