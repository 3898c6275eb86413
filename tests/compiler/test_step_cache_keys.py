"""The step cache's keys (``compiler/step.py``: ``source_key``, ``step_key``) hold everything
that makes one compiled step differ from another, so the artifact cache never serves a step
compiled for another graph or under other settings:

- every feed's spec (name, dtype, shape), also of a feed the pruned step does not use (its
  spec is in the manifest, and the runtime checks fed values against it);
- every ``FLOWC_*`` setting that changes generated code (``compiler.options.code_tag``), such
  as ``FLOWC_STREAM_MIN_BYTES``.
"""
import glob
import json
import os

import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize, source_key, step_key


def _unused_feed_graph(shape, dtype=fl.float32):
    """``y * 2`` with a placeholder ``x`` of ``shape`` that is fed but not used."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(dtype, shape, name="x")
        y = fl.placeholder(fl.float32, [3], name="y")
        z = y * 2.0
    return g, x, y, z


def test_a_fed_unused_placeholder_of_another_shape_gets_its_own_artifact(tmp_path,
                                                                        monkeypatch):
    """Two graphs that differ only in an unused fed placeholder's shape: the second used to
    be served the first's artifact and refused its own feed ("placeholder has shape [1,4]")."""
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    ones = np.ones(3, np.float32)
    for shape in ([1, 4], [2, 4], [1, 4]):
        g, x, y, z = _unused_feed_graph(shape)
        with fl.Session(graph=g) as s:
            out = s.run(z, {x: np.zeros(shape, np.float32), y: ones})
        np.testing.assert_array_equal(out, 2 * ones)
    manifests = glob.glob(os.path.join(str(tmp_path), "artifacts", "*", "*", "manifest.json"))
    assert len(manifests) == 2                       # the third run found the first's entry


@pytest.mark.parametrize("other", [dict(shape=[2, 4]), dict(shape=[None, 4]),
                                   dict(shape=None), dict(dtype=fl.float64)])
def test_every_feeds_spec_is_part_of_both_keys(other):
    keys = []
    for kw in (dict(), other):
        g, x, y, z = _unused_feed_graph(kw.get("shape", [1, 4]), kw.get("dtype", fl.float32))
        step = make_step_graph(g, [x.output, y.output], [z.output])
        before = source_key(step, PipelineOptions())
        optimize(step)
        keys.append((before, step_key(step)))
    assert keys[0][0] != keys[1][0] and keys[0][1] != keys[1][1]


def _stream_graph():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [1024], name="x")
        y = x * 2.0 + 1.0
    return g, x, y


def test_flowc_stream_min_bytes_is_part_of_both_keys(monkeypatch):
    keys = set()
    for threshold in (None, "4096", "4097"):
        if threshold is None:
            monkeypatch.delenv("FLOWC_STREAM_MIN_BYTES", raising=False)
        else:
            monkeypatch.setenv("FLOWC_STREAM_MIN_BYTES", threshold)
        g, x, y = _stream_graph()
        step = make_step_graph(g, [x.output], [y.output])
        before = source_key(step, PipelineOptions())
        optimize(step)
        keys.add((before, step_key(step)))
    assert len({k[0] for k in keys}) == 3 and len({k[1] for k in keys}) == 3


def test_a_step_compiled_under_one_stream_threshold_is_not_served_under_another(tmp_path,
                                                                                monkeypatch):
    """The same step in two sessions sharing a cache, with ``FLOWC_STREAM_MIN_BYTES`` at the
    output's size (streaming stores) and one byte above it (plain stores): two artifacts,
    each with the code its setting asks for."""
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    value = np.arange(1024, dtype=np.float32)
    sources = {}
    for threshold in ("4096", "4097", "4096"):
        monkeypatch.setenv("FLOWC_STREAM_MIN_BYTES", threshold)
        g, x, y = _stream_graph()
        with fl.Session(graph=g) as s:
            np.testing.assert_array_equal(s.run(y, {x: value}), value * 2 + 1)
        for path in glob.glob(os.path.join(str(tmp_path), "artifacts", "*", "*", "cpu_0.c")):
            with open(path) as f:
                sources.setdefault(path, (threshold, f.read()))
    assert sorted(t for t, _ in sources.values()) == ["4096", "4097"]
    for threshold, source in sources.values():
        assert ("_mm256_stream_si256" in source) == (threshold == "4096"), threshold


