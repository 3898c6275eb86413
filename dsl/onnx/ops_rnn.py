"""ONNX's recurrent layers: LSTM, GRU and RNN (opsets 7, 14 and 22; 14 added ``layout``).

Everything the spec allows: directions forward, reverse and bidirectional; the activation
functions (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid,
Elu, Softsign, Softplus) with their alpha/beta, ``clip``, ``input_forget`` (LSTM),
``linear_before_reset`` (GRU), ``layout`` 0/1; the optional inputs B, sequence_lens,
initial_h, initial_c and P (peepholes); and any of the outputs Y, Y_h, Y_c left out.

How it is lowered, as onnxruntime computes it:

- An LSTM that is what TensorFlow's ``BlockLSTMV2`` computes (the default activations, no
  ``clip``, no ``input_forget``, no ``sequence_lens``, W and R known at import: what most
  exported models are) becomes one ``BlockLSTMV2`` per direction: the whole sequence in one C
  kernel (every step's input product in one gemm, then per step the product with h and the
  gates), W^T and R^T packed into its ``[input + hidden, 4 * hidden]`` kernel with the gate
  blocks reordered (ONNX i, o, f, c -> i, f, c, o). A reverse direction reverses X and Y
  around it. Measured against the step-by-step lowering below (the LSTM inference benchmark's
  model, 32 steps x 64 inputs, hidden 128, one thread, interleaved, thread CPU time): batch 32
  2.33 vs 2.42 ms, batch 1 0.121 vs 0.127 ms (medians, loaded machine).

- The input projection of every time step (and both directions) is ONE MatMul before the
  recurrence, ``[seq*batch, input] x [input, dirs*gates*hidden]``, with the biases that can be
  (Wb + Rb, except GRU's Rbh under linear_before_reset) added there; each step then adds
  ``H_{t-1} R^T`` and applies the gates.
- W and R known at import (initializers, as in every exported model) are stored transposed,
  ``[input, gates*hidden]`` and ``[hidden, gates*hidden]``, so that both products are plain
  ``a @ b`` gemms: oneDNN's sgemm ran the LSTM benchmark's 32x128x512 step product in 18 us
  against 22.5 us with B transposed, and its 1024x64x512 input projection in 287 us against
  306 us (one thread, the shared AMD EPYC machine). Weights computed at run time keep
  ``transpose_b`` (a transpose per run would cost more than it saves on short sequences).
- A sequence length known at compile time, up to ``MAX_UNROLLED_STEPS``, is unrolled into
  flowc ops; a longer or unknown one runs in a flowc ``while_loop`` (a C loop) over time, all
  directions in one loop, writing Y one row per iteration with ``InplaceUpdate`` into a buffer
  the loop keeps. The loop compiles faster than unrolled code and runs as fast from about 16
  steps on (see ``MAX_UNROLLED_STEPS``). Both give the same values.
- sequence_lens: a sequence stops at its length. Y is 0 past it, Y_h/Y_c are the state at its
  last step, and the reverse direction reads each sequence from its own last step back to its
  first (onnxruntime's ReverseSequence). A sequence of length 0 has Y_h = Y_c = 0, as in
  onnxruntime. Lengths above seq_length act as seq_length, below 0 as 0 (onnxruntime refuses
  both).
- activation_alpha/beta are consumed in the order of the activations, each activation taking
  only the ones it uses (Affine, ScaledTanh, HardSigmoid: alpha and beta; LeakyRelu,
  ThresholdedRelu, Elu: alpha); missing ones take the spec's defaults, those of the ONNX
  operators of the same name (onnxruntime uses 0 where those ops have no default: Affine's,
  ScaledTanh's and ThresholdedRelu's). A bidirectional node given one direction's activations
  uses them for both, as onnxruntime does. ``clip`` bounds the input of every gate activation
  (not the cell state before ``h``), as onnxruntime does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy as np

import dsl as fl
from dsl.onnx.folding import static_value
from dsl.onnx.values import binary, index_const, index_scalar, scalar, static_shape, unary
from dsl.ops import apply_op
from dsl.tensor import Tensor, static_shape

# Static sequences of up to this many steps are unrolled; longer (or unknown) ones run in the
# while loop. Measured (examples/benchmarks/bench_onnx_rnn.py: LSTM, batch 4, input 32, hidden
# 64, one thread, CPU time on a loaded 2-core machine): the two run equally fast from 16 steps
# on (32 steps: 652 us unrolled, 662 us looped) while the loop compiles faster (32 steps: 3.2 s
# against 4.6 s; 128 steps: 2.6 s against 11.7 s), and unrolled code runs faster on a few steps
# (1 step: 12 us against 16; 4 steps: 67 us against 76) for about the same compile time.
MAX_UNROLLED_STEPS = 8

# lower-case name -> (alpha's default, beta's default); None: the function takes no such value
_ACTIVATIONS = {
    "relu": (None, None), "tanh": (None, None), "sigmoid": (None, None),
    "affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None),
    "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None),
    "softsign": (None, None), "softplus": (None, None)}


@dataclass(frozen=True)
class Activation:
    name: str                    # lower case, a key of _ACTIVATIONS
    alpha: Optional[float]
    beta: Optional[float]

    def __call__(self, x: Tensor) -> Tensor:
        name, a, b = self.name, self.alpha, self.beta
        if name in ("relu", "tanh", "sigmoid", "softplus"):
            return unary({"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid",
                          "softplus": "Softplus"}[name], x)
        if name == "affine":
            return binary("AddV2", binary("Mul", x, scalar(a, x)), scalar(b, x))
        if name == "leakyrelu":
            return fl.where_v2(binary("GreaterEqual", x, scalar(0, x)), x,
                            binary("Mul", x, scalar(a, x)))
        if name == "thresholdedrelu":
            return fl.where_v2(binary("Greater", x, scalar(a, x)), x, scalar(0, x))
        if name == "scaledtanh":
            return binary("Mul", scalar(a, x), unary("Tanh", binary("Mul", x, scalar(b, x))))
        if name == "hardsigmoid":
            y = binary("AddV2", binary("Mul", x, scalar(a, x)), scalar(b, x))
            return binary("Minimum", binary("Maximum", y, scalar(0, x)), scalar(1, x))
        if name == "elu":
            if a == 1.0:
                return unary("Elu", x)
            expm1 = binary("Sub", unary("Exp", x), scalar(1, x))
            return fl.where_v2(binary("GreaterEqual", x, scalar(0, x)), x,
                            binary("Mul", expm1, scalar(a, x)))
        assert name == "softsign"
        return binary("RealDiv", x, binary("AddV2", unary("Abs", x), scalar(1, x)))


@dataclass(frozen=True)
class Cell:
    """What differs between LSTM, GRU and RNN."""
    gates: int                                   # gate blocks in W and R
    default_activations: Tuple[str, ...]         # per direction
    states: int                                  # 2 for LSTM (h, c), else 1


LSTM = Cell(4, ("Sigmoid", "Tanh", "Tanh"), 2)
GRU = Cell(3, ("Sigmoid", "Tanh"), 1)
RNN = Cell(1, ("Tanh",), 1)


def _activations(ctx, cell: Cell, dirs: int) -> List[List[Activation]]:
    """The activation functions of each direction, alpha/beta consumed in order."""
    per = len(cell.default_activations)
    names = list(ctx.attr("activations", None) or cell.default_activations)
    if len(names) == per and dirs == 2:
        names = names * 2
    if len(names) != per * dirs:
        raise ctx.error(f"needs {per * dirs} activations ({per} per direction), got "
                        f"{len(names)}: {names}")
    alphas = list(ctx.attr("activation_alpha", None) or [])
    betas = list(ctx.attr("activation_beta", None) or [])
    out: List[Activation] = []
    for name in names:
        key = str(name).lower()
        if key not in _ACTIVATIONS:
            raise ctx.error(f"unknown activation '{name}' (expected one of Relu, Tanh, Sigmoid, "
                            "Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
                            "Softsign, Softplus)")
        alpha_default, beta_default = _ACTIVATIONS[key]
        alpha = beta = None
        if alpha_default is not None:
            alpha = float(alphas.pop(0)) if alphas else alpha_default
        if beta_default is not None:
            beta = float(betas.pop(0)) if betas else beta_default
        out.append(Activation(key, alpha, beta))
    return [out[d * per:(d + 1) * per] for d in range(dirs)]


# --- small tensor helpers -------------------------------------------------------------------
def _slice_last(x: Tensor, start: int, size: int) -> Tensor:
    """``x[..., start:start + size]`` of a rank-2 or rank-3 tensor."""
    rank = len(static_shape(x))
    begin = index_const([0] * (rank - 1) + [start])
    sizes = index_const([-1] * (rank - 1) + [size])
    return apply_op("Slice", [x, begin, sizes])


def _split_last(x: Tensor, parts: int) -> List[Tensor]:
    if parts == 1:
        return [x]
    axis = fl.constant(np.int32(len(static_shape(x)) - 1))
    return list(apply_op("Split", [axis, x], {"num_split": parts}))


def _take(x: Tensor, i: int) -> Tensor:
    """``x[i]`` (the first dim dropped)."""
    return apply_op("GatherV2", [x, index_scalar(i), index_scalar(0)])


def _dim(x: Tensor, k: int) -> Tensor:
    """Dim ``k`` of ``x`` as a 1-element i64 vector (a constant when static)."""
    d = static_shape(x)[k]
    if d is not None:
        return index_const([d])
    shape = apply_op("Shape", [x], {"out_type": fl.int64})
    return apply_op("Slice", [shape, index_const([k]), index_const([1])])


def _shape_of(*parts) -> Tensor:
    """A 1-D i64 shape from ints and 1-element i64 vectors."""
    pieces = [index_const([p]) if isinstance(p, (int, np.integer)) else p for p in parts]
    return apply_op("ConcatV2", [pieces, index_scalar(0)])


def _zeros(like: Tensor, shape: Tensor) -> Tensor:
    return apply_op("Fill", [shape, scalar(0, like)])


def _clip(x: Tensor, clip: Optional[float]) -> Tensor:
    if clip is None:
        return x
    return binary("Minimum", binary("Maximum", x, scalar(-clip, x)), scalar(clip, x))


# --- the node ----------------------------------------------------------------------------
@dataclass
class Direction:
    """One direction's weights and starting state."""
    reverse: bool
    w_rec: List[Tensor]                  # R[d] ([gates*hidden, hidden]); GRU without
                                         # linear_before_reset: its [zr] and [h] rows; each
                                         # transposed ([hidden, rows]) when rec_transposed
    rec_transposed: bool
    rec_bias: Optional[Tensor]           # GRU's Rbh under linear_before_reset (B given)
    peep: Optional[List[Tensor]]         # LSTM's P[d] split into (i, o, f), [hidden] each
    acts: List[Activation]
    h0: Tensor                           # [batch, hidden]
    c0: Optional[Tensor]


