"""TensorFlow's fused LSTM ops (``core/ops/rnn_ops.cc``): ``LSTMBlockCell`` (one step),
``BlockLSTM`` and ``BlockLSTMV2`` (a whole sequence in one op) and their gradients
``LSTMBlockCellGrad``, ``BlockLSTMGrad`` and ``BlockLSTMGradV2``, with TensorFlow's
signatures, attrs and defaults, so TF1 graphs written with ``tf.contrib.rnn.LSTMBlockCell``
or ``LSTMBlockFusedCell`` import and run.

One step, with ``xh = [x, h_prev]`` and ``gates = xh @ w + b`` ([batch, 4 * cell])::

    i  = sigmoid(gate_i + cs_prev * wci)             (peephole terms only with use_peephole)
    ci = tanh(gate_c)
    f  = sigmoid(gate_f + forget_bias + cs_prev * wcf)
    cs = clip(i * ci + f * cs_prev, cell_clip)       (clipped to [-cell_clip, cell_clip]
    co = tanh(cs)                                     only when cell_clip > 0)
    o  = sigmoid(gate_o + cs * wco)
    h  = o * co

The gate blocks of ``w`` and ``b`` are in TensorFlow's order per op: ``LSTMBlockCell`` and
``BlockLSTM`` (and their gradients) take ``i, c, f, o`` (TensorFlow's ``ICFO``, the order of
``tf.nn.rnn_cell.LSTMCell``'s ``i, j, f, o``); ``BlockLSTMV2`` and ``BlockLSTMGradV2`` take
``i, f, c, o`` (``IFCO``, Keras's order) and have no ``forget_bias`` (it is 0).
``cell_clip`` defaults to 3.0 for V1 ops and 0.0 (off) for V2; any value <= 0 (TF1's python
passes -1) means no clipping.

``BlockLSTM`` runs the step over ``x`` [time, batch, input] for ``t < seq_len_max`` (an int64
scalar in [0, time], else an error) and writes ``[time, batch, cell]`` outputs; at and past
``seq_len_max`` every output is 0 (TensorFlow zeroes ``cs`` and ``h`` there and leaves the
others unset, flowc writes 0 in all seven). ``BlockLSTMGrad`` walks the steps back as
TensorFlow's kernel does: the gradient reaching ``cs``/``h`` of step ``t`` is the op's
``cs_grad[t]``/``h_grad[t]`` plus what step ``t + 1`` sends back; like TensorFlow it does not
differentiate the cell clip. ``x_grad`` is 0 at and past ``seq_len_max``.

``LSTMBlockCellGrad`` returns ``cs_prev_grad``, ``dicfo`` (the gradient of the gate
pre-activations, in the op's gate order) and the peephole gradients (0 without
use_peephole); the matmul pieces (``x``, ``h_prev``, ``w``, ``b``) are the python gradient's
(``dsl/grad/lstm_block_grad.py``), as in TensorFlow.

The C lowering is ``compiler/codegen/c_ops/lstm_block.py``.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op

# gate layout per op: where the c and f blocks start, in units of the cell size
ICFO = (1, 2)
IFCO = (2, 1)
LAYOUT = {"LSTMBlockCell": ICFO, "LSTMBlockCellGrad": ICFO, "BlockLSTM": ICFO,
          "BlockLSTMGrad": ICFO, "BlockLSTMV2": IFCO, "BlockLSTMGradV2": IFCO}

_CELL_INPUTS = ["x: T", "cs_prev: T", "h_prev: T", "w: T", "wci: T", "wcf: T", "wco: T",
                "b: T"]
_STATES = ["i: T", "cs: T", "f: T", "o: T", "ci: T", "co: T"]
_OUTPUTS = _STATES + ["h: T"]
_T = "T: {float}"


# --- shapes -------------------------------------------------------------------------------------
def _merge(ctx, dims: Sequence[Optional[int]], what: str) -> Optional[int]:
    """The one known value among ``dims`` (None when none is known); unequal known dims are
    an error naming ``what``."""
    known = sorted({d for d in dims if d is not None})
    if len(known) > 1:
        raise ctx.error(f"{what} disagree: {known}")
    return known[0] if known else None


def _ranked(ctx, i: int, rank: int, name: str) -> List[Optional[int]]:
    s = ctx.input_shape(i)
    if s is None:
        return [None] * rank
    if len(s) != rank:
        raise ctx.error(f"{name} must be rank {rank}, got shape {list(s)}")
    return list(s)


def _quarter(ctx, d: Optional[int], name: str) -> Optional[int]:
    if d is None:
        return None
    if d % 4:
        raise ctx.error(f"{name} has {d} columns, not a multiple of 4 (four gates)")
    return d // 4


def _sizes(ctx, first: int, seq: bool):
    """(time, batch, input, cell) from the inputs x, cs_prev, h_prev, w, wci, wcf, wco, b
    starting at input ``first``; checks that they agree."""
    x = _ranked(ctx, first, 3 if seq else 2, "x")
    cs, h = _ranked(ctx, first + 1, 2, "cs_prev"), _ranked(ctx, first + 2, 2, "h_prev")
    w = _ranked(ctx, first + 3, 2, "w")
    peeps = [_ranked(ctx, first + k, 1, n)[0] for k, n in ((4, "wci"), (5, "wcf"), (6, "wco"))]
    b = _ranked(ctx, first + 7, 1, "b")
    time = x[0] if seq else None
    batch = _merge(ctx, [x[-2], cs[0], h[0]], "the batch sizes of x, cs_prev and h_prev")
    cell = _merge(ctx, [cs[1], h[1], _quarter(ctx, w[1], "w"), _quarter(ctx, b[0], "b")]
                  + peeps, "the cell sizes of cs_prev, h_prev, w / 4, b / 4 and the peepholes")
    inp = x[-1]
    if inp is not None and cell is not None and w[0] is not None and w[0] != inp + cell:
        raise ctx.error(f"w must have input_size + cell_size = {inp + cell} rows, got {w[0]}")
    return time, batch, inp, cell


def _cell_shape(ctx) -> list:
    _, batch, _, cell = _sizes(ctx, 0, seq=False)
    return [(batch, cell)] * 7


def _block_shape(ctx) -> list:
    s = ctx.input_shape(0)
    if s is not None and len(s) != 0:
        raise ctx.error(f"seq_len_max must be a scalar, got shape {list(s)}")
    time, batch, _, cell = _sizes(ctx, 1, seq=True)
    return [(time, batch, cell)] * 7


def _cell_grad_shape(ctx) -> list:
    _, batch, _, cell = _sizes(ctx, 0, seq=False)
    for k, name in enumerate(["i", "cs", "f", "o", "ci", "co", "cs_grad", "h_grad"]):
        s = _ranked(ctx, 8 + k, 2, name)
        batch = _merge(ctx, [batch, s[0]], f"the batch sizes of x and {name}")
        cell = _merge(ctx, [cell, s[1]], f"the cell sizes of cs_prev and {name}")
    return [(batch, cell), (batch, None if cell is None else 4 * cell), (cell,), (cell,), (cell,)]


def _block_grad_shape(ctx) -> list:
    time, batch, inp, cell = _sizes(ctx, 1, seq=True)
    for k, name in enumerate(["i", "cs", "f", "o", "ci", "co", "h", "cs_grad", "h_grad"]):
        s = _ranked(ctx, 9 + k, 3, name)
        time = _merge(ctx, [time, s[0]], f"the time lengths of x and {name}")
        batch = _merge(ctx, [batch, s[1]], f"the batch sizes of x and {name}")
        cell = _merge(ctx, [cell, s[2]], f"the cell sizes of cs_prev and {name}")
    w = ctx.input_shape(4)
    four = None if cell is None else 4 * cell
    rows = None if inp is None or cell is None else inp + cell
    return [(time, batch, inp), (batch, cell), (batch, cell),
            (rows if w is None or w[0] is None else w[0], four), (cell,), (cell,), (cell,),
            (four,)]


# --- the reference kernels --------------------------------------------------------------------
def _sigmoid(v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-v))).astype(v.dtype)


def _check_sizes(ctx, x, cs_prev, h_prev, w, wci, wcf, wco, b) -> int:
    """The cell size, after the run-time checks of TensorFlow's kernel (errors in its words,
    as the C kernel words them)."""
    batch, inp, cell = x.shape[-2], x.shape[-1], cs_prev.shape[1]
    checks = [(cs_prev.shape[0], batch, "cs_prev.dims(0) != batch_size"),
              (h_prev.shape[0], batch, "h_prev.dims(0) != batch_size"),
              (h_prev.shape[1], cell, "h_prev.dims(1) != cell_size"),
              (w.shape[0], inp + cell, "w.dim_size(0) != input_size + cell_size"),
              (w.shape[1], 4 * cell, "w.dim_size(1) != cell_size * 4"),
              (b.shape[0], 4 * cell, "b.dim_size(0) != cell_size * 4")]
    checks += [(p.shape[0], cell, f"{name}.dim_size(0) != cell_size")
               for name, p in (("wci", wci), ("wcf", wcf), ("wco", wco))]
    for got, want, what in checks:
        if got != want:
            raise ExecutionError(f"{what}: {got} != {want}", ctx.node)
    return cell


def _gates(layout, cell: int, gates: np.ndarray):
    """The i, c, f, o blocks of ``gates`` [batch, 4 * cell] in ``layout``."""
    c_at, f_at = layout[0] * cell, layout[1] * cell
    return (gates[:, :cell], gates[:, c_at:c_at + cell], gates[:, f_at:f_at + cell],
            gates[:, 3 * cell:])


def cell_forward(x, cs_prev, h_prev, w, wci, wcf, wco, b, *, forget_bias: float,
                 cell_clip: float, use_peephole: bool, layout) -> tuple:
    """One LSTM step in the inputs' dtype: (i, cs, f, o, ci, co, h)."""
    dt = x.dtype
    cell = cs_prev.shape[1]
    gates = np.concatenate([x, h_prev], axis=1) @ w + b
    gi, gc, gf, go = _gates(layout, cell, gates)
    if use_peephole:
        gi = gi + cs_prev * wci
    i = _sigmoid(gi)
    ci = np.tanh(gc)
    gf = gf + dt.type(forget_bias)
    if use_peephole:
        gf = gf + cs_prev * wcf
    f = _sigmoid(gf)
    cs = i * ci + f * cs_prev
    if cell_clip > 0:
        cs = np.clip(cs, -dt.type(cell_clip), dt.type(cell_clip))
    co = np.tanh(cs)
    if use_peephole:
        go = go + cs * wco
    o = _sigmoid(go)
    return i, cs, f, o, ci, co, o * co


