"""TensorFlow's tensor-bundle checkpoints, read and written without TensorFlow.

A SavedModel keeps its weights in ``variables/`` as a *tensor bundle* (the format of
``tf.train.Checkpoint`` and of TF1's ``Saver`` V2), named by a prefix
(``saved_model/variables/variables``):

- ``PREFIX.index``: a LevelDB-format SSTable mapping each key (a checkpoint key, sorted
  bytewise) to a serialized ``BundleEntryProto`` (dtype, shape, data shard, offset, size and the
  masked CRC32-C of the tensor's bytes); the key ``""`` holds the ``BundleHeaderProto`` (number
  of data shards, endianness, format version);
- ``PREFIX.data-00000-of-0000N``: the tensors' raw bytes, each at its entry's offset (string
  tensors: varint64 lengths, a masked CRC32-C of the lengths, then the bytes).

The table (TensorFlow's ``core/lib/io/table``, LevelDB's format): the file ends in a 48-byte
footer (the metaindex and index block handles as varint64 offset/size pairs, zero padding,
the magic number ``0xdb4775248b80fb57``); the index block maps the last key of each data block
to its handle; each block is followed by a 5-byte trailer (compression type, masked CRC32-C of
the block and its type byte). A block holds prefix-compressed entries (varint32 shared key
length, unshared length and value length, the unshared key bytes, the value), with an array
of uint32 *restart points* (offsets of entries stored with their whole key) and their count at
its end. TensorFlow's bundle writer never compresses the index (``kNoCompression``, kept so
that older releases can read it), so a snappy-compressed block is refused by name.

Every check TensorFlow's ``BundleReader`` makes is made here, and each failure is a
``TensorBundleError`` naming the file: a missing index or data shard (``NotFound``), a
truncated or damaged file, a checksum mismatch, an entry whose size does not match its dtype
and shape (``DataLoss``), a format version newer than this reader. Nothing is returned before
its bytes are verified.

``write_bundle`` writes what TensorFlow's ``BundleWriter`` writes for the same tensors, byte
for byte (tensors in key order in one data shard, the index table with TensorFlow's block
size, restart interval and index keys), so TensorFlow's ``Saver`` restores it. The two small
protos (``BundleHeaderProto``, ``BundleEntryProto``) are encoded and decoded here by hand, so
the runtime needs no protobuf.

CRC32-C (Castagnoli) is computed with numpy: the data is cut into equal chunks whose CRCs
advance together, one byte of every chunk per step, and are then combined (a CRC is linear:
``crc(A + B)`` is ``crc(A)`` advanced over ``len(B)`` zero bytes, xor ``crc(B)``).
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Sequence, Tuple

import numpy as np

from runtime.dtypes import DType
from runtime.errors import FlowcError

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48                 # two block handles (at most 20 bytes each), padding, magic
BLOCK_TRAILER_SIZE = 5           # compression type, masked CRC32-C
NO_COMPRESSION, SNAPPY_COMPRESSION = 0, 1
HEADER_KEY = b""
BUNDLE_VERSION = 1               # TensorFlow's kTensorBundleVersion: the newest format it writes

# DataType enum values (types.proto) of the dtypes a bundle entry can be read as.
_DTYPES = {1: DType.f32, 2: DType.f64, 3: DType.i32, 4: DType.u8, 5: DType.i16, 6: DType.i8,
           9: DType.i64, 10: DType.bool, 14: DType.bf16, 17: DType.u16, 19: DType.f16,
           22: DType.u32, 23: DType.u64}
_DT_STRING = 7
_DT_NAMES = {7: "DT_STRING", 8: "DT_COMPLEX64", 18: "DT_COMPLEX128", 20: "DT_RESOURCE",
             21: "DT_VARIANT"}


class TensorBundleError(FlowcError):
    """A tensor bundle that cannot be read: missing, truncated, damaged or of a newer format."""


class TensorBundleNotFoundError(TensorBundleError):
    """The index, a data shard or a key is not there."""


class TensorBundleDataLossError(TensorBundleError):
    """A file is truncated or damaged (a checksum or a size does not match)."""


# --- CRC32-C ---------------------------------------------------------------------------------
_POLY = 0x82F63B78               # Castagnoli, bit-reflected


def _byte_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1).astype(np.uint32)
    return table


_TABLE = _byte_table()
_TABLE_LIST = [int(v) for v in _TABLE]
_LANES = 4096                    # chunks advanced together
_SMALL = 1 << 16                 # below this, byte by byte


def _advance(crc: int, data: bytes) -> int:
    """The raw register (no inversion) after ``data``, byte by byte."""
    table = _TABLE_LIST
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def _zeros_operator(n: int) -> List[int]:
    """The linear map that advances the register over ``n`` zero bytes, as the images of the
    32 basis vectors (matrix powers by squaring)."""
    def apply(m: List[int], x: int) -> int:
        out, k = 0, 0
        while x:
            if x & 1:
                out ^= m[k]
            x >>= 1
            k += 1
        return out

    one = [_advance(1 << k, b"\0") for k in range(32)]
    result = [1 << k for k in range(32)]
    while n:
        if n & 1:
            result = [apply(one, v) for v in result]
        n >>= 1
        if n:
            one = [apply(one, v) for v in one]
    return result


def _byte_tables(m: List[int]) -> List[List[int]]:
    """``m`` as four 256-entry tables, one per byte of the register (four look-ups apply it)."""
    tables = []
    for shift in (0, 8, 16, 24):
        t = [0] * 256
        for b in range(256):
            v, x, k = 0, b << shift, 0
            while x:
                if x & 1:
                    v ^= m[k]
                x >>= 1
                k += 1
            t[b] = v
        tables.append(t)
    return tables


def crc32c(data, crc: int = 0) -> int:
    """CRC32-C of ``data`` (bytes-like), continuing from ``crc`` (the CRC of what came before)."""
    view = memoryview(data).cast("B")
    n = len(view)
    reg = crc ^ 0xFFFFFFFF
    if n < _SMALL:
        return _advance(reg, view) ^ 0xFFFFFFFF
    chunk = n // _LANES
    body = np.frombuffer(view[:chunk * _LANES], dtype=np.uint8).reshape(_LANES, chunk)
    steps = np.ascontiguousarray(body.T)             # row j: byte j of every chunk
    regs = np.zeros(_LANES, dtype=np.uint32)
    regs[0] = reg
    table = _TABLE
    for row in steps:
        regs = table[(regs ^ row) & 0xFF] ^ (regs >> 8)
    t0, t1, t2, t3 = _byte_tables(_zeros_operator(chunk))
    reg = 0
    for r in regs.tolist():                          # crc(A + B) = shift(crc(A)) ^ crc(B)
        reg = (t0[reg & 0xFF] ^ t1[(reg >> 8) & 0xFF] ^ t2[(reg >> 16) & 0xFF]
               ^ t3[reg >> 24]) ^ r
    return _advance(reg, view[chunk * _LANES:]) ^ 0xFFFFFFFF


_MASK_DELTA = 0xA282EAD8


def mask_crc(crc: int) -> int:
    """LevelDB's masked CRC (stored CRCs are masked so that a CRC of CRCs stays useful)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


