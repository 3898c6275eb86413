"""``TensorShape`` and ``Dimension``: the static shape of a tensor as TensorFlow 1.x shows it.

``x.shape`` / ``x.get_shape()`` of a ``fl.Tensor`` or ``fl.Variable`` is a ``TensorShape`` with
TF1 ("v1") behaviour: indexing gives a ``Dimension`` whose ``.value`` is an int or None, which
compares and does arithmetic with ints, None and other Dimensions (an unknown operand makes the
result unknown; a comparison with an unknown one is None), and converts with ``int()`` /
``__index__`` / numpy. ``as_list()`` gives plain ints and None.

The IR keeps plain tuples (``compiler.ir.types.Shape``); a ``TensorShape`` is a tuple subclass
holding those plain values, so hashing, ``==`` with a list or tuple and ``len`` agree with the
IR's tuple; only indexing and iteration hand out Dimensions, as TF1 does. An unknown rank is
``TensorShape(None)``: ``ndims`` is None and ``len``/``as_list``/iteration raise ValueError.
"""
from __future__ import annotations

import functools
import operator
from typing import List, Optional

import numpy as np

__all__ = ["Dimension", "TensorShape", "as_dimension", "as_shape", "dimension_at_index",
           "dimension_value", "unknown_shape"]


class Dimension:
    """One dimension of a shape: a non-negative int, or unknown (``tf.compat.v1.Dimension``)."""

    __slots__ = ("_value",)

    def __init__(self, value):
        if isinstance(value, Dimension):
            value = value._value
        elif value is not None:
            if isinstance(value, bool) or not hasattr(value, "__index__"):
                raise TypeError(f"Dimension value must be integer or None or have an __index__ "
                                f"method, got value '{value!r}' with type '{type(value)!r}'")
            value = operator.index(value)
            if value < 0:
                raise ValueError(f"Dimension {value} must be >= 0")
        self._value = value

    @property
    def value(self) -> Optional[int]:
        """The size, or None when unknown."""
        return self._value

    def __repr__(self):
        return f"Dimension({self._value!r})"

    def __str__(self):
        return "?" if self._value is None else str(self._value)

    # --- comparisons: None when either side is unknown, as TF1 -------------------------------
    def _compare(self, other, op):
        try:
            other = as_dimension(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._value is None or other._value is None:
            return None
        return op(self._value, other._value)

    def __eq__(self, other):
        return self._compare(other, operator.eq)

    def __ne__(self, other):
        return self._compare(other, operator.ne)

    def __lt__(self, other):
        return self._compare(other, operator.lt)

    def __le__(self, other):
        return self._compare(other, operator.le)

    def __gt__(self, other):
        return self._compare(other, operator.gt)

    def __ge__(self, other):
        return self._compare(other, operator.ge)

    def __hash__(self):                 # equal known Dimensions and ints hash alike
        return hash(self._value)

    def __bool__(self):
        return bool(self._value)

    def __int__(self):
        if self._value is None:
            raise TypeError("int() of an unknown Dimension (its value is None)")
        return self._value

    def __index__(self):
        if self._value is None:
            raise TypeError("an unknown Dimension (its value is None) is not an index")
        return self._value

    def __array__(self, dtype=None, copy=None):
        """A known Dimension converts to an int32 scalar, as TF converts it to a tensor."""
        if self._value is None:
            raise ValueError("Cannot convert an unknown Dimension to a Tensor: ?")
        return np.array(self._value, dtype=dtype or np.int32)

    # --- arithmetic: an unknown operand gives an unknown Dimension ---------------------------
    def _arith(self, other, op, reverse=False):
        try:
            other = as_dimension(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._value is None or other._value is None:
            return Dimension(None)
        a, b = (other._value, self._value) if reverse else (self._value, other._value)
        return Dimension(op(a, b))

    def __add__(self, other):
        return self._arith(other, operator.add)

    def __radd__(self, other):
        return self._arith(other, operator.add, reverse=True)

    def __sub__(self, other):
        return self._arith(other, operator.sub)

    def __rsub__(self, other):
        return self._arith(other, operator.sub, reverse=True)

    def __mul__(self, other):
        return self._arith(other, operator.mul)

    def __rmul__(self, other):
        return self._arith(other, operator.mul, reverse=True)

    def __floordiv__(self, other):
        return self._arith(other, operator.floordiv)

    def __rfloordiv__(self, other):
        return self._arith(other, operator.floordiv, reverse=True)

    def __mod__(self, other):
        return self._arith(other, operator.mod)

    def __rmod__(self, other):
        return self._arith(other, operator.mod, reverse=True)

    def __truediv__(self, other):
        raise TypeError(f"unsupported operand type(s) for /: 'Dimension' and "
                        f"'{type(other).__name__}', please use // instead")

    def __rtruediv__(self, other):
        raise TypeError(f"unsupported operand type(s) for /: '{type(other).__name__}' and "
                        f"'Dimension', please use // instead")

    # --- compatibility -----------------------------------------------------------------------
    def is_compatible_with(self, other) -> bool:
        other = as_dimension(other)
        return self._value is None or other._value is None or self._value == other._value

    def assert_is_compatible_with(self, other) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Dimensions {self} and {as_dimension(other)} are not compatible")

    def merge_with(self, other) -> "Dimension":
        other = as_dimension(other)
        self.assert_is_compatible_with(other)
        return Dimension(other._value if self._value is None else self._value)

    def __reduce__(self):
        return Dimension, (self._value,)


def as_dimension(value) -> Dimension:
    """``value`` (a Dimension, an int or None) as a Dimension."""
    return value if isinstance(value, Dimension) else Dimension(value)


def dimension_value(dimension) -> Optional[int]:
    """The plain value of a Dimension (ints and None pass through): ``tf.dimension_value``."""
    return dimension.value if isinstance(dimension, Dimension) else dimension


def dimension_at_index(shape, index: int) -> Dimension:
    """Dimension ``index`` of ``shape``, unknown when the rank is (``tf.dimension_at_index``)."""
    shape = as_shape(shape)
    return Dimension(None) if shape.ndims is None else shape.dims[index]


def _plain(d) -> Optional[int]:
    return as_dimension(d)._value


class TensorShape(tuple):
    """The static shape of a tensor (``tf.TensorShape``, TF1 behaviour); see the module doc."""

    def __new__(cls, dims=None):
        if isinstance(dims, TensorShape):
            values, known = tuple.__iter__(dims), dims._known
        elif dims is None:
            values, known = (), False
        else:
            try:
                it = iter(dims)
            except TypeError:            # one dimension: TensorShape(3)
                it = iter((dims,))
            values, known = [], True
            for d in it:
                try:
                    values.append(_plain(d))
                except TypeError as e:
                    raise TypeError(f"Failed to convert '{dims!r}' to a shape: '{d!r}' could not "
                                    f"be converted to a dimension. A shape should either be "
                                    f"single dimension (e.g. 10), or an iterable of dimensions "
                                    f"(e.g. [1, 10, None]).") from e
        self = tuple.__new__(cls, values)
        self._known = known
        return self

    # --- what it holds -----------------------------------------------------------------------
    @property
    def rank(self) -> Optional[int]:
        return tuple.__len__(self) if self._known else None

    ndims = rank

    @property
    def dims(self) -> Optional[List[Dimension]]:
        """The Dimensions, or None for an unknown rank."""
        return [Dimension(d) for d in tuple.__iter__(self)] if self._known else None

    def _tuple(self) -> Optional[tuple]:
        """The IR's shape: a tuple of ints and None, or None for an unknown rank."""
        return tuple(tuple.__iter__(self)) if self._known else None

    def as_list(self) -> List[Optional[int]]:
        if not self._known:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(tuple.__iter__(self))

    def is_fully_defined(self) -> bool:
        return self._known and all(d is not None for d in tuple.__iter__(self))

    def assert_is_fully_defined(self) -> None:
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")

    def num_elements(self) -> Optional[int]:
        if not self.is_fully_defined():
            return None
        return functools.reduce(operator.mul, tuple.__iter__(self), 1)

    # --- the sequence protocol, as TF1 ---------------------------------------------------------
    def __len__(self):
        if not self._known:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return tuple.__len__(self)

    def __bool__(self):
        return self._known

    def __iter__(self):
        if not self._known:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return (Dimension(d) for d in tuple.__iter__(self))

    def __getitem__(self, key):
        if self._known:
            if isinstance(key, slice):
                return TensorShape(tuple.__getitem__(self, key))
            return Dimension(tuple.__getitem__(self, key))
        if isinstance(key, slice):
            if key.step is not None:
                raise ValueError("Steps are not yet handled")
            start = 0 if key.start is None else key.start
            if key.stop is None or start < 0 or key.stop < 0:
                return unknown_shape()
            return unknown_shape(rank=key.stop - start)
        return Dimension(None)

    def __contains__(self, value):
        return self._known and any(Dimension(d) == value for d in tuple.__iter__(self))

    def __array__(self, dtype=None, copy=None):
        """A fully defined shape converts to an int32 vector, as TF converts it to a tensor."""
        if not self.is_fully_defined():
            raise ValueError(f"Cannot convert a partially known TensorShape {self} to a Tensor.")
        return np.array(tuple(tuple.__iter__(self)), dtype=dtype or np.int32)

    # --- comparison and hashing: by the plain values -----------------------------------------
    def __eq__(self, other):
        try:
            other = as_shape(other)
        except TypeError:
            return NotImplemented
        return self._tuple() == other._tuple()

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash(self._tuple())

    def __lt__(self, other):
        return NotImplemented

    __le__ = __gt__ = __ge__ = __lt__

    # --- combining shapes ----------------------------------------------------------------------
    def __add__(self, other):
        return self.concatenate(other)

    def __radd__(self, other):
        return as_shape(other).concatenate(self)

    def __mul__(self, other):
        return NotImplemented

    __rmul__ = __mul__

    def concatenate(self, other) -> "TensorShape":
        other = as_shape(other)
        if not self._known or not other._known:
            return unknown_shape()
        return TensorShape(self._tuple() + other._tuple())

    def merge_with(self, other) -> "TensorShape":
        other = as_shape(other)
        if not self._known:
            return other
        if not other._known:
            return self
        try:
            self.assert_same_rank(other)
            return TensorShape([a.merge_with(b) for a, b in zip(self.dims, other.dims)])
        except ValueError:
            raise ValueError(f"Shapes {self} and {other} are not compatible") from None

    def most_specific_compatible_shape(self, other) -> "TensorShape":
        other = as_shape(other)
        if not self._known or not other._known or self.rank != other.rank:
            return unknown_shape()
        return TensorShape([a if a is not None and a == b else None
                            for a, b in zip(self._tuple(), other._tuple())])

    def is_compatible_with(self, other) -> bool:
        other = as_shape(other)
        if self._known and other._known:
            if self.rank != other.rank:
                return False
            return all(a is None or b is None or a == b
                       for a, b in zip(self._tuple(), other._tuple()))
        return True

    def assert_is_compatible_with(self, other) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def assert_same_rank(self, other) -> None:
        other = as_shape(other)
        if self.rank is not None and other.rank is not None and self.rank != other.rank:
            raise ValueError(f"Shapes {self} and {other} must have the same rank")

    def assert_has_rank(self, rank: int) -> None:
        if self.rank not in (None, rank):
            raise ValueError(f"Shape {self} must have rank {rank}")

    def with_rank(self, rank: int) -> "TensorShape":
        try:
            return self.merge_with(unknown_shape(rank=rank))
        except ValueError:
            raise ValueError(f"Shape {self} must have rank {rank}") from None

    def with_rank_at_least(self, rank: int) -> "TensorShape":
        if self.rank is not None and self.rank < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def with_rank_at_most(self, rank: int) -> "TensorShape":
        if self.rank is not None and self.rank > rank:
            raise ValueError(f"Shape {self} must have rank at most {rank}")
        return self

    # --- printing ------------------------------------------------------------------------------
    def __repr__(self):
        return f"TensorShape({self.dims!r})"

    def __str__(self):
        if not self._known:
            return "<unknown>"
        dims = [str(Dimension(d)) for d in tuple.__iter__(self)]
        return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"

    def __reduce__(self):
        return TensorShape, (self._tuple(),)


def as_shape(shape) -> TensorShape:
    """``shape`` (a TensorShape, a list or tuple of ints/None/Dimensions, or None) as a
    TensorShape."""
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank: Optional[int] = None, **kwargs) -> TensorShape:
    """A shape of unknown dims, and of unknown rank unless ``rank`` is given."""
    rank = kwargs.pop("ndims", rank)
    if kwargs:
        raise TypeError(f"Unknown argument: {kwargs}")
    return TensorShape(None if rank is None else [None] * rank)
