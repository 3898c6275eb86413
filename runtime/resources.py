"""State that lives outside any step: variables, random-op counters, and host ops.

A ``ResourceStore`` belongs to a session (or to an artifact run on its own). It owns

- **variables**, keyed by their shared name: a C ``flowc_var`` each, whose buffer generated
  code reads and updates in place (through the ``flowc_runtime`` a step is called with) and
  the reference interpreter reads and writes through this class, so both backends see one
  state;
- **random streams**, one 64-bit counter per random op: each run of the op reserves the
  numbers it draws by advancing its counter, so every run draws new numbers (TensorFlow's
  per-kernel Philox skip-ahead);
- the **host-call hook** kernels use to ask the runtime for work that belongs to it rather
  than to generated code (reading and writing checkpoint files): ``register_host_op``.

A variable that a GPU module uses is **GPU-resident**: its ``flowc_var`` stays in host memory
(dims, flag, lock, name) and its ``value.data`` is device memory, which the store reads, sets
and frees through that module's exports (``flowc_cuda_var_to_host`` ...), never with ``free``.
A variable lives on one kind of device: a CPU module given a GPU-resident variable is refused
(the session keeps a variable on the device its first step placed it on).

Every read and update of a variable is atomic per variable, as with TensorFlow's resource
variables (whose mutex each kernel holds): generated code holds the ``flowc_var``'s own lock
(``flowc_var_lock`` in ``runtime/csrc/flowc_rt.h``) while it reads or updates the value, and
the interpreter's kernels and this module hold the ``Variable``'s ``lock`` (a
``threading.Lock``) for ``read``, ``assign`` and a whole read-modify-write ``update``, so
concurrent ``AssignAdd``s add up exactly in both backends. The two locks are distinct: a
session runs its steps with one backend, and the store's host-side ``read``/``assign`` are
not locked against generated code running at the same time.
"""
from __future__ import annotations

import json
import math
import threading
import traceback
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from runtime.dtypes import DType
from runtime.errors import FlowcError, InvalidArgumentError, status_code_of
from runtime.module import TensorSpec, ffi

ffi.cdef("void *aligned_alloc(size_t alignment, size_t size); void free(void *p);",
         override=True)
_libc = ffi.dlopen(None)
# Looked up once, here: a cffi library's first lookup of a name takes cffi's lock, and a
# finalizer (Variable.__del__) that the garbage collector runs while another thread or frame
# holds that lock (inside ffi.dlopen) would wait for it forever (a test run hung so).
_aligned_alloc = _libc.aligned_alloc
_free = _libc.free


class ResourceError(FlowcError):
    """A variable is used in a way its state does not allow (uninitialized, wrong dtype)."""


def _alloc(nbytes: int):
    n = (max(nbytes, 1) + 63) // 64 * 64
    p = _aligned_alloc(64, n)
    if p == ffi.NULL:
        raise MemoryError(f"out of memory allocating {nbytes} bytes for a variable")
    return p


@dataclass(frozen=True)
class VariableInfo:
    name: str
    dtype: DType
    shape: Optional[tuple]           # the declared shape (None: unknown rank)


def gpu_exports(lib):
    """``lib`` if it is a GPU module's library (it exports the GPU variable functions),
    else None."""
    try:
        lib.flowc_cuda_var_from_host
    except AttributeError:
        return None
    return lib


