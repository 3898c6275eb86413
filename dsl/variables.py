"""``fl.Variable``: mutable state as ordinary graph ops, as in TensorFlow 1.x resource variables.

A variable is a ``VarHandleOp`` (named like the variable) plus the ops that use it:
``<name>/Assign`` (its initializer, an ``AssignVariableOp`` of the initial value),
``<name>/Read/ReadVariableOp`` (the value used when the variable appears in an expression),
and whatever assignments the program adds. The value itself lives in the session's runtime
state, outside any step, and persists across ``Session.run`` calls.

The variable's own ops (its initializer, reads, assignments, gathers, scatters) are created
under ``fl.colocate_with`` its handle, as in TensorFlow, so a device function such as
``fl.train.replica_device_setter`` places only the handle and everything else follows it.

Reads and updates run in graph order within a step: a read created before an assignment
sees the value before it (so a training step's forward pass reads the weights the optimizer
then updates). Use ``control_dependencies`` or the tensors ``assign*`` return to order them
otherwise.
"""
from __future__ import annotations

from typing import Callable, List, Optional

import numpy as np

from dsl.context import colocate_with, get_default_graph, name_scope
from dsl.ops import apply_op, convert_to_tensor
from compiler.ir.types import normalize_shape
from dsl.tensor import Operation, Tensor, static_shape
from dsl.tensor_shape import TensorShape
from runtime.dtypes import DType, as_dtype

__all__ = ["Variable", "global_variables", "trainable_variables", "local_variables",
           "global_variables_initializer", "variables_initializer", "local_variables_initializer",
           "initialize_all_variables", "report_uninitialized_variables", "is_variable_initialized",
           "assign", "assign_add", "assign_sub", "scatter_add", "scatter_sub", "scatter_update",
           "GraphKeys", "get_collection", "get_collection_ref", "add_to_collection",
           "add_to_collections", "moving_average_variables", "model_variables"]


class GraphKeys:
    """Collection names (TensorFlow's ``tf.GraphKeys``)."""
    GLOBAL_VARIABLES = "variables"
    VARIABLES = GLOBAL_VARIABLES
    LOCAL_VARIABLES = "local_variables"
    METRIC_VARIABLES = "metric_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    MODEL_VARIABLES = "model_variables"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    GLOBAL_STEP = "global_step"
    LOSSES = "losses"
    REGULARIZATION_LOSSES = "regularization_losses"
    UPDATE_OPS = "update_ops"
    SAVERS = "savers"
    SUMMARIES = "summaries"
    TRAIN_OP = "train_op"
    ACTIVATIONS = "activations"
    WEIGHTS = "weights"
    BIASES = "biases"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    QUEUE_RUNNERS = "queue_runners"


def _shape_list(shape) -> Optional[tuple]:
    if shape is None:
        return None
    if isinstance(shape, Tensor):
        raise TypeError("a variable's shape must be a Python list, not a tensor")
    return normalize_shape(shape)


