"""A checkpoint folder's state file (``checkpoint``, JSON, ``tf.train.CheckpointState``): the
latest checkpoint, every kept one, and the best by metric. ``fl.train.Saver`` writes it;
whatever takes "a checkpoint prefix or the folder of its latest one" reads it
(``resolve_checkpoint``: ``flowc compile/export/run --checkpoint``, ``fl.train.load_variable``).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from runtime.checkpoint import CheckpointError, checkpoint_exists, write_file_atomically
from runtime.errors import FLOWC_DATA_LOSS, FLOWC_NOT_FOUND

__all__ = ["STATE_FILE", "STATE_FORMAT", "CheckpointState", "get_checkpoint_state",
           "write_checkpoint_state", "latest_checkpoint", "best_checkpoint",
           "resolve_checkpoint"]

STATE_FILE = "checkpoint"
STATE_FORMAT = "flowc-checkpoint-state"


# --- the state file ----------------------------------------------------------------------------
@dataclass
class CheckpointState:
    """What a folder's ``checkpoint`` file says (``tf.train.CheckpointState``); paths are
    joined with the folder unless absolute."""
    model_checkpoint_path: str
    all_model_checkpoint_paths: List[str] = field(default_factory=list)
    all_model_checkpoint_timestamps: List[float] = field(default_factory=list)
    last_preserved_timestamp: Optional[float] = None
    best_checkpoints: List[Tuple[str, float]] = field(default_factory=list)   # best first
    keep_best: Optional[str] = None

    @property
    def best_model_checkpoint_path(self) -> Optional[str]:
        return self.best_checkpoints[0][0] if self.best_checkpoints else None


def _state_path(checkpoint_dir: str, latest_filename: Optional[str]) -> str:
    return os.path.join(os.fspath(checkpoint_dir), latest_filename or STATE_FILE)


def _relative(path: str, folder: str) -> str:
    """``path`` as the state file stores it: relative to ``folder`` when inside it."""
    if os.path.abspath(os.path.dirname(path) or ".") == os.path.abspath(folder or "."):
        return os.path.basename(path)
    return os.path.abspath(path)


def get_checkpoint_state(checkpoint_dir: str,
                         latest_filename: Optional[str] = None) -> Optional[CheckpointState]:
    """The folder's checkpoint state, or None when it has no state file (a corrupt one is a
    ``CheckpointError``: it is written atomically, so corruption is not a normal state)."""
    path = _state_path(checkpoint_dir, latest_filename)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint state {path}: {e.strerror or e}") from None
    try:
        d = json.loads(raw.decode("utf-8"))
        if not isinstance(d, dict) or d.get("format") != STATE_FORMAT:
            raise ValueError
        join = lambda p: p if os.path.isabs(p) else os.path.join(os.fspath(checkpoint_dir), p)
        return CheckpointState(
            model_checkpoint_path=join(d["model_checkpoint_path"]),
            all_model_checkpoint_paths=[join(p) for p in d.get("all_model_checkpoint_paths", [])],
            all_model_checkpoint_timestamps=[float(t) for t in
                                             d.get("all_model_checkpoint_timestamps", [])],
            last_preserved_timestamp=d.get("last_preserved_timestamp"),
            best_checkpoints=[(join(b["path"]), float(b["metric"]))
                              for b in d.get("best_checkpoints", [])],
            keep_best=d.get("keep_best"))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise CheckpointError(f"checkpoint state {path} is corrupt (not a {STATE_FORMAT} "
                              "file)", FLOWC_DATA_LOSS) from None


def write_checkpoint_state(checkpoint_dir: str, latest_filename: Optional[str], latest: str,
                 kept: Sequence[Tuple[str, float]], last_preserved: float,
                 best: Sequence[Tuple[str, float]], keep_best: Optional[str]) -> None:
    folder = os.fspath(checkpoint_dir)
    d = {"format": STATE_FORMAT, "version": 1,
         "model_checkpoint_path": _relative(latest, folder),
         "all_model_checkpoint_paths": [_relative(p, folder) for p, _ in kept],
         "all_model_checkpoint_timestamps": [t for _, t in kept],
         "last_preserved_timestamp": last_preserved}
    if keep_best:
        d["keep_best"] = keep_best
        d["best_checkpoints"] = [{"path": _relative(p, folder), "metric": m} for p, m in best]
    write_file_atomically(_state_path(folder, latest_filename),
                          (json.dumps(d, indent=1) + "\n").encode(), what="checkpoint state")


def latest_checkpoint(checkpoint_dir: str, latest_filename: Optional[str] = None) -> Optional[str]:
    """The most recent complete checkpoint the folder's state file names, or None."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not checkpoint_exists(state.model_checkpoint_path):
        return None
    return state.model_checkpoint_path


def best_checkpoint(checkpoint_dir: str, latest_filename: Optional[str] = None) -> Optional[str]:
    """The best complete checkpoint by metric the folder's state file names (``keep_best``),
    or None."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None:
        return None
    for path, _ in state.best_checkpoints:
        if checkpoint_exists(path):
            return path
    return None


def resolve_checkpoint(ckpt_dir_or_file: str) -> str:
    """A checkpoint prefix as given, or for a folder the latest checkpoint its state file
    names (a folder without one is a ``CheckpointError``)."""
    if os.path.isdir(ckpt_dir_or_file):
        path = latest_checkpoint(ckpt_dir_or_file)
        if path is None:
            raise CheckpointError(f"no checkpoint in folder '{ckpt_dir_or_file}'", FLOWC_NOT_FOUND)
        return path
    return os.fspath(ckpt_dir_or_file)
