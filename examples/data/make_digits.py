"""Writes ``digits.npz`` (next to this script): the 8x8 handwritten digits of the UCI "Optical
Recognition of Handwritten Digits" data set (E. Alpaydin and C. Kaynak, 1998; CC BY 4.0), the
1,797-image copy that scikit-learn ships as ``sklearn/datasets/data/digits.csv.gz``.

flowc does not depend on scikit-learn: this script reads that CSV out of scikit-learn's wheel
(a zip file) once, and the npz it writes is committed. To reproduce it:

    python3 -m pip download scikit-learn --no-deps -d /tmp/skl
    python3 examples/data/make_digits.py /tmp/skl/scikit_learn-*.whl

(the argument may also be the extracted ``digits.csv.gz`` or ``digits.csv``).

The npz holds, in the layout ``flowc train`` reads (docs/training.md):

- ``x``: float32 [1797, 64], the pixels (0..16, row-major 8x8) divided by 16, so in [0, 1];
- ``y``: int32 [1797], the digit (0..9);
- ``is_test``: bool [1797], the held-out split: 20% of each class (rounded: 35 to 37 images
  per digit, 359 in all), chosen by a permutation seeded with ``SEED``; the other 1,438 images
  are for training.
"""
from __future__ import annotations

import argparse
import gzip
import io
import os
import sys
import zipfile

import numpy as np

CSV_IN_WHEEL = "sklearn/datasets/data/digits.csv.gz"
SEED = 1998
HELD_OUT = 0.2
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits.npz")


def read_csv_text(path: str) -> str:
    """The CSV text from a scikit-learn wheel, a ``digits.csv.gz`` or a ``digits.csv``."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as wheel:
            return gzip.decompress(wheel.read(CSV_IN_WHEEL)).decode("ascii")
    with open(path, "rb") as f:
        data = f.read()
    return (gzip.decompress(data) if path.endswith(".gz") else data).decode("ascii")


def parse(text: str) -> tuple:
    """(pixels as int [N, 64], labels as int [N]) from rows of 64 pixels and a label."""
    table = np.loadtxt(io.StringIO(text), delimiter=",", dtype=np.int64)
    if table.ndim != 2 or table.shape[1] != 65:
        raise ValueError(f"expected rows of 65 values (64 pixels and a label), got {table.shape}")
    pixels, labels = table[:, :64], table[:, 64]
    if pixels.min() < 0 or pixels.max() > 16 or labels.min() < 0 or labels.max() > 9:
        raise ValueError("pixels must be in 0..16 and labels in 0..9")
    return pixels, labels


def held_out_mask(labels: np.ndarray, fraction: float = HELD_OUT, seed: int = SEED) -> np.ndarray:
    """A stratified split: ``round(fraction * count)`` images of each class, seeded."""
    rng = np.random.default_rng(seed)
    mask = np.zeros(len(labels), bool)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        mask[rng.permutation(idx)[:int(round(fraction * len(idx)))]] = True
    return mask


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="scikit-learn wheel, digits.csv.gz or digits.csv")
    parser.add_argument("-o", "--output", default=OUT, help=f"npz to write (default {OUT})")
    args = parser.parse_args(argv)
    pixels, labels = parse(read_csv_text(args.source))
    is_test = held_out_mask(labels)
    np.savez_compressed(args.output, x=(pixels / 16.0).astype(np.float32),
                        y=labels.astype(np.int32), is_test=is_test)
    print(f"wrote {args.output}: {len(labels)} images, {int(is_test.sum())} held out, "
          f"{int((~is_test).sum())} for training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