# --- a graph changed between runs is never served a step compiled before the change ---------
# A session keys a step by the graph's digest, remembered per graph revision (``Graph.
# remembered``), and a new session over the same graph loads the step without copying the
# graph: each edit below must bump the revision, or a stale step would run.

def _edited_graph():
    """``out = leaky_relu(x * c, alpha=0.1)``, ``c`` a constant 2: returns (graph, x, out)."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [3], name="x")
        c = fl.constant(np.float32(2.0), name="c")
        scaled = fl.multiply(x, c, name="scaled")
        out = fl.nn.leaky_relu(scaled, alpha=0.1, name="act")
    return g, x, out


X = np.array([-1.0, 0.5, 3.0], np.float32)


def _run(g, x, out, **options):
    """``out`` for ``X`` in a new session (its step from the cache where it was built before)."""
    with fl.Session(graph=g, options=PipelineOptions(**options)) as s:
        return s.run(out, {x: X})


def _expected(scale, alpha):
    y = X * scale
    return np.where(y > 0, y, y * alpha).astype(np.float32)


def _artifacts(cache) -> int:
    return len(glob.glob(os.path.join(str(cache), "artifacts", "*", "*", "manifest.json")))


def test_a_changed_attr_is_not_served_the_old_step(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    g, x, out = _edited_graph()
    np.testing.assert_allclose(_run(g, x, out), _expected(2.0, 0.1), rtol=1e-6)
    g.node("act").attrs["alpha"] = 0.5
    np.testing.assert_allclose(_run(g, x, out), _expected(2.0, 0.5), rtol=1e-6)
    g.node("act").attrs.update(alpha=0.25)
    np.testing.assert_allclose(_run(g, x, out), _expected(2.0, 0.25), rtol=1e-6)
    assert _artifacts(tmp_path) == 3


def test_a_changed_constant_is_not_served_the_old_step(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    g, x, out = _edited_graph()
    np.testing.assert_allclose(_run(g, x, out), _expected(2.0, 0.1), rtol=1e-6)
    c = g.node("c")
    c.attrs["value"] = np.array(3.0, np.float32)
    np.testing.assert_allclose(_run(g, x, out), _expected(3.0, 0.1), rtol=1e-6)
    # a constant hashed for a key is read-only: an edit in place could not bump the version
    with pytest.raises(ValueError):
        c.attrs["value"][...] = 4.0
    np.testing.assert_allclose(_run(g, x, out), _expected(3.0, 0.1), rtol=1e-6)


def _conv_graph(dilations):
    """A 3x3 SAME convolution (stride 1): its dilations change the values, not the shape."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [1, 6, 6, 1], name="x")
        w = fl.constant(np.arange(9, dtype=np.float32).reshape(3, 3, 1, 1), name="w")
        out = fl.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME", dilations=dilations,
                           name="conv")
    return g, x, out


