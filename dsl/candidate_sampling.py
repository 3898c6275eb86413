"""Candidate samplers (``fl.nn.uniform_candidate_sampler``, ``fl.nn.log_uniform_candidate_sampler``)
as ``tf.nn``'s: each adds one sampler op (``compiler/ops/candidate_sampling.py``) and returns
``(sampled_candidates, true_expected_count, sampled_expected_count)``.

Seeds follow ``fl.random_*``'s rule (``op_seeds``): ``seed=s`` gives the op ``(87654321, s)``;
no seed gives a deterministic per-op seed. The samplers have no gradient.
"""
from __future__ import annotations

from typing import Optional, Tuple

from dsl.array_ops import cast
from dsl.gradients import NotDifferentiable
from dsl.ops import apply_op, convert_to_tensor
from dsl.random_ops import op_seeds
from dsl.tensor import Tensor
from runtime.dtypes import DType

__all__ = ["uniform_candidate_sampler", "log_uniform_candidate_sampler"]

SAMPLER_OPS = ("UniformCandidateSampler", "LogUniformCandidateSampler")
for _op in SAMPLER_OPS:
    NotDifferentiable(_op)


def _sampler(op: str, true_classes, num_true: int, num_sampled: int, unique: bool,
             range_max: int, seed: Optional[int], name: Optional[str]) -> Tuple[Tensor, ...]:
    true_classes = convert_to_tensor(true_classes)
    if true_classes.dtype is not DType.i64:
        true_classes = cast(true_classes, DType.i64)
    s, s2 = op_seeds(seed)
    attrs = {"num_true": int(num_true), "num_sampled": int(num_sampled), "unique": bool(unique),
             "range_max": int(range_max), "seed": s, "seed2": s2}
    return tuple(apply_op(op, [true_classes], attrs, name=name or op))


def uniform_candidate_sampler(true_classes, num_true: int, num_sampled: int, unique: bool,
                              range_max: int, seed: Optional[int] = None,
                              name: Optional[str] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """``num_sampled`` classes drawn uniformly from ``[0, range_max)`` (distinct if ``unique``),
    with the expected count of each true and each sampled class."""
    return _sampler("UniformCandidateSampler", true_classes, num_true, num_sampled, unique,
                    range_max, seed, name)


def log_uniform_candidate_sampler(true_classes, num_true: int, num_sampled: int, unique: bool,
                                  range_max: int, seed: Optional[int] = None,
                                  name: Optional[str] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """``num_sampled`` classes from the log-uniform (Zipfian) distribution over ``[0,
    range_max)``, ``P(c) = log((c + 2) / (c + 1)) / log(range_max + 1)``: for classes sorted by
    decreasing frequency, as a vocabulary usually is."""
    return _sampler("LogUniformCandidateSampler", true_classes, num_true, num_sampled, unique,
                    range_max, seed, name)
