"""Artifacts and shared objects for the tests of artifact loading (tests/runtime/test_artifact_*.py,
tests/compiler/test_cli_artifact.py): one small compiled artifact with a big constant (so it
carries a ``.bin`` blob), and a foreign shared object whose constructor leaves a marker file, so
a test can tell whether the loader ever ``dlopen``-ed it."""
import json
import os
import subprocess

import numpy as np

BIG = 16384                       # f32 elements: 64 KiB, a blob (codegen's BLOB_MIN_BYTES)


def write_small_artifact(out_dir, sign_key=None) -> str:
    """x f32[?,3] -> y = relu(2x + 1); w f32[BIG] -> z = w * arange(BIG) (a blob constant)."""
    import dsl as fl
    from compiler.step import make_step_graph, optimize, write_artifact
    g = fl.Graph("art")
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, 3], name="x")
        y = fl.nn.relu(x * 2.0 + 1.0, name="y")
        w = fl.placeholder(fl.f32, [BIG], name="w")
        z = fl.multiply(w, fl.constant(np.arange(BIG, dtype=np.float32)), name="z")
    step = make_step_graph(g, [x.output, w.output], [y.output, z.output])
    optimize(step)
    kwargs = {} if sign_key is None else {"sign_key": sign_key}
    return write_artifact(step, str(out_dir), **kwargs)


def small_feeds():
    return {"x": np.array([[-1.0, 0.0, 2.0]], dtype=np.float32),
            "w": np.ones(BIG, dtype=np.float32)}


FOREIGN_C = """
#include <stdio.h>
__attribute__((constructor)) static void flowc_test_foreign_ctor(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fputs("the foreign constructor ran\\n", f); fclose(f); }
}
int not_a_flowc_symbol(void) { return 7; }
"""


def build_foreign_library(folder, name="foreign.so"):
    """(path of a shared object that is not a flowc module, path of the marker file its
    constructor writes when it is loaded)."""
    folder = str(folder)
    os.makedirs(folder, exist_ok=True)
    marker = os.path.join(folder, name + ".loaded")
    src = os.path.join(folder, name + ".c")
    with open(src, "w") as f:
        f.write(FOREIGN_C % marker)
    out = os.path.join(folder, name)
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-o", out, src], check=True,
                   capture_output=True, timeout=120)
    return out, marker


def read_manifest(path) -> dict:
    with open(os.path.join(str(path), "manifest.json")) as f:
        return json.load(f)
