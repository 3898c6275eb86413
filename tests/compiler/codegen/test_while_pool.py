"""Steps with loops take their big buffers from the process's buffer pool.

Outside every loop, a module with control flow allocates its buffers from the pool as a module
without it does, and the stacks a loop's gradient saves its values on grow in pool blocks: a
repeated training step reuses blocks that are already mapped (no pool misses once warm),
gives every block back, and computes what the interpreter computes. A step that fails
part-way (an allocation fails, forced with the pool's test hook) releases what it took.
"""
import gc

import numpy as np
import pytest

import dsl as fl
from runtime.buffer_pool import fail_nth_allocation, pool_stats
from runtime.errors import RuntimeExecutionError

BATCH, HIDDEN, STEPS, CLASSES = 16, 64, 5, 300       # [80, 300] logits: pooled size classes


def _live_after_collect() -> int:
    gc.collect()
    return pool_stats().live_blocks


@pytest.fixture
def no_forced_failure():
    yield
    fail_nth_allocation(0)


def _rnn_step(rng):
    x = fl.placeholder(fl.float32, [STEPS, BATCH, HIDDEN], name="x")
    labels = fl.placeholder(fl.int32, [STEPS * BATCH], name="labels")
    w = fl.Variable(rng.uniform(-0.1, 0.1, (2 * HIDDEN, HIDDEN)).astype(np.float32), name="w")
    wo = fl.Variable(rng.uniform(-0.1, 0.1, (HIDDEN, CLASSES)).astype(np.float32), name="wo")

    def body(t, h, hs):
        h2 = fl.tanh(fl.matmul(fl.concat([fl.gather(x, t), h], 1), w))
        return t + 1, h2, fl.concat([hs, fl.expand_dims(h2, 0)], 0)

    _, _, hs = fl.while_loop(lambda t, h, hs: t < STEPS, body,
                             [0, fl.zeros([BATCH, HIDDEN]), fl.zeros([0, BATCH, HIDDEN])],
                             shape_invariants=[[], [BATCH, HIDDEN], [None, BATCH, HIDDEN]])
    logits = fl.matmul(fl.reshape(hs, [-1, HIDDEN]), wo)
    loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    grads = fl.gradients(loss, [w, wo])
    feed = {x: rng.standard_normal((STEPS, BATCH, HIDDEN)).astype(np.float32),
            labels: rng.integers(0, CLASSES, STEPS * BATCH).astype(np.int32)}
    return [loss, logits] + grads, feed


@pytest.mark.cpu_only
def test_a_repeated_loop_step_reuses_pool_blocks_and_gives_them_back(graph, rng):
    fetches, feed = _rnn_step(rng)
    init = fl.global_variables_initializer()
    with fl.Session(graph=graph, backend="interpreter") as ref:
        ref.run(init)
        want = ref.run(fetches, feed)
    with fl.Session(graph=graph) as s:
        s.run(init)
        s.run(fetches, feed)                           # compile, warm the pool
        s.run(fetches, feed)
        live = _live_after_collect()
        before = pool_stats()
        got = s.run(fetches, feed)
        after = pool_stats()
        assert after.misses == before.misses            # every cached size found an idle block
        # intermediates and stacks too, not only the fetched results
        assert after.hits - before.hits > len(fetches)
        for k, expected in enumerate(want):
            np.testing.assert_allclose(got[k], expected, rtol=2e-4, atol=1e-5)
        del got
        assert _live_after_collect() == live


def test_a_loop_step_that_fails_part_way_releases_its_blocks(graph, rng, no_forced_failure):
    x = fl.placeholder(fl.float32, [BATCH, CLASSES * 4], name="x")
    big = fl.tanh(x) * 2.0                              # outside the loop: pool blocks
    _, looped = fl.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 0.5 + 1.0), [0, big])
    out = fl.reduce_sum(looped * big, axis=1)
    v = rng.standard_normal((BATCH, CLASSES * 4)).astype(np.float32)
    want = np.sum(((np.tanh(v) * 2.0) * 0.125 + 1.75) * np.tanh(v) * 2.0, axis=1)
    with fl.Session(graph=graph) as s:
        s.run(out, {x: v})
        live = _live_after_collect()
        for n in (1, 2, 3):
            fail_nth_allocation(n)
            try:
                s.run(out, {x: v})
            except RuntimeExecutionError as e:
                assert "out of memory" in str(e)
            fail_nth_allocation(0)
            assert _live_after_collect() == live
        np.testing.assert_allclose(s.run(out, {x: v}), want, rtol=1e-4)


def test_a_gradient_step_that_fails_inside_the_forward_loop_frees_its_stacks(graph):
    """The forward loop has pushed values for the gradient when a kernel in it fails: the
    stacks' buffers go back with the handles, step after step (they leaked before)."""
    x = fl.placeholder(fl.float32, [1000], name="x")
    limit = fl.placeholder(fl.int32, [], name="limit")
    table = fl.constant(np.arange(5, dtype=np.float32))

    def body(i, acc):
        picked = fl.gather(table, fl.reshape(i, [1]))      # out of range from i = 5
        return i + 1, acc * fl.sigmoid(acc) + picked

    _, out = fl.while_loop(lambda i, a: i < limit, body, [fl.constant(0), x])
    grad = fl.gradients(fl.reduce_sum(out), [x])[0]
    xv = np.ones(1000, np.float32)
    with fl.Session(graph=graph) as s:
        want = s.run(grad, {x: xv, limit: 3})
        live = _live_after_collect()
        for _ in range(3):
            with pytest.raises(RuntimeExecutionError, match=r"GatherV2.*is not in \[0, 5\)"):
                s.run(grad, {x: xv, limit: 8})
            assert _live_after_collect() == live
        np.testing.assert_array_equal(s.run(grad, {x: xv, limit: 3}), want)
