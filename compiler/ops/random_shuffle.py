"""RandomShuffle: the rows (dim 0) of a tensor in a random order, TensorFlow's CPU algorithm on
its Philox stream (``compiler/ops/random.py``), so with the same (seed, seed2) a run gives
TF's order: a run reserves ``(n - 1 + 3) // 4`` Philox blocks of the node's stream
(``ReserveSamples32(n - 1)``), reads their 32-bit words one by one, and swaps row ``i`` with row
``i + word_i % (n - i)`` for ``i`` in ``0 .. n-2`` (TF's ``RandomShuffle``). A tensor with at
most one row (or one element) comes back as it is and draws nothing. Its C lowering is
``compiler/codegen/c_ops/random_shuffle.py``.

The op is ``stateful=True`` so CSE and constant folding never merge or fold it."""
from __future__ import annotations

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ops.random import philox


def shuffle_blocks(rows: int) -> int:
    """Philox blocks a run over ``rows`` rows reserves (0 when nothing moves)."""
    return (rows - 1 + 3) // 4 if rows > 1 else 0


def shuffle_order(rows: int, seed: int, seed2: int, offset: int) -> np.ndarray:
    """The order of the rows: position i of the result holds row order[i]."""
    order = np.arange(rows, dtype=np.int64)
    if rows <= 1:
        return order
    words = philox(np.arange(shuffle_blocks(rows)), seed, seed2, offset).reshape(-1)
    for i in range(rows - 1):
        j = i + int(words[i]) % (rows - i)
        order[i], order[j] = order[j], order[i]
    return order


def _shuffle_ref(ctx, value: np.ndarray) -> np.ndarray:
    if value.ndim == 0 or value.size <= 1 or value.shape[0] <= 1:
        return value.copy()
    rows = value.shape[0]
    offset = 0
    state = ctx.state
    if state is not None and hasattr(state, "reserve"):
        offset = state.reserve(ctx.node.name, shuffle_blocks(rows))
    return value[shuffle_order(rows, ctx.attrs["seed"], ctx.attrs["seed2"], offset)]


register_op("RandomShuffle", inputs=["value: T"], outputs=["output: T"],
            attrs=["seed: int = 0", "seed2: int = 0", "T: {all}"],
            shape=lambda ctx: [ctx.input_shape(0)], kernel=_shuffle_ref, group="other",
            stateful=True, doc="The rows of value (dim 0) in a random order (TF's algorithm).")
