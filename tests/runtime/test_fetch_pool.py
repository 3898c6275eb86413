"""The process's buffer pool: fetched results are pool blocks that numpy arrays own.

A result the user holds keeps its block (values unchanged by later steps); a dropped result
gives its block back and the next step of that size reuses it; a step that fails part-way
(an allocation fails, forced with the pool's test hook) releases every block it took.
"""
import gc

import numpy as np
import pytest

import dsl as fl
from oracle import run_in_threads
from runtime.buffer_pool import fail_nth_allocation, pool_stats
from runtime.errors import RuntimeExecutionError

pytestmark = pytest.mark.cpu_only      # CPU internals (conftest.py)

N = 1 << 16                     # 256 KiB of float32: a cached size class


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _live_after_collect() -> int:
    gc.collect()
    return pool_stats().live_blocks


@pytest.fixture
def no_forced_failure():
    yield
    fail_nth_allocation(0)


def _chain(graph, shape=(N,)):
    x = fl.placeholder(fl.float32, list(shape), name="x")
    return x, fl.nn.relu(x * 1.5 + 0.5) * fl.sigmoid(x)


def _expected(xv):
    return np.maximum(xv * 1.5 + 0.5, 0) / (1 + np.exp(-xv))


def test_held_results_keep_their_blocks_across_steps(graph, rng):
    x, y = _chain(graph)
    inputs = [rng.standard_normal(N).astype(np.float32) for _ in range(4)]
    with fl.Session(graph=graph) as s:
        held = [s.run(y, {x: v}) for v in inputs]
        for _ in range(3):                           # more steps while the results are held
            s.run(y, {x: inputs[0] * 2})
        addresses = {_address(a) for a in held}
        assert len(addresses) == len(held)           # four live results, four blocks
        for a, v in zip(held, inputs):
            np.testing.assert_allclose(a, _expected(v), rtol=1e-5, atol=1e-6)


