"""``fl.Session(target="grpc://host:port")``: a session whose steps run on a cluster of tasks.

The session is an ordinary ``fl.Session`` (fetch structures, feed checks and the per-signature
cache are the same); what differs is how a step signature is compiled and run: by the master
(``compiler/distributed.py``), which places the graph over the cluster's devices, registers
each task's partition with it once, and runs each step with one message per task. Variables
live on the tasks, so they outlive the session: a second session sees the same values.
"""
from __future__ import annotations

from typing import Optional

from compiler.distributed import DEFAULT_STEP_TIMEOUT_S, Master
from dsl.session import Session
from runtime.transport import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_TENSOR_BYTES
from runtime.errors import FeedError
from compiler.options import setting


class DistributedSession(Session):
    """A ``Session`` on a cluster. ``token`` (or ``FLOWC_TOKEN``) is the tasks' shared token;
    ``config.operation_timeout_in_ms`` (or ``step_timeout_s``) bounds steps without a
    ``RunOptions`` deadline. ``max_message_bytes`` caps one gRPC message (larger feeds and
    fetches travel as streams of chunks); ``max_tensor_bytes`` caps one tensor."""

    def __init__(self, target: str = "", graph=None, config=None, backend: str = "c",
                 options=None, token: Optional[str] = None,
                 step_timeout_s: Optional[float] = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES):
        if backend != "c":
            raise ValueError("a grpc:// session runs compiled steps (backend='c')")
        super().__init__("", graph, config, backend, options)
        self.target = target
        timeout = step_timeout_s
        if timeout is None and getattr(config, "operation_timeout_in_ms", 0):
            timeout = config.operation_timeout_in_ms / 1000.0
        self.master = Master(target, token if token is not None else (setting("FLOWC_TOKEN") or None),
                             timeout or DEFAULT_STEP_TIMEOUT_S, max_message_bytes,
                             max_tensor_bytes)

    def _compile(self, feeds, fetches, targets, feed_shapes=None, feed_values=None):
        if feed_shapes is not None:
            unknown = [f.name for f, s in zip(feeds, feed_shapes) if s is not None]
            raise FeedError(f"a grpc:// session compiles its steps before it sees their values: "
                            f"give the placeholder(s) {', '.join(unknown)} a shape (a rank at "
                            f"least)")
        step = self.master.compile(self.graph, feeds, fetches, targets, self.options)
        self.compile_count += 1
        return step

    def close(self) -> None:
        super().close()
        master = getattr(self, "master", None)
        if master is not None:
            master.close()