class Variable:
    """A mutable tensor that outlives steps (``tf.Variable``, resource semantics).

    ``initial_value`` is a tensor, a numpy/Python value, a callable returning one, or an
    initializer (``fl.glorot_uniform_initializer(seed=1)``; then ``shape`` is required).
    ``constraint``: a function the optimizers apply to the value after each update.
    """

    def __init__(self, initial_value=None, trainable: bool = True, collections=None,
                 validate_shape: bool = True, name: Optional[str] = None, dtype=None,
                 shape=None, initializer=None, constraint=None):
        from dsl.init_ops import Initializer
        if initial_value is None:
            initial_value = initializer
        if initial_value is None:
            raise ValueError("fl.Variable needs an initial_value or an initializer")
        if constraint is not None and not callable(constraint):
            raise ValueError("The `constraint` argument must be a callable.")
        g = get_default_graph()
        self.graph = g
        self.trainable = bool(trainable)
        self._constraint = constraint
        dtype = None if dtype is None else as_dtype(dtype)
        with name_scope(name or "Variable") as scope:
            var_name = scope.rstrip("/")
            with name_scope("Initializer"):
                if isinstance(initial_value, Initializer):
                    if shape is None:
                        raise ValueError(f"variable '{var_name}': an initializer needs a shape")
                    init = initial_value(list(_shape_list(shape)), dtype=dtype or initial_value.dtype or DType.f32)
                elif callable(initial_value) and not isinstance(initial_value, (Tensor, np.ndarray)):
                    init = convert_to_tensor(initial_value(), dtype=dtype)
                else:
                    init = convert_to_tensor(initial_value, dtype=dtype)
            self._initial_value = init
            self._dtype = init.dtype
            init_shape = init.output.shape
            declared = _shape_list(shape) if shape is not None else init_shape
            if shape is not None and init_shape is not None:
                if len(init_shape) != len(declared) or any(
                        a is not None and b is not None and a != b
                        for a, b in zip(init_shape, declared)):
                    raise ValueError(f"variable '{var_name}': the initial value has shape "
                                     f"{list(init_shape)}, the declared shape is "
                                     f"{list(declared)}")
            if not validate_shape:
                declared = None if init_shape is None else tuple(None for _ in init_shape)
            self._shape = declared
            attrs = {"dtype": self._dtype, "shape": declared, "shared_name": var_name}
            self._handle = apply_op("VarHandleOp", [], attrs, name=scope)
            with colocate_with(self._handle):
                self._initializer_op = apply_op("AssignVariableOp", [self._handle, init],
                                                {"dtype": self._dtype}, name="Assign")
                with name_scope("Read"):
                    self._graph_element = apply_op("ReadVariableOp", [self._handle],
                                                   {"dtype": self._dtype})
        self._name = var_name
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        collections = list(collections)
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections.append(GraphKeys.TRAINABLE_VARIABLES)
        for c in collections:
            g.add_to_collection(c, self)

    # --- meta graphs ---------------------------------------------------------------------
    def to_proto(self, export_scope: Optional[str] = None) -> dict:
        """What a meta graph keeps of the variable (TensorFlow's ``VariableDef``, as JSON):
        the names of its handle, initializer, read and initial value, and ``trainable``."""
        return {"handle": self._handle.op.name, "initializer": self._initializer_op.name,
                "snapshot": self._graph_element.name,
                "initial_value": self._initial_value.name, "trainable": self.trainable}

    @classmethod
    def from_proto(cls, variable_def: dict, import_scope: str = "", graph=None) -> "Variable":
        """The variable of ``variable_def`` (``to_proto``) over ops already in ``graph`` (the
        default graph), their names prefixed with ``import_scope``; adds no op."""
        g = graph if graph is not None else get_default_graph()
        p = import_scope or ""
        self = cls.__new__(cls)
        self.graph = g
        self.trainable = bool(variable_def.get("trainable", True))
        self._constraint = None
        self._handle = Tensor(g.output(p + variable_def["handle"] + ":0"))
        self._initializer_op = Operation(g.node(p + variable_def["initializer"]))
        self._graph_element = Tensor(g.output(p + variable_def["snapshot"]))
        self._initial_value = Tensor(g.output(p + variable_def["initial_value"]))
        node = self._handle.op.node
        self._dtype = node.attrs["dtype"]
        shape = node.attrs.get("shape")
        self._shape = None if shape is None else tuple(shape)
        self._name = node.name
        return self

    # --- identity ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """``name:0``, as TensorFlow names a variable."""
        return f"{self._name}:0"

    @property
    def op(self) -> Operation:
        return self._handle.op

    @property
    def handle(self) -> Tensor:
        return self._handle

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        """The declared shape, as TF1's ``TensorShape``."""
        return TensorShape(self._shape)

    def get_shape(self) -> TensorShape:
        return TensorShape(self._shape)

    def _static_shape(self) -> Optional[tuple]:
        return self._shape

    @property
    def device(self) -> str:
        return self._handle.device

    @property
    def initializer(self) -> Operation:
        return self._initializer_op

    @property
    def constraint(self):
        """A projection the optimizers apply after each update (``var.assign(constraint(var))``),
        or None."""
        return self._constraint

    @property
    def initial_value(self) -> Tensor:
        return self._initial_value

    def __repr__(self) -> str:
        shape = "?" if self._shape is None else list(self._shape)
        return f"<fl.Variable '{self.name}' shape={shape} dtype={self._dtype.ir_name}>"

    # --- reading -------------------------------------------------------------------------
    def value(self) -> Tensor:
        """The variable's value as used in expressions (one read per variable, reused)."""
        g = self.graph
        if g._control_stack:
            return self.read_value()
        return self._graph_element

    def read_value(self) -> Tensor:
        """A new read (ordered after the control dependencies in effect)."""
        with name_scope(f"{self._name}/Read/"), colocate_with(self._handle):
            return apply_op("ReadVariableOp", [self._handle], {"dtype": self._dtype})

    def sparse_read(self, indices, name: Optional[str] = None) -> Tensor:
        """Rows ``indices`` of the variable (``ResourceGather``); its gradient is sparse."""
        indices = convert_to_tensor(indices)
        with colocate_with(self._handle):
            return apply_op("ResourceGather", [self._handle, indices], {"dtype": self._dtype},
                            name=name or "Gather")

    def _as_graph_tensor(self, dtype=None) -> Tensor:
        t = self.value()
        if dtype is not None and as_dtype(dtype) is not t.dtype:
            raise TypeError(f"variable {self.name} is {t.dtype}, expected {as_dtype(dtype)}")
        return t

    def eval(self, session=None):
        from dsl.session import get_default_session
        session = session or get_default_session()
        return session.run(self.read_value())

    def load(self, value, session=None) -> None:
        """Set the value from Python (``tf.Variable.load``), through the session's state."""
        from dsl.session import get_default_session
        session = session or get_default_session()
        session.store.variable(self._name, self._dtype, self._shape).assign(
            np.asarray(value, self._dtype.np))

    # --- updating ------------------------------------------------------------------------
    def _update(self, op: str, value, name, read_value: bool):
        value = convert_to_tensor(value, dtype=self._dtype)
        with colocate_with(self._handle):
            update = apply_op(op, [self._handle, value], {"dtype": self._dtype}, name=name or op)
        if not read_value:
            return update
        from dsl.context import control_dependencies
        with control_dependencies([update]):
            return self.read_value()

    def assign(self, value, use_locking: bool = False, name=None, read_value: bool = True):
        return self._update("AssignVariableOp", value, name, read_value)

    def assign_add(self, delta, use_locking: bool = False, name=None, read_value: bool = True):
        return self._update("AssignAddVariableOp", delta, name, read_value)

    def assign_sub(self, delta, use_locking: bool = False, name=None, read_value: bool = True):
        return self._update("AssignSubVariableOp", delta, name, read_value)

    def _scatter(self, op: str, sparse_delta, name) -> Operation:
        from dsl.indexed_slices import IndexedSlices
        if not isinstance(sparse_delta, IndexedSlices):
            raise TypeError(f"{op} takes an fl.IndexedSlices, got {type(sparse_delta).__name__}")
        values = convert_to_tensor(sparse_delta.values, dtype=self._dtype)
        with colocate_with(self._handle):
            return apply_op(op, [self._handle, sparse_delta.indices, values],
                            {"dtype": self._dtype}, name=name or op)

    def scatter_add(self, sparse_delta, use_locking: bool = False, name=None) -> Operation:
        return self._scatter("ResourceScatterAdd", sparse_delta, name)

    def scatter_sub(self, sparse_delta, use_locking: bool = False, name=None) -> Operation:
        return self._scatter("ResourceScatterSub", sparse_delta, name)

    def scatter_update(self, sparse_delta, use_locking: bool = False, name=None) -> Operation:
        return self._scatter("ResourceScatterUpdate", sparse_delta, name)

    def is_initialized(self) -> Tensor:
        with colocate_with(self._handle):
            return apply_op("VarIsInitializedOp", [self._handle], {}, name="IsInitialized")


