"""``fl.contrib.framework``: TensorFlow 1.x's ``tf.contrib.framework`` (and tf_slim's
``ops``): ``arg_scope`` and the variable functions slim models are written with.

``arg_scope([f, g], k=v)`` sets default keyword arguments of the functions listed, for the
calls made inside the ``with``; a call's own keywords win, inner scopes override outer ones,
and only functions decorated with ``add_arg_scope`` may be listed (any other is a
ValueError). ``model_variable`` is ``get_variable`` that also puts the variable into
``GraphKeys.MODEL_VARIABLES``: the layers of ``fl.contrib.layers`` make their weights with it.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, Dict, List, Optional

from dsl.context import device as _device
from dsl.context import get_default_graph
from dsl.train.global_step import (create_global_step, get_global_step,  # noqa: F401
                                   get_or_create_global_step)
from dsl.variable_scope import VariableScope, get_variable
from dsl.variables import GraphKeys, Variable
from runtime.dtypes import DType

__all__ = ["arg_scope", "add_arg_scope", "current_arg_scope", "has_arg_scope",
           "arg_scoped_arguments", "arg_scope_func_key", "variable", "model_variable",
           "add_model_variable", "local_variable", "global_variable", "get_variables",
           "get_model_variables", "get_local_variables", "get_trainable_variables",
           "get_variables_to_restore", "get_variables_by_suffix", "get_variables_by_name",
           "get_unique_variable", "get_variable_full_name", "assign_from_checkpoint_fn",
           "get_global_step", "create_global_step", "get_or_create_global_step"]

# --- arg_scope -------------------------------------------------------------------------------
_ARG_STACK: List[Dict[str, dict]] = [{}]
_DECORATED: Dict[str, tuple] = {}


def arg_scope_func_key(func) -> str:
    """The key ``arg_scope`` files a function's defaults under (the same for the function
    and its decorated form)."""
    key = getattr(func, "_key_op", None)
    if key:
        return key
    qualname = getattr(func, "__qualname__", None)
    if qualname is None:                      # a functools.partial, a callable object
        return f"{type(func).__name__}@{id(func):x}"
    key = f"{getattr(func, '__module__', '?')}.{qualname}"
    # a function made inside another may be made again under the same name: tell them apart
    return f"{key}@{id(func):x}" if "<locals>" in key else key


def current_arg_scope() -> Dict[str, dict]:
    """The defaults in force: ``{function key: {argument: value}}``."""
    return _ARG_STACK[-1]


def _keyword_names(func) -> tuple:
    code = func.__code__
    n_defaults = len(func.__defaults__ or ())
    positional = code.co_varnames[code.co_argcount - n_defaults:code.co_argcount]
    keyword_only = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    return tuple(positional) + tuple(keyword_only)


def add_arg_scope(func: Callable) -> Callable:
    """``func`` made to take its defaults from the ``arg_scope``s it is called in."""
    key = arg_scope_func_key(func)

    @functools.wraps(func)
    def func_with_args(*args, **kwargs):
        scoped = current_arg_scope().get(key)
        if scoped:
            merged = dict(scoped)
            merged.update(kwargs)
            kwargs = merged
        return func(*args, **kwargs)

    _DECORATED[key] = _keyword_names(func)
    func_with_args._key_op = key
    return func_with_args


def has_arg_scope(func) -> bool:
    """Whether ``func`` was decorated with ``add_arg_scope``."""
    return arg_scope_func_key(func) in _DECORATED


def arg_scoped_arguments(func) -> List[str]:
    """The keyword arguments an ``arg_scope`` can set for ``func``."""
    if not has_arg_scope(func):
        raise ValueError(f"{getattr(func, '__name__', func)} is not decorated with "
                         "@add_arg_scope")
    return list(_DECORATED[arg_scope_func_key(func)])


@contextlib.contextmanager
def arg_scope(list_ops_or_scope, **kwargs):
    """Default keyword arguments for the functions in ``list_ops_or_scope`` (a list or tuple
    of ``add_arg_scope`` functions) inside the ``with``; or, given the dict an earlier
    ``arg_scope`` yielded, those defaults again. Yields the defaults now in force."""
    if isinstance(list_ops_or_scope, dict):
        if kwargs:
            raise ValueError("When attempting to re-use a scope by suppling a dictionary, "
                             "kwargs must be empty.")
        scope = dict(list_ops_or_scope)
    else:
        if not isinstance(list_ops_or_scope, (list, tuple)):
            raise TypeError("list_ops_or_scope must either be a list/tuple or reused scope "
                            "(i.e. dict)")
        scope = dict(current_arg_scope())
        for op in list_ops_or_scope:
            if not has_arg_scope(op):
                raise ValueError(f"{getattr(op, '__module__', '?')}."
                                 f"{getattr(op, '__name__', op)} is not decorated with "
                                 "@add_arg_scope")
            key = arg_scope_func_key(op)
            merged = dict(scope.get(key, {}))
            merged.update(kwargs)
            scope[key] = merged
    _ARG_STACK.append(scope)
    try:
        yield scope
    finally:
        _ARG_STACK.pop()


# --- variables -------------------------------------------------------------------------------
@add_arg_scope
def variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None,
             trainable: bool = True, collections=None, caching_device=None, device=None,
             partitioner=None, custom_getter=None, use_resource=None, synchronization=None,
             aggregation=None) -> Variable:
    """``get_variable`` into ``collections`` (default: ``GLOBAL_VARIABLES``), on ``device``."""
    collections = list(dict.fromkeys(collections if collections is not None
                                     else [GraphKeys.GLOBAL_VARIABLES]))
    with _device(device) if device else contextlib.nullcontext():
        return get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                            regularizer=regularizer, trainable=trainable,
                            collections=collections, partitioner=partitioner,
                            custom_getter=custom_getter)


@add_arg_scope
def model_variable(name: str, shape=None, dtype=DType.f32, initializer=None,
                   regularizer=None, trainable: bool = True, collections=None,
                   caching_device=None, device=None, partitioner=None, custom_getter=None,
                   use_resource=None, synchronization=None, aggregation=None) -> Variable:
    """``variable`` that is also in ``GLOBAL_VARIABLES`` and ``MODEL_VARIABLES``."""
    collections = list(collections or []) + [GraphKeys.GLOBAL_VARIABLES,
                                             GraphKeys.MODEL_VARIABLES]
    return variable(name, shape=shape, dtype=dtype, initializer=initializer,
                    regularizer=regularizer, trainable=trainable, collections=collections,
                    device=device, partitioner=partitioner, custom_getter=custom_getter)


def add_model_variable(var: Variable) -> None:
    """Put ``var`` into ``MODEL_VARIABLES`` (once)."""
    if var not in get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES):
        get_default_graph().add_to_collection(GraphKeys.MODEL_VARIABLES, var)


def local_variable(initial_value, validate_shape: bool = True, name: Optional[str] = None,
                   use_resource=None) -> Variable:
    """A non-trainable variable in ``LOCAL_VARIABLES`` (not saved)."""
    return Variable(initial_value, trainable=False, collections=[GraphKeys.LOCAL_VARIABLES],
                    validate_shape=validate_shape, name=name)


def global_variable(initial_value, validate_shape: bool = True, name: Optional[str] = None,
                    use_resource=None) -> Variable:
    """A non-trainable variable in ``GLOBAL_VARIABLES``."""
    return Variable(initial_value, trainable=False, collections=[GraphKeys.GLOBAL_VARIABLES],
                    validate_shape=validate_shape, name=name)


def get_variables(scope=None, suffix: Optional[str] = None,
                  collection: str = GraphKeys.GLOBAL_VARIABLES) -> List[Variable]:
    """The variables of ``collection`` whose names match ``scope`` (a regular expression at
    the start of the name, or a ``VariableScope``) and end with ``suffix``."""
    if isinstance(scope, VariableScope):
        scope = scope.name
    if suffix is not None:
        if ":" not in suffix:
            suffix += ":"
        scope = (scope or "") + ".*" + suffix
    return get_default_graph().get_collection(collection, scope)


def get_model_variables(scope=None, suffix: Optional[str] = None) -> List[Variable]:
    return get_variables(scope, suffix, GraphKeys.MODEL_VARIABLES)


def get_local_variables(scope=None, suffix: Optional[str] = None) -> List[Variable]:
    return get_variables(scope, suffix, GraphKeys.LOCAL_VARIABLES)


def get_trainable_variables(scope=None, suffix: Optional[str] = None) -> List[Variable]:
    return get_variables(scope, suffix, GraphKeys.TRAINABLE_VARIABLES)


def get_variables_to_restore(include=None, exclude=None) -> List[Variable]:
    """The global variables under the scopes of ``include`` (all when None) that are under
    none of ``exclude``'s."""
    for what, value in (("include", include), ("exclude", exclude)):
        if value is not None and not isinstance(value, (list, tuple)):
            raise TypeError(f"{what} is provided but is not a list or a tuple.")
    if include is None:
        chosen = get_variables()
    else:
        chosen = [v for s in include for v in get_variables(s)]
    dropped = {id(v) for s in (exclude or ()) for v in get_variables(s)}
    return [v for v in chosen if id(v) not in dropped]


