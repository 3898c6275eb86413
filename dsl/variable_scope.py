"""``fl.variable_scope`` and ``fl.get_variable``: TensorFlow 1.x's way of naming and sharing
variables.

Each graph keeps a variable store: the variables ``get_variable`` made, by full name, and how
often each variable scope name was opened. ``variable_scope(name)`` prefixes the names of the
variables ``get_variable`` makes inside with ``name/`` and opens a name scope of that name for
the ops (uniquified as name scopes are: ``name_1`` on the second entry, while the variables
keep ``name/``). ``reuse=True`` returns the existing variables of those names and fails for a
missing one; ``fl.AUTO_REUSE`` returns them or makes them; reuse is inherited by inner scopes.
``variable_scope(None, default_name="dense")`` picks a variable scope name not used yet in
the enclosing scope (``dense``, ``dense_1``, ...), counted afresh each time the enclosing
scope is entered by name: that is how ``fl.layers`` name their variables, and why building a
model twice, the second time under ``variable_scope(same name, reuse=True)``, shares them.

The errors are TensorFlow's, word for word where a user may search for them: "Variable v
already exists, disallowed. Did you mean to set reuse=True or reuse=tf.AUTO_REUSE in
VarScope?", "Variable v does not exist, or was not created with tf.get_variable(). ...",
"Trying to share variable v, but specified shape ... and found shape ...".
"""
from __future__ import annotations

import contextlib
import enum
from typing import Callable, Dict, Optional

import numpy as np

from dsl.context import colocate_with, get_default_graph, name_scope
from dsl.tensor import Tensor, static_shape
from dsl.variables import GraphKeys, Variable
from runtime.dtypes import DType, as_dtype

__all__ = ["variable_scope", "get_variable", "get_variable_scope", "VariableScope", "AUTO_REUSE",
           "get_local_variable", "no_regularizer"]


class _ReuseMode(enum.Enum):
    """TensorFlow's reuse modes beyond True/None."""
    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE


def no_regularizer(_):
    """A regularizer that adds nothing (``tf.no_regularizer``): turns off a scope's default."""
    return None


def _shape_str(shape) -> str:
    if shape is None:
        return "<unknown>"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + (
        ",)" if len(shape) == 1 else ")")


def _static_shape(shape) -> Optional[tuple]:
    if shape is None:
        return None
    if isinstance(shape, Tensor):
        raise TypeError("get_variable takes a shape as a list of ints, not a tensor")
    if isinstance(shape, (int, np.integer)):
        shape = [shape]
    return tuple(None if d is None or int(d) < 0 else int(d) for d in shape)


def _compatible(a: Optional[tuple], b: Optional[tuple]) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


