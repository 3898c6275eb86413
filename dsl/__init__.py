"""flowc's Python API (``import dsl as fl``), named after TensorFlow 1.x.

Everything here is ordinary Python that adds ops to a graph; the compiler and the runtime
know nothing of it.
"""
from runtime.dtypes import DType

from compiler import ops as _ops  # noqa: F401  (registers the built-in ops)
from compiler.ir.op_registry import register_op
from dsl.context import (Graph, colocate_with, control_dependencies, device, get_default_graph,
                         name_scope, reset_default_graph)
from dsl.tensor import Operation, Tensor
from dsl.tensor_shape import (Dimension, TensorShape, dimension_at_index, dimension_value,
                              unknown_shape)
from dsl.ops import (apply_op, constant, convert_to_tensor, placeholder, placeholder_with_default,
                     raw_ops)
from dsl.math_ops import *  # noqa: F401,F403
from dsl.segment_ops import *  # noqa: F401,F403
from dsl.index_set_ops import *  # noqa: F401,F403
from dsl.math_special import *  # noqa: F401,F403
from dsl.math_special_functions import *  # noqa: F401,F403
from dsl.array_ops import *  # noqa: F401,F403
from dsl.reduction_ops import *  # noqa: F401,F403
from dsl.math_compositions import *  # noqa: F401,F403
from dsl.linalg_ops import *  # noqa: F401,F403
from dsl.diag_ops import *  # noqa: F401,F403
from dsl.grid_ops import *  # noqa: F401,F403
from dsl.tensordot_norm import *  # noqa: F401,F403
from dsl.to_dtype import *  # noqa: F401,F403
from dsl.indexing_ops import *  # noqa: F401,F403
from dsl.masking_ops import *  # noqa: F401,F403
from dsl.random_ops import *  # noqa: F401,F403
from dsl import random
from dsl.gradients import *  # noqa: F401,F403
from dsl.control_ops import *  # noqa: F401,F403
from dsl.control_flow_ops import *  # noqa: F401,F403
from dsl.tensor_array_ops import TensorArray
from dsl.functional_ops import foldl, foldr, map_fn, scan
from dsl import nest
from dsl.indexed_slices import IndexedSlices
from dsl.sparse_ops import *  # noqa: F401,F403
from dsl import sparse
from dsl.variables import *  # noqa: F401,F403
from dsl.variable_scope import *  # noqa: F401,F403
from dsl.init_ops import *  # noqa: F401,F403
from dsl.clip_ops import *  # noqa: F401,F403
from dsl.logging_ops import Print
from dsl.script_ops import numpy_function, py_func
from dsl.template import make_template
from dsl.data_flow_ops import *  # noqa: F401,F403
from dsl.accumulator_ops import ConditionalAccumulator, SparseConditionalAccumulator
from dsl import nn
from dsl import layers
from dsl import losses
from dsl import metrics
from dsl import contrib
from dsl import data
from dsl import graph_util
from dsl import saved_model
from dsl.meta_graph import import_graph_def
from dsl import bitwise
from dsl import image
from dsl import summary
from dsl import train
from dsl import app, flags, gfile
from dsl import io
from dsl.config import ConfigProto, RunMetadata, RunOptions
from dsl.queues import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue
from dsl.session import InteractiveSession, Session, get_default_session
from dsl import compat
from dsl import logging
from dsl import linalg
from dsl import math  # noqa: E402  (fl.math: after every name it aliases)
from runtime.checkpoint import CheckpointError
from dsl import errors
from runtime.errors import (AbortedError, CancelledError, DeadlineExceededError,  # noqa: F401
                            FailedPreconditionError, FeedError, FlowcError, InvalidArgumentError,
                            NotFoundError, OpError, OutOfRangeError, ResourceExhaustedError,
                            RuntimeExecutionError, UnavailableError)

float16, bfloat16, float32, float64 = DType.f16, DType.bf16, DType.f32, DType.f64
half = float16
int8, int16, int32, int64, uint8 = DType.i8, DType.i16, DType.i32, DType.i64, DType.u8
uint16, uint32, uint64 = DType.u16, DType.u32, DType.u64
bool_ = DType.bool
bool = DType.bool  # noqa: A001  (tf.bool; set last: nothing above reads the builtin)
f32, f64, i32, i64 = DType.f32, DType.f64, DType.i32, DType.i64
from dsl.logging_ops import print_v2 as print  # noqa: E402,A001  (tf.print; set last)