class Variable:
    """One variable's C state and its declared type; ``gpu``: the GPU module library that
    holds its device memory (None: host memory)."""

    def __init__(self, info: VariableInfo):
        self.info = info
        self.gpu = None
        # Held by ``read``, ``assign`` and ``update``: the interpreter's updates are atomic.
        self.lock = threading.Lock()
        self.c = ffi.new("flowc_var *")
        self.c.dtype = info.dtype.code
        encoded = info.name.encode()[:127]
        ffi.memmove(self.c.name, encoded, len(encoded))

    def __del__(self):
        c = getattr(self, "c", None)
        if c is None or c.value.data == ffi.NULL:
            return
        if getattr(self, "gpu", None) is not None:
            try:
                self._gpu_release(c)
            except Exception:  # noqa: BLE001  (process exit: the driver may be gone)
                pass
        else:
            _free(c.value.data)
        c.value.data = ffi.NULL

    @property
    def initialized(self) -> bool:
        return bool(self.c.initialized)

    @property
    def on_gpu(self) -> bool:
        return self.gpu is not None

    def move_to_gpu(self, lib) -> None:
        """Make the variable GPU-resident in ``lib``'s device memory (a GPU module's library);
        a value already in host memory is copied there."""
        with self.lock:
            if self.gpu is not None:
                return
            c = self.c
            value = self._read() if c.initialized else None
            if c.value.data != ffi.NULL:
                _free(c.value.data)
                c.value.data = ffi.NULL
                c.capacity = 0
            self._gpu_release = lib.flowc_cuda_var_release      # for __del__: no lookup there
            self.gpu = lib
            if value is not None:
                self._assign(value)

    def read(self) -> np.ndarray:
        """A copy of the current value (from the GPU for a GPU-resident variable), taken
        under the variable's lock (never half of an update)."""
        with self.lock:
            return self._read()

    def assign(self, value) -> None:
        """Set the value (a copy of ``value``) under the variable's lock; checks dtype and the
        declared shape. Not locked against generated code running at the same time (use an
        assign op for that)."""
        with self.lock:
            self._assign(value)

    def update(self, compute: Callable[[np.ndarray], Optional[np.ndarray]]) -> None:
        """Replace the value with ``compute(current value)``, atomically: the lock is held from
        the read to the write, so concurrent updates (``AssignAdd`` from several threads) all
        land. ``compute`` raising, or returning None, leaves the variable unchanged."""
        with self.lock:
            new = compute(self._read())
            if new is not None:
                self._assign(new)

    def _read(self) -> np.ndarray:
        c = self.c
        if not c.initialized:
            raise ResourceError(f"variable '{self.info.name}' is not initialized (run its "
                                "initializer, or restore it from a checkpoint)")
        shape = tuple(c.value.dims[0:c.value.rank])
        dtype = DType.from_code(c.value.dtype).np
        n = math.prod(shape) * dtype.itemsize
        if n == 0:
            return np.zeros(shape, dtype)
        if self.gpu is not None:
            out = np.empty(shape, dtype)
            rc = self.gpu.flowc_cuda_var_to_host(c, ffi.from_buffer(out), n)
            if rc != 0:
                raise ResourceError(f"cannot copy GPU variable '{self.info.name}' to the host "
                                    f"(error {rc})")
            return out
        return np.frombuffer(ffi.buffer(c.value.data, n), dtype).reshape(shape).copy()

    def _assign(self, value) -> None:
        info = self.info
        arr = np.asarray(value, order="C")
        if arr.dtype != info.dtype.np:
            raise ResourceError(f"cannot assign a {arr.dtype} value to variable '{info.name}' "
                                f"of dtype {info.dtype.ir_name}")
        check_declared_shape(info, arr.shape)
        if arr.ndim > 8:
            raise ResourceError(f"variable '{info.name}': rank {arr.ndim} exceeds 8")
        c = self.c
        if self.gpu is not None:
            arr = np.ascontiguousarray(arr)
            rc = self.gpu.flowc_cuda_var_from_host(c, ffi.from_buffer(arr), arr.nbytes)
            if rc != 0:
                raise ResourceError(f"cannot copy a value to GPU variable '{info.name}' "
                                    f"(error {rc})")
        elif c.value.data == ffi.NULL or c.capacity != arr.nbytes:
            p = _alloc(arr.nbytes)
            old = c.value.data
            c.value.data = p
            c.capacity = arr.nbytes
            if old != ffi.NULL:
                _free(old)
        if arr.nbytes and self.gpu is None:
            ffi.memmove(c.value.data, ffi.from_buffer(arr), arr.nbytes)
        c.value.rank = arr.ndim
        c.value.dtype = info.dtype.code
        for d, n in enumerate(arr.shape):
            c.value.dims[d] = n
        c.initialized = 1

    def view(self) -> np.ndarray:
        """The current value without copying (valid until the variable's size changes); a
        GPU-resident variable's value is copied (host code cannot see device memory)."""
        c = self.c
        if not c.initialized:
            raise ResourceError(f"variable '{self.info.name}' is not initialized")
        if self.gpu is not None:
            return self.read()
        shape = tuple(c.value.dims[0:c.value.rank])
        dtype = self.info.dtype.np
        n = math.prod(shape) * dtype.itemsize
        if n == 0:
            return np.zeros(shape, dtype)
        return np.frombuffer(ffi.buffer(c.value.data, n), dtype).reshape(shape)


