"""``fl.nn.rnn_cell``: TensorFlow 1.x's recurrent cells (``tf.nn.rnn_cell``), with TF1's
formulas and variable names, so a TF1 program and its checkpoints carry over.

A cell maps ``(inputs, state)`` to ``(output, new_state)``; ``fl.nn.dynamic_rnn`` runs it over
a sequence in a while loop, ``fl.nn.static_rnn`` unrolled. As in TF1 a cell is a layer: it
creates its variables on its first call, under a variable scope named after it, and every
later call (each step of a sequence, another ``dynamic_rnn``) uses the same variables.

Names, as TF1 gives them (``dynamic_rnn`` opens the scope ``rnn``)::

    BasicRNNCell   rnn/basic_rnn_cell/kernel, .../bias
    BasicLSTMCell  rnn/basic_lstm_cell/kernel [depth + units, 4 units], .../bias
    LSTMCell       rnn/lstm_cell/kernel, .../bias, .../w_f_diag, w_i_diag, w_o_diag
                   (use_peepholes), .../projection/kernel (num_proj)
    GRUCell        rnn/gru_cell/gates/kernel, .../gates/bias, .../candidate/kernel, .../bias
    MultiRNNCell   rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel, ...

A cell's scope name is its ``name`` (default: the class name in snake case), made unique
within the enclosing scope as TF1's ``variable_scope(default_name=...)`` does: two cells
called at the top level are ``basic_rnn_cell`` and ``basic_rnn_cell_1``, but a scope entered
by name (``rnn``) counts afresh, so a second new cell in ``dynamic_rnn``'s default scope
clashes with the first ("Variable rnn/basic_lstm_cell/kernel already exists"), as in TF1;
give it another ``scope=``, or ``reuse=True`` to take the variables made before.

Gate order and formulas are TF1's: LSTM gates ``i, j, f, o`` from one matmul of
``[inputs, h]`` with ``forget_bias`` added to ``f``; GRU gates ``r, u`` (bias initialized to
1), then the candidate from ``[inputs, r * h]``, ``new_h = u * h + (1 - u) * candidate``.

The variables are made outside any loop or cond the cell is first called in (as TF1 lifts
them out of control flow), so a cell built inside ``dynamic_rnn``'s loop has ordinary
variables, initialized by ``fl.global_variables_initializer()``.
"""
from __future__ import annotations

import collections
import contextlib
import re
from typing import Any, Callable, List, Optional, Sequence

from dsl.context import control_dependencies, get_default_graph, name_scope
from dsl.ops import convert_to_tensor
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType, as_dtype

__all__ = ["RNNCell", "LayerRNNCell", "BasicRNNCell", "GRUCell", "BasicLSTMCell", "LSTMCell",
           "LSTMStateTuple", "MultiRNNCell", "DropoutWrapper", "ResidualWrapper",
           "DeviceWrapper"]


# --- nested structures (tuples, namedtuples such as LSTMStateTuple, lists) ----------------------
def flatten(structure) -> List[Any]:
    """The leaves of ``structure``, depth first."""
    if isinstance(structure, (list, tuple)):
        return [x for s in structure for x in flatten(s)]
    return [structure]


def pack_as(structure, flat: Sequence[Any]):
    """``flat`` (leaves in ``flatten`` order) in the shape of ``structure``; namedtuples keep
    their type."""
    it = iter(flat)

    def build(s):
        if isinstance(s, tuple) and hasattr(s, "_fields"):
            return type(s)(*[build(v) for v in s])
        if isinstance(s, (list, tuple)):
            return type(s)(build(v) for v in s)
        return next(it)
    out = build(structure)
    return out


def map_structure(fn: Callable, *structures):
    """``fn`` applied leaf by leaf to structures of one shape."""
    flats = [flatten(s) for s in structures]
    if any(len(f) != len(flats[0]) for f in flats):
        raise ValueError("the structures do not have the same number of elements")
    return pack_as(structures[0], [fn(*leaves) for leaves in zip(*flats)])


