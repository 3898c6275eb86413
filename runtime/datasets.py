"""Datasets and iterators: the runtime state behind the ``*Dataset`` and ``Iterator*`` ops.

A dataset op (``TensorSliceDataset``, ``ShuffleDataset``, ``BatchDatasetV2``, ...) describes a
dataset; running it records a ``DatasetDef`` in the store under the node's name, holding the
op's tensor inputs (copied) and the definitions of its input datasets as they were when it ran,
so a definition never changes once made. ``MakeIterator`` starts an iterator (a resource keyed
by the iterator's shared name) over a recorded definition; ``IteratorGetNext`` takes the next
element and raises ``OutOfRangeError`` at the end, as TensorFlow does. ``OneShotIterator``
builds its dataset the first time it runs, by running the dataset node as a step of its own.

Functions (``MapDataset``'s ``f``, ``FilterDataset``'s ``predicate``, ``OneShotIterator``'s
``dataset_factory``) are parts of the session's graph: placeholders for the arguments, tensors
for the results. The runtime cannot compile or interpret a graph; the session that owns the
store gives it ``store.function_runner(args, rets, targets, values) -> [arrays]``, which runs
that part of the graph as a step (compiled like any other, once, and cached), so the map
function of a compiled step is compiled C code too.

The reference kernels call this module directly, the C kernels through the host-call hook
(``DatasetDefine``, ``MakeIterator``, ``IteratorGetNext``, ``OneShotIterator``), so both
backends share one state per store.

Shuffling keeps a buffer of ``buffer_size`` elements and takes a random one of them, refilling
its place from the input (TensorFlow's algorithm); the random numbers are numpy's PCG64 seeded
by ``(seed, seed2, epoch)``: deterministic for given seeds, not TensorFlow's exact order. With
``reshuffle_each_iteration`` every iteration over the shuffled dataset (each epoch of a
``repeat``, each re-initialization of an iterator) takes the next epoch number, so orders differ
between epochs and repeat from one session to the next.
"""
from __future__ import annotations

import queue as _queue_mod
import threading
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from runtime.dtypes import DType
from runtime.errors import (FailedPreconditionError, InvalidArgumentError, NotFoundError,
                            OutOfRangeError)
from runtime.resources import register_host_op

Element = Tuple[np.ndarray, ...]
FunctionRunner = Callable[[Sequence[str], Sequence[str], Sequence[str], Sequence[np.ndarray]],
                          List[np.ndarray]]

DATASET_OPS = ("TensorSliceDataset", "TensorDataset", "RangeDataset", "ShuffleDataset",
               "BatchDatasetV2", "RepeatDataset", "MapDataset", "FilterDataset",
               "PrefetchDataset", "TakeDataset", "SkipDataset", "ZipDataset")


@dataclass(frozen=True)
class DatasetDef:
    """One dataset op's recorded definition: its op, attrs, tensor inputs and input datasets."""
    key: str
    op: str
    attrs: dict
    values: Tuple[np.ndarray, ...]
    inputs: Tuple["DatasetDef", ...] = ()


class IteratorState:
    """One iterator resource: the element stream of the dataset it was last initialized with."""

    def __init__(self, name: str):
        self.name = name
        self.lock = threading.Lock()
        self.elements: Optional[Iterator[Element]] = None
        self.stops: List[threading.Event] = []          # prefetch threads of this stream

    def reset(self, elements: Optional[Iterator[Element]], stops: List[threading.Event]) -> None:
        for s in self.stops:
            s.set()
        self.elements, self.stops = elements, stops


