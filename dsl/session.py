"""``fl.Session``: runs fetches for feeds, on the compiled C backend or the numpy interpreter.

Each distinct step signature (graph version, feeds, fetches, targets) is compiled once and
cached; a repeated signature compiles nothing.

The run path avoids repeated work: a fetch structure is resolved once into a ``_Plan`` (its
tensors, targets and how to rebuild the result), looked up by the identity of its leaves; for
each set of feed keys a plan keeps a ``_Runner`` (the compiled step, the feed order and the
feed checks). A repeated ``run`` only checks the fed values and calls the compiled code.
"""
from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from compiler.errors import GraphError, StaticValueNeeded
from compiler.interpreter import Interpreter
from compiler.ir.graph import Node, Output
from compiler.options import PipelineOptions, resolve_options
from compiler.master import compile_step
from compiler.step import StepRequest
from dsl.context import Graph, get_default_graph
from dsl.indexed_slices import IndexedSlices
from dsl.sparse_ops import SparseTensor, expand_sparse_feeds
from dsl.py_func_steps import split_step
from dsl.rank_specialized import RankSpecializedStep, ShapeSpecializedStep, has_unknown_rank
from dsl.session_devices import (has_gpu_module, placement_options, session_gpus,
                                 variable_pins, variables_kept_off_the_gpu)
from dsl.tensor import Operation, Tensor
from runtime.artifact import load_artifact
from runtime.errors import FeedError, OpError
from runtime import profile
from runtime.module import Executable
from runtime import fastcall
from runtime.resources import ResourceStore

BACKENDS = ("c", "interpreter")


class IndexedSlicesValue(NamedTuple):
    """A fetched ``fl.IndexedSlices``: numpy values, indices and dense shape."""
    values: np.ndarray
    indices: np.ndarray
    dense_shape: Optional[np.ndarray]

# Bounds on the per-session lookup caches (compiled steps themselves are never evicted).
_MAX_PLANS = 256
# The C run path's route (runtime/fastcall.py), once a step has been compiled here: Session.run
# goes through it first; _MISS is its "nothing ran" answer.
_route: Optional[Callable] = None
_MAX_ROUTED_ITEMS = 16          # the longest list or tuple of fetches with a route (as in C)
_MISS: Any = None
_MAX_RUNNERS_PER_PLAN = 64


# --- fetch structures ------------------------------------------------------------------------
_DICT_KEY = object()      # tags dict keys in fingerprints, so no key can pass for a marker

def _fingerprint(f, key: list, keep: list) -> None:
    """Append to ``key`` what identifies the fetch structure ``f`` (leaves by identity)."""
    t = type(f)
    if t is Tensor or t is Operation:
        key.append(id(f))
        keep.append(f)
    elif t is str:
        key.append(f)
    elif t is list or t is tuple:
        key.append(t)
        key.append(len(f))
        for v in f:
            _fingerprint(v, key, keep)
    elif isinstance(f, dict):
        key.append(t)
        key.append(len(f))
        for k, v in f.items():
            key.append((_DICT_KEY, k))
            _fingerprint(v, key, keep)
    elif isinstance(f, tuple):                 # namedtuple and other tuple subclasses
        key.append(t)
        key.append(len(f))
        for v in f:
            _fingerprint(v, key, keep)
    else:
        key.append(id(f))
        keep.append(f)


