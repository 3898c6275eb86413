"""Large tensors as gRPC streams of chunks: the stream codec (no processes), then real task
processes whose per-message limit is far below the tensors they move."""
import json
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dsl as fl
from cluster_fixture import Cluster
from runtime.transport import (MessageTooLargeError, ParkedResponses, StepNotRegisteredError,
                               StreamAssembler, StreamLimits, TaskClient, WireFormatError,
                               decode_frame, decode_stream, encode_frame, encode_stream)

MESSAGE_MB = 2                      # the tasks' and the client's per-message limit


# --- the codec ---------------------------------------------------------------------------------
def test_streams_round_trip_into_one_buffer_per_tensor():
    tensors = [np.float32(1.5), np.arange(30, dtype=np.int64).reshape(5, 6), np.zeros((0, 4)),
               np.array([True, False, True]), np.arange(11, dtype=np.uint8)[::2],
               np.linspace(0, 1, 101).astype(np.float16)]
    messages = list(encode_stream({"feeds": list("abcdef")}, tensors, chunk_bytes=7))
    assert max(len(m) for m in messages[1:]) == 7          # data in chunks of at most 7 bytes
    header, back = decode_stream(iter(messages))
    assert header["feeds"] == list("abcdef")
    for t, u in zip(tensors, back):
        assert np.asarray(t).dtype == u.dtype and np.asarray(t).shape == u.shape
        np.testing.assert_array_equal(np.asarray(t), u)
        assert u.base is None and u.flags.c_contiguous and u.flags.writeable


def test_bad_streams_are_refused_with_what_is_wrong():
    tensors = [np.arange(100, dtype=np.float32)]
    good = list(encode_stream({"feeds": ["x"]}, tensors, chunk_bytes=64))
    with pytest.raises(WireFormatError, match="empty stream"):
        decode_stream(iter([]))
    with pytest.raises(WireFormatError, match="bad magic"):
        decode_stream([b"XXXX" + good[0][4:]] + good[1:])
    with pytest.raises(WireFormatError, match="truncated stream: a tensor has 384 of its 400"):
        decode_stream(good[:-1])
    with pytest.raises(WireFormatError, match="stray bytes after the stream's tensors"):
        decode_stream(good + [b"\0"])
    with pytest.raises(WireFormatError, match="stray bytes after the stream head"):
        decode_stream([good[0] + b"\0"] + good[1:])
    with pytest.raises(WireFormatError, match="not a flowc stream head"):   # a frame
        decode_stream([encode_frame({}, tensors)])
    with pytest.raises(MessageTooLargeError, match=r"tensor 'x' has 400 bytes, over the limit "
                                                   r"of 399 bytes"):
        decode_stream(good, max_tensor_bytes=399)


