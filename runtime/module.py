"""Loading a compiled C module with cffi and calling its entry function.

The C side is declared once (``ABI_CDEF``); the module is opened in cffi's ABI mode, so no
extension is built per module. Calls release the GIL, so several steps may run at once.

The run path is kept short: feed checks, fetch readers and the C argument buffers are built
once per executable (the buffers once per thread), so a call only fills in pointers and dims.
"""
from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from typing import List, Optional, Sequence

import cffi
import numpy as np

from runtime import fastcall
from runtime.openmp import load_libgomp_passive
from runtime.dtypes import DType
from runtime.errors import STATUS_CLASSES, ArtifactError, FeedError, OpError, class_for_status
from runtime.feeds import FeedCheck

ABI_VERSION = 4
MAX_RANK = 8

ABI_CDEF = """
typedef struct flowc_tensor {
    void *data;
    int64_t dims[8];
    int32_t rank;
    int32_t dtype;
} flowc_tensor;
typedef struct flowc_status {
    int32_t code;
    char node[128];
    char location[256];
    char message[768];
} flowc_status;
typedef struct flowc_var {
    flowc_tensor value;
    int64_t capacity;
    int32_t initialized;
    int32_t dtype;
    int32_t lock;
    int32_t reserved;
    char name[128];
} flowc_var;
typedef struct flowc_runtime {
    flowc_var **vars;
    uint64_t **streams;
    void **queues;
    void *rendezvous;
    int64_t timeout_ms;
    void *host;
    int (*host_call)(void *host, const char *op, const char *node, const char *attrs,
                     int32_t n_in, const flowc_tensor *in, int32_t n_out, flowc_tensor *out,
                     flowc_status *st);
} flowc_runtime;
typedef struct flowc_pool {
    int32_t lock;
    int32_t initialized;
    int64_t max_cached_bytes;
    int64_t cached_bytes;
    int64_t cached_blocks;
    int64_t live_blocks;
    int64_t hits;
    int64_t misses;
    int64_t fail_countdown;
    void *free_lists[160];
} flowc_pool;
int flowc_abi_version(void);
void flowc_free(void *p);
void flowc_use_pool(void *pool);
void flowc_pool_drop_idle(void *pool);
int flowc_entry(const flowc_tensor *feeds, flowc_tensor *fetches, const flowc_runtime *rt,
                void *rendezvous, int64_t timeout_ms, flowc_status *st);
size_t flowc_queue_struct_size(void);
int flowc_queue_create(void *q, int32_t ncomponents, int64_t capacity, const char *name);
void flowc_queue_free(void *q);
void flowc_queue_shut(void *q, int32_t cancel);
int64_t flowc_queue_length(void *q);
size_t flowc_rendezvous_size(void);
int flowc_rendezvous_init(void *rv, int32_t nslots, int64_t timeout_ms);
void flowc_rendezvous_abort(void *rv);
void flowc_rendezvous_destroy(void *rv);
int32_t flowc_profile_size(void);
const int64_t *flowc_profile_ns(void);
const int64_t *flowc_profile_calls(void);
void flowc_profile_reset(void);
int flowc_bind_constants(const void *const *data, const uint64_t *nbytes, int32_t n);
"""

ffi = cffi.FFI()
ffi.cdef(ABI_CDEF)
_open_lock = threading.Lock()

# The process's buffer pool (flowc_pool in flowc_rt.h): every module loaded here allocates
# its fetched results and dynamic-size buffers from it, and a fetched array gives its block
# back when it is collected, so a step's outputs reuse memory that is already mapped. It is
# never freed (blocks name it in their headers). See runtime/buffer_pool.py.
DEFAULT_POOL_CACHED_BYTES = 1 << 30
PROCESS_POOL = ffi.new("flowc_pool *")
PROCESS_POOL.max_cached_bytes = DEFAULT_POOL_CACHED_BYTES
PROCESS_POOL.initialized = 1
_pool_libs: list = []          # a loaded module's library, for the pool's C functions

# C types cffi can read a scalar fetch through directly (others go through numpy).
_SCALAR_CTYPES = {d: ffi.typeof(c) for d, c in (
    (DType.f32, "float *"), (DType.f64, "double *"), (DType.i8, "int8_t *"),
    (DType.i16, "int16_t *"), (DType.i32, "int32_t *"), (DType.i64, "int64_t *"),
    (DType.u8, "uint8_t *"), (DType.u16, "uint16_t *"), (DType.u32, "uint32_t *"),
    (DType.u64, "uint64_t *"), (DType.bool, "_Bool *"))}