class RecurrentNode:
    """An LSTM, GRU or RNN node: its inputs brought to layout 0, its options read."""

    def __init__(self, ctx, cell: Cell):
        self.ctx, self.cell = ctx, cell
        direction = ctx.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ctx.error(f"direction must be forward, reverse or bidirectional, got "
                            f"'{direction}'")
        self.dirs = 2 if direction == "bidirectional" else 1
        self.layout = int(ctx.attr("layout", 0))
        if self.layout not in (0, 1):
            raise ctx.error(f"layout must be 0 or 1, got {self.layout}")
        clip = ctx.attr("clip", None)
        self.clip = None if clip is None else float(clip)
        x, w, r = ctx.input(0), ctx.input(1), ctx.input(2)
        for t, what, rank in ((x, "X", 3), (w, "W", 3), (r, "R", 3)):
            if static_shape(t) is None or len(static_shape(t)) != rank:
                raise ctx.error(f"{what} must have rank {rank}, got shape {static_shape(t)}")
        self.x = self._time_major(x)
        self.hidden = self._hidden_size(r)
        h = self.hidden
        g = cell.gates
        for t, what, want in ((w, "W", [self.dirs, g * h, None]), (r, "R", [self.dirs, g * h, h])):
            for k, (got, expected) in enumerate(zip(static_shape(t), want)):
                if got is not None and expected is not None and got != expected:
                    raise ctx.error(f"{what} must have shape [{self.dirs}, {g * h}, ...] for "
                                    f"direction {direction} and hidden_size {h}; got "
                                    f"{static_shape(t)} (dim {k})")
        self.input_size = static_shape(self.x)[2] or static_shape(w)[2]
        if self.input_size is None:
            raise ctx.error("the input size (last dim of X or W) must be known")
        self.w, self.r = w, r
        self.steps = static_shape(self.x)[0]
        lens = ctx.optional_input(4)
        self.lens = None if lens is None or self._covers_all(lens) else fl.cast(lens, fl.int32)
        self.linear_before_reset = cell is GRU and bool(ctx.attr("linear_before_reset", 0))

    def _time_major(self, t: Tensor) -> Tensor:
        """X (or a state) in layout 0: layout 1 swaps its first two dims."""
        if self.layout == 0:
            return t
        return apply_op("Transpose", [t, index_const([1, 0, 2])])

    def _hidden_size(self, r: Tensor) -> int:
        attr = self.ctx.attr("hidden_size", None)
        known = static_shape(r)[2]
        if attr is not None and known is not None and int(attr) != known:
            raise self.ctx.error(f"hidden_size {attr} differs from R's last dim {known}")
        h = int(attr) if attr is not None else known
        if h is None:
            raise self.ctx.error("needs hidden_size (the attribute, or R's last dim known)")
        return h

    def _covers_all(self, lens: Tensor) -> bool:
        """Whether sequence_lens is known to be seq_length for every sequence (no masking)."""
        value = static_value(lens.output)
        return (value is not None and self.steps is not None
                and bool(np.all(np.asarray(value) >= self.steps)))

    # --- weights ---------------------------------------------------------------------------
    def input_projection(self, wb_merge: Callable[[Tensor], Tensor]) -> Tensor:
        """X W^T (+ bias) for every step and direction in one MatMul:
        ``[steps, batch, dirs*gates*hidden]``. ``wb_merge(b)`` turns one direction's B
        ([2*gates*hidden]) into the bias added here ([gates*hidden])."""
        gh = self.cell.gates * self.hidden
        x2 = apply_op("Reshape", [self.x, index_const([-1, self.input_size])])
        known = static_value(self.w.output)
        if known is not None:                        # stored as W^T: a plain a @ b gemm
            w_t = np.ascontiguousarray(np.asarray(known).reshape(self.dirs * gh, -1).T)
            proj = apply_op("MatMul", [x2, fl.constant(w_t)])
        else:
            w_all = apply_op("Reshape", [self.w, index_const([self.dirs * gh, self.input_size])])
            proj = apply_op("MatMul", [x2, w_all], {"transpose_b": True})
        b = self.ctx.optional_input(3)
        if b is not None:
            biases = [wb_merge(_take(b, d)) for d in range(self.dirs)]
            bias = biases[0] if self.dirs == 1 else apply_op(
                "ConcatV2", [biases, index_scalar(0)])
            proj = apply_op("BiasAdd", [proj, bias])
        shape = _shape_of(_dim(self.x, 0), _dim(self.x, 1), self.dirs * gh)
        return apply_op("Reshape", [proj, shape])

    def state(self, i: int, d: int) -> Tensor:
        """initial_h (i=5) or initial_c (i=6) of direction ``d``: [batch, hidden]."""
        given = self.ctx.optional_input(i)
        if given is None:
            return _zeros(self.x, _shape_of(_dim(self.x, 1), self.hidden))
        return _take(self._time_major(given), d)

    def directions(self, rec_bias: Callable[[int], Optional[Tensor]]) -> List[Direction]:
        acts = _activations(self.ctx, self.cell, self.dirs)
        reverse = self.ctx.attr("direction", "forward") == "reverse"
        p = self.ctx.optional_input(7) if self.cell is LSTM else None
        known = static_value(self.r.output)
        hid = self.hidden
        split_gru = self.cell is GRU and not self.linear_before_reset
        out = []
        for d in range(self.dirs):
            peep = None if p is None else _split_last(_take(p, d), 3)
            if known is not None:                    # stored transposed: plain a @ b gemms
                r_d = np.asarray(known)[d]
                rows = [r_d[:2 * hid], r_d[2 * hid:]] if split_gru else [r_d]
                w_rec = [fl.constant(np.ascontiguousarray(m.T)) for m in rows]
            else:
                r = _take(self.r, d)
                w_rec = [r]
                if split_gru:
                    w_rec = [apply_op("Slice", [r, index_const([0, 0]),
                                                index_const([2 * hid, -1])]),
                             apply_op("Slice", [r, index_const([2 * hid, 0]),
                                                index_const([hid, -1])])]
            out.append(Direction(reverse or d == 1, w_rec, known is not None, rec_bias(d), peep,
                                 acts[d], self.state(5, d),
                                 self.state(6, d) if self.cell is LSTM else None))
        return out


