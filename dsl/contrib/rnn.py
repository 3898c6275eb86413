"""``fl.contrib.rnn``: what TF1 programs reach through ``tf.contrib.rnn``.

- ``LSTMBlockCell``: an LSTM cell computed by one fused ``LSTMBlockCell`` op per step (usable
  with ``fl.nn.dynamic_rnn`` / ``static_rnn`` like any cell). Its variables are TF1's:
  ``<scope>/lstm_cell/kernel`` [depth + units, 4 units], ``.../bias`` [4 units] and, with
  ``use_peephole``, ``.../w_i_diag``, ``w_f_diag``, ``w_o_diag``. The gates are ``i, c, f, o``,
  the order of ``LSTMCell``'s ``i, j, f, o``, so with the same kernel and bias it computes what
  ``fl.nn.rnn_cell.LSTMCell`` (and ``BasicLSTMCell``) compute, and reads their checkpoints.
  ``cell_clip=None`` (TF1 passes -1) clips nothing.
- ``LSTMBlockFusedCell``: the whole sequence in one ``BlockLSTM`` op. Called on
  ``[time, batch, input]`` (or a list of ``[batch, input]`` steps) it returns
  ``(outputs, LSTMStateTuple(c, h))`` as TF1 does; with ``sequence_length`` the op runs up to
  the longest sequence, outputs past each sequence's length are 0 and the final state is the
  one at its length. Variables ``lstm_fused_cell/kernel`` and ``.../bias`` (plus the peepholes).
- ``GRUBlockCell`` and ``GRUBlockCellV2`` (``dsl/contrib/gru_ops.py``): a GRU step as one
  fused ``GRUBlockCell`` op.
- The core cells and functions under their ``tf.contrib.rnn`` names (``BasicLSTMCell``,
  ``LSTMCell``, ``GRUCell``, ``MultiRNNCell``, ``DropoutWrapper``, ``static_rnn``, ...).
"""
from __future__ import annotations

from typing import Optional

from dsl.contrib.gru_ops import GRUBlockCell, GRUBlockCellV2
from dsl.ops import apply_op, convert_to_tensor
from dsl.rnn import (bidirectional_dynamic_rnn, dynamic_rnn, static_bidirectional_rnn,
                     static_rnn)
from dsl.rnn_cell import (BasicLSTMCell, BasicRNNCell, DeviceWrapper, DropoutWrapper, GRUCell,
                          LayerRNNCell, LSTMCell, LSTMStateTuple, MultiRNNCell, ResidualWrapper,
                          RNNCell, _batch_size, _depth, _zeros)
from dsl.tensor import static_shape
from runtime.dtypes import DType, as_dtype

__all__ = ["LSTMBlockCell", "LSTMBlockFusedCell", "LSTMBlockWrapper", "GRUBlockCell",
           "GRUBlockCellV2",
           "RNNCell", "LayerRNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell",
           "MultiRNNCell", "DropoutWrapper", "ResidualWrapper", "DeviceWrapper",
           "LSTMStateTuple", "static_rnn", "static_bidirectional_rnn", "dynamic_rnn",
           "bidirectional_dynamic_rnn"]


def _clip(cell_clip: Optional[float]) -> float:
    return -1.0 if cell_clip is None else float(cell_clip)


class _FusedLSTMVariables(RNNCell):
    """The variables both fused LSTM cells make (TF1's names) and their peephole inputs."""

    def __init__(self, num_units: int, forget_bias: float, cell_clip, use_peephole: bool,
                 **kwargs):
        super().__init__(**kwargs)
        self._num_units = int(num_units)
        self._forget_bias = float(forget_bias)
        self._cell_clip = _clip(cell_clip)
        self._use_peephole = bool(use_peephole)

    @property
    def num_units(self) -> int:
        return self._num_units

    @property
    def state_size(self):
        return LSTMStateTuple(self._num_units, self._num_units)

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        from dsl.init_ops import zeros_initializer
        depth, n = _depth(inputs_shape), self._num_units
        self._kernel = self.add_variable("kernel", [depth + n, 4 * n])
        self._bias = self.add_variable("bias", [4 * n], initializer=zeros_initializer())
        if self._use_peephole:
            self._w_i_diag = self.add_variable("w_i_diag", [n])
            self._w_f_diag = self.add_variable("w_f_diag", [n])
            self._w_o_diag = self.add_variable("w_o_diag", [n])

    def _peepholes(self, dtype: DType) -> list:
        if self._use_peephole:
            return [self._w_i_diag, self._w_f_diag, self._w_o_diag]
        from dsl.array_ops import zeros
        z = zeros([self._num_units], dtype=dtype)
        return [z, z, z]

    def _attrs(self) -> dict:
        return {"forget_bias": self._forget_bias, "cell_clip": self._cell_clip,
                "use_peephole": self._use_peephole}


