"""A 3x3 SAME convolution layer (NHWC, float32) and its two gradients: flowc's compiled C
(im2col + OpenBLAS sgemm) beside numpy im2col + matmul and, when installed, PyTorch.

    python3 examples/benchmarks/bench_conv.py [--repeats N] [--batch B] [--size S]
                                              [--channels C] [--filters F] [--threads T]
    python3 examples/benchmarks/bench_conv.py --engines [--onednn PREFIX] [--threads T]

Every framework computes the same output from the same input and filter; results are checked
against numpy (forward) or flowc's numpy reference interpreter (gradients) before timing.

``--engines`` compares convolution engines per shape instead: the convolutions of a
ResNet-18-style CNN on 96x96 images at batches 1 and 32 and of the 28x28 training CNN, each
with its bias and ReLU (the inference form), run by flowc's compiled kernel (im2col + OpenBLAS,
or its direct kernel for few taps), by oneDNN (``onednn_conv.c``, built here against the
``onednn-devel-cpu-gomp`` headers and ``libdnnl`` of ``--onednn PREFIX``, ``$FLOWC_ONEDNN_ROOT``,
``$ONEDNN_ROOT`` or this Python's prefix; "-" without them) and by onnxruntime's Conv (NCHW,
its MLAS kernels), timed in interleaved rounds; the last column names the fastest. flowc runs
twice: with ``FLOWC_CONV_ENGINE=blas`` (its own kernels) and ``=onednn`` (the oneDNN path of
the generated code, as ``auto`` picks it for large shapes). Depthwise rows (MobileNetV2's)
compare flowc's DepthwiseConv2dNative kernel with oneDNN's grouped convolution.

``--grouped`` compares grouped Conv2D kernels (G groups of Cg input and Cg output channels,
3x3 SAME, bias + ReLU, one image; G in {2, 8, 32} by Cg in {4, 16, 64}, and G = 4 with Cg
32 and 64): flowc's direct kernel (``FLOWC_GROUPED_CONV=direct``), its im2col +
gemm-per-group kernel (``=gemm``), the split
form (Split, a Conv2D per group, Concat: what flowc ran before it had grouped kernels), all
with ``FLOWC_CONV_ENGINE=blas``, then flowc through oneDNN's grouped primitive and PyTorch's
``groups=`` convolution where installed; then their two gradients (by flowc's kernels under
``auto`` and ``gemm``, and split). flowc's default (``auto``) picks the direct kernel
for groups of at most 64 input and 64 output channels whose filter (as it reads it) is at
most 2 MiB (``GROUPED_DIRECT_MAX_*`` in ``compiler/codegen/c_ops/conv.py``).
"""
from __future__ import annotations

import argparse
from typing import Callable, Dict, Optional, Tuple

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


# --- --engines: one convolution (+ bias + ReLU) per shape, by each engine -----------------
# (name, N, H, W, C, KH, KW, O, stride): SAME padding; O == 0: depthwise (one filter per channel)
ENGINE_SHAPES = [
    ("r18 stem 7x7/2", 1, 96, 96, 3, 7, 7, 64, 2),
    ("r18 3x3 64", 1, 24, 24, 64, 3, 3, 64, 1),
    ("r18 3x3 128", 1, 12, 12, 128, 3, 3, 128, 1),
    ("r18 3x3 256", 1, 6, 6, 256, 3, 3, 256, 1),
    ("r18 3x3 512", 1, 3, 3, 512, 3, 3, 512, 1),
    ("r18 3x3/2 64->128", 1, 24, 24, 64, 3, 3, 128, 2),
    ("r18 1x1/2 128->256", 1, 12, 12, 128, 1, 1, 256, 2),
    ("r18 stem 7x7/2", 32, 96, 96, 3, 7, 7, 64, 2),
    ("r18 3x3 64", 32, 24, 24, 64, 3, 3, 64, 1),
    ("r18 3x3 128", 32, 12, 12, 128, 3, 3, 128, 1),
    ("r18 3x3 256", 32, 6, 6, 256, 3, 3, 256, 1),
    ("r18 3x3 512", 32, 3, 3, 512, 3, 3, 512, 1),
    ("cnn 5x5 1->32", 64, 28, 28, 1, 5, 5, 32, 1),
    ("cnn 5x5 32->64", 64, 14, 14, 32, 5, 5, 64, 1),
    ("mnv2 1x1 16->96", 1, 48, 48, 16, 1, 1, 96, 1),
    ("mnv2 1x1 144->24", 1, 24, 24, 144, 1, 1, 24, 1),
    ("mnv2 1x1 320->1280", 1, 3, 3, 320, 1, 1, 1280, 1),
    ("mnv2 dw 3x3 32", 1, 48, 48, 32, 3, 3, 0, 1),
    ("mnv2 dw 3x3/2 96", 1, 48, 48, 96, 3, 3, 0, 2),
    ("mnv2 dw 3x3 144", 1, 24, 24, 144, 3, 3, 0, 1),
    ("mnv2 dw 3x3 384", 1, 6, 6, 384, 3, 3, 0, 1),
    ("mnv2 dw 3x3 144", 32, 24, 24, 144, 3, 3, 0, 1),
    ("tiny 3x3 8", 1, 4, 4, 8, 3, 3, 8, 1),
    ("small 3x3 16", 1, 8, 8, 16, 3, 3, 16, 1),
]