def cell_backward(cs_prev, wci, wcf, wco, i, cs, f, o, ci, co, cs_grad, h_grad, *,
                  use_peephole: bool, layout) -> tuple:
    """One step back: (cs_prev_grad, dgates, wci_grad, wcf_grad, wco_grad)."""
    one = i.dtype.type(1)
    d_o = o * (one - o) * h_grad * co
    dcs = (one - co * co) * h_grad * o + cs_grad
    if use_peephole:
        dcs = dcs + d_o * wco
    dci = (one - ci * ci) * dcs * i
    d_f = f * (one - f) * dcs * cs_prev
    d_i = i * (one - i) * dcs * ci
    cell = cs_prev.shape[1]
    dgates = np.empty((i.shape[0], 4 * cell), i.dtype)
    for block, at in ((d_i, 0), (dci, layout[0]), (d_f, layout[1]), (d_o, 3)):
        dgates[:, at * cell:(at + 1) * cell] = block
    cs_prev_grad = dcs * f
    zeros = np.zeros(cell, i.dtype)
    if not use_peephole:
        return cs_prev_grad, dgates, zeros, zeros.copy(), zeros.copy()
    cs_prev_grad = cs_prev_grad + d_i * wci + d_f * wcf
    return (cs_prev_grad, dgates, (d_i * cs_prev).sum(axis=0), (d_f * cs_prev).sum(axis=0),
            (d_o * cs).sum(axis=0))