class LSTMBlockCell(_FusedLSTMVariables):
    """``tf.contrib.rnn.LSTMBlockCell``: one fused ``LSTMBlockCell`` op per step; the state is
    ``LSTMStateTuple(c, h)``."""

    def __init__(self, num_units: int, forget_bias: float = 1.0, cell_clip=None,
                 use_peephole: bool = False, dtype=None, reuse=None, name: str = "lstm_cell"):
        super().__init__(num_units, forget_bias, cell_clip, use_peephole, name=name,
                         dtype=dtype, reuse=reuse)

    def call(self, inputs, state):
        if len(state) != 2:
            raise ValueError("Expecting state to be a tuple with length 2.")
        cs_prev, h_prev = state
        outs = apply_op("LSTMBlockCell",
                        [inputs, cs_prev, h_prev, self._kernel] + self._peepholes(inputs.dtype)
                        + [self._bias], self._attrs())
        cs, h = outs[1], outs[6]
        return h, LSTMStateTuple(cs, h)


class LSTMBlockWrapper(_FusedLSTMVariables):
    """A cell run over a whole sequence by one op (TF1's base of ``LSTMBlockFusedCell``):
    ``cell(inputs, initial_state=None, dtype=None, sequence_length=None)``."""

    _OP = "BlockLSTM"

    def __call__(self, inputs, initial_state=None, dtype=None, sequence_length=None,
                 scope: Optional[str] = None):
        is_list = isinstance(inputs, (list, tuple))
        if is_list:
            from dsl.array_ops import stack
            inputs = stack([convert_to_tensor(x) for x in inputs])
        inputs = convert_to_tensor(inputs)
        shape = static_shape(inputs)
        if shape is not None and len(shape) != 3:
            raise ValueError(f"the inputs of {type(self).__name__} must be [time, batch, "
                             f"input_size]; got shape {list(shape)}")
        outputs, state = super().__call__(inputs, (initial_state, dtype, sequence_length),
                                          scope=scope)
        if is_list:
            from dsl.array_ops import unstack
            outputs = unstack(outputs)
        return outputs, state

    def call(self, inputs, args):
        from dsl.array_ops import concat, expand_dims, range as fl_range, stack, transpose
        from dsl.indexing_ops import gather_nd
        from dsl.masking_ops import sequence_mask
        from dsl.math_ops import cast
        from dsl.reduction_ops import reduce_max
        initial_state, dtype, sequence_length = args
        time_len, batch_size = _batch_size(inputs, 0), _batch_size(inputs, 1)
        if initial_state is None:
            if dtype is None:
                raise ValueError("Either initial_state or dtype needs to be specified")
            z = _zeros(batch_size, self._num_units, as_dtype(dtype))
            initial_state = (z, z)
        elif len(initial_state) != 2:
            raise ValueError("Expecting initial_state to be a tuple with length 2 or None")
        c0, h0 = (convert_to_tensor(s) for s in initial_state)
        if sequence_length is None:
            max_len = cast(convert_to_tensor(time_len), DType.i64)
        else:
            sequence_length = convert_to_tensor(sequence_length)
            max_len = cast(reduce_max(sequence_length), DType.i64)
        outs = apply_op(self._OP, [max_len, inputs, c0, h0, self._kernel]
                        + self._peepholes(inputs.dtype) + [self._bias], self._attrs())
        cs, h = outs[1], outs[6]
        if sequence_length is None:
            return h, LSTMStateTuple(cs[-1], h[-1])
        mask = transpose(sequence_mask(sequence_length, time_len, dtype=h.dtype), [1, 0])
        h = h * expand_dims(mask, -1)
        # the state after step length - 1: prepend the initial state, pick row `length`
        index = stack([cast(sequence_length, DType.i32),
                       fl_range(0, convert_to_tensor(batch_size, dtype=DType.i32))], axis=1)
        final_c = gather_nd(concat([expand_dims(c0, 0), cs], 0), index)
        final_h = gather_nd(concat([expand_dims(h0, 0), h], 0), index)
        return h, LSTMStateTuple(final_c, final_h)


class LSTMBlockFusedCell(LSTMBlockWrapper):
    """``tf.contrib.rnn.LSTMBlockFusedCell``: an LSTM over ``[time, batch, input]`` in one
    ``BlockLSTM`` op (gates ``i, c, f, o`` as LSTMBlockCell's)."""

    def __init__(self, num_units: int, forget_bias: float = 1.0, cell_clip=None,
                 use_peephole: bool = False, reuse=None, dtype=None,
                 name: str = "lstm_fused_cell"):
        super().__init__(num_units, forget_bias, cell_clip, use_peephole, name=name,
                         dtype=dtype, reuse=reuse)
