"""The element shapes of an imported graph's TensorLists, from the items put in them.

flowc's lists are dense tensors ``[n, *element_shape]`` (``compiler/ops/tensor_list.py``), so a
list's elements need a known rank when the list is made, and each dim known then is one less
to find at run time. TensorFlow often makes a list before anything says its element shape
(``tf.TensorArray(tf.float32, size=n)`` gives ``TensorListReserve`` the element shape ``-1``);
the items later set into it or pushed onto it, in a loop body, have it. As XLA does, the shape
is taken from those items: ``refine_list_shapes`` follows each new list through the ops that
pass a list on (loop and cond primitives, ``Identity``, the list ops that return the list) to
every ``TensorListSetItem`` and ``TensorListPushBack`` into it, merges their items' static
shapes, and gives the list's ``element_shape`` input that shape (a new constant) in the flat
GraphDef, which is then imported again. ``check_list_shapes`` refuses, naming the node, a list
whose rank is still unknown.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import numpy as np

from compiler.interop.graphdef import GraphDefImportError
from compiler.interop.protos import tf_protos
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.types import merge_shapes, shape_str

NEW_LIST_OPS = ("TensorListReserve", "EmptyTensorList")
# ops whose output is (a version of) the list at input 0, and which input holds an item
_LIST_TO_LIST = {"TensorListSetItem": 2, "TensorListPushBack": 1, "TensorListResize": None,
                 "TensorListPopBack": None}
_PASS_THROUGH = ("Identity", "Snapshot", "StopGradient", "Enter", "Exit", "NextIteration",
                 "Switch", "Merge")


def _items(new_list: Node) -> List[Tuple[Node, Optional[tuple]]]:
    """The (node, item shape) of every item put into the list ``new_list`` makes."""
    found: List[Tuple[Node, Optional[tuple]]] = []
    seen: Set[Output] = set()
    todo = [new_list.output(0)]
    while todo:
        out = todo.pop()
        if out in seen:
            continue
        seen.add(out)
        for node, k in _users(out):
            if node.op in _PASS_THROUGH:
                todo.extend(node.outputs if node.op == "Switch" else [node.output(0)])
            elif node.op in _LIST_TO_LIST and k == 0:
                item = _LIST_TO_LIST[node.op]
                if item is not None:
                    found.append((node, node.inputs[item].shape))
                todo.append(node.output(0))
    return found


def _users(out: Output) -> List[Tuple[Node, int]]:
    """(reader, input position) of every data use of ``out``."""
    return [(u, k) for u in out.node.output_users(out.index)
            for k, i in enumerate(u.inputs) if i == out]


def _element_shape(node: Node) -> Optional[tuple]:
    shape = node.output_types[0].shape
    return None if shape is None else tuple(shape[1:])


def refine_list_shapes(flat_gd, graph: Graph, path: str):
    """``flat_gd`` with the element shapes its new lists' items tell (a copy), or None when
    they tell nothing new."""
    changes: Dict[str, tuple] = {}
    for node in graph:
        if node.op not in NEW_LIST_OPS:
            continue
        shape = _element_shape(node)
        if shape is not None and all(d is not None for d in shape):
            continue
        merged = shape
        for writer, item in _items(node):
            try:
                merged = merge_shapes(merged, item)
            except ValueError:
                raise GraphDefImportError(
                    f"{writer.location}: node '{writer.name}' ({writer.op}): an item of shape "
                    f"{shape_str(item)} into the TensorList that '{node.name}' makes, whose "
                    f"elements are {shape_str(merged)}: flowc's lists hold elements of one "
                    "shape") from None
        if merged != shape and merged is not None:
            changes[node.name] = merged
    if not changes:
        return None
    return _with_element_shapes(flat_gd, changes)


def _with_element_shapes(flat_gd, changes: Dict[str, tuple]):
    pb = tf_protos()
    gd = pb.GraphDef()
    gd.CopyFrom(flat_gd)
    names = {nd.name for nd in gd.node}
    replaced: Set[str] = set()
    for nd in list(gd.node):
        if nd.name not in changes:
            continue
        shape_type = nd.attr["shape_type"].type if "shape_type" in nd.attr else 3
        dtype = np.int64 if shape_type == 9 else np.int32
        value = np.array([-1 if d is None else d for d in changes[nd.name]], dtype=dtype)
        name, k = f"{nd.name}/element_shape", 0
        while name in names:
            k += 1
            name = f"{nd.name}/element_shape_{k}"
        names.add(name)
        const = gd.node.add(name=name, op="Const")
        const.attr["dtype"].type = shape_type
        t = const.attr["value"].tensor
        t.dtype = shape_type
        t.tensor_shape.dim.add(size=value.size)
        t.tensor_content = value.astype(dtype).tobytes()
        for key in ("_flowc_location",):
            if key in nd.attr:
                const.attr[key].CopyFrom(nd.attr[key])
        control = [i for i in nd.input if i.startswith("^")]
        data = [i for i in nd.input if not i.startswith("^")]
        if data:
            replaced.add(data[0].split(":")[0])
            data[0] = name
        del nd.input[:]
        nd.input.extend(data + control)
    _drop_unread_constants(gd, replaced)
    return gd


def _drop_unread_constants(gd, names) -> None:
    """Remove the constants ``names`` that nothing reads any more (no outputs of the model)."""
    read = {i.lstrip("^").split(":")[0] for nd in gd.node for i in nd.input}
    kept = [nd for nd in gd.node if not (nd.name in names and nd.name not in read
                                         and nd.op == "Const")]
    if len(kept) != len(gd.node):
        del gd.node[:]
        gd.node.extend(kept)


def check_list_shapes(graph: Graph) -> None:
    """Every new list's elements have a known rank (flowc's lists are dense tensors)."""
    for node in graph:
        if node.op in NEW_LIST_OPS and node.output_types[0].shape is None:
            raise GraphDefImportError(
                f"{node.location}: node '{node.name}' ({node.op}): the elements of this "
                "TensorList have an unknown rank, and no TensorListSetItem or "
                "TensorListPushBack into it tells their shape (flowc's lists are dense "
                "tensors: give the list an element_shape)")