class _Plan:
    """A fetch structure resolved against the graph: unique tensors, targets, rebuild."""

    def __init__(self, graph: Graph, fetches):
        self.outputs: List[Output] = []
        self.targets: List[Node] = []
        self._index: Dict[Output, int] = {}
        self.keep: list = []                   # the user's fetch objects (keeps their ids valid)
        self.runners: Dict[tuple, "_Runner"] = {}
        self.graph = graph
        self.version = graph.version             # the graph as it was when this was resolved
        self.rebuild = self._builder(fetches)

    def _tensor(self, out: Output) -> int:
        if out.node.graph is not self.graph:
            raise GraphError(f"cannot fetch {out.name}: it belongs to another graph than the "
                             "session's")
        i = self._index.get(out)
        if i is None:
            i = self._index[out] = len(self.outputs)
            self.outputs.append(out)
        return i

    def position(self, out: Output) -> int:
        """Where ``out`` is among the fetched values (``outputs``)."""
        return self._index[out]

    def _target(self, node: Node) -> None:
        if node.graph is not self.graph:
            raise GraphError(f"cannot run '{node.name}': it belongs to another graph than the "
                             "session's")
        if node not in self.targets:
            self.targets.append(node)

    def _builder(self, f) -> Callable[[list], Any]:
        """A function from the fetched values (in ``outputs`` order) to the user's structure."""
        if isinstance(f, Tensor):
            i = self._tensor(f.output)
            return lambda values: values[i]
        if isinstance(f, Operation):
            self._target(f.node)
            return lambda values: None
        if isinstance(f, str):
            return self._builder(self._lookup(f))
        if isinstance(f, IndexedSlices):
            parts = [self._builder(f.values), self._builder(f.indices),
                     self._builder(f.dense_shape) if isinstance(f.dense_shape, Tensor)
                     else (lambda values, d=f.dense_shape: None if d is None else np.asarray(d))]
            return lambda values: IndexedSlicesValue(*[b(values) for b in parts])
        if hasattr(f, "_as_graph_tensor"):             # a variable: its value
            return self._builder(f._as_graph_tensor())
        if hasattr(f, "_session_fetch"):               # a fetch conversion (fl.summary): what
            parts, convert = f._session_fetch()        # to fetch, and what to make of it
            build = self._builder(parts)
            return lambda values: convert(build(values))
        if isinstance(f, dict):
            items = [(k, self._builder(v)) for k, v in f.items()]
            cls = type(f)
            return lambda values: cls((k, b(values)) for k, b in items)
        if isinstance(f, (list, tuple)):
            parts = [self._builder(v) for v in f]
            if hasattr(f, "_fields"):
                cls = type(f)
                return lambda values: cls(*[b(values) for b in parts])
            if type(f) is tuple:
                return lambda values: tuple([b(values) for b in parts])
            return lambda values: [b(values) for b in parts]
        raise TypeError(f"cannot fetch {f!r}: expected an fl.Tensor, fl.Operation, tensor name, "
                        "or a list/tuple/dict of them")

    def _lookup(self, name: str):
        g = self.graph
        if ":" in name:
            return Tensor(g.output(name))
        return Operation(g.node(name))


# --- feeds -------------------------------------------------------------------------------------
def _feed_output(graph: Graph, key) -> Output:
    """The tensor a feed_dict key names, or a FeedError saying why it cannot be fed."""
    if isinstance(key, Tensor):
        out = key.output
    elif isinstance(key, str):
        try:
            out = graph.output(key)
        except GraphError as e:
            raise FeedError(f"cannot feed '{key}': {e.detail}") from None
    elif isinstance(key, Operation):
        raise FeedError(f"cannot feed operation '{key.name}': feed one of its outputs "
                        f"('{key.name}:0')")
    else:
        raise FeedError(f"cannot feed {key!r}: feed_dict keys must be fl.Tensor or tensor names")
    if out.node.graph is not graph:
        raise FeedError(f"cannot feed {out.name}: it belongs to another graph than the session's")
    return out


def _feed_name(out: Output) -> str:
    return out.node.name if out.index == 0 else out.name


def _name_op(graph: Graph, err: OpError) -> None:
    """Set ``err.op`` to the ``fl.Operation`` of the node it names, and complete its
    ``node_def`` (op type, device) where the C runtime gave only the name, where the session's
    graph has that node (a node the compiler made, a fused kernel, has none: ``op`` stays None)."""
    if err.op is None and err.node_name is not None:
        node = graph.get(err.node_name)
        if node is not None:
            err.op = Operation(node)
            err.op_type = err.op_type or node.op
            err.device = err.device or node.device or None


def _check_not_symbolic(keys: Sequence, values: Sequence) -> None:
    for k, v in zip(keys, values):
        if isinstance(v, (Tensor, Operation)):
            name = k.name if isinstance(k, (Tensor, Operation)) else k
            raise FeedError(f"the value fed to '{name}' is a symbolic {type(v).__name__} "
                            f"({v.name}); feed numpy values (run it first)")


class _Runner:
    """One compiled step for one plan and one set of feed keys."""

    __slots__ = ("executable", "order", "in_order", "checks", "keys", "unchecked")

    def __init__(self, executable: Optional[Executable], order: List[int], keys: tuple):
        self.executable = executable
        self.order = order                       # feed_dict position of each step feed
        self.in_order = order == list(range(len(order)))
        self.checks = list(zip(executable.feed_checks, order)) if executable else []
        self.keys = keys                         # the user's key objects (keeps ids valid)
        # the executable checks the values it is given (the C run path): no checks here
        self.unchecked = bool(getattr(executable, "checks_feeds", False))


