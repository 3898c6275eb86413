"""Compiled steps free their intermediate buffers: running a step many times keeps memory flat."""
import os

import numpy as np

import dsl as fl
from oracle import NO_FOLDING


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_successful_steps_free_intermediates(graph):
    x = fl.placeholder(fl.float32, [None], name="x")
    h1 = fl.exp(x)                                   # 4 MB intermediates per step
    h2 = fl.negative(h1)
    total = fl.reduce_sum(h2)
    view = fl.reshape(h1 * 2.0, [-1, 2])             # a fetched view of an owned buffer
    value = np.zeros(1 << 20, np.float32)
    with fl.Session(graph=graph, options=NO_FOLDING) as s:
        s.run([total, view], {x: value})
        before = _rss_bytes()
        for _ in range(200):                         # a leak would be ~1.6 GB
            got_total, got_view = s.run([total, view], {x: value})
        grown = _rss_bytes() - before
    assert got_total == -(1 << 20) and got_view.shape == (1 << 19, 2)
    assert grown < 200 << 20, f"resident memory grew by {grown >> 20} MB: steps leak buffers"
