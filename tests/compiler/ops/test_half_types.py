"""f16 and bf16: stored as such (feeds, fetches, constants, variables, checkpoints, the IR text),
computed in f32 where a kernel has no half arithmetic (the legalize-types pass; the
interpreter computes the same way), moved natively by the data-movement ops."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import CompileError
from compiler.ir.op_registry import computes_half_in_f32
from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph
from compiler.options import PipelineOptions
from compiler.passes.legalize_types import legalize_types
from oracle import NO_FOLDING, check_against_interpreter
from runtime.dtypes import DType

HALVES = [(fl.float16, DType.f16.np), (fl.bfloat16, DType.bf16.np)]
IDS = ["f16", "bf16"]


def half_rows(rng, np_dtype, low=-4, high=4):
    special = np.array([0.0, -0.0, 1.0, -1.5, 2.5, 1 + 2**-8, 65504.0, np.inf, -np.inf, np.nan,
                        1e-6, 3.0], np.float32)
    return np.concatenate([special, rng.uniform(low, high, 12).astype(np.float32)]
                          ).astype(np_dtype).reshape(-1, 4)


@pytest.mark.parametrize("dt,np_dt", HALVES, ids=IDS)
def test_elementwise_and_reductions_compute_in_f32(graph, rng, dt, np_dt):
    x = fl.placeholder(dt, [None, 4], name="x")
    y = fl.placeholder(dt, [None, 4], name="y")
    xv, yv = half_rows(rng, np_dt), half_rows(rng, np_dt)[::-1].copy()
    fetches = {
        "add": x + y, "mul": x * y, "div": x / y, "sub": x - 1.5, "neg": -x, "abs": fl.abs(x),
        "exp": fl.exp(x), "log": fl.log(fl.abs(x)), "tanh": fl.tanh(x),
        "sigmoid": fl.sigmoid(x), "sqrt": fl.sqrt(fl.abs(y)), "relu": fl.nn.relu(x),
        "max": fl.maximum(x, y), "floor": fl.floor(x), "round": fl.round(x),
        "chain": fl.exp(x * 0.5) * y + x, "square": fl.square(y),
        "less": x < y, "equal": fl.equal(x, y), "select": fl.where(x < y, x, y),
        "sum": fl.reduce_sum(x, axis=1), "mean": fl.reduce_mean(y, axis=0),
        "rmax": fl.reduce_max(x, axis=1), "argmax": fl.argmax(y, axis=1),
        "softmax": fl.nn.softmax(y),
    }
    got = check_against_interpreter(graph, fetches, {x: xv, y: yv})
    assert got["add"].dtype == np_dt and got["less"].dtype == np.bool_
    with np.errstate(all="ignore"):
        x32, y32 = xv.astype(np.float32), yv.astype(np.float32)
        # one op: the f32 result rounded once (exactly what the f16/bf16 op is)
        want = (x32 * y32).astype(np_dt)
    same = (got["mul"].view(np.uint16) == want.view(np.uint16)) | np.isnan(want.astype(np.float32))
    assert same.all()
    # the sum of a row of four halves accumulates in f32 and rounds once
    finite = np.isfinite(x32).all(axis=1)
    np.testing.assert_array_equal(got["sum"][finite].astype(np.float32),
                                  x32[finite].sum(axis=1).astype(np_dt).astype(np.float32))


@pytest.mark.parametrize("dt,np_dt", HALVES, ids=IDS)
def test_matmul_and_conv_accumulate_in_f32(graph, rng, dt, np_dt):
    a = fl.placeholder(dt, [8, 64], name="a")
    b = fl.placeholder(dt, [64, 5], name="b")
    img = fl.placeholder(dt, [1, 6, 6, 3], name="img")
    w = fl.constant(rng.uniform(-1, 1, (3, 3, 3, 4)).astype(np_dt))
    av = rng.uniform(-1, 1, (8, 64)).astype(np_dt)
    bv = rng.uniform(-1, 1, (64, 5)).astype(np_dt)
    iv = rng.uniform(-1, 1, (1, 6, 6, 3)).astype(np_dt)
    fetches = {"matmul": fl.matmul(a, b),
               "conv": fl.nn.conv2d(img, w, strides=[1, 1, 1, 1], padding="SAME"),
               "pool": fl.nn.max_pool(img, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                      padding="VALID")}
    got = check_against_interpreter(graph, fetches, {a: av, b: bv, img: iv})
    exact = av.astype(np.float64) @ bv.astype(np.float64)
    # f32 accumulation, one rounding: within an ulp of the exact product (f16 accumulation of
    # 64 terms would be far off)
    eps = 2.0 ** -10 if dt is fl.float16 else 2.0 ** -7
    ulp = np.abs(exact).astype(np_dt).astype(np.float64) * eps
    assert got["matmul"].dtype == np_dt
    assert (np.abs(got["matmul"].astype(np.float64) - exact) <= ulp + 1e-6).all()


@pytest.mark.parametrize("dt,np_dt", HALVES, ids=IDS)
def test_data_movement_stays_native(graph, rng, dt, np_dt):
    x = fl.placeholder(dt, [None, 4], name="x")
    xv = half_rows(rng, np_dt)
    fetches = {"reshape": fl.reshape(x, [-1]), "transpose": fl.transpose(x),
               "concat": fl.concat([x, x[::-1]], axis=1), "slice": x[1:, 1:3],
               "gather": fl.gather(x, [2, 0, 5]), "stack": fl.stack([x, x], axis=1),
               "unstack": fl.unstack(x, axis=1)[2], "tile": fl.tile(x, [1, 2]),
               "pad": fl.pad(x, [[0, 1], [2, 0]]), "identity": fl.identity(x),
               "split": fl.split(x, 2, axis=1)[1], "expand": fl.expand_dims(x, 0),
               "fill": fl.fill([2, 3], x[0, 0]), "shape": fl.shape(x)}
    got = check_against_interpreter(graph, fetches, {x: xv})
    bits = xv.view(np.uint16)
    np.testing.assert_array_equal(got["transpose"].view(np.uint16), bits.T)
    np.testing.assert_array_equal(got["gather"].view(np.uint16), bits[[2, 0, 5]])
    # no f32 node in the compiled graph: the movement ops took the halves as they are
    assert not any(computes_half_in_f32(n) for n in graph)


def test_legalize_types_puts_casts_around_what_computes(graph):
    x = fl.placeholder(fl.float16, [4], name="x")
    y = fl.exp(fl.reshape(x, [2, 2]), name="e")
    c = fl.constant(np.float16([1.5, 2.5]), name="c")
    z = fl.add(y, c, name="z")
    copy, _ = graph.copy()
    assert legalize_types(copy)
    ops = {n.name: n for n in copy}
    e = ops["e"]
    assert e.output_types[0].dtype is DType.f32 and e.attrs["T"] is DType.f32
    assert e.inputs[0].node.op == "Cast" and e.inputs[0].node.inputs[0].node.op == "Reshape"
    assert ops["z"].inputs[1].node.op == "Const"                # widened at compile time
    assert ops["z"].inputs[1].node.attrs["value"].dtype == np.float32
    users = [n for n in copy if n.op == "Cast" and n.attrs["DstT"] is DType.f16]
    assert {u.inputs[0].node.name for u in users} == {"e", "z"}
    assert not legalize_types(copy)                              # nothing left to do
    text = print_graph(copy)
    assert print_graph(parse_graph(text)) == text
    del z


def test_without_legalize_types_codegen_refuses(graph):
    x = fl.placeholder(fl.bfloat16, [4], name="x")
    y = fl.exp(x)
    passes = PipelineOptions(disable=("legalize-types",))
    with fl.Session(graph=graph, options=passes) as s:
        with pytest.raises(CompileError, match="legalize-types"):
            s.run(y, {x: np.ones(4, DType.bf16.np)})


@pytest.mark.parametrize("dt,np_dt", HALVES, ids=IDS)
def test_half_loop_cond_and_variables(graph, dt, np_dt):
    v = fl.Variable(np.array([1.0, -2.0, 3.0], np_dt), name="v")
    x = fl.placeholder(dt, [3], name="x")
    i0 = fl.constant(0)

    def body(i, acc):
        return i + 1, acc * fl.constant(np.array(1.5, np_dt)) + x

    _, looped = fl.while_loop(lambda i, acc: i < 5, body, [i0, v.value()])
    picked = fl.cond(fl.reduce_sum(fl.cast(x, fl.float32)) > 0, lambda: x * 2.0, lambda: -x)
    assign = fl.assign(v, looped)
    xv = np.array([0.25, 0.5, -1.0], np_dt)
    with fl.Session(graph=graph, backend="interpreter") as s:
        s.run(fl.global_variables_initializer())
        want = s.run([looped, picked], {x: xv})
    with fl.Session(graph=graph) as s:
        s.run(fl.global_variables_initializer())
        got = s.run([looped, picked], {x: xv})
        s.run(assign, {x: xv})
        stored = s.run(v.value())
    for w, g in zip(want, got):
        assert g.dtype == np_dt
        np.testing.assert_array_equal(g.view(np.uint16), w.view(np.uint16))
    np.testing.assert_array_equal(stored.view(np.uint16), want[0].view(np.uint16))


def test_half_checkpoints_round_trip(graph, tmp_path):
    values = {"h": np.array([1.5, -2.25, 65504.0], np.float16),
              "b": np.array([[1.0, 3e38], [-0.0, 2 ** -130]], DType.bf16.np),
              "u": np.array([2**64 - 1, 7], np.uint64)}
    variables = {k: fl.Variable(v, name=k) for k, v in values.items()}
    saver = fl.train.Saver(list(variables.values()))
    with fl.Session(graph=graph) as s:
        s.run(fl.global_variables_initializer())
        path = saver.save(s, str(tmp_path / "model.ckpt"))
        for k, var in variables.items():
            s.run(fl.assign(var, np.zeros_like(values[k])))
        saver.restore(s, path)
        for k, var in variables.items():
            got = s.run(var.value())
            assert got.dtype == values[k].dtype
            np.testing.assert_array_equal(got.view(f"u{got.itemsize}"),
                                          values[k].view(f"u{got.itemsize}"))


def test_half_and_unsigned_constants_in_ir_text(graph):
    arrays = [np.array([1.5, -0.0, np.inf, 1 + 2**-7], DType.bf16.np),
              np.arange(40, dtype=np.float32).astype(DType.bf16.np),
              np.array([65504, 2**-24, -np.inf], np.float16), np.array([2**64 - 1], np.uint64),
              np.arange(20, dtype=np.uint32) * 200000000, np.array([65535], np.uint16)]
    consts = [fl.constant(a, name=f"c{k}") for k, a in enumerate(arrays)]
    text = print_graph(graph)
    assert "tensor<bf16[4]>[1.5, -0.0, inf, 1.00781]" in text and "tensor<u64[1]>[" in text
    back = parse_graph(text)
    assert print_graph(back) == text
    for k, a in enumerate(arrays):
        v = back.node(f"c{k}").attrs["value"]
        assert v.dtype == a.dtype
        np.testing.assert_array_equal(v.view(f"u{a.itemsize}"), a.view(f"u{a.itemsize}"))
    del consts


@pytest.mark.parametrize("fastcall", ["1", "0"])
def test_scalar_feeds_and_fetches_of_the_new_types(graph, monkeypatch, fastcall):
    """numpy scalars of each new type feed and fetch as themselves (ml_dtypes' bfloat16 scalar
    is no numpy builtin: it goes through a rank-0 array), on both run paths."""
    monkeypatch.setenv("FLOWC_FASTCALL", fastcall)
    bf16 = DType.bf16.np.type
    a = fl.placeholder(fl.bfloat16, [], name="a")
    b = fl.placeholder(fl.float16, [], name="b")
    c = fl.placeholder(fl.uint64, [], name="c")
    d = fl.placeholder(fl.uint16, [], name="d")
    f = fl.placeholder(fl.float32, [], name="f")
    outs = [a * 2.0, b + 1.0, c + np.uint64(1), d * np.uint16(2), f * 2.0]
    with fl.Session(graph=graph) as s:
        for _ in range(2):
            got = s.run(outs, {a: bf16(1.5), b: np.float16(2.5), c: np.uint64(2**64 - 2),
                               d: np.uint16(40000), f: bf16(1.25)})
            assert [type(v) for v in got] == [bf16, np.float16, np.uint64, np.uint16, np.float32]
            assert [float(v) for v in got] == [3.0, 3.5, float(2**64 - 1), 14464.0, 2.5]
        call = s.make_callable(outs[:2], [a, b])
        assert [float(v) for v in call(bf16(3.0), np.float16(1.0))] == [6.0, 2.0]


HALF_IR = """graph @halves {
  %a = Placeholder() {dtype=bf16, shape=[3]} : bf16[3]
  %b = Exp(%a) {T=bf16} : bf16[3]
  %h = Placeholder() {dtype=f16, shape=[3]} : f16[3]
  %g = Mul(%h, %h) {T=f16} : f16[3]
  %u = Placeholder() {dtype=u64, shape=[1]} : u64[1]
  %v = AddV2(%u, %u) {T=u64} : u64[1]
}
"""


def test_compile_and_run_halves_from_the_command_line(capsys, tmp_path):
    from cli_runner import flowc
    (tmp_path / "halves.ir").write_text(HALF_IR)
    a = np.array([0.0, 1.0, -2.5], DType.bf16.np)
    np.save(tmp_path / "a.npy", a)            # numpy's .npy keeps bfloat16 as 2-byte voids
    np.save(tmp_path / "h.npy", np.array([1.5, 300.0, -0.25], np.float16))
    np.save(tmp_path / "u.npy", np.array([2**63 + 5], np.uint64))
    rc, out, err = flowc(capsys, "compile", tmp_path / "halves.ir", "-o", tmp_path / "art",
                         "--fetch", "b", "--fetch", "g", "--fetch", "v")
    assert rc == 0, err
    assert "fetches: b bf16[3], g f16[3], v u64[1]" in out
    rc, out, err = flowc(capsys, "run", tmp_path / "art", "--feed", f"a={tmp_path / 'a.npy'}",
                         "--feed", f"h={tmp_path / 'h.npy'}", "--feed", f"u={tmp_path / 'u.npy'}",
                         "--save", tmp_path / "out.npz")
    assert rc == 0, err
    saved = np.load(tmp_path / "out.npz")
    b = saved["b"].view(DType.bf16.np)
    assert b.tolist() == np.exp(a.astype(np.float32)).astype(DType.bf16.np).tolist()
    assert saved["g"].dtype == np.float16 and saved["g"].tolist() == [2.25, np.inf, 0.0625]
    assert saved["v"].tolist() == [10]                   # 2 * (2**63 + 5) wraps


RAW_BF16_SCRIPT = """
import sys
sys.modules["ml_dtypes"] = None                      # as if ml_dtypes were not installed
import numpy as np
import dsl as fl
from runtime.dtypes import DType, bf16_numpy_is_raw
assert bf16_numpy_is_raw() and DType.bf16.np == np.uint16
assert DType.from_numpy(np.uint16) is DType.u16
g = fl.Graph("raw")
with g.as_default():
    x = fl.placeholder(fl.bfloat16, [4], name="x")
    outs = [fl.exp(x), fl.cast(x, fl.float32), fl.cast(fl.cast(x, fl.float32) * 3.0, fl.bfloat16)]