def get_variables_by_suffix(suffix: str, scope=None) -> List[Variable]:
    return get_variables(scope=scope, suffix=suffix)


def get_variables_by_name(given_name: str, scope=None) -> List[Variable]:
    """The variables whose last name part is ``given_name``."""
    return get_variables(scope=scope, suffix="/" + given_name + ":|^" + given_name + ":")


def get_unique_variable(var_op_name: str) -> Variable:
    """The variable named exactly ``var_op_name`` (no ``:0``); a ValueError if there is
    none."""
    candidates = get_variables(scope=var_op_name)
    if not candidates:
        raise ValueError(f"Couldn't find variable {var_op_name}")
    for candidate in candidates:
        if candidate.op.name == var_op_name:
            return candidate
    raise ValueError(f"Variable {var_op_name} does not uniquely identify a variable")


def get_variable_full_name(var: Variable) -> str:
    return var.op.name


def assign_from_checkpoint_fn(model_path: str, var_list, ignore_missing_vars: bool = False,
                              reshape_variables: bool = False) -> Callable:
    """A function of a session that restores ``var_list`` (a list, or a dict from checkpoint
    names to variables) from the checkpoint ``model_path`` (TensorFlow's or flowc's). With
    ``ignore_missing_vars`` the variables the checkpoint lacks are left out (None when that
    is all of them)."""
    from dsl.saver import CheckpointReader, Saver
    if not var_list:
        raise ValueError("var_list cannot be empty")
    if reshape_variables:
        raise NotImplementedError("assign_from_checkpoint_fn(reshape_variables=True)")
    if ignore_missing_vars:
        reader = CheckpointReader(model_path)
        named = var_list if isinstance(var_list, dict) else {v.op.name: v for v in var_list}
        var_list = {k: v for k, v in named.items() if reader.has_tensor(k)}
        if not var_list:
            return None
    saver = Saver(var_list)

    def callback(session) -> None:
        saver.restore(session, model_path)
    return callback
