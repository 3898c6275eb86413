"""``fl.train.Optimizer``: the base of the optimizers, as TensorFlow 1.x's ``tf.train.Optimizer``.

An optimizer is a user-level library: ``apply_gradients`` adds ordinary ops to the graph
(variable reads, arithmetic, ``AssignVariableOp``/``AssignSubVariableOp`` and the
``ResourceScatter*`` ops); nothing in the compiler or the runtime knows about it.

The protocol is TF1's. ``compute_gradients(loss, var_list)`` returns ``(gradient, variable)``
pairs (a gradient may be None, a dense tensor, or ``fl.IndexedSlices``).
``apply_gradients(grads_and_vars, global_step)`` creates the slot variables (per-variable
state such as Momentum's accumulator, named ``<variable>/<OptimizerName>`` and kept in the
GLOBAL_VARIABLES collection so ``fl.global_variables_initializer()`` sets them), converts the
hyperparameters once per dtype (``_prepare``), adds one update per variable
(``_apply_dense`` or ``_apply_sparse``), ``_finish``-es (Adam updates its beta powers there),
and then increments ``global_step``. It returns one Operation.

Hyperparameters may be Python numbers, tensors, variables or callables returning one. They
are converted to each variable's dtype *directly* (a Python float becomes a float64 constant
for a float64 variable; TF1 goes through a float32 tensor first, which rounds it; flowc does
not), and a tensor of another dtype is cast to it.

Sparse gradients (``IndexedSlices``) update only the rows they name. An index may repeat;
as in TF1's ``_deduplicate_indexed_slices`` the slices of one index are summed first. flowc
has no ``Unique`` op, so deduplication keeps the indices as they are and computes, for each
position ``i``, the position of the first occurrence of ``indices[i]`` (an ``[n, n]``
``Equal`` and an ``ArgMax``: O(n^2) in the number of ids of one step, never in the number of
rows of the variable), sums the slices into their first positions with
``UnsortedSegmentSum`` (in TF's order) and gathers the sums back to every position
(``_DedupedSlices``). Optimizers then write slot rows with ``ResourceScatterUpdate`` (every
occurrence of an index writes the same recomputed row) and subtract the variable's rows with
``ResourceScatterSub`` at first occurrences only (the other occurrences subtract exact zeros),
which reproduces the arithmetic of TF1's ``ResourceSparseApply*`` kernels row for row.

Placement: slot variables and each variable's update ops are created under
``fl.colocate_with(var)``, as in TF1, so the place pass puts a variable, its slots and its
updates on one device (a ``loc:@var`` tag is a group key, so a step that fetches a slot alone
still places it with the others).
"""
from __future__ import annotations

import contextlib
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from dsl.array_ops import (concat, expand_dims, gather, identity, ones_like, reshape, shape,
                           size, zeros_like)
from dsl.array_ops import range as range_
from dsl.context import (colocate_with, control_dependencies, device, get_default_graph,
                         name_scope)
from dsl.control_ops import group
from dsl.gradients import gradients
from dsl.indexed_slices import IndexedSlices
from dsl.init_ops import Initializer, constant_initializer, ones_initializer, zeros_initializer
from dsl.math_ops import cast, equal, unsorted_segment_sum, where
from dsl.ops import constant, convert_to_tensor
from dsl.reduction_ops import argmax
from dsl.tensor import Operation, Tensor, static_shape
from dsl.variables import Variable, trainable_variables
from runtime.dtypes import DType

__all__ = ["Optimizer"]

# The collection apply_gradients adds its op to (tf.GraphKeys.TRAIN_OP).
TRAIN_OP = "train_op"


