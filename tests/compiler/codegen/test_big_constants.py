"""Big constants (an embedding table given as a numpy array) are raw files, not C
initializers: compile time stays flat in their size. A module on its own includes them with
``.incbin``; an artifact's module reads them from the artifact's blobs, bound at load."""
from __future__ import annotations

import os

import numpy as np

import dsl as fl
from compiler.codegen.emitter import BLOB_MIN_BYTES
from compiler.step import make_step_graph, optimize, write_artifact
from runtime.artifact import load_artifact


def test_a_big_table_is_a_blob_and_reads_back_exactly(tmp_path):
    rows = BLOB_MIN_BYTES // (64 * 4) * 4                       # 4x the threshold
    table = np.random.RandomState(0).randn(rows, 64).astype(np.float32)
    table[3, 5], table[7, 1] = np.inf, -0.0
    g = fl.Graph()
    with g.as_default():
        ids = fl.placeholder(fl.i32, [None], name="ids")
        emb = fl.Variable(table, name="emb")
        small = fl.constant(np.arange(6, dtype=np.float32))
        rows_out = fl.nn.embedding_lookup(emb, ids) * 1.0
        init = emb.initializer
    picks = np.array([0, 3, 7, rows - 1], np.int32)
    with fl.Session(graph=g) as sess:
        sess.run(init)
        got = sess.run(rows_out, {ids: picks})
    np.testing.assert_array_equal(got, table[picks])
    assert np.signbit(got[2, 1])

    # the initializer's step as an artifact: the table is a .bin beside a small C file and a
    # module that does not hold it again
    init_step = make_step_graph(g, [], [], [init.node])
    optimize(init_step)
    out = str(tmp_path / "art")
    write_artifact(init_step, out)
    sources = [f for f in os.listdir(out) if f.endswith(".c")]
    blobs = [f for f in os.listdir(out) if f.endswith(".bin")]
    assert len(blobs) == 1 and os.path.getsize(os.path.join(out, blobs[0])) == table.nbytes
    text = open(os.path.join(out, sources[0])).read()
    assert "flowc_consts[0]" in text and ".incbin" not in text and len(text) < 100_000
    art = load_artifact(out)
    art.run({})
    (var,) = art.variables
    np.testing.assert_array_equal(art.store.read(var.name), table)


def test_small_constants_stay_c_initializers():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.f32, [4], name="x")
        y = x * fl.constant(np.array([1, 2, 3, 4], np.float32))
    step = make_step_graph(g, [x.output], [y.output])
    optimize(step)
    from compiler.codegen.emitter import emit_c
    emitted = emit_c(step.graph, step.feeds, step.retvals)
    assert not emitted.blobs and ".incbin" not in emitted.source


def test_constants_written_as_c_text_read_as_the_literals_of_each_value():
    """``CTarget.literals`` (an array at once, as the emitter writes a constant) gives the
    text ``literal`` gives each value: exact floats, -0.0, subnormals, NaN and infinities."""
    from compiler.codegen.target import C
    from runtime.dtypes import DType
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.standard_normal(300), rng.standard_normal(50) * 1e30,
                             rng.standard_normal(50) * 1e-40,
                             [0.0, -0.0, 2.0, 1e16, 16777217.0, 1 / 3, np.nan, np.inf, -np.inf]])
    integers = np.nan_to_num(values[:300] * 100).astype(np.int64)
    for dtype in (DType.f32, DType.f64, DType.i32, DType.bool):
        with np.errstate(over="ignore"):        # 1e30 is inf in f32
            array = values.astype(dtype.np) if dtype.is_floating else integers.astype(dtype.np)
        assert C.literals(array, dtype) == [C.literal(v, dtype) for v in array.tolist()]
