"""``fl.train.Saver``: checkpoints as ordinary ops, and the policy around them (TF1 semantics).

A ``Saver`` adds its ops once, at construction: under ``save/`` a ``filename`` placeholder
(the checkpoint path as UTF-8 bytes, so saving to a new path compiles nothing), a
``SaveV2`` of a read of every variable, and a ``RestoreV2`` whose outputs are assigned to
the variables (``save/restore_all``). ``RestoreV2`` checks every tensor before returning any
and every assignment depends on it, so a refused checkpoint leaves every variable as it was.

Around the ops, in Python like TensorFlow's: checkpoint names (``model.ckpt-1000``), the
``checkpoint`` state file of the folder (JSON, written atomically; it lists the latest and
every kept checkpoint), deleting all but the ``max_to_keep`` most recent ones (one every
``keep_checkpoint_every_n_hours`` is kept for good), and keep-best-by-metric::

    saver = fl.train.Saver(max_to_keep=3, keep_best="min")     # keep the lowest metric
    saver.save(sess, "runs/a/model.ckpt", global_step=step, metric=val_loss)
    fl.train.best_checkpoint("runs/a")                          # path of the best one

With ``keep_best``, each ``save(..., metric=m)`` is a candidate: the ``best_to_keep`` best
checkpoints by metric (lowest for "min", highest for "max"; NaN is never best; ties keep the
earlier) are not deleted however old, and the state file records them with their metrics
(``get_checkpoint_state(dir).best_checkpoints``). Saves without a metric are only ever kept
as recent ones.
"""
from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from compiler.devices import format_spec, parse_device_spec
from dsl.context import (colocate_with, control_dependencies, device, get_default_graph,
                         name_scope)
from dsl.control_ops import group
from dsl.ops import apply_op, placeholder
from dsl.tensor import Operation, Tensor, as_node, static_shape
from dsl.variables import Variable, global_variables
from runtime.checkpoint import (CHECKPOINT_STATUS_CODES, CheckpointError, bundle_index_path,
                                checkpoint_exists, delete_checkpoint, index_path,
                                list_checkpoint, merge_shards, prefix_to_bytes, shard_prefix)
from runtime.checkpoint import load_checkpoint as _load_tensors
from runtime.checkpoint_state import (STATE_FILE, STATE_FORMAT, CheckpointState,  # noqa: F401
                                      best_checkpoint, get_checkpoint_state, latest_checkpoint)
from runtime.checkpoint_state import resolve_checkpoint as _resolve
from runtime.checkpoint_state import write_checkpoint_state as _write_state
from runtime.dtypes import DType
from runtime.errors import FLOWC_NOT_FOUND, OpError

__all__ = ["Saver", "CheckpointState", "CheckpointError", "latest_checkpoint",
           "get_checkpoint_state", "best_checkpoint", "checkpoint_exists", "list_variables",
           "load_variable", "load_checkpoint", "NewCheckpointReader", "CheckpointReader"]

def list_variables(ckpt_dir_or_file: str) -> List[Tuple[str, List[int]]]:
    """``[(name, shape)]`` of a checkpoint (or of a folder's latest), sorted by name."""
    entries = list_checkpoint(_resolve(ckpt_dir_or_file))
    return [(name, list(shape)) for name, (_, shape) in sorted(entries.items())]


def load_variable(ckpt_dir_or_file: str, name: str) -> np.ndarray:
    """The value of tensor ``name`` in a checkpoint (or in a folder's latest), verified."""
    prefix = _resolve(ckpt_dir_or_file)
    tensors = _load_tensors(prefix, [name])
    if name not in tensors:
        raise CheckpointError(f"checkpoint '{prefix}' has no tensor '{name}'", FLOWC_NOT_FOUND)
    return tensors[name]