class DatasetState:
    """The datasets and iterators of one ``ResourceStore``."""

    def __init__(self, store):
        self.store = store
        self.lock = threading.Lock()
        self.defs: Dict[str, DatasetDef] = {}
        self.iterators: Dict[str, IteratorState] = {}
        self.epochs: Dict[str, int] = {}               # shuffle node -> iterations started

    def define(self, key: str, op: str, attrs: dict, input_keys: Sequence[str],
               values: Sequence[np.ndarray]) -> DatasetDef:
        with self.lock:
            missing = [k for k in input_keys if k not in self.defs]
            if missing:
                raise FailedPreconditionError(f"dataset '{key}' reads dataset "
                                              f"'{missing[0]}', which has not been made")
            inputs = tuple(self.defs[k] for k in input_keys)
        d = DatasetDef(key, op, dict(attrs), tuple(np.array(v, copy=True) for v in values),
                       inputs)
        _check_def(d)
        with self.lock:
            self.defs[key] = d
        return d

    def iterator(self, name: str) -> IteratorState:
        with self.lock:
            it = self.iterators.get(name)
            if it is None:
                it = self.iterators[name] = IteratorState(name)
            return it

    def make_iterator(self, name: str, dataset_key: str) -> None:
        with self.lock:
            d = self.defs.get(dataset_key)
        if d is None:
            raise FailedPreconditionError(f"dataset '{dataset_key}' has not been made")
        stops: List[threading.Event] = []
        it = self.iterator(name)
        with it.lock:
            it.reset(_elements(d, self, stops), stops)

    def next_epoch(self, key: str) -> int:
        with self.lock:
            k = self.epochs.get(key, 0)
            self.epochs[key] = k + 1
            return k

    def close(self) -> None:
        with self.lock:
            its = list(self.iterators.values())
        for it in its:
            for s in it.stops:
                s.set()


def dataset_state(store) -> DatasetState:
    """The store's dataset state (made on first use)."""
    s = getattr(store, "datasets", None)
    if s is None:
        with store._lock:
            s = getattr(store, "datasets", None)
            if s is None:
                s = store.datasets = DatasetState(store)
    return s


# --- checks made when a dataset is defined --------------------------------------------------
def _scalar(d: DatasetDef, i: int, what: str) -> int:
    v = d.values[i]
    if v.size != 1 or v.ndim != 0:
        raise InvalidArgumentError(f"{d.op} '{d.key}': {what} must be a scalar, got shape "
                                   f"{list(v.shape)}")
    return int(v)


def _check_def(d: DatasetDef) -> None:
    if d.op == "TensorSliceDataset":
        if any(v.ndim == 0 for v in d.values):
            raise InvalidArgumentError(f"TensorSliceDataset '{d.key}': every component needs a "
                                       "leading dim to slice (got a scalar)")
        rows = {v.shape[0] for v in d.values}
        if len(rows) > 1:
            raise InvalidArgumentError(f"TensorSliceDataset '{d.key}': components have "
                                       f"different leading dims {sorted(rows)}")
    elif d.op == "RangeDataset":
        if _scalar(d, 2, "step") == 0:
            raise InvalidArgumentError(f"RangeDataset '{d.key}': step must not be 0")
    elif d.op == "ShuffleDataset":
        if _scalar(d, 0, "buffer_size") <= 0:
            raise InvalidArgumentError(f"ShuffleDataset '{d.key}': buffer_size must be "
                                       f"greater than zero, got {int(d.values[0])}")
    elif d.op == "BatchDatasetV2":
        if _scalar(d, 0, "batch_size") <= 0:
            raise InvalidArgumentError(f"BatchDatasetV2 '{d.key}': batch_size must be greater "
                                       f"than zero, got {int(d.values[0])}")
    elif d.op in ("RepeatDataset", "TakeDataset", "SkipDataset", "PrefetchDataset"):
        _scalar(d, 0, "count" if d.op != "PrefetchDataset" else "buffer_size")


# --- element streams ------------------------------------------------------------------------
def _elements(d: DatasetDef, state: DatasetState, stops: List[threading.Event]
              ) -> Iterator[Element]:
    """A new stream of ``d``'s elements (its own position, independent of other streams)."""
    op = d.op
    if op == "TensorSliceDataset":
        return _slices(d.values)
    if op == "TensorDataset":
        return iter([tuple(d.values)])
    if op == "RangeDataset":
        start, stop, step = (int(v) for v in d.values)
        return ((np.array(i, np.int64),) for i in range(start, stop, step))
    if op == "ShuffleDataset":
        return _shuffle(d, state, stops)
    if op == "BatchDatasetV2":
        return _batch(d, _elements(d.inputs[0], state, stops), int(d.values[0]),
                      bool(d.values[1]))
    if op == "RepeatDataset":
        return _repeat(d, state, stops, int(d.values[0]))
    if op == "MapDataset":
        return _map(d, _elements(d.inputs[0], state, stops), state)
    if op == "FilterDataset":
        return _filter(d, _elements(d.inputs[0], state, stops), state)
    if op == "PrefetchDataset":
        return _prefetch(_elements(d.inputs[0], state, stops), int(d.values[0]), stops)
    if op == "TakeDataset":
        n = int(d.values[0])
        src = _elements(d.inputs[0], state, stops)
        return src if n < 0 else (e for _, e in zip(range(n), src))
    if op == "SkipDataset":
        return _skip(_elements(d.inputs[0], state, stops), int(d.values[0]))
    if op == "ZipDataset":
        streams = [_elements(i, state, stops) for i in d.inputs]
        return (tuple(c for e in es for c in e) for es in zip(*streams))
    raise NotFoundError(f"no dataset op '{op}' in this runtime")