def _same_pads(size: int, k: int, stride: int) -> Tuple[int, int, int]:
    """(output size, pad before, pad after) of TensorFlow's SAME padding."""
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def reference_conv(x, f, b, stride: int) -> np.ndarray:
    """relu(conv(x, f) + b), SAME, by a strided view and one matmul (float64 sums); a
    KHxKWxCx1 filter with C > 1 is depthwise."""
    n, h, w, c = x.shape
    kh, kw, _, o = f.shape
    depthwise = o == 1 and c > 1
    oh, pt, pb = _same_pads(h, kh, stride)
    ow, pl, pr = _same_pads(w, kw, stride)
    xp = np.pad(x.astype(np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    s = xp.strides
    cols = np.lib.stride_tricks.as_strided(
        xp, (n, oh, ow, kh, kw, c), (s[0], s[1] * stride, s[2] * stride, s[1], s[2], s[3]))
    if depthwise:
        y = np.einsum("nhwijc,ijc->nhwc", cols, f[..., 0].astype(np.float64)) + b
        return np.maximum(y, 0).astype(np.float32)
    y = cols.reshape(n * oh * ow, -1) @ f.reshape(-1, o).astype(np.float64) + b
    return np.maximum(y, 0).reshape(n, oh, ow, o).astype(np.float32)


def flowc_fused_conv(x, f, b, stride: int, engine: str):
    """flowc's compiled relu(bias_add(conv2d)) (one _FusedConv2D kernel; a depthwise filter:
    DepthwiseConv2dNative, then bias and ReLU) through Session.run, compiled with
    FLOWC_CONV_ENGINE=engine."""
    import os
    g = fl.Graph()
    with g.as_default():
        xt = fl.placeholder(fl.float32, x.shape, name="x")
        if f.shape[3] == 1 and f.shape[2] > 1:
            conv = fl.nn.depthwise_conv2d_native(xt, fl.constant(f), stride, "SAME")
        else:
            conv = fl.nn.conv2d(xt, fl.constant(f), stride, "SAME")
        y = fl.nn.relu(fl.nn.bias_add(conv, fl.constant(b)))
    sess = fl.Session(graph=g)
    saved = os.environ.get("FLOWC_CONV_ENGINE")
    os.environ["FLOWC_CONV_ENGINE"] = engine
    try:
        sess.run(y, {xt: x})                      # compiles under this engine
    finally:
        if saved is None:
            os.environ.pop("FLOWC_CONV_ENGINE")
        else:
            os.environ["FLOWC_CONV_ENGINE"] = saved
    return lambda: sess.run(y, {xt: x})


def find_onednn(prefix: Optional[str]) -> Optional[str]:
    """The prefix holding include/oneapi/dnnl/dnnl.h and lib/libdnnl.so*, or None."""
    import glob
    import os
    import sys
    for p in (prefix, os.environ.get("FLOWC_ONEDNN_ROOT"), os.environ.get("ONEDNN_ROOT"),
              sys.prefix):
        if p and os.path.exists(os.path.join(p, "include", "oneapi", "dnnl", "dnnl.h")) \
                and glob.glob(os.path.join(p, "lib", "libdnnl.so*")):
            return p
    return None


def onednn_library(prefix: str):
    """onednn_conv.c built against ``prefix`` (cached by the source's hash), opened by cffi."""
    import glob
    import hashlib
    import os
    import subprocess
    import tempfile
    import cffi
    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.join(here, "onednn_conv.c")
    lib = sorted(glob.glob(os.path.join(prefix, "lib", "libdnnl.so*")), key=len)[0]
    with open(source, "rb") as fh:
        key = hashlib.sha256(fh.read() + prefix.encode()).hexdigest()[:16]
    out = os.path.join(tempfile.gettempdir(), f"flowc_bench_onednn_{key}.so")
    if not os.path.exists(out):
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-std=gnu11",
                        f"-I{os.path.join(prefix, 'include')}", source, lib,
                        f"-Wl,-rpath,{os.path.dirname(lib)}", "-o", out], check=True)
    ffi = cffi.FFI()
    ffi.cdef("""void *onednn_conv_create(long, long, long, long, long, long, long, long, long,
                long, long, long, long, long, const float *, const float *, int);
                int onednn_conv_run(void *, const float *, float *);
                const char *onednn_conv_impl(void *);
                void onednn_conv_destroy(void *);""")
    return ffi, ffi.dlopen(out)


