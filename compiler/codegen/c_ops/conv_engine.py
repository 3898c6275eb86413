"""Which engine runs a convolution or its gradients in the generated C: oneDNN (``conv_onednn.c.j2``,
where ``compiler/codegen/onednn.py`` finds it) or flowc's own kernels (im2col + OpenBLAS, or
the direct kernel of ``conv_direct.c.j2``).

Chosen per shape from measurements (``examples/benchmarks/bench_conv.py --engines``; the
benchmarks README has the table): on the 2-core AVX-512 machine, one thread, oneDNN's
convolution + bias + ReLU ran 1.3x to 4.7x faster than flowc's im2col + OpenBLAS on every
layer of a ResNet-18 on 96x96 images (batches 1 and 32) and of the 28x28 training CNN, first
layers (3 or 1 input channels) and 1x1 convolutions included, 1.3x to 3.8x on MobileNetV2's
pointwise layers and 1.1x to 3.2x against flowc's depthwise kernel; only below about 1e5
flops per call (a 4x4x8 image through 3x3x8) did flowc's kernel win, the primitive's per-call
set-up (memory objects, a stream: about 2 us) costing more than the arithmetic. So with
``FLOWC_CONV_ENGINE`` ``auto`` (the default) oneDNN takes a float32 Conv2D, _FusedConv2D
(bias, ReLU) or NHWC DepthwiseConv2dNative whose shapes are all static when it does at least
``MIN_FLOPS``; ``onednn`` gives it every such convolution, ``blas`` none. A shape oneDNN
refuses when the step first runs falls back to flowc's kernel at run time.

Which of oneDNN's implementations runs a static convolution of at least ``TUNE_FLOPS``
(``FLOWC_CONV_TUNE``) is measured too, on the node's first call (``flowc_dnnl_conv_choose``):
oneDNN's first choice and up to three more for the same instruction set, each timed on the
node's data; the fastest is kept. oneDNN ranks its implementations by a fixed preference:
on the 2-core AVX-512 machine, one thread, ResNet-18 at batch 32 ran its 3x3 convolutions
on 3x3 images (512 channels) 1.2x faster and the 3x3/2 one into them 1.6x faster on the jit
kernel than on the brgconv oneDNN puts first, its 1x1/2 projections 1.2x faster on jit_1x1
than on brgconv_1x1, while at batch 1 brgconv won those 3x3 shapes. The model's step at
batch 32 went from 110.9 to 103.5 ms of CPU time (best of 10 alternating rounds; onnxruntime
115.8), about 0.5 s more on the first call (each implementation runs three times).

A convolution whose dims are known only at run time (a batch fed as ``None``, as every
training graph has) runs on oneDNN too: one primitive per shape it meets, up to 4 a node
(``flowc_dnnl_conv_dyn_f32``), with ``MIN_FLOPS`` and the padding checked on each call.

The gradients Conv2DBackpropInput and Conv2DBackpropFilter (with the bias gradient of
``_Conv2DBackpropFilterBias``) run on oneDNN's backward-data and backward-weights primitives
(``conv_onednn_bwd.c.j2``; grouped ones with the hwigo filter, as the forward) under the same
setting and threshold. Measured on the 28x28 CNN's
training step, batch 64, one thread (``bench_train_cnn.py --profile``): the second layer's
three convolutions (1.28 GFLOP each) went from 21-22 ms each on im2col + OpenBLAS / col2im to
4.7-5.4 ms (about 250 GFLOP/s, what oneDNN reaches alone in C), the first layer's filter
gradient (one input channel) from 1.3 ms on flowc's direct kernel to 0.7-1.0 ms.
"""
from __future__ import annotations

from typing import Optional, Tuple

from compiler.codegen.kernel_context import KernelContext as CKernelContext
from compiler.codegen.onednn import available
from compiler.errors import CompileError
from compiler.options import number_setting, setting
from runtime.dtypes import DType

MIN_FLOPS = 100_000
# The least flops of a static convolution whose oneDNN implementation is chosen by timing on
# its first call (FLOWC_CONV_TUNE; conv_onednn.c.j2's flowc_dnnl_conv_choose): about 50 us.
TUNE_FLOPS = 10_000_000
ENGINES = ("auto", "onednn", "blas")
# The activations a fused convolution may end with, as conv_onednn.c.j2's FLOWC_DNNL_ACT_*.
ACTIVATIONS = {None: "FLOWC_DNNL_ACT_NONE", "Relu": "FLOWC_DNNL_ACT_RELU",
               "Relu6": "FLOWC_DNNL_ACT_RELU6", "Elu": "FLOWC_DNNL_ACT_ELU",
               "LeakyRelu": "FLOWC_DNNL_ACT_LEAKY_RELU"}


def engine_setting() -> str:
    """``FLOWC_CONV_ENGINE``: auto (default), onednn or blas."""
    text = setting("FLOWC_CONV_ENGINE").strip().lower() or "auto"
    if text not in ENGINES:
        raise CompileError(f"FLOWC_CONV_ENGINE must be one of {', '.join(ENGINES)}, not {text!r}")
    return text


