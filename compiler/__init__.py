"""flowc's compiler: IR, op registry, reference interpreter, passes, codegen, CLI."""
from compiler import ops  # noqa: F401  (registers built-in ops: their definitions)
from compiler.passes import manager as _pass_manager  # noqa: F401  (checks pass names in flags)
from compiler.codegen import c_ops  # noqa: F401  (attaches each op's C lowering)
from compiler.codegen import cuda_kernels as _cuda_kernels

_cuda_kernels.load_all()          # attaches each op's CUDA lowering (no GPU needed)
from compiler.errors import (CompileError, GraphError, ShapeError, OpError, CodegenError,
                             BuildError, IRSyntaxError, ExecutionError)
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.types import TensorType
from compiler.ir.printer import print_graph
from compiler.ir.parser import parse_graph, parse_graphs
from runtime.dtypes import DType
