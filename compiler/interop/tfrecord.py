"""TFRecord files read record by record (TensorFlow's ``io/record_reader.cc`` framing, which
event files use): each record is its length (uint64, little-endian), the masked CRC32-C of
those 8 bytes, the data, and the masked CRC32-C of the data. Both checksums are verified; a
truncated or damaged record is a ``DataLossError`` naming the file and the offset, as TF's
readers report it. Used by ``fl.train.summary_iterator`` and ``fl.io.tf_record_iterator``.
"""
from __future__ import annotations

import struct
from typing import Iterator

from compiler.interop.tensor_bundle import crc32c, unmask_crc
from runtime.errors import DataLossError, NotFoundError

__all__ = ["read_records"]


def read_records(path: str) -> Iterator[bytes]:
    """The records of the TFRecord file ``path``, in order (no compression)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise NotFoundError(f"{path}; No such file or directory") from None
    with f:
        offset = 0
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise DataLossError(f"truncated record at {offset} in {path}")
            length_bytes = header[:8]
            (length,) = struct.unpack("<Q", length_bytes)
            (length_crc,) = struct.unpack("<I", header[8:])
            if crc32c(length_bytes) != unmask_crc(length_crc):
                raise DataLossError(f"corrupted record at {offset} in {path} (its length's "
                                    "checksum does not match)")
            body = f.read(length + 4)
            if len(body) < length + 4:
                raise DataLossError(f"truncated record at {offset} in {path}")
            data = body[:length]
            (data_crc,) = struct.unpack("<I", body[length:])
            if crc32c(data) != unmask_crc(data_crc):
                raise DataLossError(f"corrupted record at {offset} in {path} (its data's "
                                    "checksum does not match)")
            yield data
            offset += 12 + length + 4
