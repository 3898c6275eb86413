"""Python functions called from a step (``tf.py_func`` / ``tf.numpy_function``: the ``PyFunc``
and ``PyFuncStateless`` ops): the registry the ops find their function in by ``token``, and the
call both backends make (the reference kernel directly, compiled C through the host-call hook),
so a function behaves the same in each.

As in TensorFlow (``script_ops.FuncRegistry`` and ``py_func.cc``):
- The function gets one numpy array per input and returns one value per ``Tout`` entry: a
  list or tuple, a single value where ``Tout`` has one entry, ``None`` where it has none.
- Each value is ``np.asarray``'d as it is; its dtype must be ``Tout``'s (a Python float is a
  float64, and not a float32 output): else an ``InvalidArgumentError``, as TF raises.
- An exception of the function becomes TensorFlow's error class for it: an ``OpError`` keeps
  its class, ``ValueError``/``TypeError`` are ``InvalidArgumentError``, ``StopIteration`` is
  ``OutOfRangeError``, ``MemoryError`` is ``ResourceExhaustedError``,
  ``NotImplementedError`` is ``UnimplementedError``, anything else ``UnknownError``; the
  message is the exception's type and text and the end of its traceback. The node is named
  by whoever calls (the interpreter, or the host-call hook).

The registry lives as long as the process (TF ties functions to their graph; a token here
names one function for good). A C library has no Python: its host-call hook refuses the op.
"""
from __future__ import annotations

import itertools
import threading
import traceback
from typing import Callable, Dict, List, Sequence

import numpy as np

from runtime.dtypes import DType
from runtime.errors import (InvalidArgumentError, OpError, OutOfRangeError,
                            ResourceExhaustedError, UnimplementedError, UnknownError)
from runtime.resources import register_host_op

__all__ = ["register_py_func", "call_py_func", "py_func_of"]

_funcs: Dict[str, Callable] = {}
_tokens = itertools.count()
_lock = threading.Lock()


def register_py_func(func: Callable) -> str:
    """Keep ``func`` for the ops that call it; returns their ``token`` (``pyfunc_N``)."""
    if not callable(func):
        raise TypeError(f"func must be callable, got {type(func).__name__}")
    with _lock:
        token = f"pyfunc_{next(_tokens)}"
        _funcs[token] = func
    return token


def py_func_of(token: str) -> Callable:
    fn = _funcs.get(token)
    if fn is None:
        raise InvalidArgumentError(f"callback {token} is not found (a py_func's function lives "
                                   "in the Python process that built its graph)")
    return fn


def _error_for(e: BaseException) -> OpError:
    if isinstance(e, OpError):
        return e
    text = f"{type(e).__name__}: {e}\n" + "".join(traceback.format_tb(e.__traceback__, limit=-3))
    if isinstance(e, (ValueError, TypeError)):
        return InvalidArgumentError(text.rstrip())
    if isinstance(e, StopIteration):
        return OutOfRangeError(text.rstrip())
    if isinstance(e, MemoryError):
        return ResourceExhaustedError(text.rstrip())
    if isinstance(e, NotImplementedError):
        return UnimplementedError(text.rstrip())
    return UnknownError(text.rstrip())


def call_py_func(token: str, inputs: Sequence[np.ndarray],
                 tout: Sequence[DType]) -> List[np.ndarray]:
    """Run the function ``token`` on ``inputs``; its results as arrays of the ``tout`` types."""
    fn = py_func_of(token)
    try:
        ret = fn(*[np.asarray(x) for x in inputs])
    except Exception as e:              # the function's failure, in TF's class for it
        raise _error_for(e) from e
    if ret is None and not tout:
        values: list = []
    elif isinstance(ret, (list, tuple)):
        values = list(ret)
    else:
        values = [ret]
    if len(values) != len(tout):
        raise InvalidArgumentError(f"{token} returns {len(values)} values, but expects to see "
                                   f"{len(tout)} values.")
    out = []
    for i, (v, want) in enumerate(zip(values, tout)):
        try:
            arr = np.asarray(v, order="C")
            got = DType.from_numpy(arr.dtype)
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"{token}: return value {i} cannot be a tensor "
                                       f"({type(v).__name__}): {e}") from e
        if got is not want:
            raise InvalidArgumentError(f"{token} returns {got.ir_name} values, but expects "
                                       f"to see {want.ir_name}")
        out.append(arr)
    return out


def _py_func_host(store, node, attrs, *inputs):
    return call_py_func(attrs["token"], inputs, [DType.parse(t) for t in attrs["Tout"]])


register_host_op("PyFunc", _py_func_host)
register_host_op("PyFuncStateless", _py_func_host)
