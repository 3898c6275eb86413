"""TensorFlow's optimizer ops (``training_ops``): ``ApplyGradientDescent``, ``ApplyMomentum``,
``ApplyAdam``, ``ApplyAdagrad``, ``ApplyRMSProp``, ``ApplyAdadelta``, ``ApplyFtrl``,
``ApplyFtrlV2`` and their ``ResourceApply*`` forms, with
TensorFlow's inputs, attrs and update formulas.

flowc's own optimizers (``dsl/train/``) are compositions of reads and assignments, as the paper
builds them; these ops exist for graphs and programs that name them (``fl.raw_ops.ApplyAdam``,
an imported GraphDef). flowc has only resource variables, so where TensorFlow's ``Apply*`` ops
take reference tensors (``var: Ref(T)``), flowc's take the variables' handles, as their
``ResourceApply*`` forms do; their output ``out`` is the variable's value after the update
(what TensorFlow's ``out`` reference reads). The ``ResourceApply*`` forms have no output.

Every variable the op updates (``var`` and its slots) must be initialized and have the
gradient's shape; the learning rate and the other hyper-parameters are scalars (and Ftrl's in
TensorFlow's ranges: lr > 0, l1, l2, l2_shrinkage >= 0, lr_power <= 0). A failed check
leaves every variable unchanged. The update holds the variables' locks (``use_locking`` is
accepted and always honoured): concurrent steps' updates never interleave.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

import numpy as np

from compiler.errors import ExecutionError, node_error
from compiler.ir.op_registry import register_op
from compiler.ir.types import TensorType, merge_shapes, shape_str
from compiler.ops.state import _variable, declared_shape
from runtime.errors import FailedPreconditionError
from runtime.resources import ResourceError


@dataclass(frozen=True)
class TrainingOp:
    """One optimizer's op pair: its inputs in TensorFlow's order, each a variable (``var``
    and slots: ``"var"``), a scalar hyper-parameter (``"scalar"``) or the gradient
    (``"grad"``); its bool attrs with their defaults; and its update."""
    name: str                                   # "Adam" for ApplyAdam / ResourceApplyAdam
    inputs: Tuple[Tuple[str, str], ...]
    flags: Tuple[Tuple[str, bool], ...]
    update: Callable                            # (values, scalars, grad, attrs) -> new values
    doc: str
    bounds: Callable = lambda attrs: ()         # attrs -> ((scalar, ">"|">="|"<=", message),)

    @property
    def variables(self) -> List[str]:
        return [n for n, kind in self.inputs if kind == "var"]

    @property
    def scalars(self) -> List[str]:
        return [n for n, kind in self.inputs if kind == "scalar"]

    @property
    def grad(self) -> str:
        return next(n for n, kind in self.inputs if kind == "grad")


def _gradient_descent(v, s, g, attrs):
    return {"var": v["var"] - s["alpha"] * g}


def _momentum(v, s, g, attrs):
    accum = v["accum"] * s["momentum"] + g
    if attrs["use_nesterov"]:
        var = v["var"] - (g * s["lr"] + accum * s["momentum"] * s["lr"])
    else:
        var = v["var"] - accum * s["lr"]
    return {"var": var, "accum": accum}


def _adam(v, s, g, attrs):
    one = np.ones((), g.dtype)
    lr = s["lr"] * np.sqrt(one - s["beta2_power"]) / (one - s["beta1_power"])
    m = v["m"] + (g - v["m"]) * (one - s["beta1"])
    vv = v["v"] + (g * g - v["v"]) * (one - s["beta2"])
    if attrs["use_nesterov"]:
        step = (g * (one - s["beta1"]) + s["beta1"] * m) * lr / (np.sqrt(vv) + s["epsilon"])
    else:
        step = m * lr / (np.sqrt(vv) + s["epsilon"])
    return {"var": v["var"] - step, "m": m, "v": vv}


def _adagrad(v, s, g, attrs):
    accum = v["accum"] + g * g if attrs["update_slots"] else v["accum"]
    with np.errstate(divide="ignore", invalid="ignore"):
        var = v["var"] - g * s["lr"] / np.sqrt(accum)
    return {"var": var, "accum": accum}


def _rms_prop(v, s, g, attrs):
    one = np.ones((), g.dtype)
    ms = v["ms"] + (g * g - v["ms"]) * (one - s["rho"])
    with np.errstate(divide="ignore", invalid="ignore"):
        mom = v["mom"] * s["momentum"] + g * s["lr"] / np.sqrt(ms + s["epsilon"])
    return {"var": v["var"] - mom, "ms": ms, "mom": mom}


def _adadelta(v, s, g, attrs):
    one = np.ones((), g.dtype)
    accum = v["accum"] * s["rho"] + g * g * (one - s["rho"])
    update = np.sqrt(v["accum_update"] + s["epsilon"]) / np.sqrt(accum + s["epsilon"]) * g
    accum_update = v["accum_update"] * s["rho"] + update * update * (one - s["rho"])
    return {"var": v["var"] - update * s["lr"], "accum": accum, "accum_update": accum_update}


def _ftrl_power(x, lr_power):
    """``x ** -lr_power``; TensorFlow's kernels take the square root when lr_power is -0.5."""
    return np.sqrt(x) if lr_power == -0.5 else np.power(x, -lr_power)


