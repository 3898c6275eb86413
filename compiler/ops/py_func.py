"""``PyFunc`` and ``PyFuncStateless`` (TF1's ``tf.py_func`` / ``tf.numpy_function``): a Python
function, found by the ``token`` attr in ``runtime/py_funcs.py``'s registry, called with the
inputs as numpy arrays; its results are the outputs, of the ``Tout`` types and shapes known only
when it returns (unknown rank, unless the graph's builder ``set_shape``s them).

The reference kernel calls the function directly, compiled C through the runtime's host-call
hook (``compiler/codegen/c_ops/py_func.py``), so both behave alike; a C library, which has no
Python, refuses the op at run time. ``PyFunc`` is stateful (never merged, folded or pruned
while something needs it); ``PyFuncStateless`` may be merged with an identical call but is
never folded either: the function runs when the step does, not when it is compiled.
"""
from __future__ import annotations

from compiler.ir.op_registry import register_op
from compiler.ir.types import TensorType
from runtime.py_funcs import call_py_func


def _py_func_shape(ctx):
    return [TensorType(t, None) for t in ctx.attr("Tout")]


def _py_func_kernel(ctx, *inputs):
    return call_py_func(ctx.attrs["token"], inputs, ctx.attrs["Tout"])


for _name, _stateful in (("PyFunc", True), ("PyFuncStateless", False)):
    register_op(_name, inputs=["input: Tin"], outputs=["output: Tout"],
                attrs=["token: string", "Tin: list(type)", "Tout: list(type)"],
                shape=_py_func_shape, kernel=_py_func_kernel, stateful=_stateful,
                group="other", half_native=True, never_fold=True,
                c_rank_hint="give the py_func's results their shapes with set_shape; "
                            "fl.Session cuts a step at such a py_func, unless a node waits "
                            "on the py_func's inputs by a control edge alone",
                doc="The outputs of the Python function registered under ``token`` called "
                    "with the inputs as numpy arrays (``tf.py_func``).")
