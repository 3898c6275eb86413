"""``fl.linalg``: TensorFlow's ``tf.linalg`` namespace (TF 1.13+), for the functions flowc
has: TensorFlow's names there for them (``det`` is ``fl.matrix_determinant``, ``diag`` is
``fl.matrix_diag`` while ``tensor_diag`` is ``fl.diag``, ``transpose`` is
``fl.matrix_transpose``). tf.linalg names flowc lacks (cholesky, svd, qr, ...) are absent:
using one is an AttributeError, not a silent stand-in."""
from __future__ import annotations

from dsl.clip_ops import global_norm
from dsl.diag_ops import diag as tensor_diag
from dsl.diag_ops import diag_part as tensor_diag_part
from dsl.diag_ops import eye, matrix_band_part as band_part
from dsl.diag_ops import matrix_diag as diag
from dsl.diag_ops import matrix_diag_part as diag_part
from dsl.diag_ops import matrix_set_diag as set_diag
from dsl.diag_ops import matrix_transpose, trace
from dsl.indexing_ops import einsum
from dsl.linalg_ops import matmul
from dsl.linalg_ops import matrix_determinant as det
from dsl.linalg_ops import matrix_inverse as inv
from dsl.nn_norm import l2_normalize
from dsl.tensordot_norm import norm, tensordot

transpose = matrix_transpose
adjoint = matrix_transpose      # real dtypes only: the adjoint is the transpose

__all__ = ["adjoint", "band_part", "det", "diag", "diag_part", "einsum", "eye", "global_norm",
           "inv", "l2_normalize", "matmul", "matrix_transpose", "norm", "set_diag",
           "tensor_diag", "tensor_diag_part", "tensordot", "trace", "transpose"]