def check_declared_shape(info: VariableInfo, shape: Sequence[int]) -> None:
    declared = info.shape
    if declared is None:
        return
    if len(declared) != len(shape) or any(d is not None and d != s for d, s in zip(declared, shape)):
        decl = "[" + ",".join("?" if d is None else str(d) for d in declared) + "]"
        raise ResourceError(f"variable '{info.name}' is declared {info.dtype.ir_name}{decl}; "
                            f"cannot hold a value of shape {list(shape)}")


HostOp = Callable[..., List[np.ndarray]]
_host_ops: Dict[str, HostOp] = {}


def register_host_op(name: str, fn: HostOp) -> None:
    """Make ``fn(store, node, attrs: dict, *inputs) -> [outputs]`` callable from kernels."""
    _host_ops[name] = fn


class ResourceStore:
    """Variables and random streams of one session (or one artifact run alone)."""

    def __init__(self):
        self._vars: Dict[str, Variable] = {}
        self._streams: Dict[str, object] = {}      # name -> its uint64_t counter
        self._queues: Dict[str, object] = {}       # name -> CQueue or PyQueue
        self.accumulators: Dict[str, object] = {}  # name -> runtime.accumulators.Accumulator
        self.datasets = None                       # runtime.datasets.DatasetState, on first use
        # Runs a part of the graph as a step: (arg placeholders, result tensors, target nodes,
        # arg values) -> result values. Set by the session that owns the store; dataset
        # functions (map, filter, a one-shot iterator's dataset) need it (runtime/datasets.py).
        self.function_runner = None
        self._step = threading.local()             # the interpreter's per-step deadline
        self._lock = threading.Lock()
        self._host = ffi.new_handle(self)
        self._host_call = ffi.callback(
            "int(void *, const char *, const char *, const char *, int32_t, "
            "const flowc_tensor *, int32_t, flowc_tensor *, flowc_status *)",
            _host_call_trampoline)
        self._keep: list = []

    # --- variables ---------------------------------------------------------------------
    def variable(self, name: str, dtype: Optional[DType] = None, shape=None,
                 create: bool = True) -> Variable:
        """The variable ``name``; created (uninitialized) when missing and ``create``."""
        v = self._vars.get(name)
        if v is None:
            if not create or dtype is None:
                raise ResourceError(f"no variable named '{name}' in this session")
            with self._lock:
                v = self._vars.get(name)
                if v is None:
                    v = self._vars[name] = Variable(VariableInfo(
                        name, dtype, None if shape is None else tuple(shape)))
        elif dtype is not None and v.info.dtype is not dtype:
            raise ResourceError(f"variable '{name}' exists with dtype {v.info.dtype.ir_name}; "
                                f"this graph uses it as {dtype.ir_name}")
        return v

    def variables(self) -> Dict[str, Variable]:
        return dict(self._vars)

    def read(self, name: str) -> np.ndarray:
        return self.variable(name, create=False).read()

    def assign(self, name: str, value) -> None:
        self.variable(name, create=False).assign(value)

    # --- random streams ----------------------------------------------------------------
    def _stream(self, name: str):
        c = self._streams.get(name)
        if c is None:
            with self._lock:
                c = self._streams.setdefault(name, ffi.new("uint64_t *"))
        return c

    def reserve(self, name: str, count: int) -> int:
        """Advance stream ``name`` by ``count``; returns where it was (this run's offset)."""
        c = self._stream(name)
        with self._lock:
            offset = int(c[0])
            c[0] = (offset + count) & (2**64 - 1)
        return offset

    # --- binding a step ----------------------------------------------------------------
    # --- queues ----------------------------------------------------------------------------
    def c_queue(self, name: str, components: int, capacity: int, lib):
        """The C queue ``name``, created with ``lib`` (a step's module) when missing."""
        from runtime.queues import CQueue
        with self._lock:
            q = self._queues.get(name)
            if q is None:
                q = self._queues[name] = CQueue(name, components, capacity, lib)
        if not isinstance(q, CQueue) or q.components != components:
            raise ResourceError(f"queue '{name}' exists with another kind or number of components")
        return q

    def py_queue(self, name: str, components: int, capacity: int):
        """The interpreter's queue ``name`` (created when missing)."""
        from runtime.queues import PyQueue
        with self._lock:
            q = self._queues.get(name)
            if q is None:
                q = self._queues[name] = PyQueue(name, components, capacity)
        if not isinstance(q, PyQueue) or q.components != components:
            raise ResourceError(f"queue '{name}' exists with another kind or number of components")
        return q

    def queues(self) -> dict:
        return dict(self._queues)

    def set_step_timeout(self, timeout_ms: int) -> None:
        """The deadline of blocking ops in the interpreter's current step (this thread)."""
        self._step.timeout_ms = int(timeout_ms or 0)

    def step_timeout_ms(self) -> int:
        return getattr(self._step, "timeout_ms", 0)

    def close_queues(self, cancel_pending_enqueues: bool = True) -> None:
        """Close every queue and accumulator (a closing session: blocked steps end instead of
        hanging)."""
        for q in list(self._queues.values()):
            q.close(cancel_pending_enqueues)
        for acc in list(self.accumulators.values()):
            acc.close()
        if self.datasets is not None:
            self.datasets.close()                  # prefetch threads stop

    # --- binding a step ----------------------------------------------------------------
    def runtime_struct(self, variables: Sequence[TensorSpec], streams: Sequence[str],
                       queues: Sequence[dict] = (), lib=None):
        """A ``flowc_runtime`` giving a step the variables, streams and queues it declares
        (the store keeps it, and what it points to, alive)."""
        rt = ffi.new("flowc_runtime *")
        queues_arr = ffi.new("void *[]", max(len(queues), 1))
        for i, q in enumerate(queues):
            queues_arr[i] = self.c_queue(q["name"], int(q["components"]), int(q["capacity"]),
                                         lib).c
        rt.queues = queues_arr
        vars_arr = ffi.new("flowc_var *[]", max(len(variables), 1))
        gpu = gpu_exports(lib) if lib is not None else None
        for i, spec in enumerate(variables):
            v = self.variable(spec.name, spec.dtype, spec.shape)
            if gpu is not None:
                v.move_to_gpu(gpu)
            elif v.on_gpu:
                raise ResourceError(f"variable '{spec.name}' lives in GPU memory (a step placed "
                                    "it on a GPU); this step uses it on a CPU")
            vars_arr[i] = v.c
        streams_arr = ffi.new("uint64_t *[]", max(len(streams), 1))
        for i, name in enumerate(streams):
            streams_arr[i] = self._stream(name)
        rt.vars = vars_arr
        rt.streams = streams_arr
        rt.host = self._host
        rt.host_call = self._host_call
        with self._lock:
            self._keep.append((rt, vars_arr, streams_arr, queues_arr))
        return rt

    def __repr__(self) -> str:
        return f"ResourceStore({len(self._vars)} variables, {len(self._streams)} streams)"