# The run path calls cffi's backend directly where its Python-level wrappers only forward
# (ffi.from_buffer, ffi.gc): a call saves a Python frame each.
_CHAR_ARRAY = ffi.typeof("char[]")
_backend = getattr(ffi, "_backend", None)
if hasattr(_backend, "from_buffer") and hasattr(_backend, "gcp"):
    _from_buffer = _backend.from_buffer
    _gc = _backend.gcp
else:                                    # pragma: no cover  (another cffi backend)
    def _from_buffer(_ctype, obj):
        return ffi.from_buffer(obj)
    _gc = ffi.gc
_buffer = ffi.buffer
_cast = ffi.cast
_NULL = ffi.NULL


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: DType
    shape: Optional[tuple]

    def to_json(self) -> dict:
        return {"name": self.name, "dtype": self.dtype.ir_name,
                "shape": None if self.shape is None else list(self.shape)}

    @staticmethod
    def from_json(d: dict) -> "TensorSpec":
        shape = d.get("shape")
        return TensorSpec(d["name"], DType.parse(d["dtype"]), None if shape is None else tuple(shape))


class _ConstantBinding:
    """The big constants one loaded module reads (``flowc_bind_constants``): the artifact's
    blobs, mapped, and how many ``CModule``s use them. A shared object opened twice is one
    library (``dlopen`` hands back the same handle, with the same table), so the binding is
    kept per library and unbound (then unmapped) when its last ``CModule`` goes."""

    def __init__(self, digests: tuple, mappings: list, views: list):
        self.digests = digests
        self.mappings = mappings
        self.views = views
        self.users = 0

    def release(self) -> None:
        for view in self.views:
            ffi.release(view)
        for mapped in self.mappings:
            mapped.close()


_bindings_lock = threading.Lock()
_bindings: dict = {}       # a loaded library (the address of its flowc_entry) -> _ConstantBinding


def _unbind_constants(key: int, lib) -> None:
    with _bindings_lock:
        binding = _bindings[key]
        binding.users -= 1
        if binding.users:
            return
        del _bindings[key]
        lib.flowc_bind_constants(_NULL, _NULL, 0)       # the entry refuses to run from now on
    binding.release()


class CModule:
    """A shared object produced by the C code generator."""

    def __init__(self, path: str):
        self.path = path
        load_libgomp_passive()
        with _open_lock:
            try:
                self.lib = ffi.dlopen(path)
            except OSError as e:
                raise ArtifactError(f"cannot load compiled module {path}: {e}") from None
        try:
            version = self.lib.flowc_abi_version()
        except AttributeError:
            raise ArtifactError(f"{path} is not a flowc module (no flowc_abi_version)") from None
        if version != ABI_VERSION:
            raise ArtifactError(f"{path} was built for runtime ABI {version}; this runtime speaks {ABI_VERSION}")
        try:
            use_pool = self.lib.flowc_use_pool
        except AttributeError:          # a module without the pool (CUDA host objects)
            return
        use_pool(PROCESS_POOL)
        if not _pool_libs:
            _pool_libs.append(self.lib)

    def bind_constants(self, blobs: Sequence[tuple]) -> None:
        """Point the module's big constants at ``blobs``: (file name, SHA-256, its bytes
        mapped read-only) in the order of its table, already hash-checked
        (``ArtifactFolder.constants``). The module keeps the mappings while it is loaded and
        closes them after (those it does not need at once too)."""
        if not blobs:
            return
        mappings = [m for _, _, m in blobs]
        digests = tuple(d for _, d, _ in blobs)
        key = int(ffi.cast("uintptr_t", self.lib.flowc_entry))
        try:
            with _bindings_lock:
                binding = _bindings.get(key)
                if binding is None:
                    binding = self._bind(blobs, mappings, digests)
                    mappings = []                # the binding holds them now
                    _bindings[key] = binding
                elif binding.digests != digests:
                    raise ArtifactError(f"{self.path} is loaded already, bound to other "
                                        "constants; one process cannot load it with these")
                binding.users += 1
        finally:
            for mapped in mappings:
                mapped.close()
        # not at exit: a step still running on another thread would lose its constants
        weakref.finalize(self, _unbind_constants, key, self.lib).atexit = False

    def _bind(self, blobs: Sequence[tuple], mappings: list, digests: tuple) -> _ConstantBinding:
        try:
            bind = self.lib.flowc_bind_constants
        except AttributeError:
            raise ArtifactError(f"{self.path} does not read big constants from the artifact "
                                "(it exports no flowc_bind_constants)") from None
        views = [ffi.from_buffer(m) for m in mappings]
        try:
            rc = bind(ffi.new("const void *[]", views),
                      ffi.new("uint64_t[]", [len(m) for m in mappings]), len(views))
            if rc == -1:
                raise ArtifactError(f"{self.path} reads a different number of big constants "
                                    f"than the {len(views)} its manifest entry lists")
            if rc != 0:
                raise ArtifactError(f"{self.path} does not take constant {rc - 1} from "
                                    f"{blobs[rc - 1][0]} ({len(mappings[rc - 1])} bytes): it "
                                    "was generated for another size")
        except BaseException:
            for view in views:
                ffi.release(view)
            raise
        return _ConstantBinding(digests, mappings, views)