_default_sessions = threading.local()


def get_default_session() -> "Session":
    """The session of the innermost ``with fl.Session() as s:`` block."""
    stack = getattr(_default_sessions, "stack", None)
    if not stack:
        raise ValueError("no default session: run inside 'with fl.Session() as sess:' or pass "
                         "session=")
    return stack[-1]


class Session:
    """Runs parts of a graph. ``backend="c"`` compiles each step; ``"interpreter"`` uses numpy.

    The session owns the graph's state (``store``): variable values and random streams,
    which persist across ``run`` calls and are dropped with the session.
    """

    def __new__(cls, target: str = "", *args, **kwargs):
        if cls is Session and isinstance(target, str) and target.startswith("grpc://"):
            from dsl.distributed import DistributedSession   # steps run on a cluster
            cls = DistributedSession
        return super().__new__(cls)

    def __init__(self, target: str = "", graph: Optional[Graph] = None, config=None,
                 backend: str = "c", options: Optional[PipelineOptions] = None):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        self.graph = graph if graph is not None else get_default_graph()
        self.backend = backend
        self.options = options or PipelineOptions()
        if config is not None:
            self.options = dataclasses.replace(
                self.options, cpu_devices=config.cpu_devices,
                allow_soft_placement=config.allow_soft_placement,
                log_device_placement=config.log_device_placement or
                self.options.log_device_placement,
                check_numerics=config.check_numerics or self.options.check_numerics)
        self.config = config
        # GPUs this process can host (none without pycuda or a GPU, or with device_count
        # {"GPU": 0}); ops with a GPU kernel then default to GPU:0, as in TensorFlow.
        self.gpus: List[str] = (session_gpus(config) if backend == "c"
                                and type(self)._compile is Session._compile else [])
        self.options = placement_options(self.options, self.gpus)
        self._cuda_context = None                # made when a step first has a GPU module
        self._variable_devices: Dict[str, str] = {}   # shared name -> device it lives on
        self._off_gpu: Dict[str, str] = {}        # variables the whole graph keeps on a CPU
        self._off_gpu_version = None             # the graph version that was computed at
        self._gpu_archs: Optional[Dict[str, str]] = None    # GPU device -> its architecture
        self.store = ResourceStore()             # variables and random streams: the state
        # dataset functions (map, filter, a one-shot iterator's dataset) run as steps of their
        # own (runtime/datasets.py)
        self.store.function_runner = self._run_function
        self._functions: Dict[tuple, Callable] = {}
        self._steps: Dict[Tuple, Executable] = {}
        self._plans: Dict[tuple, _Plan] = {}
        # id(fetches) (for a list or tuple: its items' ids) -> the C run path of their last step
        # without options (_remember_route)
        self._routes: Dict[object, tuple] = {}
        self._lock = threading.Lock()
        self.compile_count = 0
        self._closed = False

    # --- context manager -----------------------------------------------------------------
    def __enter__(self):
        stack = getattr(_default_sessions, "stack", None)
        if stack is None:
            stack = _default_sessions.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        stack = getattr(_default_sessions, "stack", [])
        if stack and stack[-1] is self:
            stack.pop()
        self.close()

    def close(self) -> None:
        """Close the session: its queues close too, so steps blocked on them end."""
        if not self._closed:
            self.store.close_queues()
        self._closed = True
        self._routes.clear()
        self._functions.clear()
        self._steps.clear()
        self._plans.clear()

    # --- running -------------------------------------------------------------------------
    def run(self, fetches, feed_dict: Optional[Dict] = None, options=None, run_metadata=None):
        """Run what ``fetches`` need with ``feed_dict``; returns values in the fetches' shape.

        Tensors come back as numpy arrays of exactly their dtype (rank 0: numpy scalars),
        operations as None. ``options=fl.RunOptions(timeout_in_ms=...)`` bounds a step that
        blocks (raising ``DeadlineExceededError``; the session stays usable).
        ``options=fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE)`` with
        ``run_metadata=fl.RunMetadata()`` runs a profiled build of the step and sets
        ``run_metadata.step_stats`` to its per-kernel profile (``runtime/profile.py``).
        A step that fails raises one of ``fl.errors``' classes (``docs/errors.md``), whose
        ``op`` is the failing ``fl.Operation``.
        """
        try:
            if options is None and run_metadata is None and _route is not None:
                got = _route(self._routes, fetches, feed_dict, self.graph.version)
                if got is not _MISS:                # a step run before, unchanged: already run
                    return got
            if self._closed:
                raise RuntimeError("this Session is closed")
            if feed_dict and any(type(k) is SparseTensor for k in feed_dict):
                feed_dict = expand_sparse_feeds(feed_dict)      # its three tensors' feeds
            t = type(fetches)
            plan = self._plans.get((self.graph.version, id(fetches))) \
                if t is Tensor or t is Operation else None          # _plan's common case, inline
            if plan is None:
                plan = self._plan(fetches)
            if self.backend == "interpreter":
                self.store.set_step_timeout(options.timeout_in_ms if options is not None else 0)
                return self._run_interpreter(plan, feed_dict or {})
            if (run_metadata is not None and getattr(options, "trace_level", 0)
                    and type(self)._compile is Session._compile):    # steps compiled here
                return self._run_traced(plan, feed_dict or {}, options, run_metadata)
            if feed_dict:
                runner = plan.runners.get(tuple(map(id, feed_dict)))
                if runner is None:
                    runner = self._runner(plan, tuple(feed_dict))
                values = list(feed_dict.values())
                if runner.unchecked:
                    timeout = options.timeout_in_ms if options is not None else 0
                    try:
                        result = plan.rebuild(runner.executable.call(
                            values if runner.in_order else [values[i] for i in runner.order],
                            store=self.store, timeout_ms=timeout))
                    except FeedError:
                        _check_not_symbolic(list(feed_dict), values)
                        raise
                    if options is None and run_metadata is None:
                        self._remember_route(fetches, plan, runner)
                    return result
                try:
                    arrays = [check(values[i]) for check, i in runner.checks]
                except FeedError:
                    _check_not_symbolic(list(feed_dict), values)
                    raise
            else:
                runner = plan.runners.get(())
                if runner is None:
                    runner = self._runner(plan, ())
                arrays = []
            if runner.executable is None:
                return plan.rebuild([])
            timeout = options.timeout_in_ms if options is not None else 0
            result = plan.rebuild(runner.executable.call(arrays, store=self.store,
                                                         timeout_ms=timeout))
            if not feed_dict and options is None and run_metadata is None:
                self._remember_route(fetches, plan, runner)
            return result
        except OpError as e:                    # name the fl.Operation that failed (e.op)
            _name_op(self.graph, e)
            raise

    def _remember_route(self, fetches, plan: _Plan, runner: _Runner) -> None:
        """Let the next ``run`` of the same fetches with the same feed keys (the same objects,
        in the same order) and no options go straight to the step's C run path
        (``runtime/csrc/flowc_fastcall.c``, ``route``), skipping the plan and runner lookups.
        Fetches: a tensor or an operation, or a list or tuple of them (found by its items, so
        a new list per call, ``sess.run([loss, train_op], feed)``, takes it too). The route
        holds the fetches and the keys, so their ids stay theirs; a new graph version or other
        keys take the full path again (which leaves its own route)."""
        global _route, _MISS
        if _route is None:
            module = fastcall.load()
            if module is None:
                return
            _MISS = module.MISS                 # first: a reader that sees _route sees it
            _route = module.route
        executable = runner.executable
        if type(executable) is not Executable or self._closed:
            return
        t = type(fetches)
        if t is Tensor or t is Operation:
            key, held = id(fetches), fetches
            rebuild = None if t is Tensor else plan.rebuild
        elif ((t is list or t is tuple) and 0 < len(fetches) <= _MAX_ROUTED_ITEMS
              and all(type(f) is Tensor or type(f) is Operation for f in fetches)):
            key, held = tuple(map(id, fetches)), tuple(fetches)
            rebuild = tuple(plan.position(f.output) if type(f) is Tensor else -1
                            for f in fetches)
        else:
            return
        direct = executable.direct(self.store)
        if direct is None:
            return
        finish_direct = executable.finish_direct

        def finish(got, values, step, feed_dict):
            try:
                return finish_direct(got, values, step)
            except FeedError:
                _check_not_symbolic(list(feed_dict or ()), values)
                raise

        if len(self._routes) >= _MAX_PLANS:
            self._routes.clear()
        self._routes[key] = (held, plan.version, tuple(runner.keys),
                             None if runner.in_order else tuple(runner.order), direct[1],
                             rebuild, finish)

    def _run_traced(self, plan: _Plan, feed_dict: Dict, options, run_metadata):
        """Run a profiled build of the step (compiled once, cached apart from the plain one)
        and put its kernel profile in ``run_metadata.step_stats``."""
        keys = tuple(feed_dict)
        runner = plan.runners.get(tuple(map(id, keys))) or self._runner(plan, keys)
        values = list(feed_dict.values())
        try:
            arrays = [check(values[i]) for check, i in runner.checks]
        except FeedError:
            _check_not_symbolic(keys, values)
            raise
        if runner.executable is None:
            run_metadata.step_stats = profile.Profile([])
            return plan.rebuild([])
        outs = self._feeds(keys)
        special = (runner.executable.specialization(arrays)
                   if hasattr(runner.executable, "specialization") else {})
        exe = self._compiled([outs[i] for i in runner.order], plan.outputs, plan.targets,
                             traced=True, **special)
        profile.reset(exe)
        t0 = time.perf_counter_ns()
        results = exe.call(arrays, store=self.store, timeout_ms=options.timeout_in_ms)
        run_metadata.step_stats = profile.read(exe, 1, time.perf_counter_ns() - t0)
        return plan.rebuild(results)

    def _run_function(self, args: Sequence[str], rets: Sequence[str], targets: Sequence[str],
                      values: Sequence) -> list:
        """Run a part of the graph as a step: ``args`` (placeholders) fed with ``values``,
        ``rets`` (tensor names) fetched, ``targets`` (node names) run. The store's
        ``function_runner``: how a dataset's map function runs, compiled once per graph version
        like any step."""
        key = (self.graph.version, tuple(args), tuple(rets), tuple(targets))
        call = self._functions.get(key)
        if call is None:
            g = self.graph
            feeds = [g.get_tensor_by_name(a if ":" in a else a + ":0") for a in args]
            fetches = ([g.get_tensor_by_name(r) for r in rets]
                       + [g.get_operation_by_name(t) for t in targets])
            call = self._functions[key] = self.make_callable(fetches, feeds)
        return list(call(*values))[:len(rets)]

    def make_callable(self, fetches, feed_list: Sequence = ()) -> Callable:
        """A function running ``fetches`` with values for ``feed_list`` given positionally
        (TensorFlow's ``Session.make_callable``).

        On the C backend the step is compiled now and the function is its precompiled fast
        path: no fetch-structure or feed-key lookup and no dict per call, only the feed checks
        (the same as ``run``'s), the compiled call and the rebuild of the fetch structure.
        """
        keys = tuple(feed_list)
        self._feeds(keys)                        # unknown or repeated keys fail now, not later
        n = len(keys)

        def wrong_count(values):
            return FeedError(f"this callable takes {n} feed value(s), got {len(values)}")

        if self.backend != "c" or type(self)._compile is not Session._compile:
            def call(*values):
                if len(values) != n:
                    raise wrong_count(values)
                return self.run(fetches, dict(zip(keys, values)))
            return call

        plan = self._plan(fetches)
        runner = plan.runners.get(tuple(map(id, keys))) or self._runner(plan, keys)
        rebuild, executable, store = plan.rebuild, runner.executable, self.store
        checks = runner.checks
        if executable is None:
            def call(*values):
                if len(values) != n:
                    raise wrong_count(values)
                return rebuild([])
            return call
        run_step = executable.call
        order = runner.order
        unchecked = runner.unchecked

        def call(*values):
            if self._closed:
                raise RuntimeError("this Session is closed")
            if len(values) != n:
                raise wrong_count(values)
            try:
                if unchecked:                    # the executable checks them (C run path)
                    return rebuild(run_step([values[i] for i in order], store=store))
                arrays = [check(values[i]) for check, i in checks]
            except FeedError as e:
                _check_not_symbolic(keys, values)
                _name_op(self.graph, e)
                raise
            except OpError as e:                 # name the fl.Operation that failed (e.op)
                _name_op(self.graph, e)
                raise
            try:
                return rebuild(run_step(arrays, store=store))
            except OpError as e:
                _name_op(self.graph, e)
                raise

        return call

    def _plan(self, fetches) -> _Plan:
        t = type(fetches)
        if t is Tensor or t is Operation:           # the common case, without the walk
            key_t = (self.graph.version, id(fetches))
            keep = [fetches]
        else:
            key: list = [self.graph.version]
            keep = []
            _fingerprint(fetches, key, keep)
            key_t = tuple(key)
        plan = self._plans.get(key_t)
        if plan is None:
            plan = _Plan(self.graph, fetches)
            plan.keep = keep
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            self._plans[key_t] = plan
        return plan

    def _feeds(self, keys: Sequence) -> List[Output]:
        outs = [_feed_output(self.graph, k) for k in keys]
        seen = {}
        for k, out in zip(keys, outs):
            if out in seen:
                raise FeedError(f"'{out.name}' is fed twice (as {seen[out]!r} and {k!r})")
            seen[out] = k
        return outs

    def _runner(self, plan: _Plan, keys: tuple) -> _Runner:
        outs = self._feeds(keys)
        if not plan.outputs and not plan.targets:
            executable, order = None, []
        else:
            order = sorted(range(len(outs)), key=lambda i: (outs[i].node.name, outs[i].index))
            feeds = [outs[i] for i in order]
            if self.backend == "c" and has_unknown_rank(feeds):   # compiled per ranks fed
                executable = RankSpecializedStep(feeds, lambda shapes: self._step_for(
                    feeds, plan, shapes))
            else:
                executable = self._step_for(feeds, plan)
        runner = _Runner(executable, order, keys)
        if len(plan.runners) >= _MAX_RUNNERS_PER_PLAN:
            plan.runners.clear()
        plan.runners[tuple(map(id, keys))] = runner
        return runner

    def _run_interpreter(self, plan: _Plan, feed_dict: Dict):
        keys = list(feed_dict)
        values = list(feed_dict.values())
        _check_not_symbolic(keys, values)
        feeds = dict(zip(self._feeds(keys), values))
        if not plan.outputs and not plan.targets:
            return plan.rebuild([])
        results = Interpreter(self.graph, self.store).run(plan.outputs, feeds, plan.targets)
        return plan.rebuild([r[()] if r.ndim == 0 else r for r in map(np.asarray, results)])

    def _step_for(self, feeds: List[Output], plan: _Plan, feed_shapes: Optional[tuple] = None):
        """The step's executable, or, where the C backend needs shapes or values the step only
        knows at run time, a ``ShapeSpecializedStep`` that compiles it per shapes fed."""
        try:
            return self._compiled(feeds, plan.outputs, plan.targets, feed_shapes=feed_shapes)
        except StaticValueNeeded as e:
            split = split_step(self.graph, feeds, plan, e, self._rank_step)
            if split is not None:           # a py_func's results of unknown rank
                return split
            if not feeds:
                raise                       # nothing fed can tell what it needs
            return ShapeSpecializedStep(
                feeds, lambda feed_shapes, feed_values: self._compiled(
                    feeds, plan.outputs, plan.targets, feed_shapes=feed_shapes,
                    feed_values=feed_values), e, self._describe_specialization)

    def _rank_step(self, feeds: List[Output], plan):
        """The step's executable, compiled per ranks fed where a feed has no rank."""
        if has_unknown_rank(feeds):
            return RankSpecializedStep(feeds, lambda shapes: self._step_for(feeds, plan, shapes))
        return self._step_for(feeds, plan)

    def _describe_specialization(self, line: str) -> None:
        """Say how a step is compiled per shapes fed: on stderr under log_device_placement
        (``--log-device-placement``), and to the ``flowc`` logger."""
        logging.getLogger("flowc").info(line)
        if resolve_options(self.options).log_device_placement:     # FLOWC_FLAGS too
            print(line, file=sys.stderr)

    def _compiled(self, feeds: List[Output], fetches: List[Output], targets: List[Node],
                  traced: bool = False, feed_shapes: Optional[tuple] = None,
                  feed_values: Optional[tuple] = None) -> Executable:
        """The step's executable; ``traced``: its profiled build (a step of its own);
        ``feed_shapes``: the shapes its feeds are compiled for (of unknown rank, or where
        only the values fed decide the step's shapes), ``feed_values``: values of feeds it is
        compiled for (``rank_specialized.py``)."""
        values_key = None if feed_values is None else tuple(
            None if v is None else (str(v.dtype), v.shape, v.tobytes()) for v in feed_values)
        key = (self.graph.version, tuple(feeds), tuple(fetches),
               tuple(sorted(targets, key=lambda n: n.name)), traced, feed_shapes, values_key)
        step = self._steps.get(key)
        if step is not None:
            return step
        shaped = {} if feed_shapes is None else {"feed_shapes": feed_shapes}
        if feed_values is not None:
            shaped["feed_values"] = feed_values
        with self._lock:
            step = self._steps.get(key)
            if step is None:
                step = (self._compile_profiled(feeds, fetches, list(key[3]), **shaped) if traced
                        else self._compile(feeds, fetches, list(key[3]), **shaped))
                self._steps[key] = step
        return step

    def _compile(self, feeds, fetches, targets, feed_shapes=None,
                 feed_values=None) -> Executable:
        return self._build(feeds, fetches, targets, profiled=False, feed_shapes=feed_shapes,
                           feed_values=feed_values)

    def _compile_profiled(self, feeds, fetches, targets, feed_shapes=None,
                          feed_values=None) -> Executable:
        return self._build(feeds, fetches, targets, profiled=True, feed_shapes=feed_shapes,
                           feed_values=feed_values)

    def _build(self, feeds, fetches, targets, profiled: bool, feed_shapes=None,
               feed_values=None) -> Executable:
        if self.gpus and self._off_gpu_version != self.graph.version:
            cpu = next((d for d in self.options.devices if "/device:CPU:" in d), None)
            self._off_gpu = variables_kept_off_the_gpu(self.graph, cpu) if cpu else {}
            self._off_gpu_version = self.graph.version
        # A variable stays where it lives (and off the GPU where the graph needs it elsewhere).
        # The step graph is made (a copy of the graph) only if the cache does not have it.
        request = StepRequest(self.graph, feeds, fetches, targets, feed_shapes, feed_values,
                              devices=variable_pins(self.graph, self._variable_devices,
                                                    self._off_gpu))
        artifact = compile_step(request, self.options, self._cuda_arch(), self._load, profiled)
        self._record_variable_devices(artifact.manifest)
        self.compile_count += 1
        return artifact.executable

    def _load(self, path: str, verified=None):
        """Load an artifact: with the session's GPU context where it has GPU modules.
        ``verified``: the cache's record of its files hashed before (``compiler/master.py``)."""
        if not self.gpus:
            return load_artifact(path, verified=verified)
        from runtime.artifact import verify_artifact
        if not has_gpu_module(verify_artifact(path, verified=verified)):
            return load_artifact(path, verified=verified)
        from runtime.cuda_module import load_cuda_artifact
        return load_cuda_artifact(path, self._gpu_context(), verified=verified)

    def _gpu_context(self):
        if self._cuda_context is None:
            from runtime.cuda_module import CudaContext
            self._cuda_context = CudaContext(0)
        return self._cuda_context

    def _cuda_arch(self) -> Optional[Dict[str, str]]:
        """Each of the session's GPUs -> its architecture (``sm_90``; ``sim`` on the CUDA
        simulator), so a module is built for the GPU it runs on (None without a GPU)."""
        if not self.gpus:
            return None
        if self._gpu_archs is None:
            from runtime.cuda_module import CudaContext, gpu_index
            archs = {}
            for device in self.gpus:
                k = gpu_index(device)
                archs[device] = (self._gpu_context() if k == 0 else CudaContext(k)).arch
            self._gpu_archs = archs
        return self._gpu_archs

    def variable_devices(self) -> Dict[str, str]:
        """Where each variable the session's steps have used lives: shared name -> device."""
        return dict(self._variable_devices)

    def _record_variable_devices(self, manifest: dict) -> None:
        for d in manifest.get("devices") or ():
            for v in d.get("variables") or ():
                self._variable_devices.setdefault(v["name"], d["device"])


class InteractiveSession(Session):
    """A session that makes itself the default on creation, for shells and notebooks
    (``tf.InteractiveSession``): ``t.eval()`` and ``op.run()`` use it until it is closed."""

    def __init__(self, target: str = "", graph: Optional[Graph] = None, config=None, **kwargs):
        super().__init__(target, graph=graph, config=config, **kwargs)
        stack = getattr(_default_sessions, "stack", None)
        if stack is None:
            stack = _default_sessions.stack = []
        stack.append(self)

    def close(self) -> None:
        stack = getattr(_default_sessions, "stack", [])
        if self in stack:
            stack.remove(self)
        super().close()
