"""The on-disk caches: a hit compiles nothing; a corrupt entry is rebuilt, never loaded."""
import glob
import os

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.build import build_shared_object
from runtime.module import CModule

from runtime.module import ABI_VERSION

SOURCE = """
#include "flowc_rt.h"
int flowc_abi_version(void) { return %d; }
void flowc_free(void *p) { free(p); }
int flowc_entry(const flowc_tensor *feeds, flowc_tensor *fetches, const flowc_runtime *rt, void *rv, int64_t timeout_ms, flowc_status *st) {
    (void)feeds; (void)fetches; (void)rt; (void)rv; (void)timeout_ms; (void)st; return 0;
}
""" % ABI_VERSION


def test_object_cache_hit_and_corrupt_entry_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    first = build_shared_object(SOURCE)
    again = build_shared_object(SOURCE)
    assert not first.cached and again.cached and again.path == first.path
    with open(first.path, "r+b") as f:                 # corrupt the cached object
        f.seek(100)
        f.write(b"\0garbage\0")
    rebuilt = build_shared_object(SOURCE)
    assert not rebuilt.cached and rebuilt.path == first.path
    CModule(rebuilt.path)                              # loads: it is a real module again


def test_rejected_sources_are_kept_and_named_and_nothing_is_cached(tmp_path, monkeypatch):
    """A source the C compiler (or nvcc, where it is installed) rejects: a BuildError naming
    where the source was kept, the source there as it was, and no cached object left."""
    from compiler.codegen.cuda_build import build_cuda_module, find_nvcc
    from compiler.errors import BuildError
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FLOWC_CC_JOBS", "1")
    builds = [(build_shared_object, SOURCE + "\nint broken(void) { return }\n")]
    if find_nvcc() is not None:
        builds.append((build_cuda_module, "__global__ void broken() { return }\n"))
    for build, source in builds:
        with pytest.raises(BuildError, match="source kept at") as e:
            build(source)
        kept = str(e.value).split("source kept at ")[1].split(")")[0]
        with open(kept) as f:
            assert f.read() == source
    assert not glob.glob(os.path.join(str(tmp_path), "*", "*", "*.so"))


def _graph():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None], name="x")
        y = fl.exp(x) + 1.0
    return g, x, y


@pytest.mark.cpu_only
def test_session_rebuilds_a_tampered_cached_artifact(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    g, x, y = _graph()
    value = np.arange(4, dtype=np.float32)
    with fl.Session(graph=g) as s:
        want = s.run(y, {x: value})
    modules = glob.glob(os.path.join(str(tmp_path), "artifacts", "*", "*", "cpu_0.so"))
    assert len(modules) == 1
    with open(modules[0], "ab") as f:                  # the cached artifact no longer matches
        f.write(b"tampered")
    with fl.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {x: value}), want)
        assert s.compile_count == 1
    # the master says which entry it rebuilt and why, instead of swallowing the failure
    reports = [r.getMessage() for r in caplog.records if "does not load" in r.getMessage()]
    assert reports and "does not match its manifest hash" in reports[0], reports
    assert os.path.dirname(modules[0]) in reports[0]


def _counting_optimize(monkeypatch):
    import compiler.master
    runs = []
    real = compiler.master.optimize

    def counted(step, options=None):
        runs.append(step)
        return real(step, options)
    monkeypatch.setattr(compiler.master, "optimize", counted)
    return runs


def test_a_second_session_starts_from_the_cache_without_running_the_passes(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    runs = _counting_optimize(monkeypatch)
    g, x, y = _graph()
    value = np.arange(4, dtype=np.float32)
    with fl.Session(graph=g) as s:
        want = s.run(y, {x: value})
    assert len(runs) == 1
    with fl.Session(graph=g) as s:                     # the same step: straight to the artifact
        np.testing.assert_array_equal(s.run(y, {x: value}), want)
    assert len(runs) == 1
    with g.as_default():
        z = y * 2.0                                    # another step: its passes run
    with fl.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(z, {x: value}), want * 2.0)
    assert len(runs) == 2
    for index in glob.glob(os.path.join(str(tmp_path), "artifacts", "by-source", "*", "*")):
        with open(index, "w") as f:                    # a damaged record: the passes run again
            f.write("not a key")
    with fl.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {x: value}), want)
    assert len(runs) == 3


def test_options_that_make_passes_show_something_always_run_them(tmp_path, monkeypatch,
                                                                  capsys):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    runs = _counting_optimize(monkeypatch)
    g, x, y = _graph()
    value = np.arange(4, dtype=np.float32)
    with fl.Session(graph=g) as s:
        s.run(y, {x: value})
    config = fl.ConfigProto(log_device_placement=True)
    with fl.Session(graph=g, config=config) as s:
        s.run(y, {x: value})
    assert len(runs) == 2
    assert "CPU:0" in capsys.readouterr().err


def test_a_cache_entry_another_process_wrote_first_is_kept(tmp_path):
    """Two processes compiling one step into the cache race to move their artifact into
    place: the second finds the first's there and keeps it (a content-addressed entry),
    while an explicit output folder is replaced."""
    from compiler.step import make_step_graph, optimize, write_artifact
    from runtime import load_artifact
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [3], name="x")
        y = x * 2.0 + 1.0
    step = make_step_graph(g, [x.output], [y.output])
    optimize(step)
    path = str(tmp_path / "entry")
    write_artifact(step, path)
    marker = os.path.join(path, "first-writer")
    open(marker, "w").close()
    assert write_artifact(step, path, replace=False) == path
    assert os.path.exists(marker)                        # the first writer's entry stayed
    assert not glob.glob(str(tmp_path / ".flowc-artifact-*"))    # the second's copy is gone
    out = load_artifact(path).executable.run([np.arange(3, dtype=np.float32)])
    np.testing.assert_array_equal(out[0], [1, 3, 5])
    write_artifact(step, path)                           # replace (the default)
    assert not os.path.exists(marker)