class VariableScope:
    """A variable scope: its name, reuse mode and the defaults ``get_variable`` uses inside it
    (initializer, regularizer, dtype, constraint). ``original_name_scope`` is the name scope
    opened when the scope was first entered; entering the scope object again re-enters it."""

    def __init__(self, reuse, name: str = "", initializer=None, regularizer=None,
                 caching_device=None, partitioner=None, custom_getter=None,
                 name_scope: str = "", dtype=DType.f32, use_resource=None, constraint=None):
        self._name = name
        self._name_scope = name_scope
        self._reuse = reuse
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._dtype = as_dtype(dtype)
        self._use_resource = use_resource
        self._constraint = constraint

    # --- what TensorFlow exposes ---------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def original_name_scope(self) -> str:
        return self._name_scope

    @property
    def reuse(self):
        return self._reuse

    @property
    def initializer(self):
        return self._initializer

    @property
    def regularizer(self):
        return self._regularizer

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def constraint(self):
        return self._constraint

    @property
    def caching_device(self):
        return self._caching_device

    @property
    def partitioner(self):
        return self._partitioner

    @property
    def custom_getter(self):
        return self._custom_getter

    @property
    def use_resource(self):
        return self._use_resource

    def reuse_variables(self) -> None:
        """From now on, ``get_variable`` in this scope returns existing variables."""
        self._reuse = True

    def set_initializer(self, initializer) -> None:
        self._initializer = initializer

    def set_regularizer(self, regularizer) -> None:
        self._regularizer = regularizer

    def set_dtype(self, dtype) -> None:
        self._dtype = as_dtype(dtype)

    def set_caching_device(self, caching_device) -> None:
        self._caching_device = caching_device

    def set_partitioner(self, partitioner) -> None:
        self._partitioner = partitioner

    def set_custom_getter(self, custom_getter) -> None:
        self._custom_getter = custom_getter

    def set_use_resource(self, use_resource) -> None:
        self._use_resource = use_resource

    def get_variable(self, name: str, shape=None, dtype=None, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, custom_getter=None, constraint=None,
                     synchronization=None, aggregation=None) -> Variable:
        """``name`` in this scope: an existing variable (reuse) or a new one; the arguments
        left None take the scope's defaults."""
        full = f"{self._name}/{name}" if self._name else name
        if reuse is None or reuse is False:
            reuse = self._reuse
        if dtype is not None and initializer is not None and not callable(initializer):
            from dsl.ops import convert_to_tensor
            init_dtype = convert_to_tensor(initializer).dtype
            if init_dtype is not as_dtype(dtype):
                raise ValueError(f"Initializer type '{init_dtype.ir_name}' and explicit dtype "
                                 f"'{as_dtype(dtype).ir_name}' don't match.")
        initializer = self._initializer if initializer is None else initializer
        regularizer = self._regularizer if regularizer is None else regularizer
        constraint = self._constraint if constraint is None else constraint
        custom_getter = self._custom_getter if custom_getter is None else custom_getter
        dtype = self._dtype if dtype is None else as_dtype(dtype)
        kwargs = dict(shape=shape, dtype=dtype, initializer=initializer,
                      regularizer=regularizer, reuse=reuse, trainable=trainable,
                      collections=collections, validate_shape=validate_shape,
                      constraint=constraint)
        store = _store()
        with name_scope(None):           # the variable's name is its full name, not the ops'
            if custom_getter is not None:
                return custom_getter(store.get_variable, full, **kwargs)
            return store.get_variable(full, **kwargs)


