"""The C lowering of Reshape, ExpandDims and Squeeze: views of their input (no kernel), so
only their output dims, resolved and checked at run time where they are not static."""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import (_c, _constant_axis, _elements, _int64_array,
                                                 _support, _values)
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.array.views import _squeeze_axes


def _reshape_c_dims(kc: KernelContext) -> List[List[str]]:
    """Output dims resolved at run time by ``flowc_arr_reshape_*`` (checks the request too)."""
    x, out = kc.inputs[0], kc.out
    request = _elements(kc, 1, out.rank)
    for k, r in enumerate(request):
        if isinstance(r, str):
            kc.check(f"{r} >= -1", f"Size {k} must be non-negative, not %lld", f"(long long){r}")
    maybe_unknown = [r for r in request if r == -1 or isinstance(r, str)]
    if len(maybe_unknown) > 1 and any(isinstance(r, str) for r in request):
        kc.check(" + ".join(f"({_c(r)} == -1)" for r in maybe_unknown) + " <= 1",
                 "Only one input size may be -1")
    _support(kc)
    args = f"{len(request)}, {_int64_array(request)}, {x.rank}, {_int64_array(_values(x))}"
    fmt = "[" + ", ".join("%lld" for _ in request) + "]"
    kc.check(f"flowc_arr_reshape_resolve({args}, (int64_t[{max(len(request), 1)}]){{0}}) == 0",
             f"Input to reshape is a tensor with %lld values, but the requested shape {fmt} "
             "does not fit it", f"(long long)({x.size})", *[f"(long long){_c(r)}" for r in request])
    return [[str(r) if isinstance(r, int) and r >= 0 else f"flowc_arr_reshape_dim({args}, {k})"
             for k, r in enumerate(request)]]


set_c_kernel("Reshape", None, _reshape_c_dims)


def _expand_dims_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    a = _constant_axis(kc, 1, x.rank + 1)
    return [x.dims[:a] + ["1"] + x.dims[a:]]


set_c_kernel("ExpandDims", None, _expand_dims_c_dims)


def _squeeze_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    dims = kc.attr("squeeze_dims")
    if not dims:
        axes = [k for k in range(x.rank) if x.shape[k] == 1]
    else:
        axes = _squeeze_axes(dims, x.rank)
    for a in axes:
        if x.shape[a] is None:
            kc.check(f"{x.dim(a)} == 1",
                     f"Can not squeeze dim[{a}], expected a dimension of 1, got %lld",
                     f"(long long){x.dim(a)}")
    return [[x.dim(k) for k in range(x.rank) if k not in axes]]


set_c_kernel("Squeeze", None, _squeeze_c_dims)