def onednn_conv(dnnl, x, f, b, stride: int):
    """(step, the implementation oneDNN chose) of one oneDNN convolution primitive."""
    ffi, lib = dnnl
    n, h, w, c = x.shape
    kh, kw, _, o = f.shape
    oh, pt, pb = _same_pads(h, kh, stride)
    ow, pl, pr = _same_pads(w, kw, stride)
    groups = c if (o == 1 and c > 1) else 1
    o = c if groups > 1 else o
    conv = lib.onednn_conv_create(n, h, w, c, kh, kw, o, stride, stride, pt, pl, pb, pr, groups,
                                  ffi.from_buffer("float[]", f), ffi.from_buffer("float[]", b), 1)
    if conv == ffi.NULL:
        raise SystemExit(f"oneDNN refused the convolution {x.shape} * {f.shape}")
    conv = ffi.gc(conv, lib.onednn_conv_destroy)
    xin = ffi.from_buffer("float[]", x)

    def step():
        y = np.empty((n, oh, ow, o), np.float32)
        if lib.onednn_conv_run(conv, xin, ffi.from_buffer("float[]", y)) != 0:
            raise SystemExit("oneDNN failed to run")
        return y
    return step, ffi.string(lib.onednn_conv_impl(conv)).decode()


def onnxruntime_conv(ort, threads, x, f, b, stride: int):
    """onnxruntime's Conv + Relu on the NCHW input (transposed once, outside the timing); its
    output transposed back to NHWC for the check only."""
    from onnx import TensorProto, helper, numpy_helper
    n, h, w, c = x.shape
    kh, kw, _, o = f.shape
    _, pt, pb = _same_pads(h, kh, stride)
    _, pl, pr = _same_pads(w, kw, stride)
    group = c if (o == 1 and c > 1) else 1
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[stride, stride],
                          pads=[pt, pl, pb, pr], group=group),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ascontiguousarray(
            f.transpose(2, 3, 0, 1) if group > 1 else f.transpose(3, 2, 0, 1)), "w"),
         numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    xn = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    return (lambda: sess.run(None, {"x": xn})[0]), lambda y: y.transpose(0, 2, 3, 1)


