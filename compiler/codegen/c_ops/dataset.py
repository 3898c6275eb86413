"""The C lowering of the dataset and iterator ops (``compiler/ops/dataset.py``): host calls into
the runtime's datasets (``runtime/datasets.py``).

Each kernel (``codegen_templates/c/dataset.c.j2``) passes its tensor inputs and a JSON literal
of what the runtime needs: a dataset op records its definition under its node's name
(``DatasetDefine``: the op, its attrs, the names of its input datasets), ``MakeIterator`` and
``OneShotIterator`` start an iterator, ``IteratorGetNext`` takes an element into the outputs.
Handles carry no data (NULL): the runtime finds datasets and iterators by name, as it finds
gradient accumulators.
"""
from __future__ import annotations

import json
from typing import List

from compiler.codegen.c_ops.io import c_bytes_literal
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.dataset import (_dataset_of, _iterator_of, dataset_inputs, iterator_key,
                                  json_attrs)
from runtime.datasets import DATASET_OPS


def _literal(attrs: dict) -> str:
    return c_bytes_literal(json.dumps(attrs, separators=(",", ":")))


def _render(kc: KernelContext, host_op: str, attrs: dict, host_inputs=(), host_outputs=(),
            handle_outputs=()) -> str:
    return kc.render("dataset.c.j2", host_op=host_op, attrs_json=_literal(attrs),
                     host_inputs=list(host_inputs), host_outputs=list(host_outputs),
                     handle_outputs=list(handle_outputs))


def _dataset_c(kc: KernelContext) -> str:
    node = kc.node
    ds = dataset_inputs(node)
    attrs = {"key": node.name, "op": node.op, "attrs": json_attrs(node.attrs),
             "inputs": [_dataset_of(node, i).name for i in ds]}
    tensors = [t for i, t in enumerate(kc.inputs) if i not in ds]
    return _render(kc, "DatasetDefine", attrs, host_inputs=tensors, handle_outputs=kc.outputs)


def _iterator_c(kc: KernelContext) -> str:
    return f"{kc.out.var}.data = NULL;   /* the iterator lives in the runtime */"


def _one_shot_c(kc: KernelContext) -> str:
    attrs = {"iterator": iterator_key(kc.node), "dataset": kc.node.attrs["dataset_factory"]}
    return _render(kc, "OneShotIterator", attrs, handle_outputs=kc.outputs)


def _make_iterator_c(kc: KernelContext) -> str:
    attrs = {"iterator": iterator_key(_iterator_of(kc.node, 1)),
             "dataset": _dataset_of(kc.node, 0).name}
    return _render(kc, "MakeIterator", attrs)


def _get_next_c(kc: KernelContext) -> str:
    attrs = {"iterator": iterator_key(_iterator_of(kc.node, 0)),
             "output_types": [t.ir_name for t in kc.node.attrs["output_types"]]}
    return _render(kc, "IteratorGetNext", attrs, host_outputs=kc.outputs)


def _get_next_c_dims(kc: KernelContext) -> List[List[str]]:
    """Static dims as literals; a dim the element decides is 0 here (the runtime allocates the
    output and sets its dims)."""
    return [[str(d) if d is not None else "0" for d in o.shape] for o in kc.outputs]


for _op in DATASET_OPS:
    set_c_kernel(_op, _dataset_c)
set_c_kernel("IteratorV2", _iterator_c)
set_c_kernel("OneShotIterator", _one_shot_c)
set_c_kernel("MakeIterator", _make_iterator_c)
set_c_kernel("IteratorGetNext", _get_next_c, _get_next_c_dims)