class _FetchReader:
    """Turns one fetched ``flowc_tensor`` into a numpy array (or scalar) that owns the buffer."""

    __slots__ = ("spec", "np_dtype", "static_shape", "nbytes", "scalar_ptr", "is_scalar", "free")

    def __init__(self, spec: TensorSpec, free):
        self.spec = spec
        self.np_dtype = spec.dtype.np
        shape = spec.shape
        fully = shape is not None and all(d is not None for d in shape)
        self.static_shape = tuple(shape) if fully else None
        self.nbytes = self.np_dtype.itemsize * math.prod(shape) if fully else None
        self.scalar_ptr = _SCALAR_CTYPES.get(spec.dtype) if shape == () else None
        self.is_scalar = shape == ()
        self.free = free

    def array(self, t) -> np.ndarray:
        """Wrap the buffer without copying; it is freed when the array is collected."""
        shape = self.static_shape
        if shape is None:
            shape = tuple(t.dims[0:t.rank])
            nbytes = self.np_dtype.itemsize * math.prod(shape)
        else:
            nbytes = self.nbytes
        if nbytes == 0:
            self.free(t.data)
            return np.empty(shape, dtype=self.np_dtype)
        # The array's base holds ``owner``; when the last view of it is collected, the block
        # goes back to the pool (flowc_free), never before.
        owner = _gc(t.data, self.free)
        arr = np.frombuffer(_buffer(owner, nbytes), dtype=self.np_dtype)
        return arr if len(shape) == 1 else arr.reshape(shape)

    def scalar(self, t):
        """A rank-0 fetch as a numpy scalar of the exact dtype; the buffer is freed now."""
        if self.scalar_ptr is None:
            return self.array(t)[()]
        data = t.data
        value = self.np_dtype.type(_cast(self.scalar_ptr, data)[0])
        self.free(data)
        return value


class _FeedLayout:
    """What the C struct of one feed holds on every call: its dtype code always, its rank when
    the placeholder's rank is known, its dims when its whole shape is (written once per
    thread, so a call only sets the data pointer and the dims the shape leaves open)."""

    __slots__ = ("dtype_code", "rank", "static_shape", "static_size")

    def __init__(self, spec: TensorSpec):
        self.dtype_code = spec.dtype.code
        shape = spec.shape
        self.rank = None if shape is None or len(shape) > MAX_RANK else len(shape)
        fully = self.rank is not None and all(d is not None for d in shape)
        self.static_shape = tuple(shape) if fully else None
        self.static_size = math.prod(shape) if fully else None

    def fill(self, t) -> None:
        t.dtype = self.dtype_code
        if self.rank is not None:
            t.rank = self.rank
        if self.static_shape:
            t.dims[0:self.rank] = self.static_shape


class _CallBuffers(threading.local):
    """Per-thread C argument buffers of one executable, reused across calls."""

    def __init__(self, layouts: Sequence[_FeedLayout], n_fetches: int):
        n_feeds = len(layouts)
        self.feed_array = ffi.new("flowc_tensor[]", max(n_feeds, 1))
        self.fetch_array = ffi.new("flowc_tensor[]", max(n_fetches, 1))
        self.status = ffi.new("flowc_status *")
        # Plain pointers (cheaper to pass than arrays) and the per-tensor structs.
        self.feeds_ptr = ffi.cast("flowc_tensor *", self.feed_array)
        self.fetches_ptr = ffi.cast("flowc_tensor *", self.fetch_array)
        self.feeds = [self.feed_array[i] for i in range(n_feeds)]
        for t, layout in zip(self.feeds, layouts):
            layout.fill(t)
        self.fetches = [self.fetch_array[i] for i in range(n_fetches)]


