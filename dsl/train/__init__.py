"""``fl.train``: optimizers and the global step, as TensorFlow 1.x's ``tf.train``.

All of it is user-level: it adds variable reads, arithmetic and ``Assign*`` /
``ResourceScatter*`` ops to the graph (see ``dsl/train/optimizer.py`` for the protocol and
each optimizer's module for its update formulas).
"""
from __future__ import annotations

from typing import Dict, Type

from dsl.train.adadelta import AdadeltaOptimizer
from dsl.train.adagrad import AdagradOptimizer
from dsl.train.adam import AdamOptimizer
from dsl.train.global_step import (assert_global_step, create_global_step, get_global_step,
                                   get_or_create_global_step, global_step)
from dsl.train.gradient_descent import GradientDescentOptimizer
from dsl.train.learning_rate_decay import (cosine_decay, exponential_decay,
                                           inverse_time_decay, natural_exp_decay,
                                           piecewise_constant, polynomial_decay)
from dsl.train.input import (QUEUE_RUNNERS, add_queue_runner, batch, shuffle_batch,
                             start_queue_runners)
from dsl.train.ftrl import FtrlOptimizer
from dsl.train.momentum import MomentumOptimizer
from dsl.train.moving_averages import ExponentialMovingAverage, assign_moving_average
from dsl.train.optimizer import Optimizer
from dsl.train.rmsprop import RMSPropOptimizer
from dsl.train.sync_replicas import SyncReplicasOptimizer
from dsl.queues import Coordinator, QueueRunner
from dsl.train.device_setter import (GreedyLoadBalancingStrategy, RoundRobinStrategy,
                                     byte_size_load_fn, replica_device_setter)
from dsl.train.server_lib import ClusterDef, ClusterSpec, JobDef, Server, ServerDef
from dsl.train.hooks import (CheckpointSaverHook, LoggingTensorHook, NanLossDuringTrainingError,
                             NanTensorHook, SecondOrStepTimer, SessionRunArgs, SessionRunContext,
                             SessionRunHook, SessionRunValues, StepCounterHook, StopAtStepHook,
                             SummarySaverHook)
from dsl.train.monitored_session import (ChiefSessionCreator, MonitoredSession,
                                         MonitoredTrainingSession, Scaffold, SessionNotReadyError,
                                         WorkerSessionCreator)
from dsl.saver import (CheckpointReader, CheckpointState, NewCheckpointReader, Saver,
                       best_checkpoint, checkpoint_exists, get_checkpoint_state,
                       latest_checkpoint, list_variables, load_checkpoint, load_variable)
from dsl.meta_graph import export_meta_graph, import_meta_graph
from dsl.summary import summary_iterator

__all__ = ["Optimizer", "GradientDescentOptimizer", "MomentumOptimizer", "AdagradOptimizer",
           "RMSPropOptimizer", "AdamOptimizer", "get_global_step", "create_global_step",
           "get_or_create_global_step", "global_step", "assert_global_step",
           "optimizer_by_name", "OPTIMIZERS", "Saver", "CheckpointState", "latest_checkpoint",
           "get_checkpoint_state", "best_checkpoint", "checkpoint_exists", "list_variables",
           "load_checkpoint", "NewCheckpointReader", "CheckpointReader",
           "load_variable", "Coordinator", "QueueRunner", "replica_device_setter",
           "RoundRobinStrategy", "GreedyLoadBalancingStrategy", "byte_size_load_fn",
           "ClusterSpec", "ClusterDef", "JobDef", "Server", "ServerDef",
           "MonitoredTrainingSession", "MonitoredSession", "Scaffold", "ChiefSessionCreator",
           "WorkerSessionCreator", "SessionNotReadyError", "SessionRunHook", "SessionRunArgs",
           "SessionRunContext", "SessionRunValues", "SecondOrStepTimer", "StopAtStepHook",
           "CheckpointSaverHook", "StepCounterHook", "LoggingTensorHook", "NanTensorHook",
           "NanLossDuringTrainingError", "SyncReplicasOptimizer", "exponential_decay",
           "piecewise_constant", "polynomial_decay", "natural_exp_decay", "inverse_time_decay",
           "cosine_decay", "ExponentialMovingAverage", "assign_moving_average", "batch", "shuffle_batch", "add_queue_runner",
           "start_queue_runners", "QUEUE_RUNNERS", "export_meta_graph", "import_meta_graph",
           "summary_iterator", "AdadeltaOptimizer", "FtrlOptimizer"]

OPTIMIZERS: Dict[str, Type[Optimizer]] = {
    "sgd": GradientDescentOptimizer,
    "gradient_descent": GradientDescentOptimizer,
    "momentum": MomentumOptimizer,
    "adagrad": AdagradOptimizer,
    "rmsprop": RMSPropOptimizer,
    "adam": AdamOptimizer,
    "adadelta": AdadeltaOptimizer,
    "ftrl": FtrlOptimizer,
}


def optimizer_by_name(name: str, **kwargs) -> Optimizer:
    """An optimizer from a short name (``"sgd"``/``"gradient_descent"``, ``"momentum"``,
    ``"adagrad"``, ``"rmsprop"``, ``"adam"``, ``"adadelta"``, ``"ftrl"``; case and ``-`` are
    ignored, and the class names work too), constructed with ``kwargs``."""
    if not isinstance(name, str):
        raise TypeError(f"optimizer_by_name takes a string, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    cls = OPTIMIZERS.get(key)
    if cls is None:
        by_class = {c.__name__.lower(): c for c in OPTIMIZERS.values()}
        cls = by_class.get(key) or by_class.get(key + "optimizer")
    if cls is None:
        raise ValueError(f"unknown optimizer {name!r}; known: {', '.join(sorted(OPTIMIZERS))}")
    return cls(**kwargs)
