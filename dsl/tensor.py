"""``Tensor`` and ``Operation``: the user-facing handles on IR outputs and nodes, with the
operator overloads a TensorFlow user expects."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from compiler.ir.graph import Node, Output
from compiler.ir.types import TensorType
from dsl.tensor_shape import TensorShape, as_shape
from runtime.dtypes import DType, as_dtype


class Operation:
    """A node of the graph, as ``tf.Operation``."""

    __slots__ = ("node",)

    def __init__(self, node: Node):
        self.node = node

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def type(self) -> str:
        return self.node.op

    @property
    def graph(self):
        return self.node.graph

    @property
    def device(self) -> str:
        return self.node.device

    @property
    def inputs(self) -> List["Tensor"]:
        return [Tensor(i) for i in self.node.inputs]

    @property
    def outputs(self) -> List["Tensor"]:
        return [Tensor(o) for o in self.node.outputs]

    @property
    def control_inputs(self) -> List["Operation"]:
        return [Operation(c) for c in self.node.control_inputs]

    @property
    def location(self):
        """Where the op was created (``file:line:col`` of the user's code), or None."""
        return self.node.location

    def values(self) -> tuple:
        """The op's outputs, as ``tf.Operation.values()``."""
        return tuple(self.outputs)

    def run(self, feed_dict=None, session=None) -> None:
        """Run this operation in ``session`` or the default one (``tf.Operation.run``)."""
        from dsl.session import get_default_session
        (session or get_default_session()).run(self, feed_dict)

    def get_attr(self, name: str):
        try:
            return self.node.attrs[name]
        except KeyError:
            raise ValueError(f"operation '{self.name}' ({self.type}) has no attr '{name}'; it has "
                             f"{', '.join(sorted(self.node.attrs)) or 'none'}") from None

    def __eq__(self, other):
        return isinstance(other, Operation) and other.node is self.node

    def __hash__(self):
        return hash(id(self.node))

    def __repr__(self):
        return f"<fl.Operation '{self.name}' type={self.type}>"


class Tensor:
    """One output of an operation, as ``tf.Tensor``."""

    __slots__ = ("output", "_hash")
    __array_priority__ = 100     # numpy defers to our operators

    def __init__(self, output: Output):
        self.output = output
        self._hash = hash(output)    # a feed_dict hashes its keys on every run

    @property
    def op(self) -> Operation:
        return Operation(self.output.node)

    @property
    def value_index(self) -> int:
        return self.output.index

    @property
    def name(self) -> str:
        return self.output.name

    @property
    def dtype(self) -> DType:
        return self.output.dtype

    @property
    def shape(self) -> TensorShape:
        """The static shape, as TF1's ``TensorShape`` (``x.shape[1].value``,
        ``x.get_shape().as_list()``); ``fl.shape(x)`` is the shape at run time."""
        return TensorShape(self.output.shape)

    def get_shape(self) -> TensorShape:
        return TensorShape(self.output.shape)

    def set_shape(self, shape) -> None:
        """Refine the static shape with what the caller knows (``tf.Tensor.set_shape``): the
        known dims of ``shape`` must agree with the tensor's; ops built after this see the
        merged shape, and the compiler keeps it as the node's declared type."""
        old = TensorShape(self.output.shape)
        try:
            merged = old.merge_with(shape)
        except ValueError:
            raise ValueError(f"Tensor's shape {old} is not compatible with supplied shape "
                             f"{as_shape(shape)}.") from None
        node, index = self.output.node, self.output.index
        types = list(node.output_types)
        types[index] = TensorType(types[index].dtype, merged._tuple())
        node.output_types = types

    @property
    def graph(self):
        return self.output.node.graph

    @property
    def device(self) -> str:
        return self.output.node.device

    def eval(self, feed_dict=None, session=None):
        """This tensor's value, run in ``session`` or the default one (``tf.Tensor.eval``)."""
        from dsl.session import get_default_session
        return (session or get_default_session()).run(self, feed_dict)

    def consumers(self) -> List[Operation]:
        """Operations that read this tensor as data, in graph order."""
        node, index = self.output.node, self.output.index
        users = [u for u in node.graph if u in node.users
                 and any(i.node is node and i.index == index for i in u.inputs)]
        return [Operation(u) for u in users]

    def __eq__(self, other):          # identity, as in TensorFlow 1.x (use fl.equal for values)
        return isinstance(other, Tensor) and other.output == self.output

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"<fl.Tensor '{self.name}' {self.output.type}>"

    def __bool__(self):
        raise TypeError("a symbolic fl.Tensor has no truth value; use fl.cond or run it in a Session")

    def __len__(self):
        s = self.output.shape
        if s is None or not s or s[0] is None:
            raise TypeError(f"len() of a tensor with unknown first dim: {self.output.type}")
        return s[0]

    def __iter__(self):
        raise TypeError("fl.Tensor is not iterable; use fl.unstack")

    # operators are attached by dsl.math_ops (see _install_operators there)


def as_node(x) -> Node:
    """A Node from an Operation, Tensor, Node or Output (for control dependencies, targets)."""
    if isinstance(x, Operation):
        return x.node
    if isinstance(x, Tensor):
        return x.output.node
    if isinstance(x, Node):
        return x
    if isinstance(x, Output):
        return x.node
    if hasattr(x, "_as_graph_tensor"):               # a variable: its value
        return x._as_graph_tensor().output.node
    raise TypeError(f"expected an fl.Operation or fl.Tensor, got {type(x).__name__}")


def static_shape(x) -> Optional[tuple]:
    """The static shape of a tensor, variable or shape as the IR keeps it: a tuple of ints and
    None, or None for an unknown rank (what the library's own code reads; users see
    ``x.shape``, a TensorShape). Numpy values give their shape."""
    if isinstance(x, Tensor):
        return x.output.shape
    if isinstance(x, TensorShape):
        return x._tuple()
    if isinstance(x, Output):
        return x.shape
    if hasattr(x, "_static_shape"):                  # a variable
        return x._static_shape()
    if hasattr(x, "_as_graph_tensor"):
        return x._as_graph_tensor().output.shape
    if x is None or isinstance(x, tuple):
        return x
    return tuple(np.shape(x))


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)
