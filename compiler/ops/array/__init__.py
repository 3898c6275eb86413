"""Shape and array ops: Reshape, Transpose, ConcatV2, Split, SplitV, Slice, StridedSlice, Pack,
Unpack, Squeeze, ExpandDims, Tile, Pad, Fill, ZerosLike, OnesLike, OneHot, Range, GatherV2,
ReverseV2.

Names, inputs, attrs and semantics follow TensorFlow's raw ops. Shape-like inputs (``shape``,
``perm``, ``begin``, ...) are tensors: shape functions read them when they are constants and
give unknown dims otherwise.

Reshape, ExpandDims and Squeeze are views (no copy). Bad data never reaches undefined
behaviour: out-of-range indices and sizes give TensorFlow's defined result or an error naming
the node, in the reference kernels as in generated C (``compiler/codegen/c_ops/array/``).

One module per family of ops; importing this package registers them all.
"""
import importlib

# In this order: the registry's order, which IR printing follows.
MODULES = ("views", "transpose", "concat_split", "slicing", "tile_pad", "fill_range", "gather",
           "reverse")

for _module in MODULES:
    importlib.import_module(f"compiler.ops.array.{_module}")  # registers its ops