class _VariableStore:
    """One graph's variables made by ``get_variable`` and its variable scope bookkeeping."""

    def __init__(self):
        self.vars: Dict[str, Variable] = {}
        self.scope_counts: Dict[str, int] = {}
        self.current = VariableScope(False)

    # --- scope names -------------------------------------------------------------------------
    def open_scope(self, name: str) -> None:
        self.scope_counts[name] = self.scope_counts.get(name, 0) + 1

    def close_subscopes(self, name: str) -> None:
        prefix = name + "/"
        for k in self.scope_counts:
            if k.startswith(prefix):
                self.scope_counts[k] = 0

    def unique_scope_name(self, prefix: str) -> str:
        """``prefix``, or ``prefix_1``, ``prefix_2`` ... : the first not yet opened in the
        current scope."""
        outer = self.current.name
        base = f"{outer}/{prefix}" if outer else prefix
        if self.scope_counts.get(base, 0) == 0:
            return prefix
        i = 1
        while self.scope_counts.get(f"{base}_{i}", 0) > 0:
            i += 1
        return f"{prefix}_{i}"

    # --- variables ---------------------------------------------------------------------------
    def get_variable(self, name: str, shape=None, dtype=DType.f32, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     validate_shape=True, constraint=None, **unused) -> Variable:
        from dsl.init_ops import Initializer, glorot_uniform_initializer, zeros_initializer
        dtype = as_dtype(dtype)
        from_value = initializer is not None and not callable(initializer)
        if from_value and shape is not None:
            raise ValueError("If initializer is a constant, do not specify shape.")
        shape = _static_shape(shape)
        found = self.vars.get(name)
        if found is not None:
            if reuse is False or reuse is None:
                raise ValueError(f"Variable {name} already exists, disallowed. Did you mean to "
                                 "set reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
            if not _compatible(shape, static_shape(found)):
                raise ValueError(f"Trying to share variable {name}, but specified shape "
                                 f"{_shape_str(shape)} and found shape "
                                 f"{_shape_str(static_shape(found))}.")
            if not from_value and dtype is not found.dtype:
                raise ValueError(f"Trying to share variable {name}, but specified dtype "
                                 f"{dtype.ir_name} and found dtype {found.dtype.ir_name}.")
            return found
        if reuse is True:
            raise ValueError(f"Variable {name} does not exist, or was not created with "
                             "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                             "VarScope?")
        if initializer is None:
            if dtype.is_floating:
                initializer = glorot_uniform_initializer()
            elif dtype.is_integer or dtype.is_bool:
                initializer = zeros_initializer()
            else:
                raise ValueError(f"An initializer for variable {name} of {dtype} is required")
        if isinstance(initializer, type):
            initializer = initializer()
        if from_value:
            init_value, var_dtype, var_shape = initializer, None, None
        elif shape is not None and all(d is not None for d in shape):
            init_value, var_dtype, var_shape = initializer, dtype, list(shape)
            if not isinstance(initializer, Initializer):
                init_value = _CallWithShape(initializer, list(shape), dtype)
                var_shape = None
        elif _takes_no_arguments(initializer):
            init_value, var_dtype, var_shape = initializer, None, None
        else:
            raise ValueError(f"The initializer passed for variable {name} is not valid. It "
                             "should be a callable with no arguments and the shape should not "
                             "be provided or an instance of an initializer and `shape` should "
                             "be fully defined.")
        v = Variable(init_value, trainable=True if trainable is None else trainable,
                     collections=collections, validate_shape=validate_shape, name=name,
                     dtype=var_dtype, shape=var_shape, constraint=constraint)
        self.vars[name] = v
        if regularizer:
            with colocate_with(v), name_scope(name + "/Regularizer/"):
                loss = regularizer(v)
            if loss is not None:
                get_default_graph().add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
        return v


class _CallWithShape:
    """A plain callable initializer ``fn(shape, dtype=...)`` bound to its shape (what
    TensorFlow does with ``functools.partial``)."""

    def __init__(self, fn: Callable, shape: list, dtype: DType):
        self.fn, self.shape, self.dtype = fn, shape, dtype

    def __call__(self):
        try:
            return self.fn(self.shape, dtype=self.dtype)
        except TypeError:
            return self.fn(self.shape)


def _takes_no_arguments(fn) -> bool:
    import inspect
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in params)


def _store() -> _VariableStore:
    g = get_default_graph()
    store = getattr(g, "_variable_store", None)
    if store is None:
        store = g._variable_store = _VariableStore()
    return store


def get_variable_scope() -> VariableScope:
    """The current variable scope (the root scope, named "", at the top)."""
    return _store().current


def get_variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=None, collections=None, caching_device=None, partitioner=None,
                 validate_shape=True, use_resource=None, custom_getter=None, constraint=None,
                 synchronization=None, aggregation=None) -> Variable:
    """The variable ``name`` of the current variable scope (``tf.get_variable``): made with
    ``initializer`` (default: the scope's, else glorot_uniform for floats, zeros for integers
    and bools), or the existing one when the scope reuses. A ``regularizer``'s loss goes to
    ``GraphKeys.REGULARIZATION_LOSSES``."""
    return get_variable_scope().get_variable(
        name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
        trainable=trainable, collections=collections, caching_device=caching_device,
        partitioner=partitioner, validate_shape=validate_shape, use_resource=use_resource,
        custom_getter=custom_getter, constraint=constraint)


def get_local_variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None,
                       trainable=False, collections=None, **kwargs) -> Variable:
    """``get_variable`` into ``GraphKeys.LOCAL_VARIABLES`` (not saved, not trained)."""
    collections = list(collections or []) + [GraphKeys.LOCAL_VARIABLES]
    return get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                        regularizer=regularizer, trainable=False, collections=collections,
                        **kwargs)


