"""Compare two `flowc train --losses` files (e.g. a GPU run and a CPU run of one model):
exit 0 when every step's loss agrees within f32 tolerance and the final held-out accuracy
lines agree, else 1 with the first step that differs.

    python3 .ci/compare_losses.py GPU.tsv CPU.tsv [--rtol R] [--out-a A.txt --out-b B.txt]

The early steps must agree to --rtol (default 1e-3); later steps, where rounding differences
of two devices' kernels compound, to --late-rtol (default 2e-2) after --early steps.
"""
import argparse
import re
import sys

import numpy as np


def read_losses(path):
    steps, values = [], []
    for line in open(path, encoding="utf-8"):
        step, value = line.split("\t")
        steps.append(int(step))
        values.append(float(value))
    return np.array(steps), np.array(values)


def accuracy(path):
    """The accuracy of the last summary line of a saved `flowc train` stdout."""
    found = re.findall(r"accuracy ([0-9.]+)", open(path, encoding="utf-8").read())
    return float(found[-1]) if found else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--early", type=int, default=50)
    ap.add_argument("--late-rtol", type=float, default=2e-2)
    ap.add_argument("--out-a")
    ap.add_argument("--out-b")
    args = ap.parse_args()
    sa, la = read_losses(args.a)
    sb, lb = read_losses(args.b)
    if len(sa) != len(sb) or (sa != sb).any():
        print(f"the runs have different steps: {len(sa)} and {len(sb)}")
        return 1
    rel = np.abs(la - lb) / np.maximum(np.abs(lb), 1e-12)
    tol = np.where(sa <= args.early, args.rtol, args.late_rtol)
    print(f"{len(sa)} steps; largest relative difference {rel[:args.early].max():.2e} in the "
          f"first {args.early}, {rel.max():.2e} over all; final losses {la[-1]:.6f} / {lb[-1]:.6f}")
    bad = np.nonzero(rel > tol)[0]
    status = 0
    if bad.size:
        k = bad[0]
        print(f"step {sa[k]} differs: {la[k]!r} vs {lb[k]!r} (relative {rel[k]:.2e} > {tol[k]})")
        status = 1
    if args.out_a and args.out_b:
        acc_a, acc_b = accuracy(args.out_a), accuracy(args.out_b)
        print(f"held-out accuracy {acc_a} / {acc_b}")
        if acc_a is None or acc_b is None or abs(acc_a - acc_b) > 0.01:
            print("the accuracies differ by more than 0.01")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
