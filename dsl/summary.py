"""``fl.summary``: scalars and histograms for TensorBoard, and the ``FileWriter`` that writes them.

As in TensorFlow 1.x::

    loss_summary = fl.summary.scalar("loss", loss)
    fl.summary.histogram("weights", w)
    merged = fl.summary.merge_all()
    writer = fl.summary.FileWriter("logs/run1", graph=fl.get_default_graph())
    summary, _ = sess.run([merged, train_op], feed_dict)
    writer.add_summary(summary, step)

A summary is a fetchable of the session, like a variable or ``IndexedSlices``: running it
fetches the tensors it records, and the session hands back TensorFlow's serialized ``Summary``
protocol buffer (bytes), which ``FileWriter.add_summary`` takes. flowc has no string tensors,
so the serialization happens as the values leave the step, not in a graph kernel; the bytes are
the same as TensorFlow's ``ScalarSummary``/``HistogramSummary`` ops produce. Event files are
written by ``tensorboardX`` (the ``tensorboard`` extra).
"""
from __future__ import annotations

import re
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

from dsl.context import get_default_graph
from dsl.ops import convert_to_tensor
from dsl.tensor import Tensor, static_shape

SUMMARIES = "summaries"              # GraphKeys.SUMMARIES

_TAG_CHARS = re.compile(r"[^A-Za-z0-9_./\-]")

__all__ = ["scalar", "histogram", "merge", "merge_all", "FileWriter", "SummaryValue",
           "summary_iterator"]


class SummaryValue:
    """What ``scalar``, ``histogram`` and ``merge`` return: tagged tensors to fetch together.

    ``sess.run`` of it returns the serialized ``Summary`` protocol buffer (bytes).
    """

    def __init__(self, entries: Sequence[Tuple[str, str, Tensor]]):
        self.entries = list(entries)          # (kind, tag, tensor)

    def _session_fetch(self):
        """The session's fetch conversion: the tensors to fetch, and what to make of them."""
        return [t for _, _, t in self.entries], self._serialize

    def _serialize(self, values: List[np.ndarray]) -> bytes:
        from compiler.interop.protos import event_protos
        pb = event_protos()
        out = pb.summary_pb2.Summary()
        for (kind, tag, _), value in zip(self.entries, values):
            value = np.asarray(value)
            if kind == "scalar":
                out.value.add(tag=tag, simple_value=float(value))
            else:
                out.value.add(tag=tag).histo.CopyFrom(_histogram(value, pb))
        return out.SerializeToString()

    def __repr__(self) -> str:
        return f"<fl.summary {', '.join(tag for _, tag, _ in self.entries)}>"


def _bucket_limits() -> np.ndarray:
    """TensorFlow's default histogram bucket edges: +-1e-12 * 1.1**k up to 1e20, and 0."""
    pos = [1e-12]
    while pos[-1] < 1e20:
        pos.append(pos[-1] * 1.1)
    pos = np.array(pos)
    return np.concatenate([-pos[::-1], [0.0], pos, [np.finfo(np.float64).max]])


_LIMITS = _bucket_limits()


def _histogram(value: np.ndarray, pb):
    """A ``HistogramProto`` of ``value`` as TensorFlow's histogram summary builds it (NaN and
    Inf left out; only the buckets that hold values are written)."""
    v = value.astype(np.float64).reshape(-1)
    v = v[np.isfinite(v)]
    h = pb.summary_pb2.HistogramProto()
    if v.size == 0:
        return h
    h.min, h.max, h.num = float(v.min()), float(v.max()), float(v.size)
    h.sum, h.sum_squares = float(v.sum()), float(np.dot(v, v))
    index = np.searchsorted(_LIMITS, v, side="left")        # first edge >= value
    counts = np.bincount(index, minlength=len(_LIMITS))
    for i in np.nonzero(counts)[0]:
        h.bucket_limit.append(float(_LIMITS[i]))
        h.bucket.append(float(counts[i]))
    return h


def _tag(name: str) -> str:
    scope = get_default_graph().current_name_scope.rstrip("/")
    tag = f"{scope}/{name}" if scope else name
    return _TAG_CHARS.sub("_", tag)


