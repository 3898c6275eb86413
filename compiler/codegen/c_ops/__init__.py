"""The C lowering of each op family, one module per family of ``compiler/ops/``.

``compiler/ops/<family>.py`` defines an op (signature, shape function, reference kernel);
``compiler/codegen/c_ops/<family>.py`` renders its C code and attaches it to the op's registry
entry with ``set_c_kernel``, from this floor, so op definitions never import code generation.
Importing this package attaches every built-in op's C lowering (``compiler/__init__.py`` does,
after ``compiler.ops``).
"""
import importlib
import os
import pkgutil

# The families of the first releases, in the order they were always attached; any other
# module of this package (a new family is a new file) follows, in name order.
_FIRST = ("core", "math", "reduction", "nn", "array", "conv", "nn_grad", "random", "state",
          "io", "comm", "queue", "accumulator", "stack", "control_flow", "fused", "data_flow",
          "candidate_sampling", "matmul_update", "sparse_update", "matmul_accumulate",
          "segment_sum_accumulate", "conv_fused")
_here = os.path.dirname(os.path.abspath(__file__))
FAMILIES = _FIRST + tuple(sorted(m.name for m in pkgutil.iter_modules([_here])
                                 if m.name not in _FIRST and not m.name.startswith("_")))

for _family in FAMILIES:
    importlib.import_module(f"compiler.codegen.c_ops.{_family}")
