"""Hostile callers against a real task process on loopback: a flood of streams that send a
head and then nothing, and requests whose headers are malformed. The task runs with small
limits (a stream idle timeout of 1 s, 8 streams, 4 per calling host) so the test is short;
every wait is bounded and the process is killed at the end."""
import json
import struct
import threading

import grpc
import numpy as np
import pytest

from cluster_fixture import Cluster
from runtime.transport import (StepNotRegisteredError, StreamIdleError, TaskClient,
                               TooManyStreamsError, encode_frame, encode_stream)

IDLE_S, MAX_STREAMS, PER_PEER, FLOOD = 1, 8, 4, 64


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("hostile"), {"worker": 1},
                extra_args=["--stream-idle-timeout", str(IDLE_S), "--max-streams",
                            str(MAX_STREAMS), "--max-streams-per-peer", str(PER_PEER),
                            "--max-message-mb", "2"])
    yield c
    c.stop()


def test_streams_that_send_a_head_and_nothing_more_cannot_stall_a_task(task):
    client = task.client("worker")
    head = next(iter(encode_stream({"method": "RunStep", "key": "k", "step_id": 1,
                                    "feeds": ["x"]}, [np.zeros(1 << 20, np.float32)])))
    release = threading.Event()

    def head_only():                         # the head, then silence (bounded)
        yield head
        release.wait(60)
    futures = [client._stream_request.future(head_only(), timeout=60) for _ in range(FLOOD)]
    try:
        status = client.call("Status", {})[0]          # its normal deadline, while flooded
        assert status["job"] == "worker"
        errors = [client.error(f.exception(timeout=60), "StreamRequest") for f in futures]
    finally:
        release.set()
        for f in futures:
            f.cancel()
    refused = [e for e in errors if type(e) is TooManyStreamsError]
    idle = [e for e in errors if type(e) is StreamIdleError]
    assert len(refused) + len(idle) == FLOOD and refused and idle, errors[:3]
    assert f"that host has {PER_PEER} streams open" in str(refused[0])
    assert f"sent nothing for {IDLE_S} s" in str(idle[0])
    assert "after 0 of the 4194304 bytes its head announced" in str(idle[0])
    streams = client.call("Status", {})[0]["streams"]
    assert streams["open"] == 0                         # every slot came back
    assert streams["idle_timeouts"] >= len(idle) and streams["refused"] >= len(refused)
    streaming = TaskClient(task.address("worker"), "/job:worker/task:0",
                           max_message_bytes=2 << 20)
    with pytest.raises(StepNotRegisteredError, match="no step"):   # a whole stream gets in
        streaming.call("RunStep", {"key": "k", "step_id": 1, "feeds": ["x"]},
                       [np.ones(3 << 18, np.float32)])
    streaming.close()
    client.close()


def _frame(header: bytes, record: bytes = b"", magic: bytes = b"FLW1") -> bytes:
    return magic + struct.pack("<I", len(header)) + header + record


def test_malformed_headers_get_invalid_argument_saying_what_is_wrong(task):
    client = task.client("worker")
    zero_by_huge = struct.pack("<ii", 1, 2) + struct.pack("<qq", 0, 1 << 62) + struct.pack("<Q", 0)
    one_tensor = json.dumps({"key": "k", "step_id": 1, "feeds": ["x"], "tensors": 1}).encode()
    cases = [
        ("Status", _frame(b'{"tensors": ' + b"7" * 5000 + b"}"),
         "header is JSON flowc does not read"),
        ("Status", _frame(b"[" * 300000 + b"]" * 300000), "header is JSON flowc does not read"),
        ("Status", _frame(b'{"tensors": true}'), "bad tensor count"),
        ("RunStep", _frame(one_tensor, zero_by_huge), "that no f32 array can hold"),
        ("RunStep", encode_frame({"key": "k", "step_id": 10 ** 30, "feeds": []}),
         "RunStep: 'step_id' must be in [0, 9223372036854775807]"),
        ("RunStep", encode_frame({"key": "k", "step_id": 1, "feeds": [],
                                  "timeout_ms": 10 ** 400}), "'timeout_ms' must be in"),
        ("RecvTensor", encode_frame({"key": "k", "step_id": -1}), "'step_id' must be in"),
        ("AbortStep", encode_frame({"step_id": 2 ** 64}), "'step_id' must be in"),
    ]
    for method, request, text in cases:
        with pytest.raises(grpc.RpcError) as e:
            client._calls[method](request, timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, e.value.details())
        assert text in e.value.details(), (text, e.value.details())
    with pytest.raises(grpc.RpcError) as e:                  # the same in a stream's head
        client._stream_request(iter([_frame(one_tensor, zero_by_huge, b"FLS1")]), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "that no f32 array can hold" in e.value.details()
    assert client.call("Status", {})[0]["job"] == "worker"     # and the task keeps serving
    client.close()
