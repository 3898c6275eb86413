"""``fl.nn.dynamic_rnn``, ``fl.nn.static_rnn`` and ``fl.nn.bidirectional_dynamic_rnn``:
running an RNN cell (``dsl/rnn_cell.py``) over sequences, as TensorFlow 1.x does.

``dynamic_rnn`` is one ``fl.while_loop`` over the time steps (so the cell's ops are compiled
once, not once per step): the inputs are unstacked into a TensorArray the loop reads a step
from, the outputs written into one that is stacked after it. With ``sequence_length``, each
batch entry past its length gets zero outputs and keeps its last state (a ``Select`` on the
batch rows, TF1's ``_rnn_step``), and the loop stops after the longest sequence: outputs past
it are zeros. The variables are ``<scope or "rnn">/<cell name>/...``, TF1's names.

``static_rnn`` unrolls the cell over a Python list of steps, with the same treatment of
``sequence_length``.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

from dsl.context import name_scope
from dsl.ops import apply_op, convert_to_tensor
from dsl.rnn_cell import (RNNCell, _batch_size, flatten, map_structure, pack_as,
                          variable_scope_of)
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType, as_dtype

__all__ = ["dynamic_rnn", "static_rnn", "bidirectional_dynamic_rnn", "static_bidirectional_rnn"]


def _check_cell(cell) -> None:
    if not isinstance(cell, RNNCell) and not (callable(cell) and hasattr(cell, "state_size")
                                              and hasattr(cell, "output_size")):
        raise TypeError(f"cell must be an RNN cell (fl.nn.rnn_cell.*), got {cell!r}")


def _transpose_batch_time(x: Tensor) -> Tensor:
    """[B, T, ...] <-> [T, B, ...]."""
    from dsl.array_ops import transpose
    if static_shape(x) is None or len(static_shape(x)) < 2:
        raise ValueError(f"an RNN input must have rank >= 2 ([batch, time, ...]); got "
                         f"{static_shape(x)}")
    return transpose(x, [1, 0] + list(range(2, len(static_shape(x)))))


def _sequence_length(sequence_length) -> Optional[Tensor]:
    if sequence_length is None:
        return None
    from dsl.array_ops import identity
    from dsl.math_ops import cast
    s = convert_to_tensor(sequence_length)
    if s.dtype is not DType.i32:
        s = cast(s, DType.i32)
    if static_shape(s) is not None and len(static_shape(s)) != 1:
        raise ValueError(f"sequence_length must be a vector of length batch_size, but saw "
                         f"shape: {static_shape(s)}")
    return identity(s, name="sequence_length")


def _initial_state(cell, initial_state, batch_size, dtype):
    if initial_state is not None:
        return map_structure(lambda s: convert_to_tensor(s, dtype=dtype), initial_state)
    if dtype is None:
        raise ValueError("if there is no initial_state, you must give a dtype")
    return cell.zero_state(batch_size, as_dtype(dtype))


def _select_rows(cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``a`` in the batch rows where ``cond``, else ``b`` (TF1's ``where``: the Select op)."""
    return apply_op("Select", [cond, a, b], name="Select")


def _step(cell, time: Tensor, inputs, state, sequence_length: Optional[Tensor],
          zero_output):
    """One step of the cell; with ``sequence_length``, entries past their length get
    ``zero_output`` and keep ``state``."""
    output, new_state = cell(inputs, state)
    if sequence_length is None:
        return output, new_state
    from dsl.math_ops import greater_equal
    copy = greater_equal(time, sequence_length)               # [batch]: this entry is done
    flat_out = [_select_rows(copy, z, o) for z, o in zip(flatten(zero_output), flatten(output))]
    flat_state = [_select_rows(copy, s, n) for s, n in zip(flatten(state), flatten(new_state))]
    return pack_as(output, flat_out), pack_as(new_state, flat_state)


def _zero_output(cell, batch_size, dtype: DType):
    from dsl.rnn_cell import _zeros
    return map_structure(lambda s: _zeros(batch_size, s, dtype), cell.output_size)