def onednn_pads(geo) -> Optional[Tuple[int, int]]:
    """(bottom, right) padding that makes oneDNN's output size flowc's, or None when there is
    none (oneDNN computes (size + before + after - window) / stride + 1)."""
    pads = []
    for axis in (0, 1):
        size, k = int(geo.x[1 + axis]), int((geo.kh, geo.kw)[axis])
        stride, dilation = geo.g.strides[axis], geo.g.dilations[axis]
        out, before = int(geo.out(axis)), int(geo.pad(axis))
        window = (k - 1) * dilation + 1
        after = max((out - 1) * stride + window - size - before, 0)
        if out < 1 or before < 0 or (size + before + after - window) // stride + 1 != out:
            return None
        pads.append(after)
    return pads[0], pads[1]


def onednn_epilogue(kc: CKernelContext) -> Optional[Tuple[str, str, str, str]]:
    """The C arguments (bias, addend, activation, alpha) of the node's epilogue as oneDNN runs
    it: none for a plain convolution; for a fused one (``_Fused*``) its ``fused_ops``,
    ``BiasAdd``, then optionally ``Add`` (the residual, input 3), then optionally one
    activation of ``ACTIVATIONS``. None for any other epilogue (flowc's kernel runs it)."""
    if not kc.node.op.startswith("_Fused"):
        return "NULL", "NULL", ACTIVATIONS[None], "0.0f"
    fused = list(kc.attrs.get("fused_ops", ()))
    rest = fused[1:]
    add = bool(rest) and rest[0] == "Add"
    if add:
        rest = rest[1:]
    if fused[:1] != ["BiasAdd"] or len(rest) > 1 or (rest and rest[0] not in ACTIVATIONS) \
            or len(kc.inputs) < (4 if add else 3):
        return None
    act = rest[0] if rest else None
    alpha = float(kc.attrs.get("leakyrelu_alpha", 0.2)) if act == "LeakyRelu" else 0.0
    return (kc.inputs[2].data, kc.inputs[3].data if add else "NULL", ACTIVATIONS[act],
            f"{alpha!r}f")


def is_static(geo) -> bool:
    """Whether every dim of the problem is known now (and positive)."""
    dims = list(geo.x) + [geo.kh, geo.kw, geo.o] + [geo.out(0), geo.out(1)]
    return all(d.isdigit() and int(d) > 0 for d in dims) and geo.pad(0).isdigit() \
        and geo.pad(1).isdigit()


def tune_flops() -> int:
    """``FLOWC_CONV_TUNE``: the least flops of a static convolution whose oneDNN implementation
    is the fastest of those oneDNN offers for the machine, timed on its first call (default
    ``TUNE_FLOPS``); 0: oneDNN's first choice always."""
    return number_setting("FLOWC_CONV_TUNE", TUNE_FLOPS, int, 0, "a count of flops (0: off)",
                          CompileError)


def min_flops() -> int:
    """The least flops of a call that oneDNN runs (0 under ``onednn``)."""
    return 0 if engine_setting() == "onednn" else MIN_FLOPS