# --- variable scopes of the cells ---------------------------------------------------------------
# TF1 names a cell's variables by variable scopes (``rnn/basic_lstm_cell/kernel``), which
# ignore name scopes. The cells keep that stack here, on the graph: ``dynamic_rnn`` and
# ``static_rnn`` open ``scope or "rnn"``, MultiRNNCell opens ``cell_<i>``, and each cell its own
# name. (The enclosing ``_VarScopes.outer`` is where an ``fl.variable_scope`` would add its
# names.)
class _VarScopes:
    def __init__(self):
        self.stack: List[str] = []            # full names, innermost last
        self.opened: collections.Counter = collections.Counter()   # TF1's variable_scopes_count

    @property
    def current(self) -> str:
        return self.stack[-1] if self.stack else ""

    def full(self, name: str) -> str:
        return f"{self.current}/{name}" if self.current else name

    def unique(self, default: str) -> str:
        """``default``, or ``default_1``, ... when a scope of that name was opened before."""
        if not self.opened[self.full(default)]:
            return default
        k = 1
        while self.opened[self.full(f"{default}_{k}")]:
            k += 1
        return f"{default}_{k}"


def _scopes() -> _VarScopes:
    g = get_default_graph()
    scopes = g.__dict__.get("_rnn_variable_scopes")
    if scopes is None:
        scopes = g.__dict__["_rnn_variable_scopes"] = _VarScopes()
    return scopes


@contextlib.contextmanager
def variable_scope_of(name: Optional[str] = None, default_name: Optional[str] = None,
                      absolute: Optional[str] = None):
    """Enter the variable scope ``name`` (exact) or ``default_name`` (made unique) under the
    current one, or ``absolute`` (a full scope name, to come back to); yields its full name."""
    scopes = _scopes()
    saved = None
    if absolute is not None:
        full = absolute
        saved = collections.Counter(scopes.opened)    # TF1 restores them on leaving
    elif name:
        full = scopes.full(name)
        # entering a scope by name starts its sub-scope counts afresh (TF1): a second new
        # cell in "rnn" is "rnn/basic_lstm_cell" again, and clashes with the first
        for key in [k for k in scopes.opened if k.startswith(full + "/")]:
            del scopes.opened[key]
    else:
        full = scopes.full(scopes.unique(default_name))
    scopes.opened[full] += 1
    scopes.stack.append(full)
    try:
        yield full
    finally:
        scopes.stack.pop()
        if saved is not None:
            scopes.opened = saved


def _existing_variable(full_name: str):
    from dsl.variables import GraphKeys
    g = get_default_graph()
    for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES):
        if getattr(v, "_name", None) == full_name:
            return v
    return None


@contextlib.contextmanager
def _outside_control_flow():
    """Ops made inside belong to no loop or cond being built and wait for nothing (TF1's
    ``init_scope``): a cell first called in ``dynamic_rnn``'s loop makes plain variables. They
    go first in the graph (they read nothing made before: an initializer makes its own value),
    so a loop that reads them finds them made before it."""
    g = get_default_graph()
    before = set(g)
    first = next(iter(g), None)
    try:
        with control_dependencies(None), \
                (g.inserting_before(first) if first is not None else contextlib.nullcontext()):
            yield
    finally:
        made = [n for n in g if n not in before]
        g.__dict__.setdefault("_nodes_of_other_loops", set()).update(made)
        made_set = set(made)
        if any(i.node not in made_set for n in made for i in n.inputs):
            g.topo_sort()                 # an initializer that reads an older tensor


def _snake_case(name: str) -> str:
    """TF1's layer names from class names: BasicLSTMCell -> basic_lstm_cell."""
    s = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


# --- the cells ------------------------------------------------------------------------------------
class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """The state of an LSTM cell: ``(c, h)``, the cell state and the output."""
    __slots__ = ()

    @property
    def dtype(self):
        c, h = self
        if c.dtype != h.dtype:
            raise TypeError(f"inconsistent internal state: {c.dtype} vs {h.dtype}")
        return c.dtype