def _slices(values: Tuple[np.ndarray, ...]) -> Iterator[Element]:
    for i in range(values[0].shape[0]):
        yield tuple(v[i] for v in values)


def _shuffle(d: DatasetDef, state: DatasetState, stops) -> Iterator[Element]:
    buffer_size, seed, seed2 = (int(v) for v in d.values)
    epoch = state.next_epoch(d.key) if d.attrs.get("reshuffle_each_iteration", True) else 0
    if seed == 0 and seed2 == 0:                     # TensorFlow: no seed, a random order
        rng = np.random.default_rng()
    else:
        rng = np.random.Generator(np.random.PCG64([seed & 0xFFFFFFFFFFFFFFFF,
                                                   seed2 & 0xFFFFFFFFFFFFFFFF, epoch]))
    src = _elements(d.inputs[0], state, stops)
    buf: List[Element] = []
    for e in src:
        buf.append(e)
        if len(buf) >= buffer_size:
            k = int(rng.integers(len(buf)))
            buf[k], buf[-1] = buf[-1], buf[k]
            yield buf.pop()
    while buf:
        k = int(rng.integers(len(buf)))
        buf[k], buf[-1] = buf[-1], buf[k]
        yield buf.pop()


def _batch(d: DatasetDef, src: Iterator[Element], n: int, drop_remainder: bool
           ) -> Iterator[Element]:
    while True:
        items = [e for _, e in zip(range(n), src)]
        if not items or (drop_remainder and len(items) < n):
            return
        out = []
        for k in range(len(items[0])):
            first = items[0][k].shape
            for j, e in enumerate(items[1:], 1):
                if e[k].shape != first:
                    raise InvalidArgumentError(
                        f"BatchDatasetV2 '{d.key}': cannot batch tensors with different shapes "
                        f"in component {k}: the first element has shape {list(first)} and "
                        f"element {j} has shape {list(e[k].shape)}")
            out.append(np.stack([e[k] for e in items]))
        yield tuple(out)


def _repeat(d: DatasetDef, state: DatasetState, stops, count: int) -> Iterator[Element]:
    epoch = 0
    while count < 0 or epoch < count:
        empty = True
        for e in _elements(d.inputs[0], state, stops):
            empty = False
            yield e
        if empty:                        # an empty input repeated forever is still empty
            return
        epoch += 1


def _skip(src: Iterator[Element], n: int) -> Iterator[Element]:
    if n < 0:
        for _ in src:
            pass
        return
    for _, _e in zip(range(n), src):
        pass
    yield from src


def _runner(state: DatasetState, what: str) -> FunctionRunner:
    runner = getattr(state.store, "function_runner", None)
    if runner is None:
        raise FailedPreconditionError(f"{what} runs a function of the graph, which needs a "
                                      "session (fl.Session) to run it; this runtime has none")
    return runner


def _call(d: DatasetDef, state: DatasetState, prefix: str, values: Sequence[np.ndarray]
          ) -> List[np.ndarray]:
    a = d.attrs
    run = _runner(state, f"{d.op} '{d.key}'")
    return run(a[f"{prefix}_args"], a[f"{prefix}_rets"], (), list(values))


def _map(d: DatasetDef, src: Iterator[Element], state: DatasetState) -> Iterator[Element]:
    types = [DType.parse(t) for t in d.attrs["output_types"]]
    for e in src:
        out = _call(d, state, "f", e)
        if len(out) != len(types):
            raise InvalidArgumentError(f"MapDataset '{d.key}': the function returned "
                                       f"{len(out)} values, expected {len(types)}")
        yield tuple(np.asarray(v, t.np) for v, t in zip(out, types))


def _filter(d: DatasetDef, src: Iterator[Element], state: DatasetState) -> Iterator[Element]:
    for e in src:
        (keep,) = _call(d, state, "predicate", e)
        keep = np.asarray(keep)
        if keep.dtype != np.bool_ or keep.size != 1:
            raise InvalidArgumentError(f"FilterDataset '{d.key}': the predicate must return a "
                                       f"scalar bool, got {keep.dtype}{list(keep.shape)}")
        if bool(keep.reshape(())):
            yield e


