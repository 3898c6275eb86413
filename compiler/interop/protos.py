"""TensorFlow's graph and event protobufs, as the tensorboardX package ships them.

flowc reads and writes ``GraphDef`` and TensorBoard event files without TensorFlow: the
``tensorboardX`` package carries compiled copies of TensorFlow's ``graph.proto``,
``node_def.proto``, ``attr_value.proto``, ``tensor.proto`` and ``event.proto`` (the `tensorboard`
extra installs it). This module is the one place that imports them, with a clear error when the
package is missing.
"""
from __future__ import annotations

from types import SimpleNamespace

from runtime.errors import FlowcError

INSTALL_HINT = "pip install 'flowc[tensorboard]' (or: pip install tensorboardX)"


class InteropUnavailable(FlowcError):
    """An optional package needed for this format is not installed."""


def tf_protos() -> SimpleNamespace:
    """The protobuf modules: ``graph_pb2``, ``node_def_pb2``, ``attr_value_pb2``, ``tensor_pb2``,
    ``tensor_shape_pb2``, ``types_pb2``, ``event_pb2``, ``summary_pb2``, ``versions_pb2``."""
    try:
        from tensorboardX.proto import (attr_value_pb2, event_pb2, graph_pb2, node_def_pb2,
                                        summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2,
                                        versions_pb2)
    except ImportError as e:
        raise InteropUnavailable(f"TensorFlow's protobufs are not available ({e}); install "
                                 f"them with: {INSTALL_HINT}") from None
    return SimpleNamespace(attr_value_pb2=attr_value_pb2, event_pb2=event_pb2,
                           graph_pb2=graph_pb2, node_def_pb2=node_def_pb2,
                           summary_pb2=summary_pb2, tensor_pb2=tensor_pb2,
                           tensor_shape_pb2=tensor_shape_pb2, types_pb2=types_pb2,
                           versions_pb2=versions_pb2)
