"""TensorFlow 1.x's functional ops: ``fl.map_fn``, ``fl.scan``, ``fl.foldl``, ``fl.foldr``.

Each is built as TF1 builds it (``functional_ops.py``): the tensors of ``elems`` (a tensor or a
nested structure of tensors, ``fl.nest``) are unstacked along dim 0 into TensorArrays, one
``fl.while_loop`` calls ``fn`` once per element (so ``fn``'s ops are compiled once, not once
per element), and what ``map_fn`` and ``scan`` produce per element is written into
TensorArrays stacked after the loop. Gradients flow through the loop like any other
(``dsl/grad/control_flow_grad.py``, ``tensor_array_grad.py``); ``back_prop=False`` stops them.

The number of elements is the first dim of ``elems``, known when built or read at run time.
"""
from __future__ import annotations

import contextlib
from typing import Callable, List, Optional

from dsl import nest
from dsl.context import get_default_graph, name_scope
from dsl.ops import convert_to_tensor
from dsl.tensor import Tensor, static_shape
from dsl.tensor_array_ops import TensorArray
from runtime.dtypes import DType, as_dtype

__all__ = ["map_fn", "scan", "foldl", "foldr"]


# --- what the four share --------------------------------------------------------------------
def _check_callable(fn) -> None:
    if not callable(fn):
        raise TypeError("fn must be callable.")


def _elems_tensors(elems) -> List[Tensor]:
    flat = nest.flatten(elems)
    if not flat:
        raise ValueError("elems must be a Tensor or (possibly nested) sequence of Tensors. "
                         f"Got {elems}, which does not contain any Tensors.")
    tensors = [convert_to_tensor(e, name="elem") for e in flat]
    for t in tensors:
        shape = static_shape(t)
        if shape is not None and len(shape) < 1:
            raise ValueError("Elements in elems must be 1+ dimensional Tensors, not scalars")
    return tensors


def _static_length(tensors: List[Tensor]) -> Optional[int]:
    """The common first dim of ``tensors`` where known; TF1's error where two differ."""
    n = None
    for t in tensors:
        shape = static_shape(t)
        d = None if shape is None else shape[0]
        if d is None:
            continue
        if n is not None and d != n:
            raise ValueError(f"Dimensions {n} and {d} are not compatible")
        n = d
    return n


def _length(tensors: List[Tensor]):
    """The number of elements: an int when known, else the first dim read at run time."""
    n = _static_length(tensors)
    if n is not None:
        return n
    from dsl.array_ops import shape
    return shape(tensors[0], out_type=DType.i32)[0]


def _unstacked(tensors: List[Tensor], n) -> List[TensorArray]:
    """Each tensor's rows in a TensorArray of ``n`` elements. The rows are scattered to
    ``range(n)`` (the first tensor's length), so a tensor of another length fails the step
    with TF's words for it rather than leaving elements unwritten (read back as zeros)."""
    from dsl.array_ops import range as fl_range
    with name_scope("TensorArrayUnstack"):
        every = fl_range(0, n)
    return [TensorArray(t.dtype, size=n, dynamic_size=False, infer_shape=True,
                        element_shape=None if static_shape(t) is None else static_shape(t)[1:],
                        name="elems_ta").scatter(every, t) for t in tensors]


def _written(tas: List[TensorArray], i, values: List, what: str) -> List[TensorArray]:
    """``tas[k].write(i, values[k])``, where a value of another dtype than its array is
    TF1's error (with what to do about it)."""
    out = []
    for ta, v in zip(tas, values):
        if isinstance(v, Tensor) and v.dtype != ta.dtype:
            raise TypeError(f"TensorArray dtype is {ta.dtype} but Op is trying to write dtype "
                            f"{v.dtype}: {what}")
        out.append(ta.write(i, v))
    return out


def _ranks(values: List) -> List[Optional[int]]:
    shapes = [static_shape(v) if isinstance(v, Tensor) else None for v in values]
    return [None if s is None else len(s) for s in shapes]


def _stacked(tas: List[TensorArray], n, n_static: Optional[int],
             ranks: List[Optional[int]]) -> List[Tensor]:
    """The arrays stacked: ``[n] + element shape``. An array that infers no element shape
    (``infer_shape=False``) still stacks to the rank ``fn``'s values have (any dims), which
    the C backend needs to know."""
    from dsl.array_ops import range as fl_range
    for ta, rank in zip(tas, ranks):
        if ta.element_shape is None and rank is not None:
            ta._element_shape = (None,) * rank
    with name_scope("TensorArrayStack"):
        every = fl_range(0, n)
        out = [ta.gather(every) for ta in tas]
    for r in out:
        shape = static_shape(r)
        if n_static is not None and shape is not None and shape[0] is None:
            r.set_shape([n_static] + list(shape[1:]))
    return out


