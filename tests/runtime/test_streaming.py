"""Large tensors as gRPC streams of chunks: the stream codec (no processes), then real task
processes whose per-message limit is far below the tensors they move."""
import numpy as np
import pytest

import dsl as fl
from cluster_fixture import Cluster
from runtime.transport import (MessageTooLargeError, ParkedResponses, StepNotRegisteredError,
                               StreamLimits, TaskClient, WireFormatError, decode_stream,
                               encode_frame, encode_stream)

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