def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None,
                parallel_iterations=None, swap_memory: bool = False, time_major: bool = False,
                scope=None):
    """Run ``cell`` over ``inputs`` (``[batch, time, depth]``, or ``[time, batch, depth]``
    with ``time_major``; a nested structure of such tensors is fed to the cell as one) in a
    while loop; returns ``(outputs, final_state)``, outputs ``[batch, time, output_size]``
    (time major: ``[time, batch, ...]``), as ``tf.nn.dynamic_rnn``."""
    from dsl.control_flow_ops import while_loop
    from dsl.math_ops import maximum, minimum
    from dsl.reduction_ops import reduce_max
    from dsl.tensor_array_ops import TensorArray
    _check_cell(cell)
    with variable_scope_of(name=scope if isinstance(scope, str) and scope else "rnn") as vs, \
            name_scope(vs.rsplit("/", 1)[-1]):
        flat_input = [convert_to_tensor(x) for x in flatten(inputs)]
        if not time_major:
            flat_input = [_transpose_batch_time(x) for x in flat_input]
        for x in flat_input:
            if static_shape(x) is None or len(static_shape(x)) < 3 or static_shape(x)[-1] is None:
                raise ValueError("the inputs of dynamic_rnn must be [batch, time, depth] "
                                 f"(time major: [time, batch, depth]) with depth known; got "
                                 f"{static_shape(x)}")
        dtype = as_dtype(dtype) if dtype is not None else None
        first = flat_input[0]
        batch_size = _batch_size(first, 1)
        time_steps = _batch_size(first, 0)
        seq_len = _sequence_length(sequence_length)
        state = _initial_state(cell, initial_state, batch_size, dtype)
        dtype = dtype or flatten(state)[0].dtype
        out_dtype = dtype
        zero_output = _zero_output(cell, batch_size, out_dtype)
        steps = convert_to_tensor(time_steps, dtype=DType.i32)
        if seq_len is not None:
            # at least one step, so the output arrays learn the element shape (as TF1 does)
            loop_bound = minimum(steps, maximum(1, reduce_max(seq_len)))
        else:
            loop_bound = steps
        with name_scope("dynamic_rnn"):
            input_tas = [TensorArray(x.dtype, size=steps, clear_after_read=True,
                                     element_shape=static_shape(x)[1:], name="input_ta").unstack(x)
                         for x in flat_input]
            output_tas = [TensorArray(out_dtype, size=steps, element_shape=(
                (batch_size if isinstance(batch_size, int) else None, int(s))),
                name="output_ta") for s in flatten(cell.output_size)]
        flat_state = flatten(state)

        def cond(time, *_):
            return time < loop_bound

        def body(time, *loop_vars):
            tas = list(loop_vars[:len(output_tas)])
            state_t = pack_as(state, list(loop_vars[len(output_tas):]))
            step_in = pack_as(inputs, [ta.read(time) for ta in input_tas])
            output, new_state = _step(cell, time, step_in, state_t, seq_len, zero_output)
            flat_output = flatten(output)
            tas = [ta.write(time, o) for ta, o in zip(tas, flat_output)]
            return [time + 1] + tas + flatten(new_state)

        results = while_loop(cond, body, [convert_to_tensor(0, dtype=DType.i32)] + output_tas
                             + flat_state,
                             parallel_iterations=parallel_iterations or 32,
                             swap_memory=swap_memory)
        final_tas = results[1:1 + len(output_tas)]
        final_state = pack_as(state, list(results[1 + len(output_tas):]))
        from dsl.array_ops import range as fl_range
        with name_scope("stack"):                  # [time, batch, ...]: a known length stays
            every_step = fl_range(0, steps)
            flat_outputs = [ta.gather(every_step) for ta in final_tas]
        if not time_major:
            flat_outputs = [_transpose_batch_time(o) for o in flat_outputs]
        outputs = pack_as(cell.output_size, flat_outputs) \
            if isinstance(cell.output_size, (list, tuple)) else flat_outputs[0]
        return outputs, final_state


