"""The C lowering of the array ops (``compiler/ops/array/``), one module per family of ops;
importing this package attaches their C kernels.

The C kernels read shape-like inputs from the tensor's data at run time where the output's
dims depend on them (Reshape, Fill, Range, Slice, StridedSlice, Tile, Pad, OneHot, SplitV) and
need them constant where only the axis layout does (Transpose's ``perm``, the ``axis`` of
ConcatV2, Split, SplitV, GatherV2 and ExpandDims's ``dim``).

Reshape, ExpandDims and Squeeze are views (no copy: only their output dims). Copies move
contiguous runs with memcpy (``array_copy.c.j2``). Bad data never reaches undefined behaviour:
out-of-range indices and sizes give TensorFlow's defined result or an error naming the node,
as in the reference kernels.
"""
import importlib

MODULES = ("views", "transpose", "concat_split", "slicing", "tile_pad", "fill_range", "gather",
           "reverse")

for _module in MODULES:
    importlib.import_module(f"compiler.codegen.c_ops.array.{_module}")  # attaches its C kernels
