"""``fl.train.batch``, ``add_queue_runner`` and ``start_queue_runners`` (TF1's queue-based
input pipeline, ``training/input.py``): ``batch`` puts one example (or, with
``enqueue_many``, a batch of examples) per run into a ``FIFOQueue`` (a ``PaddingFIFOQueue``
with ``dynamic_pad``, which pads each batch to its longest example) fed by a ``QueueRunner``
registered in the ``queue_runners`` collection, and returns ``dequeue_many(batch_size)``
(``dequeue_up_to`` with ``allow_smaller_final_batch``); ``start_queue_runners`` starts every
registered runner's threads for a session."""
from __future__ import annotations

from typing import List, Optional

from dsl.context import get_default_graph, name_scope
from dsl.ops import convert_to_tensor
from dsl.queues import Coordinator, FIFOQueue, PaddingFIFOQueue, QueueRunner, RandomShuffleQueue
from dsl.tensor import Tensor, static_shape

__all__ = ["batch", "shuffle_batch", "add_queue_runner", "start_queue_runners",
           "QUEUE_RUNNERS"]

QUEUE_RUNNERS = "queue_runners"


def add_queue_runner(qr: QueueRunner, collection: str = QUEUE_RUNNERS) -> None:
    get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord: Optional[Coordinator] = None, daemon: bool = True,
                        start: bool = True, collection: str = QUEUE_RUNNERS) -> list:
    """Create (and start) the threads of every queue runner in ``collection`` for ``sess``."""
    from dsl.session import get_default_session
    sess = sess or get_default_session()
    if sess is None:
        raise ValueError("Cannot start queue runners: No default session is registered. Use "
                         "`with sess.as_default()` or pass an explicit session to "
                         "fl.start_queue_runners(sess=sess)")
    graph = getattr(sess, "graph", None) or get_default_graph()
    threads: List = []
    for qr in graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads


def _flatten(tensors):
    if isinstance(tensors, dict):
        keys = sorted(tensors)
        return [tensors[k] for k in keys], lambda outs: dict(zip(keys, outs))
    if isinstance(tensors, (list, tuple)):
        return list(tensors), lambda outs: list(outs)
    return [tensors], lambda outs: outs[0]


def batch(tensors, batch_size: int, num_threads: int = 1, capacity: int = 32,
          enqueue_many: bool = False, shapes=None, dynamic_pad: bool = False,
          allow_smaller_final_batch: bool = False, shared_name: Optional[str] = None,
          name: Optional[str] = None):
    """Batches of ``tensors`` (a tensor, list or dict) through a queue and ``num_threads``
    enqueueing threads (``tf.train.batch``); start them with ``start_queue_runners``. With
    ``dynamic_pad``, examples may differ in the dims their shapes leave unknown (their ranks
    must be known): each batch is padded with zeros to its longest example."""
    if dynamic_pad:
        make = lambda dtypes, shapes: PaddingFIFOQueue(      # noqa: E731
            capacity, dtypes, shapes=shapes, shared_name=shared_name,
            name="padding_fifo_queue")
    else:
        make = lambda dtypes, shapes: FIFOQueue(             # noqa: E731
            capacity, dtypes, shapes=shapes, shared_name=shared_name, name="fifo_queue")
    return _batch(tensors, batch_size, num_threads, capacity, enqueue_many, shapes,
                  allow_smaller_final_batch, name or "batch", make, dynamic_pad)


def shuffle_batch(tensors, batch_size: int, capacity: int, min_after_dequeue: int,
                  num_threads: int = 1, seed: Optional[int] = None, enqueue_many: bool = False,
                  shapes=None, allow_smaller_final_batch: bool = False,
                  shared_name: Optional[str] = None, name: Optional[str] = None):
    """Random batches of ``tensors`` (``tf.train.shuffle_batch``): examples go through a
    ``RandomShuffleQueue`` of ``capacity`` fed by ``num_threads`` threads of a
    ``QueueRunner`` (``start_queue_runners``; ``MonitoredTrainingSession`` starts them), and
    each batch is drawn at random from what the queue holds, once ``min_after_dequeue``
    examples would remain (until the input runs out and the queue closes)."""
    if min_after_dequeue >= capacity:
        raise ValueError(f"min_after_dequeue ({min_after_dequeue}) must be < capacity "
                         f"({capacity})")
    return _batch(tensors, batch_size, num_threads, capacity, enqueue_many, shapes,
                  allow_smaller_final_batch, name or "shuffle_batch",
                  lambda dtypes, shapes: RandomShuffleQueue(
                      capacity, min_after_dequeue, dtypes, shapes=shapes, seed=seed,
                      shared_name=shared_name, name="random_shuffle_queue"))


def _batch(tensors, batch_size, num_threads, capacity, enqueue_many, shapes,
           allow_smaller_final_batch, scope, make_queue, dynamic_pad=False):
    flat, rebuild = _flatten(tensors)
    with name_scope(scope):
        flat = [convert_to_tensor(t) for t in flat]
        if shapes is None:
            shapes = []
            for t in flat:
                s = static_shape(t)
                if dynamic_pad and s is None:
                    raise ValueError(f"dynamic_pad needs tensors of known rank, got {t.shape} "
                                     "(pass shapes=)")
                if not dynamic_pad and (s is None or any(
                        d is None for d in s[1 if enqueue_many else 0:])):
                    raise ValueError(f"All shapes must be fully defined: {t.shape} (pass "
                                     "shapes=)")
                shapes.append(list(s[1:] if enqueue_many else s))
        queue = make_queue([t.dtype for t in flat], shapes)
        enqueue = queue.enqueue_many(flat) if enqueue_many else queue.enqueue(flat)
        add_queue_runner(QueueRunner(queue, [enqueue] * int(num_threads)))
        if allow_smaller_final_batch:
            out = queue.dequeue_up_to(batch_size)
        else:
            out = queue.dequeue_many(batch_size)
    outs = out if isinstance(out, list) else [out]
    if not allow_smaller_final_batch:
        for t, s in zip(outs, shapes):
            if isinstance(t, Tensor):
                t.set_shape([int(batch_size)] + list(s))
    return rebuild(outs)
