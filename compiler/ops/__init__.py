"""Op definitions by family. Importing this package registers every built-in op."""
import os
import pkgutil

from compiler.ir.op_registry import (OpDef, ArgDef, AttrDef, register_op, get_op, has_op, all_ops,
                                   ShapeContext, ReferenceContext)
from compiler.ops import core  # noqa: F401  (registers ops)

# The families of the first releases, in the order they were always registered; any other
# module of this package (a new family is a new file) follows, in name order.
_FIRST = ("math", "reduction", "nn", "array", "conv", "nn_grad", "random", "state", "io",
          "comm", "queue", "accumulator", "stack", "control_flow", "fused", "data_flow",
          "candidate_sampling", "matmul_update", "sparse_update", "matmul_accumulate",
          "segment_sum_accumulate", "conv_fused")
_here = os.path.dirname(os.path.abspath(__file__))
_FAMILIES = _FIRST + tuple(sorted(m.name for m in pkgutil.iter_modules([_here])
                                  if m.name not in _FIRST and m.name != "core"
                                  and not m.name.startswith("_")))
for _f in _FAMILIES:
    try:
        __import__(f"compiler.ops.{_f}")
    except ModuleNotFoundError as e:
        if e.name != f"compiler.ops.{_f}":
            raise

# The ops flowc itself defines (user packages and tests may register more later).
BUILTIN_OPS = frozenset(all_ops())
