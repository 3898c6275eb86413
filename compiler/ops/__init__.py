"""Op definitions by family. Importing this package registers every built-in op."""
from compiler.ir.op_registry import (OpDef, ArgDef, AttrDef, register_op, get_op, has_op, all_ops,
                                   ShapeContext, ReferenceContext)
from compiler.ops import core  # noqa: F401  (registers ops)

_FAMILIES = ("math", "reduction", "nn", "array", "conv", "nn_grad", "random", "state", "io",
             "comm", "queue", "accumulator", "stack", "control_flow", "fused", "data_flow",
             "candidate_sampling", "matmul_update", "sparse_update", "matmul_accumulate",
             "segment_sum_accumulate", "conv_fused", "tensor_list")
for _f in _FAMILIES:
    try:
        __import__(f"compiler.ops.{_f}")
    except ModuleNotFoundError as e:
        if e.name != f"compiler.ops.{_f}":
            raise

# The ops flowc itself defines (user packages and tests may register more later).
BUILTIN_OPS = frozenset(all_ops())