def _install_operators() -> None:
    """The variable's value takes part in expressions like a tensor."""
    for dunder in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
                   "or", "xor"):
        for d in (f"__{dunder}__", f"__r{dunder}__"):
            fn = getattr(Tensor, d)
            setattr(Variable, d, lambda self, other, _fn=fn: _fn(self.value(), other))
    for d in ("__lt__", "__le__", "__gt__", "__ge__", "__neg__", "__abs__", "__invert__",
              "__getitem__"):
        if hasattr(Tensor, d):
            fn = getattr(Tensor, d)
            setattr(Variable, d, lambda self, *a, _fn=fn: _fn(self.value(), *a))


_install_operators()


# --- collections and initializers ------------------------------------------------------------
def get_collection(key: str, scope: Optional[str] = None) -> list:
    """The items of collection ``key`` (a copy); with ``scope``, those whose ``name`` starts
    with a match of the regular expression ``scope`` (``tf.get_collection``)."""
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key: str) -> list:
    """The collection ``key`` itself (a list the caller may change)."""
    return get_default_graph().get_collection_ref(key)


def add_to_collection(name: str, value) -> None:
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value) -> None:
    """Add ``value`` to each collection of ``names`` (a name or a list; repeats count once)."""
    names = (names,) if isinstance(names, str) else set(names)
    for name in names:
        add_to_collection(name, value)


