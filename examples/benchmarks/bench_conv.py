"""A 3x3 SAME convolution layer (NHWC, float32) and its two gradients: flowc's compiled C
(im2col + OpenBLAS sgemm) beside numpy im2col + matmul and, when installed, PyTorch.

    python3 examples/benchmarks/bench_conv.py [--repeats N] [--batch B] [--size S]
                                              [--channels C] [--filters F] [--threads T]

Every framework computes the same output from the same input and filter; results are checked
against numpy (forward) or flowc's numpy reference interpreter (gradients) before timing.
"""
from __future__ import annotations

import argparse
from typing import Callable, Dict, Tuple

import numpy as np

from bench_common import (Row, add_threads_argument, apply_threads, environment_line,
                          median_seconds, optional_import, print_table)

import dsl as fl  # noqa: E402


def numpy_conv(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """SAME, stride 1 conv by im2col: a strided view of the padded input, then one matmul."""
    kh, kw, c, o = f.shape
    n, h, w, _ = x.shape
    xp = np.pad(x, ((0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2), (0, 0)))
    s = xp.strides
    cols = np.lib.stride_tricks.as_strided(xp, (n, h, w, kh, kw, c), (s[0], s[1], s[2], s[1], s[2], s[3]))
    return (cols.reshape(n * h * w, kh * kw * c) @ f.reshape(-1, o)).reshape(n, h, w, o)


def flowc_steps(backend: str, x: np.ndarray, f: np.ndarray):
    """(forward step, gradient step) as compiled steps of one graph."""
    g = fl.Graph()
    with g.as_default():
        xt = fl.placeholder(fl.float32, [None, *x.shape[1:]], name="x")
        ft = fl.placeholder(fl.float32, f.shape, name="f")
        y = fl.nn.conv2d(xt, ft, 1, "SAME")
        dy = fl.placeholder(fl.float32, [None, *x.shape[1:3], f.shape[3]], name="dy")
        dx = fl.nn.conv2d_backprop_input(list(x.shape), ft, dy, 1, "SAME")
        df = fl.nn.conv2d_backprop_filter(xt, list(f.shape), dy, 1, "SAME")
    sess = fl.Session(graph=g, backend=backend)
    return (lambda xv: sess.run(y, {xt: xv, ft: f}),
            lambda dyv: sess.run([dx, df], {xt: x, ft: f, dy: dyv}))


def torch_steps(torch, x: np.ndarray, f: np.ndarray):
    """PyTorch's conv2d on NCHW copies made once, outside the timing (its native layout)."""
    xt = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()
    ft = torch.from_numpy(f).permute(3, 2, 0, 1).contiguous()
    pad = (f.shape[0] // 2, f.shape[1] // 2)

    def forward(_):
        with torch.no_grad():
            return torch.nn.functional.conv2d(xt, ft, padding=pad).permute(0, 2, 3, 1).numpy()

    def backward(dyv):
        dyt = torch.from_numpy(dyv).permute(0, 3, 1, 2).contiguous()
        dx = torch.nn.grad.conv2d_input(xt.shape, ft, dyt, padding=pad)
        df = torch.nn.grad.conv2d_weight(xt, ft.shape, dyt, padding=pad)
        return [dx.permute(0, 2, 3, 1).numpy(), df.permute(2, 3, 1, 0).numpy()]
    return forward, backward


def _same(got, want) -> bool:
    got = got if isinstance(got, list) else [got]
    want = want if isinstance(want, list) else [want]
    return all(np.allclose(g, w, rtol=1e-3, atol=1e-3) for g, w in zip(got, want))


def _table(title: str, steps: Dict[str, Tuple[Callable, int]], arg, want, baseline: str,
           flops: float) -> None:
    rows = []
    for name, (step, repeats) in steps.items():
        if not _same(step(arg), want):              # the first call also compiles flowc's step
            raise SystemExit(f"{name} disagrees with the baseline; not timing it")
        rows.append(Row(name, median_seconds(lambda: step(arg), repeats)))
    print_table(title, rows, baseline=baseline, unit="ms", work=flops / 1e9, work_unit="GFLOP")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per framework")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=32, help="input height and width")
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--filters", type=int, default=64)
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)

    torch = optional_import("torch")
    if torch is not None and args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, args.size, args.size, args.channels)).astype(np.float32)
    f = rng.standard_normal((3, 3, args.channels, args.filters)).astype(np.float32) * 0.1
    dy = rng.standard_normal((args.batch, args.size, args.size, args.filters)).astype(np.float32)
    flops = 2.0 * args.batch * args.size * args.size * 9 * args.channels * args.filters
    c_fwd, c_bwd = flowc_steps("c", x, f)
    i_fwd, i_bwd = flowc_steps("interpreter", x, f)
    few = max(args.repeats // 4, 3)
    fwd = {"flowc compiled C (Session.run)": (c_fwd, args.repeats),
           "flowc interpreter (numpy reference)": (i_fwd, few),
           "numpy im2col + matmul": (lambda xv: numpy_conv(xv, f), args.repeats)}
    bwd = {"flowc compiled C (Session.run)": (c_bwd, args.repeats),
           "flowc interpreter (numpy reference)": (i_bwd, few)}
    if torch is not None:
        t_fwd, t_bwd = torch_steps(torch, x, f)
        fwd["PyTorch conv2d (NCHW, no_grad)"] = (t_fwd, args.repeats)
        bwd["PyTorch conv2d_input + conv2d_weight"] = (t_bwd, args.repeats)

    print(environment_line(torch, None))
    shape = f"{args.batch}x{args.size}x{args.size}x{args.channels} * 3x3x{args.channels}x{args.filters}"
    _table(f"Conv2D forward {shape}, SAME, stride 1 (median of {args.repeats} steps)", fwd, x,
           numpy_conv(x, f), "numpy im2col + matmul", flops)
    print()
    _table(f"Conv2D gradients (input and filter, one step) {shape}", bwd, dy, i_bwd(dy),
           "flowc interpreter (numpy reference)", 2 * flops)


if __name__ == "__main__":
    main()