# --- one step of each cell ---------------------------------------------------------------
def _rec_product(dr: Direction, h: Tensor, k: int = 0) -> Tensor:
    """``h @ w_rec[k]^T``, the recurrent product (w_rec[k] stored transposed or not)."""
    if dr.rec_transposed:
        return apply_op("MatMul", [h, dr.w_rec[k]])
    return apply_op("MatMul", [h, dr.w_rec[k]], {"transpose_b": True})


def _lstm_step(node: RecurrentNode, dr: Direction, xw: Tensor, state: List[Tensor]
               ) -> List[Tensor]:
    h, c = state
    gates = binary("AddV2", xw, _rec_product(dr, h))
    i, o, f, g = _split_last(gates, 4)
    f_act, g_act, h_act = dr.acts
    if dr.peep is not None:
        p_i, p_o, p_f = dr.peep
        i = binary("AddV2", i, binary("Mul", p_i, c))
        f = binary("AddV2", f, binary("Mul", p_f, c))
    i = f_act(_clip(i, node.clip))
    if node.ctx.attr("input_forget", 0):
        f = binary("Sub", scalar(1, i), i)
    else:
        f = f_act(_clip(f, node.clip))
    c_new = binary("AddV2", binary("Mul", f, c), binary("Mul", i, g_act(_clip(g, node.clip))))
    if dr.peep is not None:
        o = binary("AddV2", o, binary("Mul", dr.peep[1], c_new))
    o = f_act(_clip(o, node.clip))
    return [binary("Mul", o, h_act(c_new)), c_new]


