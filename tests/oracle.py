"""Differential testing against the numpy reference interpreter (the oracle).

``check_against_interpreter`` runs the same fetches with the interpreter and with compiled C
(one compile for all fetches, so put many cases in one graph) and compares them exactly for
integer/bool results and with a tolerance for floats.
"""
from __future__ import annotations

import threading
from typing import Callable, Dict, Iterable, Sequence

import numpy as np

import dsl as fl
from compiler.options import PipelineOptions
from runtime.dtypes import DType, numpy_kind

# The compiled side must run every kernel in C: constant folding would evaluate constant
# subgraphs with the numpy kernels at compile time and hide the C kernel from the test.
NO_FOLDING = PipelineOptions(disable=("fold-constants",))

FLOAT_TOL = {np.dtype(np.float32): (2e-5, 1e-5), np.dtype(np.float64): (1e-12, 1e-12),
             # f16/bf16 are computed in f32 and rounded: one unit in the last place apart
             np.dtype(np.float16): (1e-3, 1e-3), DType.bf16.np: (8e-3, 1e-2)}


def assert_same(expected: np.ndarray, actual: np.ndarray, what: str = "") -> None:
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if numpy_kind(expected.dtype) == "f":
        rtol, atol = FLOAT_TOL.get(expected.dtype, (1e-3, 1e-3))
        if expected.dtype == DType.bf16.np:        # (numpy compares bf16 through f32)
            expected, actual = expected.astype(np.float32), actual.astype(np.float32)
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def check_against_interpreter(graph, fetches, feed_dict: Dict = None, *, rtol=None, atol=None,
                              options: PipelineOptions = NO_FOLDING):
    """Run ``fetches`` (a dict name -> tensor, or a list) both ways and compare; returns C results.
    ``options``: the compiled side's pipeline (default: every pass but constant folding)."""
    feed_dict = feed_dict or {}
    names = list(fetches) if isinstance(fetches, dict) else [str(i) for i in range(len(fetches))]
    tensors = list(fetches.values()) if isinstance(fetches, dict) else list(fetches)
    with fl.Session(graph=graph, backend="interpreter") as s:
        want = s.run(tensors, feed_dict)
    with fl.Session(graph=graph, backend="c", options=options) as s:
        got = s.run(tensors, feed_dict)
    for name, w, g in zip(names, want, got):
        w, g = np.asarray(w), np.asarray(g)
        if rtol is not None and numpy_kind(w.dtype) == "f":
            assert g.dtype == w.dtype and g.shape == w.shape, name
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol or 0, equal_nan=True, err_msg=name)
        else:
            assert_same(w, g, name)
    return dict(zip(names, got))


def random_array(rng: np.random.Generator, shape: Sequence[int], dtype, low=-5, high=5) -> np.ndarray:
    dtype = np.dtype(dtype)
    if numpy_kind(dtype) == "f":
        return rng.uniform(low, high, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind == "u":
        return rng.integers(0, max(high, 1), size=shape).astype(dtype)
    return rng.integers(low, high, size=shape).astype(dtype)


def train_per_thread_count(graph, monkeypatch, loss, step, feed, variables, steps: int = 3,
                           counts: Sequence[str] = ("1", "2")):
    """For each FLOWC_NUM_THREADS in ``counts``: a new session of ``graph`` initialized, then
    ``steps`` runs of ``[loss, step]``; returns, per count, (the losses, the variables' values)."""
    init = fl.global_variables_initializer()
    results = []
    for threads in counts:
        monkeypatch.setenv("FLOWC_NUM_THREADS", threads)
        with fl.Session(graph=graph) as s:
            s.run(init)
            losses = [s.run([loss, step], feed)[0] for _ in range(steps)]
            results.append((losses, [s.run(v) for v in variables]))
    return results


def run_in_threads(worker: Callable, args: Iterable) -> None:
    """Run ``worker(arg)`` for every arg, each in a thread of its own, all at once; the first
    exception a worker raised is raised here once all have ended."""
    errors: list = []

    def guarded(arg):
        try:
            worker(arg)
        except BaseException as e:            # noqa: BLE001  (re-raised below)
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(a,)) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