def engines(args) -> None:
    from bench_train_mlp import interleaved_medians
    ort = optional_import("onnxruntime")
    prefix = find_onednn(args.onednn)
    dnnl = onednn_library(prefix) if prefix else None
    print(environment_line(None, None))
    print(f"oneDNN: {prefix or 'not installed'}; onnxruntime: "
          f"{ort.__version__ if ort else 'not installed'}")
    print("Conv2D + bias + ReLU, SAME, float32, NHWC; GFLOP/s of each engine (median of "
          f"{args.repeats} steps in interleaved rounds; flowc's rows through Session.run)")
    names = ["flowc BLAS", "flowc oneDNN", "oneDNN", "onnxruntime"]
    print("flowc BLAS: flowc's own kernel (im2col + OpenBLAS, its direct kernel, or its depthwise "
          "kernel), FLOWC_CONV_ENGINE=blas; flowc oneDNN: FLOWC_CONV_ENGINE=onednn; oneDNN: its "
          "primitive called alone (onednn_conv.c)")
    print(f"{'shape':<22}{'N':>4}{'HxWxC':>13}{'filter':>12}  " + "".join(f"{n:>13}" for n in names)
          + "  fastest        oneDNN's choice")
    rng = np.random.default_rng(0)
    for label, n, h, w, c, kh, kw, o, stride in ENGINE_SHAPES:
        depthwise = o == 0
        x = rng.standard_normal((n, h, w, c)).astype(np.float32)
        f = (rng.standard_normal((kh, kw, c, 1 if depthwise else o))
             * np.sqrt(2.0 / (kh * kw * (1 if depthwise else c)))).astype(np.float32)
        out = c if depthwise else o
        b = (rng.standard_normal(out) * 0.1).astype(np.float32)
        want = reference_conv(x, f, b, stride)
        oh, ow = want.shape[1:3]
        flops = 2.0 * n * oh * ow * kh * kw * (1 if depthwise else c) * out
        steps, fix, impl = {}, {}, "-"
        steps["flowc BLAS"] = flowc_fused_conv(x, f, b, stride, "blas")
        if dnnl is not None:
            steps["flowc oneDNN"] = flowc_fused_conv(x, f, b, stride, "onednn")
            steps["oneDNN"], impl = onednn_conv(dnnl, x, f, b, stride)
        if ort is not None:
            steps["onnxruntime"], fix["onnxruntime"] = onnxruntime_conv(ort, args.threads, x, f,
                                                                         b, stride)
        for name, step in steps.items():
            got = fix.get(name, lambda v: v)(step())
            if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
                raise SystemExit(f"{name} disagrees on {label} (batch {n}); not timing it")
        seconds = interleaved_medians({k: (v, args.repeats) for k, v in steps.items()},
                                      settle=0.05)
        cells = "".join(f"{flops / seconds[k] / 1e9:>13.1f}" if k in seconds
                        else f"{'-':>13}" for k in names)
        best = min(seconds, key=seconds.get)
        filt = f"{kh}x{kw}" + ("/dw" if depthwise else f"x{o}")
        print(f"{label:<22}{n:>4}{f'{h}x{w}x{c}':>13}{filt:>12}  {cells}  "
              f"{best:<14} {impl}")
    print("(-: not installed)")


# (G, Cg, H = W): the input and output depth are G * Cg
GROUPED_SHAPES = [(g, cg, 56 if g * cg <= 256 else 28 if g * cg <= 512 else 14)
                  for cg in (4, 16, 64) for g in (2, 8, 32)] + [(4, 32, 56), (4, 64, 56)]


def flowc_grouped_conv(x, f, b, grouped: str, engine: str, split: bool = False):
    """flowc's compiled relu(bias_add(conv2d)) of a grouped filter (split: as Split, one
    Conv2D per group and Concat) through Session.run, compiled with FLOWC_GROUPED_CONV=grouped
    and FLOWC_CONV_ENGINE=engine."""
    import os
    groups = x.shape[3] // f.shape[2]
    og = f.shape[3] // groups
    g = fl.Graph()
    with g.as_default():
        xt = fl.placeholder(fl.float32, x.shape, name="x")
        if split:
            parts = fl.split(xt, groups, axis=3)
            conv = fl.concat([fl.nn.conv2d(part, fl.constant(f[..., k * og:(k + 1) * og]), 1,
                                           "SAME") for k, part in enumerate(parts)], axis=3)
        else:
            conv = fl.nn.conv2d(xt, fl.constant(f), 1, "SAME")
        y = fl.nn.relu(fl.nn.bias_add(conv, fl.constant(b)))
    sess = fl.Session(graph=g)
    saved = {k: os.environ.get(k) for k in ("FLOWC_CONV_ENGINE", "FLOWC_GROUPED_CONV")}
    os.environ.update(FLOWC_CONV_ENGINE=engine, FLOWC_GROUPED_CONV=grouped)
    try:
        sess.run(y, {xt: x})                      # compiles under these settings
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    return lambda: sess.run(y, {xt: x})