def _gru_step(node: RecurrentNode, dr: Direction, xw: Tensor, state: List[Tensor]
              ) -> List[Tensor]:
    (h,) = state
    hid = node.hidden
    f_act, g_act = dr.acts
    xw_zr, xw_h = _slice_last(xw, 0, 2 * hid), _slice_last(xw, 2 * hid, hid)
    if node.linear_before_reset:                     # one product for the three gates
        hr = _rec_product(dr, h)
        zr = binary("AddV2", xw_zr, _slice_last(hr, 0, 2 * hid))
        z, r = (f_act(_clip(t, node.clip)) for t in _split_last(zr, 2))
        rec = _slice_last(hr, 2 * hid, hid)
        if dr.rec_bias is not None:
            rec = binary("AddV2", rec, dr.rec_bias)
        cand = binary("AddV2", xw_h, binary("Mul", r, rec))
    else:
        zr = binary("AddV2", xw_zr, _rec_product(dr, h, 0))
        z, r = (f_act(_clip(t, node.clip)) for t in _split_last(zr, 2))
        cand = binary("AddV2", xw_h, _rec_product(dr, binary("Mul", r, h), 1))
    hh = g_act(_clip(cand, node.clip))
    # (1 - z) * hh + z * h, as hh + z * (h - hh)
    return [binary("AddV2", hh, binary("Mul", z, binary("Sub", h, hh)))]