# Host ops the runtime itself provides, imported on first use (a module registers its ops).
_BUILTIN_HOST_OPS = {"SaveV2": "runtime.checkpoint", "RestoreV2": "runtime.checkpoint",
                     **{op: "runtime.accumulators" for op in (
                         "AccumulatorApplyGradient", "AccumulatorTakeGradient",
                         "AccumulatorNumAccumulated", "AccumulatorSetGlobalStep",
                         "AccumulatorDropCounts", "AccumulatorClose",
                         "SparseAccumulatorApplyGradient", "SparseAccumulatorTakeGradient")},
                     "Print": "runtime.printing", "_PrintV2": "runtime.printing",
                     "PyFunc": "runtime.py_funcs", "PyFuncStateless": "runtime.py_funcs",
                     **{op: "runtime.datasets" for op in (
                         "DatasetDefine", "MakeIterator", "IteratorGetNext", "OneShotIterator")}}


def _find_host_op(name: str) -> HostOp:
    fn = _host_ops.get(name)
    if fn is None and name in _BUILTIN_HOST_OPS:
        import importlib
        importlib.import_module(_BUILTIN_HOST_OPS[name])
        fn = _host_ops.get(name)
    if fn is None:
        raise FlowcError(f"no host op '{name}' is registered in this runtime")
    return fn


def _set_c_string(field, text: str, size: int) -> None:
    encoded = text.encode(errors="replace")[:size - 1]
    ffi.memmove(field, encoded + b"\0", len(encoded) + 1)