class RNNCell:
    """The abstract cell (``tf.nn.rnn_cell.RNNCell``): subclasses define ``state_size``,
    ``output_size`` and ``call(inputs, state)``; ``build(inputs_shape)`` (optional) makes
    variables with ``add_variable``, on the first call, inside the cell's variable scope."""

    def __init__(self, trainable: bool = True, name: Optional[str] = None, dtype=None,
                 reuse=None, **kwargs):
        self.trainable = trainable
        self._base_name = name or _snake_case(type(self).__name__)
        self._dtype = None if dtype is None else as_dtype(dtype)
        self._reuse = reuse
        self._scope: Optional[str] = None      # the full variable scope, fixed on first call
        self.built = False
        self._variables: list = []
        self._cells_inside: list = []

    # --- what a subclass provides --------------------------------------------------------
    @property
    def state_size(self):
        raise NotImplementedError

    @property
    def output_size(self):
        raise NotImplementedError

    def build(self, inputs_shape) -> None:
        self.built = True

    def call(self, inputs, state):
        raise NotImplementedError

    # --- calling -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._base_name

    @property
    def scope_name(self) -> Optional[str]:
        """The full variable scope of the cell's variables (known once it was called)."""
        return self._scope

    def __call__(self, inputs, state, scope: Optional[str] = None):
        inputs = map_structure(convert_to_tensor, inputs)
        if self._scope is None:
            reuse_exact = self._reuse is True
            with variable_scope_of(name=scope or (self._base_name if reuse_exact else None),
                                   default_name=self._base_name) as full:
                self._scope = full
        with variable_scope_of(absolute=self._scope), \
                name_scope(self._scope.rsplit("/", 1)[-1]):
            if not self.built:
                first = flatten(inputs)[0]
                if self._dtype is None:
                    self._dtype = first.dtype
                self.build(first.shape)
                self.built = True
            return self.call(inputs, state)

    def add_variable(self, name: str, shape, dtype=None, initializer=None, trainable=None):
        """The variable ``<cell scope>/<name>`` (TF1's ``add_weight``), made once."""
        from dsl.init_ops import glorot_uniform_initializer
        from dsl.variables import GraphKeys, Variable
        full = _scopes().full(name)
        dtype = as_dtype(dtype) if dtype is not None else (self._dtype or DType.f32)
        existing = _existing_variable(full)
        if self._reuse is True or (self._reuse not in (None, False) and existing is not None):
            if existing is None:
                raise ValueError(f"Variable {full} does not exist, or was not created with "
                                 "an RNN cell or get_variable(); it cannot be reused")
            if static_shape(existing) is not None and tuple(static_shape(existing)) != tuple(shape):
                raise ValueError(f"trying to share variable {full}, but its shape "
                                 f"{list(static_shape(existing))} is not the asked {list(shape)}")
            self._variables.append(existing)
            return existing
        if existing is not None or get_default_graph().get(full) is not None:
            raise ValueError(f"Variable {full} already exists, disallowed. Did you mean to set "
                             "reuse=True (or give the cell or the rnn another scope)?")
        if initializer is None:
            initializer = glorot_uniform_initializer()
        trainable = self.trainable if trainable is None else trainable
        with _outside_control_flow(), name_scope(None):
            v = Variable(initializer, trainable=trainable, name=full + "/", dtype=dtype,
                         shape=list(shape),
                         collections=[GraphKeys.GLOBAL_VARIABLES])
        self._variables.append(v)
        return v

    add_weight = add_variable

    @property
    def variables(self) -> list:
        """The cell's variables (its own, then those of cells inside it)."""
        out = list(self._variables)
        for c in self._cells_inside:
            out += [v for v in c.variables if v not in out]
        return out

    weights = variables

    @property
    def trainable_variables(self) -> list:
        return [v for v in self.variables if v.trainable]

    trainable_weights = trainable_variables

    def zero_state(self, batch_size, dtype):
        """Zeros of ``[batch_size, s]`` for each ``s`` of ``state_size`` (in its structure)."""
        dtype = as_dtype(dtype)
        with name_scope(type(self).__name__ + "ZeroState"):
            return map_structure(lambda s: _zeros(batch_size, s, dtype), self.state_size)

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        if inputs is not None:
            inputs = convert_to_tensor(inputs)
            batch_size = _batch_size(inputs, 0)
            dtype = dtype or inputs.dtype
        return self.zero_state(batch_size, dtype)


