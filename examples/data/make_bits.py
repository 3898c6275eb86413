"""Writes ``bits.npz`` (next to this script): random binary sequences of lengths 5 to 20 and
how many ones each holds, for ``examples/rnn_while.flow`` (a recurrent network that reads each
sequence to its end with a ``while`` loop).

    python3 examples/data/make_bits.py

The npz holds, in the layout ``flowc train`` reads (docs/training.md):

- ``x``: float32 [N, 20], the bits, zero past each sequence's length;
- ``length``: int32 [N], the sequence's length, uniform in 5..20;
- ``y``: int32 [N], the number of ones among the first ``length`` bits (0..20);
- ``is_test``: bool [N], the held-out fifth.

Everything is drawn from ``numpy.random.default_rng(SEED)``, so the file is the same on every
machine and numpy version that keeps the PCG64 stream.
"""
from __future__ import annotations

import os

import numpy as np

SEED = 20160
EXAMPLES = 6000
MIN_LENGTH, MAX_LENGTH = 5, 20


def make(seed: int = SEED, examples: int = EXAMPLES) -> dict:
    rng = np.random.default_rng(seed)
    length = rng.integers(MIN_LENGTH, MAX_LENGTH + 1, size=examples).astype(np.int32)
    bits = rng.integers(0, 2, size=(examples, MAX_LENGTH)).astype(np.float32)
    bits[np.arange(MAX_LENGTH)[None, :] >= length[:, None]] = 0.0
    is_test = np.zeros(examples, dtype=bool)
    is_test[rng.permutation(examples)[: examples // 5]] = True
    return {"x": bits, "length": length, "y": bits.sum(axis=1).astype(np.int32),
            "is_test": is_test}


def main() -> None:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bits.npz")
    np.savez_compressed(path, **make())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