bits = (np.array([0.5, 1.0, -2.0, np.nan], np.float32).view(np.uint32) >> 16).astype(np.uint16)
results = []
for backend in ("interpreter", "c"):
    with fl.Session(graph=g, backend=backend) as s:
        results.append(s.run(outs, {x: bits}))
for want, got in zip(*results):
    assert want.dtype == got.dtype and want.tobytes() == got.tobytes()
assert results[0][0].dtype == np.uint16 and results[0][2].tolist()[:3] == [16320, 16448, 49344]
print("ok")
"""


def test_without_ml_dtypes_bf16_is_raw_bits():
    import os
    import subprocess
    import sys
    from repo_paths import ROOT
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", RAW_BF16_SCRIPT], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("dt,np_dt", HALVES, ids=IDS)
def test_gradient_accumulators_hold_halves(graph, dt, np_dt):
    acc = fl.apply_op("ConditionalAccumulator", [], {"dtype": dt, "shape": [3]}, name="acc")
    grad = fl.placeholder(dt, [3], name="grad")
    apply = fl.apply_op("AccumulatorApplyGradient", [acc, fl.constant(np.int64(0)), grad], {})
    take = fl.apply_op("AccumulatorTakeGradient", [acc, fl.constant(np.int32(2))], {"dtype": dt})
    got = []
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            s.run(apply, {grad: np.array([1.0, 2.0, -0.5], np_dt)})
            s.run(apply, {grad: np.array([2.0, 3.5, 0.25], np_dt)})
            got.append(s.run(take))
    for g in got:
        assert g.dtype == np_dt and g.astype(np.float32).tolist() == [1.5, 2.75, -0.125]