def _rnn_step(node: RecurrentNode, dr: Direction, xw: Tensor, state: List[Tensor]
              ) -> List[Tensor]:
    (h,) = state
    pre = binary("AddV2", xw, _rec_product(dr, h))
    return [dr.acts[0](_clip(pre, node.clip))]


Step = Callable[[RecurrentNode, Direction, Tensor, List[Tensor]], List[Tensor]]


# --- the recurrence ----------------------------------------------------------------------
def _running(node: RecurrentNode, t) -> Tensor:
    """[batch, 1] bool: whether each sequence is still running at time index ``t``."""
    t = fl.cast(t, fl.int32) if isinstance(t, Tensor) else fl.constant(np.int32(t))
    return apply_op("ExpandDims", [binary("Less", t, node.lens), index_scalar(1)])


def _advance(node: RecurrentNode, step: Step, dr: Direction, xw: Tensor, state: List[Tensor],
             t) -> Tuple[List[Tensor], Tensor]:
    """One step at time index ``t``: (the next state, this step's Y row [batch, hidden])."""
    new = step(node, dr, xw, state)
    if node.lens is None:
        return new, new[0]
    running = _running(node, t)
    kept = [fl.where_v2(running, n, s) for n, s in zip(new, state)]
    return kept, fl.where_v2(running, new[0], scalar(0, new[0]))


