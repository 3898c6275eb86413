"""Property-based fuzzing of the manifest loader (hypothesis, bounded): a good artifact's
manifest with random entries replaced, deleted or added (hostile paths, foreign shared objects,
unknown dtypes, huge and negative integers, NaN, nesting, wrong types), written with a valid
checksum (anyone can compute one) or without, either loads or raises ArtifactError: never
another exception, and no shared object outside the artifact folder is ever opened."""
import hashlib
import json
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime.module as module_mod
from runtime import ArtifactError, load_artifact
from runtime.artifact import MANIFEST, canonical_json, write_manifest
from artifact_cases import build_foreign_library, read_manifest, write_small_artifact


@pytest.fixture(scope="module")
def fuzz_env(tmp_path_factory):
    """(artifact folder, its good manifest, the foreign object, its marker, the dlopen log)."""
    root = tmp_path_factory.mktemp("fuzz")
    art = write_small_artifact(root / "art")
    foreign, marker = build_foreign_library(root / "evil")
    shutil.copyfile(foreign, os.path.join(art, "stray.so"))    # in the folder, never hashed
    opened = []
    real = module_mod.ffi.dlopen
    mp = pytest.MonkeyPatch()
    mp.setattr(module_mod.ffi, "dlopen",
               lambda name, *a: (opened.append(os.path.realpath(name)), real(name, *a))[1])
    yield art, read_manifest(art), foreign, marker, opened
    mp.undo()


def _paths(obj, here=()):
    """Every place in the manifest: the tuple of keys and indices that leads to it."""
    yield here
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, here + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, here + (i,))


def _nested(depth):
    v = 0
    for _ in range(depth):
        v = [v]
    return v


def values(foreign):
    names = st.sampled_from([
        "cpu_0.so", "cpu_0.c", "graph.ir", "stray.so", "../evil/foreign.so", foreign,
        os.path.dirname(foreign), "/etc/passwd", "..", ".", "", "manifest.json", "cpu_0.so/",
        "./cpu_0.so", "f32", "f99", "i64", "bool", "resource", "bf16", "cuda", "cpu", "sm_90", "sim",
        "x", "y", "w", "a\x00b", "\u00e9\u00e8"])
    integers = (st.integers(min_value=-3, max_value=20)
                | st.sampled_from([-1, 2 ** 31, 2 ** 63, 2 ** 64, 10 ** 30, -10 ** 30]))
    scalars = (st.none() | st.booleans() | names | st.text(max_size=8) | integers
               | st.floats(allow_nan=True, allow_infinity=True))
    containers = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                              | st.dictionaries(names | st.text(max_size=6), inner, max_size=4),
                              max_leaves=6)
    deep = st.sampled_from([_nested(40), _nested(150)])
    # mostly what an entry could plausibly hold, sometimes structure, rarely deep nesting
    return st.one_of(names, names, integers, integers, scalars, containers, deep)


@st.composite
def mutated_manifests(draw, good, foreign):
    manifest = json.loads(json.dumps(good))
    for _ in range(draw(st.integers(1, 3))):
        places = list(_paths(manifest))
        where = draw(st.sampled_from(places))
        op = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if not where:
            op = "add"
        parent = manifest
        for key in where[:-1]:
            parent = parent[key]
        target = parent[where[-1]] if where else manifest
        if op == "delete":
            del parent[where[-1]]
        elif op == "replace":
            parent[where[-1]] = draw(values(foreign))
        elif isinstance(target, dict):
            target[draw(st.sampled_from(["module", "fatbin", "ir", "feeds", "kind", "shape",
                                         "../x", "stray.so", "kernels", "queues"])
                        | st.text(max_size=5))] = draw(values(foreign))
        elif isinstance(target, list):
            target.append(draw(values(foreign)))
    return manifest, draw(st.sampled_from(["checksum", "checksum", "checksum", "raw"]))


def _write(art, manifest, how):
    """As write_manifest writes it (without its fsync, which would dominate the run time)."""
    if how == "checksum":
        manifest = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
        manifest["manifest_sha256"] = hashlib.sha256(canonical_json(manifest).encode()).hexdigest()
    with open(os.path.join(art, MANIFEST), "w") as f:
        json.dump(manifest, f)


def test_every_mutated_manifest_loads_or_is_an_artifact_error(fuzz_env):
    art, good, foreign, marker, opened = fuzz_env
    folder = os.path.realpath(art)

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(mutated_manifests(good, foreign))
    def check(case):
        manifest, how = case
        _write(art, manifest, how)
        del opened[:]
        try:
            load_artifact(art)
        except ArtifactError as e:
            assert art in str(e) or MANIFEST in str(e), str(e)
        for name in opened:
            real = os.path.realpath(name)
            assert os.path.dirname(real) == folder, f"dlopen of {name} ({real})"
            assert os.path.basename(real) != "stray.so"
        assert not os.path.exists(marker), "a foreign shared object was loaded"

    try:
        check()
    finally:
        write_manifest(art, good)
    load_artifact(art)