def _maybe_stop(values: List[Tensor], back_prop: bool) -> List[Tensor]:
    if back_prop:
        return values
    from dsl.array_ops import stop_gradient
    return [stop_gradient(v) for v in values]


def _loop(cond: Callable, body: Callable, loop_vars: list, parallel_iterations,
          swap_memory: bool) -> list:
    from dsl.control_flow_ops import while_loop
    g = get_default_graph()
    lifted_before = len(g.__dict__.get("_nodes_of_other_loops", ()))
    out = list(while_loop(cond, body, loop_vars, parallel_iterations=parallel_iterations or 10,
                          swap_memory=swap_memory))
    if len(g.__dict__.get("_nodes_of_other_loops", ())) != lifted_before:
        g.topo_sort()         # a variable fn made is read by the loop's Enter, made before it
    return out


def _pack(structure, flat: list):
    return nest.pack_sequence_as(structure, flat) if nest.is_nested(structure) else flat[0]


def _flat(structure, value) -> list:
    return nest.flatten(value) if nest.is_nested(structure) else [value]


@contextlib.contextmanager
def _variables_outside_the_loop():
    """A variable ``fn`` makes (``fl.get_variable``, a layer) is made outside the loop, as
    TF1 makes every variable (its ``init_scope``): its handle, initializer and first read
    belong to no loop, so it is made and initialized once, and the loop reads it as it reads
    any tensor from outside (whose gradient reaches the variable)."""
    from dsl.variables import global_variables, local_variables
    g = get_default_graph()
    nodes_before = set(g)
    vars_before = {id(v) for v in global_variables() + local_variables()}
    yield
    made = {n for n in g if n not in nodes_before}
    todo = []
    for v in global_variables() + local_variables():
        if id(v) not in vars_before:
            for part in ("_handle", "_initializer_op", "_graph_element"):
                x = getattr(v, part, None)
                node = getattr(x, "node", None) or getattr(getattr(x, "output", None), "node",
                                                            None)
                if node is not None:
                    todo.append(node)
    lift = set()
    while todo:
        n = todo.pop()
        if n in lift or n not in made:
            continue
        lift.add(n)
        todo.extend(i.node for i in n.inputs)
        todo.extend(n.control_inputs)
    g.__dict__.setdefault("_nodes_of_other_loops", set()).update(lift)


# --- map_fn -----------------------------------------------------------------------------------
def map_fn(fn: Callable, elems, dtype=None, parallel_iterations: Optional[int] = None,
           back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True,
           name: Optional[str] = None):
    """``fn`` applied to each element of ``elems`` unstacked along dim 0, the results stacked
    (``tf.map_fn``): ``[n] + fn(elems[0]).shape``. ``fn`` takes one element in the structure
    of ``elems`` and returns the structure of ``dtype`` (the dtypes of its outputs; by
    default the structure and dtypes of ``elems``)."""
    _check_callable(fn)
    with name_scope(name or "map"):
        flat_elems = _elems_tensors(elems)
        in_structure = elems
        out_structure = dtype if dtype is not None else _pack(
            elems, [t.dtype for t in flat_elems])
        out_dtypes = [as_dtype(d) for d in _flat(out_structure, out_structure)]
        n_static = _static_length(flat_elems)
        n = _length(flat_elems)
        elems_tas = _unstacked(flat_elems, n)
        accs = [TensorArray(d, size=n, dynamic_size=False, infer_shape=infer_shape,
                            name="accs_ta") for d in out_dtypes]
        ranks: List[Optional[int]] = []

        def body(i, *tas):
            value = _pack(in_structure, [ta.read(i) for ta in elems_tas])
            with _variables_outside_the_loop():
                result = fn(value)
            nest.assert_same_structure(dtype if dtype is not None else elems, result)
            hint = ("map_fn's fn returns dtypes other than elems'; give them as dtype="
                    if dtype is None else "fn returns other dtypes than map_fn's dtype=")
            values = _flat(out_structure, result)
            ranks[:] = _ranks(values)
            return [i + 1] + _written(list(tas), i, values, hint)

        final = _loop(lambda i, *_: i < n, body, [convert_to_tensor(0, dtype=DType.i32)] + accs,
                      parallel_iterations, swap_memory)
        results = _maybe_stop(_stacked(final[1:], n, n_static, ranks), back_prop)
    return _pack(out_structure, results)


