"""The step cache's keys (``compiler/step.py``: ``source_key``, ``step_key``) hold everything
that makes one compiled step differ from another, so the artifact cache never serves a step
compiled for another graph or under other settings:

- every feed's spec (name, dtype, shape), also of a feed the pruned step does not use (its
  spec is in the manifest, and the runtime checks fed values against it);
- every ``FLOWC_*`` setting that changes generated code (``compiler.options.code_tag``), such
  as ``FLOWC_STREAM_MIN_BYTES``.
"""
import glob
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