def _unrolled(node: RecurrentNode, step: Step, dirs: List[Direction], proj: Tensor,
              want_y: bool) -> Tuple[List[Optional[Tensor]], List[List[Tensor]]]:
    """Every step as its own ops: per direction, Y [steps, batch, hidden] and the last state."""
    steps = node.steps
    per_dir = _split_last(proj, node.dirs)
    ys, finals = [], []
    for dr, xw_all in zip(dirs, per_dir):
        xws = list(apply_op("Unpack", [xw_all], {"num": steps, "axis": 0}))
        state = [dr.h0] + ([dr.c0] if dr.c0 is not None else [])
        rows: List[Optional[Tensor]] = [None] * steps
        for t in (range(steps - 1, -1, -1) if dr.reverse else range(steps)):
            state, rows[t] = _advance(node, step, dr, xws[t], state, t)
        ys.append(apply_op("Pack", [rows], {"axis": 0}) if want_y else None)
        finals.append(state)
    return ys, finals


def _looped(node: RecurrentNode, step: Step, dirs: List[Direction], proj: Tensor,
            want_y: bool) -> Tuple[List[Optional[Tensor]], List[List[Tensor]]]:
    """The steps in a while loop over time (all directions in one loop): Y is written one
    row per iteration into a buffer the loop keeps (InplaceUpdate)."""
    per_dir = _split_last(proj, node.dirs)
    shape = apply_op("Shape", [proj], {"out_type": fl.int32})
    steps = apply_op("GatherV2", [shape, fl.constant(np.int32(0)), fl.constant(np.int32(0))])
    y_shape = _shape_of(_dim(node.x, 0), _dim(node.x, 1), node.hidden)
    n_states = node.cell.states
    init: List[Tensor] = [fl.constant(np.int32(0))]
    for dr in dirs:
        init += [dr.h0] + ([dr.c0] if dr.c0 is not None else [])
    if want_y:
        init += [_zeros(proj, y_shape) for _ in dirs]

    def body(t, *vars_):
        out_states, out_ys = [], []
        for k, (dr, xw_all) in enumerate(zip(dirs, per_dir)):
            state = list(vars_[k * n_states:(k + 1) * n_states])
            at = binary("Sub", binary("Sub", steps, t), fl.constant(np.int32(1))) \
                if dr.reverse else t
            xw = apply_op("GatherV2", [xw_all, at, fl.constant(np.int32(0))])
            state, row = _advance(node, step, dr, xw, state, at)
            out_states += state
            if want_y:
                y = vars_[len(dirs) * n_states + k]
                out_ys.append(apply_op("InplaceUpdate", [
                    y, apply_op("Reshape", [at, fl.constant(np.array([1], np.int32))]),
                    apply_op("ExpandDims", [row, index_scalar(0)])]))
        return [binary("AddV2", t, fl.constant(np.int32(1)))] + out_states + out_ys

    result = fl.while_loop(lambda t, *rest: binary("Less", t, steps), body, init,
                           name="recurrence")
    finals = [list(result[1 + k * n_states:1 + (k + 1) * n_states]) for k in range(len(dirs))]
    ys = list(result[1 + len(dirs) * n_states:]) if want_y else [None] * len(dirs)
    return ys, finals