# --- scan -------------------------------------------------------------------------------------
def scan(fn: Callable, elems, initializer=None, parallel_iterations: int = 10,
         back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True,
         reverse: bool = False, name: Optional[str] = None):
    """The running accumulation ``a = fn(a, x)`` over the elements ``x`` of ``elems`` (from
    the last with ``reverse``), every ``a`` stacked (``tf.scan``). ``initializer`` (the first
    ``a``, and the structure of ``fn``'s result) defaults to the first element, which is
    then also the first output."""
    _check_callable(fn)
    with name_scope(name or "scan"):
        flat_elems = _elems_tensors(elems)
        out_structure = elems if initializer is None else initializer
        n_static = _static_length(flat_elems)
        n = _length(flat_elems)
        elems_tas = _unstacked(flat_elems, n)
        if initializer is None:
            first = n - 1 if reverse else 0
            a_flat = [ta.read(first) for ta in elems_tas]
            start = 1
        else:
            a_flat = [convert_to_tensor(v) for v in _flat(initializer, initializer)]
            start = 0
        accs = [TensorArray(a.dtype, size=n, dynamic_size=False, infer_shape=infer_shape,
                            element_shape=static_shape(a) if infer_shape else None,
                            name="accs_ta") for a in a_flat]
        if initializer is None:
            accs = [ta.write(first, a) for ta, a in zip(accs, a_flat)]
        k = len(a_flat)

        def body(i, *loop_vars):
            a = _pack(out_structure, list(loop_vars[:k]))
            x = _pack(elems, [ta.read(i) for ta in elems_tas])
            with _variables_outside_the_loop():
                result = fn(a, x)
            nest.assert_same_structure(out_structure, result)
            out = [convert_to_tensor(v, dtype=t.dtype) if not isinstance(v, Tensor) else v
                   for v, t in zip(_flat(out_structure, result), a_flat)]
            tas = _written(list(loop_vars[k:]), i, out,
                           "scan's fn returns dtypes other than its accumulator's")
            return [i - 1 if reverse else i + 1] + out + tas

        if reverse:
            i0, cond = n - 1 - start, (lambda i, *_: i >= 0)
        else:
            i0, cond = start, (lambda i, *_: i < n)
        final = _loop(cond, body, [convert_to_tensor(i0, dtype=DType.i32)] + a_flat + accs,
                      parallel_iterations, swap_memory)
        results = _maybe_stop(_stacked(final[1 + k:], n, n_static, _ranks(a_flat)), back_prop)
    return _pack(out_structure, results)


# --- foldl and foldr --------------------------------------------------------------------------
def _fold(fn: Callable, elems, initializer, parallel_iterations, back_prop: bool,
          swap_memory: bool, from_right: bool):
    _check_callable(fn)
    flat_elems = _elems_tensors(elems)
    n = _length(flat_elems)
    elems_tas = _unstacked(flat_elems, n)
    if initializer is None:
        first = n - 1 if from_right else 0
        structure = elems
        a_flat = [ta.read(first) for ta in elems_tas]
        i0 = n - 1 if from_right else 1
    else:
        structure = initializer
        a_flat = [convert_to_tensor(v) for v in nest.flatten(initializer)]
        i0 = n if from_right else 0
    k = len(a_flat)

    def body(i, *loop_vars):
        if from_right:
            i = i - 1
        a = nest.pack_sequence_as(structure, list(loop_vars)) if nest.is_nested(structure) \
            else loop_vars[0]
        x = nest.pack_sequence_as(elems, [ta.read(i) for ta in elems_tas])
        with _variables_outside_the_loop():
            result = fn(a, x)
        nest.assert_same_structure(structure, result)
        out = nest.flatten(result)
        for v, t in zip(out, a_flat):
            if isinstance(v, Tensor) and v.dtype != t.dtype:
                raise TypeError(f"the accumulator is {t.dtype} before fn and {v.dtype} after "
                                "it: fn must return the dtypes of its accumulator")
        return [i if from_right else i + 1] + [convert_to_tensor(v, dtype=t.dtype)
                                               for v, t in zip(out, a_flat)]

    cond = (lambda i, *_: i > 0) if from_right else (lambda i, *_: i < n)
    final = _loop(cond, body, [convert_to_tensor(i0, dtype=DType.i32)] + a_flat,
                  parallel_iterations, swap_memory)
    results = _maybe_stop(final[1:], back_prop)
    return nest.pack_sequence_as(structure, results) if nest.is_nested(structure) \
        else results[0]


def foldl(fn: Callable, elems, initializer=None, parallel_iterations: int = 10,
          back_prop: bool = True, swap_memory: bool = False, name: Optional[str] = None):
    """``a = fn(a, x)`` over the elements ``x`` of ``elems`` from first to last; the last
    ``a`` (``tf.foldl``). ``initializer`` defaults to the first element."""
    with name_scope(name or "foldl"):
        return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory,
                     from_right=False)


def foldr(fn: Callable, elems, initializer=None, parallel_iterations: int = 10,
          back_prop: bool = True, swap_memory: bool = False, name: Optional[str] = None):
    """``a = fn(a, x)`` over the elements ``x`` of ``elems`` from last to first; the last
    ``a`` (``tf.foldr``). ``initializer`` defaults to the last element."""
    with name_scope(name or "foldr"):
        return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory,
                     from_right=True)