def _seq_len(ctx, seq_len_max, time: int) -> int:
    v = np.asarray(seq_len_max)
    if v.ndim != 0:
        raise ExecutionError(f"seq_len_max must be a scalar, got shape {list(v.shape)}",
                             ctx.node)
    n = int(v)
    if not 0 <= n <= time:
        raise ExecutionError(f"seq_len_max must be between 0 and {time} but is {n}", ctx.node)
    return n


def _cell_ref(ctx, x, cs_prev, h_prev, w, wci, wcf, wco, b):
    _check_sizes(ctx, x, cs_prev, h_prev, w, wci, wcf, wco, b)
    return cell_forward(x, cs_prev, h_prev, w, wci, wcf, wco, b,
                        forget_bias=float(ctx.attrs["forget_bias"]),
                        cell_clip=float(ctx.attrs["cell_clip"]),
                        use_peephole=bool(ctx.attrs["use_peephole"]),
                        layout=LAYOUT[ctx.node.op])


def _block_ref(ctx, seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b):
    cell = _check_sizes(ctx, x, cs_prev, h_prev, w, wci, wcf, wco, b)
    time, batch = x.shape[0], x.shape[1]
    steps = _seq_len(ctx, seq_len_max, time)
    outs = [np.zeros((time, batch, cell), x.dtype) for _ in range(7)]
    cs, h = cs_prev, h_prev
    for t in range(steps):
        step = cell_forward(x[t], cs, h, w, wci, wcf, wco, b,
                            forget_bias=float(ctx.attrs.get("forget_bias", 0.0)),
                            cell_clip=float(ctx.attrs["cell_clip"]),
                            use_peephole=bool(ctx.attrs["use_peephole"]),
                            layout=LAYOUT[ctx.node.op])
        for out, v in zip(outs, step):
            out[t] = v
        cs, h = step[1], step[6]
    return tuple(outs)


