"""The C lowering of ``compiler/ops/math_special_functions.py``: each op calls its helper of
``codegen_templates/c/special_functions.c.j2`` in double (the f32 input widened, the result
rounded once), the same algorithm as the op's reference kernel. The helpers are defined once
per module; the CUDA backend reuses the expressions with the helpers as device functions."""
from __future__ import annotations

from compiler.codegen import templates
from compiler.codegen.c_ops.math import _lower, lower_binary, lower_unary
from compiler.codegen.elementwise import broadcast_output_dims
from compiler.codegen.kernel_context import KernelContext


def _call(fn: str, arity: int):
    """``(T)flowc_sf_<fn>((double)a0, ...)``, defining the helpers in the module first."""
    def expr(kc: KernelContext) -> str:
        cuda = kc.target.name == "cuda"
        qual = "static __device__" if cuda else "static"
        kc.module.add_global(templates.render("c", "special_functions.c.j2", qual=qual,
                                              cuda=cuda))
        args = ", ".join(f"(double)a{i}" for i in range(arity))
        return f"({kc.out.ctype})flowc_sf_{fn}({args})"
    return expr


for _name, _fn in (("Lgamma", "lgamma"), ("Digamma", "digamma"), ("Erfinv", "erfinv"),
                   ("Ndtri", "ndtri"), ("BesselI0e", "bessel_i0e"),
                   ("BesselI1e", "bessel_i1e")):
    lower_unary(_name, _call(_fn, 1))

for _name, _fn in (("Zeta", "zeta"), ("Polygamma", "polygamma"), ("Igamma", "igamma"),
                   ("Igammac", "igammac")):
    lower_binary(_name, _call(_fn, 2))

_lower("Betainc", _call("betainc", 3), broadcast_output_dims)
