"""fl.train optimizers and fl.clip_*: TF1's update formulas, in both backends.

Every expected value is computed here, in numpy, from TF1's formulas (not from the library),
and, where TensorFlow is installed, checked once against tf.compat.v1's optimizers.
"""
import numpy as np
import pytest

import dsl as fl

BACKENDS = ("interpreter", "c")
STEPS = 5

RNG = np.random.default_rng(7)
X = RNG.normal(size=(4, 3))
Y = RNG.normal(size=(4, 2))
W0 = RNG.normal(size=(3, 2))
B0 = RNG.normal(size=(2,))


# --- numpy references (TF1's formulas) ------------------------------------------------------------
def lsq_grads(w, b):
    """Gradients of 0.5 * sum((X @ w + b - Y) ** 2)."""
    r = X @ w + b - Y
    return [X.T @ r, r.sum(0)]


class Ref:
    """One optimizer's update in numpy, on a list of parameters (updated in place)."""

    def __init__(self, kind, **hp):
        self.kind, self.hp, self.state, self.t = kind, hp, {}, 0

    def slot(self, name, k, like, fill=0.0):
        return self.state.setdefault((name, k), np.full_like(like, fill))

    def step(self, params, grads):
        hp, self.t = self.hp, self.t + 1
        for k, (p, g) in enumerate(zip(params, grads)):
            if self.kind == "sgd":
                p -= hp["lr"] * g
            elif self.kind == "momentum":
                a = self.slot("a", k, p)
                a[...] = hp["momentum"] * a + g
                if hp.get("nesterov"):
                    p -= hp["lr"] * (g + hp["momentum"] * a)
                else:
                    p -= hp["lr"] * a
            elif self.kind == "adagrad":
                a = self.slot("a", k, p, 0.1)
                a += g * g
                p -= hp["lr"] * g / np.sqrt(a)
            elif self.kind == "rmsprop":
                rho, mu, eps = hp.get("decay", 0.9), hp.get("momentum", 0.0), hp.get("eps", 1e-10)
                ms, mom = self.slot("ms", k, p, 1.0), self.slot("mom", k, p)
                ms[...] = rho * ms + (1 - rho) * g * g
                denom = ms + eps
                if hp.get("centered"):
                    mg = self.slot("mg", k, p)
                    mg[...] = rho * mg + (1 - rho) * g
                    denom = ms - mg * mg + eps
                mom[...] = mu * mom + hp["lr"] * g / np.sqrt(denom)
                p -= mom
            elif self.kind == "adam":
                b1, b2, eps = hp.get("beta1", 0.9), hp.get("beta2", 0.999), hp.get("eps", 1e-8)
                m, v = self.slot("m", k, p), self.slot("v", k, p)
                m[...] = b1 * m + (1 - b1) * g
                v[...] = b2 * v + (1 - b2) * g * g
                lr_t = hp["lr"] * np.sqrt(1 - b2 ** self.t) / (1 - b1 ** self.t)
                p -= lr_t * m / (np.sqrt(v) + eps)


DENSE_CASES = {
    "sgd": (lambda: fl.train.GradientDescentOptimizer(0.05), Ref("sgd", lr=0.05)),
    "momentum": (lambda: fl.train.MomentumOptimizer(0.05, 0.9),
                 Ref("momentum", lr=0.05, momentum=0.9)),
    "nesterov": (lambda: fl.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
                 Ref("momentum", lr=0.05, momentum=0.9, nesterov=True)),
    "adagrad": (lambda: fl.train.AdagradOptimizer(0.3), Ref("adagrad", lr=0.3)),
    "rmsprop": (lambda: fl.train.RMSPropOptimizer(0.01), Ref("rmsprop", lr=0.01)),
    "rmsprop_centered": (
        lambda: fl.train.RMSPropOptimizer(0.01, decay=0.8, momentum=0.5, epsilon=1e-6,
                                          centered=True),
        Ref("rmsprop", lr=0.01, decay=0.8, momentum=0.5, eps=1e-6, centered=True)),
    "adam": (lambda: fl.train.AdamOptimizer(0.1), Ref("adam", lr=0.1)),
}