def _recurrence(node: RecurrentNode, step: Step, dirs: List[Direction], proj: Tensor
                ) -> List[Optional[Tensor]]:
    """The node's outputs [Y, Y_h(, Y_c)] in its layout (None where not wanted): the steps
    unrolled for a static length of up to MAX_UNROLLED_STEPS, else a while loop."""
    ctx = node.ctx
    want_y = ctx.output_wanted(0)
    unroll = node.steps is not None and node.steps <= MAX_UNROLLED_STEPS
    ys, finals = (_unrolled if unroll else _looped)(node, step, dirs, proj, want_y)
    outputs: List[Optional[Tensor]] = [None] * (1 + node.cell.states)
    if want_y:
        y = ys[0] if node.dirs == 1 else apply_op("Pack", [ys], {"axis": 1})
        if node.dirs == 1:
            y = apply_op("ExpandDims", [y, index_scalar(1)])
        outputs[0] = y if node.layout == 0 else apply_op("Transpose",
                                                         [y, index_const([2, 0, 1, 3])])
    for k in range(node.cell.states):
        if not ctx.output_wanted(1 + k):
            continue
        last = [f[k] for f in finals]
        if node.lens is not None:            # a sequence of length 0 ends with a zero state
            started = apply_op("ExpandDims", [binary("Greater", node.lens,
                                                     fl.constant(np.int32(0))), index_scalar(1)])
            last = [fl.where_v2(started, s, scalar(0, s)) for s in last]
        stacked = apply_op("Pack", [last], {"axis": 0})
        outputs[1 + k] = stacked if node.layout == 0 else apply_op(
            "Transpose", [stacked, index_const([1, 0, 2])])
    return outputs


# --- the lowerings -----------------------------------------------------------------------
def _sum_halves(b: Tensor) -> Tensor:
    """Wb + Rb of one direction's B ([2*n] -> [n])."""
    wb, rb = _split_last(b, 2)
    return binary("AddV2", wb, rb)


# ONNX's gate blocks are i, o, f, c; BlockLSTMV2 takes i, f, c, o
_ONNX_TO_IFCO = (0, 2, 3, 1)


def _fusable_lstm(node: RecurrentNode) -> bool:
    """Whether the node is what BlockLSTMV2 computes: the default activations, no clip, no
    input_forget, no sequence_lens, W and R known (packed at import), a float type."""
    ctx = node.ctx
    acts = _activations(ctx, LSTM, node.dirs)
    default = [Activation("sigmoid", None, None), Activation("tanh", None, None),
               Activation("tanh", None, None)]
    return (all(a == default for a in acts) and node.clip is None
            and not ctx.attr("input_forget", 0) and node.lens is None
            and static_value(node.w.output) is not None
            and static_value(node.r.output) is not None
            and node.x.dtype in (fl.float32, fl.float64))


def _ifco_columns(m: np.ndarray, hidden: int) -> np.ndarray:
    """[rows, 4*hidden] with ONNX's i, o, f, c column blocks -> i, f, c, o."""
    blocks = [m[:, k * hidden:(k + 1) * hidden] for k in range(4)]
    return np.concatenate([blocks[k] for k in _ONNX_TO_IFCO], axis=1)


def _last_row(seq: Tensor, first: Tensor, steps: Optional[int], length: Tensor) -> Tensor:
    """The state after the last step: ``seq[-1]``, or ``first`` for a sequence of no steps
    (where the length is only known at run time)."""
    if steps is not None:
        return _take(seq, steps - 1)
    with_first = apply_op("ConcatV2", [[apply_op("ExpandDims", [first, index_scalar(0)]), seq],
                                       index_scalar(0)])
    return apply_op("GatherV2", [with_first, length, index_scalar(0)])


