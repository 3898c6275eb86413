"""The C lowering of the optimizer ops (``compiler/ops/training.py``): ``ApplyX`` and
``ResourceApplyX`` as one loop that updates the variable and its slots in place
(``codegen_templates/c/training.c.j2``), after checking that each variable is initialized and
has the gradient's shape and that the hyper-parameters are scalars: a failed check changes
nothing."""
from __future__ import annotations

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.training import TRAINING_OPS, training_op_of


def _var_expr(kc: KernelContext, i: int) -> str:
    return f"FLOWC_VAR({kc.inputs[i].var})"


def _check_variable(kc: KernelContext, i: int, name: str, grad) -> None:
    v = _var_expr(kc, i)
    kc.checks.append(f"if (!{v}->initialized) "
                     + kc.fail(f"variable '%s' ({name}) is not initialized (run its initializer "
                               "or restore it from a checkpoint)", f"{v}->name",
                               code="FLOWC_FAILED_PRECONDITION"))
    kc.check(f"{v}->value.rank == {grad.rank}",
             f"{name} and the gradient do not have the same shape: variable '%s' has rank %d, "
             f"the gradient {grad.rank}", f"{v}->name", f"(int){v}->value.rank")
    for d in range(grad.rank):
        kc.check(f"{v}->value.dims[{d}] == {grad.dim(d)}",
                 f"{name} and the gradient do not have the same shape: variable '%s' has dim "
                 f"{d} = %lld, the gradient %lld", f"{v}->name",
                 f"(long long){v}->value.dims[{d}]", f"(long long)({grad.dim(d)})")


def _emit(kc: KernelContext) -> str:
    spec = training_op_of(kc.node.op)
    names = [n for n, _ in spec.inputs]
    grad = kc.inputs[names.index(spec.grad)]
    variables = []
    for name in spec.variables:
        i = names.index(name)
        _check_variable(kc, i, name, grad)
        variables.append((name, _var_expr(kc, i)))
    scalars = []
    for name in spec.scalars:
        i = names.index(name)
        kc.check_scalar(i, name)
        scalars.append((name, kc.inputs[i]))
    for name, relation, message in spec.bounds(kc.attrs):
        if name in names:
            ref = kc.inputs[names.index(name)]
            kc.check(f"{ref.data}[0] {relation} 0", f"{message}: %g", f"(double){ref.data}[0]")
    flags = {n: kc.attr(n) for n, _ in spec.flags}
    return kc.render("training.c.j2", op=spec.name, variables=variables, scalars=scalars,
                     grad=grad, sqrt=kc.math("sqrt", grad.dtype),
                     pow=kc.math("pow", grad.dtype), fabs=kc.math("fabs", grad.dtype),
                     has_output=bool(kc.outputs), **flags)


def _out_dims(kc: KernelContext):
    spec = training_op_of(kc.node.op)
    grad = kc.inputs[[n for n, _ in spec.inputs].index(spec.grad)]
    return [grad.dims]


for _name in TRAINING_OPS:
    set_c_kernel(f"Apply{_name}", _emit, _out_dims)
    set_c_kernel(f"ResourceApply{_name}", _emit)