def lsq_model(prefix, dtype=fl.float64):
    w = fl.Variable(W0.astype(dtype.np), name=f"{prefix}_w")
    b = fl.Variable(B0.astype(dtype.np), name=f"{prefix}_b")
    x = fl.constant(X.astype(dtype.np))
    y = fl.constant(Y.astype(dtype.np))
    loss = 0.5 * fl.reduce_sum(fl.square(fl.matmul(x, w) + b - y))
    return w, b, loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_dense_updates_match_tf1_formulas_in_float64(graph, backend):
    step = fl.train.get_or_create_global_step()
    models, train_ops, opts = {}, [], {}
    for k, (name, (make, _)) in enumerate(DENSE_CASES.items()):
        w, b, loss = lsq_model(name)
        opts[name] = make()
        train_ops.append(opts[name].minimize(loss, global_step=step if k == 0 else None))
        models[name] = (w, b)
    train = fl.group(*train_ops)
    # A float64 model stays float64: no tensor of the graph is float32 (no Cast to f32).
    f32 = [n.name for n in graph for o in n.outputs if o.dtype == fl.float32]
    assert f32 == []
    assert not [n for n in graph if n.op == "Cast"]
    variables = [v for pair in models.values() for v in pair]
    refs = {name: Ref(r.kind, **r.hp) for name, (_, r) in DENSE_CASES.items()}
    expect = {name: [W0.copy(), B0.copy()] for name in DENSE_CASES}
    with fl.Session(backend=backend) as s:
        s.run(fl.global_variables_initializer())
        for t in range(STEPS + 1):
            got = s.run(variables if t == STEPS else [train, variables])
            got = got if t == STEPS else got[1]               # reads run before the updates
            for k, name in enumerate(DENSE_CASES):
                for have, want in zip(got[2 * k: 2 * k + 2], expect[name]):
                    assert have.dtype == np.float64
                    np.testing.assert_allclose(have, want, rtol=1e-11, atol=1e-13,
                                               err_msg=f"{name} after {t} steps")
                if t < STEPS:
                    refs[name].step(expect[name], lsq_grads(*expect[name]))
        assert s.run(step) == STEPS and s.run(step).dtype == np.int64
        # Adam's bias correction: beta powers are beta^(t+1) after t steps, in float64.
        b1p, b2p = s.run(opts["adam"]._get_beta_accumulators())
        np.testing.assert_allclose([b1p, b2p], [0.9 ** (STEPS + 1), 0.999 ** (STEPS + 1)],
                                   rtol=1e-14)
        # Slots hold the formulas' state too.
        w = models["adagrad"][0]
        np.testing.assert_allclose(s.run(opts["adagrad"].get_slot(w, "accumulator")),
                                   refs["adagrad"].state[("a", 0)], rtol=1e-11)