def _fused_lstm(node: RecurrentNode) -> List[Optional[Tensor]]:
    """The node as one BlockLSTMV2 per direction (the whole sequence in one C kernel: one
    product for every step's input, then a product with h and the gates per step)."""
    ctx, hid, dtype = node.ctx, node.hidden, node.x.dtype.np
    w_all, r_all = np.asarray(static_value(node.w.output)), np.asarray(static_value(node.r.output))
    b = ctx.optional_input(3)
    p = ctx.optional_input(7)
    reverse = ctx.attr("direction", "forward") == "reverse"
    x = node.x
    if node.steps is not None:
        length = fl.constant(np.int64(node.steps))
    else:
        shape = apply_op("Shape", [x], {"out_type": fl.int64})
        length = apply_op("GatherV2", [shape, index_scalar(0), index_scalar(0)])
    ys, hs, cs = [], [], []
    for d in range(node.dirs):
        backwards = reverse or d == 1
        kernel = np.concatenate([w_all[d].T, r_all[d].T], axis=0)       # [input + hidden, 4h]
        kernel = fl.constant(np.ascontiguousarray(_ifco_columns(kernel, hid)).astype(dtype))
        if b is None:
            bias = fl.constant(np.zeros(4 * hid, dtype))
        else:
            idx = fl.constant(np.concatenate([np.arange(k * hid, (k + 1) * hid)
                                              for k in _ONNX_TO_IFCO]).astype(np.int32))
            bias = apply_op("GatherV2", [_sum_halves(_take(b, d)), idx, index_scalar(0)])
        if p is None:
            peeps = [fl.constant(np.zeros(hid, dtype))] * 3
        else:
            p_i, p_o, p_f = _split_last(_take(p, d), 3)
            peeps = [p_i, p_f, p_o]
        x_d = apply_op("ReverseV2", [x, index_const([0])]) if backwards else x
        h0, c0 = node.state(5, d), node.state(6, d)
        outs = apply_op("BlockLSTMV2", [length, x_d, c0, h0, kernel] + peeps + [bias],
                        {"use_peephole": p is not None, "cell_clip": 0.0})
        cs_seq, h_seq = outs[1], outs[6]
        hs.append(_last_row(h_seq, h0, node.steps, length))
        cs.append(_last_row(cs_seq, c0, node.steps, length))
        ys.append(apply_op("ReverseV2", [h_seq, index_const([0])]) if backwards else h_seq)
    outputs: List[Optional[Tensor]] = [None, None, None]
    if ctx.output_wanted(0):
        y = apply_op("Pack", [ys], {"axis": 1})                          # [steps, dirs, batch, h]
        outputs[0] = y if node.layout == 0 else apply_op("Transpose",
                                                         [y, index_const([2, 0, 1, 3])])
    for k, last in ((1, hs), (2, cs)):
        if ctx.output_wanted(k):
            stacked = apply_op("Pack", [last], {"axis": 0})
            outputs[k] = stacked if node.layout == 0 else apply_op(
                "Transpose", [stacked, index_const([1, 0, 2])])
    return outputs


def lower_lstm(ctx):
    node = RecurrentNode(ctx, LSTM)
    if _fusable_lstm(node):
        return _fused_lstm(node)
    proj = node.input_projection(_sum_halves)
    return _recurrence(node, _lstm_step, node.directions(lambda d: None), proj)


def lower_gru(ctx):
    node = RecurrentNode(ctx, GRU)
    hid = node.hidden
    b = ctx.optional_input(3)
    if not ctx.attr("linear_before_reset", 0):
        return _recurrence(node, _gru_step, node.directions(lambda d: None),
                           node.input_projection(_sum_halves))

    def wb_merge(bd):                 # Wb[zrh] + Rb[zr]: Rbh is added inside r * (.)
        wb, rb = _split_last(bd, 2)
        pad = fl.constant(np.array([[0, hid]], np.int64), dtype=fl.int64)
        return binary("AddV2", wb, apply_op("Pad", [_slice_last(rb, 0, 2 * hid), pad]))

    def rec_bias(d):
        return None if b is None else _slice_last(_take(b, d), 5 * hid, hid)
    return _recurrence(node, _gru_step, node.directions(rec_bias),
                       node.input_projection(wb_merge))


def lower_rnn(ctx):
    node = RecurrentNode(ctx, RNN)
    proj = node.input_projection(_sum_halves)
    return _recurrence(node, _rnn_step, node.directions(lambda d: None), proj)


LOWERINGS = {
    "LSTM": [(7, None, lower_lstm)],
    "GRU": [(7, None, lower_gru)],
    "RNN": [(7, None, lower_rnn)],
}