def _head_claiming(nbytes: int, name: str = "x") -> bytes:
    """A stream head for one f32 vector of ``nbytes`` bytes, written without the vector."""
    header = json.dumps({"feeds": [name], "tensors": 1}).encode()
    return (b"FLS1" + struct.pack("<I", len(header)) + header + struct.pack("<ii", 1, 1)
            + struct.pack("<q", nbytes // 4) + struct.pack("<Q", nbytes))


def test_a_streamed_tensor_grows_with_the_bytes_that_arrive_not_with_its_head():
    claimed = 512 << 20                                     # the head claims 512 MiB
    chunk = np.arange(1 << 14, dtype=np.float32).tobytes()  # 64 KiB chunks
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        with pytest.raises(WireFormatError, match=r"truncated stream: a tensor has 131072 of its "
                                                  r"536870912 bytes"):
            decode_stream([_head_claiming(claimed), chunk, chunk], max_tensor_bytes=1 << 30)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak} bytes traced for 128 KiB received"
    assembler = StreamAssembler(_head_claiming(claimed), max_tensor_bytes=1 << 30)
    assert assembler.allocated_bytes == 0
    for k in range(1, 6):
        assembler.add(chunk)
        assert assembler.received == k * len(chunk)
        assert assembler.received <= assembler.allocated_bytes <= 2 * assembler.received
    assert "327680 of the 536870912 bytes" in assembler.progress()
    with pytest.raises(MessageTooLargeError, match="tensor 'x' has 536870912 bytes, over the "
                                                   "limit of 536870911"):
        StreamAssembler(_head_claiming(claimed), max_tensor_bytes=claimed - 1)
    # chunks that split elements still fill a tensor that owns its memory, with no copy
    value = np.linspace(-3, 3, 1001).astype(np.float64).reshape(7, 11, 13)[:, :, :1]
    messages = list(encode_stream({"names": ["v"]}, [value], chunk_bytes=5))
    header, (back,) = decode_stream(messages)
    np.testing.assert_array_equal(back, value)
    assert back.base is None and back.shape == (7, 11, 1)


def _frame_with_record(header: bytes, record: bytes, magic: bytes = b"FLW1") -> bytes:
    return magic + struct.pack("<I", len(header)) + header + record


def test_malformed_headers_and_records_are_wire_format_errors_saying_what():
    f32_dims = lambda *dims: (struct.pack("<ii", 1, len(dims)) + struct.pack(f"<{len(dims)}q", *dims)
                              + struct.pack("<Q", 0))
    cases = [
        (b'{"tensors": ' + b"9" * 5000 + b"}", b"", "header is JSON flowc does not read"),
        (b"[" * 300000 + b"]" * 300000, b"", "header is JSON flowc does not read: RecursionError"),
        (b'{"tensors": true}', b"", "bad tensor count 'True'"),
        (b'{"tensors": -1}', b"", "bad tensor count '-1'"),
        (b'{"tensors": 1}', f32_dims(0, 1 << 62), r"dims \[0, 4611686018427387904\] that no f32"),
        (b'{"tensors": 1}', f32_dims(1 << 40, 1 << 40, 0), "that no f32 array can hold"),
    ]
    for header, record, text in cases:
        for magic, decode in ((b"FLW1", decode_frame), (b"FLS1", lambda b: decode_stream([b]))):
            with pytest.raises(WireFormatError, match=text):
                decode(_frame_with_record(header, record, magic))
    # the largest dims numpy holds still parse, as an empty tensor
    (header, (t,)) = decode_frame(_frame_with_record(b'{"tensors": 1}', f32_dims(0, 1 << 60)))
    assert t.shape == (0, 1 << 60)


_GOOD = [encode_frame({"feeds": ["a", "b"], "step_id": 3},
                      [np.arange(6, dtype=np.int64).reshape(2, 3), np.float32(2.5)])]
_GOOD += list(encode_stream({"feeds": ["a"]}, [np.arange(12, dtype=np.float16)], chunk_bytes=8))


@settings(max_examples=300, deadline=None)
@given(which=st.sampled_from(["frame", "stream"]),
       edits=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=6),
       cut=st.integers(0, 200))
def test_corrupted_frames_and_streams_raise_only_wire_errors(which, edits, cut):
    data = bytearray(_GOOD[0] if which == "frame" else _GOOD[1])
    for pos, byte in edits:
        if pos < len(data):
            data[pos] = byte
    data = bytes(data[:len(data) - cut % 8]) if cut % 3 == 0 else bytes(data)
    try:
        if which == "frame":
            decode_frame(data)
        else:
            decode_stream([data] + _GOOD[2:], max_tensor_bytes=1 << 20)
    except (WireFormatError, MessageTooLargeError):
        pass


def test_limits_and_parked_responses():
    assert StreamLimits(256 << 20).chunk_bytes == 4 << 20
    assert StreamLimits(2 << 20).chunk_bytes == 1 << 20
    with pytest.raises(ValueError, match="do not fit"):
        StreamLimits(1 << 20, chunk_bytes=1 << 20)
    parked = ParkedResponses()
    ticket = parked.put({"fetches": ["y"]}, [np.ones(3)])
    assert parked.take(ticket)[0] == {"fetches": ["y"]} and len(parked) == 0
    with pytest.raises(WireFormatError, match="already taken"):
        parked.take(ticket)