def test_slots_are_named_typed_and_placed_like_tensorflow(graph):
    with fl.device("/device:CPU:0"):
        w = fl.Variable(np.zeros((3, 2), np.float64), name="w")
    b = fl.Variable(np.zeros(2, np.float32), name="b")
    loss = fl.reduce_sum(fl.cast(w, fl.float32)) + fl.reduce_sum(b * b)
    adam = fl.train.AdamOptimizer()
    adam.minimize(loss)
    assert adam.get_slot_names() == ["m", "v"]
    m, v = adam.get_slot(w, "m"), adam.get_slot(w, "v")
    assert (m.name, v.name) == ("w/Adam:0", "w/Adam_1:0")
    assert m.dtype == fl.float64 and m.shape == (3, 2)
    assert m.op.get_attr("_class") == ["loc:@w"]                   # colocated, as in TF1
    assert adam.get_slot(b, "m").dtype == fl.float32
    assert adam.get_slot(b, "m").op.get_attr("_class") == ["loc:@b"]
    assert adam.get_slot(w, "nope") is None
    beta1_power, beta2_power = adam._get_beta_accumulators()
    assert beta1_power.name == "beta1_power:0" and beta1_power.dtype == fl.float64
    assert [x.name for x in adam.variables()] == sorted(
        ["beta1_power:0", "beta2_power:0", "w/Adam:0", "w/Adam_1:0", "b/Adam:0", "b/Adam_1:0"])
    for slot in adam.variables():
        assert slot in fl.global_variables() and slot not in fl.trainable_variables()
    rms = fl.train.RMSPropOptimizer(0.1, centered=True)
    rms.minimize(loss, var_list=[w])
    assert rms.get_slot_names() == ["mg", "momentum", "rms"]
    assert [rms.get_slot(w, n).name for n in ("rms", "mg", "momentum")] == [
        "w/RMSProp:0", "w/RMSProp_1:0", "w/RMSProp_2:0"]
    assert rms.get_slot(b, "rms") is None
    mom = fl.train.MomentumOptimizer(0.1, 0.9)
    mom.minimize(loss)
    assert mom.get_slot_names() == ["momentum"] and mom.get_slot(b, "momentum").name == \
        "b/Momentum:0"
    ada = fl.train.AdagradOptimizer(0.1, initial_accumulator_value=0.5)
    ada.minimize(loss)
    assert ada.get_slot(w, "accumulator").name == "w/Adagrad:0"
    with fl.Session(backend="interpreter") as s:
        s.run(fl.global_variables_initializer())      # slots are initialized with the rest
        np.testing.assert_array_equal(s.run(ada.get_slot(w, "accumulator")), np.full((3, 2), 0.5))
        np.testing.assert_array_equal(s.run(rms.get_slot(w, "rms")), np.ones((3, 2)))
        assert s.run(beta1_power) == np.float64(0.9)
    assert fl.train.GradientDescentOptimizer(0.1).get_slot_names() == []


def test_slots_and_updates_are_placed_with_their_variable(graph):
    from compiler.passes.manager import PassContext, get_pass
    from compiler.options import PipelineOptions
    from compiler.step import make_step_graph
    with fl.device("/cpu:2"):
        w = fl.Variable(np.ones((2, 2)), name="w")
    with fl.device("/cpu:1"):
        b = fl.Variable(np.ones(2), name="b")
    loss = fl.reduce_sum(fl.matmul(fl.constant(np.ones((1, 2))), w) + b)
    adam = fl.train.AdamOptimizer()
    train = adam.minimize(loss, global_step=fl.train.get_or_create_global_step())
    step = make_step_graph(graph, [], [], [train.node])
    ctx = PassContext(PipelineOptions(cpu_devices=4))
    for name in ("prune", "infer-shapes", "place"):
        get_pass(name).run(step.graph, ctx)
    where = {n.name: n.assigned_device for n in step.graph}
    cpu = "/job:localhost/replica:0/task:0/device:CPU:{}".format
    for name in ("w/Adam", "w/Adam_1", "Adam/update_w/AssignSubVariableOp", "beta1_power"):
        assert where[name] == cpu(1 if name == "beta1_power" else 2), name
    for name in ("b/Adam", "b/Adam_1", "Adam/update_b/AssignSubVariableOp"):
        assert where[name] == cpu(1), name


# --- sparse gradients -----------------------------------------------------------------------------
SPARSE_IDS = [[1, 3, 1], [0, 0, 2], [1, 4, 1, 1], [], [3], [2, 0, 2]]
TABLE0 = RNG.normal(size=(5, 2))
TARGETS = [RNG.normal(size=(len(ids), 2)) for ids in SPARSE_IDS]