@contextlib.contextmanager
def variable_scope(name_or_scope, default_name: Optional[str] = None, values=None,
                   initializer=None, regularizer=None, caching_device=None, partitioner=None,
                   custom_getter=None, reuse=None, dtype=None, use_resource=None,
                   constraint=None, auxiliary_name_scope: bool = True):
    """Enter a variable scope (and a name scope for the ops made inside); yields the
    ``VariableScope``. ``name_or_scope``: a name, a ``VariableScope`` (its variables again; the
    ops go to a new name scope named like it), or None with ``default_name`` (made unique). ``reuse``: True,
    ``fl.AUTO_REUSE`` or None (inherit; False means None, as in TensorFlow)."""
    if default_name is None and name_or_scope is None:
        raise TypeError("If default_name is None then name_or_scope is required")
    if reuse is False:
        reuse = None
    if not (reuse is None or reuse is True or reuse is AUTO_REUSE):
        raise ValueError("The reuse parameter must be True or False or None.")
    if values is not None and not isinstance(values, (list, tuple)):
        raise TypeError("The values parameter must be a list or tuple")
    store = _store()
    old = store.current
    old_counts = None
    current = get_default_graph().current_name_scope
    same_name_scope = contextlib.nullcontext(current + "/" if current else "")
    if isinstance(name_or_scope, VariableScope):
        # the ops go to a new name scope named like the scope's last part (as in TensorFlow,
        # which does not re-enter the scope's original name scope)
        new_name = name_or_scope.name
        last = new_name.split("/")[-1]
        ns = name_scope(last) if auxiliary_name_scope and last else same_name_scope
        store.open_scope(new_name)
        old_counts = dict(store.scope_counts)
        scope_reuse = reuse if reuse else name_or_scope.reuse
        base = name_or_scope
    else:
        if name_or_scope is None:
            if reuse is True:
                raise ValueError("reuse=True cannot be used without a name_or_scope")
            short = store.unique_scope_name(default_name)
        else:
            if not isinstance(name_or_scope, str):
                raise TypeError(f"VariableScope: name_or_scope must be a string or a "
                                f"VariableScope, got {type(name_or_scope).__name__}")
            short = name_or_scope
        new_name = f"{old.name}/{short}" if old.name else short
        ns = name_scope(short) if auxiliary_name_scope else same_name_scope
        store.open_scope(new_name)
        scope_reuse = reuse or old.reuse
        base = old
    with ns as ns_string:
        scope = VariableScope(
            scope_reuse, name=new_name, initializer=base.initializer,
            regularizer=base.regularizer, caching_device=base.caching_device,
            partitioner=base.partitioner, custom_getter=base.custom_getter,
            name_scope=ns_string or "", dtype=base.dtype, use_resource=base.use_resource,
            constraint=base.constraint)
        if isinstance(name_or_scope, VariableScope):
            scope._name_scope = name_or_scope.original_name_scope
        for setter, value in ((scope.set_initializer, initializer),
                              (scope.set_regularizer, regularizer),
                              (scope.set_caching_device, caching_device),
                              (scope.set_partitioner, partitioner),
                              (scope.set_use_resource, use_resource)):
            if value is not None:
                setter(value)
        if dtype is not None:
            scope.set_dtype(dtype)
        scope._constraint = constraint            # not inherited, as in TensorFlow
        if custom_getter is not None:
            scope.set_custom_getter(_wrap_custom_getter(custom_getter, base.custom_getter))
        store.current = scope
        try:
            yield scope
        finally:
            store.current = old
            if old_counts is not None:
                store.scope_counts = old_counts
            else:
                store.close_subscopes(new_name)


def _wrap_custom_getter(custom_getter, old_getter):
    """Nested custom getters compose, the inner one calling the outer (as in TensorFlow)."""
    if old_getter is None:
        return custom_getter

    def wrapped(getter, *args, **kwargs):
        return custom_getter(lambda *a, **k: old_getter(getter, *a, **k), *args, **kwargs)
    return wrapped
