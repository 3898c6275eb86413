"""``fl.contrib.crf``: TensorFlow 1.x's linear-chain conditional random field
(``tf.contrib.crf``), built from ordinary ops as TF1 builds it.

A sequence of tags ``y`` over ``inputs`` (``[batch, max_seq_len, num_tags]`` unary
potentials) with ``transition_params`` (``[num_tags, num_tags]``) scores
``sum_t inputs[t, y_t] + sum_t transitions[y_{t-1}, y_t]`` over the first
``sequence_lengths[b]`` steps. ``crf_log_norm`` is the log of the sum of ``exp(score)`` over
every tag sequence (the forward algorithm, a ``dynamic_rnn`` of ``CrfForwardRnnCell``);
``crf_log_likelihood`` is score minus log-normalizer, and differentiable, so training a
BiLSTM-CRF is minimizing its negative mean. ``crf_decode`` is Viterbi in the graph (a forward
``dynamic_rnn`` of ``CrfDecodeForwardRnnCell`` keeping backpointers, a backward one of
``CrfDecodeBackwardRnnCell`` following them); ``viterbi_decode`` is the same in numpy, on one
sequence, as TF1's. A sequence of length 0 scores 0; with ``max_seq_len`` known to be 1 the
loops are left out, as TF1 does.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from dsl.array_ops import (concat, expand_dims, gather, range as fl_range, reshape, shape,
                           slice as fl_slice, squeeze, stack, zeros_like)
from dsl.indexing_ops import gather_nd, reverse_sequence
from dsl.masking_ops import sequence_mask
from dsl.math_ops import cast, less_equal, maximum, where
from dsl.ops import convert_to_tensor
from dsl.reduction_ops import argmax, reduce_logsumexp, reduce_max, reduce_sum
from dsl.rnn import dynamic_rnn
from dsl.rnn_cell import RNNCell
from dsl.tensor import Tensor, static_shape
from dsl.variable_scope import get_variable
from runtime.dtypes import DType

__all__ = ["crf_sequence_score", "crf_unary_score", "crf_binary_score", "crf_log_norm",
           "crf_log_likelihood", "crf_decode", "viterbi_decode", "CrfForwardRnnCell",
           "CrfDecodeForwardRnnCell", "CrfDecodeBackwardRnnCell"]


def _potentials(inputs, what: str) -> Tensor:
    x = convert_to_tensor(inputs)
    dims = static_shape(x)
    if dims is not None and len(dims) != 3:
        raise ValueError(f"{what}: inputs must be [batch_size, max_seq_len, num_tags], got "
                         f"shape {list(dims)}")
    if dims is None or dims[2] is None:
        raise ValueError(f"{what}: the number of tags (the last dimension of inputs) must be "
                         "known when the graph is built")
    return x


def _num_tags(x: Tensor) -> int:
    return int(static_shape(x)[2])


def _transition_tags(transition_params: Tensor) -> int:
    dims = static_shape(transition_params)
    if dims is None or len(dims) != 2 or dims[0] is None:
        raise ValueError("transition_params must be [num_tags, num_tags] with num_tags known "
                         f"when the graph is built; got shape {dims}")
    return int(dims[0])


def _one_step(x: Tensor) -> bool:
    """True when ``max_seq_len`` is known to be 1 (TF1 then takes its loop-free branch). With
    an unknown ``max_seq_len`` the general branch runs; it gives the same values at 1."""
    dims = static_shape(x)
    return dims is not None and dims[1] == 1


def _rest(x: Tensor) -> Tensor:
    """The steps after the first, ``[batch, max_seq_len - 1, num_tags]``, the input of the
    loops. With ``max_seq_len`` unknown (it may be fed as 1), one step of zeros is added at the
    end so a loop never runs over no steps (its outputs would have no shape to stack in); no
    sequence reaches it, as the loops stop each sequence at its length."""
    rest = fl_slice(x, [0, 1, 0], [-1, -1, -1])
    if static_shape(x)[1] is None:
        rest = concat([rest, zeros_like(fl_slice(x, [0, 0, 0], [-1, 1, -1]))], axis=1)
    return rest


def _lengths(sequence_lengths) -> Tensor:
    s = convert_to_tensor(sequence_lengths)
    if s.dtype not in (DType.i32, DType.i64):
        raise TypeError(f"sequence_lengths must be int32 or int64, got {s.dtype}")
    return s


def _zero_where_empty(values: Tensor, sequence_lengths: Tensor) -> Tensor:
    """A sequence of length 0 (or less) scores 0."""
    return where(less_equal(sequence_lengths, 0), zeros_like(values), values)


def _minus_one(sequence_lengths: Tensor) -> Tensor:
    return maximum(convert_to_tensor(0, dtype=sequence_lengths.dtype), sequence_lengths - 1)


def crf_unary_score(tag_indices, sequence_lengths, inputs) -> Tensor:
    """``[batch]``: the sum of ``inputs[b, t, tag_indices[b, t]]`` over ``t < length``."""
    inputs = convert_to_tensor(inputs)
    tag_indices = convert_to_tensor(tag_indices)
    dims = shape(inputs)
    batch_size, max_seq_len, num_tags = dims[0], dims[1], dims[2]
    flat_inputs = reshape(inputs, [-1])
    offsets = expand_dims(fl_range(batch_size) * max_seq_len * num_tags, 1)
    offsets += expand_dims(fl_range(max_seq_len) * num_tags, 0)
    if tag_indices.dtype is DType.i64:
        offsets = cast(offsets, DType.i64)
    flat_tags = reshape(offsets + tag_indices, [-1])
    scores = reshape(gather(flat_inputs, flat_tags), [batch_size, max_seq_len])
    masks = sequence_mask(sequence_lengths, maxlen=shape(tag_indices)[1], dtype=inputs.dtype)
    return reduce_sum(scores * masks, 1)


def crf_binary_score(tag_indices, sequence_lengths, transition_params) -> Tensor:
    """``[batch]``: the sum of ``transition_params[y_{t-1}, y_t]`` over ``0 < t < length``."""
    tag_indices = convert_to_tensor(tag_indices)
    transition_params = convert_to_tensor(transition_params)
    tdims = static_shape(transition_params)
    num_tags = tdims[0] if tdims is not None and tdims[0] is not None \
        else shape(transition_params)[0]
    if tag_indices.dtype is DType.i64 and isinstance(num_tags, Tensor):
        num_tags = cast(num_tags, DType.i64)
    num_transitions = shape(tag_indices)[1] - 1
    start = fl_slice(tag_indices, [0, 0], stack([-1, num_transitions]))
    end = fl_slice(tag_indices, [0, 1], stack([-1, num_transitions]))
    flat_indices = start * num_tags + end
    scores = gather(reshape(transition_params, [-1]), flat_indices)
    masks = sequence_mask(sequence_lengths, maxlen=shape(tag_indices)[1],
                          dtype=transition_params.dtype)
    return reduce_sum(scores * fl_slice(masks, [0, 1], [-1, -1]), 1)


def crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params) -> Tensor:
    """``[batch]``: the unnormalized score of each tag sequence (unary plus binary)."""
    inputs = _potentials(inputs, "crf_sequence_score")
    tag_indices = convert_to_tensor(tag_indices)
    sequence_lengths = _lengths(sequence_lengths)
    if _one_step(inputs):
        batch = reshape(fl_range(shape(inputs, out_type=tag_indices.dtype)[0],
                                 dtype=tag_indices.dtype), [-1, 1])
        scores = gather_nd(squeeze(inputs, [1]), concat([batch, tag_indices], axis=1))
        return _zero_where_empty(scores, sequence_lengths)
    return (crf_unary_score(tag_indices, sequence_lengths, inputs)
            + crf_binary_score(tag_indices, sequence_lengths, transition_params))


class _TransitionCell(RNNCell):
    """A cell over the tags with ``transition_params`` [num_tags, num_tags]: state and output
    are num_tags wide."""

    def __init__(self, transition_params):
        super().__init__()
        transition_params = convert_to_tensor(transition_params)
        self._transition_params = expand_dims(transition_params, 0)
        self._num_tags = _transition_tags(transition_params)

    @property
    def state_size(self):
        return self._num_tags

    @property
    def output_size(self):
        return self._num_tags


class CrfForwardRnnCell(_TransitionCell):
    """One step of the forward algorithm: ``alpha_t[j] = inputs[j] + logsumexp_i(alpha_{t-1}[i]
    + transitions[i, j])``; its output and state are both the new alphas."""

    def call(self, inputs, state):
        scores = expand_dims(state, 2) + self._transition_params      # [B, from, to]
        alphas = inputs + reduce_logsumexp(scores, 1)
        return alphas, alphas


def crf_log_norm(inputs, sequence_lengths, transition_params) -> Tensor:
    """``[batch]``: the log of the sum of ``exp(score)`` over every tag sequence."""
    inputs = _potentials(inputs, "crf_log_norm")
    sequence_lengths = _lengths(sequence_lengths)
    first = squeeze(fl_slice(inputs, [0, 0, 0], [-1, 1, -1]), [1])
    if _one_step(inputs):
        return _zero_where_empty(reduce_logsumexp(first, 1), sequence_lengths)
    rest = _rest(inputs)
    cell = CrfForwardRnnCell(transition_params)
    _, alphas = dynamic_rnn(cell, rest, sequence_length=_minus_one(sequence_lengths),
                            initial_state=first, dtype=inputs.dtype)
    return _zero_where_empty(reduce_logsumexp(alphas, 1), sequence_lengths)


def crf_log_likelihood(inputs, tag_indices, sequence_lengths, transition_params=None
                       ) -> Tuple[Tensor, Tensor]:
    """``(log_likelihood [batch], transition_params)``; without ``transition_params`` the
    variable ``transitions`` ``[num_tags, num_tags]`` of the current variable scope is made
    (glorot uniform, as ``tf.get_variable``)."""
    inputs = _potentials(inputs, "crf_log_likelihood")
    if transition_params is None:
        num_tags = _num_tags(inputs)
        transition_params = get_variable("transitions", [num_tags, num_tags],
                                         dtype=inputs.dtype)
    score = crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params)
    log_norm = crf_log_norm(inputs, sequence_lengths, transition_params)
    return score - log_norm, transition_params


def viterbi_decode(score, transition_params) -> Tuple[List[int], float]:
    """Numpy Viterbi on one sequence: ``score`` ``[seq_len, num_tags]``; returns (the best
    tag sequence as a list of ints, its score)."""
    score = np.asarray(score)
    transition_params = np.asarray(transition_params)
    if score.ndim != 2 or transition_params.shape != (score.shape[1], score.shape[1]):
        raise ValueError(f"viterbi_decode needs score [seq_len, num_tags] and transitions "
                         f"[num_tags, num_tags]; got {score.shape} and "
                         f"{transition_params.shape}")
    trellis = np.zeros_like(score)
    backpointers = np.zeros_like(score, dtype=np.int32)
    trellis[0] = score[0]
    for t in range(1, score.shape[0]):
        v = np.expand_dims(trellis[t - 1], 1) + transition_params
        trellis[t] = score[t] + np.max(v, 0)
        backpointers[t] = np.argmax(v, 0)
    best = [int(np.argmax(trellis[-1]))]
    for bp in reversed(backpointers[1:]):
        best.append(int(bp[best[-1]]))
    best.reverse()
    return best, np.max(trellis[-1])


class CrfDecodeForwardRnnCell(_TransitionCell):
    """One forward step of Viterbi: the state is the best score ending in each tag; the
    output (int32) the best previous tag for each tag (the backpointers)."""

    def call(self, inputs, state):
        scores = expand_dims(state, 2) + self._transition_params      # [B, from, to]
        new_state = inputs + reduce_max(scores, [1])
        backpointers = cast(argmax(scores, 1), DType.i32)
        return backpointers, new_state


class _DecodeForwardFloatOutputs(CrfDecodeForwardRnnCell):
    """The forward cell with its backpointers in the state's dtype (exact for any tag count
    a CRF has), so one ``dynamic_rnn`` carries float states and its outputs."""

    def call(self, inputs, state):
        backpointers, new_state = super().call(inputs, state)
        return cast(backpointers, new_state.dtype), new_state


class CrfDecodeBackwardRnnCell(RNNCell):
    """One backward step of Viterbi: from the tag at ``t`` (state ``[B, 1]``, int32) and the
    backpointers of ``t`` (inputs ``[B, num_tags]``), the tag at ``t - 1``."""

    def __init__(self, num_tags: int):
        super().__init__()
        self._num_tags = int(num_tags)

    @property
    def state_size(self):
        return 1

    @property
    def output_size(self):
        return 1

    def call(self, inputs, state):
        state = squeeze(state, [1])                                 # [B]
        batch = fl_range(shape(inputs)[0])
        new_tags = expand_dims(gather_nd(inputs, stack([batch, state], axis=1)), -1)
        return new_tags, new_tags


def crf_decode(potentials, transition_params, sequence_length) -> Tuple[Tensor, Tensor]:
    """Viterbi in the graph: ``(decode_tags [batch, max_seq_len] int32, best_score
    [batch])``; tags past a sequence's length are 0."""
    potentials = _potentials(potentials, "crf_decode")
    sequence_length = _lengths(sequence_length)
    if _one_step(potentials):
        one = squeeze(potentials, [1])
        tags = expand_dims(argmax(one, axis=1), 1)
        return cast(tags, DType.i32), reduce_max(one, axis=1)
    num_tags = _num_tags(potentials)
    first = squeeze(fl_slice(potentials, [0, 0, 0], [-1, 1, -1]), [1])    # [B, O]
    rest = _rest(potentials)                                # [B, T-1, O] (T unknown: [B, T, O])
    less_one = _minus_one(sequence_length)
    backpointers, last_score = dynamic_rnn(_DecodeForwardFloatOutputs(transition_params),
                                           rest, sequence_length=less_one,
                                           initial_state=first, dtype=potentials.dtype)
    backpointers = cast(backpointers, DType.i32)
    backpointers = reverse_sequence(backpointers, less_one, seq_axis=1)  # [B, T-1, O]
    last_tag = expand_dims(cast(argmax(last_score, axis=1), DType.i32), -1)  # [B, 1]
    tags, _ = dynamic_rnn(CrfDecodeBackwardRnnCell(num_tags), backpointers,
                          sequence_length=less_one, initial_state=last_tag, dtype=DType.i32)
    tags = squeeze(tags, [2])
    if static_shape(potentials)[1] is None:                 # leave out _rest's added step
        tags = fl_slice(tags, [0, 0], stack([-1, shape(potentials)[1] - 1]))
    tags = concat([last_tag, tags], axis=1)                 # [B, T]
    tags = reverse_sequence(tags, sequence_length, seq_axis=1)
    return tags, reduce_max(last_score, axis=1)