# --- sparse gradients ---------------------------------------------------------------------------
class _DedupedSlices:
    """An ``IndexedSlices`` whose repeated indices have been summed, kept at full length.

    ``indices``: as given (may repeat). ``values[i]``: the sum of all slices whose index is
    ``indices[i]`` (equal at every occurrence). ``first[i]``: whether ``i`` is the first
    occurrence of ``indices[i]``. ``unique_values``: ``values`` at first occurrences and zero
    elsewhere (what a linear scatter update, ``ResourceScatterAdd``, wants).
    """

    def __init__(self, grad: IndexedSlices):
        self.indices: Tensor = grad.indices
        with name_scope("deduplicate"):
            ids = grad.indices
            column = expand_dims(ids, 1)
            same = cast(equal(column, expand_dims(ids, 0)), DType.i32)       # [n, n]
            # A column of ones after the last keeps ArgMax's axis non-empty when n == 0;
            # for n > 0 it is never chosen (same[i, i] == 1 comes first).
            same = concat([same, ones_like(cast(column, DType.i32))], 1)    # [n, n + 1]
            first_pos = argmax(same, axis=1, output_type=ids.dtype)
            n = size(ids, out_type=ids.dtype)
            self.first: Tensor = equal(first_pos, range_(0, n, 1, dtype=ids.dtype))
            self.unique_values: Tensor = unsorted_segment_sum(grad.values, first_pos, n)
            self.values: Tensor = gather(self.unique_values, first_pos)
        self._mask: Optional[Tensor] = None

    def at_first(self, rows: Tensor) -> Tensor:
        """``rows`` at first occurrences, exact zeros elsewhere (so a scatter_sub of it changes
        each row once)."""
        if self._mask is None:
            rest = shape(self.values, out_type=DType.i32)[1:]
            mask_shape = concat([shape(self.first, out_type=DType.i32), ones_like(rest)], 0)
            self._mask = reshape(self.first, mask_shape)
        return where(self._mask, rows, zeros_like(rows))


def _var_key(var: Variable):
    """What slots are keyed by: the variable's handle node (unique, and kept alive)."""
    return var.op.node


def _check_variable(var) -> Variable:
    if not isinstance(var, Variable):
        raise TypeError(f"optimizers update fl.Variable objects, got {type(var).__name__} {var!r}")
    return var