def _check_like(ctx, names: Sequence[str], values, shape: tuple) -> None:
    for name, v in zip(names, values):
        for d, (got, want) in enumerate(zip(v.shape, shape)):
            if got != want:
                raise ExecutionError(f"{name}.dims({d}) does not match: {got} != {want}",
                                     ctx.node)


def _cell_grad_ref(ctx, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co,
                   cs_grad, h_grad):
    _check_sizes(ctx, x, cs_prev, h_prev, w, wci, wcf, wco, b)
    _check_like(ctx, ["i", "cs", "f", "o", "ci", "co", "cs_grad", "h_grad"],
                [i, cs, f, o, ci, co, cs_grad, h_grad], cs_prev.shape)
    return cell_backward(cs_prev, wci, wcf, wco, i, cs, f, o, ci, co, cs_grad, h_grad,
                         use_peephole=bool(ctx.attrs["use_peephole"]),
                         layout=LAYOUT[ctx.node.op])


def _block_grad_ref(ctx, seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o,
                    ci, co, h, cs_grad, h_grad):
    cell = _check_sizes(ctx, x, cs_prev, h_prev, w, wci, wcf, wco, b)
    time, batch, inp = x.shape
    _check_like(ctx, ["i", "cs", "f", "o", "ci", "co", "h", "cs_grad", "h_grad"],
                [i, cs, f, o, ci, co, h, cs_grad, h_grad], (time, batch, cell))
    steps = _seq_len(ctx, seq_len_max, time)
    peephole, layout = bool(ctx.attrs["use_peephole"]), LAYOUT[ctx.node.op]
    dt = x.dtype
    x_grad = np.zeros(x.shape, dt)
    cs_prev_grad = np.zeros(cs_prev.shape, dt)
    h_prev_grad = np.zeros(h_prev.shape, dt)
    w_grad, b_grad = np.zeros(w.shape, dt), np.zeros(b.shape, dt)
    peep_grads = [np.zeros(cell, dt) for _ in range(3)]
    for t in range(steps - 1, -1, -1):
        c_before = cs_prev if t == 0 else cs[t - 1]
        h_before = h_prev if t == 0 else h[t - 1]
        step = cell_backward(c_before, wci, wcf, wco, i[t], cs[t], f[t], o[t], ci[t], co[t],
                             cs_prev_grad + cs_grad[t], h_prev_grad + h_grad[t],
                             use_peephole=peephole, layout=layout)
        cs_prev_grad, dgates = step[0], step[1]
        xh_grad = dgates @ w.T
        x_grad[t] = xh_grad[:, :inp]
        h_prev_grad = xh_grad[:, inp:]
        w_grad += np.concatenate([x[t], h_before], axis=1).T @ dgates
        b_grad += dgates.sum(axis=0)
        if peephole:
            for acc, g in zip(peep_grads, step[2:]):
                acc += g
    return (x_grad, cs_prev_grad, h_prev_grad, w_grad, *peep_grads, b_grad)


