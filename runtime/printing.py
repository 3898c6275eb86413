"""What the print ops write: TensorFlow's formatting of tensor values, and the host ops the
compiled ``Print`` / ``_PrintV2`` kernels call (``flowc_rt->host_call``), so both backends print
the same text.

``Print`` (TF1's ``tf.Print``) writes ``message`` then ``[values]`` for each data tensor, in
TF1's summary (``Tensor::SummarizeValue``: the first ``summarize`` elements in nested brackets,
``...`` when cut), to stderr, at most ``first_n`` times per session (-1: always). ``_PrintV2``
is TF2's ``tf.print`` (``StringFormat`` + ``PrintV2`` in one op, flowc having no string
dtype): a template whose ``{}`` are replaced by the inputs in numpy-like form (``[1 2 3 ...
8 9 10]``, one row per line), to stderr, stdout or a ``file://`` path.
"""
from __future__ import annotations

import sys
import threading
import weakref
from typing import List, Sequence

import numpy as np

from runtime.resources import register_host_op

__all__ = ["format_element", "summarize_v1", "summarize_v2", "print_v1", "print_v2"]

_counts: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_counts_lock = threading.Lock()


def format_element(value) -> str:
    """One value as TensorFlow's ``StrCat`` writes it: floats in the shortest of ``%.6g`` /
    ``%.9g`` (``%.15g`` / ``%.17g`` for doubles) that reads back the same, bools as 1/0."""
    if isinstance(value, (np.bool_, bool)):
        return "1" if value else "0"
    if isinstance(value, (np.floating, float)):
        if isinstance(value, np.float64) or type(value) is float:
            digits, kind = (15, 17), np.float64
        else:
            digits, kind = (6, 9), np.float32
            value = np.float32(value)
        if np.isnan(value):
            return "nan" if not np.signbit(value) else "-nan"
        if np.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = f"{float(value):.{digits[0]}g}"
        if kind(text) != kind(value):
            text = f"{float(value):.{digits[1]}g}"
        return text
    return str(int(value))


def summarize_v1(arr: np.ndarray, summarize: int) -> str:
    """TF1's ``SummarizeValue(summarize)``: the first ``limit`` elements, each innermost row
    space-separated inside brackets, ``...`` when elements were left out."""
    arr = np.asarray(arr)
    flat = arr.reshape(-1)
    n = flat.size
    limit = n if summarize < 0 else min(summarize, n)
    if arr.ndim == 0:
        out = " ".join(format_element(flat[i]) for i in range(limit))
        return out + ("..." if n > limit else "")
    index = [0]
    parts: List[str] = []

    def one_dim(d: int) -> None:
        if index[0] >= limit:
            return
        count = arr.shape[d]
        if d == arr.ndim - 1:
            for i in range(count):
                if index[0] >= limit:
                    if d != 0:
                        parts.append("...")
                    return
                if i > 0:
                    parts.append(" ")
                parts.append(format_element(flat[index[0]]))
                index[0] += 1
            return
        for _ in range(count):
            opened = index[0] < limit
            if opened:
                parts.append("[")
            one_dim(d + 1)
            if index[0] < limit or opened:
                parts.append("]")

    one_dim(0)
    return "".join(parts) + ("..." if n > limit else "")


def summarize_v2(arr: np.ndarray, summarize: int) -> str:
    """TF2's ``tf.print`` form: numpy-like nesting, rows on separate lines, each dim cut to
    its first and last ``summarize`` entries around ``...`` (``summarize`` < 0: everything)."""
    arr = np.asarray(arr)
    if arr.ndim == 0:
        return format_element(arr[()])

    def block(a: np.ndarray, depth: int) -> str:
        n = a.shape[0]
        cut = 0 <= summarize and 2 * summarize < n
        idx = list(range(summarize)) + [None] + list(range(n - summarize, n)) if cut \
            else list(range(n))
        if a.ndim == 1:
            return "[" + " ".join("..." if i is None else format_element(a[i]) for i in idx) + "]"
        sep = "\n" * (a.ndim - 1) + " " * (depth + 1)
        return "[" + sep.join("..." if i is None else block(a[i], depth + 1) for i in idx) + "]"

    return block(arr, 0)


def _first_n_allows(store, node: str, first_n: int) -> bool:
    if first_n < 0:
        return True
    if store is None:
        return True
    with _counts_lock:
        counts = _counts.setdefault(store, {})
        seen = counts.get(node, 0)
        if seen >= first_n:
            return False
        counts[node] = seen + 1
    return True


def print_v1(store, node: str, message: str, data: Sequence[np.ndarray], first_n: int,
             summarize: int) -> None:
    """``tf.Print``'s side effect (counted per session ``store`` and node for ``first_n``)."""
    if not _first_n_allows(store, node, first_n):
        return
    text = message + "".join(f"[{summarize_v1(d, summarize)}]" for d in data)
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def format_v2(template: str, placeholder: str, inputs: Sequence[np.ndarray],
              summarize: int) -> str:
    pieces = template.split(placeholder)
    if len(pieces) != len(inputs) + 1:
        raise ValueError(f"the template has {len(pieces) - 1} placeholders for "
                         f"{len(inputs)} tensors")
    out = [pieces[0]]
    for value, piece in zip(inputs, pieces[1:]):
        out.append(summarize_v2(value, summarize))
        out.append(piece)
    return "".join(out)


def print_v2(template: str, placeholder: str, inputs: Sequence[np.ndarray], summarize: int,
             output_stream: str, end: str) -> None:
    """``tf.print``'s side effect: to ``stderr``, ``stdout`` or ``file://<path>`` (appended)."""
    text = format_v2(template, placeholder, inputs, summarize) + end
    if output_stream == "stderr":
        sys.stderr.write(text)
        sys.stderr.flush()
    elif output_stream == "stdout":
        sys.stdout.write(text)
        sys.stdout.flush()
    elif output_stream.startswith("file://"):
        with open(output_stream[len("file://"):], "a", encoding="utf-8") as f:
            f.write(text)
    else:
        raise ValueError(f"output_stream must be stderr, stdout or file://<path>, got "
                         f"{output_stream!r}")


def _print_host(store, node, attrs, value, *data):
    print_v1(store, node, attrs["message"], data, attrs["first_n"], attrs["summarize"])
    return []


def _print_v2_host(store, node, attrs, *inputs):
    print_v2(attrs["template"], attrs["placeholder"], inputs, attrs["summarize"],
             attrs["output_stream"], attrs["end"])
    return []


register_host_op("Print", _print_host)
register_host_op("_PrintV2", _print_v2_host)
