"""``fl.make_template`` (TF1's ``tf.make_template``): wrap a function so that every call
shares the variables its first call created with ``fl.get_variable``.

The first call enters a new variable scope (``name_`` made unique, or ``unique_name_``) and
records it; later calls re-enter that scope with ``reuse=True``. A later call that would
create a new trainable variable is an error, as in TensorFlow.
"""
from __future__ import annotations

import functools
from typing import Optional

from dsl.variable_scope import VariableScope, variable_scope
from dsl.variables import GraphKeys, get_collection

__all__ = ["make_template", "Template"]


class Template:
    """A function whose variables are created once and shared by all its calls."""

    def __init__(self, name: str, func, create_scope_now: bool = False,
                 unique_name: Optional[str] = None, custom_getter=None):
        if not name:
            raise ValueError("name cannot be None.")
        self._func = func
        self._name = name
        self._unique_name = unique_name
        self._custom_getter = custom_getter
        self._variable_scope: Optional[VariableScope] = None
        self._variables_created = False
        if create_scope_now:
            with variable_scope(unique_name, default_name=name,
                                custom_getter=custom_getter) as vs:
                self._variable_scope = vs

    def _call_func(self, args, kwargs):
        trainable_before = len(get_collection(GraphKeys.TRAINABLE_VARIABLES))
        result = self._func(*args, **kwargs)
        if self._variables_created:
            trainable_after = len(get_collection(GraphKeys.TRAINABLE_VARIABLES))
            if trainable_after != trainable_before:
                created = get_collection(GraphKeys.TRAINABLE_VARIABLES)[trainable_before:]
                raise ValueError(f"Trainable variable created when calling a template after "
                                 f"the first time, perhaps you used tf.Variable when you meant "
                                 f"tf.get_variable: {[v.name for v in created]}")
        self._variables_created = True
        return result

    def __call__(self, *args, **kwargs):
        if self._variable_scope is not None:
            reuse = True if self._variables_created else None
            with variable_scope(self._variable_scope, reuse=reuse):
                return self._call_func(args, kwargs)
        with variable_scope(self._unique_name, default_name=self._name,
                            custom_getter=self._custom_getter) as vs:
            self._variable_scope = vs
            return self._call_func(args, kwargs)

    @property
    def name(self) -> str:
        return self._name

    @property
    def func(self):
        return self._func

    @property
    def variable_scope(self) -> Optional[VariableScope]:
        return self._variable_scope

    @property
    def variable_scope_name(self) -> str:
        return self._variable_scope.name if self._variable_scope is not None else ""

    def _scoped(self, key: str) -> list:
        if self._variable_scope is None:
            return []
        return get_collection(key, self.variable_scope_name + "/")

    @property
    def variables(self) -> list:
        return self.global_variables + self.local_variables

    @property
    def trainable_variables(self) -> list:
        return self._scoped(GraphKeys.TRAINABLE_VARIABLES)

    @property
    def non_trainable_variables(self) -> list:
        trainable = self.trainable_variables
        return [v for v in self.global_variables if all(v is not t for t in trainable)]

    @property
    def global_variables(self) -> list:
        return self._scoped(GraphKeys.GLOBAL_VARIABLES)

    @property
    def local_variables(self) -> list:
        return self._scoped(GraphKeys.LOCAL_VARIABLES)


def make_template(name_: str, func_, create_scope_now_: bool = False,
                  unique_name_: Optional[str] = None, custom_getter_=None, **kwargs) -> Template:
    """A ``Template`` calling ``func_(*args, **kwargs, **call_kwargs)`` (``tf.make_template``)."""
    if kwargs:
        func_ = functools.partial(func_, **kwargs)
    return Template(name_, func_, create_scope_now=create_scope_now_, unique_name=unique_name_,
                    custom_getter=custom_getter_)
