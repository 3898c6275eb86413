"""``fl.sparse``: the TF1 ``tf.sparse`` namespace (``dsl/sparse_ops.py``)."""
from dsl.sparse_ops import (SparseTensor, SparseTensorValue, sparse_add as add,  # noqa: F401
                            sparse_placeholder as placeholder, sparse_reduce_sum as reduce_sum,
                            sparse_reorder as reorder, sparse_reshape as reshape,
                            sparse_retain as retain,
                            sparse_tensor_dense_matmul as sparse_dense_matmul,
                            sparse_tensor_to_dense as to_dense)

matmul = sparse_dense_matmul

__all__ = ["SparseTensor", "SparseTensorValue", "add", "placeholder", "reduce_sum", "reorder",
           "reshape", "retain", "sparse_dense_matmul", "matmul", "to_dense"]