class CheckpointReader:
    """A checkpoint's tensors by name (``tf.train.load_checkpoint``, TF's
    ``CheckpointReader``): TensorFlow's bundles and flowc's older checkpoints alike, each
    tensor verified when it is read."""

    def __init__(self, prefix: str):
        self._prefix = prefix
        self._entries = list_checkpoint(prefix)

    def has_tensor(self, name: str) -> bool:
        return name in self._entries

    def get_tensor(self, name: str) -> np.ndarray:
        if name not in self._entries:
            raise CheckpointError(f"checkpoint '{self._prefix}' has no tensor '{name}'",
                                  FLOWC_NOT_FOUND)
        return _load_tensors(self._prefix, [name])[name]

    def get_variable_to_shape_map(self) -> Dict[str, List[int]]:
        return {name: list(shape) for name, (_, shape) in self._entries.items()}

    def get_variable_to_dtype_map(self) -> Dict[str, object]:
        return {name: dtype for name, (dtype, _) in self._entries.items()}

    def debug_string(self) -> bytes:
        return "".join(f"{n} ({d.ir_name if d else '?'}) {list(s)}\n"
                       for n, (d, s) in sorted(self._entries.items())).encode()


def load_checkpoint(ckpt_dir_or_file: str) -> CheckpointReader:
    """A ``CheckpointReader`` of a checkpoint (or of a folder's latest)."""
    return CheckpointReader(_resolve(ckpt_dir_or_file))


NewCheckpointReader = CheckpointReader


# --- the Saver ---------------------------------------------------------------------------------
def _named_variables(var_list) -> Dict[str, Variable]:
    if var_list is None:
        var_list = global_variables()
    if isinstance(var_list, dict):
        items = list(var_list.items())
    else:
        items = []
        for v in var_list:
            if not isinstance(v, Variable):
                raise TypeError(f"Saver var_list holds {v!r}; expected fl.Variable objects")
            items.append((v.op.name, v))
    named: Dict[str, Variable] = {}
    seen: Dict[int, str] = {}
    for name, v in items:
        if not isinstance(name, str) or not name:
            raise TypeError(f"Saver var_list names must be non-empty strings, got {name!r}")
        if not isinstance(v, Variable):
            raise TypeError(f"Saver var_list['{name}'] is {v!r}; expected an fl.Variable")
        if name in named:
            raise ValueError(f"two variables are saved as '{name}'")
        if id(v) in seen:
            raise ValueError(f"variable '{v.op.name}' is saved twice (as '{seen[id(v)]}' and "
                             f"'{name}')")
        seen[id(v)] = name
        named[name] = v
    return named


def _by_device(named: Dict[str, Variable]) -> List[Dict[str, Variable]]:
    """The variables grouped by the device they asked for, in order of first appearance."""
    groups: Dict[str, Dict[str, Variable]] = {}
    for name, v in named.items():
        groups.setdefault(as_node(v.handle).device or "", {})[name] = v
    return list(groups.values())


