"""The C lowering of each op family, one module per family of ``compiler/ops/``.

``compiler/ops/<family>.py`` defines an op (signature, shape function, reference kernel);
``compiler/codegen/c_ops/<family>.py`` renders its C code and attaches it to the op's registry
entry with ``set_c_kernel``, from this floor, so op definitions never import code generation.
Importing this package attaches every built-in op's C lowering (``compiler/__init__.py`` does,
after ``compiler.ops``).
"""
import importlib

FAMILIES = ("core", "math", "reduction", "nn", "array", "conv", "nn_grad", "random", "state",
            "io", "comm", "queue", "accumulator", "stack", "control_flow", "fused", "data_flow",
            "candidate_sampling", "matmul_update", "sparse_update", "matmul_accumulate",
            "segment_sum_accumulate", "conv_fused", "tensor_list")

for _family in FAMILIES:
    importlib.import_module(f"compiler.codegen.c_ops.{_family}")
