"""Differential test on random graphs: compiled C against the numpy interpreter (the oracle),
with the default pipeline and with every optional pass off.

``tests/random_graphs.py`` builds GRAPHS seeded random graphs of 5 to 20 ops each
(elementwise with broadcasting, MatMul, reductions, Reshape, Transpose, ConcatV2, Slice,
StridedSlice, GatherV2) over placeholders of random static shapes, in f32, f64 and i32. All
of them go into one graph, so each pipeline costs one compile; the fetches are every
graph's results that no other op reads, so the passes see whole chains to fold, merge,
simplify, fuse and plan. A failure names the fetch and lists the ops of its graph.
"""
import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from oracle import check_against_interpreter
from random_graphs import RandomGraph

SEED = 20231
GRAPHS = 40
DTYPES = (fl.float32,) * 3 + (fl.float64, fl.int32)

# The passes a step cannot do without: the rest of the default pipeline is optional.
PASSES_OFF = PipelineOptions(passes=("prune", "infer-shapes", "place", "partition"))
PIPELINES = {"default": PipelineOptions(), "passes_off": PASSES_OFF}


@pytest.fixture(scope="module")
def random_graphs():
    """The graph holding every random graph, its fetches (name -> tensor), the feeds, and
    each fetch's graph (for the failure message)."""
    rng = np.random.default_rng(SEED)
    graph = fl.Graph()
    fetches, feeds, origin = {}, {}, {}
    with graph.as_default():
        for k in range(GRAPHS):
            dtype = DTYPES[int(rng.integers(len(DTYPES)))]
            g = RandomGraph(rng, f"g{k}", dtype).build(int(rng.integers(5, 21)))
            feeds.update(g.feeds)
            for j, t in enumerate(g.sinks()):
                fetches[f"g{k}/{j}"] = t
                origin[f"g{k}/{j}"] = g
    return graph, fetches, feeds, origin


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_random_graphs_match_the_interpreter(random_graphs, pipeline):
    graph, fetches, feeds, origin = random_graphs
    try:
        check_against_interpreter(graph, fetches, feeds, options=PIPELINES[pipeline])
    except AssertionError as e:
        name = _failed_fetch(str(e), fetches)
        ops = "\n  ".join(origin[name].ops) if name in origin else "?"
        raise AssertionError(f"{e}\nthe graph of {name} ({pipeline}):\n  {ops}") from None


def _failed_fetch(message: str, fetches) -> str:
    """The fetch an ``assert_same`` failure names (a line of its own, or ``name: ...``)."""
    for line in message.splitlines():
        word = line.strip().split(":")[0]
        if word in fetches:
            return word
    return "?"


def test_the_generator_covers_every_kind_of_op(random_graphs):
    """The seed's graphs use each op kind the generator has, and both broadcasting sides."""
    graph, fetches, _, origin = random_graphs
    ops = {op.type for op in graph.get_operations()}
    for op in ("MatMul", "Sum", "Mean", "Max", "Min", "Reshape", "Transpose", "ConcatV2",
               "Slice", "StridedSlice", "GatherV2", "AddV2", "Mul", "Maximum", "Tanh"):
        assert op in ops, op
    assert 30 <= GRAPHS <= 60 and len(fetches) >= GRAPHS
    sizes = [len(g.ops) for g in set(origin.values())]
    assert min(sizes) >= 5 and max(sizes) <= 20