class Executable:
    """Runs a module's entry function: numpy arrays in, numpy arrays out.

    ``variables`` and ``streams`` are the state the step uses (manifest order); a call binds
    them to a ``ResourceStore`` (the session's), creating what is missing there.
    """

    def __init__(self, module: CModule, feeds: Sequence[TensorSpec], fetches: Sequence[TensorSpec],
                 variables: Sequence[TensorSpec] = (), streams: Sequence[str] = (),
                 queues: Sequence[dict] = ()):
        self.module = module
        self.feeds = list(feeds)
        self.fetches = list(fetches)
        self.variables = list(variables)
        self.streams = list(streams)
        self.queues = [dict(q) for q in queues]
        self.kernel_table: Optional[dict] = None     # --profile builds: runtime/profile.py
        self._bound = weakref.WeakKeyDictionary()    # store -> its flowc_runtime *
        # (weakref to a store, its runtime, the C run path's constant arguments for it)
        self._last_bound = (None, None, None)
        self._free = module.lib.flowc_free
        self._entry = module.lib.flowc_entry
        self.feed_checks = [FeedCheck(s.name, s.dtype, s.shape, keep_scalars=True)
                            for s in self.feeds]
        self._layouts = [_FeedLayout(s) for s in self.feeds]
        self._readers = [_FetchReader(s, self._free) for s in self.fetches]
        self._buffers = _CallBuffers(self._layouts, len(self.fetches))
        # The C run path (runtime/fastcall.py), when it could be built here: its arguments
        # that do not change between calls.
        fast = fastcall.load()
        self._fast = None if fast is None else fast.call
        if self._fast is not None:
            self._fast_entry = int(ffi.cast("uintptr_t", self._entry))
            self._fast_free = int(ffi.cast("uintptr_t", self._free))
            self._fast_feeds = tuple(
                (lay.dtype_code, -1 if lay.rank is None else lay.rank,
                 None if s.shape is None or lay.rank is None
                 else tuple(-1 if d is None else d for d in s.shape),
                 s.dtype.np.num) for lay, s in zip(self._layouts, self.feeds))
            self._fast_fetches = tuple(s.dtype.np.num for s in self.fetches)
        # True when ``call`` takes the user's values as they are and checks (and converts)
        # them itself: callers may skip ``feed_checks`` for an ndarray or numpy scalar.
        self.checks_feeds = self._fast is not None

    def run(self, feed_values: Sequence, store=None, timeout_ms: int = 0) -> List[np.ndarray]:
        """Check ``feed_values`` (in feed order) and run; every fetch comes back as an array."""
        if len(feed_values) != len(self.feeds):
            names = ", ".join(f.name for f in self.feeds) or "none"
            raise FeedError(f"expected {len(self.feeds)} feeds ({names}), got {len(feed_values)}")
        arrays = [check(v) for check, v in zip(self.feed_checks, feed_values)]
        return self.call(arrays, scalars=False, store=store)

    def bind(self, store):
        """The ``flowc_runtime`` of this step in ``store`` (built once per store)."""
        ref, rt, _ = self._last_bound
        if ref is not None and ref() is store:
            return rt
        rt = self._bound.get(store)
        if rt is None:
            rt = self._bound[store] = store.runtime_struct(self.variables, self.streams,
                                                           self.queues, self.module.lib)
        step = None
        if self._fast is not None:          # the C run path's constant arguments
            step = (self._fast_entry, int(_cast("uintptr_t", rt)), self._fast_free,
                    self._fast_feeds, self._fast_fetches)
        self._last_bound = (weakref.ref(store), rt, step)
        return rt

    def direct(self, store):
        """The C run path bound to ``store``, for a caller that runs this step many times:
        ``(run, step)`` where ``run(step, values, 0, 0, True)`` is ``call(values, store=store)``
        without its checks of the store and arguments, returning a list of fetches, or a value
        that ``finish_direct`` turns into one (a feed to convert) or raises (a failed step).
        None where the C run path could not be built."""
        if self._fast is None:
            return None
        self.bind(store)
        return self._fast, self._last_bound[2]

    def finish_direct(self, got, values: list, step: tuple) -> list:
        """What ``call`` does with a result of the C run path that is not a list of fetches."""
        return self._fast_again(got, list(values), step, _NULL, 0, True)

    def call(self, arrays: Sequence[np.ndarray], scalars: bool = True, store=None,
             rendezvous=ffi.NULL, timeout_ms: int = 0) -> list:
        """Run on arrays already checked by ``feed_checks`` (or, when ``checks_feeds``, on
        any values: those the C run path does not take as they are go through their feed
        check here); rank-0 fetches become numpy scalars when ``scalars``. State (variables,
        random streams) comes from ``store``; without one the executable keeps a store of
        its own."""
        if store is None:
            store = self._own_store()
        fast = self._fast
        if fast is not None:
            ref, _, step = self._last_bound
            if ref is None or ref() is not store:
                self.bind(store)
                step = self._last_bound[2]
            got = fast(step, arrays if type(arrays) is list else list(arrays),
                       0 if rendezvous is _NULL else int(_cast("uintptr_t", rendezvous)),
                       timeout_ms if type(timeout_ms) is int else int(timeout_ms or 0), scalars)
            if type(got) is list:
                return got
            return self._fast_again(got, list(arrays), step, rendezvous, timeout_ms, scalars)
        rt = self.bind(store)
        bufs = self._buffers
        keep = []
        for t, arr, layout in zip(bufs.feeds, arrays, self._layouts):
            shape = layout.static_shape
            if shape is not None:               # rank, dtype and dims are in the struct
                if arr.shape != shape:
                    raise _feed_shape_error(layout, arr)
                size = layout.static_size
            else:
                ndim = arr.ndim
                if ndim > MAX_RANK or (layout.rank is not None and ndim != layout.rank):
                    raise _feed_shape_error(layout, arr)
                if ndim == 1:
                    t.dims[0] = arr.shape[0]
                elif ndim:
                    t.dims[0:ndim] = arr.shape
                t.rank = ndim
                size = arr.size
            if size:
                buf = _from_buffer(_CHAR_ARRAY, arr)
                keep.append(buf)
                t.data = buf
            else:
                t.data = _NULL
        status = bufs.status
        if self._entry(bufs.feeds_ptr, bufs.fetches_ptr, rt, rendezvous,
                       timeout_ms if type(timeout_ms) is int else int(timeout_ms or 0),
                       status) != 0:
            raise _status_error(status)
        if scalars:
            return [r.scalar(t) if r.is_scalar else r.array(t)
                    for r, t in zip(self._readers, bufs.fetches)]
        return [r.array(t) for r, t in zip(self._readers, bufs.fetches)]


    def _fast_again(self, got, arrays: list, step: tuple, rendezvous, timeout_ms,
                    scalars: bool) -> list:
        """After the C run path refused a feed (``got`` is -(i + 1)): convert it with its feed
        check (or raise why it cannot be fed) and run again; a failed step (``got`` is the
        status tuple) raises its error."""
        converted = set()
        while type(got) is not list:
            if type(got) is tuple:
                code, node, loc, msg = got
                where = (f"{loc}: " if loc else "") + (f"node '{node}': " if node else "")
                raise class_for_status(code)(where + msg, node or None, loc or None, int(code))
            i = -got - 1
            if i in converted:
                raise _feed_shape_error(self._layouts[i], np.asarray(arrays[i]))
            converted.add(i)
            value = arrays[i]
            checked = self.feed_checks[i](value)      # converts, or a FeedError says why
            if checked is value:                # it passed as is: an unaligned, byte-swapped
                checked = np.array(value)       # or subclass array becomes a plain copy
            arrays[i] = checked
            got = self._fast(step, arrays,
                             0 if rendezvous is _NULL else int(_cast("uintptr_t", rendezvous)),
                             int(timeout_ms or 0), scalars)
        return got

    def _own_store(self):
        store = getattr(self, "_store", None)
        if store is None:
            from runtime.resources import ResourceStore
            store = self._store = ResourceStore()
        return store