def uses_onednn(kc: CKernelContext, geo, op: str) -> bool:
    """Whether this node's convolution runs on oneDNN (see the module's docstring). ``op``:
    Conv2D (also for a fused Conv2D), or a (fused) DepthwiseConv2dNative in NHWC (``geo.o`` is
    then its channel multiplier)."""
    depthwise = op.endswith("DepthwiseConv2dNative")
    if not (op == "Conv2D" or depthwise) or kc.target.name != "c" \
            or kc.out.dtype is not DType.f32 or onednn_epilogue(kc) is None:
        return False
    if depthwise and kc.attrs.get("data_format", "NHWC") != "NHWC":
        return False
    engine = engine_setting()
    if engine == "blas" or not available():
        return False
    if depthwise and not (geo.x[3].isdigit() and geo.o.isdigit()):
        return False
    if not is_static(geo):          # decided again at run time (flowc_dnnl_conv_dyn_f32)
        return True
    if onednn_pads(geo) is None:
        return False
    n, h, w, c = map(int, geo.x)
    # a pixel's outputs (depthwise: C * M, geo.o being M) each sum kh * kw taps of their
    # group's input channels (depthwise: one)
    outputs = c * int(geo.o) if depthwise else int(geo.o)
    flops = 2 * n * int(geo.out(0)) * int(geo.out(1)) * int(geo.kh) * int(geo.kw) * outputs \
        * (1 if depthwise else c // geo.groups)
    return engine == "onednn" or flops >= MIN_FLOPS


def emit_onednn(kc: CKernelContext, geo, rc: str, fallback: str, depthwise: bool = False) -> str:
    """C that declares ``rc`` and runs the node's convolution (input 0 by filter 1 into output
    0, with the epilogue of ``onednn_epilogue``) on oneDNN, or ``fallback`` (flowc's kernel:
    an expression for ``rc``) when oneDNN refuses the shape. ``rc`` ends 0, or 1 when out of
    memory, or another code of flowc's kernel; a failure of oneDNN itself fails the step here.
    ``depthwise``: a DepthwiseConv2dNative (one group per input channel, ``geo.o`` outputs
    each)."""
    _add_helpers(kc)
    state = kc.tmp("dnnl_conv")
    # a Const node's data is read-only and stays at its address: reordered once (by address)
    f_const = "1" if kc.node.inputs[1].node.op == "Const" else "0"
    if depthwise:
        c, m = int(geo.x[3]), int(geo.o)
        groups, outputs = str(c), str(c * m)
    else:               # a grouped Conv2D's HWIO filter [KH, KW, C / G, O] is hwigo too
        groups, outputs = str(geo.groups), geo.o
    args = [groups] + geo.x + [geo.kh, geo.kw, outputs, geo.out(0), geo.out(1),
                               *map(str, geo.g.strides + geo.g.dilations), geo.pad(0),
                               geo.pad(1)]
    bias, addend, act, alpha = onednn_epilogue(kc)
    x, f, y = kc.inputs[0].data, kc.inputs[1].data, kc.out.data
    if is_static(geo):
        pb, pr = onednn_pads(geo)
        call = (f"flowc_dnnl_conv_f32(&{state}, {x}, {f}, {f_const}, {bias}, {addend}, {act}, "
                f"{alpha}, {y}, {', '.join(args + [str(pb), str(pr)])})")
        tune = tune_flops()
        init = (f"static flowc_dnnl_conv {state} = "
                + (f"FLOWC_DNNL_CONV_INIT_TUNED({tune}.0);\n" if tune else
                   "FLOWC_DNNL_CONV_INIT;\n"))
    else:                           # one primitive per shape met at run time
        call = (f"flowc_dnnl_conv_dyn_f32(&{state}, {min_flops()}, {x}, {f}, {f_const}, {bias}, "
                f"{addend}, {act}, {alpha}, {y}, {', '.join(args)})")
        init = f"static flowc_dnnl_conv_shapes {state} = FLOWC_DNNL_CONV_SHAPES_INIT;\n"
    return (init + f"int {rc} = {call};\n"
            f"if ({rc} == 3) {rc} = {fallback};\n"
            f"else if ({rc} == 2) "
            f"{kc.fail('oneDNN failed to run the convolution', code='FLOWC_INTERNAL')}\n")


def _add_helpers(kc: CKernelContext, backward: bool = False) -> None:
    kc.require("onednn")
    kc.require("openmp")
    kc.module.add_global(kc.render("onednn_threads.c.j2"))
    kc.module.add_global(kc.render("conv_onednn.c.j2"))
    if backward:
        kc.module.add_global(kc.render("conv_onednn_bwd.c.j2"))


# The backward ops oneDNN runs: the C function of each (conv_onednn_bwd.c.j2).
BACKWARD = {"Conv2DBackpropInput": "flowc_dnnl_conv_bwd_data_f32",
            "Conv2DBackpropFilter": "flowc_dnnl_conv_bwd_weights_f32"}


def uses_onednn_backward(kc: CKernelContext, geo, op: str) -> bool:
    """Whether this node's convolution gradient (``op``: Conv2DBackpropInput, or a plain or
    bias-fused Conv2DBackpropFilter) may run on oneDNN's backward primitives: float32 on the C
    target, oneDNN installed, FLOWC_CONV_ENGINE not ``blas``, and (under ``auto``) at least
    ``MIN_FLOPS`` flops, checked at run time for dims known only then."""
    if op not in BACKWARD or kc.target.name != "c" or kc.out.dtype is not DType.f32:
        return False
    engine = engine_setting()
    if engine == "blas" or not available():
        return False
    if is_static(geo):
        if onednn_pads(geo) is None:
            return False
        n, h, w, c = map(int, geo.x)
        flops = 2 * n * int(geo.out(0)) * int(geo.out(1)) * int(geo.kh) * int(geo.kw) \
            * int(geo.o) * (c // geo.groups)
        return flops >= min_flops()
    return True


def emit_onednn_backward(kc: CKernelContext, geo, op: str, ptrs: str, rc: str,
                         fallback: str) -> str:
    """C that declares ``rc`` and runs the gradient ``op`` (see ``BACKWARD``) on oneDNN with
    the pointers ``ptrs`` (as flowc's helper takes them: dy, filter, dx; or x, dy, db or NULL,
    df) and ``geo.groups`` groups (oneDNN's grouped primitive, the hwigo filter, as the
    forward's), or ``fallback`` (flowc's kernel) when the call is not for oneDNN (run-time flops or
    shapes) or oneDNN refuses the shape; a failure of oneDNN itself fails the step here."""
    _add_helpers(kc, backward=True)
    state = kc.tmp("dnnl_bwd")
    return (f"static flowc_dnnl_bwd {state} = FLOWC_DNNL_BWD_INIT;\n"
            f"int {rc} = {BACKWARD[op]}(&{state}, {min_flops()}, {geo.groups}, {ptrs}, "
            f"{geo.call_args()});\n"
            f"if ({rc} == 3) {rc} = {fallback};\n"
            f"else if ({rc} == 2) "
            f"{kc.fail('oneDNN failed to run the convolution gradient', code='FLOWC_INTERNAL')}\n")