def static_rnn(cell, inputs: Sequence, initial_state=None, dtype=None, sequence_length=None,
               scope=None):
    """Run ``cell`` over the list ``inputs`` (one ``[batch, depth]`` tensor per step),
    unrolled; returns ``(outputs, final_state)``, a list of outputs, as
    ``tf.nn.static_rnn``."""
    _check_cell(cell)
    if isinstance(inputs, Tensor) or not isinstance(inputs, (list, tuple)):
        raise TypeError("inputs of static_rnn must be a list of tensors, one per step")
    if not inputs:
        raise ValueError("inputs of static_rnn must not be empty")
    with variable_scope_of(name=scope if isinstance(scope, str) and scope else "rnn") as vs, \
            name_scope(vs.rsplit("/", 1)[-1]):
        steps = [map_structure(convert_to_tensor, x) for x in inputs]
        first = flatten(steps[0])[0]
        if static_shape(first) is None or len(static_shape(first)) != 2 or static_shape(first)[-1] is None:
            raise ValueError(f"each input of static_rnn must be [batch, depth] with depth "
                             f"known; got {static_shape(first)}")
        batch_size = _batch_size(first, 0)
        seq_len = _sequence_length(sequence_length)
        state = _initial_state(cell, initial_state, batch_size, dtype)
        out_dtype = as_dtype(dtype) if dtype is not None else flatten(state)[0].dtype
        zero_output = _zero_output(cell, batch_size, out_dtype) if seq_len is not None else None
        outputs: List = []
        for t, x in enumerate(steps):
            time = convert_to_tensor(t, dtype=DType.i32)
            output, state = _step(cell, time, x, state, seq_len, zero_output)
            outputs.append(output)
        return outputs, state


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None,
                              initial_state_fw=None, initial_state_bw=None, dtype=None,
                              parallel_iterations=None, swap_memory: bool = False,
                              time_major: bool = False, scope=None):
    """A forward and a backward ``dynamic_rnn`` over ``inputs`` (the backward one over each
    sequence reversed within its length); returns ``((output_fw, output_bw), (state_fw,
    state_bw))`` with the backward outputs in input order, as TF1. Variables:
    ``<scope or bidirectional_rnn>/fw/...`` and ``.../bw/...``."""
    from dsl.array_ops import reverse
    from dsl.indexing_ops import reverse_sequence
    _check_cell(cell_fw)
    _check_cell(cell_bw)
    time_axis, batch_axis = (0, 1) if time_major else (1, 0)

    def reverse_time(x):
        if sequence_length is None:
            return reverse(x, [time_axis])
        return reverse_sequence(x, sequence_length, seq_axis=time_axis, batch_axis=batch_axis)

    with variable_scope_of(name=scope if isinstance(scope, str) and scope
                           else "bidirectional_rnn") as vs, name_scope(vs.rsplit("/", 1)[-1]):
        with name_scope("fw"):
            out_fw, state_fw = dynamic_rnn(cell_fw, inputs, sequence_length, initial_state_fw,
                                           dtype, parallel_iterations, swap_memory, time_major,
                                           scope="fw")
        with name_scope("bw"):
            reversed_in = map_structure(lambda x: reverse_time(convert_to_tensor(x)), inputs)
            out_bw, state_bw = dynamic_rnn(cell_bw, reversed_in, sequence_length,
                                           initial_state_bw, dtype, parallel_iterations,
                                           swap_memory, time_major, scope="bw")
            out_bw = map_structure(reverse_time, out_bw)
    return (out_fw, out_bw), (state_fw, state_bw)


def static_bidirectional_rnn(cell_fw, cell_bw, inputs: Sequence, initial_state_fw=None,
                             initial_state_bw=None, dtype=None, sequence_length=None,
                             scope=None):
    """Forward and backward ``static_rnn``s; returns ``(outputs, state_fw, state_bw)`` with
    each output the forward and backward outputs of its step concatenated, as TF1."""
    from dsl.array_ops import concat
    from dsl.indexing_ops import reverse_sequence
    from dsl.array_ops import stack, unstack
    with variable_scope_of(name=scope if isinstance(scope, str) and scope
                           else "bidirectional_rnn") as vs, name_scope(vs.rsplit("/", 1)[-1]):
        out_fw, state_fw = static_rnn(cell_fw, inputs, initial_state_fw, dtype,
                                      sequence_length, scope="fw")
        if sequence_length is None:
            reversed_in = list(reversed(inputs))
        else:
            reversed_in = unstack(reverse_sequence(stack(list(inputs)), sequence_length,
                                                   seq_axis=0, batch_axis=1), len(inputs))
        out_bw, state_bw = static_rnn(cell_bw, reversed_in, initial_state_bw, dtype,
                                      sequence_length, scope="bw")
        if sequence_length is None:
            out_bw = list(reversed(out_bw))
        else:
            out_bw = unstack(reverse_sequence(stack(out_bw), sequence_length, seq_axis=0,
                                              batch_axis=1), len(inputs))
        outputs = [concat([f, b], 1) for f, b in zip(out_fw, out_bw)]
    return outputs, state_fw, state_bw
