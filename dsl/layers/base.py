"""The base of ``fl.layers``: TensorFlow 1.x's ``tf.layers.Layer``.

A layer owns a variable scope, chosen the first time it is called or makes a weight: the
``name`` it was given (the functional forms, ``fl.layers.dense(x, 10, name="fc")``, use exactly
that scope, so a second layer of that name needs ``reuse=True``), else a unique one from its
class name (``dense``, ``dense_1``, ... as ``variable_scope(None, default_name=...)`` picks
them). Weights are ``get_variable``s of that scope (``dense/kernel``, ``dense/bias``); the ops
of every call go to the name scope the scope opened first (``dense/MatMul``); a layer called
again reuses its weights. A regularizer's loss goes to ``GraphKeys.REGULARIZATION_LOSSES``
when its weight is made, and ``updates`` (batch normalization's moving averages) to
``GraphKeys.UPDATE_OPS`` after each call.

``training`` (dropout, batch normalization) is TensorFlow 1.x's switch
(``dsl/training_switch.py``): a Python bool picks one behaviour when the graph is built; a
scalar bool tensor (usually a ``placeholder_with_default(False, [])``) picks at run time,
without a ``cond``: both behaviours are built and ``where`` selects (``select_by_training``);
a step that leaves such a switch unfed folds to the inference side.
"""
from __future__ import annotations

import re
from typing import Callable, List, Optional

from dsl.context import get_default_graph, name_scope
from dsl.ops import convert_to_tensor
from dsl.training_switch import constant_switch, smart_select
from dsl.variable_scope import VariableScope, variable_scope
from dsl.variables import GraphKeys, Variable
from runtime.dtypes import DType, as_dtype

__all__ = ["Layer", "InputSpec", "training_value", "select_by_training"]


def _snake_case(name: str) -> str:
    """Keras' layer names from class names: ``Conv2D`` -> ``conv2d``, ``MaxPooling2D`` ->
    ``max_pooling2d``, ``BatchNormalization`` -> ``batch_normalization``."""
    s = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return s if not s.startswith("_") else "private" + s


def _switch(training):
    """``training`` as ``dsl/training_switch.py`` takes it: None is False (TF1 layers' default
    learning phase) and a bool variable is its value."""
    if training is None:
        return False
    if hasattr(training, "_as_graph_tensor"):
        return training._as_graph_tensor()
    return training


def training_value(training) -> Optional[bool]:
    """``training`` as a Python bool when it is known while building (a bool, or a constant
    tensor), else None (a tensor fed at run time); anything but a Python bool or a scalar bool
    tensor is a TypeError."""
    return constant_switch(_switch(training))


def select_by_training(training, when_training: Callable, when_not: Callable):
    """``when_training()`` or ``when_not()``: one of them while building when ``training`` is
    known then, else both, selected per step with ``where(training, ...)`` (elementwise over
    a list or tuple of results): ``smart_select`` of ``dsl/training_switch.py``."""
    return smart_select(_switch(training), when_training, when_not, name="select")


class InputSpec:
    """What a layer accepts: ``dtype``, ``shape``, ``ndim``, ``max_ndim``, ``min_ndim`` and
    ``axes`` (dims that must have a given size)."""

    def __init__(self, dtype=None, shape=None, ndim=None, max_ndim=None, min_ndim=None,
                 axes=None):
        self.dtype = dtype
        self.shape = shape
        self.ndim = len(shape) if shape is not None else ndim
        self.max_ndim = max_ndim
        self.min_ndim = min_ndim
        self.axes = axes or {}


