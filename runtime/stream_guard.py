"""What a task server allows its streams: how many may be open, in all and per calling host
(``StreamGate``), and how long one may stay silent (``IdleTimeoutReader``).

Why: a gRPC sync server runs every call on one of a fixed number of threads, and a stream
holds its thread for as long as the caller keeps it open. Callers that open streams, send a
head and then nothing would otherwise hold every thread, and the task could no longer answer
``Status``, ``RegisterPartition`` or ``AbortStep``. With the gate, streams never take more
than ``max_streams`` threads (the server keeps the rest for other calls; a stream over a limit
is refused at once with ``TooManyStreamsError``), and with the idle timeout a silent stream
ends with ``StreamIdleError`` and gives its thread back.
"""
from __future__ import annotations

import queue
import threading
from collections import Counter
from typing import Dict, Iterator

from runtime.transport import StreamIdleError, TooManyStreamsError

DEFAULT_MAX_STREAMS = 32                 # of the server's 64 threads
DEFAULT_MAX_STREAMS_PER_PEER = 16
DEFAULT_STREAM_IDLE_TIMEOUT_S = 30.0
CONTROL_THREADS = 8                      # threads a server keeps out of reach of streams


def peer_host(peer: str) -> str:
    """The calling host of a gRPC peer string: ``ipv4:127.0.0.1:5555`` -> ``ipv4:127.0.0.1``,
    ``ipv6:[::1]:5555`` -> ``ipv6:[::1]`` (connections from one host share its limit)."""
    peer = peer or "unknown"
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        host, sep, port = rest.rpartition(":")
        if sep and port.isdigit():
            return f"{kind}:{host}"
    return peer


class StreamSlot:
    """One admitted stream; ``release()`` (or leaving its ``with`` block) gives it back once."""

    def __init__(self, gate: "StreamGate", host: str):
        self._gate = gate
        self._host = host
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._gate._release(self._host)

    def __enter__(self) -> "StreamSlot":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class StreamGate:
    """Counts a server's open streams, in all and per calling host, and refuses one over
    either limit at once (``TooManyStreamsError``); it also counts what it refused and the
    streams that ended idle, for ``Status``."""

    def __init__(self, max_streams: int = DEFAULT_MAX_STREAMS,
                 max_per_peer: int = DEFAULT_MAX_STREAMS_PER_PEER, where: str = "this task"):
        if max_streams < 1 or max_per_peer < 1:
            raise ValueError(f"stream limits must be at least 1 (got {max_streams} in all, "
                             f"{max_per_peer} per peer)")
        self.max_streams = max_streams
        self.max_per_peer = max_per_peer
        self.where = where
        self._lock = threading.Lock()
        self._open: Counter = Counter()          # calling host -> open streams
        self._total = 0
        self.refused = 0
        self.idle = 0

    def admit(self, peer: str, what: str) -> StreamSlot:
        """A slot for a stream from ``peer`` (a gRPC peer string), or ``TooManyStreamsError``."""
        host = peer_host(peer)
        with self._lock:
            if self._total >= self.max_streams:
                self.refused += 1
                raise TooManyStreamsError(
                    f"{self.where} refused {what} from {host}: {self._total} streams are open, "
                    f"its limit (flowc serve --max-streams {self.max_streams}); try again later")
            if self._open[host] >= self.max_per_peer:
                self.refused += 1
                raise TooManyStreamsError(
                    f"{self.where} refused {what} from {host}: that host has {self._open[host]} "
                    f"streams open, the limit per host (flowc serve --max-streams-per-peer "
                    f"{self.max_per_peer}); try again later")
            self._open[host] += 1
            self._total += 1
        return StreamSlot(self, host)

    def note_idle(self) -> None:
        with self._lock:
            self.idle += 1

    def _release(self, host: str) -> None:
        with self._lock:
            self._total -= 1
            self._open[host] -= 1
            if self._open[host] <= 0:
                del self._open[host]

    def snapshot(self) -> Dict[str, int]:
        """``{open, refused, idle_timeouts, max_streams, max_streams_per_peer}``."""
        with self._lock:
            return {"open": self._total, "refused": self.refused, "idle_timeouts": self.idle,
                    "max_streams": self.max_streams, "max_streams_per_peer": self.max_per_peer}


class IdleTimeoutReader:
    """The messages of a gRPC request stream, each waited for at most ``timeout_s``.

    A gRPC request iterator blocks without a timeout, so a helper thread reads it into a small
    queue and the caller waits on the queue: a gap longer than ``timeout_s`` raises
    ``StreamIdleError``. The caller then ends the call (its handler fails), which ends the
    helper's read; ``close()`` makes a helper blocked on a full queue stop as well."""

    QUEUE_MESSAGES = 4                     # chunks read ahead of the consumer

    def __init__(self, messages: Iterator, timeout_s: float, what: str = "stream"):
        if not timeout_s > 0:
            raise ValueError(f"an idle timeout must be positive (got {timeout_s})")
        self.timeout_s = timeout_s
        self.what = what
        self._messages = messages
        self._queue: "queue.Queue" = queue.Queue(self.QUEUE_MESSAGES)
        self._closed = threading.Event()
        self._ended = False
        self.thread = threading.Thread(target=self._pump, name="flowc-stream-reader",
                                       daemon=True)
        self.thread.start()

    def __iter__(self) -> "IdleTimeoutReader":
        return self

    def __next__(self):
        if self._ended:
            raise StopIteration
        try:
            kind, value = self._queue.get(timeout=self.timeout_s)
        except queue.Empty:
            self._ended = True
            raise StreamIdleError(f"{self.what} sent nothing for {self.timeout_s:g} s (the "
                                  "stream idle timeout, flowc serve --stream-idle-timeout)") \
                from None
        if kind == "message":
            return value
        self._ended = True
        if kind == "error":
            raise value
        raise StopIteration

    def close(self) -> None:
        """Stop the helper thread once its pending read returns (it never blocks on us)."""
        self._closed.set()

    def _pump(self) -> None:
        try:
            for message in self._messages:
                if not self._offer(("message", message)):
                    return
            self._offer(("end", None))
        except BaseException as e:             # noqa: BLE001  (handed to the consumer)
            self._offer(("error", e))

    def _offer(self, item) -> bool:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False