def global_variables(scope: Optional[str] = None) -> List[Variable]:
    return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


def local_variables(scope: Optional[str] = None) -> List[Variable]:
    return get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def trainable_variables(scope: Optional[str] = None) -> List[Variable]:
    return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def moving_average_variables(scope: Optional[str] = None) -> List[Variable]:
    """The variables ``ExponentialMovingAverage.apply`` averages."""
    return get_default_graph().get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def model_variables(scope: Optional[str] = None) -> List[Variable]:
    return get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def variables_initializer(var_list, name: str = "init") -> Operation:
    """One op that runs the initializers of ``var_list``."""
    from dsl.control_ops import group
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer() -> Operation:
    return variables_initializer(global_variables(), name="init")


def local_variables_initializer() -> Operation:
    return variables_initializer(local_variables(), name="init_local")


initialize_all_variables = global_variables_initializer


def is_variable_initialized(variable: Variable) -> Tensor:
    return variable.is_initialized()


def report_uninitialized_variables(var_list=None, name: str = "report_uninitialized_variables"):
    """A bool vector: for each variable, whether it still needs a value (run it to list them)."""
    from dsl.array_ops import stack
    from dsl.math_ops import logical_not
    var_list = global_variables() if var_list is None else list(var_list)
    if not var_list:
        return convert_to_tensor(np.zeros([0], bool))
    with name_scope(name):
        return stack([logical_not(v.is_initialized()) for v in var_list])


# --- functional forms --------------------------------------------------------------------------
def assign(ref: Variable, value, name=None):
    return ref.assign(value, name=name)


def assign_add(ref: Variable, value, name=None):
    return ref.assign_add(value, name=name)


def assign_sub(ref: Variable, value, name=None):
    return ref.assign_sub(value, name=name)


def scatter_add(ref: Variable, indices, updates, name=None):
    from dsl.indexed_slices import IndexedSlices
    return ref.scatter_add(IndexedSlices(updates, indices), name=name)


def scatter_sub(ref: Variable, indices, updates, name=None):
    from dsl.indexed_slices import IndexedSlices
    return ref.scatter_sub(IndexedSlices(updates, indices), name=name)


def scatter_update(ref: Variable, indices, updates, name=None):
    from dsl.indexed_slices import IndexedSlices
    return ref.scatter_update(IndexedSlices(updates, indices), name=name)