class Saver:
    """Saves and restores variables (``tf.train.Saver``).

    ``var_list``: variables (saved under their op names, e.g. ``dense1/weights``) or a dict
    name -> variable; all global variables by default. ``max_to_keep``: how many recent
    checkpoints to keep (None or 0: all). ``keep_checkpoint_every_n_hours``: besides those,
    keep one checkpoint for good every so many hours. ``keep_best``: "min" or "max" to keep
    the ``best_to_keep`` best checkpoints by the ``metric`` given to ``save``.

    ``sharded``: one ``SaveV2``/``RestoreV2`` per device the variables asked for, on the first
    CPU of that device's task (as TensorFlow's ``set_cpu0``: the file ops have CPU kernels
    only, and a variable on the task's GPU stays there, its reads and assignments with it),
    each writing its own shard ``<path>-0000k-of-0000n``; ``save`` then merges them into one
    checkpoint at ``<path>`` with a data file per shard (TensorFlow's ``MergeV2Checkpoints``
    layout; the client must see the folder the tasks write), which every shard's
    ``RestoreV2`` reads. Across tasks every parameter server saves the variables it hosts, in
    parallel, and no variable's value travels to the client; a checkpoint is recorded only
    once every shard is written and merged.
    """

    def __init__(self, var_list=None, max_to_keep: Optional[int] = 5,
                 keep_checkpoint_every_n_hours: float = 10000.0, name: Optional[str] = None,
                 allow_empty: bool = False, pad_step_number: bool = False,
                 keep_best: Optional[str] = None, best_to_keep: int = 1,
                 sharded: bool = False, saver_def: Optional[dict] = None,
                 import_scope: Optional[str] = None, defer_build: bool = False,
                 **kwargs):
        if keep_best not in (None, "min", "max"):
            raise ValueError(f"keep_best must be None, 'min' or 'max', got {keep_best!r}")
        if keep_best is not None and (not isinstance(best_to_keep, int) or best_to_keep < 1):
            raise ValueError(f"best_to_keep must be a positive int, got {best_to_keep!r}")
        if max_to_keep is not None and max_to_keep < 0:
            raise ValueError(f"max_to_keep must be >= 0 or None, got {max_to_keep}")
        unknown = set(kwargs) - {"reshape", "builder", "write_version", "restore_sequentially",
                                 "save_relative_paths", "filename"}
        if unknown:
            raise TypeError(f"Saver got unexpected arguments: {', '.join(sorted(unknown))}")
        if saver_def is not None:
            max_to_keep = saver_def.get("max_to_keep", max_to_keep)
            keep_checkpoint_every_n_hours = saver_def.get("keep_checkpoint_every_n_hours",
                                                          keep_checkpoint_every_n_hours)
            sharded = saver_def.get("sharded", sharded)
            self._vars = {n: None for n in saver_def.get("var_names", [])}
        else:
            self._vars = _named_variables(var_list)
            if not self._vars and not allow_empty:
                raise ValueError("no variables to save")
        self.max_to_keep = max_to_keep
        self.keep_checkpoint_every_n_hours = float(keep_checkpoint_every_n_hours)
        self.keep_best = keep_best
        self.best_to_keep = best_to_keep
        self._pad_step_number = pad_step_number
        self.sharded = bool(sharded)
        self._recent: List[Tuple[str, float]] = []          # (path, time), oldest first
        self._best: List[Tuple[str, float, float]] = []     # (path, metric, time), best first
        self._next_checkpoint_time = time.time() + self.keep_checkpoint_every_n_hours * 3600
        self._lock = threading.Lock()
        self.graph = get_default_graph()
        self._filename = self._save_op = self._restore_op = None
        self._checkpoint_ops = set()
        if saver_def is not None:
            self._adopt(saver_def, import_scope or "")
        elif self._vars:
            self._build(name or "save")

    def _adopt(self, saver_def: dict, prefix: str) -> None:
        """Use the ops ``saver_def`` names (a meta graph's saver, imported): adds no op."""
        g = self.graph
        self._filename = Tensor(g.output(prefix + saver_def["filename_tensor_name"]))
        self._save_op = Operation(g.node(prefix + saver_def["save_tensor_name"]))
        self._restore_op = Operation(g.node(prefix + saver_def["restore_op_name"]))
        self._checkpoint_ops = {prefix + n for n in saver_def.get("checkpoint_ops", [])}
        self._num_shards = int(saver_def.get("num_shards", 0))

    def as_saver_def(self) -> Optional[dict]:
        """The names of this saver's ops and its policy (TensorFlow's ``SaverDef``, as JSON);
        ``Saver(saver_def=...)`` rebuilds the saver over them (``import_meta_graph`` does)."""
        if self._save_op is None:
            return None
        return {"filename_tensor_name": self._filename.name,
                "save_tensor_name": self._save_op.name,
                "restore_op_name": self._restore_op.name,
                "var_names": list(self._vars), "checkpoint_ops": sorted(self._checkpoint_ops),
                "max_to_keep": self.max_to_keep, "sharded": self.sharded,
                "num_shards": getattr(self, "_num_shards", 0),
                "keep_checkpoint_every_n_hours": self.keep_checkpoint_every_n_hours}

    def to_proto(self, export_scope: Optional[str] = None) -> Optional[dict]:
        return self.as_saver_def()

    def build(self) -> None:
        """Nothing to do: the ops are built at construction (``Saver.build`` of TensorFlow)."""

    def export_meta_graph(self, filename: Optional[str] = None, collection_list=None,
                          as_text: bool = False, export_scope=None, clear_devices: bool = False,
                          clear_extraneous_savers: bool = False,
                          strip_default_attrs: bool = False, save_debug_info: bool = False):
        """The meta graph of this saver's graph, with this saver (``Saver.export_meta_graph``)."""
        from dsl.meta_graph import export_meta_graph
        return export_meta_graph(filename, saver_def=self.as_saver_def(),
                                 collection_list=collection_list, graph=self.graph,
                                 export_scope=export_scope, clear_devices=clear_devices)

    def _build(self, scope_name: str) -> None:
        for name, v in self._vars.items():
            if v.graph is not self.graph:
                raise ValueError(f"variable '{name}' is from another graph than the default graph")
        with control_dependencies(None), name_scope(scope_name):
            self._filename = placeholder(DType.u8, [None], name="filename")
            shards = _by_device(self._vars) if self.sharded else [self._vars]
            saves, restores, self._checkpoint_ops = [], [], set()
            for k, named in enumerate(shards):
                with self._on_shard(named):
                    filename = self._filename
                    if self.sharded:
                        suffix = np.frombuffer(shard_prefix("", k, len(shards)).encode(),
                                               np.uint8)
                        filename = apply_op("ConcatV2", [[filename, suffix], 0], {},
                                            name="ShardedFilename")
                    # each shard saves to its own prefix (merged by save()); every
                    # restore reads the checkpoint's one index, as TensorFlow's does
                    save, restored = self._shard_ops(named, filename, self._filename)
                saves.append(save)
                restores.append(restored)
            # Every assignment waits for every shard's RestoreV2, which checks its whole shard
            # first: a refused shard leaves every variable as it was.
            assigns = []
            with control_dependencies([r[0].op for r in restores] if self.sharded else None):
                for named, restored in zip(shards, restores):
                    for v, t in zip(named.values(), restored):
                        with self._with_variable(v):
                            assigns.append(apply_op("AssignVariableOp", [v.handle, t],
                                                    {"dtype": v.dtype}, name="Assign"))
            self._num_shards = len(shards)
            self._save_op = saves[0] if len(saves) == 1 else group(*saves, name="save_all")
            self._restore_op = group(*assigns, name="restore_all")

    def _on_shard(self, named: Dict[str, Variable]):
        """A sharded saver's file ops run on the first CPU of the task its variables asked for
        (the first variable's request; the shards group variables by it)."""
        if not self.sharded:
            return contextlib.nullcontext()
        first = next(iter(named.values()))
        fields = parse_device_spec(as_node(first.handle).device or "")
        fields["device"] = "CPU:0"
        return device(format_spec(fields))

    def _with_variable(self, v: Variable):
        """A sharded saver's reads and assignments go where their variable is, whatever
        device block holds the file ops."""
        return colocate_with(v) if self.sharded else contextlib.nullcontext()

    def _shard_ops(self, named: Dict[str, Variable], filename, restore_from=None):
        """``SaveV2`` of reads of ``named`` to ``filename``, and the ``RestoreV2`` outputs for
        them from ``restore_from`` (``filename`` by default)."""
        names, variables = list(named), list(named.values())
        values = []
        for v in variables:
            with self._with_variable(v):
                values.append(apply_op("ReadVariableOp", [v.handle], {"dtype": v.dtype},
                                       name="read"))
        save = apply_op("SaveV2", [filename, values], {"tensor_names": names}, name="SaveV2")
        restored = apply_op("RestoreV2", [filename if restore_from is None else restore_from],
                            {"tensor_names": names, "dtypes": [v.dtype for v in variables],
                             "shapes": [static_shape(v) for v in variables]}, name="RestoreV2")
        restored = restored if isinstance(restored, list) else [restored]
        self._checkpoint_ops.update((save.name, restored[0].op.name))
        return save, restored

    # --- ops -------------------------------------------------------------------------------
    @property
    def filename_tensor(self) -> Optional[Tensor]:
        """The u8 placeholder fed with a checkpoint path's UTF-8 bytes."""
        return self._filename

    @property
    def save_op(self) -> Optional[Operation]:
        return self._save_op

    @property
    def restore_op(self) -> Optional[Operation]:
        return self._restore_op

    @property
    def var_names(self) -> List[str]:
        return list(self._vars)

    def _run(self, sess, op: Operation, path: str) -> None:
        if sess.graph is not self.graph:
            raise ValueError("the session runs another graph than the one this Saver was built in")
        try:
            sess.run(op, {self._filename: prefix_to_bytes(path)})
        except CheckpointError:
            raise
        except OpError as e:
            # A checkpoint op's failure in C comes back as its class (NotFoundError, ...):
            # the same failure as a CheckpointError of that class, naming the same node.
            if e.node_name in self._checkpoint_ops and e.status_code in CHECKPOINT_STATUS_CODES:
                err = CheckpointError(str(e), e.status_code, e.node_name, e.location)
                err.op_type, err.op = e.op_type, e.op
                raise err from None
            raise

    # --- saving ----------------------------------------------------------------------------
    def save(self, sess, save_path: str, global_step=None, latest_filename: Optional[str] = None,
             meta_graph_suffix: str = "meta", write_meta_graph: bool = True,
             write_state: bool = True, strip_default_attrs: bool = False,
             save_debug_info: bool = False, metric: Optional[float] = None) -> Optional[str]:
        """Save the variables to ``save_path`` (``-<global_step>`` appended when given: an
        int, or a tensor/variable evaluated in ``sess``); returns the checkpoint path.

        With ``write_meta_graph`` (TensorFlow's default), also writes the graph, its
        collections and this saver to ``<checkpoint>.<meta_graph_suffix>``
        (``import_meta_graph`` reads it back). With ``write_state``, records the checkpoint in
        the folder's ``checkpoint`` file and deletes checkpoints beyond ``max_to_keep``
        (except the best ones with ``keep_best``), with their meta graphs.
        """
        if metric is not None:
            if self.keep_best is None:
                raise ValueError("save(metric=...) needs a Saver built with keep_best='min' "
                                 "or 'max'")
            metric = float(metric)
        if self._save_op is None:
            return None                            # allow_empty, nothing to save
        save_path = os.fspath(save_path)
        if global_step is not None:
            if not isinstance(global_step, (int, np.integer)):
                global_step = sess.run(global_step)
            step = int(global_step)
            save_path = (f"{save_path}-{step:08d}" if self._pad_step_number
                         else f"{save_path}-{step}")
        folder = os.path.dirname(save_path)
        if os.path.basename(save_path) == (latest_filename or STATE_FILE):
            raise ValueError(f"checkpoint path '{save_path}' collides with the state file "
                             f"'{latest_filename or STATE_FILE}'")
        with self._lock:
            self._run(sess, self._save_op, save_path)
            if self.sharded and getattr(self, "_num_shards", 0):
                merge_shards(save_path, self._num_shards)
            if write_meta_graph:
                self.export_meta_graph(f"{save_path}.{meta_graph_suffix}")
                self._meta_suffix = meta_graph_suffix
            if not write_state:
                return save_path
            doomed = self._record(save_path, metric, time.time())
            kept = self._kept()
            _write_state(folder, latest_filename, save_path, kept,
                         self._next_checkpoint_time - self.keep_checkpoint_every_n_hours * 3600,
                         [(p, m) for p, m, _ in self._best], self.keep_best)
            # Deleted only once the state file no longer names them.
            for path in doomed:
                delete_checkpoint(path)
                try:
                    os.remove(f"{path}.{getattr(self, '_meta_suffix', 'meta')}")
                except OSError:
                    pass
        return save_path

    def _kept(self) -> List[Tuple[str, float]]:
        """Every checkpoint this saver keeps (recent and best), oldest first."""
        times = dict(self._recent)
        for p, _, t in self._best:
            times.setdefault(p, t)
        return sorted(times.items(), key=lambda pt: pt[1])

    def _record(self, path: str, metric: Optional[float], now: float) -> List[str]:
        """Add ``path`` to the books; returns the checkpoints to delete now."""
        self._recent = [(p, t) for p, t in self._recent if p != path]
        self._best = [b for b in self._best if b[0] != path]
        self._recent.append((path, now))
        dropped: List[Tuple[str, float]] = []
        if self.keep_best is not None and metric is not None and not math.isnan(metric):
            sign = 1.0 if self.keep_best == "min" else -1.0
            self._best.append((path, metric, now))
            self._best.sort(key=lambda b: (sign * b[1], b[2]))
            for p, _, t in self._best[self.best_to_keep:]:
                dropped.append((p, t))
            del self._best[self.best_to_keep:]
        if self.max_to_keep and len(self._recent) > self.max_to_keep:
            dropped.extend(self._recent[:-self.max_to_keep])
            del self._recent[:-self.max_to_keep]
        keep = {p for p, _ in self._recent} | {p for p, _, _ in self._best}
        doomed = []
        for p, t in sorted(set(dropped), key=lambda pt: pt[1]):
            if p in keep:
                continue
            if t > self._next_checkpoint_time:             # kept for good (n hours)
                self._next_checkpoint_time += self.keep_checkpoint_every_n_hours * 3600
                continue
            doomed.append(p)
        return doomed

    # --- restoring -------------------------------------------------------------------------
    def restore(self, sess, save_path: str) -> None:
        """Set every variable from checkpoint ``save_path``, or none of them: a missing,
        truncated or corrupt checkpoint, or one without a variable or with another shape or
        dtype, is refused with a ``CheckpointError`` naming all that do not match."""
        if save_path is None:
            raise ValueError("cannot restore: save_path is None (no checkpoint found?)")
        if self._restore_op is None:
            return
        self._run(sess, self._restore_op, os.fspath(save_path))

    # --- bookkeeping -----------------------------------------------------------------------
    @property
    def last_checkpoints(self) -> List[str]:
        """The checkpoints this saver has not deleted, oldest first."""
        return [p for p, _ in self._kept()]

    @property
    def best_checkpoints(self) -> List[Tuple[str, float]]:
        """``[(path, metric)]`` kept by ``keep_best``, best first."""
        return [(p, m) for p, m, _ in self._best]

    def recover_last_checkpoints(self, checkpoint_paths: Sequence[str],
                                 best: Sequence[Tuple[str, float]] = ()) -> None:
        """Take over checkpoints a previous run left (``get_checkpoint_state(dir)``'s
        ``all_model_checkpoint_paths`` and ``best_checkpoints``), so they are rotated too."""
        def mtime(p):
            for index in (bundle_index_path(p), index_path(p)):
                try:
                    return os.path.getmtime(index)
                except OSError:
                    pass
            return time.time()
        with self._lock:
            self._recent = [(p, mtime(p)) for p in checkpoint_paths]
            if self.max_to_keep:
                self._recent = self._recent[-self.max_to_keep:]
            if self.keep_best is not None:
                sign = 1.0 if self.keep_best == "min" else -1.0
                ranked = sorted(((p, float(m), mtime(p)) for p, m in best),
                                key=lambda b: (sign * b[1], b[2]))
                self._best = ranked[:self.best_to_keep]
