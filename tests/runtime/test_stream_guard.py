"""The task server's guards, without processes: the stream gate (in all and per calling host),
the idle-timeout reader of request streams, and the rule that a task listening beyond
loopback needs a token."""
import threading

import pytest

from runtime.server import check_bind, is_loopback_host
from runtime.stream_guard import IdleTimeoutReader, StreamGate, peer_host
from runtime.transport import InsecureBindError, StreamIdleError, TooManyStreamsError


def test_peer_host_drops_the_port_only():
    assert peer_host("ipv4:127.0.0.1:51576") == "ipv4:127.0.0.1"
    assert peer_host("ipv6:[::1]:4000") == "ipv6:[::1]"
    assert peer_host("ipv6:[fe80::1%eth0]:4000") == "ipv6:[fe80::1%eth0]"
    assert peer_host("unix:/tmp/sock") == "unix:/tmp/sock"
    assert peer_host("") == "unknown"


def test_the_gate_caps_streams_in_all_and_per_host_and_gives_slots_back():
    gate = StreamGate(max_streams=3, max_per_peer=2, where="/job:ps/task:0")
    a1 = gate.admit("ipv4:10.0.0.1:1000", "StreamRequest")
    a2 = gate.admit("ipv4:10.0.0.1:1001", "StreamRequest")     # another connection, same host
    with pytest.raises(TooManyStreamsError, match=r"/job:ps/task:0 refused StreamResponse from "
                                                  r"ipv4:10.0.0.1: that host has 2 streams open"
                                                  r".*--max-streams-per-peer 2"):
        gate.admit("ipv4:10.0.0.1:1002", "StreamResponse")
    b1 = gate.admit("ipv4:10.0.0.2:1000", "StreamRequest")     # another host still gets one
    with pytest.raises(TooManyStreamsError, match=r"3 streams are open.*--max-streams 3"):
        gate.admit("ipv4:10.0.0.3:1000", "StreamRequest")
    assert gate.snapshot() == {"open": 3, "refused": 2, "idle_timeouts": 0, "max_streams": 3,
                               "max_streams_per_peer": 2}
    a1.release()
    a1.release()                                               # once only
    with gate.admit("ipv4:10.0.0.3:1000", "StreamRequest"):
        assert gate.snapshot()["open"] == 3
    assert gate.snapshot()["open"] == 2
    a2.release()
    b1.release()
    gate.note_idle()
    assert gate.snapshot()["open"] == 0 and gate.snapshot()["idle_timeouts"] == 1
    with pytest.raises(ValueError, match="at least 1"):
        StreamGate(0, 1)


def test_the_idle_reader_passes_messages_and_ends_a_silent_stream():
    assert list(IdleTimeoutReader(iter([b"a", b"b"]), 5.0)) == [b"a", b"b"]

    def failing():
        yield b"a"
        raise KeyError("boom")
    reader = IdleTimeoutReader(failing(), 5.0)
    assert next(reader) == b"a"
    with pytest.raises(KeyError, match="boom"):
        next(reader)

    release = threading.Event()

    def silent_after_head():
        yield b"head"
        release.wait(30)                     # a caller that sends nothing more
        yield b"late"
    reader = IdleTimeoutReader(silent_after_head(), 0.2, "StreamRequest from ipv4:1.2.3.4:5")
    assert next(reader) == b"head"
    with pytest.raises(StreamIdleError, match=r"StreamRequest from ipv4:1.2.3.4:5 sent nothing "
                                              r"for 0.2 s \(the stream idle timeout"):
        next(reader)
    with pytest.raises(StopIteration):       # ended: nothing more comes out
        next(reader)
    reader.close()
    release.set()                            # the caller's read returns; the helper stops
    reader.thread.join(10)
    assert not reader.thread.is_alive()
    with pytest.raises(ValueError, match="positive"):
        IdleTimeoutReader(iter(()), 0)


def test_listening_beyond_loopback_needs_a_token_or_insecure():
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        assert is_loopback_host(host), host
        check_bind(host, None, False)
    for host in ("0.0.0.0", "::", "10.1.2.3", "192.168.0.7", "no-such-host.invalid"):
        assert not is_loopback_host(host), host
        check_bind(host, "t0ken", False)
        check_bind(host, None, True)
    with pytest.raises(InsecureBindError, match=r"refusing to serve /job:worker/task:1 on "
                                                r"0.0.0.0 without a token.*--token T or "
                                                r"FLOWC_TOKEN.*--insecure"):
        check_bind("0.0.0.0", None, False, "/job:worker/task:1")
    with pytest.raises(InsecureBindError):
        check_bind("0.0.0.0", "", False)
