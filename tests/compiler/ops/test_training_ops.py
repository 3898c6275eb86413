"""TensorFlow's optimizer ops (ApplyGradientDescent, ApplyMomentum, ApplyAdam, ApplyAdagrad,
ApplyRMSProp, ApplyAdadelta, ApplyFtrl, ApplyFtrlV2 and their ResourceApply* forms): a few steps in compiled C and in the numpy
interpreter against TensorFlow's update formulas written out here in numpy, for f32 and f64,
with use_nesterov / update_slots; their checks (uninitialized slot, gradient of another shape,
a learning rate that is not a scalar) leave every variable unchanged."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from runtime.errors import FailedPreconditionError, FlowcError

SHAPE = (3, 4)


def _tf_update(op, var, slots, grad, h, attrs):
    """TensorFlow's formulas (core/kernels/training_ops.cc), in float64 then cast."""
    if op == "GradientDescent":
        return var - h["alpha"] * grad, {}
    if op == "Momentum":
        accum = slots["accum"] * h["momentum"] + grad
        if attrs.get("use_nesterov"):
            return var - grad * h["lr"] - accum * h["momentum"] * h["lr"], {"accum": accum}
        return var - accum * h["lr"], {"accum": accum}
    if op == "Adam":
        lr = h["lr"] * np.sqrt(1 - h["beta2_power"]) / (1 - h["beta1_power"])
        m = slots["m"] + (grad - slots["m"]) * (1 - h["beta1"])
        v = slots["v"] + (grad ** 2 - slots["v"]) * (1 - h["beta2"])
        step_m = grad * (1 - h["beta1"]) + h["beta1"] * m if attrs.get("use_nesterov") else m
        return var - lr * step_m / (np.sqrt(v) + h["epsilon"]), {"m": m, "v": v}
    if op == "Adagrad":
        accum = slots["accum"] + grad ** 2 if attrs.get("update_slots", True) else slots["accum"]
        return var - h["lr"] * grad / np.sqrt(accum), {"accum": accum}
    if op == "RMSProp":
        ms = h["rho"] * slots["ms"] + (1 - h["rho"]) * grad ** 2
        mom = h["momentum"] * slots["mom"] + h["lr"] * grad / np.sqrt(ms + h["epsilon"])
        return var - mom, {"ms": ms, "mom": mom}
    if op == "Adadelta":
        accum = h["rho"] * slots["accum"] + (1 - h["rho"]) * grad ** 2
        update = np.sqrt(slots["accum_update"] + h["epsilon"]) / np.sqrt(accum + h["epsilon"]) \
            * grad
        accum_update = h["rho"] * slots["accum_update"] + (1 - h["rho"]) * update ** 2
        return var - h["lr"] * update, {"accum": accum, "accum_update": accum_update}
    if op in ("Ftrl", "FtrlV2"):
        p, lr = -h["lr_power"], h["lr"]
        shrunk = grad + 2 * h.get("l2_shrinkage", 0.0) * var
        new_accum = slots["accum"] + grad ** 2
        sigma = new_accum ** p - slots["accum"] ** p
        if attrs.get("multiply_linear_by_lr"):
            linear = slots["linear"] + shrunk * lr - sigma * var
            l1, y = h["l1"] * lr, new_accum ** p + 2 * h["l2"] * lr
        else:
            linear = slots["linear"] + shrunk - sigma / lr * var
            l1, y = h["l1"], new_accum ** p / lr + 2 * h["l2"]
        new_var = np.where(np.abs(linear) > l1, (np.sign(linear) * l1 - linear) / y, 0.0)
        return new_var, {"accum": new_accum, "linear": linear}
    raise AssertionError(op)


