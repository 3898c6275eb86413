"""The IR: text round trip (exact, for every attr kind), parser errors, verifier, graph API."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import compiler  # noqa: F401  (registers the built-in ops)
from compiler.errors import CompileError, GraphError, IRSyntaxError
from compiler.ir.attr_text import attrs_equal
from compiler.ir.construct import make_node
from compiler.ir.graph import Graph, Output
from compiler.ir.location import SourceLocation
from compiler.ir.parser import parse_graph, parse_graphs
from compiler.ir.printer import print_graph
from compiler.ir.types import TensorType
from compiler.ir.verifier import verify
from compiler.ir.op_registry import all_ops, register_op
from runtime.dtypes import DType

TENSOR_DTYPES = [d for d in DType if d is not DType.resource]

register_op("_IRTestAttrs", outputs=["y: f32"], replace=True, shape=lambda ctx: [()], attrs=[
    "i: int = 0", "f: float = 0.0", "s: string = \"\"", "b: bool = false", "t: type = f32",
    "sh: shape = [*]", "li: list(int) = []", "lf: list(float) = []", "lt: list(type) = []",
    "ls: list(shape) = []", "lstr: list(string) = []", "lb: list(bool) = []", "v: tensor"])

register_op("_IRTestTriple", inputs=["x: T"], outputs=["a: T", "b: i32", "c: bool"],
            attrs=["T: type"], replace=True,
            shape=lambda ctx: [ctx.input_shape(0), ctx.input_shape(0), ctx.input_shape(0)])

register_op("_IRTestIdentityN", inputs=["input: T"], outputs=["output: T"],
            attrs=["T: list(type)"], replace=True,
            shape=lambda ctx: [t.shape for t in ctx.input_types])


def round_trip(g: Graph) -> Graph:
    """Print, parse, print again: the texts must be equal and the graphs too."""
    text = print_graph(g)
    g2 = parse_graph(text, "rt.ir")
    assert print_graph(g2) == text
    assert_same_graph(g, g2)
    verify(g2)
    return g2


def assert_same_graph(a: Graph, b: Graph) -> None:
    assert a.name == b.name
    assert [n.name for n in a] == [n.name for n in b]
    for x, y in zip(a, b):
        where = f"%{x.name}"
        assert x.op == y.op, where
        assert [i.ref for i in x.inputs] == [i.ref for i in y.inputs], where
        assert [c.name for c in x.control_inputs] == [c.name for c in y.control_inputs], where
        assert x.device == y.device and x.assigned_device == y.assigned_device, where
        assert x.location == y.location, where
        assert x.output_types == y.output_types, where
        assert sorted(x.attrs) == sorted(y.attrs), where
        for k in x.attrs:
            assert _same_value(x.attrs[k], y.attrs[k]), f"{where} attr {k}: {x.attrs[k]!r} != {y.attrs[k]!r}"


def _same_value(p, q) -> bool:
    """attrs_equal, except that any two NaNs of the same sign match (payloads print as nan)."""
    if isinstance(p, np.ndarray) and isinstance(q, np.ndarray) and p.dtype.kind == "f":
        return (p.dtype == q.dtype and p.shape == q.shape
                and np.array_equal(p, q, equal_nan=True)
                and np.array_equal(np.signbit(p), np.signbit(q)))
    return attrs_equal(p, q)


def _special_array(dt: DType, n: int) -> np.ndarray:
    if dt is DType.bool:
        return (np.arange(n) % 3 == 0)
    if dt.is_floating:
        base = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.5, -2.25e-3,
                         np.finfo(dt.np).max, np.finfo(dt.np).tiny, 1 / 3])
    else:
        info = np.iinfo(dt.np)
        base = np.array([0, 1, int(info.min), int(info.max), int(info.max) - 1, 7], dt.np)
    return np.resize(base.astype(dt.np), n)


# --- round trip ----------------------------------------------------------------------------
FLOATS = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 1e-300, 5e-324, 1.7976931348623157e308,
          0.1, -3.0, 123456789.125]
STRINGS = ["", 'a"b\\c', "line\nbreak\ttab\x00nul", "ünïcödé ☃ 𝄞", "{x=1, y=[2]}", "# not a loc",
           "%x:1 ^%y", "unknown_rank", "[*]"]


def test_round_trip_every_attr_kind():
    g = Graph("attrs")
    for i, f in enumerate(FLOATS):
        s = STRINGS[i % len(STRINGS)]
        make_node(g, "_IRTestAttrs", [], {
            "i": -2**63 + i, "f": f, "s": s, "b": bool(i % 2), "t": TENSOR_DTYPES[i % len(TENSOR_DTYPES)],
            "sh": [None, [], [None], [2, None, 0], [7]][i % 5], "li": [i, -i, 2**40],
            "lf": [f, 0.5, -0.0], "lt": [DType.f32, DType.bool, DType.i64][: i % 4],
            "ls": [None, [], [None, 4]], "lstr": [s, "q\"uote"], "lb": [True, False][: i % 3],
            "v": np.array(f, dtype=np.float64)}, name=f"a{i}")
    for dt in TENSOR_DTYPES:
        for n in (0, 1, 5, 16, 17, 100):          # 16 prints inline, 17 as base64
            make_node(g, "_IRTestAttrs", [], {"v": _special_array(dt, n).reshape(
                (n,) if n % 2 == 0 else (1, n, 1))}, name=f"t_{dt.ir_name}_{n}")
        make_node(g, "_IRTestAttrs", [], {"v": np.zeros((3, 0, 2), dt.np)}, name=f"empty_{dt.ir_name}")
    text = print_graph(g)
    assert 'b64"' in text and "tensor<f16[16]>[" in text and "tensor<f16[1,17,1]>b64" in text
    assert "tensor<bf16[16]>[0.0, -0.0, inf, -inf, nan, -nan, 1.5, -0.00224304, 3.38953e+38" in text
    assert "tensor<u64[16]>[0, 1, 0, 18446744073709551615, 18446744073709551614, 7" in text
    assert "-nan" in text and "-0.0" in text and "-inf" in text
    round_trip(g)


def test_round_trip_edges_devices_locations():
    g = Graph("edges")
    x = g.add_node("Placeholder", (), {"dtype": DType.f32, "shape": (None, 3)},
                   name="x", output_types=[TensorType(DType.f32, (None, 3))],
                   device="/job:ps/task:0", location=SourceLocation("model.py", 3, 1))
    t = make_node(g, "_IRTestTriple", [x.output(0)], name="scope/trip-le.v2",
                  device="/job:worker/replica:0/task:1/device:CPU:0",
                  location=SourceLocation("dir with space/ünï.py", 10, 5))
    t.assigned_device = "/job:worker/replica:0/task:1/device:CPU:0"
    n = make_node(g, "LogicalNot", [t.output(2)], name="not", control_inputs=[x],
                  location=SourceLocation('odd"name\nwith newline', 1, 0))
    n.assigned_device = "weird device #1"
    cast = make_node(g, "Cast", [t.output(1)], {"DstT": DType.f32}, name="cast",
                     device='quoted "dev" spec', control_inputs=[t, n])
    make_node(g, "AddV2", [t.output(0), cast.output(0)], name="sum", device="/job:ps",
              location=SourceLocation("c:/win/path.py", 2, 3))
    make_node(g, "NoOp", [], name="_group>1", control_inputs=[n, cast])
    text = print_graph(g)
    assert "%trip-le.v2:2" not in text and "%scope/trip-le.v2:2" in text
    assert "^%x" in text and " on /job:worker/replica:0/task:1/device:CPU:0" in text
    assert "@/job:ps/task:0" in text and "# model.py:3:1" in text
    g2 = round_trip(g)
    assert g2.node("not").location == SourceLocation('odd"name\nwith newline', 1, 0)
    assert g2.node("cast").device == 'quoted "dev" spec'
    assert g2.node("sum").inputs[1] == Output(g2.node("cast"), 0)


def test_list_typed_args():
    g = Graph("n")
    a = make_node(g, "Placeholder", [], {"dtype": DType.f32, "shape": [2]}, name="a")
    b = make_node(g, "Placeholder", [], {"dtype": DType.i64, "shape": []}, name="b")
    n = make_node(g, "_IRTestIdentityN", [[a.output(0), b.output(0)]], name="n")
    assert n.attrs["T"] == [DType.f32, DType.i64]
    assert n.output_types == [TensorType(DType.f32, (2,)), TensorType(DType.i64, ())]
    g2 = round_trip(g)
    assert "T=[f32, i64]" in print_graph(g2) and g2.node("n").num_outputs == 2
    n.attrs["T"] = [DType.f32, DType.i32]
    with pytest.raises(GraphError, match="input 'input' is i64"):
        verify(g)


def test_round_trip_several_graphs_and_omitted_types():
    text = ("// two graphs; the second writes no types, so the parser infers them\n"
            "graph @a {\n  %x = Placeholder() {dtype=i32, shape=[]} : i32[]\n}\n"
            "graph @b {\n"
            "  %p = Placeholder() {dtype=f64, shape=[?,2]}\n"
            "  %n = Neg(%p)\n"
            "  %s = AddV2(%p, %n)  # m.py:4:2\n"
            "}\n")
    a, b = parse_graphs(text, "two.ir")
    assert a.name == "a" and b.name == "b"
    assert b.node("s").output_types == [TensorType(DType.f64, (None, 2))]
    assert b.node("n").attrs["T"] is DType.f64
    assert b.node("s").location == SourceLocation("m.py", 4, 2)
    round_trip(b)


ELEMENTWISE = sorted(
    name for name, op in all_ops().items()
    if op.group == "elementwise" and op.inputs and len(op.outputs) == 1
    and all(a.type_attr == "T" and not a.is_list for a in op.inputs)
    and all(k == "T" or a.has_default for k, a in op.attrs.items()))
DEVICES = ["", "/job:ps/task:0", "/job:worker/replica:0/task:1/device:CPU:0", "/device:GPU:*"]
SCALAR_DTYPES = [DType.f32, DType.f64, DType.i32, DType.i64, DType.bool]


@st.composite
def random_graphs(draw):
    """A random DAG: placeholders and constants, then registered elementwise ops over them."""
    g = Graph(draw(st.from_regex(r"[A-Za-z0-9_.\-]{1,8}", fullmatch=True)))
    shape = draw(st.sampled_from([(), (3,), (None, 2), (2, 1, 4)]))
    outs = []

    def extras(node):
        node.assigned_device = draw(st.sampled_from(DEVICES))
        if outs and draw(st.booleans()):
            node.add_control_input(draw(st.sampled_from(outs)).node)

    def location():
        if draw(st.booleans()):
            return None
        return SourceLocation(draw(st.sampled_from(["m.py", "<stdin>", "a b/c.py"])),
                              draw(st.integers(1, 10**6)), draw(st.integers(0, 200)))

    for i in range(draw(st.integers(1, 4))):
        dt = draw(st.sampled_from(SCALAR_DTYPES))
        if draw(st.booleans()):
            node = make_node(g, "Placeholder", [], {"dtype": dt, "shape": shape}, name=f"in{i}",
                             device=draw(st.sampled_from(DEVICES)), location=location())
        else:
            cshape = tuple(d or 1 for d in shape) if draw(st.booleans()) else ()
            value = draw(hnp.arrays(dt.np, cshape))
            node = make_node(g, "Const", [], {"value": value, "dtype": dt}, name=f"c{i}",
                             device=draw(st.sampled_from(DEVICES)), location=location())
        extras(node)
        outs.append(node.output(0))
    for i in range(draw(st.integers(0, 12))):
        op = all_ops()[draw(st.sampled_from(ELEMENTWISE))]
        allowed = op.attrs["T"].allowed or tuple(SCALAR_DTYPES)
        candidates = [o for o in outs if o.dtype in allowed]
        if not candidates:
            continue
        first = draw(st.sampled_from(candidates))
        same = [o for o in candidates if o.dtype == first.dtype]
        inputs = [first] + [draw(st.sampled_from(same)) for _ in op.inputs[1:]]
        name = draw(st.sampled_from(["", "scope/", "a/b/"])) + op.name.lower()
        try:
            node = make_node(g, op.name, inputs, name=name, location=location(),
                             device=draw(st.sampled_from(DEVICES)))
        except CompileError:
            continue                            # e.g. an op with rank rules (BiasAdd)
        extras(node)
        outs.append(node.output(0))
    return g


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_property_random_graphs_round_trip_and_verify(g):
    verify(g)
    round_trip(g)


@settings(max_examples=80, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
       st.lists(st.integers(-2**63, 2**63 - 1), max_size=4))
def test_property_scalar_attrs_round_trip(f, s, li):
    g = Graph("p")
    make_node(g, "_IRTestAttrs", [], {"f": f, "s": s, "li": li, "lf": [f], "lstr": [s, s],
                                      "v": np.array([f] * 3, np.float64)})
    round_trip(g)


# --- parser errors -------------------------------------------------------------------------
HEAD = "graph @g {\n  %x = Placeholder() {dtype=f32, shape=[2]} : f32[2]\n"


def _error(text: str) -> IRSyntaxError:
    with pytest.raises(IRSyntaxError) as info:
        parse_graph(text, "bad.ir")
    return info.value


def _assert_points_at(err: IRSyntaxError, line: int, snippet: str, source: str) -> None:
    """Message is bad.ir:line:col: ..., then the source line, then a caret under ``snippet``."""
    col = source.index(snippet) + 1
    lines = str(err).split("\n")
    assert lines[0].startswith(f"bad.ir:{line}:{col}: error: "), lines[0]
    assert lines[1] == "  " + source
    assert lines[2] == "  " + " " * (col - 1) + "^"
    assert (err.file, err.line, err.col) == ("bad.ir", line, col)


@pytest.mark.parametrize("bad_line, snippet, expect", [
    ("  %y = Neg(x) : f32[2]", "x)", "values are written with a %"),
    ("  %y = Neg(%x : f32[2]", ": f32", "expected one of: ')', ','"),
    ("  %y = Neg(%x) {T=f32 : f32[2]", ": f32", "'}'"),
    ("  %y = Neg(%x) : f32[2] $", "$", "unexpected character '$'"),
    ("  %y Neg(%x) : f32[2]", "Neg", "expected '='"),
])
def test_syntax_errors_show_line_caret_and_expected(bad_line, snippet, expect):
    err = _error(HEAD + bad_line + "\n}\n")
    _assert_points_at(err, 3, snippet, bad_line)
    assert expect in str(err)


def test_unexpected_end_of_input_points_at_the_end():
    err = _error(HEAD)
    assert "unexpected end of input" in str(err) and "'}'" in str(err)
    assert err.line == 2


@pytest.mark.parametrize("bad_line, snippet, expect", [
    ("  %y = Frobnicate(%x) : f32[2]", "Frobnicate", "unknown op 'Frobnicate'"),
    ("  %x = Neg(%x) {T=f32} : f32[2]", "%x =", "duplicate node name '%x'"),
    ("  %y = Neg(%nope) {T=f32} : f32[2]", "%nope", "undefined operand '%nope'"),
    ("  %y = Neg(%x, ^%nope) {T=f32} : f32[2]", "^%nope", "undefined operand '^%nope'"),
    ("  %y = Neg(%x:3) {T=f32} : f32[2]", "%x:3", "%x has 1 output(s)"),
    ("  %y = Neg(%x) {T=q8} : f32[2]", "q8", "unknown value 'q8'"),
    ("  %y = Neg(%x) {T=f32, bogus=1} : f32[2]", "bogus", "has no attr 'bogus'"),
    ("  %y = Neg(%x) {T=f32, T=f64} : f32[2]", "T=f64", "attr 'T' is given twice"),
    ("  %y = Neg(%x) {T=f32} : f33[2]", "f33[2]", "unknown dtype 'f33'"),
    ("  %y = Neg(%x) {T=f32} : f32[2]  # no-location", "# no", "bad location"),
    ("  %y = Const() {dtype=f32, value=tensor<f32[3]>[1.0]} : f32[3]", "f32[3]>",
     "needs 3 elements, got 1"),
    ("  %y = Const() {dtype=i8, value=tensor<i8[1]>[300]} : i8[1]", "300]",
     "element 0 (300) is out of range for i8"),
    ("  %y = Placeholder() {dtype=f32, shape=[?,-2]} : f32[2]", "[?,-2]", "-2 is not a dim"),
    ("  %y = Placeholder() {dtype=f32, shape=[2], shape2=[?]} : f32[2]", "shape2",
     "has no attr 'shape2'"),
    ("  %y = Neg(%x) {T=[?]} : f32[2]", "[?]", "cannot hold ?"),
    ("  %y = Neg(%x) {T=3} : f32[2]", "3}", "attr T of Neg must be a type"),
])
def test_semantic_errors_report_their_line(bad_line, snippet, expect):
    err = _error(HEAD + bad_line + "\n}\n")
    _assert_points_at(err, 3, snippet, bad_line)
    assert expect in str(err)


def test_signature_errors_report_their_line():
    err = _error(HEAD + "  %y = AddV2(%x, %x) {T=i32}\n}\n")
    assert err.line == 3 and err.col == 3 and "%y: input 'x' is f32" in str(err)
    err = _error(HEAD + "  %y = Neg(%x) {T=f32} : i32[2]\n}\n")
    assert err.line == 3 and "output 0 ('y') is i32" in str(err)
    err = _error(HEAD + "  %y = Neg(%x, %x) {T=f32} : f32[2]\n}\n")
    assert err.line == 3 and "has 2 data inputs but Neg takes 1" in str(err)


def test_cannot_infer_untyped_node_names_the_problem():
    err = _error("graph @g {\n  %x = Placeholder() {dtype=f32, shape=[2]}\n"
                 "  %y = AddV2(%x, %z)\n  %z = Neg(%x)\n}\n")
    assert err.line == 3 and "cannot infer the types of %y: write the types of %z" in str(err)


def test_parse_graph_wants_exactly_one_graph():
    with pytest.raises(IRSyntaxError, match="exactly one graph, found 2"):
        parse_graph("graph @a {\n}\ngraph @b {\n}\n")


# --- verifier ------------------------------------------------------------------------------
def _small_graph():
    g = Graph("v")
    x = make_node(g, "Placeholder", [], {"dtype": DType.f32, "shape": [2]}, name="x",
                  location=SourceLocation("v.py", 1, 1))
    y = make_node(g, "Neg", [x.output(0)], name="y", location=SourceLocation("v.py", 2, 1))
    z = make_node(g, "AddV2", [x.output(0), y.output(0)], name="z", control_inputs=[y],
                  location=SourceLocation("v.py", 3, 1))
    verify(g)
    return g, x, y, z


def _verify_fails(g, *words):
    with pytest.raises(GraphError) as info:
        verify(g)
    for w in words:
        assert w in str(info.value), str(info.value)
    return info.value


def test_verifier_catches_input_from_another_graph():
    g, x, y, z = _small_graph()
    other = Graph("other")
    stray = make_node(other, "Placeholder", [], {"dtype": DType.f32, "shape": [2]}, name="stray")
    y.set_inputs([stray.output(0)])
    err = _verify_fails(g, "node 'y'", "%stray", "not in the graph")
    assert str(err).startswith("v.py:2:1: ")


def test_verifier_catches_erased_node_still_used():
    g, x, y, z = _small_graph()
    g._nodes.remove(y)                          # behind the graph's back
    del g._by_name["y"]
    _verify_fails(g, "%y", "not in the graph")


def test_verifier_catches_wrong_topological_order():
    g, x, y, z = _small_graph()
    g._nodes[1], g._nodes[2] = g._nodes[2], g._nodes[1]
    _verify_fails(g, "node 'z'", "%y comes after its user", "topological order")


def test_verifier_catches_stale_user_lists():
    g, x, y, z = _small_graph()
    x.users[z] += 1                             # one edge too many recorded
    _verify_fails(g, "node 'x'", "stale", "%z")
    g, x, y, z = _small_graph()
    del y.users[z]                              # the data + control edges are forgotten
    _verify_fails(g, "node 'z'", "%y does not list it as a user")
    g, x, y, z = _small_graph()
    ghost = Graph("elsewhere").add_node("NoOp", (), {}, name="ghost")
    x.users[ghost] = 1
    _verify_fails(g, "node 'x'", "%ghost", "not in the graph")


def test_verifier_catches_dtype_against_signature():
    g, x, y, z = _small_graph()
    i = make_node(g, "Placeholder", [], {"dtype": DType.i32, "shape": [2]}, name="i")
    g.add_node("AddV2", [x.output(0), i.output(0)], {"T": DType.f32}, name="bad",
               output_types=[TensorType(DType.f32, (2,))])
    _verify_fails(g, "node 'bad'", "input 'y' is i32", "wants f32")
    g, x, y, z = _small_graph()
    y.output_types = [TensorType(DType.f64, (2,))]
    _verify_fails(g, "node 'y'", "output 0", "is f64", "says f32")


def test_verifier_catches_attrs():
    g, x, y, z = _small_graph()
    del y.attrs["T"]
    _verify_fails(g, "node 'y'", "missing attr 'T'")
    g, x, y, z = _small_graph()
    y.attrs["T"] = DType.bool                   # Neg takes signed numbers only
    _verify_fails(g, "node 'y'", "T=bool is not allowed")
    g, x, y, z = _small_graph()
    y.attrs["colour"] = "red"
    _verify_fails(g, "node 'y'", "no attr 'colour'")


def test_verifier_catches_arity():
    g, x, y, z = _small_graph()
    g.add_node("Neg", [x.output(0), x.output(0)], {"T": DType.f32}, name="two",
               output_types=[TensorType(DType.f32, (2,))])
    _verify_fails(g, "node 'two'", "has 2 data inputs but Neg takes 1")


# --- graph API -----------------------------------------------------------------------------
def test_unique_names_follow_tensorflow():
    g = Graph()
    names = [g.add_node("NoOp", name="add").name for _ in range(3)]
    assert names == ["add", "add_1", "add_2"]
    assert g.add_node("NoOp", name="add_1").name == "add_1_1"
    g.add_node("NoOp", name="b_1", exact_name=True)
    assert g.add_node("NoOp", name="b").name == "b"
    assert g.add_node("NoOp", name="b").name == "b_2"
    with pytest.raises(GraphError, match="duplicate node name 'b_1'"):
        g.add_node("NoOp", name="b_1", exact_name=True)


@pytest.mark.parametrize("bad", ["", "a b", "x:0", "-x", "/abs", "é", "a#b"])
def test_invalid_names_are_refused(bad):
    with pytest.raises(GraphError, match="invalid node name"):
        Graph().add_node("NoOp", name=bad, exact_name=True)


def test_invalid_graph_name():
    with pytest.raises(GraphError, match="invalid graph name"):
        Graph("my graph")


def test_output_lookup_errors():
    g, x, y, z = _small_graph()
    assert g.output("y") == g.output("y:0") == g.output("%y") == y.output(0)
    with pytest.raises(GraphError, match="no node named 'q'"):
        g.output("q:0")
    with pytest.raises(GraphError, match="has 1 output"):
        g.output("y:1")
    with pytest.raises(GraphError, match="bad tensor name"):
        g.output("y:one")


def test_rewrites_keep_users_consistent():
    g, x, y, z = _small_graph()
    with g.inserting_before(z):
        w = make_node(g, "Neg", [y.output(0)], name="w")
    assert g.replace_all_uses_with(y.output(0), w.output(0)) == 1    # z's data edge; w keeps y
    assert z.inputs[1] == w.output(0) and w.inputs[0] == y.output(0)
    verify(g)
    with pytest.raises(GraphError, match="still used by w, z"):
        g.erase_node(y)                          # z still waits on y (control)
    z.remove_control_input(y)
    g.replace_all_uses_with(w.output(0), y.output(0))
    g.erase_node(w)
    verify(g)
    assert [n.name for n in g] == ["x", "y", "z"]


def test_topo_sort_restores_order_and_reports_cycles():
    g, x, y, z = _small_graph()
    g._nodes.reverse()
    g.topo_sort()
    assert [n.name for n in g] == ["x", "y", "z"]
    verify(g)
    y.set_inputs([z.output(0)])
    with pytest.raises(GraphError, match="cycle"):
        g.topo_sort()


def test_copy_is_deep_and_equal():
    g, x, y, z = _small_graph()
    x.assigned_device = "/job:a"
    c, mapping = g.copy()
    assert print_graph(c) == print_graph(g)
    assert mapping[x] is c.node("x") and c.node("x") is not x
    c.erase_node(c.node("z"))
    assert "z" in [n.name for n in g]
    verify(g)
    verify(c)