def _host_call_trampoline(host, op, node, attrs, n_in, inputs, n_out, outputs, status) -> int:
    """Called from generated code: runs a registered host op, reports errors in ``status``.

    Outputs whose ``data`` the generated code already allocated (static shapes) receive a
    copy of the result after their dtype and shape are checked; the others get a new buffer.
    Every output is checked before any is written. On error ``status`` gets the code (an
    exception's ``status_code``: its class's, ``runtime.errors.status_code_of``), the message
    and the node; the location is left empty for the kernel to fill from its ``flowc_loc``.
    """
    node_name = ""
    try:
        node_name = ffi.string(node).decode(errors="replace") if node != ffi.NULL else ""
        store = ffi.from_handle(host)
        name = ffi.string(op).decode()
        fn = _find_host_op(name)
        attr_values = json.loads(ffi.string(attrs).decode()) if attrs != ffi.NULL else {}
        args = [_tensor_to_array(inputs[i]) for i in range(n_in)]
        results = fn(store, node_name, attr_values, *args)
        if len(results) != n_out:
            raise FlowcError(f"host op '{name}' returned {len(results)} values, expected {n_out}")
        arrays = [np.asarray(r, order="C") for r in results]
        for i, r in enumerate(arrays):
            _check_output(r, outputs[i], _output_label(attr_values, i))
        for r, t in zip(arrays, (outputs[i] for i in range(n_out))):
            _array_to_tensor(r, t)
        return 0
    except BaseException as e:                       # never let an exception cross into C
        message = str(e) if isinstance(e, FlowcError) else f"{type(e).__name__}: {e}"
        if not isinstance(e, (FlowcError, OSError, ValueError)):
            message += "\n" + traceback.format_exc(limit=3)
        status.code = status_code_of(e)
        _set_c_string(status.message, message, 768)
        _set_c_string(status.node, node_name, 128)
        status.location[0] = b"\0"
        return status.code


def _output_label(attrs: dict, i: int) -> str:
    names = attrs.get("tensor_names") if isinstance(attrs, dict) else None
    if isinstance(names, list) and i < len(names):
        return f"output {i} ('{names[i]}')"
    return f"output {i}"


def _check_output(arr: np.ndarray, t, label: str) -> None:
    """A result must fit the rank (and, if preallocated, the dtype and dims) of its output: one
    that does not is an ``InvalidArgumentError`` (TensorFlow's, for a ``py_func`` returning
    values of another type than declared)."""
    dtype = DType.from_numpy(arr.dtype)
    if arr.ndim > 8:
        raise InvalidArgumentError(f"{label} has rank {arr.ndim}; the maximum is 8")
    want_dtype = DType.from_code(t.dtype) if t.dtype else dtype
    if t.data == ffi.NULL:
        if t.rank != arr.ndim or want_dtype is not dtype:
            raise InvalidArgumentError(f"{label}: the step expects a {want_dtype.ir_name} of rank "
                                       f"{t.rank}, the host op returned "
                                       f"{dtype.ir_name}{list(arr.shape)}")
        return
    want_shape = tuple(t.dims[0:t.rank])
    if want_dtype is not dtype or want_shape != arr.shape:
        raise InvalidArgumentError(f"{label}: the step expects "
                                   f"{want_dtype.ir_name}{list(want_shape)}, the host op "
                                   f"returned {dtype.ir_name}{list(arr.shape)}")


def _tensor_to_array(t) -> np.ndarray:
    """A copy of a C tensor's value (an empty tensor may have NULL data)."""
    dtype = DType.from_code(t.dtype).np
    shape = tuple(t.dims[0:t.rank])
    n = math.prod(shape) * dtype.itemsize
    if n == 0:
        return np.zeros(shape, dtype)
    if t.data == ffi.NULL:
        raise FlowcError(f"an input of shape {list(shape)} has no data")
    return np.frombuffer(ffi.buffer(t.data, n), dtype).reshape(shape).copy()


def _array_to_tensor(arr: np.ndarray, t) -> None:
    """Store ``arr`` in ``t``: into its buffer if it has one (checked by ``_check_output``),
    else into a new one the generated code owns (and frees)."""
    if t.data == ffi.NULL:
        t.data = _alloc(arr.nbytes)
        t.rank = arr.ndim
        t.dtype = DType.from_numpy(arr.dtype).code
        for d, n in enumerate(arr.shape):
            t.dims[d] = n
    if arr.nbytes:
        ffi.memmove(t.data, ffi.from_buffer(arr), arr.nbytes)