# --- real tasks ------------------------------------------------------------------------------
@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, {"ps": 1, "worker": 1},
                extra_args=["--max-message-mb", str(MESSAGE_MB), "--max-tensor-mb", "128"])
    yield c
    c.stop()


def test_a_100mb_tensor_moves_between_tasks_and_back_in_chunks(cluster, graph):
    n = 26_500_000                                          # 106 MB of f32
    x = fl.placeholder(fl.float32, [n], name="x")
    with fl.device("/job:ps/task:0"):
        doubled = x * 2.0                                   # client -> ps (streamed feed)
    with fl.device("/job:worker/task:0"):
        z = doubled + 1.0                                   # ps -> worker (streamed _Recv)
    value = (np.arange(n) % 4099).astype(np.float32)
    with fl.Session(cluster.target(), max_message_bytes=MESSAGE_MB << 20) as sess:
        got = sess.run(z, {x: value})                       # worker -> client (streamed fetch)
        np.testing.assert_array_equal(got, value * 2 + 1)
    with fl.Session(cluster.target(), max_message_bytes=MESSAGE_MB << 20,
                    max_tensor_bytes=64 << 20) as small:
        with pytest.raises(MessageTooLargeError, match=r"tensor 'x' has 106000000 bytes, over "
                                                       r"the limit of 67108864 bytes"):
            small.run(z, {x: value})


def test_truncated_and_garbage_streams_leave_the_server_serving(cluster, graph):
    client = cluster.client("worker")
    raw_request = client._stream_request
    tensors = [np.arange(1 << 18, dtype=np.float32)]          # 1 MiB
    good = list(encode_stream({"method": "RunStep", "key": "k", "step_id": 1, "feeds": ["x"]},
                              tensors, chunk_bytes=1 << 16))
    too_big = encode_stream({"method": "RunStep", "feeds": ["huge"]},
                            [np.zeros(0, np.float32)])
    head = bytearray(next(iter(too_big)))
    head[-8:] = (200 << 20).to_bytes(8, "little")              # claims 200 MiB of data
    head[-16:-8] = (50 << 20).to_bytes(8, "little")            # as f32[50 Mi]
    cases = [([b"garbage!"], WireFormatError, "bad magic"),
             (good[:-1], WireFormatError, "truncated stream"),
             (good + [b"xx"], WireFormatError, "stray bytes"),
             ([bytes(head)], MessageTooLargeError, "tensor 'huge' has 209715200 bytes"),
             (list(encode_stream({"method": "Nope"}, [])), WireFormatError, "names no method")]
    for messages, cls, text in cases:
        with pytest.raises(Exception) as e:
            raw_request(iter(messages), timeout=10)
        err = client.error(e.value, "StreamRequest")
        assert type(err) is cls and text in str(err), (text, err)
    with pytest.raises(Exception) as e:
        list(client._stream_response(encode_frame({"ticket": "0" * 32}), timeout=10))
    assert "no streamed response" in str(client.error(e.value, "StreamResponse"))
    streaming = TaskClient(cluster.address("worker"), "/job:worker/task:0",
                           max_message_bytes=MESSAGE_MB << 20)
    with pytest.raises(StepNotRegisteredError, match="no step"):  # a whole stream reaches RunStep
        streaming.call("RunStep", {"key": "k", "step_id": 1, "feeds": ["x"]},
                       [np.ones(3 << 18, np.float32)])
    streaming.close()
    assert client.call("Status", {})[0]["job"] == "worker"
    with fl.device("/job:worker/task:0"):
        y = fl.constant(2.0) * fl.placeholder(fl.float32, [], name="z")
    with fl.Session(cluster.target()) as sess:
        assert sess.run(y, {"z:0": 3.0}) == 6.0
    client.close()