def test_a_list_attr_edited_in_place_is_not_served_the_old_step(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    image = np.arange(36, dtype=np.float32).reshape(1, 6, 6, 1)

    def run(g, x, out):
        with fl.Session(graph=g) as s:
            return s.run(out, {x: image})

    expected = {d: run(*_conv_graph([1, d, d, 1])) for d in (1, 2)}
    assert not np.array_equal(expected[1], expected[2])
    g, x, out = _conv_graph([1, 1, 1, 1])
    np.testing.assert_array_equal(run(g, x, out), expected[1])
    dilations = g.node("conv").attrs["dilations"]
    dilations[1:3] = [2, 2]                                     # an assignment into the list
    np.testing.assert_array_equal(run(g, x, out), expected[2])
    dilations.pop()
    dilations.append(1)                                         # the same values again
    np.testing.assert_array_equal(run(g, x, out), expected[2])
    g.node("conv").attrs["dilations"][1] = 1
    g.node("conv").attrs["dilations"][2] = 1
    np.testing.assert_array_equal(run(g, x, out), expected[1])


def test_a_list_given_as_an_attr_is_the_nodes_own(tmp_path):
    """The caller's list, and another node's or another graph's copy, are not the node's:
    editing one edits no other node."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [1, 4, 4, 1], name="x")
        strides = [1, 1, 1, 1]
        a = fl.nn.max_pool(x, ksize=[1, 2, 2, 1], strides=strides, padding="VALID", name="a")
        fl.nn.max_pool(x, ksize=[1, 2, 2, 1], strides=strides, padding="VALID", name="b")
    strides[1] = 2
    assert g.node("a").attrs["strides"] == [1, 1, 1, 1]
    copy, _ = g.copy()
    version = g.version
    g.node("a").attrs["ksize"].append([7])                      # a list inside the list too
    assert g.version > version
    version = g.version
    g.node("a").attrs["ksize"][4][0] = 8
    assert g.version > version and g.node("a").attrs["ksize"][4] == [8]
    assert g.node("b").attrs["ksize"] == [1, 2, 2, 1]
    assert copy.node("a").attrs["ksize"] == [1, 2, 2, 1]
    assert a.shape.as_list() == [1, 3, 3, 1]


def test_a_new_node_and_a_changed_edge_are_not_served_the_old_step(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    g, x, out = _edited_graph()
    np.testing.assert_allclose(_run(g, x, out), _expected(2.0, 0.1), rtol=1e-6)
    with g.as_default():
        shifted = fl.add(g.get_tensor_by_name("scaled:0"), 10.0, name="shifted")  # a new node
    np.testing.assert_allclose(_run(g, x, out), _expected(2.0, 0.1), rtol=1e-6)
    g.node("act").set_input(0, shifted.output)                           # an edge edited
    g.topo_sort()                                       # (the graph keeps topological order)
    np.testing.assert_allclose(_run(g, x, out), X * 2 + 10, rtol=1e-6)     # all positive


def test_a_changed_device_is_not_served_the_old_step(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    g, x, out = _edited_graph()
    np.testing.assert_allclose(_run(g, x, out, cpu_devices=2), _expected(2.0, 0.1), rtol=1e-6)
    g.node("act").device = "/device:CPU:1"
    np.testing.assert_allclose(_run(g, x, out, cpu_devices=2), _expected(2.0, 0.1), rtol=1e-6)
    manifests = glob.glob(os.path.join(str(tmp_path), "artifacts", "*", "*", "manifest.json"))
    assert len(manifests) == 2
    devices = set()
    for path in manifests:
        with open(path) as f:
            devices.add(tuple(d["device"][-5:] for d in json.load(f)["devices"]))
    assert ("CPU:0",) in devices and any("CPU:1" in d for d in devices)
    g.node("act").device = "/device:CPU:7"      # a device the session does not have
    with pytest.raises(Exception, match="CPU:7"):
        _run(g, x, out, cpu_devices=2)


def test_a_graph_edited_between_runs_of_one_session_runs_its_new_step(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    g, x, out = _edited_graph()
    with fl.Session(graph=g) as s:
        np.testing.assert_allclose(s.run(out, {x: X}), _expected(2.0, 0.1), rtol=1e-6)
        g.node("act").attrs["alpha"] = 0.5
        np.testing.assert_allclose(s.run(out, {x: X}), _expected(2.0, 0.5), rtol=1e-6)
        g.node("c").attrs["value"] = np.array(-1.0, np.float32)
        np.testing.assert_allclose(s.run(out, {x: X}), _expected(-1.0, 0.5), rtol=1e-6)


def test_the_same_graph_in_a_new_session_loads_its_step_without_copying_it(tmp_path,
                                                                           monkeypatch):
    """A warm start: the step comes from the cache, and the graph is neither copied nor
    hashed again (its digest is remembered for its revision)."""
    import compiler.step as step_module
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    g, x, out = _edited_graph()
    _run(g, x, out)
    calls = []
    for name in ("make_step_graph", "_graph_digest"):
        real = getattr(step_module, name)
        monkeypatch.setattr(step_module, name,
                            lambda *a, _real=real, _name=name, **k: calls.append(_name)
                            or _real(*a, **k))
    np.testing.assert_allclose(_run(g, x, out), _expected(2.0, 0.1), rtol=1e-6)
    assert calls == []
    g.node("act").attrs["alpha"] = 0.5
    np.testing.assert_allclose(_run(g, x, out), _expected(2.0, 0.5), rtol=1e-6)
    assert calls.count("make_step_graph") == 1


# --- the graph digest: every field of a node's text, and the same in every process ---------

def _digest_graph():
    g = fl.Graph("digested")
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 3], name="x")
        w = fl.constant(np.arange(60, dtype=np.float32).reshape(3, 20), name="w")   # big
        b = fl.constant(np.float32(0.5), name="b")
        y = fl.nn.leaky_relu(fl.matmul(x, w) + b, alpha=0.1, name="y")
        y.op.node.attrs["_list"] = [1, 2, [3]]       # an internal attr: kept, printed, hashed
        with fl.control_dependencies([b]):
            z = fl.identity(y, name="z")
    return g, z


def _edits():
    from compiler.ir.location import SourceLocation
    from compiler.ir.types import TensorType
    def retype(g):
        g.node("z").output_types[0] = TensorType(fl.float32, (None, 21))
    return {
        "rename": lambda g: g.rename(g.node("z"), "z2"),
        "graph name": lambda g: setattr(g, "name", "other"),
        "op": lambda g: setattr(g.node("z"), "op", "StopGradient"),
        "attr": lambda g: g.node("y").attrs.__setitem__("alpha", 0.2),
        "attr added": lambda g: g.node("y").attrs.__setitem__("extra", [1, 2]),
        "list attr appended to": lambda g: g.node("y").attrs["_list"].append(3),
        "list attr assigned into": lambda g: g.node("y").attrs["_list"].__setitem__(0, 5),
        "list attr in a list": lambda g: g.node("y").attrs["_list"][2].append(4),
        "small constant": lambda g: g.node("b").attrs.__setitem__(
            "value", np.float32(0.25) * np.ones((), np.float32)),
        "big constant": lambda g: g.node("w").attrs.__setitem__(
            "value", np.arange(1, 61, dtype=np.float32).reshape(3, 20)),
        "type": retype,
        "device": lambda g: setattr(g.node("y"), "device", "/device:CPU:1"),
        "assigned device": lambda g: setattr(g.node("y"), "assigned_device",
                                             "/job:localhost/replica:0/task:0/device:CPU:0"),
        "location": lambda g: setattr(g.node("y"), "location", SourceLocation("m.py", 1, 2)),
        "input": lambda g: g.node("z").set_input(0, g.node("b").output(0)),
        "control input": lambda g: g.node("z").remove_control_input(g.node("b")),
    }


@pytest.mark.parametrize("edit", sorted(_edits()))
def test_every_edit_changes_the_version_and_the_digest(edit):
    from compiler.step import graph_digest
    g, _ = _digest_graph()
    before, version = graph_digest(g), g.version
    _edits()[edit](g)
    assert g.version > version
    assert graph_digest(g) != before
    fresh, _ = _digest_graph()
    assert graph_digest(fresh) == before and graph_digest(fresh) != graph_digest(g)


def test_the_digest_is_the_same_in_another_process():
    """A warm start in a new process finds the step by the digest of the graph it builds:
    the digest depends on the graph's content only, not on which objects it shares."""
    import subprocess
    import sys
    from compiler.step import graph_digest
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    code = ("import sys; sys.path[:0] = [%r, %r]; import test_step_cache_keys as t; "
            "from compiler.step import graph_digest; print(graph_digest(t._digest_graph()[0])"
            ".hex())" % (root, here))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=os.getcwd())
    g, _ = _digest_graph()
    assert out.stdout.split()[-1] == graph_digest(g).hex()


def test_set_shape_bumps_the_version():
    """An edit the TF1 API makes in place (``Tensor.set_shape`` sets the node's output types)
    is a graph edit like any other."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None], name="x")
        y = x * 2.0
    version = g.version
    y.set_shape([3])
    assert g.version > version and y.shape.as_list() == [3]