def _zeros(batch_size, size, dtype: DType) -> Tensor:
    from dsl.array_ops import stack, zeros
    if isinstance(batch_size, int):
        return zeros([batch_size, int(size)], dtype=dtype)
    b = convert_to_tensor(batch_size, dtype=DType.i32)
    return zeros(stack([b, convert_to_tensor(int(size), dtype=DType.i32)]), dtype=dtype)


def _batch_size(x: Tensor, axis: int):
    """Dim ``axis`` of ``x``: an int when static, else a scalar tensor."""
    if static_shape(x) is not None and static_shape(x)[axis] is not None:
        return int(static_shape(x)[axis])
    from dsl.array_ops import shape
    return shape(x)[axis]


LayerRNNCell = RNNCell


def _linear(args: List[Tensor], kernel, bias) -> Tensor:
    """``concat(args, 1) @ kernel + bias`` (TF1's ``_linear``)."""
    from dsl.array_ops import concat
    from dsl.linalg_ops import matmul
    from dsl.nn import bias_add
    x = concat(list(args), 1) if len(args) > 1 else args[0]
    y = matmul(x, kernel)
    return y if bias is None else bias_add(y, bias)


def _activation(fn):
    if fn is None:
        from dsl.math_ops import tanh
        return tanh
    return fn