def _ftrl(v, s, g, attrs):
    two = np.asarray(2, g.dtype)
    var, accum, lr, l1, l2 = v["var"], v["accum"], s["lr"], s["l1"], s["l2"]
    lr_power = s["lr_power"]
    g_shrunk = g + two * s["l2_shrinkage"] * var if "l2_shrinkage" in s else g
    new_accum = accum + g * g
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = _ftrl_power(new_accum, lr_power) - _ftrl_power(accum, lr_power)
        if attrs["multiply_linear_by_lr"]:
            linear = v["linear"] + g_shrunk * lr - sigma * var
            x = np.clip(linear, -l1 * lr, l1 * lr) - linear
            y = _ftrl_power(new_accum, lr_power) + two * l2 * lr
            keep = np.abs(linear) > l1 * lr
        else:
            linear = v["linear"] + g_shrunk - sigma / lr * var
            x = np.clip(linear, -l1, l1) - linear
            y = _ftrl_power(new_accum, lr_power) / lr + two * l2
            keep = np.abs(linear) > l1
        new_var = np.where(keep, x / y, np.zeros((), g.dtype))
    return {"var": new_var, "accum": new_accum, "linear": linear}


_FTRL_DOC = ("new_accum = accum + grad^2; linear += grad - (new_accum^-lr_power - "
             "accum^-lr_power) / lr * var; var = (|linear| > l1) ? (clip(linear, -l1, l1) - "
             "linear) / (new_accum^-lr_power / lr + 2 * l2) : 0; accum = new_accum "
             "(multiply_linear_by_lr: linear and l1 scaled by lr, y = new_accum^-lr_power + "
             "2 * l2 * lr).")

def _ftrl_bounds(attrs) -> tuple:
    """TensorFlow's CPU kernel's checks on the hyper-parameters (each compared with 0)."""
    lr = ((">=", "lr is not a positive scalar (or zero if multiply_linear_by_lr is set)")
          if attrs["multiply_linear_by_lr"] else
          (">", "lr is not a positive scalar (or zero if multiply_linear_by_lr is set)"))
    return (("lr",) + lr,
            ("l1", ">=", "l1 regularization strength is not a non-negative scalar"),
            ("l2", ">=", "l2 regularization strength is not a non-negative scalar"),
            ("l2_shrinkage", ">=",
             "l2 shrinkage regularization strength is not a non-negative scalar"),
            ("lr_power", "<=", "lr_power is not a non-positive scalar"))


COMPARE = {">": lambda a: a > 0, ">=": lambda a: a >= 0, "<=": lambda a: a <= 0}

TRAINING_OPS: Dict[str, TrainingOp] = {t.name: t for t in (
    TrainingOp("GradientDescent", (("var", "var"), ("alpha", "scalar"), ("delta", "grad")),
               (), _gradient_descent, "var -= alpha * delta."),
    TrainingOp("Momentum", (("var", "var"), ("accum", "var"), ("lr", "scalar"), ("grad", "grad"),
                            ("momentum", "scalar")),
               (("use_nesterov", False),), _momentum,
               "accum = accum * momentum + grad; var -= lr * accum (use_nesterov: var -= "
               "grad * lr + accum * momentum * lr)."),
    TrainingOp("Adam", (("var", "var"), ("m", "var"), ("v", "var"), ("beta1_power", "scalar"),
                        ("beta2_power", "scalar"), ("lr", "scalar"), ("beta1", "scalar"),
                        ("beta2", "scalar"), ("epsilon", "scalar"), ("grad", "grad")),
               (("use_nesterov", False),), _adam,
               "lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power); m += (grad - m) * "
               "(1 - beta1); v += (grad^2 - v) * (1 - beta2); var -= lr_t * m / (sqrt(v) + "
               "epsilon) (use_nesterov: (grad * (1 - beta1) + beta1 * m) in place of m)."),
    TrainingOp("Adagrad", (("var", "var"), ("accum", "var"), ("lr", "scalar"), ("grad", "grad")),
               (("update_slots", True),), _adagrad,
               "accum += grad^2 (when update_slots); var -= lr * grad / sqrt(accum)."),
    TrainingOp("RMSProp", (("var", "var"), ("ms", "var"), ("mom", "var"), ("lr", "scalar"),
                           ("rho", "scalar"), ("momentum", "scalar"), ("epsilon", "scalar"),
                           ("grad", "grad")),
               (), _rms_prop,
               "ms += (grad^2 - ms) * (1 - rho); mom = mom * momentum + lr * grad / "
               "sqrt(ms + epsilon); var -= mom."),
    TrainingOp("Adadelta", (("var", "var"), ("accum", "var"), ("accum_update", "var"),
                            ("lr", "scalar"), ("rho", "scalar"), ("epsilon", "scalar"),
                            ("grad", "grad")),
               (), _adadelta,
               "accum = rho * accum + (1 - rho) * grad^2; update = sqrt(accum_update + "
               "epsilon) / sqrt(accum + epsilon) * grad; accum_update = rho * accum_update + "
               "(1 - rho) * update^2; var -= lr * update."),
    TrainingOp("Ftrl", (("var", "var"), ("accum", "var"), ("linear", "var"), ("grad", "grad"),
                        ("lr", "scalar"), ("l1", "scalar"), ("l2", "scalar"),
                        ("lr_power", "scalar")),
               (("multiply_linear_by_lr", False),), _ftrl, _FTRL_DOC, _ftrl_bounds),
    TrainingOp("FtrlV2", (("var", "var"), ("accum", "var"), ("linear", "var"), ("grad", "grad"),
                          ("lr", "scalar"), ("l1", "scalar"), ("l2", "scalar"),
                          ("l2_shrinkage", "scalar"), ("lr_power", "scalar")),
               (("multiply_linear_by_lr", False),), _ftrl,
               _FTRL_DOC + " The linear term takes grad + 2 * l2_shrinkage * var in place of "
               "grad.", _ftrl_bounds),
)}


