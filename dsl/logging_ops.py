"""``fl.Print`` (TF1's ``tf.Print``) and ``fl.print`` (``tf.print``): ops that write tensor
values when the step runs (see ``compiler/ops/logging.py`` and ``runtime/printing.py``)."""
from __future__ import annotations

import sys
from typing import Optional

from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Operation, Tensor

__all__ = ["Print", "print_v2"]


def Print(input_, data, message: Optional[str] = None, first_n: Optional[int] = None,  # noqa: N802
          summarize: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    """``input_``, which when computed writes ``message`` and ``[values]`` of each tensor in
    ``data`` to stderr (``tf.Print``): the first ``summarize`` (3) elements of each, for the
    first ``first_n`` runs (every run by default)."""
    x = convert_to_tensor(input_)
    tensors = [convert_to_tensor(d) for d in (data or [])]
    attrs = {"message": "" if message is None else str(message),
             "first_n": -1 if first_n is None else int(first_n),
             "summarize": 3 if summarize is None else int(summarize)}
    return apply_op("Print", [x, tensors], attrs, name=name or "Print")


def _stream_name(output_stream) -> str:
    if output_stream is None or output_stream is sys.stderr or output_stream is sys.__stderr__:
        return "stderr"
    if output_stream is sys.stdout or output_stream is sys.__stdout__:
        return "stdout"
    if isinstance(output_stream, str) and output_stream.startswith("file://"):
        return output_stream
    from dsl import logging as fl_logging
    if output_stream in (fl_logging.info, fl_logging.warning, fl_logging.warn,
                         fl_logging.error, fl_logging.debug, fl_logging.fatal):
        return "stderr"
    raise ValueError(f"Unsupported output stream, logging level, or file.{output_stream}. "
                     "Supported streams are sys.stdout, sys.stderr, fl.logging functions, or "
                     "file://<filename>")


def print_v2(*inputs, output_stream=None, summarize: int = 3, sep: str = " ",
             end: str = "\n", name: Optional[str] = None) -> Operation:
    """Print ``inputs`` (tensors formatted like numpy, everything else with ``str``) when the
    returned op runs (``tf.print`` in a graph: run it, or make other ops depend on it).
    ``output_stream``: ``sys.stderr`` (default), ``sys.stdout``, an ``fl.logging`` function
    (stderr) or ``"file://<path>"`` (appended)."""
    from dsl.variables import Variable
    if summarize is None:
        summarize = -1
    texts, tensors = [], []

    def walk(x) -> str:
        if isinstance(x, Variable):
            x = x.value()
        if isinstance(x, Tensor):
            tensors.append(x)
            return "\0"
        if isinstance(x, str):
            return x
        if isinstance(x, list):
            return "[" + ", ".join(walk(v) for v in x) + "]"
        if isinstance(x, tuple):
            return "(" + ", ".join(walk(v) for v in x) + ")"
        if isinstance(x, dict):
            return "{" + ", ".join(f"{k!r}: {walk(v)}" for k, v in x.items()) + "}"
        return str(x)

    texts = [walk(x) for x in inputs]
    joined = sep.join(texts)
    placeholder = "{}"
    while placeholder in joined:
        placeholder = "{" + placeholder + "}"
    template = joined.replace("\0", placeholder)
    return apply_op("_PrintV2", [tensors],
                    {"template": template, "placeholder": placeholder,
                     "summarize": int(summarize), "output_stream": _stream_name(output_stream),
                     "end": end}, name=name or "PrintV2")
