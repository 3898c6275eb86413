"""TensorFlow 1.x's ``tf.contrib.rnn.GRUBlockCell`` and ``GRUBlockCellV2``: a GRU cell that
runs each step as one fused ``GRUBlockCell`` op (``compiler/ops/gru_block.py``), for
``fl.nn.dynamic_rnn`` and the other users of ``fl.nn.rnn_cell`` cells.

Its formulas are ``fl.nn.rnn_cell.GRUCell``'s with the tanh candidate (so, with the same
weights, the two give the same outputs)::

    r, u = sigmoid([x, h] @ gate_kernel + gate_bias)        (gate_bias initialized to 1)
    c = tanh([x, r * h] @ candidate_kernel + candidate_bias) (candidate_bias to 0)
    new_h = u * h + (1 - u) * c

The variables are named as TensorFlow names them, so checkpoints carry over. The cell's
scope is ``gru_cell``, as ``GRUCell``'s. ``GRUBlockCellV2`` uses ``GRUCell``'s names::

    gru_cell/gates/kernel [input + units, 2 units]   gru_cell/gates/bias [2 units]
    gru_cell/candidate/kernel [input + units, units]  gru_cell/candidate/bias [units]

``GRUBlockCell`` (deprecated in TensorFlow for V2) keeps TensorFlow's first names, under
which the gate kernel is called ``w_c`` and the candidate kernel ``w_ru`` (the reverse of the
op's inputs they feed)::

    gru_cell/w_c [input + units, 2 units]   gru_cell/b_ru [2 units]
    gru_cell/w_ru [input + units, units]    gru_cell/b_c [units]
"""
from __future__ import annotations

from typing import Optional

from dsl.init_ops import constant_initializer
from dsl.ops import apply_op
from dsl.rnn_cell import LayerRNNCell, _depth, variable_scope_of
from dsl.tensor import static_shape

__all__ = ["GRUBlockCell", "GRUBlockCellV2"]


class GRUBlockCell(LayerRNNCell):
    """A GRU cell computed by the fused ``GRUBlockCell`` op (``tf.contrib.rnn.GRUBlockCell``),
    with TensorFlow's first variable names (``w_c``, ``b_ru``, ``w_ru``, ``b_c``)."""

    def __init__(self, num_units: Optional[int] = None, cell_size: Optional[int] = None,
                 reuse=None, name: str = "gru_cell"):
        super().__init__(name=name, reuse=reuse)
        if (cell_size is None) == (num_units is None):
            raise ValueError("Exactly one of num_units or cell_size must be provided.")
        self._cell_size = int(num_units if num_units is not None else cell_size)

    @property
    def state_size(self) -> int:
        return self._cell_size

    @property
    def output_size(self) -> int:
        return self._cell_size

    def _input_size(self, input_shape) -> int:
        dims = static_shape(input_shape)
        if dims is not None and len(dims) != 2:
            raise ValueError(f"Input 0 of {type(self).__name__} is incompatible with the layer: "
                             f"expected ndim=2, found ndim={len(dims)}")
        if dims is None or dims[-1] is None:
            raise ValueError("Expecting input_size to be set.")
        return _depth(input_shape)

    def build(self, input_shape) -> None:
        depth, n = self._input_size(input_shape), self._cell_size
        self._gate_kernel = self.add_variable("w_c", [depth + n, 2 * n])
        self._gate_bias = self.add_variable("b_ru", [2 * n],
                                            initializer=constant_initializer(1.0))
        self._candidate_kernel = self.add_variable("w_ru", [depth + n, n])
        self._candidate_bias = self.add_variable("b_c", [n],
                                                 initializer=constant_initializer(0.0))

    def call(self, inputs, h_prev):
        shape = static_shape(h_prev)
        if shape is None or len(shape) != 2:
            raise ValueError(f"Shape {list(shape) if shape is not None else None} of h_prev "
                             "must have rank 2")
        if shape[1] is not None and shape[1] != self._cell_size:
            raise ValueError(f"Shape of h_prev[1] incorrect: cell_size {self._cell_size} vs "
                             f"{shape[1]}")
        _, _, _, new_h = apply_op("GRUBlockCell", [
            inputs, h_prev, self._gate_kernel, self._candidate_kernel, self._gate_bias,
            self._candidate_bias])
        return new_h, new_h


class GRUBlockCellV2(GRUBlockCell):
    """``GRUBlockCell`` with ``GRUCell``'s variable names (``gates/kernel``, ``gates/bias``,
    ``candidate/kernel``, ``candidate/bias``): ``tf.contrib.rnn.GRUBlockCellV2``."""

    def build(self, input_shape) -> None:
        depth, n = self._input_size(input_shape), self._cell_size
        with variable_scope_of(name="gates"):
            self._gate_kernel = self.add_variable("kernel", [depth + n, 2 * n])
            self._gate_bias = self.add_variable("bias", [2 * n],
                                                initializer=constant_initializer(1.0))
        with variable_scope_of(name="candidate"):
            self._candidate_kernel = self.add_variable("kernel", [depth + n, n])
            self._candidate_bias = self.add_variable("bias", [n],
                                                     initializer=constant_initializer(0.0))