def _add(kind: str, name: str, tensor, collections: Optional[Iterable[str]]) -> SummaryValue:
    t = convert_to_tensor(tensor)
    if kind == "scalar" and static_shape(t) is not None and static_shape(t) != ():
        from compiler.errors import ShapeError
        raise ShapeError(f"fl.summary.scalar('{name}') needs a scalar, got {t.output.type}",
                         t.output.node)
    if not (t.dtype.is_floating or t.dtype.is_integer or t.dtype.ir_name == "bool"):
        raise TypeError(f"fl.summary.{kind}('{name}'): cannot summarize a {t.dtype} tensor")
    value = SummaryValue([(kind, _tag(name), t)])
    graph = get_default_graph()
    for c in (collections if collections is not None else [SUMMARIES]):
        graph.add_to_collection(c, value)
    return value


def scalar(name: str, tensor, collections: Optional[Iterable[str]] = None) -> SummaryValue:
    """Record a scalar (loss, accuracy, learning rate) under ``name`` in the current scope."""
    return _add("scalar", name, tensor, collections)


def histogram(name: str, values, collections: Optional[Iterable[str]] = None) -> SummaryValue:
    """Record the distribution of ``values`` (any shape; NaN and Inf left out)."""
    return _add("histogram", name, values, collections)


def merge(summaries: Sequence[SummaryValue]) -> SummaryValue:
    """One summary holding all of ``summaries`` (fetched in one run)."""
    entries = []
    for s in summaries:
        if not isinstance(s, SummaryValue):
            raise TypeError(f"fl.summary.merge: {s!r} is not a summary")
        entries.extend(s.entries)
    return SummaryValue(entries)


def merge_all(key: str = SUMMARIES) -> Optional[SummaryValue]:
    """Every summary in collection ``key`` merged; None when there are none (as in TF)."""
    found = get_default_graph().get_collection(key)
    return merge(found) if found else None


class FileWriter:
    """Writes summaries and the graph to an event file in ``logdir`` for TensorBoard."""

    def __init__(self, logdir: str, graph=None, flush_secs: int = 120, filename_suffix: str = ""):
        from compiler.interop.protos import event_protos
        event_protos()                         # a clear error when tensorboardX is missing
        from tensorboardX.writer import FileWriter as _TbxFileWriter
        self.logdir = logdir
        self._writer = _TbxFileWriter(logdir, flush_secs=flush_secs,
                                      filename_suffix=filename_suffix)
        if graph is not None:
            self.add_graph(graph)

    def add_summary(self, summary, global_step: Optional[int] = None) -> None:
        """Add a fetched summary (bytes) or a ``Summary`` proto at ``global_step``."""
        from compiler.interop.protos import event_protos
        if isinstance(summary, (bytes, bytearray)):
            proto = event_protos().summary_pb2.Summary()
            proto.ParseFromString(bytes(summary))
            summary = proto
        self._writer.add_summary(summary, None if global_step is None else int(global_step))

    def add_scalar(self, tag: str, value: float, global_step: Optional[int] = None) -> None:
        """Add one scalar computed outside the graph (e.g. steps per second)."""
        from compiler.interop.protos import event_protos
        proto = event_protos().summary_pb2.Summary()
        proto.value.add(tag=tag, simple_value=float(value))
        self.add_summary(proto, global_step)

    def add_graph(self, graph) -> None:
        """Add the graph for TensorBoard's graph view (name scopes and devices shown)."""
        from compiler.interop.graphdef import graph_to_graphdef
        from compiler.interop.protos import event_protos
        g = getattr(graph, "graph", graph)       # a dsl Graph wraps the IR graph
        gd = graph_to_graphdef(g)
        self._writer.add_event(event_protos().event_pb2.Event(graph_def=gd.SerializeToString()))

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def summary_iterator(path: str):
    """The ``Event`` protocol buffers of the event file ``path`` (``tf.train.summary_iterator``):
    one written by ``FileWriter`` or by TensorFlow, each with ``.step``, ``.wall_time``,
    ``.file_version``, ``.graph_def`` and ``.summary.value[i].tag`` / ``.simple_value`` /
    ``.histo``. A damaged or truncated record raises ``DataLossError``."""
    from compiler.interop.protos import event_protos
    from compiler.interop.tfrecord import read_records
    pb = event_protos().event_pb2
    for record in read_records(str(path)):
        event = pb.Event()
        event.ParseFromString(record)
        yield event
