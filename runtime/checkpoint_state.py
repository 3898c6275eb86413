"""A checkpoint folder's state file (``checkpoint``, ``tf.train.CheckpointState``): the
latest checkpoint, every kept one, and the best by metric. ``fl.train.Saver`` writes it;
whatever takes "a checkpoint prefix or the folder of its latest one" reads it
(``resolve_checkpoint``: ``flowc compile/export/run --checkpoint``, ``fl.train.load_variable``).

It is written as TensorFlow writes it, a ``CheckpointState`` proto in protobuf text format::

    model_checkpoint_path: "model.ckpt-2"
    all_model_checkpoint_paths: "model.ckpt-1"
    all_model_checkpoint_paths: "model.ckpt-2"
    all_model_checkpoint_timestamps: 1764648000.5
    all_model_checkpoint_timestamps: 1764648060.25
    last_preserved_timestamp: 1764647990.0

so that TensorFlow's ``tf.train.latest_checkpoint`` and ``get_checkpoint_state`` read it and
flowc reads TensorFlow's. What TensorFlow's proto has no field for (``keep_best``'s best
checkpoints and their metrics) is kept in comment lines, which text format skips::

    # flowc keep_best: "min"
    # flowc best_checkpoint: "model.ckpt-1" 0.25

flowc's earlier JSON state files are still read.
"""
from __future__ import annotations

import json
import math
import os
import re
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
    join = lambda p: p if os.path.isabs(p) else os.path.join(os.fspath(checkpoint_dir), p)
    try:
        if raw.lstrip().startswith(b"{"):
            d = _parse_json_state(raw)
        else:
            d = parse_state_text(raw.decode("utf-8"))
        if not d.get("model_checkpoint_path"):
            raise ValueError("no model_checkpoint_path")
        return CheckpointState(
            model_checkpoint_path=join(d["model_checkpoint_path"]),
            all_model_checkpoint_paths=[join(p) for p in d.get("all_model_checkpoint_paths", [])],
            all_model_checkpoint_timestamps=[float(t) for t in
                                             d.get("all_model_checkpoint_timestamps", [])],
            last_preserved_timestamp=d.get("last_preserved_timestamp"),
            best_checkpoints=[(join(p), float(m)) for p, m in d.get("best_checkpoints", [])],
            keep_best=d.get("keep_best"))
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"checkpoint state {path} is corrupt (not a CheckpointState in "
                              f"text format: {e})", FLOWC_DATA_LOSS) from None


def _parse_json_state(raw: bytes) -> dict:
    """flowc's earlier JSON state file."""
    d = json.loads(raw.decode("utf-8"))
    if not isinstance(d, dict) or d.get("format") != STATE_FORMAT:
        raise ValueError(f"not a {STATE_FORMAT} file")
    d["best_checkpoints"] = [(b["path"], b["metric"]) for b in d.get("best_checkpoints", [])]
    return d


# --- protobuf text format, the little of it a CheckpointState needs ----------------------------
_STRING_FIELDS = {"model_checkpoint_path", "all_model_checkpoint_paths"}
_FLOAT_FIELDS = {"all_model_checkpoint_timestamps", "last_preserved_timestamp"}
_REPEATED = {"all_model_checkpoint_paths", "all_model_checkpoint_timestamps"}
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "'": "'", "\\": "\\"}
_FIELD_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*?)\s*$")
_FLOWC_RE = re.compile(r"#\s*flowc\s+([a-z_]+)\s*:\s*(.*?)\s*$")


def _quote(text: str) -> str:
    """A text-format string literal: UTF-8 bytes, with quotes, backslashes and bytes outside
    printable ASCII escaped (as octal, as protobuf's ``CEscape``)."""
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _unquote(literal: str) -> Tuple[str, str]:
    """The string a text-format literal (``"..."`` or ``'...'``) at the start of ``literal``
    spells, and what follows it."""
    if not literal or literal[0] not in "\"'":
        raise ValueError(f"expected a quoted string, got {literal[:40]!r}")
    quote, out, i = literal[0], bytearray(), 1
    while i < len(literal):
        c = literal[i]
        if c == quote:
            return out.decode("utf-8"), literal[i + 1:].strip()
        if c == "\\":
            i += 1
            if i >= len(literal):
                break
            e = literal[i]
            if e in "01234567":
                j = i
                while j < len(literal) and j < i + 3 and literal[j] in "01234567":
                    j += 1
                out.append(int(literal[i:j], 8) & 0xFF)
                i = j
                continue
            if e == "x":
                j = i + 1
                while j < len(literal) and j < i + 3 and literal[j] in "0123456789abcdefABCDEF":
                    j += 1
                out.append(int(literal[i + 1:j], 16))
                i = j
                continue
            if e not in _ESCAPES:
                raise ValueError(f"unknown escape \\{e} in a string")
            out += _ESCAPES[e].encode()
            i += 1
            continue
        out += c.encode("utf-8")
        i += 1
    raise ValueError("a string without its closing quote")


def parse_state_text(text: str) -> dict:
    """The fields of a ``CheckpointState`` in text format (and flowc's comment lines)."""
    d: dict = {"all_model_checkpoint_paths": [], "all_model_checkpoint_timestamps": [],
               "best_checkpoints": []}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            m = _FLOWC_RE.match(stripped)
            if m and m.group(1) == "keep_best":
                d["keep_best"], _ = _unquote(m.group(2))
            elif m and m.group(1) == "best_checkpoint":
                path, rest = _unquote(m.group(2))
                d["best_checkpoints"].append((path, float(rest)))
            continue
        m = _FIELD_RE.match(stripped)
        if not m:
            raise ValueError(f"cannot parse line {stripped[:60]!r}")
        name, value = m.groups()
        if name in _STRING_FIELDS:
            v, rest = _unquote(value)
            if rest:
                raise ValueError(f"text after the string of {name}")
        elif name in _FLOAT_FIELDS:
            v = float(value)
        else:
            raise ValueError(f"unknown field {name!r}")
        if name in _REPEATED:
            d[name].append(v)
        else:
            d[name] = v
    return d


def _float_text(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return repr(float(x))


def write_checkpoint_state(checkpoint_dir: str, latest_filename: Optional[str], latest: str,
                 kept: Sequence[Tuple[str, float]], last_preserved: float,
                 best: Sequence[Tuple[str, float]], keep_best: Optional[str]) -> None:
    folder = os.fspath(checkpoint_dir)
    lines = [f"model_checkpoint_path: {_quote(_relative(latest, folder))}"]
    lines += [f"all_model_checkpoint_paths: {_quote(_relative(p, folder))}" for p, _ in kept]
    lines += [f"all_model_checkpoint_timestamps: {_float_text(t)}" for _, t in kept]
    lines.append(f"last_preserved_timestamp: {_float_text(last_preserved)}")
    if keep_best:
        lines.append(f"# flowc keep_best: {_quote(keep_best)}")
        lines += [f"# flowc best_checkpoint: {_quote(_relative(p, folder))} {_float_text(m)}"
                  for p, m in best]
    write_file_atomically(_state_path(folder, latest_filename),
                          ("\n".join(lines) + "\n").encode(), what="checkpoint state")


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
