"""``fl.py_func`` and ``fl.numpy_function`` (TF1's ``tf.py_func``, ``tf.numpy_function``): a
Python function as an op of the graph (``PyFunc``, or ``PyFuncStateless`` with
``stateful=False``; ``compiler/ops/py_func.py``), run with numpy arrays when the step runs, on
either backend. The function must return values of exactly the ``Tout`` types (a Python float
is a float64); its results have unknown shapes unless ``set_shape`` says. Compiled steps take
them as they come: a step that needs results of unknown rank is cut at the op and run as two
compiled steps with the function called between them (``dsl/py_func_steps.py``). No gradient,
as in TensorFlow. A C library cannot run it (no Python there).
"""
from __future__ import annotations

from typing import Callable, Optional

from dsl.ops import apply_op, convert_to_tensor
from runtime.dtypes import as_dtype
from runtime.py_funcs import register_py_func

__all__ = ["py_func", "numpy_function"]


def py_func(func: Callable, inp, Tout, stateful: bool = True,  # noqa: N803  (TF's name)
            name: Optional[str] = None):
    """An op that calls ``func(*arrays)`` with the values of ``inp``; returns a tensor where
    ``Tout`` is one dtype, a list of tensors where it is a list or tuple (the ``Operation``
    where it is empty)."""
    single = not isinstance(Tout, (list, tuple))
    tout = [as_dtype(Tout)] if single else [as_dtype(t) for t in Tout]
    inputs = [convert_to_tensor(x) for x in (inp if isinstance(inp, (list, tuple)) else [inp])]
    token = register_py_func(func)
    attrs = {"token": token, "Tin": [t.dtype for t in inputs], "Tout": tout}
    op = "PyFunc" if stateful else "PyFuncStateless"
    result = apply_op(op, [inputs], attrs, name=name or op)
    if single:
        return result[0] if isinstance(result, (list, tuple)) else result
    if not tout:
        return result
    return list(result) if isinstance(result, (list, tuple)) else [result]


def numpy_function(func: Callable, inp, Tout, stateful: bool = True,  # noqa: N803
                   name: Optional[str] = None):
    """``tf.numpy_function``: ``py_func``, whose function takes and returns numpy arrays."""
    return py_func(func, inp, Tout, stateful=stateful, name=name or "PyFunc")
