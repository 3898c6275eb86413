"""UniformCandidateSampler and LogUniformCandidateSampler: the C kernels against the numpy
reference (same candidates by design, expected counts to rounding), the distributions against
their formulas (fixed seeds, generous bounds), TensorFlow's expected-count formulas with and
without ``unique``, fresh candidates per run, errors, and no gradient."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import NO_FOLDING, check_against_interpreter

SAMPLERS = {"uniform": fl.nn.uniform_candidate_sampler,
            "log_uniform": fl.nn.log_uniform_candidate_sampler}


def _prob(kind: str, classes, range_max: int) -> np.ndarray:
    c = np.asarray(classes, np.float64)
    if kind == "uniform":
        return np.full(c.shape, 1.0 / range_max)
    return np.log((c + 2.0) / (c + 1.0)) / math.log(range_max + 1.0)


def test_c_kernels_draw_the_reference_candidates_and_counts(graph):
    tc = fl.placeholder(fl.int64, [None, 2], name="tc")
    fetches = {}
    for kind, sampler in SAMPLERS.items():
        for unique in (False, True):
            for range_max, n in ((20, 8), (7, 7), (1000, 64), (1, 1)):
                outs = sampler(tc, num_true=2, num_sampled=n, unique=unique,
                               range_max=range_max, seed=5)
                for k, t in enumerate(outs):
                    fetches[f"{kind}/{unique}/{range_max}/{k}"] = t
    classes = np.array([[0, 0], [0, 0], [0, 0]], np.int64)
    got = check_against_interpreter(graph, fetches, {tc: classes}, rtol=1e-6, atol=0)
    for key, value in got.items():
        kind, unique, range_max, k = key.split("/")
        if k == "0":
            assert value.min() >= 0 and value.max() < int(range_max), key
            if unique == "True":
                assert len(set(value.tolist())) == len(value), key


def test_empty_batch_gives_empty_true_counts(graph):
    tc = fl.placeholder(fl.int64, [None, 1], name="tc")
    outs = fl.nn.log_uniform_candidate_sampler(tc, 1, 4, True, 10, seed=1)
    got = check_against_interpreter(graph, list(outs), {tc: np.zeros((0, 1), np.int64)})
    assert got["1"].shape == (0, 1) and got["0"].shape == (4,)


@pytest.mark.parametrize("backend", ["c", "interpreter"])
@pytest.mark.parametrize("kind", ["uniform", "log_uniform"])
def test_draws_follow_the_distribution(graph, backend, kind):
    """Without ``unique``, 20 runs of 5,000 draws over 12 classes: every class's frequency is
    within 5 standard deviations of its probability (a chi-square test, at a tiny p-value)."""
    range_max, n, runs = 12, 5000, 20
    tc = fl.constant(np.zeros((1, 1), np.int64))
    sampled, _, _ = SAMPLERS[kind](tc, 1, n, False, range_max, seed=17)
    with fl.Session(graph=graph, backend=backend, options=NO_FOLDING) as s:
        draws = np.concatenate([s.run(sampled) for _ in range(runs)])
    counts = np.bincount(draws, minlength=range_max)
    total = n * runs
    p = _prob(kind, np.arange(range_max), range_max)
    sd = np.sqrt(total * p * (1 - p))
    assert np.all(np.abs(counts - total * p) < 5 * sd), (counts, total * p)
    chi2 = float(np.sum((counts - total * p) ** 2 / (total * p)))
    assert chi2 < 45.0        # 11 degrees of freedom: P(chi2 > 45) < 1e-5


@pytest.mark.parametrize("kind", ["uniform", "log_uniform"])
def test_expected_counts_are_tensorflows(graph, kind):
    """Without ``unique``: ``p * num_sampled``. With it: ``1 - (1 - p) ** num_tries`` for one
    number of tries shared by every class (or ``p * num_sampled`` when no draw was rejected)."""
    range_max, n = 50, 30
    classes = np.array([[0, 3], [49, 7]], np.int64)
    tc = fl.constant(classes)
    plain = SAMPLERS[kind](tc, 2, n, False, range_max, seed=2)
    uniq = SAMPLERS[kind](tc, 2, n, True, range_max, seed=2)
    with fl.Session(graph=graph) as s:
        (cand, true_ec, samp_ec), (ucand, utrue_ec, usamp_ec) = s.run([list(plain), list(uniq)])
    np.testing.assert_allclose(true_ec, n * _prob(kind, classes, range_max), rtol=1e-6)
    np.testing.assert_allclose(samp_ec, n * _prob(kind, cand, range_max), rtol=1e-6)
    p_true, p_samp = _prob(kind, classes, range_max), _prob(kind, ucand, range_max)
    rarest = int(np.argmin(p_samp))       # its count is furthest from 1: the most precise
    tries = np.log1p(-float(usamp_ec[rarest])) / np.log1p(-p_samp[rarest])
    num_tries = int(round(tries))
    assert abs(tries - num_tries) < 1e-2
    assert num_tries > n             # 30 distinct of 50 classes: rejections are certain
    np.testing.assert_allclose(usamp_ec, -np.expm1(num_tries * np.log1p(-p_samp)), rtol=1e-5)
    np.testing.assert_allclose(utrue_ec, -np.expm1(num_tries * np.log1p(-p_true)), rtol=1e-5)


def test_unique_sampling_of_every_class_returns_a_permutation(graph):
    tc = fl.constant(np.zeros((1, 1), np.int64))
    sampled, _, _ = fl.nn.uniform_candidate_sampler(tc, 1, 40, True, 40, seed=3)
    with fl.Session(graph=graph) as s:
        assert sorted(s.run(sampled).tolist()) == list(range(40))


def test_each_run_draws_new_candidates_and_a_new_session_repeats_them(graph):
    tc = fl.constant(np.zeros((1, 1), np.int64))
    sampled, _, _ = fl.nn.log_uniform_candidate_sampler(tc, 1, 16, True, 10000, seed=9)
    runs = []
    for backend in ("c", "interpreter"):
        with fl.Session(graph=graph, backend=backend, options=NO_FOLDING) as s:
            runs.append([s.run(sampled) for _ in range(3)])
    assert not np.array_equal(runs[0][0], runs[0][1])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_seeds_choose_the_stream(graph):
    tc = fl.constant(np.zeros((1, 1), np.int64))
    a = fl.nn.uniform_candidate_sampler(tc, 1, 32, False, 1 << 40, seed=1)[0]
    b = fl.nn.uniform_candidate_sampler(tc, 1, 32, False, 1 << 40, seed=1)[0]
    c = fl.nn.uniform_candidate_sampler(tc, 1, 32, False, 1 << 40, seed=2)[0]
    with fl.Session(graph=graph) as s:
        va, vb, vc = s.run([a, b, c])
    np.testing.assert_array_equal(va, vb)
    assert not np.array_equal(va, vc)
    assert va.max() > 2**32           # 64 random bits per draw


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_a_true_class_out_of_range_is_an_error_naming_the_node(graph, backend):
    tc = fl.placeholder(fl.int64, [None, 1], name="tc")
    sampled, _, _ = fl.nn.uniform_candidate_sampler(tc, 1, 4, False, 10, seed=1,
                                                   name="my_sampler")
    with fl.Session(graph=graph, backend=backend) as s:
        with pytest.raises(fl.FlowcError, match=r"my_sampler.*true_classes\[1, 0\] = 10"):
            s.run(sampled, {tc: np.array([[3], [10]], np.int64)})
        with pytest.raises(fl.FlowcError, match="my_sampler"):
            s.run(sampled, {tc: np.array([[-1]], np.int64)})


def test_bad_attrs_and_shapes_are_errors_when_built(graph):
    tc = fl.constant(np.zeros((2, 1), np.int64))
    with pytest.raises(ShapeError, match="num_sampled <= range_max"):
        fl.nn.uniform_candidate_sampler(tc, 1, 11, True, 10)
    with pytest.raises(ShapeError, match="num_true = 2"):
        fl.nn.log_uniform_candidate_sampler(tc, 2, 4, False, 10)
    with pytest.raises(ShapeError, match="matrix"):
        fl.nn.log_uniform_candidate_sampler(fl.constant(np.zeros(3, np.int64)), 1, 4, False, 10)


def test_samplers_have_no_gradient(graph):
    tc = fl.placeholder(fl.int64, [None, 1], name="tc")
    x = fl.placeholder(fl.float32, [4], name="x")
    _, true_ec, samp_ec = fl.nn.uniform_candidate_sampler(tc, 1, 4, False, 10)
    y = fl.reduce_sum(x * samp_ec)
    assert fl.gradients(y, [tc]) == [None]
    gx, = fl.gradients(y, [x])
    with fl.Session(graph=graph) as s:
        np.testing.assert_allclose(s.run(gx, {tc: np.zeros((1, 1), np.int64),
                                              x: np.ones(4, np.float32)}), np.full(4, 0.4))
