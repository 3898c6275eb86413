"""TensorFlow's tensor-bundle checkpoints for the importers: the runtime's reader and writer
(``runtime/tensor_bundle.py``, where ``SaveV2``/``RestoreV2`` use them) plus what needs
TensorFlow's protos, the TF2 object graph of a checkpoint (``TensorBundle.object_graph``)."""
from __future__ import annotations

from runtime import tensor_bundle as _rt
from runtime.tensor_bundle import (BLOCK_TRAILER_SIZE, BUNDLE_VERSION, FOOTER_SIZE,  # noqa: F401
                                   HEADER_KEY, NO_COMPRESSION, SNAPPY_COMPRESSION, TABLE_MAGIC,
                                   BundleEntry, TensorBundleDataLossError, TensorBundleError,
                                   TensorBundleNotFoundError, _advance, _block, _block_entries,
                                   _Corrupt, _ordered_signed, _ordered_string,
                                   _ordered_unsigned, _varint, build_table, crc32c, data_file,
                                   decode_slice_key, index_file, mask_crc, read_table,
                                   unmask_crc, write_bundle_data)

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class TensorBundle(_rt.TensorBundle):
    """A tensor bundle (``runtime.tensor_bundle.TensorBundle``) with its TF2 object graph."""

    def object_graph(self):
        """The checkpoint's ``TrackableObjectGraph`` (TF2 checkpoints), or None (TF1's)."""
        if OBJECT_GRAPH_KEY not in self:
            return None
        from compiler.interop.protos import tf_protos
        from google.protobuf import message
        raw = self.read_string(OBJECT_GRAPH_KEY)
        graph = tf_protos().trackable_object_graph_pb2.TrackableObjectGraph()
        try:
            graph.ParseFromString(raw[0] if raw else b"")
        except message.DecodeError:
            raise TensorBundleDataLossError(f"{self.index_path}: {OBJECT_GRAPH_KEY} does not "
                                            "parse as a TrackableObjectGraph") from None
        return graph


def open_bundle(prefix: str) -> TensorBundle:
    """The tensor bundle at ``prefix`` (``PREFIX.index`` and its data shards)."""
    return _rt.open_bundle(prefix, TensorBundle)
