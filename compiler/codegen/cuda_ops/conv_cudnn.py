"""Convolutions through cuDNN where it beats the generated kernels, chosen per shape by
measurement.

A module built with cuDNN (``FLOWC_CUDNN``: ``cuda_build.cudnn_home`` found it and
``FLOWC_CUDA_CONV`` is not ``generated``) calls ``cudnnConvolutionForward``,
``...BackwardData`` or ``...BackwardFilter`` for a float32 or float64 ``Conv2D``,
``_FusedConv2D`` (its epilogue then applied in place by one more kernel),
``Conv2DBackpropInput`` and ``Conv2DBackpropFilter``, groups, strides and dilations
included; the generated kernel stays in the source as the alternative, and is all a module
built without cuDNN (the simulator, ``FLOWC_CUDA_CUDNN=0``) has.

Per call site and shape (``conv_cudnn.cu.j2``'s ``flowc_cudnn_conv``; shapes may be known only
at run time, so this happens on the first call of each, up to 8 remembered a site): the
descriptors are built, ``cudnnFind*AlgorithmEx`` picks cuDNN's fastest algorithm on the
call's own data, then under ``auto`` cuDNN's time per call (filter layout changes included:
flowc's filter is HWIO, cuDNN's NHWC filter OHWI) and the generated kernel's (CUDA events, a
warm-up and 3 runs each) decide which runs that shape from then on; ``cudnn`` skips the
timing. cuDNN's legacy API pads both sides alike: where TensorFlow pads more after than
before (SAME with a stride of 2 over an even size) x gets the missing zero rows and columns
in scratch memory first (dx is cropped from such a tensor), as TensorFlow does; more padding
before than after (EXPLICIT) runs the generated kernel. float32 runs without TF32 (``CUDNN_FMA_MATH``), as the generated
kernel computes. ``FLOWC_CUDA_CONV_LOG=1`` prints each choice; the module's
``flowc_cuda_conv_choices()`` returns them all as text.
"""
from __future__ import annotations

from typing import List

from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.kernel_context import KernelContext
from runtime.dtypes import DType

# kind (conv_cudnn.cu.j2's FLOWC_CONV_*) and the operands a, b, out by input index (-1: output)
_KINDS = {"Conv2D": ("FLOWC_CONV_FWD", 0, 1, -1),
          "_FusedConv2D": ("FLOWC_CONV_FWD", 0, 1, -1),
          "Conv2DBackpropInput": ("FLOWC_CONV_BWD_DATA", 2, 1, -1),
          "Conv2DBackpropFilter": ("FLOWC_CONV_BWD_FILTER", 0, 2, -1)}


def takes(kc: KernelContext) -> bool:
    """Whether cuDNN may run this node (when the module has it)."""
    return kc.node.op in _KINDS and kc.out.dtype in (DType.f32, DType.f64)


def cudnn_or_generated(kc: KernelContext, geo, cf: str, generated: str,
                       epilogue_vars=None) -> str:
    """Host code running the node on cuDNN or on ``generated`` (the generated kernel's
    launch), as the module's build and the shape's measurement say. ``epilogue_vars(launch)``:
    a fused convolution's epilogue variables for a kernel applied after cuDNN's output."""
    kc.module.add_global(kc.render("conv_cudnn.cu.j2", part="helpers"))
    kind, a, b, _ = _KINDS[kc.node.op]
    ins, out = kc.inputs, kc.out
    n, h, w, c = geo.x
    dims = [n, h, w, c, geo.kh, geo.kw, geo.o, cf, geo.out(0), geo.out(1),
            geo.g.strides[0], geo.g.strides[1], geo.g.dilations[0], geo.g.dilations[1],
            geo.pad(0), geo.pad(1)]
    args = (f"&flowc_site, flowc_node, {kind}, {int(out.dtype is DType.f64)}, &flowc_cd, "
            f"{ins[a].var}.data, {ins[b].var}.data, {out.var}.data, flowc_stream")
    fail = kc.fail("%s", "flowc_msg",
                   code="(flowc_how == -2 ? FLOWC_RESOURCE_EXHAUSTED : FLOWC_INTERNAL)")
    lines: List[str] = [
        "#ifdef FLOWC_CUDNN",
        "{",
        "static flowc_cudnn_site flowc_site;   /* this call site's shapes and choices */",
        "const flowc_conv_dims flowc_cd = {" + ", ".join(f"(long long)({d})" for d in dims) + "};",
        "char flowc_msg[256];",
        f"int flowc_how = flowc_cudnn_conv({args}, -1.0f, flowc_msg, sizeof flowc_msg);",
        f"if (flowc_how < 0) {fail}",
        "const int flowc_measure = flowc_how == FLOWC_CONV_MEASURE;",
        "const int flowc_reps = flowc_measure ? FLOWC_CONV_REPS + 1 "
        ": flowc_how == FLOWC_CONV_RUN_GENERATED;",
        "cudaEvent_t flowc_ev[2] = {NULL, NULL};",
        "if (flowc_measure) { FLOWC_CUDA(cudaEventCreate(&flowc_ev[0])); "
        "FLOWC_CUDA(cudaEventCreate(&flowc_ev[1])); }",
        "for (int flowc_rep = 0; flowc_rep < flowc_reps; flowc_rep++) {",
        "    if (flowc_measure && flowc_rep == 1) "
        "FLOWC_CUDA(cudaEventRecord(flowc_ev[0], flowc_stream));",
        *("    " + line for line in generated.splitlines()),
        "}",
        "if (flowc_measure) {",
        "    float flowc_ms = 0.0f;",
        "    FLOWC_CUDA(cudaEventRecord(flowc_ev[1], flowc_stream));",
        "    FLOWC_CUDA(cudaEventSynchronize(flowc_ev[1]));",
        "    FLOWC_CUDA(cudaEventElapsedTime(&flowc_ms, flowc_ev[0], flowc_ev[1]));",
        "    cudaEventDestroy(flowc_ev[0]); cudaEventDestroy(flowc_ev[1]);",
        f"    flowc_how = flowc_cudnn_conv({args}, flowc_ms / FLOWC_CONV_REPS, flowc_msg, "
        "sizeof flowc_msg);",
        f"    if (flowc_how < 0) {fail}",
        "}",
    ]
    if epilogue_vars is not None:
        launch = CudaLaunch(kc, "conv_cudnn_epilogue")
        y = launch.ptr(out, writable=True)
        body = kc.render("conv_cudnn.cu.j2", part="epilogue", T=out.ctype, y=y,
                         n=launch.value(out.size), O=launch.value(geo.o),
                         **epilogue_vars(launch))
        lines += ["if (flowc_how == FLOWC_CONV_RAN_CUDNN) {",
                  *("    " + line for line in launch.launch(body, out.size).splitlines()),
                  "}"]
    lines += ["}", "#else", generated, "#endif"]
    return "\n".join(lines)