def _feed_shape_error(layout: _FeedLayout, arr) -> FeedError:
    """A feed that reached the call without its check (``feed_checks``) and does not fit."""
    if arr.dtype.num != DType.from_code(layout.dtype_code).np.num:
        return FeedError(f"a feed has dtype {arr.dtype}; the step takes "
                         f"{DType.from_code(layout.dtype_code)}")
    if arr.ndim > MAX_RANK:
        return FeedError(f"a feed has rank {arr.ndim}; the maximum is {MAX_RANK}")
    want = "rank " + str(layout.rank) if layout.static_shape is None else \
        "shape " + str(list(layout.static_shape))
    return FeedError(f"a feed has shape {list(arr.shape)}; the step takes {want}")


def _status_error(status) -> OpError:
    """The error a failed step's ``flowc_status`` stands for: the class of its code
    (``runtime.errors.class_for_status``), its message prefixed with the node and location."""
    node = ffi.string(status.node).decode(errors="replace")
    loc = ffi.string(status.location).decode(errors="replace")
    msg = ffi.string(status.message).decode(errors="replace")
    where = (f"{loc}: " if loc else "") + (f"node '{node}': " if node else "")
    cls = class_for_status(status.code)
    return cls(where + msg, node or None, loc or None, int(status.code))


_ERROR_CLASSES = STATUS_CLASSES          # flowc_status code -> class (runtime.errors)