def training_op_of(op_name: str) -> TrainingOp:
    """The ``TrainingOp`` of ``ApplyX`` or ``ResourceApplyX``."""
    base = op_name[len("Resource"):] if op_name.startswith("Resource") else op_name
    return TRAINING_OPS[base[len("Apply"):]]


# --- shape functions -----------------------------------------------------------------------
def _shape_fn(spec: TrainingOp, has_output: bool):
    def shape(ctx):
        names = [n for n, _ in spec.inputs]
        for name in spec.scalars:
            s = ctx.input_shape(names.index(name))
            if s is not None and len(s) != 0:
                raise ctx.error(f"{name} is not a scalar: {shape_str(s)}")
        g = ctx.input_shape(names.index(spec.grad))
        merged = g
        for name in spec.variables:
            declared = declared_shape(ctx.node.inputs[names.index(name)])
            try:
                merged = merge_shapes(merged, declared)
            except ValueError:
                other = spec.grad if name == "var" else "var"
                raise ctx.error(f"{name} and {other} do not have the same shape: {name} is "
                                f"{shape_str(declared)}, {other} is {shape_str(merged)}") from None
        if not has_output:
            return []
        return [TensorType(ctx.input_dtype(names.index(spec.grad)), merged)]
    return shape


# --- reference kernels ---------------------------------------------------------------------
def _kernel(spec: TrainingOp, has_output: bool):
    names = [n for n, _ in spec.inputs]

    def kernel(ctx, *arrays):
        inputs = dict(zip(names, arrays))
        scalars = {}
        for name in spec.scalars:
            a = np.asarray(inputs[name])
            if a.ndim != 0:
                raise ExecutionError(f"{name} is not a scalar: {list(a.shape)}", ctx.node)
            scalars[name] = a
        for name, relation, message in spec.bounds(ctx.attrs):
            if name in scalars and not COMPARE[relation](scalars[name]):
                raise ExecutionError(f"{message}: {scalars[name]}", ctx.node)
        grad = np.asarray(inputs[spec.grad])
        variables = {name: _variable(ctx, inputs[name]) for name in spec.variables}
        unique = sorted({id(v): v for v in variables.values()}.values(), key=id)
        with contextlib.ExitStack() as locks:
            for v in unique:                  # one order everywhere: no deadlock
                locks.enter_context(v.lock)
            values = {}
            for name, var in variables.items():
                if not var.initialized:
                    raise node_error(FailedPreconditionError, f"variable '{var.info.name}' "
                                     f"({name}) is not initialized (run its initializer or "
                                     "restore it from a checkpoint)", ctx.node)
                values[name] = var._read()
                if values[name].shape != grad.shape:
                    raise ExecutionError(f"{name} and {spec.grad} do not have the same shape: "
                                         f"variable '{var.info.name}' is "
                                         f"{list(values[name].shape)}, {spec.grad} is "
                                         f"{list(grad.shape)}", ctx.node)
            new = spec.update(values, scalars, grad, ctx.attrs)
            try:
                for name, value in new.items():
                    variables[name]._assign(np.asarray(value, grad.dtype))
            except ResourceError as e:
                raise ExecutionError(str(e), ctx.node) from None
            result = np.array(new["var"], grad.dtype)
        return [result] if has_output else []
    return kernel


# --- registrations ---------------------------------------------------------------------------
for _spec in TRAINING_OPS.values():
    _flags = ["use_locking: bool = false"] + [f"{n}: bool = {str(d).lower()}"
                                              for n, d in _spec.flags]
    for _resource in (False, True):
        _op = ("ResourceApply" if _resource else "Apply") + _spec.name
        register_op(
            _op, inputs=[f"{n}: resource" if kind == "var" else f"{n}: T"
                         for n, kind in _spec.inputs],
            outputs=[] if _resource else ["out: T"],
            attrs=["T: {f32, f64}"] + _flags,
            shape=_shape_fn(_spec, not _resource), kernel=_kernel(_spec, not _resource),
            stateful=True,
            doc=_spec.doc + ("" if _resource else " Returns the variable's new value (flowc's "
                             "variables are resources: var and the slots are handles)."))
