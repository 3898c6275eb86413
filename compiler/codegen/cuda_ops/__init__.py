"""The CUDA lowering of each op kind, beside ``compiler/codegen/c_ops/`` (the C lowerings): each
module registers GPU kernels with ``cuda_kernels.register_cuda_kernel``, which sets
``OpDef.cuda_kernel``; ``cuda_kernels.load_all`` imports them (``compiler/__init__.py`` does)."""