def sparse_ref_step(kind, table, state, ids, g_rows, hp):
    """TF1's sparse kernels after deduplication (unique ids in order of first appearance)."""
    uniq = list(dict.fromkeys(ids))
    g = {i: sum(g_rows[k] for k, j in enumerate(ids) if j == i) for i in uniq}
    if kind == "sgd":
        for i in uniq:
            table[i] -= hp["lr"] * g[i]
    elif kind == "momentum":
        a = state.setdefault("a", np.zeros_like(table))
        for i in uniq:
            a[i] = a[i] * hp["momentum"] + g[i]
            table[i] -= hp["lr"] * a[i]
    elif kind == "adagrad":
        a = state.setdefault("a", np.full_like(table, 0.1))
        for i in uniq:
            a[i] += g[i] ** 2
            table[i] -= hp["lr"] * g[i] / np.sqrt(a[i])
    elif kind == "rmsprop":
        ms = state.setdefault("ms", np.ones_like(table))
        mom = state.setdefault("mom", np.zeros_like(table))
        for i in uniq:
            ms[i] = 0.9 * ms[i] + 0.1 * g[i] ** 2
            mom[i] = hp["momentum"] * mom[i] + hp["lr"] * g[i] / np.sqrt(ms[i] + 1e-10)
            table[i] -= mom[i]
    elif kind == "adam":       # TF1 _apply_sparse_shared: m, v and var change in every row
        state["t"] = t = state.get("t", 0) + 1
        m = state.setdefault("m", np.zeros_like(table))
        v = state.setdefault("v", np.zeros_like(table))
        m *= 0.9
        v *= 0.999
        for i in uniq:
            m[i] += 0.1 * g[i]
            v[i] += 0.001 * g[i] ** 2
        lr_t = hp["lr"] * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        table -= lr_t * m / (np.sqrt(v) + 1e-8)