class BasicRNNCell(RNNCell):
    """``output = new_state = activation(W [inputs, state] + b)``."""

    def __init__(self, num_units: int, activation=None, reuse=None, name=None, dtype=None,
                 **kwargs):
        super().__init__(name=name, dtype=dtype, reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._activation = _activation(activation)

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        from dsl.init_ops import zeros_initializer
        depth = _depth(inputs_shape)
        self._kernel = self.add_variable("kernel", [depth + self._num_units, self._num_units])
        self._bias = self.add_variable("bias", [self._num_units],
                                       initializer=zeros_initializer())

    def call(self, inputs, state):
        output = self._activation(_linear([inputs, state], self._kernel, self._bias))
        return output, output


class GRUCell(RNNCell):
    """Gated recurrent unit (Cho et al. 2014), as TF1: ``r, u = sigmoid(W_g [x, h] + b_g)``
    (b_g initialized to 1), ``c = activation(W_c [x, r * h] + b_c)``,
    ``new_h = u * h + (1 - u) * c``."""

    def __init__(self, num_units: int, activation=None, reuse=None, kernel_initializer=None,
                 bias_initializer=None, name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._activation = _activation(activation)
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        from dsl.init_ops import constant_initializer, zeros_initializer
        depth, h = _depth(inputs_shape), self._num_units
        with variable_scope_of(name="gates"):
            self._gate_kernel = self.add_variable("kernel", [depth + h, 2 * h],
                                                  initializer=self._kernel_initializer)
            self._gate_bias = self.add_variable(
                "bias", [2 * h], initializer=self._bias_initializer or constant_initializer(1.0))
        with variable_scope_of(name="candidate"):
            self._candidate_kernel = self.add_variable("kernel", [depth + h, h],
                                                       initializer=self._kernel_initializer)
            self._candidate_bias = self.add_variable(
                "bias", [h], initializer=self._bias_initializer or zeros_initializer())

    def call(self, inputs, state):
        from dsl.array_ops import split
        from dsl.math_ops import sigmoid
        value = sigmoid(_linear([inputs, state], self._gate_kernel, self._gate_bias))
        r, u = split(value, 2, axis=1)
        candidate = _linear([inputs, r * state], self._candidate_kernel, self._candidate_bias)
        c = self._activation(candidate)
        new_h = u * state + (1 - u) * c
        return new_h, new_h


class BasicLSTMCell(RNNCell):
    """LSTM (Hochreiter & Schmidhuber 1997) as TF1's BasicLSTMCell: gates ``i, j, f, o`` from
    ``W [x, h] + b``; ``c' = c * sigmoid(f + forget_bias) + sigmoid(i) * activation(j)``,
    ``h' = activation(c') * sigmoid(o)``. The state is ``LSTMStateTuple(c, h)`` (or, with
    ``state_is_tuple=False``, ``[c, h]`` concatenated)."""

    def __init__(self, num_units: int, forget_bias: float = 1.0, state_is_tuple: bool = True,
                 activation=None, reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        from dsl.init_ops import zeros_initializer
        depth, h = _depth(inputs_shape), self._num_units
        self._kernel = self.add_variable("kernel", [depth + h, 4 * h])
        self._bias = self.add_variable("bias", [4 * h], initializer=zeros_initializer())

    def call(self, inputs, state):
        from dsl.array_ops import concat, split
        from dsl.math_ops import sigmoid
        c, h = _lstm_state(state, self._state_is_tuple, self._num_units)
        i, j, f, o = split(_linear([inputs, h], self._kernel, self._bias), 4, axis=1)
        forget_bias = convert_to_tensor(self._forget_bias, dtype=f.dtype)
        new_c = c * sigmoid(f + forget_bias) + sigmoid(i) * self._activation(j)
        new_h = self._activation(new_c) * sigmoid(o)
        new_state = (LSTMStateTuple(new_c, new_h) if self._state_is_tuple
                     else concat([new_c, new_h], 1))
        return new_h, new_state


def _lstm_state(state, is_tuple: bool, units: int):
    if is_tuple:
        c, h = state
        return c, h
    from dsl.array_ops import split
    c, h = split(state, 2, axis=1)
    return c, h


class LSTMCell(RNNCell):
    """TF1's LSTMCell: BasicLSTMCell plus optional peepholes (``w_f_diag``, ``w_i_diag``,
    ``w_o_diag``, Sak et al. 2014), ``cell_clip`` on the cell state, and a projection of the
    output to ``num_proj`` units (clipped to ``proj_clip``)."""

    def __init__(self, num_units: int, use_peepholes: bool = False, cell_clip=None,
                 initializer=None, num_proj=None, proj_clip=None, num_unit_shards=None,
                 num_proj_shards=None, forget_bias: float = 1.0, state_is_tuple: bool = True,
                 activation=None, reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = None if num_proj is None else int(num_proj)
        self._proj_clip = proj_clip
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)

    @property
    def state_size(self):
        n, m = self._num_units, self._num_proj or self._num_units
        return LSTMStateTuple(n, m) if self._state_is_tuple else n + m

    @property
    def output_size(self):
        return self._num_proj or self._num_units

    def build(self, inputs_shape):
        from dsl.init_ops import zeros_initializer
        depth, n = _depth(inputs_shape), self._num_units
        h_depth = self._num_proj or n
        self._kernel = self.add_variable("kernel", [depth + h_depth, 4 * n],
                                         initializer=self._initializer)
        self._bias = self.add_variable("bias", [4 * n], initializer=zeros_initializer())
        if self._use_peepholes:
            self._w_f_diag = self.add_variable("w_f_diag", [n], initializer=self._initializer)
            self._w_i_diag = self.add_variable("w_i_diag", [n], initializer=self._initializer)
            self._w_o_diag = self.add_variable("w_o_diag", [n], initializer=self._initializer)
        if self._num_proj is not None:
            with variable_scope_of(name="projection"):
                self._proj_kernel = self.add_variable("kernel", [n, self._num_proj],
                                                      initializer=self._initializer)

    def call(self, inputs, state):
        from dsl.array_ops import concat, split
        from dsl.clip_ops import clip_by_value
        from dsl.linalg_ops import matmul
        from dsl.math_ops import sigmoid
        n, m_depth = self._num_units, self._num_proj or self._num_units
        if self._state_is_tuple:
            c_prev, m_prev = state
        else:
            c_prev, m_prev = split(state, [n, m_depth], axis=1)
        i, j, f, o = split(_linear([inputs, m_prev], self._kernel, self._bias), 4, axis=1)
        forget_bias = convert_to_tensor(self._forget_bias, dtype=f.dtype)
        act = self._activation
        if self._use_peepholes:
            c = (sigmoid(f + forget_bias + self._w_f_diag * c_prev) * c_prev
                 + sigmoid(i + self._w_i_diag * c_prev) * act(j))
        else:
            c = sigmoid(f + forget_bias) * c_prev + sigmoid(i) * act(j)
        if self._cell_clip is not None:
            c = clip_by_value(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m = sigmoid(o + self._w_o_diag * c) * act(c)
        else:
            m = sigmoid(o) * act(c)
        if self._num_proj is not None:
            m = matmul(m, self._proj_kernel)
            if self._proj_clip is not None:
                m = clip_by_value(m, -self._proj_clip, self._proj_clip)
        new_state = LSTMStateTuple(c, m) if self._state_is_tuple else concat([c, m], 1)
        return m, new_state


def _depth(inputs_shape) -> int:
    dims = static_shape(inputs_shape)
    if dims is None or len(dims) < 1 or dims[-1] is None:
        raise ValueError(f"the last dimension of the inputs to an RNN cell must be known; "
                         f"got shape {inputs_shape}")
    return int(dims[-1])


class MultiRNNCell(RNNCell):
    """Cells stacked: each one's output is the next one's input (``tf.nn.rnn_cell.
    MultiRNNCell``); the state is the tuple of their states. Cell ``i``'s variables are under
    ``multi_rnn_cell/cell_<i>/``."""

    def __init__(self, cells, state_is_tuple: bool = True):
        super().__init__(name="multi_rnn_cell")
        cells = list(cells)
        if not cells:
            raise ValueError("MultiRNNCell needs at least one cell")
        if not state_is_tuple and any(isinstance(s, tuple) for c in cells
                                      for s in [c.state_size]):
            raise ValueError("some cells return tuples of states; use state_is_tuple=True")
        self._cells = cells
        self._cells_inside = cells
        self._state_is_tuple = state_is_tuple

    @property
    def state_size(self):
        if self._state_is_tuple:
            return tuple(c.state_size for c in self._cells)
        return sum(c.state_size for c in self._cells)

    @property
    def output_size(self):
        return self._cells[-1].output_size

    def zero_state(self, batch_size, dtype):
        with name_scope("MultiRNNCellZeroState"):
            if self._state_is_tuple:
                return tuple(c.zero_state(batch_size, dtype) for c in self._cells)
            return super().zero_state(batch_size, dtype)

    def build(self, inputs_shape):
        pass                                     # each cell builds itself on its first call

    def call(self, inputs, state):
        from dsl.array_ops import concat, slice as fl_slice
        cur, new_states, start = inputs, [], 0
        for i, cell in enumerate(self._cells):
            with variable_scope_of(name=f"cell_{i}"), name_scope(f"cell_{i}"):
                if self._state_is_tuple:
                    if not isinstance(state, (list, tuple)) or len(state) != len(self._cells):
                        raise ValueError(f"expected a state with {len(self._cells)} entries, "
                                         f"got {state!r}")
                    cur_state = state[i]
                else:
                    size = cell.state_size
                    cur_state = fl_slice(state, [0, start], [-1, size])
                    start += size
                cur, s = cell(cur, cur_state)
                new_states.append(s)
        new_state = tuple(new_states) if self._state_is_tuple else concat(new_states, 1)
        return cur, new_state


class _WrapperCell(RNNCell):
    """A cell around another one: the wrapped cell's variables keep their names."""

    def __init__(self, cell: RNNCell):
        super().__init__(name=cell.name)
        self._cell = cell
        self._cells_inside = [cell]

    @property
    def wrapped_cell(self) -> RNNCell:
        return self._cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    def zero_state(self, batch_size, dtype):
        return self._cell.zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope: Optional[str] = None):
        return self.call(inputs, state, scope)


class DropoutWrapper(_WrapperCell):
    """Dropout on the inputs, outputs and state of a cell (``tf.nn.rnn_cell.DropoutWrapper``,
    a fresh mask each step; the cell state ``c`` of an LSTM is never dropped, as TF1's default
    filter has it). A keep probability may be a float or a scalar tensor (fed 1.0 to
    evaluate)."""

    def __init__(self, cell: RNNCell, input_keep_prob=1.0, output_keep_prob=1.0,
                 state_keep_prob=1.0, variational_recurrent: bool = False, input_size=None,
                 dtype=None, seed=None, dropout_state_filter_visitor=None):
        super().__init__(cell)
        if variational_recurrent:
            raise NotImplementedError("DropoutWrapper(variational_recurrent=True) is not "
                                      "supported; use a fresh mask per step (the default)")
        for what, p in (("input", input_keep_prob), ("output", output_keep_prob),
                        ("state", state_keep_prob)):
            if isinstance(p, (int, float)) and not 0 < p <= 1:
                raise ValueError(f"Parameter {what}_keep_prob must be between 0 and 1: {p}")
        self._input_keep_prob = input_keep_prob
        self._output_keep_prob = output_keep_prob
        self._state_keep_prob = state_keep_prob
        self._seed = seed
        self._state_filter = dropout_state_filter_visitor

    def _dropout(self, values, keep_prob, offset: int, keep_leaf=None):
        from dsl.nn import dropout
        if isinstance(keep_prob, (int, float)) and keep_prob == 1:
            return values
        flat = flatten(values)
        out = []
        for k, v in enumerate(flat):
            if keep_leaf is not None and not keep_leaf[k]:
                out.append(v)
                continue
            seed = None if self._seed is None else self._seed + offset + k
            out.append(dropout(v, keep_prob=keep_prob, seed=seed))
        return pack_as(values, out)

    def _state_mask(self, state) -> List[bool]:
        """Which leaves of the state take dropout: all but LSTM cell states ``c``."""
        if self._state_filter is not None:
            return [bool(self._state_filter(s)) for s in flatten(state)]
        mask: List[bool] = []

        def walk(s):
            if isinstance(s, LSTMStateTuple):
                mask.extend([False] * len(flatten(s.c)) + [True] * len(flatten(s.h)))
            elif isinstance(s, (list, tuple)):
                for v in s:
                    walk(v)
            else:
                mask.append(True)
        walk(state)
        return mask

    def call(self, inputs, state, scope=None):
        inputs = self._dropout(inputs, self._input_keep_prob, 0)
        output, new_state = self._cell(inputs, state, scope=scope)
        new_state = self._dropout(new_state, self._state_keep_prob, 100,
                                  self._state_mask(new_state))
        output = self._dropout(output, self._output_keep_prob, 200)
        return output, new_state


class ResidualWrapper(_WrapperCell):
    """``output = inputs + cell(inputs)``: a residual connection around a cell."""

    def __init__(self, cell: RNNCell, residual_fn=None):
        super().__init__(cell)
        self._residual_fn = residual_fn

    def call(self, inputs, state, scope=None):
        output, new_state = self._cell(inputs, state, scope=scope)
        if self._residual_fn is not None:
            return self._residual_fn(inputs, output), new_state
        return map_structure(lambda i, o: i + o, inputs, output), new_state


class DeviceWrapper(_WrapperCell):
    """Runs the cell's ops on ``device``."""

    def __init__(self, cell: RNNCell, device: str):
        super().__init__(cell)
        self._device = device

    def call(self, inputs, state, scope=None):
        from dsl.context import device
        with device(self._device):
            return self._cell(inputs, state, scope=scope)