# --- registrations ------------------------------------------------------------------------------
register_op("LSTMBlockCell", inputs=_CELL_INPUTS, outputs=_OUTPUTS,
            attrs=["forget_bias: float = 1.0", "cell_clip: float = 3.0",
                   "use_peephole: bool = false", _T],
            shape=_cell_shape, kernel=_cell_ref, group="other",
            doc="One LSTM step (gates i, c, f, o): outputs i, cs, f, o, ci, co, h [batch, "
                "cell].")

register_op("LSTMBlockCellGrad",
            inputs=_CELL_INPUTS + _STATES + ["cs_grad: T", "h_grad: T"],
            outputs=["cs_prev_grad: T", "dicfo: T", "wci_grad: T", "wcf_grad: T",
                     "wco_grad: T"],
            attrs=["use_peephole: bool", _T], shape=_cell_grad_shape, kernel=_cell_grad_ref,
            group="other",
            doc="The gradient of one LSTMBlockCell step: cs_prev_grad, the gate gradients "
                "dicfo and the peephole gradients.")

for _name, _attrs in (("BlockLSTM", ["forget_bias: float = 1.0", "cell_clip: float = 3.0"]),
                      ("BlockLSTMV2", ["cell_clip: float = 0.0"])):
    register_op(_name, inputs=["seq_len_max: i64", "x: T"] + _CELL_INPUTS[1:],
                outputs=_OUTPUTS, attrs=_attrs + ["use_peephole: bool = false", _T],
                shape=_block_shape, kernel=_block_ref, group="other",
                doc="An LSTM over x [time, batch, input] in one op (gates "
                    f"{'i, c, f, o' if LAYOUT[_name] == ICFO else 'i, f, c, o'}): outputs i, "
                    "cs, f, o, ci, co, h [time, batch, cell], 0 from seq_len_max on.")

for _name, _forward in (("BlockLSTMGrad", "BlockLSTM"), ("BlockLSTMGradV2", "BlockLSTMV2")):
    register_op(_name,
                inputs=["seq_len_max: i64", "x: T"] + _CELL_INPUTS[1:] + _OUTPUTS
                + ["cs_grad: T", "h_grad: T"],
                outputs=["x_grad: T", "cs_prev_grad: T", "h_prev_grad: T", "w_grad: T",
                         "wci_grad: T", "wcf_grad: T", "wco_grad: T", "b_grad: T"],
                attrs=["use_peephole: bool", _T], shape=_block_grad_shape,
                kernel=_block_grad_ref, group="other",
                doc=f"The gradient of {_forward} with respect to all its inputs but "
                    "seq_len_max, back through the steps.")