# --- the SSTable ------------------------------------------------------------------------------
def _varint(buf, pos: int, limit: int, what: str, bits: int = 64) -> Tuple[int, int]:
    result, shift = 0, 0
    while pos < limit and shift < bits:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise _Corrupt(f"bad varint in {what}")


class _Corrupt(Exception):
    """A structural problem; the reader adds the file name."""


def read_table(path: str) -> List[Tuple[bytes, bytes]]:
    """Every (key, value) of the SSTable at ``path``, in key order."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise TensorBundleNotFoundError(f"{path}: no such file") from None
    except OSError as e:
        raise TensorBundleError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return list(_table_entries(data))
    except _Corrupt as e:
        raise TensorBundleDataLossError(f"{path}: not a readable tensor-bundle index "
                                        f"(truncated or damaged): {e}") from None


def _table_entries(data: bytes) -> Iterator[Tuple[bytes, bytes]]:
    if len(data) < FOOTER_SIZE:
        raise _Corrupt(f"{len(data)} bytes, shorter than a table footer ({FOOTER_SIZE})")
    footer = data[-FOOTER_SIZE:]
    (magic,) = struct.unpack("<Q", footer[-8:])
    if magic != TABLE_MAGIC:
        raise _Corrupt("no table magic number at its end")
    pos = 0
    _meta_off, pos = _varint(footer, pos, 40, "the footer")
    _meta_size, pos = _varint(footer, pos, 40, "the footer")
    index_off, pos = _varint(footer, pos, 40, "the footer")
    index_size, pos = _varint(footer, pos, 40, "the footer")
    limit = len(data) - FOOTER_SIZE
    index = _block(data, index_off, index_size, limit, "the index block")
    last = None
    for handle_key, handle in _block_entries(index, "the index block"):
        off, p = _varint(handle, 0, len(handle), "a block handle")
        size, _ = _varint(handle, p, len(handle), "a block handle")
        block = _block(data, off, size, limit, f"the data block at offset {off}")
        for key, value in _block_entries(block, f"the data block at offset {off}"):
            if last is not None and key <= last:
                raise _Corrupt(f"keys out of order at {key!r}")
            if key > handle_key:
                raise _Corrupt(f"key {key!r} past its block's index key")
            last = key
            yield key, value


def _block(data: bytes, off: int, size: int, limit: int, what: str) -> bytes:
    end = off + size + BLOCK_TRAILER_SIZE
    if off < 0 or end > limit:
        raise _Corrupt(f"{what} ({size} bytes at offset {off}) runs past the end of the file")
    contents = data[off:off + size]
    kind = data[off + size]
    (stored,) = struct.unpack("<I", data[off + size + 1:end])
    if crc32c(data[off:off + size + 1]) != unmask_crc(stored):
        raise _Corrupt(f"checksum mismatch in {what}")
    if kind == SNAPPY_COMPRESSION:
        raise _Corrupt(f"{what} is snappy-compressed, which TensorFlow's bundle writer never "
                       "does; flowc reads uncompressed indexes only")
    if kind != NO_COMPRESSION:
        raise _Corrupt(f"{what} has unknown compression type {kind}")
    return contents


def _block_entries(block: bytes, what: str) -> Iterator[Tuple[bytes, bytes]]:
    if len(block) < 4:
        raise _Corrupt(f"{what} is too short")
    (restarts,) = struct.unpack("<I", block[-4:])
    end = len(block) - 4 - 4 * restarts
    if restarts < 1 or end < 0:
        raise _Corrupt(f"{what} has {restarts} restart points")
    points = struct.unpack(f"<{restarts}I", block[end:len(block) - 4])
    if any(p >= max(end, 1) for p in points) or points[0] != 0:
        raise _Corrupt(f"{what} has a restart point outside its entries")
    restart_set = set(points)
    pos, key = 0, b""
    while pos < end:
        at = pos
        shared, pos = _varint(block, pos, end, what, 32)
        unshared, pos = _varint(block, pos, end, what, 32)
        vlen, pos = _varint(block, pos, end, what, 32)
        if shared > len(key) or pos + unshared + vlen > end:
            raise _Corrupt(f"a bad entry in {what} at offset {at}")
        if at in restart_set and shared:
            raise _Corrupt(f"the entry at restart point {at} of {what} shares its key")
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        yield key, block[pos:pos + vlen]
        pos += vlen


# --- slice keys (TensorFlow's OrderedCode) -----------------------------------------------------
def _ordered_string(key: bytes, pos: int) -> Tuple[bytes, int]:
    """An OrderedCode string at ``pos``: 0x00 0xff is a 0 byte, 0xff 0x00 a 0xff byte, 0x00
    0x01 ends it."""
    out = bytearray()
    while pos < len(key):
        b = key[pos]
        if b not in (0x00, 0xFF):
            out.append(b)
            pos += 1
            continue
        pair = key[pos:pos + 2]
        if pair == b"\x00\x01":
            return bytes(out), pos + 2
        if pair not in (b"\x00\xff", b"\xff\x00"):
            break
        out.append(b)
        pos += 2
    raise _Corrupt("a slice key with a badly escaped name")


def _ordered_unsigned(key: bytes, pos: int) -> Tuple[int, int]:
    """An OrderedCode unsigned number: a length byte, then that many big-endian bytes."""
    if pos >= len(key) or key[pos] > 8 or pos + 1 + key[pos] > len(key):
        raise _Corrupt("a slice key with a bad number")
    n = key[pos]
    return int.from_bytes(key[pos + 1:pos + 1 + n], "big"), pos + 1 + n


def _ordered_signed(key: bytes, pos: int) -> Tuple[int, int]:
    """An OrderedCode signed number: the first bit is the sign (1: not negative); as many
    bits again as there are bytes after the first repeat it, then one bit of the other value;
    the rest is the number (two's complement when negative, where every bit is inverted)."""
    if pos >= len(key):
        raise _Corrupt("a slice key ends inside a number")
    negative = not key[pos] & 0x80
    head = int.from_bytes(key[pos:pos + 2].ljust(2, b"\0"), "big")
    if negative:
        head ^= 0xFFFF
    n = 0
    while n < 10 and head & (0x8000 >> n):
        n += 1
    if n < 1 or pos + n > len(key):
        raise _Corrupt("a slice key with a bad signed number")
    x = int.from_bytes(key[pos:pos + n], "big")
    if negative:
        x ^= (1 << (8 * n)) - 1
    value = x & ((1 << (8 * n - min(n + 1, 10))) - 1)
    return (~value if negative else value), pos + n


def decode_slice_key(key: bytes) -> Tuple[str, Tuple[Tuple[int, int], ...]]:
    """The tensor name and the (start, length) of each dim (length -1: the whole dim) of a
    slice's key (TensorFlow's ``EncodeTensorNameSlice``: 0, the name, the rank, then start
    and length per dim, in OrderedCode)."""
    zero, pos = _ordered_unsigned(key, 0)
    if zero != 0:
        raise _Corrupt("a slice key that does not start with 0")
    name, pos = _ordered_string(key, pos)
    rank, pos = _ordered_unsigned(key, pos)
    extents = []
    for _ in range(rank):
        start, pos = _ordered_signed(key, pos)
        length, pos = _ordered_signed(key, pos)
        extents.append((start, length))
    if pos != len(key):
        raise _Corrupt("a slice key with bytes after its extents")
    return name.decode("utf-8", errors="backslashreplace"), tuple(extents)


# --- the two protos, by hand (protobuf wire format) ----------------------------------------
# BundleHeaderProto: num_shards = 1 (int32), endianness = 2 (enum; BIG = 1), version = 3
#   (VersionDef: producer = 1, min_consumer = 2, repeated bad_consumers = 3).
# BundleEntryProto: dtype = 1 (enum), shape = 2 (TensorShapeProto: repeated dim = 2
#   {size = 1, name = 2}, unknown_rank = 3), shard_id = 3, offset = 4, size = 5,
#   crc32c = 6 (fixed32), repeated slices = 7 (TensorSliceProto).
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def _fields(buf: bytes, what: str) -> Iterator[Tuple[int, int, object]]:
    """(field number, wire type, value) of each field of a serialized message; a
    length-delimited value is its bytes, a fixed one its integer."""
    pos, end = 0, len(buf)
    while pos < end:
        tag, pos = _varint(buf, pos, end, what)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise _Corrupt(f"field number 0 in {what}")
        if wire == _VARINT:
            value, pos = _varint(buf, pos, end, what)
        elif wire == _FIXED64:
            if pos + 8 > end:
                raise _Corrupt(f"{what} ends inside a field")
            (value,), pos = struct.unpack_from("<Q", buf, pos), pos + 8
        elif wire == _FIXED32:
            if pos + 4 > end:
                raise _Corrupt(f"{what} ends inside a field")
            (value,), pos = struct.unpack_from("<I", buf, pos), pos + 4
        elif wire == _BYTES:
            n, pos = _varint(buf, pos, end, what)
            if pos + n > end:
                raise _Corrupt(f"{what} ends inside a field")
            value, pos = bytes(buf[pos:pos + n]), pos + n
        else:
            raise _Corrupt(f"wire type {wire} in {what}")
        yield number, wire, value


def decode_fields(buf: bytes, what: str = "a message") -> List[Tuple[int, int, object]]:
    """The fields of a serialized protobuf message, as (number, wire type, value); a
    ``ValueError`` naming ``what`` if it does not parse."""
    try:
        return list(_fields(buf, what))
    except _Corrupt as e:
        raise ValueError(str(e)) from None


def _signed(v: int) -> int:
    """A varint read as a two's-complement int64 (negative numbers take 10 bytes)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def _expect(wire: int, want: int, name: str, what: str) -> None:
    if wire != want:
        raise _Corrupt(f"{what}: field {name} has wire type {wire}")


def _decode_header(buf: bytes) -> dict:
    out = {"num_shards": 0, "endianness": 0, "version": (0, 0, ())}
    for number, wire, value in _fields(buf, "the header"):
        if number == 1:
            _expect(wire, _VARINT, "num_shards", "the header")
            out["num_shards"] = _signed(value)
        elif number == 2:
            _expect(wire, _VARINT, "endianness", "the header")
            out["endianness"] = value
        elif number == 3:
            _expect(wire, _BYTES, "version", "the header")
            producer = min_consumer = 0
            bad = []
            for n, w, v in _fields(value, "the header's version"):
                if n == 1 and w == _VARINT:
                    producer = _signed(v)
                elif n == 2 and w == _VARINT:
                    min_consumer = _signed(v)
                elif n == 3 and w == _VARINT:
                    bad.append(_signed(v))
                elif n == 3 and w == _BYTES:               # packed
                    p = 0
                    while p < len(v):
                        x, p = _varint(v, p, len(v), "the header's version")
                        bad.append(_signed(x))
            out["version"] = (producer, min_consumer, tuple(bad))
    return out


def _decode_shape(buf: bytes, what: str) -> Tuple[Tuple[int, ...], bool]:
    dims, unknown = [], False
    for number, wire, value in _fields(buf, what):
        if number == 2:
            _expect(wire, _BYTES, "dim", what)
            size = 0
            for n, w, v in _fields(value, what):
                if n == 1:
                    _expect(w, _VARINT, "dim.size", what)
                    size = _signed(v)
            dims.append(size)
        elif number == 3:
            _expect(wire, _VARINT, "unknown_rank", what)
            unknown = bool(value)
    return tuple(dims), unknown


def _decode_entry(buf: bytes) -> dict:
    out = {"dtype": 0, "dims": (), "unknown_rank": False, "shard_id": 0, "offset": 0,
           "size": 0, "crc32c": 0, "sliced": False}
    what = "the entry"
    for number, wire, value in _fields(buf, what):
        if number == 1:
            _expect(wire, _VARINT, "dtype", what)
            out["dtype"] = value
        elif number == 2:
            _expect(wire, _BYTES, "shape", what)
            out["dims"], out["unknown_rank"] = _decode_shape(value, "the entry's shape")
        elif number in (3, 4, 5):
            _expect(wire, _VARINT, ("shard_id", "offset", "size")[number - 3], what)
            out[("shard_id", "offset", "size")[number - 3]] = _signed(value)
        elif number == 6:
            _expect(wire, _FIXED32, "crc32c", what)
            out["crc32c"] = value
        elif number == 7:
            _expect(wire, _BYTES, "slices", what)
            out["sliced"] = True
    return out


def _put_varint(out: bytearray, v: int) -> None:
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _put_field(out: bytearray, number: int, value, wire: int = _VARINT) -> None:
    _put_varint(out, number << 3 | wire)
    if wire == _VARINT:
        _put_varint(out, value)
    elif wire == _FIXED32:
        out += struct.pack("<I", value)
    else:
        _put_varint(out, len(value))
        out += value


def encode_message(fields) -> bytes:
    """A protobuf message of ``(number, value)`` fields: str/bytes length-delimited, bool and
    int as varints."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, str):
            value = value.encode("utf-8")
        if isinstance(value, (bytes, bytearray)):
            _put_field(out, number, bytes(value), _BYTES)
        else:
            _put_field(out, number, int(value))
    return bytes(out)


def _encode_header(num_shards: int) -> bytes:
    """A little-endian bundle's header, as TensorFlow's writer sets it (proto3: zero fields
    are left out)."""
    version = bytearray()
    _put_field(version, 1, BUNDLE_VERSION)
    out = bytearray()
    _put_field(out, 1, num_shards)
    _put_field(out, 3, bytes(version), _BYTES)
    return bytes(out)


def _encode_entry(dtype: int, shape: Sequence[int], offset: int, size: int,
                  masked_crc: int, shard_id: int = 0) -> bytes:
    shape_msg = bytearray()
    for d in shape:
        dim = bytearray()
        if d:
            _put_field(dim, 1, int(d))
        _put_field(shape_msg, 2, bytes(dim), _BYTES)
    out = bytearray()
    if dtype:
        _put_field(out, 1, dtype)
    _put_field(out, 2, bytes(shape_msg), _BYTES)      # set even for a scalar, as TF does
    if shard_id:
        _put_field(out, 3, shard_id)
    if offset:
        _put_field(out, 4, offset)
    if size:
        _put_field(out, 5, size)
    if masked_crc:
        _put_field(out, 6, masked_crc, _FIXED32)
    return bytes(out)


# --- the bundle -------------------------------------------------------------------------------
@dataclass(frozen=True)
class BundleEntry:
    """Where a tensor of the bundle is and what it is (a ``BundleEntryProto``)."""
    key: str
    dtype: int                    # TensorFlow's DataType enum value
    shape: Tuple[int, ...]
    shard_id: int
    offset: int
    size: int
    crc32c: int                   # masked
    sliced: bool                  # a partitioned variable: stored as slices under other keys


def index_file(prefix: str) -> str:
    return prefix + ".index"


def data_file(prefix: str, shard: int, num_shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


class TensorBundle:
    """A tensor bundle opened by its prefix: its keys, entries and verified tensors."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.index_path = index_file(prefix)
        entries = read_table(self.index_path)
        if not entries or entries[0][0] != HEADER_KEY:
            raise TensorBundleDataLossError(f"{self.index_path}: no bundle header (the entry "
                                            "under the empty key)")
        try:
            header = _decode_header(entries[0][1])
        except _Corrupt as e:
            raise TensorBundleDataLossError(f"{self.index_path}: the bundle header does not "
                                            f"parse ({e})") from None
        producer, min_consumer, bad_consumers = header["version"]
        if producer > BUNDLE_VERSION and min_consumer > BUNDLE_VERSION:
            raise TensorBundleError(f"{self.index_path}: bundle format version "
                                    f"{producer} needs a reader of version "
                                    f"{min_consumer} or newer; flowc reads "
                                    f"version {BUNDLE_VERSION}")
        if BUNDLE_VERSION in bad_consumers:
            raise TensorBundleError(f"{self.index_path}: the bundle says readers of version "
                                    f"{BUNDLE_VERSION} must not read it")
        if header["num_shards"] < 1:
            raise TensorBundleDataLossError(f"{self.index_path}: the header gives "
                                            f"{header['num_shards']} data shards")
        self.num_shards = header["num_shards"]
        self.byteorder = ">" if header["endianness"] == 1 else "<"
        self._entries: Dict[str, BundleEntry] = {}
        self._slices: Dict[str, List[Tuple[Tuple[Tuple[int, int], ...], BundleEntry]]] = {}
        for raw_key, value in entries[1:]:
            sliced_name = None
            if raw_key[:1] == b"\0":                    # a slice of a partitioned tensor
                try:
                    sliced_name, extents = decode_slice_key(raw_key)
                except _Corrupt as e:
                    raise TensorBundleDataLossError(f"{self.index_path}: {e}") from None
                key = f"{sliced_name}{list(extents)}"
            else:
                key = raw_key.decode("utf-8", errors="backslashreplace")
            try:
                proto = _decode_entry(value)
            except _Corrupt as e:
                raise TensorBundleDataLossError(f"{self.index_path}: the entry of '{key}' does "
                                                f"not parse ({e})") from None
            dims = proto["dims"]
            if proto["unknown_rank"] or any(d < 0 for d in dims):
                raise TensorBundleDataLossError(f"{self.index_path}: '{key}' has an invalid "
                                                f"shape {list(dims)}")
            entry = BundleEntry(key, proto["dtype"], dims, proto["shard_id"], proto["offset"],
                                proto["size"], proto["crc32c"], proto["sliced"])
            if sliced_name is not None:
                self._slices.setdefault(sliced_name, []).append((extents, entry))
            else:
                self._entries[key] = entry
        self._data: Dict[int, object] = {}     # shard -> its bytes (mapped)

    def close(self) -> None:
        """Let go of the data shards mapped so far (reading maps them again)."""
        self._data.clear()

    def is_string(self, key: str) -> bool:
        """Whether tensor ``key`` is a DT_STRING tensor (``read_string`` reads it)."""
        return self.entry(key).dtype == _DT_STRING

    def keys(self) -> List[str]:
        """Every tensor's key, sorted (a partitioned tensor once, by its own key)."""
        return list(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def entry(self, key: str) -> BundleEntry:
        try:
            return self._entries[key]
        except KeyError:
            raise TensorBundleNotFoundError(f"{self.index_path}: no tensor '{key}' in the "
                                            "checkpoint") from None

    def dtype(self, key: str) -> DType:
        """The flowc dtype of a tensor (an error for dtypes flowc has no constants of)."""
        e = self.entry(key)
        if e.dtype not in _DTYPES:
            name = _DT_NAMES.get(e.dtype, f"DataType {e.dtype}")
            raise TensorBundleError(f"{self.index_path}: '{key}' is a {name} tensor; flowc "
                                    "reads numeric and bool tensors only")
        return _DTYPES[e.dtype]

    def _shard(self, shard: int):
        if shard not in self._data:
            if not 0 <= shard < self.num_shards:
                raise TensorBundleDataLossError(f"{self.index_path}: an entry names data shard "
                                                f"{shard} of {self.num_shards}")
            path = data_file(self.prefix, shard, self.num_shards)
            try:                       # mapped, not read: a model's weights can be large
                with open(path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    self._data[shard] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) \
                        if size else b""
            except FileNotFoundError:
                raise TensorBundleNotFoundError(f"{path}: no such file (data shard {shard} of "
                                                f"the checkpoint {self.index_path})") from None
            except OSError as e:
                raise TensorBundleError(f"{path}: cannot read: {e.strerror or e}") from None
        return self._data[shard]

    def _stored(self, e: BundleEntry) -> Tuple[memoryview, str]:
        """The stored bytes of an entry (not yet verified) and its data file's name."""
        data = self._shard(e.shard_id)
        path = data_file(self.prefix, e.shard_id, self.num_shards)
        if e.offset < 0 or e.size < 0 or e.offset + e.size > len(data):
            raise TensorBundleDataLossError(f"{path}: '{e.key}' ({e.size} bytes at offset "
                                            f"{e.offset}) runs past the end of the file "
                                            f"({len(data)} bytes): the file is truncated")
        return memoryview(data)[e.offset:e.offset + e.size], path

    def _mismatch(self, e: BundleEntry, path: str) -> TensorBundleDataLossError:
        return TensorBundleDataLossError(f"{path}: checksum mismatch for '{e.key}' ({e.size} "
                                         f"bytes at offset {e.offset}): the file is damaged")

    def read_bytes(self, key: str) -> bytes:
        """The stored bytes of a numeric tensor, checked against its entry's CRC32-C."""
        e = self.entry(key)
        raw, path = self._stored(e)
        if crc32c(raw) != unmask_crc(e.crc32c):
            raise self._mismatch(e, path)
        return bytes(raw)

    def read(self, key: str) -> np.ndarray:
        """The tensor ``key`` as a numpy array (its bytes verified first; a partitioned
        tensor assembled from its slices, which must cover it)."""
        e = self.entry(key)
        dtype = self.dtype(key)
        if e.sliced:
            return self._assemble(e, dtype)
        return self._read_entry(e, dtype)

    def _read_entry(self, e: BundleEntry, dtype: DType) -> np.ndarray:
        count = int(np.prod(e.shape, dtype=np.int64))
        if e.size != count * dtype.itemsize:
            raise TensorBundleDataLossError(
                f"{self.index_path}: '{e.key}' holds {e.size} bytes; {dtype}{list(e.shape)} "
                f"needs {count * dtype.itemsize}")
        raw, path = self._stored(e)
        if crc32c(raw) != unmask_crc(e.crc32c):
            raise self._mismatch(e, path)
        np_dtype = dtype.np.newbyteorder(self.byteorder)
        return np.frombuffer(raw, dtype=np_dtype).astype(dtype.np).reshape(e.shape)

    def _assemble(self, e: BundleEntry, dtype: DType) -> np.ndarray:
        out = np.zeros(e.shape, dtype=dtype.np)
        covered = np.zeros(e.shape, dtype=bool)
        for extents, part in self._slices.get(e.key, ()):
            if len(extents) != len(e.shape):
                raise TensorBundleDataLossError(f"{self.index_path}: slice {part.key} of "
                                                f"'{e.key}' has rank {len(extents)}")
            region = tuple(slice(0, dim) if length < 0 else slice(start, start + length)
                           for (start, length), dim in zip(extents, e.shape))
            want = tuple(r.stop - r.start for r in region)
            if part.dtype != e.dtype or part.shape != want or any(
                    r.start < 0 or r.stop > dim for r, dim in zip(region, e.shape)):
                raise TensorBundleDataLossError(f"{self.index_path}: slice {part.key} of "
                                                f"'{e.key}' does not fit {list(e.shape)}")
            out[region] = self._read_entry(part, dtype)
            covered[region] = True
        if not covered.all():
            raise TensorBundleDataLossError(f"{self.index_path}: the slices of '{e.key}' do "
                                            "not cover the whole tensor")
        return out

    def read_string(self, key: str) -> List[bytes]:
        """A DT_STRING tensor's elements, flattened. Stored as varint64 lengths, the masked
        CRC32-C of the lengths (each as a uint32, or a uint64 past 4 GiB), then the bytes; the
        entry's CRC covers those lengths, the stored length checksum and the bytes."""
        e = self.entry(key)
        if e.dtype != _DT_STRING:
            raise TensorBundleError(f"{self.index_path}: '{key}' is not a string tensor")
        raw, path = self._stored(e)
        count = int(np.prod(e.shape, dtype=np.int64))
        order = self.byteorder
        try:
            pos, lengths = 0, []
            for _ in range(count):
                n, pos = _varint(raw, pos, len(raw), f"'{key}'")
                lengths.append(n)
            packed = b"".join(struct.pack(order + ("I" if n <= 0xFFFFFFFF else "Q"), n)
                              for n in lengths)
            crc = crc32c(packed)
            if pos + 4 > len(raw):
                raise _Corrupt(f"'{key}' ends inside its lengths")
            (stored,) = struct.unpack(order + "I", raw[pos:pos + 4])
            if crc != unmask_crc(stored):
                raise _Corrupt(f"the lengths of '{key}' do not match their checksum")
            crc = crc32c(raw[pos:pos + 4], crc)
            pos += 4
            out = []
            for n in lengths:
                if pos + n > len(raw):
                    raise _Corrupt(f"'{key}' ends inside its strings")
                out.append(bytes(raw[pos:pos + n]))
                crc = crc32c(raw[pos:pos + n], crc)
                pos += n
        except _Corrupt as err:
            raise TensorBundleDataLossError(f"{path}: {err}: the file is damaged") from None
        if crc != unmask_crc(e.crc32c):
            raise self._mismatch(e, path)
        return out


def open_bundle(prefix: str, cls=TensorBundle) -> TensorBundle:
    """The tensor bundle at ``prefix`` (``PREFIX.index`` and its data shards), opened as
    ``cls`` (a ``TensorBundle`` subclass)."""
    if not os.path.exists(index_file(prefix)):
        raise TensorBundleNotFoundError(f"{index_file(prefix)}: no such file (a tensor bundle's "
                                        "index)")
    return cls(prefix)


# --- writing ----------------------------------------------------------------------------------
TABLE_BLOCK_SIZE = 262144        # TensorFlow's table::Options defaults
TABLE_RESTART_INTERVAL = 16
_DTYPE_ENUMS = {dtype: enum for enum, dtype in _DTYPES.items()}


class _BlockBuilder:
    """A table block: prefix-compressed entries, a restart point every ``interval`` entries."""

    def __init__(self, interval: int):
        self.interval = interval
        self.buf = bytearray()
        self.restarts = [0]
        self.counter = 0
        self.last_key = b""

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.counter < self.interval:
            limit = min(len(key), len(self.last_key))
            while shared < limit and key[shared] == self.last_key[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buf))
            self.counter = 0
        for n in (shared, len(key) - shared, len(value)):
            _put_varint(self.buf, n)
        self.buf += key[shared:]
        self.buf += value
        self.last_key = key
        self.counter += 1

    def size_estimate(self) -> int:
        return len(self.buf) + 4 * len(self.restarts) + 4

    def finish(self) -> bytes:
        return bytes(self.buf) + struct.pack(f"<{len(self.restarts)}I", *self.restarts) + \
            struct.pack("<I", len(self.restarts))


def _shortest_separator(start: bytes, limit: bytes) -> bytes:
    """LevelDB's bytewise ``FindShortestSeparator``: a short key in [start, limit)."""
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n and start[i] < 0xFF and start[i] + 1 < limit[i]:
        return start[:i] + bytes([start[i] + 1])
    return start


def _short_successor(key: bytes) -> bytes:
    """LevelDB's bytewise ``FindShortSuccessor``: a short key >= ``key``."""
    for i, b in enumerate(key):
        if b != 0xFF:
            return key[:i] + bytes([b + 1])
    return key


def build_table(entries: Sequence[Tuple[bytes, bytes]]) -> bytes:
    """The SSTable of ``entries`` (sorted, distinct keys), laid out as TensorFlow's
    ``TableBuilder`` lays it out (no compression)."""
    out = bytearray()

    def write_block(contents: bytes) -> bytes:
        handle = bytearray()
        _put_varint(handle, len(out))
        _put_varint(handle, len(contents))
        out.extend(contents)
        out.append(NO_COMPRESSION)
        out.extend(struct.pack("<I", mask_crc(crc32c(contents + bytes([NO_COMPRESSION])))))
        return bytes(handle)

    data = _BlockBuilder(TABLE_RESTART_INTERVAL)
    index = _BlockBuilder(1)
    pending = None                      # the handle of a flushed block not yet indexed
    last = None
    for key, value in entries:
        if last is not None and key <= last:
            raise ValueError(f"table keys out of order at {key!r}")
        if pending is not None:
            index.add(_shortest_separator(last, key), pending)
            pending = None
        data.add(key, value)
        last = key
        if data.size_estimate() >= TABLE_BLOCK_SIZE:
            pending = write_block(data.finish())
            data = _BlockBuilder(TABLE_RESTART_INTERVAL)
    if data.buf:
        pending = write_block(data.finish())
    meta_handle = write_block(_BlockBuilder(TABLE_RESTART_INTERVAL).finish())
    if pending is not None:
        index.add(_short_successor(last), pending)
    index_handle = write_block(index.finish())
    footer = (meta_handle + index_handle).ljust(FOOTER_SIZE - 8, b"\0")
    out += footer + struct.pack("<Q", TABLE_MAGIC)
    return bytes(out)


def bundle_dtype_enum(dtype: DType) -> int:
    """TensorFlow's DataType enum value of a flowc dtype (KeyError: none)."""
    return _DTYPE_ENUMS[dtype]


def write_bundle_data(f, tensors: Mapping[str, np.ndarray]) -> bytes:
    """Write the tensors' bytes to the open binary file ``f`` (the bundle's one data shard),
    in key order, as TensorFlow's ``Saver`` does; returns the index table that describes
    them. Keys must be non-empty strings; every dtype must have a TensorFlow DataType
    (``bundle_dtype_enum``); a ``ValueError`` says which does not."""
    encoded = []
    for key, value in tensors.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"cannot save a tensor named {key!r} in a tensor bundle")
        raw_key = key.encode("utf-8")
        if raw_key[:1] == b"\0":
            raise ValueError(f"cannot save a tensor named {key!r}: a leading NUL marks a slice")
        encoded.append((raw_key, key, value))
    encoded.sort(key=lambda e: e[0])
    rows = [(HEADER_KEY, _encode_header(1))]
    offset = 0
    for raw_key, key, value in encoded:
        arr = np.asarray(value)
        try:
            dtype = DType.from_numpy(arr.dtype)
            enum = _DTYPE_ENUMS[dtype]
        except (TypeError, KeyError):
            raise ValueError(f"cannot save tensor '{key}' of numpy dtype {arr.dtype} in a "
                             "tensor bundle") from None
        raw = np.ascontiguousarray(arr, dtype=dtype.np.newbyteorder("<")).tobytes()
        f.write(raw)
        rows.append((raw_key, _encode_entry(enum, arr.shape, offset, len(raw),
                                            mask_crc(crc32c(raw)))))
        offset += len(raw)
    return build_table(rows)


def merged_index(shards: Sequence[TensorBundle]) -> bytes:
    """The index of one bundle whose data shard k is the one data file of ``shards[k]``
    (single-shard bundles; TensorFlow's ``MergeBundles``): every entry, keys sorted, each
    naming its shard. A key in two shards is a ``ValueError``."""
    rows: Dict[bytes, bytes] = {}
    for k, bundle in enumerate(shards):
        if bundle.num_shards != 1 or bundle._slices:
            raise ValueError(f"{bundle.index_path}: only single-shard bundles without "
                             "partitioned tensors are merged")
        for key in bundle.keys():
            raw = key.encode("utf-8")
            if raw in rows:
                raise ValueError(f"{bundle.index_path}: '{key}' is in two shards")
            e = bundle.entry(key)
            rows[raw] = _encode_entry(e.dtype, e.shape, e.offset, e.size, e.crc32c, k)
    return build_table([(HEADER_KEY, _encode_header(len(shards)))] + sorted(rows.items()))
