"""The optimizer ops of ONNX's training operator set (``ai.onnx.preview.training``):
Momentum (standard and Nesterov), Adagrad and Adam.

Each is a pure function of its inputs (R the learning rate, T the update count, then the
tensors to optimize, their gradients and their accumulators, n of each) with n new tensors
and n new accumulators out; as elementwise flowc ops the fuse pass makes each update one
kernel. The step count ``T`` is a tensor: what depends on ``T > 0`` (the first step's
coefficients, Adam's bias correction) is a select, not a branch at import time.
"""
from __future__ import annotations

from typing import List

import dsl as fl
from dsl.onnx.values import binary, scalar, unary
from dsl.ops import apply_op

DOMAIN = "ai.onnx.preview.training"


def _groups(ctx, per: int) -> List[list]:
    """The node's inputs after R and T as ``per`` groups of n tensors (X, G, V, ...)."""
    rest = len(ctx.inputs) - 2
    if rest <= 0 or rest % per:
        raise ctx.error(f"expects R, T and {per} groups of tensors of equal size, got "
                        f"{len(ctx.inputs)} inputs")
    n = rest // per
    return [[ctx.input(2 + k * n + i) for i in range(n)] for k in range(per)]


def _scalar_of(t, like):
    """A scalar input (R or T) as a scalar of ``like``'s dtype."""
    return fl.cast(apply_op("Reshape", [t, fl.constant([], dtype=fl.int64)]), like.dtype)


def _first_step(ctx, x):
    """Boolean scalar: T == 0 (no update has happened yet)."""
    t = apply_op("Reshape", [ctx.input(1), fl.constant([], dtype=fl.int64)])
    return binary("LessEqual", t, scalar(0, t))


def _regularized(ctx, x, g, name="norm_coefficient"):
    """g + norm_coefficient * x (the gradient of the L2 regularizer added)."""
    c = float(ctx.attr(name, 0.0))
    return g if c == 0.0 else binary("AddV2", binary("Mul", scalar(c, x), x), g)


def lower_momentum(ctx):
    xs, gs, vs = _groups(ctx, 3)
    alpha, beta = float(ctx.attr("alpha")), float(ctx.attr("beta"))
    mode = ctx.attr("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise ctx.error(f"unknown mode '{mode}' (expected 'standard' or 'nesterov')")
    new_x, new_v = [], []
    for x, g, v in zip(xs, gs, vs):
        r = _scalar_of(ctx.input(0), x)
        g = _regularized(ctx, x, g)
        # the gradient's coefficient is 1 on the first step
        b = fl.where(_first_step(ctx, x), scalar(1.0, x), scalar(beta, x))
        v_new = binary("AddV2", binary("Mul", scalar(alpha, x), v), binary("Mul", b, g))
        step = v_new if mode == "standard" else binary(
            "AddV2", g, binary("Mul", scalar(alpha, x), v_new))
        new_x.append(binary("Sub", x, binary("Mul", r, step)))
        new_v.append(v_new)
    return new_x + new_v


def lower_adagrad(ctx):
    xs, gs, hs = _groups(ctx, 3)
    decay = float(ctx.attr("decay_factor", 0.0))
    epsilon = float(ctx.attr("epsilon", 0.0))
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        r = _scalar_of(ctx.input(0), x)
        t = _scalar_of(ctx.input(1), x)
        # the learning rate decays with the update count: R / (1 + T * decay_factor)
        r = binary("RealDiv", r, binary("AddV2", scalar(1.0, x),
                                         binary("Mul", t, scalar(decay, x))))
        g = _regularized(ctx, x, g)
        h_new = binary("AddV2", h, binary("Mul", g, g))
        root = binary("AddV2", unary("Sqrt", h_new), scalar(epsilon, x))
        new_x.append(binary("Sub", x, binary("RealDiv", binary("Mul", r, g), root)))
        new_h.append(h_new)
    return new_x + new_h


def lower_adam(ctx):
    xs, gs, vs, hs = _groups(ctx, 4)
    alpha, beta = float(ctx.attr("alpha", 0.9)), float(ctx.attr("beta", 0.999))
    epsilon = float(ctx.attr("epsilon", 0.0))
    post = float(ctx.attr("norm_coefficient_post", 0.0))
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        r = _scalar_of(ctx.input(0), x)
        t = _scalar_of(ctx.input(1), x)
        g = _regularized(ctx, x, g)
        v_new = binary("AddV2", binary("Mul", scalar(alpha, x), v),
                       binary("Mul", scalar(1.0 - alpha, x), g))
        h_new = binary("AddV2", binary("Mul", scalar(beta, x), h),
                       binary("Mul", scalar(1.0 - beta, x), binary("Mul", g, g)))
        root = binary("AddV2", unary("Sqrt", h_new), scalar(epsilon, x))
        # bias correction from the second step on: R * sqrt(1 - beta^T) / (1 - alpha^T)
        corrected = binary("RealDiv", binary("Mul", r, unary("Sqrt", binary(
            "Sub", scalar(1.0, x), binary("Pow", scalar(beta, x), t)))),
            binary("Sub", scalar(1.0, x), binary("Pow", scalar(alpha, x), t)))
        r = fl.where(_first_step(ctx, x), r, corrected)
        x_new = binary("Sub", x, binary("Mul", r, binary("RealDiv", v_new, root)))
        if post != 0.0:
            x_new = binary("Mul", scalar(1.0 - post, x), x_new)
        new_x.append(x_new)
        new_v.append(v_new)
        new_h.append(h_new)
    return new_x + new_v + new_h


LOWERINGS = {
    "Momentum": [(1, None, lower_momentum)],
    "Adagrad": [(1, None, lower_adagrad)],
    "Adam": [(1, None, lower_adam)],
}
