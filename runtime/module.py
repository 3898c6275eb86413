"""Loading a compiled C module with cffi and calling its entry function.

The C side is declared once (``ABI_CDEF``); the module is opened in cffi's ABI mode, so no
extension is built per module. Calls release the GIL, so several steps may run at once.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import List, Optional, Sequence

import cffi
import numpy as np

from runtime.dtypes import DType
from runtime.errors import ArtifactError, RuntimeExecutionError
from runtime.feeds import check_feed

ABI_VERSION = 1
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
int flowc_abi_version(void);
void flowc_free(void *p);
int flowc_entry(const flowc_tensor *feeds, flowc_tensor *fetches, flowc_status *st);
"""

ffi = cffi.FFI()
ffi.cdef(ABI_CDEF)
_open_lock = threading.Lock()


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


class CModule:
    """A shared object produced by the C code generator."""

    def __init__(self, path: str):
        self.path = path
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


class Executable:
    """Runs a module's entry function: numpy arrays in, numpy arrays out."""

    def __init__(self, module: CModule, feeds: Sequence[TensorSpec], fetches: Sequence[TensorSpec]):
        self.module = module
        self.feeds = list(feeds)
        self.fetches = list(fetches)
        self._free = module.lib.flowc_free
        self._entry = module.lib.flowc_entry

    def run(self, feed_values: Sequence) -> List[np.ndarray]:
        if len(feed_values) != len(self.feeds):
            raise RuntimeExecutionError(f"expected {len(self.feeds)} feeds "
                                        f"({', '.join(f.name for f in self.feeds)}), got {len(feed_values)}")
        arrays = [check_feed(spec.name, v, spec.dtype, spec.shape)
                  for spec, v in zip(self.feeds, feed_values)]
        c_feeds = ffi.new("flowc_tensor[]", max(len(arrays), 1))
        keep = []
        for t, arr in zip(c_feeds, arrays):
            if arr.ndim > MAX_RANK:
                raise RuntimeExecutionError(f"rank {arr.ndim} exceeds the maximum {MAX_RANK}")
            buf = ffi.from_buffer(arr) if arr.size else ffi.NULL
            keep.append(buf)
            t.data = buf
            t.rank = arr.ndim
            t.dtype = DType.from_numpy(arr.dtype).code
            t.dims[0:arr.ndim] = arr.shape
        c_fetches = ffi.new("flowc_tensor[]", max(len(self.fetches), 1))
        status = ffi.new("flowc_status *")
        rc = self._entry(c_feeds, c_fetches, status)
        if rc != 0:
            node = ffi.string(status.node).decode(errors="replace")
            loc = ffi.string(status.location).decode(errors="replace")
            msg = ffi.string(status.message).decode(errors="replace")
            where = (f"{loc}: " if loc else "") + (f"node '{node}': " if node else "")
            raise RuntimeExecutionError(where + msg, node or None, loc or None)
        return [self._take(c_fetches[i], spec) for i, spec in enumerate(self.fetches)]

    def _take(self, t, spec: TensorSpec) -> np.ndarray:
        """Wrap a fetched buffer without copying; it is freed when the array is collected."""
        shape = tuple(t.dims[0:t.rank])
        dtype = DType.from_code(t.dtype).np
        nbytes = dtype.itemsize * math.prod(shape)
        owner = ffi.gc(t.data, self._free)
        if nbytes == 0:
            return np.empty(shape, dtype=dtype)
        return np.frombuffer(ffi.buffer(owner, nbytes), dtype=dtype).reshape(shape)