CASES = [
    ("GradientDescent", (), {"alpha": 0.1}, {}),
    ("Momentum", ("accum",), {"lr": 0.05, "momentum": 0.9}, {}),
    ("Momentum", ("accum",), {"lr": 0.05, "momentum": 0.9}, {"use_nesterov": True}),
    ("Adam", ("m", "v"), {"beta1_power": 0.9 ** 3, "beta2_power": 0.999 ** 3, "lr": 0.01,
                          "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7}, {}),
    ("Adam", ("m", "v"), {"beta1_power": 0.9, "beta2_power": 0.999, "lr": 0.01, "beta1": 0.9,
                          "beta2": 0.999, "epsilon": 1e-7}, {"use_nesterov": True}),
    ("Adagrad", ("accum",), {"lr": 0.1}, {}),
    ("Adagrad", ("accum",), {"lr": 0.1}, {"update_slots": False}),
    ("RMSProp", ("ms", "mom"), {"lr": 0.01, "rho": 0.9, "momentum": 0.5, "epsilon": 1e-6}, {}),
    ("Adadelta", ("accum", "accum_update"), {"lr": 0.5, "rho": 0.95, "epsilon": 1e-6}, {}),
    ("Ftrl", ("accum", "linear"), {"lr": 0.1, "l1": 0.3, "l2": 0.2, "lr_power": -0.5}, {}),
    ("Ftrl", ("accum", "linear"), {"lr": 0.1, "l1": 0.3, "l2": 0.2, "lr_power": -0.7},
     {"multiply_linear_by_lr": True}),
    ("FtrlV2", ("accum", "linear"), {"lr": 0.1, "l1": 0.3, "l2": 0.2, "l2_shrinkage": 0.1,
                                     "lr_power": -0.6}, {}),
]
GRAD_NAME = {"GradientDescent": "delta"}


def _build(op, slot_names, hyper, attrs, dtype, resource, rng):
    init = {"var": rng.standard_normal(SHAPE)}
    for s in slot_names:                 # accumulators of squares start positive
        init[s] = rng.uniform(0.1, 1.0, SHAPE) if s in ("v", "ms", "accum", "accum_update") else \
            rng.standard_normal(SHAPE)
    variables = {k: fl.Variable(v.astype(dtype.np), name=k) for k, v in init.items()}
    grad = fl.placeholder(dtype, [None, 4], name="grad")
    kwargs = dict(variables)
    kwargs.update({k: fl.constant(v, dtype=dtype) for k, v in hyper.items()})
    kwargs[GRAD_NAME.get(op, "grad")] = grad
    kwargs.update(attrs)
    name = ("ResourceApply" if resource else "Apply") + op
    out = getattr(fl.raw_ops, name)(**kwargs)
    return variables, grad, out, init


@pytest.mark.parametrize("resource", [False, True], ids=["Apply", "ResourceApply"])
@pytest.mark.parametrize("op,slots,hyper,attrs", CASES,
                         ids=[f"{c[0]}{''.join('-' + k for k in c[3])}" for c in CASES])
def test_update_follows_tensorflows_formula(graph, rng, op, slots, hyper, attrs, resource):
    grads = [rng.standard_normal(SHAPE) for _ in range(3)]
    per_dtype = {}
    for dtype in (fl.float32, fl.float64):
        variables, grad, out, init = _build(op, slots, hyper, attrs, dtype, resource, rng)
        if resource:
            assert isinstance(out, fl.Operation)
        else:
            assert out.dtype is dtype and out.shape == SHAPE
        per_dtype[dtype] = (variables, grad, out, init)
    init_op = fl.global_variables_initializer()
    for dtype, (variables, grad, out, init) in per_dtype.items():
        want_var = init["var"].copy()
        want_slots = {k: init[k].copy() for k in slots}
        for g in grads:
            want_var, new = _tf_update(op, want_var, want_slots, g, hyper, attrs)
            want_slots.update(new)
        tol = dict(rtol=2e-5, atol=1e-6) if dtype is fl.float32 else dict(rtol=1e-12, atol=1e-13)
        for backend in ("interpreter", "c"):
            with fl.Session(graph=graph, backend=backend) as s:
                s.run(init_op)
                for g in grads:
                    got = s.run(out, {grad: g.astype(dtype.np)})
                    if not resource:          # out: the variable's value after the update
                        np.testing.assert_array_equal(got, s.run(variables["var"]))
                np.testing.assert_allclose(s.run(variables["var"]), want_var, **tol,
                                           err_msg=f"{backend} {dtype}")
                for k in slots:
                    np.testing.assert_allclose(s.run(variables[k]), want_slots[k], **tol,
                                               err_msg=f"{backend} {dtype} {k}")


def test_checks_leave_every_variable_unchanged(graph):
    var = fl.Variable(np.ones(SHAPE, np.float32), name="var")
    m = fl.Variable(np.zeros(SHAPE, np.float32), name="m")
    v = fl.Variable(np.zeros(SHAPE, np.float32), name="v")
    late = fl.Variable(np.zeros(SHAPE, np.float32), name="late")
    grad = fl.placeholder(fl.float32, [None, None], name="grad")
    lr = fl.placeholder(fl.float32, [None], name="lr")
    hyper = dict(beta1_power=0.9, beta2_power=0.999, beta1=0.9, beta2=0.999, epsilon=1e-7)
    adam = fl.raw_ops.ResourceApplyAdam(var=var, m=m, v=v, lr=0.1, grad=grad, name="adam",
                                        **hyper)
    adam_lr = fl.raw_ops.ApplyAdam(var=var, m=m, v=v, lr=fl.reshape(lr, []), grad=grad,
                                   name="adam_lr", **hyper)
    uninit = fl.raw_ops.ApplyMomentum(var=var, accum=late, lr=0.1, grad=grad, momentum=0.9,
                                      name="momentum")
    init = fl.variables_initializer([var, m, v])
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            s.run(init)
            with pytest.raises(FlowcError, match="do not have the same shape") as info:
                s.run(adam, {grad: np.ones((4, 3), np.float32)})
            assert "'adam'" in str(info.value)
            with pytest.raises(FailedPreconditionError, match="'late' .accum. is not initialized"):
                s.run(uninit, {grad: np.ones(SHAPE, np.float32)})
            with pytest.raises(FlowcError):
                s.run(adam_lr, {grad: np.ones(SHAPE, np.float32),
                                lr: np.ones(2, np.float32)})
            np.testing.assert_array_equal(s.run(var), np.ones(SHAPE, np.float32), backend)
            np.testing.assert_array_equal(s.run(m), np.zeros(SHAPE, np.float32), backend)
            s.run(adam, {grad: np.ones(SHAPE, np.float32)})
            assert np.all(s.run(var) < 1) and np.all(s.run(m) > 0)


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_ftrl_hyper_parameters_out_of_range_change_nothing(graph, backend):
    var = fl.Variable(np.ones(SHAPE, np.float32), name="var")
    accum = fl.Variable(np.full(SHAPE, 0.1, np.float32), name="accum")
    linear = fl.Variable(np.zeros(SHAPE, np.float32), name="linear")
    h = {k: fl.placeholder(fl.float32, [], name=k)
         for k in ("lr", "l1", "l2", "l2_shrinkage", "lr_power")}
    grad = np.ones(SHAPE, np.float32)
    ftrl = fl.raw_ops.ResourceApplyFtrlV2(var=var, accum=accum, linear=linear, grad=grad,
                                          name="ftrl", **h)
    by_lr = fl.raw_ops.ResourceApplyFtrl(var=var, accum=accum, linear=linear, grad=grad,
                                         lr=h["lr"], l1=h["l1"], l2=h["l2"],
                                         lr_power=h["lr_power"], multiply_linear_by_lr=True)
    good = dict(lr=0.1, l1=0.0, l2=0.0, l2_shrinkage=0.0, lr_power=-0.5)
    with fl.Session(graph=graph, backend=backend) as s:
        s.run(fl.global_variables_initializer())
        for key, bad, message in (("lr", 0.0, "lr is not a positive scalar"),
                                  ("l1", -0.1, "l1 regularization strength is not a non-neg"),
                                  ("l2", -1.0, "l2 regularization strength is not a non-neg"),
                                  ("l2_shrinkage", float("nan"), "l2 shrinkage regularization"),
                                  ("lr_power", 0.5, "lr_power is not a non-positive scalar")):
            feed = {h[k]: np.float32(bad if k == key else v) for k, v in good.items()}
            with pytest.raises(FlowcError, match=f"'ftrl'.*{message}"):
                s.run(ftrl, feed)
        for v, want in ((var, 1.0), (accum, 0.1), (linear, 0.0)):
            np.testing.assert_array_equal(s.run(v), np.full(SHAPE, want, np.float32))
        # with multiply_linear_by_lr, a learning rate of 0 is allowed
        s.run(by_lr, {h[k]: np.float32(0.0 if k == "lr" else v) for k, v in good.items()})
        np.testing.assert_allclose(s.run(accum), np.full(SHAPE, 1.1, np.float32))


def test_shapes_are_checked_when_the_op_is_built(graph):
    var = fl.Variable(np.ones(SHAPE, np.float32), name="var")
    accum = fl.Variable(np.ones((4, 3), np.float32), name="accum")
    with pytest.raises(ShapeError, match="do not have the same shape"):
        fl.raw_ops.ApplyAdagrad(var=var, accum=accum, lr=0.1, grad=np.ones(SHAPE, np.float32))
    with pytest.raises(ShapeError, match="alpha is not a scalar"):
        fl.raw_ops.ResourceApplyGradientDescent(var=var, alpha=[0.1, 0.2],
                                                delta=np.ones(SHAPE, np.float32))
