"""The protobuf message classes of TensorFlow's formats that flowc reads and writes.

- ``tf_protos()``: GraphDef (with its function library), NodeDef, AttrValue, TensorProto,
  MetaGraphDef, SavedModel, the tensor-bundle checkpoint index and the object graphs, from
  flowc's own description of those wire formats (``tf_formats/tf_formats.proto``). They need
  only the ``protobuf`` package, not TensorFlow.
- ``event_protos()``: TensorBoard's ``Event`` and ``Summary``, as the ``tensorboardX`` package
  ships them (its event writer takes its own classes).

This module is the one place that imports them, with a clear error when a package is missing.
"""
from __future__ import annotations

from types import SimpleNamespace

from runtime.errors import FlowcError

TENSORBOARD_HINT = "pip install 'flowc[tensorboard]' (or: pip install tensorboardX)"
PROTOBUF_HINT = "pip install 'flowc[tensorflow]' (or: pip install protobuf)"

# the historical module names of TensorFlow's protos, all served by the one module
_FORMAT_MODULES = ("graph_pb2", "node_def_pb2", "attr_value_pb2", "tensor_pb2",
                   "tensor_shape_pb2", "types_pb2", "versions_pb2", "function_pb2",
                   "op_def_pb2", "meta_graph_pb2", "saved_model_pb2", "saver_pb2",
                   "tensor_bundle_pb2", "trackable_object_graph_pb2", "formats")


class InteropUnavailable(FlowcError):
    """An optional package needed for this format is not installed."""


def tf_protos() -> SimpleNamespace:
    """TensorFlow's format messages: ``pb.GraphDef``, ``pb.SavedModel``, ... (also reachable
    by TensorFlow's module names, ``pb.graph_pb2.GraphDef``, ``pb.tensor_pb2.TensorProto``)."""
    try:
        from compiler.interop.tf_formats import tf_formats_pb2
    except ImportError as e:
        raise InteropUnavailable(f"the protobuf package is not available ({e}); install it "
                                 f"with: {PROTOBUF_HINT}") from None
    names = {name: tf_formats_pb2 for name in _FORMAT_MODULES}
    names.update({name: getattr(tf_formats_pb2, name)
                  for name in tf_formats_pb2.DESCRIPTOR.message_types_by_name})
    names["DataType"] = tf_formats_pb2.DataType
    return SimpleNamespace(**names)


def event_protos() -> SimpleNamespace:
    """TensorBoard's ``event_pb2`` and ``summary_pb2`` modules (tensorboardX's copies)."""
    try:
        from tensorboardX.proto import event_pb2, summary_pb2
    except ImportError as e:
        raise InteropUnavailable(f"TensorBoard's protobufs are not available ({e}); install "
                                 f"them with: {TENSORBOARD_HINT}") from None
    return SimpleNamespace(event_pb2=event_pb2, summary_pb2=summary_pb2)