class Layer:
    """A TensorFlow 1.x layer: ``build(input_shape)`` makes its weights with ``add_weight``
    once, ``call(inputs, ...)`` adds its ops; ``layer(inputs)`` (or ``layer.apply``) does both
    inside the layer's scopes."""

    def __init__(self, trainable: bool = True, name: Optional[str] = None, dtype=None,
                 activity_regularizer=None, _scope=None, _reuse=None, **kwargs):
        unknown = set(kwargs) - {"input_shape", "batch_input_shape", "batch_size", "weights",
                                 "autocast", "dynamic"}
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown keyword argument(s) "
                            f"{', '.join(sorted(unknown))}")
        self.trainable = bool(trainable)
        self._dtype = None if dtype is None else as_dtype(dtype)
        self._reuse = _reuse
        self.built = False
        self.activity_regularizer = activity_regularizer
        self.input_spec: Optional[InputSpec] = None
        self._trainable_weights: List[Variable] = []
        self._non_trainable_weights: List[Variable] = []
        self._updates: list = []
        self._losses: list = []
        self._graph = get_default_graph()
        base = _snake_case(type(self).__name__)
        if isinstance(name, VariableScope):
            self._base_name = name.name
            self._name = self._unique_layer_name(base)
        elif name:
            self._base_name = self._name = name
        else:
            self._name = self._unique_layer_name(base)
            self._base_name = base
        self._scope: Optional[VariableScope] = None
        self._current_scope: Optional[VariableScope] = None
        if _scope:
            with variable_scope(_scope) as captured:
                self._scope = captured

    def _unique_layer_name(self, base: str) -> str:
        counts = self._graph.__dict__.setdefault("_layer_name_counts", {})
        n = counts.get(base, 0)
        counts[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    # --- what TensorFlow exposes -------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def scope_name(self) -> str:
        if self._scope is None:
            raise ValueError(f'No name available for layer scope because the layer '
                             f'"{self._name}" has not been used yet. The scope name is '
                             'determined the first time the layer instance is called. You '
                             'must therefore call the layer before querying `scope_name`.')
        return self._scope.name

    @property
    def trainable_weights(self) -> List[Variable]:
        return list(self._trainable_weights) if self.trainable else []

    @property
    def non_trainable_weights(self) -> List[Variable]:
        if self.trainable:
            return list(self._non_trainable_weights)
        return list(self._trainable_weights) + list(self._non_trainable_weights)

    @property
    def weights(self) -> List[Variable]:
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    @property
    def updates(self) -> list:
        return list(self._updates)

    @property
    def losses(self) -> list:
        return list(self._losses)

    def add_update(self, update) -> None:
        self._updates.append(update)

    def add_loss(self, loss) -> None:
        """A loss of this layer (a regularization term): kept in ``losses`` and in
        ``GraphKeys.REGULARIZATION_LOSSES``."""
        if loss is None:
            return
        self._losses.append(loss)
        self._graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)

    def get_weights(self) -> List:
        from dsl.session import get_default_session
        return get_default_session().run([w.value() for w in self.weights])

    # --- scopes and weights ------------------------------------------------------------------
    def _set_scope(self, scope=None) -> None:
        if self._scope is None:
            if self._reuse:
                with variable_scope(scope if scope is not None else self._base_name) as s:
                    self._scope = s
            else:
                with variable_scope(scope, default_name=self._base_name) as s:
                    self._scope = s

    def _name_scope(self) -> str:
        return self._current_scope.original_name_scope

    def add_weight(self, name: str, shape, dtype=None, initializer=None, regularizer=None,
                   trainable: Optional[bool] = None, constraint=None, partitioner=None,
                   use_resource=None, **kwargs) -> Variable:
        """The weight ``name`` of this layer's variable scope (made, or reused when the layer
        is built or was made with ``reuse=True``)."""
        trainable = True if trainable is None else bool(trainable)
        dtype = as_dtype(dtype or self._dtype or DType.f32)
        self._set_scope(None)
        reuse = self.built or self._reuse
        existing = set(map(id, self._graph.get_collection(GraphKeys.GLOBAL_VARIABLES)))
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False) as scope:
            self._current_scope = scope
            with name_scope(self._name_scope() or None):
                if initializer is None:
                    initializer = scope.initializer
                variable = scope.get_variable(
                    name, shape=shape, dtype=dtype, initializer=initializer,
                    trainable=trainable and self.trainable, constraint=constraint,
                    partitioner=partitioner)
                if regularizer is not None and id(variable) not in existing:
                    with name_scope(name + "/Regularizer"):
                        self.add_loss(regularizer(variable))
        if variable.trainable:
            if variable not in self._trainable_weights:
                self._trainable_weights.append(variable)
        elif variable not in self._non_trainable_weights:
            self._non_trainable_weights.append(variable)
        return variable

    add_variable = add_weight

    # --- calling -----------------------------------------------------------------------------
    def build(self, input_shape) -> None:
        self.built = True

    def call(self, inputs, **kwargs):
        return inputs

    def compute_output_shape(self, input_shape):
        raise NotImplementedError(f"{type(self).__name__}.compute_output_shape")

    def __call__(self, inputs, *args, **kwargs):
        scope = kwargs.pop("scope", None)
        self._set_scope(scope)
        reuse = True if self.built else self._reuse
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False) as vs:
            self._current_scope = vs
            with name_scope(self._name_scope() or None):
                inputs = self._convert_inputs(inputs)
                if not self.built:
                    if self._dtype is None:
                        first = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
                        self._dtype = first.dtype
                    # TF1 hands build() TensorShapes (``input_shape[-1].value``)
                    shapes = ([i.shape for i in inputs] if isinstance(inputs, (list, tuple))
                              else inputs.shape)
                    self.build(shapes)
                    self.built = True
                before = len(self._updates)
                outputs = self.call(inputs, *args, **kwargs)
                if self.activity_regularizer is not None:
                    self._activity_regularization(outputs)
        for update in self._updates[before:]:
            self._graph.add_to_collection(GraphKeys.UPDATE_OPS, update)
        return outputs

    apply = __call__

    def _convert_inputs(self, inputs):
        if isinstance(inputs, (list, tuple)):
            return type(inputs)(convert_to_tensor(i) for i in inputs)
        return convert_to_tensor(inputs)

    def _activity_regularization(self, outputs) -> None:
        from dsl.array_ops import shape
        from dsl.math_ops import cast
        from dsl.math_ops import div_no_nan
        with name_scope("ActivityRegularizer"):
            for out in (outputs if isinstance(outputs, (list, tuple)) else [outputs]):
                loss = convert_to_tensor(self.activity_regularizer(out))
                batch = cast(shape(out)[0], loss.dtype)
                self.add_loss(div_no_nan(loss, batch))

    def __repr__(self) -> str:
        return f"<fl.layers.{type(self).__name__} '{self._name}'>"