SPARSE_CASES = {
    "sgd": (lambda: fl.train.GradientDescentOptimizer(0.5), {"lr": 0.5}),
    "sgd_gather": (lambda: fl.train.GradientDescentOptimizer(0.5), {"lr": 0.5}),
    "momentum": (lambda: fl.train.MomentumOptimizer(0.2, 0.9), {"lr": 0.2, "momentum": 0.9}),
    "adagrad": (lambda: fl.train.AdagradOptimizer(0.5), {"lr": 0.5}),
    "rmsprop": (lambda: fl.train.RMSPropOptimizer(0.05, momentum=0.5),
                {"lr": 0.05, "momentum": 0.5}),
    "adam": (lambda: fl.train.AdamOptimizer(0.1), {"lr": 0.1}),
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_gradients_update_only_the_rows_used(graph, backend):
    ids = fl.placeholder(fl.int32, [None], name="ids")
    target = fl.placeholder(fl.float64, [None, 2], name="target")
    tables, train_ops = [], []
    for name, (make, _) in SPARSE_CASES.items():
        table = fl.Variable(TABLE0, name=f"{name}_table")
        rows = fl.gather(table, ids) if name == "sgd_gather" else table.sparse_read(ids)
        loss = 0.5 * fl.reduce_sum(fl.square(rows - target))
        (grad, var), = make().compute_gradients(loss, var_list=[table])
        assert isinstance(grad, fl.IndexedSlices) and var is table
        train_ops.append(make().apply_gradients([(grad, var)]))
        tables.append(table)
    train = fl.group(*train_ops)
    expect = {name: TABLE0.copy() for name in SPARSE_CASES}
    states = {name: {} for name in SPARSE_CASES}
    with fl.Session(backend=backend) as s:
        s.run(fl.global_variables_initializer())
        for step, (id_list, tgt) in enumerate(zip(SPARSE_IDS, TARGETS)):
            before = s.run(tables)
            s.run(train, {ids: np.array(id_list, np.int32), target: tgt})
            after = s.run(tables)
            untouched = [r for r in range(5) if r not in id_list]
            for k, (name, (_, hp)) in enumerate(SPARSE_CASES.items()):
                kind = name.split("_")[0]
                g_rows = expect[name][id_list] - tgt
                sparse_ref_step(kind, expect[name], states[name], id_list, g_rows, hp)
                np.testing.assert_allclose(after[k], expect[name], rtol=1e-11, atol=1e-13,
                                           err_msg=f"{name} at step {step}")
                if kind != "adam":   # the rows the step did not use keep their values exactly
                    np.testing.assert_array_equal(after[k][untouched], before[k][untouched])
        # Momentum's accumulator is not zero in rows a later step does not touch, yet those
        # rows kept their values (a dense update would have moved them).
        assert np.all(states["momentum"]["a"][1] != 0) and 1 not in SPARSE_IDS[-1]


def test_sparse_update_of_a_vector_with_int64_ids(graph):
    v = fl.Variable(np.arange(5.0), name="v")
    ids = fl.placeholder(fl.int64, [None], name="ids")
    train = fl.train.AdagradOptimizer(0.5).minimize(fl.reduce_sum(fl.square(v.sparse_read(ids))))
    with fl.Session(backend="interpreter") as s:
        s.run(fl.global_variables_initializer())
        s.run(train, {ids: np.array([4, 4, 1], np.int64)})
        g = np.array([0.0, 2.0, 0.0, 0.0, 16.0])          # d/dv of v1^2 + 2 * v4^2
        want = np.arange(5.0) - 0.5 * g / np.sqrt(0.1 + g * g)
        np.testing.assert_allclose(s.run(v), want, rtol=1e-12)


# --- hyperparameters, global step, errors ---------------------------------------------------------
def test_hyperparameters_may_be_tensors_and_are_cast_to_the_variable_dtype(graph):
    lr = fl.placeholder_with_default(np.float32(0.5), [], name="lr")
    w = fl.Variable(np.array([1.0, 2.0]), name="w")
    train = fl.train.GradientDescentOptimizer(lr).minimize(fl.reduce_sum(w * w))
    casts = [n for n in graph if n.op == "Cast"]
    assert len(casts) == 1 and casts[0].attrs["DstT"] == fl.float64
    mom = fl.train.MomentumOptimizer(lambda: 0.1, momentum=fl.constant(0.5, fl.float64))
    v = fl.Variable(np.array([1.0]), name="v")
    train_v = mom.minimize(fl.reduce_sum(v * v), var_list=[v])
    with fl.Session(backend="interpreter") as s:
        s.run(fl.global_variables_initializer())
        s.run(train, {lr: np.float32(0.25)})
        np.testing.assert_allclose(s.run(w), [0.5, 1.0])
        s.run(train)
        np.testing.assert_allclose(s.run(w), [0.0, 0.0])
        s.run(train_v)
        s.run(train_v)           # accum: 2, then 0.5 * 2 + 2 * 0.8 = 2.6
        np.testing.assert_allclose(s.run(v), [1.0 - 0.2 - 0.26])


def test_global_step_and_apply_gradients_protocol(graph):
    assert fl.train.get_global_step() is None
    step = fl.train.get_or_create_global_step()
    assert fl.train.get_or_create_global_step() is step and fl.train.get_global_step() is step
    assert step.name == "global_step:0" and step.dtype == fl.int64 and step.shape == ()
    assert step in fl.global_variables() and step not in fl.trainable_variables()
    assert fl.get_default_graph().get_collection(fl.GraphKeys.GLOBAL_STEP) == [step]
    with pytest.raises(ValueError, match="already exists"):
        fl.train.create_global_step()
    w = fl.Variable(np.array([3.0]), name="w")
    u = fl.Variable(np.array([1.0]), name="unused")
    opt = fl.train.GradientDescentOptimizer(0.25)
    gv = opt.compute_gradients(fl.reduce_sum(w * w), gate_gradients=opt.GATE_GRAPH)
    assert [v for _, v in gv] == [w, u] and gv[1][0] is None
    train = opt.apply_gradients(gv, global_step=step, name="sgd_step")
    assert isinstance(train, fl.Operation) and train.name == "sgd_step"
    with fl.Session(backend="interpreter") as s:
        s.run(fl.global_variables_initializer())
        for _ in range(3):
            s.run(train)
        assert fl.train.global_step(s, step) == 3
        np.testing.assert_allclose(s.run(w), [3.0 * 0.5 ** 3])
        np.testing.assert_array_equal(s.run(u), [1.0])
    with pytest.raises(ValueError, match="No gradients provided"):
        opt.minimize(fl.reduce_sum(w * w), var_list=[u])
    with pytest.raises(ValueError, match="No variables provided"):
        opt.apply_gradients([])
    with pytest.raises(ValueError, match="initial_accumulator_value"):
        fl.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)


