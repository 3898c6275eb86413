"""TensorFlow's Python keyword names for ``fl.raw_ops``.

``tf.raw_ops.Sum(input=x, axis=0)`` takes the names of TensorFlow's Python API definitions
(its ``api_def`` "visible" names), which differ from the GraphDef argument names for a few
ops (``Sum``'s input ``reduction_indices`` is ``axis``). The IR, GraphDefs and the op registry
keep the GraphDef names; ``fl.raw_ops`` accepts both, so a TF program calling ``tf.raw_ops``
runs with only its import changed.

The table holds every op flowc registers whose Python names differ from its GraphDef names.
It was read off TensorFlow 2.20 by comparing ``inspect.signature(tf.raw_ops.X)`` with
``X``'s ``OpDef`` for each op flowc has; ``tests/dsl/test_raw_ops_names.py`` repeats that
comparison where TensorFlow is installed.
"""
from __future__ import annotations

from typing import Dict

_REDUCTION = {"reduction_indices": "axis"}

# op -> {GraphDef input or attr name: TensorFlow's Python keyword name}
PYTHON_NAMES: Dict[str, Dict[str, str]] = {
    "All": _REDUCTION, "Any": _REDUCTION, "Max": _REDUCTION, "Mean": _REDUCTION,
    "Min": _REDUCTION, "Prod": _REDUCTION, "Sum": _REDUCTION,
    "ExpandDims": {"dim": "axis"},
    "Split": {"split_dim": "axis"},
    "SplitV": {"split_dim": "axis"},
    "Squeeze": {"squeeze_dims": "axis"},
    "Select": {"t": "x", "e": "y"},
}


def graph_name(op: str, keyword: str) -> str:
    """The GraphDef name of ``op``'s argument that Python calls ``keyword`` (itself when the
    two agree)."""
    for graph, python in PYTHON_NAMES.get(op, {}).items():
        if python == keyword:
            return graph
    return keyword