class Optimizer:
    """Base class of the optimizers (``tf.train.Optimizer``); subclasses define
    ``_create_slots``, ``_prepare``, ``_apply_dense``, ``_apply_sparse`` and maybe ``_finish``.
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking: bool, name: str):
        if not name:
            raise ValueError("an optimizer needs a non-empty name")
        self._use_locking = use_locking        # as in TF1; updates are in place anyway
        self._name = name
        self._slots: Dict[str, Dict[object, Variable]] = {}
        self._non_slot_dict: Dict[Tuple[str, object], Variable] = {}
        self._hyper: Dict[str, object] = {}
        self._hyper_cache: Dict[Tuple[str, DType], Tensor] = {}

    def get_name(self) -> str:
        return self._name

    # --- gradients -------------------------------------------------------------------------
    def compute_gradients(self, loss, var_list=None, gate_gradients: int = GATE_OP,
                          aggregation_method=None, colocate_gradients_with_ops: bool = False,
                          grad_loss=None) -> List[Tuple[object, Variable]]:
        """``(gradient, variable)`` pairs of ``loss`` for ``var_list`` (default: the trainable
        variables). A gradient is None where ``loss`` does not depend on the variable.

        ``gate_gradients``: GATE_GRAPH makes every gradient wait for all of them; GATE_OP and
        GATE_NONE change nothing here (each op's input gradients come from one function).
        ``aggregation_method`` and ``colocate_gradients_with_ops`` are accepted for TF1
        compatibility and ignored (partial gradients are always summed with ``AddN``).
        """
        if gate_gradients not in (self.GATE_NONE, self.GATE_OP, self.GATE_GRAPH):
            raise ValueError(f"gate_gradients must be GATE_NONE, GATE_OP or GATE_GRAPH, got "
                             f"{gate_gradients!r}")
        if callable(loss) and not isinstance(loss, (Tensor, Variable)):
            loss = loss()
        loss = convert_to_tensor(loss)
        if not loss.dtype.is_floating:
            raise TypeError(f"the loss {loss.name} is {loss.dtype}; optimizers need a "
                            "floating-point loss")
        var_list = trainable_variables() if var_list is None else list(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        for v in var_list:
            _check_variable(v)
            if not v.dtype.is_floating:
                raise TypeError(f"variable {v.name} is {v.dtype}; optimizers update "
                                "floating-point variables only")
        if grad_loss is not None:
            grad_loss = convert_to_tensor(grad_loss, dtype=loss.dtype)
        grads = gradients(loss, var_list, grad_ys=None if grad_loss is None else [grad_loss])
        if gate_gradients == self.GATE_GRAPH:
            grads = _gate(grads)
        return list(zip(grads, var_list))

    # --- applying ------------------------------------------------------------------------
    def apply_gradients(self, grads_and_vars, global_step: Optional[Variable] = None,
                        name: Optional[str] = None) -> Operation:
        """One Operation that applies every gradient, then increments ``global_step`` (if
        given) by one. Pairs whose gradient is None are skipped."""
        grads_and_vars = tuple(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("No variables provided.")
        converted = []
        for g, v in grads_and_vars:
            _check_variable(v)
            if g is not None and not isinstance(g, IndexedSlices):
                g = convert_to_tensor(g)
            if g is not None and g.dtype != v.dtype:
                raise TypeError(f"the gradient of {v.name} is {g.dtype}, the variable is "
                                f"{v.dtype}")
            converted.append((g, v))
        var_list = [v for g, v in converted if g is not None]
        if not var_list:
            raise ValueError("No gradients provided for any variable: "
                             f"{[v.name for _, v in converted]}.")
        if global_step is not None and not isinstance(global_step, Variable):
            raise TypeError("global_step must be an fl.Variable (see "
                            "fl.train.get_or_create_global_step())")
        self._create_slots(var_list)
        with name_scope(name or self._name) as scope:
            self._hyper_cache = {}
            self._prepare_dtypes(sorted({v.dtype for v in var_list}, key=lambda d: d.ir_name))
            update_ops = []
            for grad, var in converted:
                if grad is None:
                    continue
                with name_scope("update_" + var.op.name), _colocated(var):
                    if isinstance(grad, IndexedSlices):
                        update = self._apply_sparse_duplicate_indices(grad, var)
                    else:
                        update = self._apply_dense(grad, var)
                    if getattr(var, "constraint", None) is not None:
                        with control_dependencies([update]):      # project after the update
                            update = var.assign(var.constraint(var), read_value=False)
                    update_ops.append(update)
            if global_step is None:
                apply_updates = self._finish(update_ops, scope)
            else:
                with control_dependencies([self._finish(update_ops, "update")]):
                    with _colocated(global_step):
                        apply_updates = global_step.assign_add(1, read_value=False, name=scope)
        get_default_graph().add_to_collection(TRAIN_OP, apply_updates)
        return apply_updates

    def minimize(self, loss, global_step: Optional[Variable] = None, var_list=None,
                 gate_gradients: int = GATE_OP, aggregation_method=None,
                 colocate_gradients_with_ops: bool = False, name: Optional[str] = None,
                 grad_loss=None) -> Operation:
        """``compute_gradients`` then ``apply_gradients``: one training step's Operation."""
        grads_and_vars = self.compute_gradients(
            loss, var_list=var_list, gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        if all(g is None for g, _ in grads_and_vars):
            raise ValueError("No gradients provided for any variable, check your graph for ops "
                             "that do not support gradients, between variables "
                             f"{[v.name for _, v in grads_and_vars]} and loss {loss}.")
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    # --- slots -----------------------------------------------------------------------------
    def get_slot_names(self) -> List[str]:
        """The names of the slots this optimizer creates (``"m"``, ``"v"``, ...), sorted."""
        return sorted(self._slots)

    def get_slot(self, var: Variable, name: str) -> Optional[Variable]:
        """The slot variable ``name`` of ``var``, or None if there is none."""
        return self._slots.get(name, {}).get(_var_key(var))

    def variables(self) -> List[Variable]:
        """The optimizer's own variables (slots and non-slot ones) of the default graph, by name."""
        g = get_default_graph()
        own = [v for v in self._non_slot_dict.values() if v.graph is g]
        for slots in self._slots.values():
            own.extend(v for v in slots.values() if v.graph is g)
        return sorted(own, key=lambda v: v.name)

    def _slot_dict(self, slot_name: str) -> Dict[object, Variable]:
        return self._slots.setdefault(slot_name, {})

    def _get_or_make_slot_with_initializer(self, var: Variable, initializer, slot_name: str,
                                           op_name: str) -> Variable:
        """The slot ``slot_name`` of ``var``: a non-trainable variable named
        ``<var>/<op_name>`` (uniquified), of ``var``'s dtype and shape, on ``var``'s device."""
        slots = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in slots:
            slots[key] = _create_slot(var, initializer, f"{var.op.name}/{op_name}")
        return slots[key]

    def _zeros_slot(self, var: Variable, slot_name: str, op_name: str) -> Variable:
        return self._get_or_make_slot_with_initializer(var, zeros_initializer(), slot_name,
                                                       op_name)

    def _create_non_slot_variable(self, initial_value, name: str,
                                  colocate_with: Variable) -> Variable:
        """A variable of the optimizer not tied to one model variable (Adam's beta powers),
        one per graph, named ``name`` at the top level, on ``colocate_with``'s device."""
        g = colocate_with.graph
        key = (name, g)
        v = self._non_slot_dict.get(key)
        if v is None:
            with g.as_default(), _init_scope(), _colocated(colocate_with, True):
                v = Variable(initial_value, trainable=False, name=name)
            self._non_slot_dict[key] = v
        return v

    def _get_non_slot_variable(self, name: str, graph=None) -> Optional[Variable]:
        g = graph or get_default_graph()
        return self._non_slot_dict.get((name, g))

    # --- hyperparameters -------------------------------------------------------------------
    def _set_hyper(self, name: str, value) -> None:
        if value is None:
            raise ValueError(f"{type(self).__name__}: hyperparameter '{name}' is None")
        self._hyper[name] = value

    def _prepare_dtypes(self, dtypes: Sequence[DType]) -> None:
        """Convert every hyperparameter to each dtype in use (once per ``apply_gradients``)."""
        for dtype in dtypes:
            for name in self._hyper:
                self._get_hyper(name, dtype)
            self._prepare(dtype)

    def _prepare(self, dtype: DType) -> None:
        """Hook: tensors a subclass computes once per dtype before the updates."""

    def _get_hyper(self, name: str, dtype: DType) -> Tensor:
        """Hyperparameter ``name`` as a scalar tensor of ``dtype`` (no detour through float32)."""
        key = (name, dtype)
        t = self._hyper_cache.get(key)
        if t is None:
            value = self._hyper[name]
            if callable(value) and not isinstance(value, (Tensor, Variable)):
                value = value()
            if isinstance(value, (Tensor, Variable)):
                t = cast(convert_to_tensor(value), dtype, name=f"{name}_cast")
            else:
                t = constant(value, dtype=dtype, name=name)
            self._hyper_cache[key] = t
        return t

    def _get_one_minus(self, name: str, dtype: DType) -> Tensor:
        """``1 - hyperparameter`` in ``dtype`` (as the TF kernels compute ``T(1) - beta``)."""
        key = ("1-" + name, dtype)
        t = self._hyper_cache.get(key)
        if t is None:
            t = constant(1, dtype=dtype, name="one") - self._get_hyper(name, dtype)
            self._hyper_cache[key] = t
        return t

    # --- what subclasses define ----------------------------------------------------------
    def _create_slots(self, var_list: List[Variable]) -> None:
        """Hook: create the slot (and non-slot) variables ``var_list`` needs."""

    def _apply_dense(self, grad: Tensor, var: Variable):
        raise NotImplementedError(f"{type(self).__name__} has no dense update")

    def _apply_sparse(self, grad: _DedupedSlices, var: Variable):
        raise NotImplementedError(f"{type(self).__name__} has no sparse update")

    def _apply_sparse_duplicate_indices(self, grad: IndexedSlices, var: Variable):
        """Sum the slices of repeated indices, then ``_apply_sparse`` (TF1's rule)."""
        return self._apply_sparse(_DedupedSlices(grad), var)

    def _finish(self, update_ops: list, name_scope_: str) -> Operation:
        """One op running after all ``update_ops`` (``name_scope_`` ending in "/" names it
        exactly)."""
        return group(*update_ops, name=name_scope_)

    # --- helpers for subclasses ------------------------------------------------------------
    @staticmethod
    def _write_rows(slot: Variable, grad: _DedupedSlices, rows: Tensor) -> Operation:
        """``slot[indices] = rows`` (repeated indices write the same row)."""
        return slot.scatter_update(IndexedSlices(rows, grad.indices), name="update_rows")

    @staticmethod
    def _subtract_rows(var: Variable, grad: _DedupedSlices, rows: Tensor) -> Operation:
        """``var[index] -= rows[first occurrence of index]``, once per distinct index."""
        return var.scatter_sub(IndexedSlices(grad.at_first(rows), grad.indices),
                               name="subtract_rows")

    def __repr__(self) -> str:
        return f"<fl.train.{type(self).__name__} '{self._name}'>"


# --- module helpers -------------------------------------------------------------------------------
def _gate(grads: list) -> list:
    """Each gradient again, available only once all of them are (GATE_GRAPH)."""
    parts = []
    for g in grads:
        if isinstance(g, IndexedSlices):
            parts.extend([g.values, g.indices])
        elif g is not None:
            parts.append(g)
    if not parts:
        return grads
    gate = group(*parts, name="gradients_gate")
    out = []
    with control_dependencies([gate]):
        for g in grads:
            if isinstance(g, IndexedSlices):
                out.append(IndexedSlices(identity(g.values), identity(g.indices), g.dense_shape))
            else:
                out.append(None if g is None else identity(g))
    return out


@contextlib.contextmanager
def _init_scope():
    """Create variables at the top level: no name scope, device or control dependencies
    (TF's ``init_scope``), whatever block ``apply_gradients`` was called in."""
    with control_dependencies(None), name_scope(None), device(None):
        yield


@contextlib.contextmanager
def _colocated(var: Variable, ignore_existing: bool = False):
    """Ops created inside are placed with ``var`` (``fl.colocate_with``, as in TF1)."""
    with colocate_with(var, ignore_existing=ignore_existing):
        yield


def _create_slot(var: Variable, initializer, name: str) -> Variable:
    """A slot variable for ``var`` (``slot_creator.create_slot``): same dtype, shape, device."""
    with var.graph.as_default(), _init_scope(), _colocated(var, ignore_existing=True):
        shape_known = static_shape(var) is not None and all(d is not None for d in static_shape(var))
        if isinstance(initializer, Initializer):
            if shape_known:
                return Variable(initializer, trainable=False, name=name, dtype=var.dtype,
                                shape=list(static_shape(var)))
            init = lambda: _initializer_like(var, initializer)   # noqa: E731
            return Variable(init, trainable=False, name=name, dtype=var.dtype,
                            validate_shape=False)
        return Variable(initializer, trainable=False, name=name, dtype=var.dtype)


def _initializer_like(var: Variable, initializer: Initializer) -> Tensor:
    """The initializer's value with the shape of ``var``'s initial value (shape unknown
    until run time): only zeros, ones and scalar constants can do that."""
    base = zeros_like(var.initial_value)
    if isinstance(initializer, zeros_initializer):
        return base
    if isinstance(initializer, ones_initializer):
        return ones_like(base)
    if isinstance(initializer, constant_initializer) and np.ndim(initializer.value) == 0:
        return base + constant(initializer.value, dtype=var.dtype)
    raise ValueError(f"a slot for {var.name}, whose shape is not fully known, needs a zeros, "
                     "ones or scalar constant initializer")
