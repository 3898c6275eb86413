"""The tensor-bundle reader (compiler/interop/tensor_bundle.py) against checkpoints TensorFlow
wrote (tests/data/saved_models/, made by make_saved_models.py with TensorFlow's own reading of
every key), and against damaged copies of them: a damaged file is one ``TensorBundleError``
naming the file, never another exception and never wrong values."""
from __future__ import annotations

import json
import os
import shutil
import struct

import numpy as np
import pytest

pytest.importorskip("google.protobuf")

from compiler.interop import tensor_bundle as tb  # noqa: E402
from compiler.interop.tensor_bundle import (TensorBundleDataLossError,  # noqa: E402
                                            TensorBundleError, TensorBundleNotFoundError,
                                            crc32c, decode_slice_key, mask_crc, open_bundle,
                                            unmask_crc)
from repo_paths import ROOT  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data", "saved_models")
DTYPES = os.path.join(DATA, "bundle_dtypes", "ckpt")
SHARDED = os.path.join(DATA, "bundle_sharded", "ckpt")
SMALL = os.path.join(DATA, "tf1_builder", "variables", "variables")


def _keys(name):
    with open(os.path.join(DATA, name + ".keys.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def reference():
    with np.load(os.path.join(DATA, "bundle_dtypes.values.npz")) as z:
        return {k: z[k] for k in z.files}


# --- CRC32-C -------------------------------------------------------------------------------------
def test_crc32c_known_values():
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283            # the standard check value
    assert crc32c(bytes(32)) == 0x8A9136AA                # RFC 3720, B.4: 32 bytes of zeros
    assert crc32c(b"\xff" * 32) == 0x62A8AB43             # RFC 3720: 32 bytes of 0xff
    assert crc32c(bytes(range(32))) == 0x46DD794E         # RFC 3720: an incrementing run


@pytest.mark.parametrize("size", [1, 65535, 65536, 65536 + 4095, 300_001])
def test_crc32c_of_large_data_matches_byte_by_byte(size):
    data = np.random.RandomState(size).randint(0, 256, size).astype(np.uint8).tobytes()
    slow = tb._advance(0xFFFFFFFF, data) ^ 0xFFFFFFFF
    assert crc32c(data) == slow


def test_crc32c_extends_across_pieces():
    data = np.random.RandomState(1).randint(0, 256, 200_000).astype(np.uint8).tobytes()
    whole = crc32c(data)
    for cut in (0, 1, 70_000, 199_999):
        assert crc32c(data[cut:], crc32c(data[:cut])) == whole


def test_masking_round_trips():
    for crc in (0, 1, 0xE3069283, 0xFFFFFFFF):
        assert unmask_crc(mask_crc(crc)) == crc
    assert mask_crc(0) == 0xA282EAD8


# --- OrderedCode slice keys -----------------------------------------------------------------------
def test_signed_numbers_of_tensorflows_examples():
    assert tb._ordered_signed(b"\xf0\x42\x42\x42", 0) == (0x424242, 4)
    assert tb._ordered_signed(b"\x38\x00", 0) == (-0x800, 2)
    assert tb._ordered_signed(b"\x7f", 0) == (-1, 1)
    assert tb._ordered_signed(b"\x80", 0) == (0, 1)
    assert tb._ordered_signed(b"\xbf", 0) == (63, 1)
    assert tb._ordered_signed(b"\x40", 0) == (-64, 1)


def test_slice_key_decodes():
    """0, the name a\\0b\\xffc (0 and 0xff escaped), rank 2, then (5, -1) and (0, 3)."""
    key = (b"\x00" + b"a\x00\xffb\xff\x00c\x00\x01" + b"\x01\x02"
           + b"\x85\x7f" + b"\x80\x83")
    assert decode_slice_key(key) == ("a\x00b\\xffc", ((5, -1), (0, 3)))
    for bad in (key + b"\x00", key[:-1], b"\x01" + key[1:], key.replace(b"\x00\x01", b"\x00\x02")):
        with pytest.raises(tb._Corrupt):
            decode_slice_key(bad)


# --- reading what TensorFlow wrote -------------------------------------------------------------
def test_every_key_dtype_shape_and_value_as_tensorflow_reads_them(reference):
    bundle = open_bundle(DTYPES)
    keys = _keys("bundle_dtypes")
    assert bundle.keys() == sorted(keys)
    assert bundle.num_shards == 1
    for key, info in keys.items():
        if key == tb.OBJECT_GRAPH_KEY:
            continue
        got = bundle.read(key)
        assert got.dtype.name == np.dtype(info["dtype"]).name, key
        assert list(got.shape) == info["shape"], key
        np.testing.assert_array_equal(got, reference[key], err_msg=key)


def test_index_keys_are_prefix_compressed_between_restart_points():
    """TensorFlow's table stores every 16th key whole (a restart point) and the others as the
    bytes they add to the previous key; 164 entries (the header and 163 keys) make a block
    with 11 restart points."""
    with open(DTYPES + ".index", "rb") as f:
        data = f.read()
    footer = data[-tb.FOOTER_SIZE:]
    _, pos = tb._varint(footer, 0, 40, "")
    _, pos = tb._varint(footer, pos, 40, "")
    index_off, pos = tb._varint(footer, pos, 40, "")
    index_size, _ = tb._varint(footer, pos, 40, "")
    index = tb._block(data, index_off, index_size, len(data) - tb.FOOTER_SIZE, "index")
    (_, handle), = tb._block_entries(index, "index")
    off, p = tb._varint(handle, 0, len(handle), "")
    size, _ = tb._varint(handle, p, len(handle), "")
    block = tb._block(data, off, size, len(data), "block")
    (restarts,) = struct.unpack("<I", block[-4:])
    assert restarts == 11
    assert len(list(tb._block_entries(block, "block"))) == 164


def test_sharded_bundle_with_a_partitioned_tensor(reference):
    """MaxShardSizePolicy wrote data files of at most 4 KiB and saved the 68,000-byte tensor
    as slices."""
    bundle = open_bundle(SHARDED)
    keys = _keys("bundle_sharded")
    shards = [n for n in os.listdir(os.path.dirname(SHARDED)) if ".data-" in n]
    assert bundle.num_shards == len(shards) > 10
    assert bundle.keys() == sorted(keys)
    assert bundle.entry("big/.ATTRIBUTES/VARIABLE_VALUE").sliced
    for key, info in keys.items():
        if key == tb.OBJECT_GRAPH_KEY:
            continue
        got = bundle.read(key)
        assert list(got.shape) == info["shape"], key
        np.testing.assert_array_equal(got, reference[key], err_msg=key)


def test_object_graph_names_the_variables():
    graph = open_bundle(DTYPES).object_graph()
    keys = {a.checkpoint_key for n in graph.nodes for a in n.attributes}
    assert "f32/.ATTRIBUTES/VARIABLE_VALUE" in keys
    assert "many/149/.ATTRIBUTES/VARIABLE_VALUE" in keys
    assert open_bundle(SMALL).object_graph() is None          # TF1's Saver: no object graph


def test_unknown_key_and_string_tensor():
    bundle = open_bundle(DTYPES)
    with pytest.raises(TensorBundleNotFoundError, match="no tensor 'nope'"):
        bundle.read("nope")
    with pytest.raises(TensorBundleError, match="DT_STRING tensor"):
        bundle.read(tb.OBJECT_GRAPH_KEY)


# --- missing, truncated and damaged files ---------------------------------------------------------
def _copy(tmp_path, prefix=SMALL):
    folder = tmp_path / "copy"
    folder.mkdir()
    base = os.path.basename(prefix)
    for name in os.listdir(os.path.dirname(prefix)):
        if name.startswith(base + "."):
            shutil.copy(os.path.join(os.path.dirname(prefix), name), folder / name)
    return str(folder / base)


def _rewrite(path, change):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    change(data)
    with open(path, "wb") as f:
        f.write(bytes(data))


def _read_all(prefix):
    bundle = open_bundle(prefix)
    return {k: bundle.read(k) for k in bundle.keys() if k != tb.OBJECT_GRAPH_KEY}


def test_missing_index_and_missing_data_shard(tmp_path):
    prefix = _copy(tmp_path)
    os.remove(prefix + ".data-00000-of-00001")
    with pytest.raises(TensorBundleNotFoundError, match=r"variables\.data-00000-of-00001: no "
                                                        r"such file \(data shard 0"):
        _read_all(prefix)
    with pytest.raises(TensorBundleNotFoundError, match=r"nothere\.index: no such file"):
        open_bundle(str(tmp_path / "nothere"))


def test_damaged_tensor_bytes_are_a_checksum_mismatch_naming_the_data_file(tmp_path):
    prefix = _copy(tmp_path)

    def flip(data):
        data[10] ^= 0x01
    _rewrite(prefix + ".data-00000-of-00001", flip)
    with pytest.raises(TensorBundleDataLossError,
                       match=r"variables\.data-00000-of-00001: checksum mismatch for "
                             r"'dense/bias' \(28 bytes at offset 0\): the file is damaged"):
        _read_all(prefix)


def test_truncated_data_file(tmp_path):
    prefix = _copy(tmp_path)
    _rewrite(prefix + ".data-00000-of-00001", lambda d: d.__delitem__(slice(len(d) - 8, None)))
    with pytest.raises(TensorBundleDataLossError, match=r"runs past the end of the file .*"
                                                        r"truncated"):
        _read_all(prefix)


def test_damaged_index_block_is_a_checksum_mismatch(tmp_path):
    prefix = _copy(tmp_path)

    def flip(data):
        data[20] ^= 0x40
    _rewrite(prefix + ".index", flip)
    with pytest.raises(TensorBundleDataLossError, match=r"variables\.index: .*checksum "
                                                        r"mismatch in the data block"):
        open_bundle(prefix)


def test_snappy_block_is_refused_by_name(tmp_path):
    """TensorFlow never compresses a bundle's index; a block marked snappy (its checksum
    correct) is refused with that reason."""
    prefix = _copy(tmp_path)

    def mark_snappy(data):
        footer = bytes(data[-tb.FOOTER_SIZE:])
        _, pos = tb._varint(footer, 0, 40, "")
        _, pos = tb._varint(footer, pos, 40, "")
        off, pos = tb._varint(footer, pos, 40, "")
        size, _ = tb._varint(footer, pos, 40, "")
        data[off + size] = tb.SNAPPY_COMPRESSION
        data[off + size + 1:off + size + 5] = struct.pack(
            "<I", mask_crc(crc32c(bytes(data[off:off + size + 1]))))
    _rewrite(prefix + ".index", mark_snappy)
    with pytest.raises(TensorBundleDataLossError, match="snappy-compressed"):
        open_bundle(prefix)


def test_not_a_table(tmp_path):
    path = tmp_path / "junk.index"
    path.write_bytes(np.random.RandomState(0).bytes(200))
    with pytest.raises(TensorBundleDataLossError, match=r"junk\.index: not a readable "
                                                        r"tensor-bundle index.*magic"):
        open_bundle(str(tmp_path / "junk"))
    path.write_bytes(b"")
    with pytest.raises(TensorBundleDataLossError, match="shorter than a table footer"):
        open_bundle(str(tmp_path / "junk"))


def test_every_truncation_of_an_index_is_an_error_naming_it(tmp_path):
    prefix = _copy(tmp_path)
    with open(prefix + ".index", "rb") as f:
        whole = f.read()
    for length in range(len(whole)):
        with open(prefix + ".index", "wb") as f:
            f.write(whole[:length])
        with pytest.raises(TensorBundleError, match=r"variables\.index"):
            _read_all(prefix)


def _read_regions(data: bytes):
    """The byte ranges a reader uses: the index and data blocks with their trailers, the index
    handle and the magic number (not the metaindex block, which TensorFlow does not read
    either, nor the footer's padding)."""
    footer_at = len(data) - tb.FOOTER_SIZE
    footer = data[footer_at:]
    _, pos = tb._varint(footer, 0, 40, "")
    _, pos = tb._varint(footer, pos, 40, "")
    handle_at = pos
    index_off, pos = tb._varint(footer, pos, 40, "")
    index_size, pos = tb._varint(footer, pos, 40, "")
    regions = [(footer_at + handle_at, footer_at + pos), (len(data) - 8, len(data)),
               (index_off, index_off + index_size + tb.BLOCK_TRAILER_SIZE)]
    index = tb._block(data, index_off, index_size, footer_at, "index")
    for _, handle in tb._block_entries(index, "index"):
        off, p = tb._varint(handle, 0, len(handle), "")
        size, _ = tb._varint(handle, p, len(handle), "")
        regions.append((off, off + size + tb.BLOCK_TRAILER_SIZE))
    return regions


def test_every_damaged_byte_of_an_index_is_caught_or_harmless(tmp_path):
    """Flip each byte of a small index: it fails with a TensorBundleError, or it reads the
    very same tensors and the byte is one the format's readers do not use."""
    prefix = _copy(tmp_path)
    expected = _read_all(prefix)
    with open(prefix + ".index", "rb") as f:
        whole = f.read()
    used = _read_regions(whole)
    harmless = 0
    for k in range(len(whole)):
        damaged = bytearray(whole)
        damaged[k] ^= 0x5A
        with open(prefix + ".index", "wb") as f:
            f.write(bytes(damaged))
        try:
            got = _read_all(prefix)
        except TensorBundleError:
            continue
        assert got.keys() == expected.keys(), k
        for key in got:
            np.testing.assert_array_equal(got[key], expected[key])
        assert not any(start <= k < end for start, end in used), k
        harmless += 1
    assert harmless < len(whole) // 3
