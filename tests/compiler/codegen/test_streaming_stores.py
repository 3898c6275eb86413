"""Elementwise kernels whose output is at least the last-level cache write it with streaming
stores (``codegen_templates/c/elementwise.c.j2``): blocks of 256 bytes through a tile, plain
stores for the head and the tail. ``FLOWC_STREAM_MIN_BYTES`` lowers the threshold so small
outputs take that path here; every dtype width, sizes that leave a tail or no whole block,
and the fused chain equal the interpreter, on one thread and on two."""
import numpy as np
import pytest

import dsl as fl
from compiler.codegen.elementwise import last_level_cache_bytes
from compiler.step import make_step_graph, optimize, write_artifact
from oracle import NO_FOLDING, check_against_interpreter


@pytest.fixture
def stream_everything(monkeypatch):
    monkeypatch.setenv("FLOWC_STREAM_MIN_BYTES", "64")


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("n", [1, 15, 64, 1000, 4099])
def test_streamed_outputs_match_the_interpreter(graph, rng, stream_everything, monkeypatch,
                                                threads, n):
    monkeypatch.setenv("FLOWC_NUM_THREADS", threads)
    x = fl.placeholder(fl.float32, [n], name="x")
    d = fl.placeholder(fl.float64, [n], name="d")
    i = fl.placeholder(fl.int32, [n], name="i")
    b = fl.placeholder(fl.int8, [n], name="b")
    fetches = {"chain": fl.nn.relu(x * 1.5 + 0.5) * fl.sigmoid(x), "f64": d * 2.0 - 1.0,
               "i32": i * 3 + 1, "i8": b + b, "bool": x > 0.25}
    feed = {x: rng.standard_normal(n).astype(np.float32), d: rng.standard_normal(n),
            i: rng.integers(-100, 100, n).astype(np.int32),
            b: rng.integers(-50, 50, n).astype(np.int8)}
    check_against_interpreter(graph, fetches, feed)


def test_the_stream_path_is_taken_only_from_the_threshold_on(graph, tmp_path, monkeypatch):
    x = fl.placeholder(fl.float32, [1024], name="x")
    y = x * 2.0 + 1.0
    monkeypatch.setenv("FLOWC_STREAM_MIN_BYTES", str(4096))      # exactly the output's bytes
    sources = []
    for threshold in (4096, 4097):
        monkeypatch.setenv("FLOWC_STREAM_MIN_BYTES", str(threshold))
        step = make_step_graph(graph, [x.output], [y.output])
        optimize(step, NO_FOLDING)
        path = write_artifact(step, str(tmp_path / f"t{threshold}"))
        with open(f"{path}/cpu_0.c") as f:
            sources.append(f.read())
    assert "_mm256_stream_si256" in sources[0] and "_mm256_stream_si256" not in sources[1]
    assert last_level_cache_bytes() >= 1 << 20