_END = object()


def _prefetch(src: Iterator[Element], n: int, stops: List[threading.Event]
              ) -> Iterator[Element]:
    """Elements made ahead by a thread of their own, ``n`` at most (``n <= 0``: AUTOTUNE, 2)."""
    buf: "_queue_mod.Queue" = _queue_mod.Queue(maxsize=n if n > 0 else 2)
    stop = threading.Event()
    stops.append(stop)

    def produce():
        try:
            for e in src:
                while not stop.is_set():
                    try:
                        buf.put((e, None), timeout=0.05)
                        break
                    except _queue_mod.Full:
                        continue
                if stop.is_set():
                    return
            item = (_END, None)
        except BaseException as exc:             # handed to the consumer
            item = (_END, exc)
        while not stop.is_set():
            try:
                buf.put(item, timeout=0.05)
                return
            except _queue_mod.Full:
                continue

    started = False
    while True:
        if not started:
            threading.Thread(target=produce, daemon=True, name="flowc-prefetch").start()
            started = True
        e, exc = buf.get()
        if e is _END:
            if exc is not None:
                raise exc
            return
        yield e


# --- what the kernels call ------------------------------------------------------------------
def get_next(store, name: str, types: Sequence[DType]) -> List[np.ndarray]:
    """The next element of iterator ``name`` (``OutOfRangeError`` at the end)."""
    it = dataset_state(store).iterator(name)
    with it.lock:
        if it.elements is None:
            raise FailedPreconditionError(f"iterator '{name}' has not been initialized (run its "
                                          "initializer first)")
        try:
            e = next(it.elements)
        except StopIteration:
            raise OutOfRangeError("End of sequence") from None
        except BaseException:
            it.reset(iter(()), [])       # a failed stream stays failed, as in TensorFlow
            raise
    if len(e) != len(types):
        raise InvalidArgumentError(f"iterator '{name}' yields {len(e)} components; this op "
                                   f"takes {len(types)}")
    out = []
    for k, (c, t) in enumerate(zip(e, types)):
        if c.dtype != t.np:
            raise InvalidArgumentError(f"iterator '{name}': component {k} is {c.dtype}; this op "
                                       f"takes {t.ir_name}")
        out.append(np.array(c, copy=True))
    return out


def one_shot(store, name: str, dataset_key: str) -> None:
    """Initialize one-shot iterator ``name`` the first time: run the dataset node (through the
    session's function runner) and start an iterator over it."""
    state = dataset_state(store)
    it = state.iterator(name)
    with it.lock:
        if it.elements is not None:
            return
    _runner(state, f"one-shot iterator '{name}'")((), (), (dataset_key,), [])
    with it.lock:
        if it.elements is not None:
            return
        stops: List[threading.Event] = []
        with state.lock:
            d = state.defs.get(dataset_key)
        if d is None:
            raise FailedPreconditionError(f"dataset '{dataset_key}' has not been made")
        it.reset(_elements(d, state, stops), stops)


# --- host ops: how the C kernels reach the datasets -----------------------------------------
# attrs (JSON): DatasetDefine {key, op, attrs, inputs: [input dataset keys]}, the op's tensor
# inputs as inputs; MakeIterator {iterator, dataset}; IteratorGetNext {iterator, output_types};
# OneShotIterator {iterator, dataset}.
def _define_host(store, node, attrs, *values):
    dataset_state(store).define(attrs["key"], attrs["op"], attrs.get("attrs", {}),
                                attrs.get("inputs", []), values)
    return []


def _make_iterator_host(store, node, attrs):
    dataset_state(store).make_iterator(attrs["iterator"], attrs["dataset"])
    return []


def _get_next_host(store, node, attrs):
    return get_next(store, attrs["iterator"],
                    [DType.parse(t) for t in attrs["output_types"]])


def _one_shot_host(store, node, attrs):
    one_shot(store, attrs["iterator"], attrs["dataset"])
    return []


for _name, _fn in (("DatasetDefine", _define_host), ("MakeIterator", _make_iterator_host),
                   ("IteratorGetNext", _get_next_host), ("OneShotIterator", _one_shot_host)):
    register_host_op(_name, _fn)