def torch_grouped_conv(torch, x, f, b, groups: int):
    """PyTorch's conv2d(groups=) + bias + ReLU (NCHW, no_grad); returns NHWC."""
    xt = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    ft = torch.from_numpy(np.ascontiguousarray(f.transpose(3, 2, 0, 1)))
    bt = torch.from_numpy(b)

    def step():
        with torch.no_grad():
            return torch.relu(torch.nn.functional.conv2d(xt, ft, bt, padding="same",
                                                         groups=groups))
    return step, lambda y: y.numpy().transpose(0, 2, 3, 1)


def grouped(args) -> None:
    from bench_train_mlp import interleaved_medians
    torch = optional_import("torch")
    if torch is not None and args.threads:
        torch.set_num_threads(args.threads)
    print(environment_line(torch, None))
    names = ["direct", "gemm", "split", "oneDNN", "torch"]
    print("Grouped Conv2D 3x3 SAME + bias + ReLU, float32, NHWC, batch 1; GFLOP/s (median of "
          f"{args.repeats} steps in interleaved rounds). direct / gemm: flowc's two grouped "
          "kernels (FLOWC_GROUPED_CONV=direct / gemm), split: Split + a Conv2D per group + "
          "Concat, all FLOWC_CONV_ENGINE=blas; oneDNN: flowc with FLOWC_CONV_ENGINE=onednn; "
          "torch: conv2d(groups=G)")
    print(f"{'G':>4}{'Cg':>5}{'HxWxC':>13}  " + "".join(f"{n:>9}" for n in names)
          + "  direct/gemm  direct/split")
    rng = np.random.default_rng(0)
    for groups, cg, size in GROUPED_SHAPES:
        c = groups * cg
        x = rng.standard_normal((1, size, size, c)).astype(np.float32)
        f = (rng.standard_normal((3, 3, cg, c)) * np.sqrt(2.0 / (9 * cg))).astype(np.float32)
        b = (rng.standard_normal(c) * 0.1).astype(np.float32)
        parts = [reference_conv(x[..., k * cg:(k + 1) * cg], f[..., k * cg:(k + 1) * cg],
                                b[k * cg:(k + 1) * cg], 1) for k in range(groups)]
        want = np.concatenate(parts, axis=3)
        flops = 2.0 * size * size * 9 * cg * c
        steps, fix = {}, {}
        steps["direct"] = flowc_grouped_conv(x, f, b, "direct", "blas")
        steps["gemm"] = flowc_grouped_conv(x, f, b, "gemm", "blas")
        steps["split"] = flowc_grouped_conv(x, f, b, "gemm", "blas", split=True)
        if onednn_available():
            steps["oneDNN"] = flowc_grouped_conv(x, f, b, "auto", "onednn")
        if torch is not None:
            steps["torch"], fix["torch"] = torch_grouped_conv(torch, x, f, b, groups)
        for name, step in steps.items():
            got = fix.get(name, lambda v: v)(step())
            if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
                raise SystemExit(f"{name} disagrees on G={groups} Cg={cg}; not timing it")
        seconds = interleaved_medians({k: (v, args.repeats) for k, v in steps.items()},
                                      settle=0.05)
        cells = "".join(f"{flops / seconds[k] / 1e9:>9.1f}" if k in seconds else f"{'-':>9}"
                        for k in names)
        print(f"{groups:>4}{cg:>5}{f'{size}x{size}x{c}':>13}  {cells}  "
              f"{seconds['gemm'] / seconds['direct']:>11.2f}x "
              f"{seconds['split'] / seconds['direct']:>11.2f}x")
    print("(-: not installed; direct/gemm, direct/split: how many times faster direct runs)")