def test_optimizer_by_name():
    assert isinstance(fl.train.optimizer_by_name("sgd", learning_rate=0.1),
                      fl.train.GradientDescentOptimizer)
    assert isinstance(fl.train.optimizer_by_name("gradient_descent", learning_rate=0.1),
                      fl.train.GradientDescentOptimizer)
    m = fl.train.optimizer_by_name("Momentum", learning_rate=0.1, momentum=0.9,
                                   use_nesterov=True)
    assert isinstance(m, fl.train.MomentumOptimizer) and m._use_nesterov
    for name, cls in [("adagrad", fl.train.AdagradOptimizer),
                      ("rmsprop", fl.train.RMSPropOptimizer), ("adam", fl.train.AdamOptimizer),
                      ("AdamOptimizer", fl.train.AdamOptimizer)]:
        kwargs = {} if cls is fl.train.AdamOptimizer else {"learning_rate": 0.1}
        assert type(fl.train.optimizer_by_name(name, **kwargs)) is cls
    with pytest.raises(ValueError, match="unknown optimizer 'adamw'.*adam"):
        fl.train.optimizer_by_name("adamw")


# --- clipping -------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_helpers_match_numpy(graph, backend):
    a = RNG.normal(size=(3, 4)) * 3
    c = RNG.normal(size=(5,))
    vals = RNG.normal(size=(3, 4))
    ta, tc = fl.constant(a), fl.constant(c)
    sl = fl.IndexedSlices(fl.constant(vals), fl.constant([0, 2, 0]), [4, 4])
    by_value = fl.clip_by_value(ta, -1.0, 2.0)
    by_norm = fl.clip_by_norm(ta, 2.0)
    by_norm_rows = fl.clip_by_norm(ta, 2.0, axes=[1])
    by_norm_big = fl.clip_by_norm(tc, 100.0)
    by_norm_zero = fl.clip_by_norm(fl.zeros([3], fl.float64), 1.0)
    gnorm = fl.global_norm([ta, None, tc, sl])
    clipped, norm = fl.clip_by_global_norm([ta, None, tc, sl], 1.5)
    clipped_sl_value = fl.clip_by_value(sl, -0.5, 0.5)
    _, big_norm = fl.clip_by_global_norm([tc], 100.0)
    assert clipped[1] is None and isinstance(clipped[3], fl.IndexedSlices)
    assert isinstance(clipped_sl_value, fl.IndexedSlices)
    assert clipped[3].indices is sl.indices and clipped_sl_value.dense_shape == [4, 4]
    with fl.Session(backend=backend) as s:
        got = s.run([by_value, by_norm, by_norm_rows, by_norm_big, by_norm_zero, gnorm,
                     clipped[0], clipped[2], clipped[3].values, norm, clipped_sl_value.values,
                     big_norm])
    want_norm = np.sqrt((a ** 2).sum() + (c ** 2).sum() + (vals ** 2).sum())
    row_norms = np.sqrt((a ** 2).sum(1, keepdims=True))
    want = [np.clip(a, -1.0, 2.0), a * 2.0 / max(np.linalg.norm(a), 2.0),
            a * 2.0 / np.maximum(row_norms, 2.0), c, np.zeros(3), want_norm,
            a * 1.5 / want_norm, c * 1.5 / want_norm, vals * 1.5 / want_norm, want_norm,
            np.clip(vals, -0.5, 0.5), np.linalg.norm(c)]
    for k, (have, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(have, w, rtol=1e-12, atol=1e-15, err_msg=f"result {k}")
    assert np.linalg.norm(got[1]) == pytest.approx(2.0)


# --- against TensorFlow itself --------------------------------------------------------------------
@pytest.mark.slow            # importing TensorFlow takes seconds
def test_adam_rmsprop_centered_and_sparse_updates_match_tensorflow_v1():
    tf = pytest.importorskip("tensorflow")
    v1 = tf.compat.v1
    x32, y32, w32, b32, table32 = (a.astype(np.float32) for a in (X, Y, W0, B0, TABLE0))

    def centered_rms(lib):
        return lib.RMSPropOptimizer(0.01, decay=0.8, momentum=0.5, epsilon=1e-6, centered=True)

    dense = {"adam": lambda lib: lib.AdamOptimizer(0.05), "rms_centered": centered_rms}
    sparse = {"adam": lambda lib: lib.AdamOptimizer(0.05), "rms_centered": centered_rms,
              "nesterov": lambda lib: lib.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
              "adagrad": lambda lib: lib.AdagradOptimizer(0.3)}

    def build(api, train_lib):
        """Train ops and variables of each case; ``api`` is fl or a tf stand-in."""
        out = {}
        for name, make in dense.items():
            w = api.Variable(w32, name=f"{name}_w")
            b = api.Variable(b32, name=f"{name}_b")
            loss = 0.5 * api.reduce_sum(api.square(api.matmul(x32, w) + b - y32))
            out[name] = (make(train_lib).minimize(loss), [w, b])
        ids = api.placeholder(api.int32, [None], name="ids")
        tgt = api.placeholder(api.float32, [None, 2], name="tgt")
        for name, make in sparse.items():
            table = api.Variable(table32, name=f"{name}_table")
            loss = 0.5 * api.reduce_sum(api.square(api.gather(table, ids) - tgt))
            out["sparse_" + name] = (make(train_lib).minimize(loss), [table])
        return out, ids, tgt

    def run(session, built, init):
        ops, ids, tgt = built
        session.run(init())
        for id_list, t in zip(SPARSE_IDS, TARGETS):
            session.run([op for op, _ in ops.values()], {ids: np.array(id_list, np.int32),
                                                            tgt: t.astype(np.float32)})
        return {k: session.run(vs) for k, (_, vs) in ops.items()}

    g = v1.Graph()
    with g.as_default():
        built = build(_TFNamespace(tf, v1), v1.train)
        with v1.Session(graph=g) as s:
            want = run(s, built, v1.global_variables_initializer)
    with fl.Graph().as_default():
        built = build(fl, fl.train)
        with fl.Session(backend="c") as s:
            got = run(s, built, fl.global_variables_initializer)
    for k in want:
        for have, w in zip(got[k], want[k]):
            assert have.dtype == w.dtype == np.float32
            np.testing.assert_allclose(have, w, rtol=2e-5, atol=1e-6, err_msg=k)


class _TFNamespace:
    """The few tf functions build() uses, with resource variables (fl's kind)."""

    def __init__(self, tf, v1):
        self.matmul, self.reduce_sum, self.square, self.gather = (
            tf.matmul, tf.reduce_sum, tf.square, tf.gather)
        self.placeholder, self.int32, self.float32 = v1.placeholder, tf.int32, tf.float32
        self._v1 = v1

    def Variable(self, value, name):  # noqa: N802
        return self._v1.Variable(value, name=name, use_resource=True)