def test_a_view_of_a_result_keeps_the_block(graph, rng):
    x, y = _chain(graph)
    v1, v2 = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    with fl.Session(graph=graph) as s:
        result = s.run(y, {x: v1})
        tail = result[N // 2:]                       # a view: its base is the fetched array
        address = _address(result)
        del result
        gc.collect()
        again = s.run(y, {x: v2})
        assert _address(again) != address
        np.testing.assert_allclose(tail, _expected(v1)[N // 2:], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(again, _expected(v2), rtol=1e-5, atol=1e-6)


def test_dropped_results_are_reused_by_the_next_step(graph, rng):
    x, y = _chain(graph)
    v = rng.standard_normal(N).astype(np.float32)
    with fl.Session(graph=graph) as s:
        s.run(y, {x: v})                             # compile; its result is dropped
        live = _live_after_collect()
        first = s.run(y, {x: v})
        address = _address(first)
        before = pool_stats()
        del first
        gc.collect()
        assert pool_stats().cached_blocks == before.cached_blocks + 1
        second = s.run(y, {x: v})
        after = pool_stats()
        assert _address(second) == address          # the same mapped block, not a new one
        assert after.hits == before.hits + 1 and after.misses == before.misses
        np.testing.assert_allclose(second, _expected(v), rtol=1e-5, atol=1e-6)
        del second
        assert _live_after_collect() == live


def test_small_results_come_from_the_pool_too(graph, rng):
    """A scalar or a short vector fetched every step (a loss, a few logits) reuses an idle
    block of its power-of-two class instead of a malloc and a free per step."""
    x = fl.placeholder(fl.float32, [None], name="x")
    total, doubled = fl.reduce_sum(x), x * 2.0
    v = rng.standard_normal(100).astype(np.float32)
    with fl.Session(graph=graph) as s:
        s.run([total, doubled], {x: v})                   # compile; the blocks go back
        gc.collect()
        before = pool_stats()
        for _ in range(5):
            got_total, got_doubled = s.run([total, doubled], {x: v})
            np.testing.assert_allclose(got_total, v.sum(dtype=np.float64), rtol=1e-5)
            np.testing.assert_array_equal(got_doubled, v * 2.0)
            del got_total, got_doubled
            gc.collect()
        after = pool_stats()
        assert after.misses == before.misses
        assert after.hits >= before.hits + 10          # two blocks per step, both reused


def test_dynamic_shapes_get_blocks_of_their_size(graph, rng):
    x, y = _chain(graph, shape=(None,))
    with fl.Session(graph=graph) as s:
        held = []
        for n in (1, 17, 5000, 40000, N, 3 * N + 1, 40000):
            v = rng.standard_normal(n).astype(np.float32)
            got = s.run(y, {x: v})
            assert got.shape == (n,)
            np.testing.assert_allclose(got, _expected(v), rtol=1e-5, atol=1e-6)
            held.append((got, v))
        for got, v in held:
            np.testing.assert_allclose(got, _expected(v), rtol=1e-5, atol=1e-6)


def test_concurrent_steps_never_share_a_live_block(graph, rng):
    x, y = _chain(graph)
    inputs = [rng.standard_normal(N).astype(np.float32) for _ in range(4)]
    wrong = []
    with fl.Session(graph=graph) as s:
        s.run(y, {x: inputs[0]})

        def worker(v):
            kept = []
            for _ in range(20):
                kept.append(s.run(y, {x: v}))
                if len(kept) > 3:
                    kept.pop(0)
                want = _expected(v)
                if not all(np.allclose(k, want, rtol=1e-5, atol=1e-6) for k in kept):
                    wrong.append(v)
        run_in_threads(worker, inputs)
    assert not wrong


def test_copied_fetches_and_loop_results_are_pool_blocks(graph, rng):
    x = fl.placeholder(fl.float32, [N], name="x")
    c = fl.constant(np.arange(6, dtype=np.float32))
    _, looped = fl.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [0, x])
    v = rng.standard_normal(N).astype(np.float32)
    with fl.Session(graph=graph) as s:
        s.run([x, c, looped], {x: v})
        live = _live_after_collect()
        fed, const, loop_out = s.run([x, c, looped], {x: v})
        assert pool_stats().live_blocks == live + 3
        assert not np.shares_memory(fed, v)
        np.testing.assert_array_equal(fed, v)
        np.testing.assert_array_equal(const, np.arange(6))
        np.testing.assert_allclose(loop_out, v * 8, rtol=1e-6)
        del fed, const, loop_out
        assert _live_after_collect() == live


def test_failed_fetch_copy_releases_every_block(graph, rng, no_forced_failure):
    x = fl.placeholder(fl.float32, [N], name="x")
    y = fl.nn.relu(x * 1.5 + 0.5)
    c = fl.constant(np.arange(6, dtype=np.float32), name="table")
    v = rng.standard_normal(N).astype(np.float32)
    with fl.Session(graph=graph) as s:
        s.run([y, x, c], {x: v})
        live = _live_after_collect()
        # allocations of the step: y's buffer, then the copies of x and of the constant
        fail_nth_allocation(3)
        with pytest.raises(RuntimeExecutionError, match="out of memory copying a fetch") as e:
            s.run([y, x, c], {x: v})
        assert e.value.node == "table"
        assert _live_after_collect() == live         # y's buffer and x's copy were released
        fail_nth_allocation(1)                        # y's own buffer
        with pytest.raises(RuntimeExecutionError, match="out of memory"):
            s.run([y, x, c], {x: v})
        assert _live_after_collect() == live
        got_y, got_x, got_c = s.run([y, x, c], {x: v})  # the next step is whole again
        np.testing.assert_allclose(got_y, np.maximum(v * 1.5 + 0.5, 0), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got_x, v)
        np.testing.assert_array_equal(got_c, np.arange(6))


def _vm_flags(address: int) -> set:
    """The VmFlags of this process's mapping that holds ``address``."""
    start = None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(v, 16) for v in head.split("-"))
                start = lo <= address < hi
            elif start and line.startswith("VmFlags:"):
                return set(line.split()[1:])
    return set()


def _huge_pages_offered() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[never]" not in f.read()
    except OSError:
        return False


@pytest.mark.skipif(not _huge_pages_offered(), reason="no transparent huge pages here")
def test_a_large_result_asks_for_huge_pages(graph):
    x, y = _chain(graph, (5 << 20,))                   # 20 MiB: at least FLOWC_HUGE_PAGE_MIN
    xv = np.linspace(-3, 3, 5 << 20, dtype=np.float32)
    with fl.Session(graph=graph) as s:
        big = s.run(y, {x: xv})
    # madvise(MADV_HUGEPAGE) took. (Where a small block lands says nothing: malloc may reuse
    # heap memory an earlier large block advised.)
    assert "hg" in _vm_flags(_address(big))
    np.testing.assert_allclose(big, _expected(xv), rtol=1e-6, atol=1e-7)