def flowc_grouped_grads(x, f, dy, grouped: str, split: bool = False):
    """flowc's compiled Conv2DBackpropInput and Conv2DBackpropFilter of a grouped filter
    (split: per group, between Split and Concat), as two steps, compiled with
    FLOWC_GROUPED_CONV=grouped and FLOWC_CONV_ENGINE=blas."""
    import os
    groups = x.shape[3] // f.shape[2]
    cg, og = f.shape[2], f.shape[3] // groups
    g = fl.Graph()
    with g.as_default():
        xt = fl.placeholder(fl.float32, x.shape, name="x")
        dyt = fl.placeholder(fl.float32, dy.shape, name="dy")
        if split:
            xs, dys = fl.split(xt, groups, axis=3), fl.split(dyt, groups, axis=3)
            dx = fl.concat([fl.nn.conv2d_backprop_input(
                [*x.shape[:3], cg], fl.constant(f[..., k * og:(k + 1) * og]), dys[k], 1, "SAME")
                for k in range(groups)], axis=3)
            df = fl.concat([fl.nn.conv2d_backprop_filter(xs[k], [*f.shape[:3], og], dys[k], 1,
                                                         "SAME") for k in range(groups)], axis=3)
        else:
            dx = fl.nn.conv2d_backprop_input(list(x.shape), fl.constant(f), dyt, 1, "SAME")
            df = fl.nn.conv2d_backprop_filter(xt, list(f.shape), dyt, 1, "SAME")
    sess = fl.Session(graph=g)
    feed = {xt: x, dyt: dy}
    saved = {k: os.environ.get(k) for k in ("FLOWC_CONV_ENGINE", "FLOWC_GROUPED_CONV")}
    os.environ.update(FLOWC_CONV_ENGINE="blas", FLOWC_GROUPED_CONV=grouped)
    try:
        sess.run(dx, feed)
        sess.run(df, feed)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    return lambda: sess.run(dx, feed), lambda: sess.run(df, feed)


def grouped_grads(args) -> None:
    from bench_train_mlp import interleaved_medians
    print()
    print("Grouped Conv2D 3x3 SAME gradients, float32, batch 1, FLOWC_CONV_ENGINE=blas: ms (median "
          f"of {args.repeats} steps in interleaved rounds). auto: flowc's default kernels (thin "
          "groups' direct), gemm: FLOWC_GROUPED_CONV=gemm, split: per group")
    names = ["dx auto", "dx gemm", "dx split", "df auto", "df gemm", "df split"]
    print(f"{'G':>4}{'Cg':>5}{'HxWxC':>13}  " + "".join(f"{n:>10}" for n in names))
    rng = np.random.default_rng(1)
    for groups, cg, size in GROUPED_SHAPES:
        c = groups * cg
        x = rng.standard_normal((1, size, size, c)).astype(np.float32)
        f = (rng.standard_normal((3, 3, cg, c)) * 0.1).astype(np.float32)
        dy = rng.standard_normal((1, size, size, c)).astype(np.float32)
        runs = {"auto": flowc_grouped_grads(x, f, dy, "auto"),
                "gemm": flowc_grouped_grads(x, f, dy, "gemm"),
                "split": flowc_grouped_grads(x, f, dy, "gemm", split=True)}
        steps = {}
        for mode, (dx, df) in runs.items():
            steps[f"dx {mode}"], steps[f"df {mode}"] = dx, df
        for grad in ("dx", "df"):
            want = steps[f"{grad} split"]()
            for name, step in steps.items():
                if name.startswith(grad) and not np.allclose(step(), want, rtol=1e-3, atol=1e-3):
                    raise SystemExit(f"{name} disagrees on G={groups} Cg={cg}; not timing it")
        seconds = interleaved_medians({k: (v, args.repeats) for k, v in steps.items()},
                                      settle=0.05)
        print(f"{groups:>4}{cg:>5}{f'{size}x{size}x{c}':>13}  "
              + "".join(f"{seconds[k] * 1e3:>10.2f}" for k in names))


def onednn_available() -> bool:
    from compiler.codegen import onednn
    return onednn.available()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per framework")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=32, help="input height and width")
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--filters", type=int, default=64)
    parser.add_argument("--engines", action="store_true",
                        help="compare convolution engines per shape (see above)")
    parser.add_argument("--grouped", action="store_true",
                        help="compare grouped Conv2D kernels per shape (see above)")
    parser.add_argument("--onednn", default=None,
                        help="prefix of oneDNN's include/ and lib/ (--engines)")
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)
    if args.engines:
        engines(args)
        return
    if args.grouped:
        grouped(args)
        grouped_grads(args)
        return

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
