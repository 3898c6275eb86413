"""``fl.nn.sampled_softmax_loss``: softmax cross entropy over the true classes and a sample of
the others, as ``tf.nn.sampled_softmax_loss`` (Jean et al., 2014), ordinary graph code.

Per step it uses only the rows of the output layer it needs: the true classes' and the
sampled classes'. With one table they are read with ``embedding_lookup``. With the weights
sharded over parameter-server tasks (a list of shards), each shard by default gathers its
rows and multiplies them with the inputs on its own task (``colocate_matmul``,
``dsl/sharded_logits.py``), so the inputs go to the shards and only logits [batch, rows] come
back; with ``colocate_matmul=False`` the rows themselves travel to the inputs. Either way the
gradient reaches each shard as sparse ``IndexedSlices`` of those rows, applied there.

The logits are corrected by the log of each class's expected count (``subtract_log_q``), so
the loss estimates the full softmax's; a sampled class equal to one of an example's true
classes (an accidental hit) gets logit ``-FLT_MAX``, so it does not count twice.

The loss is per example (shape [batch]); the sample is shared by the whole batch.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from dsl.array_ops import (cast, concat, expand_dims, ones_like, range as range_, reshape, shape,
                           size, slice, stack, stop_gradient, zeros_like)
from dsl.candidate_sampling import log_uniform_candidate_sampler
from dsl.context import name_scope
from dsl.embedding_ops import embedding_lookup
from dsl.linalg_ops import matmul
from dsl.math_ops import add, equal, log, multiply, subtract
from dsl.nn_losses import sigmoid_cross_entropy_with_logits, softmax_cross_entropy_with_logits
from dsl.ops import convert_to_tensor
from dsl.reduction_ops import reduce_any, reduce_sum
from dsl.sharded_logits import sharded_row_logits
from dsl.tensor import Tensor
from runtime.dtypes import DType

__all__ = ["sampled_softmax_loss", "compute_sampled_logits", "nce_loss"]

_FLOAT_MAX = float(np.finfo(np.float32).max)


def _shards(params) -> list:
    return list(params) if isinstance(params, (list, tuple)) else [params]


def compute_sampled_logits(weights, biases, labels, inputs, num_sampled: int, num_classes: int,
                           num_true: int = 1, sampled_values: Optional[Sequence] = None,
                           subtract_log_q: bool = True, remove_accidental_hits: bool = False,
                           partition_strategy: str = "mod", seed: Optional[int] = None,
                           name: Optional[str] = None,
                           colocate_matmul: Optional[bool] = None) -> Tuple[Tensor, Tensor]:
    """(logits [batch, num_true + num_sampled], labels of the same shape): the true classes'
    logits first (label ``1 / num_true`` each), then the sampled classes' (label 0).
    ``colocate_matmul`` (default: when ``weights`` is a list of several shards) computes each
    shard's logits on the shard's device."""
    inputs = convert_to_tensor(inputs)
    with name_scope(name or "compute_sampled_logits"):
        labels = convert_to_tensor(labels)
        if labels.dtype is not DType.i64:
            labels = cast(labels, DType.i64)
        labels_2d = reshape(labels, [-1, num_true])
        labels_flat = reshape(labels, [-1])
        if sampled_values is None:
            sampled_values = log_uniform_candidate_sampler(
                labels_2d, num_true=num_true, num_sampled=num_sampled, unique=True,
                range_max=num_classes, seed=seed)
        sampled, true_count, sampled_count = (stop_gradient(v) for v in sampled_values)
        if sampled.dtype is not DType.i64:
            sampled = cast(sampled, DType.i64)
        dtype = inputs.dtype
        all_ids = concat([labels_flat, sampled], 0)
        n_true = size(labels_flat, out_type=DType.i32)
        if colocate_matmul is None:
            colocate_matmul = len(_shards(weights)) > 1
        if colocate_matmul:
            true_logits, sampled_logits = _logits_on_the_shards(
                _shards(weights), _shards(biases), all_ids, n_true, inputs, num_true,
                partition_strategy)
        else:
            true_logits, sampled_logits = _logits_from_rows(
                weights, biases, all_ids, n_true, inputs, num_true, partition_strategy)
        if remove_accidental_hits:
            hits = reduce_any(equal(expand_dims(labels_2d, 2), reshape(sampled, [1, 1, -1])),
                              axis=1)
            sampled_logits = add(sampled_logits, multiply(cast(hits, dtype),
                                                           np.array(-_FLOAT_MAX, dtype.np)))
        if subtract_log_q:
            true_logits = subtract(true_logits, log(cast(true_count, dtype)))
            sampled_logits = subtract(sampled_logits, log(cast(sampled_count, dtype)))
        out_logits = concat([true_logits, sampled_logits], 1)
        out_labels = concat([multiply(ones_like(true_logits), np.array(1.0 / num_true, dtype.np)),
                             zeros_like(sampled_logits)], 1)
        return out_logits, out_labels


def _logits_from_rows(weights, biases, all_ids, n_true, inputs, num_true: int, strategy: str):
    """(true, sampled) logits from the rows of every class in play, each read on its shard's
    device and sent to the inputs."""
    all_w = embedding_lookup(_shards(weights), all_ids, partition_strategy=strategy)
    all_b = embedding_lookup(_shards(biases), all_ids, partition_strategy=strategy)
    true_w = slice(all_w, stack([0, 0]), stack([n_true, -1]))
    sampled_w = slice(all_w, stack([n_true, 0]), [-1, -1])
    true_b = slice(all_b, stack([0]), stack([n_true]))
    sampled_b = slice(all_b, stack([n_true]), [-1])
    # true logits: each example's input against its own true rows
    dim = slice(shape(true_w), [1], [1])
    true_w_3d = reshape(true_w, concat([np.array([-1, num_true], np.int32), dim], 0))
    true_logits = reduce_sum(multiply(expand_dims(inputs, 1), true_w_3d), axis=2)
    true_logits = add(true_logits, reshape(true_b, [-1, num_true]))
    # sampled logits: every input against every sampled row
    return true_logits, add(matmul(inputs, sampled_w, transpose_b=True), sampled_b)


def _logits_on_the_shards(w_shards, b_shards, all_ids, n_true, inputs, num_true: int,
                          strategy: str):
    """(true, sampled) logits from every input against every class in play, each shard's part
    computed on its device; an example's true logits are its own entries of the first
    ``batch * num_true`` columns (the diagonal blocks)."""
    logits = sharded_row_logits(w_shards, b_shards, all_ids, inputs, strategy)  # [B, n]
    batch = slice(shape(inputs), [0], [1])
    true_all = reshape(slice(logits, stack([0, 0]), stack([-1, n_true])),
                       concat([batch, batch, np.array([num_true], np.int32)], 0))
    examples = range_(0, reshape(batch, []), dtype=DType.i32)
    own = cast(equal(expand_dims(examples, 1), expand_dims(examples, 0)), inputs.dtype)
    true_logits = reduce_sum(multiply(true_all, expand_dims(own, 2)), axis=1)
    return true_logits, slice(logits, stack([0, n_true]), [-1, -1])


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled: int, num_classes: int,
                         num_true: int = 1, sampled_values: Optional[Sequence] = None,
                         remove_accidental_hits: bool = True, partition_strategy: str = "mod",
                         name: str = "sampled_softmax_loss", seed: Optional[int] = None,
                         colocate_matmul: Optional[bool] = None) -> Tensor:
    """The sampled softmax training loss per example ([batch]), as ``tf.nn.sampled_softmax_loss``.

    ``weights`` [num_classes, dim] and ``biases`` [num_classes] (tensors or variables, or lists
    of shards split by ``partition_strategy`` as in ``embedding_lookup``), ``labels`` int
    [batch, num_true], ``inputs`` [batch, dim]. ``sampled_values`` is a sampler's
    ``(sampled_candidates, true_expected_count, sampled_expected_count)``; by default a
    ``log_uniform_candidate_sampler`` with ``unique=True`` (seeded by ``seed``).
    ``colocate_matmul`` (default: for a list of several weight shards) computes each shard's
    logits on the shard's own device, so logits travel instead of rows.
    """
    with name_scope(name):
        logits, labels = compute_sampled_logits(
            weights, biases, labels, inputs, num_sampled, num_classes, num_true=num_true,
            sampled_values=sampled_values, subtract_log_q=True,
            remove_accidental_hits=remove_accidental_hits,
            partition_strategy=partition_strategy, seed=seed, colocate_matmul=colocate_matmul)
        return softmax_cross_entropy_with_logits(labels=stop_gradient(labels), logits=logits)


def nce_loss(weights, biases, labels, inputs, num_sampled: int, num_classes: int,
             num_true: int = 1, sampled_values: Optional[Sequence] = None,
             remove_accidental_hits: bool = False, partition_strategy: str = "mod",
             name: str = "nce_loss", seed: Optional[int] = None) -> Tensor:
    """The noise-contrastive estimation loss per example ([batch]), as ``tf.nn.nce_loss``
    (Gutmann and Hyvarinen, 2010; Mnih and Teh, 2012): a logistic regression telling each
    true class (label ``1 / num_true``) from the sampled ones (label 0), on logits corrected by
    the log of each class's expected count, summed over the classes. Arguments as
    ``sampled_softmax_loss``; accidental hits are kept unless ``remove_accidental_hits``."""
    with name_scope(name):
        logits, labels = compute_sampled_logits(
            weights, biases, labels, inputs, num_sampled, num_classes, num_true=num_true,
            sampled_values=sampled_values, subtract_log_q=True,
            remove_accidental_hits=remove_accidental_hits,
            partition_strategy=partition_strategy, seed=seed)
        losses = sigmoid_cross_entropy_with_logits(labels=labels, logits=logits,
                                                   name="sampled_losses")
        return reduce_sum(losses, axis=1)
