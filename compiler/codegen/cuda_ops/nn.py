"""GPU kernels of Softmax, LogSoftmax and the (sparse) softmax cross-entropy (loss and
backprop in one kernel): one block per row, the row's max and exp-sum as block reductions
(the sum in double, as on the CPU)."""
from __future__ import annotations

from compiler.codegen.c_ops.nn_grad import _xent_dims
from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.elementwise import input_strides
from compiler.codegen.kernel_context import KernelContext


def _blocks(rows: str) -> str:
    return f"(unsigned)(({rows}) < 65535 ? ({rows}) : 65535)"


def _helper(kc: KernelContext) -> None:
    kc.module.add_global(kc.render("softmax.cu.j2", part="helper"))


def _softmax(log: bool):
    def emit(kc: KernelContext) -> str:
        _helper(kc)
        x = kc.inputs[0]
        launch = CudaLaunch(kc, "log_softmax" if log else "softmax")
        o, px = launch.ptr(kc.out, writable=True), launch.ptr(x)
        rows_expr = x.dim_product(0, x.rank - 1)
        body = kc.render("softmax.cu.j2", part="softmax", T=x.ctype, x=px, o=o,
                         rows=launch.value(rows_expr), n=launch.value(x.dim(-1)), log=log,
                         exp=kc.math("exp", x.dtype))
        return launch.launch(body, f"({rows_expr}) * ({x.dim(-1)})", threads=_blocks(rows_expr))
    return emit


def _xent(sparse: bool):
    def emit(kc: KernelContext) -> str:
        _helper(kc)
        f, lab = kc.inputs
        loss, back = kc.outputs
        if sparse:
            kc.check_dims_equal(f.dim(0), lab.dim(0), "features and labels differ in batch size")
            fs, ls = [f.dim(1), "1"], ["0", "0"]
        else:
            fs, ls = input_strides(back, f), input_strides(back, lab)
        rows_expr, n_expr = _xent_dims(kc)[1]
        launch = CudaLaunch(kc, "sparse_xent" if sparse else "xent")
        v = launch.value
        report = (launch.report("Received a label value of %lld which is outside the valid "
                                "range of [0, %lld)", values=["lbl", v(n_expr)])
                  if sparse else "")
        body = kc.render("softmax.cu.j2", part="xent", sparse=sparse, T=f.ctype,
                         x=launch.ptr(f), lab=launch.ptr(lab),
                         loss=launch.ptr(loss, writable=True), back=launch.ptr(back, writable=True),
                         rows=v(rows_expr), n=v(n_expr), fs0=v(fs[0]), fs1=v(fs[1]),
                         ls0=v(ls[0]), ls1=v(ls[1]), exp=kc.math("exp", f.dtype), report=report)
        return launch.launch(body, f"({rows_expr}) * ({n_expr})", threads=_blocks(rows_expr))
    return emit


register_cuda_kernel("Softmax", _softmax(False))
register_cuda_kernel("LogSoftmax", _softmax(True))
register_cuda_kernel("SoftmaxCrossEntropyWithLogits", _xent(False))
register_cuda_kernel("SparseSoftmaxCrossEntropyWithLogits", _xent(True))
