"""Print ops: ``Print`` (TF1's ``tf.Print``: passes ``input`` through and writes ``message``
and a summary of each ``data`` tensor to stderr) and ``_PrintV2`` (TF2's ``tf.print``: TF's
``StringFormat`` + ``PrintV2`` pair as one op, flowc having no string dtype).

The text is formatted by ``runtime/printing.py``; the reference kernels call it directly, the
C kernels through the runtime's host-call hook, so both backends print the same. Both ops are
stateful: never folded, merged or pruned while something needs them. ``first_n`` counts per
session (the store) and node.
"""
from __future__ import annotations

from compiler.ir.op_registry import register_op
from runtime.printing import format_v2, print_v1, print_v2


def _print_shape(ctx):
    if ctx.attr("summarize") < -1:
        raise ctx.error(f"summarize must be >= -1, got {ctx.attr('summarize')}")
    return [ctx.input_types[0]]


def _print_kernel(ctx, value, *data):
    print_v1(ctx.state, ctx.node.name, ctx.attrs["message"], data, ctx.attrs["first_n"],
             ctx.attrs["summarize"])
    return value


def _print_v2_shape(ctx):
    template, placeholder = ctx.attr("template"), ctx.attr("placeholder")
    if not placeholder:
        raise ctx.error("placeholder must not be empty")
    count = len(template.split(placeholder)) - 1
    if count != len(ctx.input_types):
        raise ctx.error(f"the template has {count} placeholders for {len(ctx.input_types)} "
                        "tensors")
    stream = ctx.attr("output_stream")
    if stream not in ("stderr", "stdout") and not stream.startswith("file://"):
        raise ctx.error(f"output_stream must be stderr, stdout or file://<path>, got {stream!r}")
    return []


def _print_v2_kernel(ctx, *inputs):
    print_v2(ctx.attrs["template"], ctx.attrs["placeholder"], inputs, ctx.attrs["summarize"],
             ctx.attrs["output_stream"], ctx.attrs["end"])
    return []


register_op("Print", inputs=["input: T", "data: U"], outputs=["output: T"],
            attrs=["T: type", "U: list(type)", "message: string = ''", "first_n: int = -1",
                   "summarize: int = 3"],
            shape=_print_shape, kernel=_print_kernel, c_alias=0, stateful=True, group="other",
            half_native=True,
            doc="``input``, after writing ``message`` and ``[summary]`` of each ``data`` tensor "
                "to stderr (the first ``first_n`` runs; -1: every run).")

register_op("_PrintV2", inputs=["inputs: Targs"],
            attrs=["Targs: list(type)", "template: string", "placeholder: string = '{}'",
                   "summarize: int = 3", "output_stream: string = 'stderr'", "end: string"],
            shape=_print_v2_shape, kernel=_print_v2_kernel, stateful=True, group="other",
            half_native=True,
            doc="Writes ``template`` with each ``placeholder`` replaced by an input (numpy-like, "
                "``summarize`` entries from each end of each dim) and ``end`` to "
                "``output_stream``.")

__all__ = ["format_v2"]
