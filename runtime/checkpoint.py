"""Checkpoint files, written atomically: TensorFlow's tensor bundles, and flowc's older
safetensors + JSON checkpoints (still read).

A checkpoint is named by a *prefix* (``/runs/a/model.ckpt-1000``). ``write_checkpoint`` writes
TensorFlow's format (``runtime/tensor_bundle.py``), so TensorFlow restores what flowc saves and
the other way round:

- ``<prefix>.index``: the tensor-bundle index (an SSTable of each tensor's dtype, shape,
  offset, size and masked CRC32-C);
- ``<prefix>.data-00000-of-00001``: the tensors' bytes.

flowc's earlier format (``write_checkpoint(..., format=FLOWC_JSON)``; read wherever a
checkpoint is read) is two files too:

- ``<prefix>.data-<hash16>.safetensors``: the tensors (safetensors, so any safetensors reader
  can open it); ``hash16`` is the start of the file's SHA-256, so a new save to the same
  prefix never overwrites the data an existing index points at;
- ``<prefix>.index.json``: format version, the data file's name, size and SHA-256, and each
  tensor's dtype and shape.

When both are at one prefix, the bundle is read (it is the newer; a bundle write removes a
JSON checkpoint of its prefix once it is durable).

A *sharded* save (``Saver(sharded=True)``: each parameter-server task saves the variables it
hosts, in parallel) writes one bundle per shard, at ``<prefix>-00000-of-00002`` and so on,
which ``merge_shards`` then turns into one bundle at ``<prefix>`` with a data file per shard
(TensorFlow's layout). flowc's earlier sharded checkpoints stay per shard; the functions below
that take a prefix accept such a one too (``shard_prefixes``): it exists when every shard
does, and it reads as the union of its shards.

Writing is crash-safe: the data goes to a temporary file in the same folder, is fsync'd;
then the index the same way; only then are they renamed into place, data first and the index
last, and the folder fsync'd. A checkpoint exists (``checkpoint_exists``) only once its index
does. A bundle's data file has a fixed name, so a save over an existing bundle first removes
that bundle's index: a crash between the renames leaves no checkpoint at that prefix, never
an index over data it does not describe (and were one damaged anyway, every tensor's CRC32-C
is checked before anything is restored). A JSON checkpoint's index names the exact bytes of
its data, so there a crash leaves the previous checkpoint or the new one. A temporary file is
named ``.<name>.<12 hex digits>.tmp`` and its writer holds an exclusive ``flock`` on it until
it is renamed; a process killed mid-write leaves it behind, unlocked, and the next write of
the same name removes it (``_remove_stale_temps``: only names of that exact form and only
files no live writer holds, so a concurrent save of the same prefix keeps its own; never any
other file).

Reading verifies the index, the data (sizes, checksums), and the requested names, dtypes and
shapes before returning anything, and refuses a checkpoint that does not match with one
``CheckpointError`` listing every tensor that does not; a damaged file is named with what is
wrong with it.

Every flowc dtype but ``resource`` can be saved (u64/u32/u16 and bool included; a bundle
stores each as TensorFlow's DataType of the same name). bf16 tensors need ml_dtypes (its
``bfloat16`` is how numpy holds them; see ``runtime/dtypes.py``); without it saving one is a
``CheckpointError``.

``SaveV2``/``RestoreV2`` kernels of both backends come here: the reference kernels directly,
generated C through the host-call hook (registered below), so both write and read the same
files.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import warnings
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from runtime import tensor_bundle
from runtime.dtypes import DType, bf16_numpy_is_raw
from runtime.errors import (FLOWC_DATA_LOSS, FLOWC_INVALID_ARGUMENT, FLOWC_NOT_FOUND,
                            FLOWC_PERMISSION_DENIED, DataLossError, InvalidArgumentError,
                            NotFoundError, OpError, PermissionDeniedError)

try:
    import fcntl
except ImportError:                                  # no flock (Windows): temps are not swept
    fcntl = None

FORMAT = "flowc-checkpoint"
FORMAT_VERSION = 1
INDEX_SUFFIX = ".index.json"              # flowc's older format
BUNDLE = "tensor-bundle"                  # write_checkpoint's formats
FLOWC_JSON = FORMAT
BUNDLE_INDEX_SUFFIX = ".index"
_BUNDLE_DATA_RE = r"\.data-\d{5}-of-\d{5}"
_DATA_RE = r"\.data-[0-9a-f]{16}\.safetensors"

# Status codes of flowc_rt.h, carried to generated code by the host-call trampoline.
_NOT_FOUND, _DATA_LOSS, _INVALID_ARGUMENT = FLOWC_NOT_FOUND, FLOWC_DATA_LOSS, FLOWC_INVALID_ARGUMENT


class CheckpointError(OpError):
    """A checkpoint cannot be written, is missing, truncated or corrupt, or does not match the
    variables it should restore (the message names every tensor that does not).

    ``CheckpointError(message, status_code)`` is one of TensorFlow's classes by its code, as
    TensorFlow's checkpoint ops report the same failures: missing, ``NotFoundError``
    (``CheckpointNotFoundError``); truncated or corrupt, ``DataLossError``; a folder that may
    not be written, ``PermissionDeniedError``; anything else, ``InvalidArgumentError``."""

    def __new__(cls, message: str = "", status_code: Optional[int] = None, *args, **kwargs):
        if cls is CheckpointError:
            cls = _CHECKPOINT_CLASSES.get(status_code, CheckpointInvalidError)
        return super().__new__(cls)

    def __init__(self, message: str = "", status_code: Optional[int] = None, node=None,
                 location: Optional[str] = None):
        super().__init__(message, node, location)


class CheckpointInvalidError(CheckpointError, InvalidArgumentError):
    """A checkpoint that does not fit what it should restore, or a bad path."""


class CheckpointNotFoundError(CheckpointError, NotFoundError):
    """No checkpoint (or a part of it) at the path."""


class CheckpointDataLossError(CheckpointError, DataLossError):
    """A truncated or corrupt checkpoint."""


class CheckpointPermissionError(CheckpointError, PermissionDeniedError):
    """A checkpoint that may not be written where it was asked to be."""


_CHECKPOINT_CLASSES = {FLOWC_INVALID_ARGUMENT: CheckpointInvalidError,
                       FLOWC_NOT_FOUND: CheckpointNotFoundError,
                       FLOWC_DATA_LOSS: CheckpointDataLossError,
                       FLOWC_PERMISSION_DENIED: CheckpointPermissionError}
CHECKPOINT_STATUS_CODES = frozenset(_CHECKPOINT_CLASSES)     # the codes a CheckpointError has


# --- names -----------------------------------------------------------------------------------
def index_path(prefix: str) -> str:
    """The index of flowc's older (JSON) checkpoint at ``prefix``."""
    return prefix + INDEX_SUFFIX


def bundle_index_path(prefix: str) -> str:
    """The index of the tensor bundle at ``prefix``."""
    return prefix + BUNDLE_INDEX_SUFFIX


def checkpoint_format(prefix: str) -> Optional[str]:
    """``BUNDLE`` or ``FLOWC_JSON``: the format of the checkpoint (one shard) at ``prefix``
    by its index; None when it has none."""
    if os.path.isfile(bundle_index_path(prefix)):
        return BUNDLE
    if os.path.isfile(index_path(prefix)):
        return FLOWC_JSON
    return None


def checkpoint_files(prefix: str) -> List[str]:
    """Every file of the checkpoint (one shard) at ``prefix``, of either format: its indexes
    and data files, those there are."""
    folder = os.path.dirname(prefix)
    base = os.path.basename(prefix)
    bundle_data = re.compile(re.escape(base) + _BUNDLE_DATA_RE + "$")
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        names = []
    out = [p for p in (bundle_index_path(prefix), index_path(prefix)) if os.path.isfile(p)]
    out += [os.path.join(folder, n) for n in names if bundle_data.match(n)]
    return out + _data_files(prefix)


def prefix_from_bytes(data) -> str:
    """The checkpoint prefix a ``SaveV2``/``RestoreV2`` gets as a u8 tensor (UTF-8 bytes)."""
    raw = np.asarray(data, np.uint8).tobytes()
    if not raw:
        raise CheckpointError("the checkpoint path is empty")
    if b"\0" in raw:
        raise CheckpointError("the checkpoint path contains a NUL byte")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"the checkpoint path is not valid UTF-8: {e}") from None


def prefix_to_bytes(prefix) -> np.ndarray:
    """The u8 tensor that names checkpoint ``prefix`` (what a Saver feeds)."""
    return np.frombuffer(os.fsencode(os.fspath(prefix)), dtype=np.uint8).copy()


def _type_str(dtype: DType, shape) -> str:
    if shape is None:
        return f"{dtype.ir_name}[*]"
    return dtype.ir_name + "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _data_files(prefix: str) -> List[str]:
    """Data files belonging to ``prefix`` (current and stale), as paths."""
    folder = os.path.dirname(prefix) or "."
    base = os.path.basename(prefix)
    pattern = re.compile(re.escape(base) + _DATA_RE + r"$")
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(os.path.dirname(prefix), n) for n in sorted(names) if pattern.match(n)]


# --- atomic files -----------------------------------------------------------------------------
def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return                                   # platforms without directory fds
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _temp_name_pattern(base: str) -> "re.Pattern":
    """flowc's temporary names for a file named ``base``: ``.<base>.<12 hex digits>.tmp``."""
    return re.compile(r"\." + re.escape(base) + r"\.[0-9a-f]{12}\.tmp$")


def _temp_in(folder: str, base: str):
    """A new temporary file next to where ``base`` goes: (fd, path), held with an exclusive
    ``flock`` for as long as ``fd`` is open, so ``_remove_stale_temps`` leaves it alone. Its
    mode follows the umask, like any file the user creates (``mkstemp`` would make it
    private)."""
    for _ in range(100):
        path = os.path.join(folder, f".{base}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o666)
        except FileExistsError:
            continue
        if _hold(fd, path):
            return fd, path
        os.close(fd)            # swept as stale before it was held: take another name
    raise FileExistsError(f"cannot create a temporary file in '{folder or '.'}'")


def _hold(fd: int, path: str) -> bool:
    """Lock the new temporary file ``fd`` (blocking only while a sweeper looks at it); False
    when a sweeper removed it between its creation and the lock."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:                                   # a filesystem without locks: nothing
        return True                                   # is swept there either
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except FileNotFoundError:
        return False


def _remove_stale_temps(folder: str, base: str) -> None:
    """Remove what earlier writes of ``base`` in ``folder`` left when they were killed: files
    with flowc's temporary names for it (``_temp_name_pattern``) that no writer holds.
    A file a live writer holds (its ``flock``), a file of any other name, and anything that
    is not a regular file are left alone; a failure to remove one is not an error."""
    if fcntl is None:
        return
    pattern = _temp_name_pattern(base)
    try:
        names = [n for n in os.listdir(folder or ".") if pattern.match(n)]
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | _CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)     # held by a live writer: raises
            if os.path.samestat(os.stat(path), os.fstat(fd)):
                os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)


def _unlink_quietly(path: Optional[str]) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass


def _write_error(what: str, path: str, e: OSError) -> CheckpointError:
    reason = e.strerror or str(e)
    folder = os.path.dirname(os.path.abspath(path))
    if isinstance(e, (PermissionError, NotADirectoryError, FileNotFoundError)) or \
            e.errno in (13, 20, 30):
        return CheckpointError(f"cannot write {what} '{path}': the folder '{folder}' is not "
                               f"writable ({reason})",
                               FLOWC_PERMISSION_DENIED if isinstance(e, PermissionError)
                               or e.errno in (13, 30) else None)
    return CheckpointError(f"cannot write {what} '{path}': {reason}")


def write_file_atomically(path: str, data: bytes, what: str = "file") -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never a
    part: temporary file in the same folder, flush, fsync, rename (while the temporary file
    is still held), fsync the folder. Temporary files of earlier writes of ``path`` that
    were killed are removed first (``_remove_stale_temps``)."""
    folder = os.path.dirname(path)
    tmp = None
    try:
        _remove_stale_temps(folder, os.path.basename(path))
        fd, tmp = _temp_in(folder, os.path.basename(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, path)
            tmp = None
        _fsync_dir(folder)
    except OSError as e:
        raise _write_error(what, path, e) from None
    finally:
        _unlink_quietly(tmp)


# --- writing -----------------------------------------------------------------------------------
def _checked_prefix(prefix) -> str:
    prefix = os.fspath(prefix)
    if not prefix or prefix.endswith(os.sep):
        raise CheckpointError(f"'{prefix}' is not a checkpoint path (it names a folder; add a "
                              "file name prefix such as 'model.ckpt')")
    return prefix


def _make_folder(prefix: str, folder: str) -> None:
    if folder and not os.path.isdir(folder):
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            raise CheckpointError(f"cannot write checkpoint '{prefix}': cannot create the "
                                  f"folder '{folder}' ({e.strerror or e})") from None


def _checked_tensors(tensors: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    arrays: Dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise CheckpointError(f"cannot save a tensor named {name!r}")
        arr = np.asarray(value, order="C")      # (0-d stays 0-d)
        try:
            dtype = DType.from_numpy(arr.dtype)
        except TypeError:
            raise CheckpointError(f"cannot save tensor '{name}' of numpy dtype "
                                  f"{arr.dtype}") from None
        if dtype is DType.bf16 and bf16_numpy_is_raw():       # pragma: no cover
            raise CheckpointError(f"cannot save bf16 tensor '{name}': bf16 checkpoints need "
                                  "the ml_dtypes package")
        arrays[name] = arr
    return arrays


def write_checkpoint(prefix: str, tensors: Mapping[str, np.ndarray],
                     format: str = BUNDLE) -> str:
    """Write ``tensors`` as checkpoint ``prefix`` in ``format`` (``BUNDLE``, TensorFlow's, by
    default; ``FLOWC_JSON`` flowc's older one); see the module doc for the files and the order
    that makes it crash-safe. Returns the index path. Creates missing folders."""
    if format == FLOWC_JSON:
        return _write_flowc_json(prefix, tensors)
    if format != BUNDLE:
        raise ValueError(f"unknown checkpoint format {format!r}; expected {BUNDLE!r} or "
                         f"{FLOWC_JSON!r}")
    prefix = _checked_prefix(prefix)
    arrays = _checked_tensors(tensors)
    for name in arrays:              # a bundle's index keeps keys from NUL for slices
        if name.startswith("\0"):
            raise CheckpointError(f"cannot save a tensor named {name!r}")
    folder = os.path.dirname(prefix)
    base = os.path.basename(prefix)
    data_path = tensor_bundle.data_file(prefix, 0, 1)
    index = bundle_index_path(prefix)
    data_tmp = index_tmp = None
    try:
        _make_folder(prefix, folder)
        _remove_stale_temps(folder, base)            # what saves killed mid-write left
        fd, data_tmp = _temp_in(folder, base)
        with os.fdopen(fd, "wb") as f:
            try:
                table = tensor_bundle.write_bundle_data(f, arrays)
            except ValueError as e:
                raise CheckpointError(f"cannot write checkpoint '{prefix}': {e}") from None
            f.flush()
            os.fsync(f.fileno())
            ifd, index_tmp = _temp_in(folder, base)
            with os.fdopen(ifd, "wb") as g:
                g.write(table)
                g.flush()
                os.fsync(g.fileno())
                # Both are durable; now into place, the index last. An older bundle's index
                # goes first: its data is about to be replaced.
                _unlink_quietly(index if os.path.exists(index) else None)
                os.replace(data_tmp, data_path)    # both still held: not swept
                data_tmp = None
                os.replace(index_tmp, index)
                index_tmp = None
        _fsync_dir(folder)
    except OSError as e:
        raise _write_error("checkpoint", prefix, e) from None
    finally:
        _unlink_quietly(data_tmp)
        _unlink_quietly(index_tmp)
    # The bundle is durable: an older JSON checkpoint of this prefix is garbage now.
    for path in [index_path(prefix)] + _data_files(prefix):
        _unlink_quietly(path)
    return index


def _write_flowc_json(prefix: str, tensors: Mapping[str, np.ndarray]) -> str:
    """flowc's older format: safetensors data named by its hash, then the JSON index."""
    from safetensors.numpy import save
    prefix = _checked_prefix(prefix)
    arrays = _checked_tensors(tensors)
    entries = {name: {"dtype": DType.from_numpy(arr.dtype).ir_name, "shape": list(arr.shape)}
               for name, arr in arrays.items()}
    folder = os.path.dirname(prefix)
    base = os.path.basename(prefix)
    tmp = None
    try:
        _make_folder(prefix, folder)
        # One metadata key: safetensors orders them by hash, so more would make the bytes
        # (and the hash) vary between runs; tensors are laid out in a fixed order.
        data = save(arrays, metadata={"format": f"{FORMAT}/{FORMAT_VERSION}"})
        digest = hashlib.sha256(data).hexdigest()
        size = len(data)
        data_name = f"{base}.data-{digest[:16]}.safetensors"
        _remove_stale_temps(folder, base)            # what saves killed mid-write left
        fd, tmp = _temp_in(folder, base)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            del data
            os.replace(tmp, os.path.join(folder, data_name))    # still held: not swept
            tmp = None
        _fsync_dir(folder)
    except OSError as e:
        raise _write_error("checkpoint", prefix, e) from None
    except CheckpointError:
        raise
    except Exception as e:                         # safetensors refused the tensors
        raise CheckpointError(f"cannot write checkpoint '{prefix}': "
                              f"{type(e).__name__}: {e}") from None
    finally:
        _unlink_quietly(tmp)
    index = {"format": FORMAT, "version": FORMAT_VERSION, "data_file": data_name,
             "data_size": size, "data_sha256": digest, "tensors": entries}
    write_file_atomically(index_path(prefix), (json.dumps(index, indent=1) + "\n").encode(),
                          what="checkpoint index")
    # The new index is durable: data files it does not name (the previous save to this
    # prefix, or one interrupted before its index) are garbage now.
    for path in _data_files(prefix):
        if os.path.basename(path) != data_name:
            _unlink_quietly(path)
    return index_path(prefix)


def merge_shards(prefix: str, num_shards: int) -> str:
    """Merge the bundles a sharded save wrote at ``<prefix>-0000k-of-0000n`` into one bundle
    at ``prefix``, as TensorFlow's ``MergeV2Checkpoints`` does: ``<prefix>.index`` and data
    shards ``<prefix>.data-0000k-of-0000n``. Crash-safe: the data files are linked (or copied)
    to their new names first, the merged index is written atomically, and only then are the
    shards' own files removed, so a complete checkpoint is there at every moment. The shards
    must be visible here (a folder the tasks and this process share)."""
    prefix = _checked_prefix(prefix)
    parts = [shard_prefix(prefix, k, num_shards) for k in range(num_shards)]
    missing = [p for p in parts if checkpoint_format(p) != BUNDLE]
    if missing:
        raise CheckpointError(f"cannot merge sharded checkpoint '{prefix}': shard(s) "
                              + ", ".join(f"'{m}'" for m in missing) + " not found here (a "
                              "sharded save needs a folder its tasks and the client share)",
                              _NOT_FOUND)
    bundles = [_open_bundle(p) for p in parts]
    try:
        table = tensor_bundle.merged_index(bundles)
    except ValueError as e:
        raise CheckpointError(f"cannot merge sharded checkpoint '{prefix}': {e}") from None
    finally:
        for b in bundles:
            b.close()
    index = bundle_index_path(prefix)
    try:
        _unlink_quietly(index if os.path.exists(index) else None)
        for k, part in enumerate(parts):
            src = tensor_bundle.data_file(part, 0, 1)
            dst = tensor_bundle.data_file(prefix, k, num_shards)
            _unlink_quietly(dst if os.path.exists(dst) else None)
            try:
                os.link(src, dst)
            except OSError:                          # a filesystem without hard links
                shutil.copyfile(src, dst)
    except OSError as e:
        raise _write_error("checkpoint", prefix, e) from None
    write_file_atomically(index, table, what="checkpoint index")
    for part in parts:
        for path in [bundle_index_path(part), tensor_bundle.data_file(part, 0, 1)]:
            _unlink_quietly(path)
    _fsync_dir(os.path.dirname(prefix))
    return index


# --- shards ----------------------------------------------------------------------------------
def shard_prefix(prefix: str, shard: int, num_shards: int) -> str:
    """The prefix of shard ``shard`` of ``num_shards`` of checkpoint ``prefix``."""
    return f"{prefix}-{shard:05d}-of-{num_shards:05d}"


def shard_prefixes(prefix: str) -> List[str]:
    """The checkpoints that make up ``prefix``: ``[prefix]`` when it is one checkpoint (or
    nothing is there: reading it then says so), else its shards, every one of them; a sharded
    checkpoint with a shard missing is refused, naming the shards that are."""
    prefix = os.fspath(prefix)
    if checkpoint_format(prefix) is not None:
        return [prefix]
    folder = os.path.dirname(prefix) or "."
    pattern = re.compile(re.escape(os.path.basename(prefix)) + r"-(\d{5})-of-(\d{5})"
                         + r"\.index(?:\.json)?$")
    try:
        names = os.listdir(folder)
    except OSError:
        return [prefix]
    found: Dict[int, set] = {}
    for name in names:
        m = pattern.match(name)
        if m:
            found.setdefault(int(m.group(2)), set()).add(int(m.group(1)))
    if not found:
        return [prefix]
    num_shards = max(found)
    missing = sorted(set(range(num_shards)) - found[num_shards])
    if len(found) > 1 or missing:
        raise CheckpointError(f"sharded checkpoint '{prefix}' is incomplete: shard(s) "
                              f"{', '.join(str(k) for k in missing) or '?'} of {num_shards} "
                              f"missing (found {sorted(found[num_shards])}; a save was "
                              "interrupted?)", _NOT_FOUND)
    return [shard_prefix(prefix, k, num_shards) for k in range(num_shards)]


# --- reading -----------------------------------------------------------------------------------
def checkpoint_exists(prefix: str) -> bool:
    """Whether a complete checkpoint (its index, or every shard's) exists at ``prefix``."""
    try:
        return all(checkpoint_format(p) is not None for p in shard_prefixes(prefix))
    except CheckpointError:
        return False


def read_index(prefix: str) -> dict:
    """The parsed, checked index of checkpoint ``prefix``."""
    prefix = os.fspath(prefix)
    path = index_path(prefix)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        if _data_files(prefix):
            raise CheckpointError(f"checkpoint '{prefix}' is incomplete: its index {path} is "
                                  "missing (a save was interrupted?)", _NOT_FOUND) from None
        raise CheckpointError(f"no checkpoint at '{prefix}' (no file {path})", _NOT_FOUND) from None
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint index {path}: {e.strerror or e}",
                              _NOT_FOUND) from None
    try:
        index = json.loads(raw.decode("utf-8"))
        ok = (isinstance(index, dict) and index.get("format") == FORMAT
              and isinstance(index.get("tensors"), dict) and isinstance(index.get("data_file"), str)
              and isinstance(index.get("data_size"), int)
              and isinstance(index.get("data_sha256"), str))
    except (UnicodeDecodeError, ValueError):
        ok = False
    if not ok:
        raise CheckpointError(f"checkpoint index {path} is corrupt (not a {FORMAT} index)",
                              _DATA_LOSS)
    if index.get("version") != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint index {path} has format version {index.get('version')}; "
                              f"this runtime reads version {FORMAT_VERSION}", _DATA_LOSS)
    if os.path.basename(index["data_file"]) != index["data_file"]:
        raise CheckpointError(f"checkpoint index {path} is corrupt (data file "
                              f"{index['data_file']!r} is not in its folder)", _DATA_LOSS)
    return index


# safetensors' dtype names -> numpy dtypes (safetensors.numpy.load has no BF16)
_SAFETENSORS_DTYPES = {"BOOL": DType.bool, "U8": DType.u8, "I8": DType.i8, "I16": DType.i16,
                       "U16": DType.u16, "F16": DType.f16, "BF16": DType.bf16,
                       "I32": DType.i32, "U32": DType.u32, "F32": DType.f32, "I64": DType.i64,
                       "U64": DType.u64, "F64": DType.f64}


def _load_safetensors(data: bytes) -> Dict[str, np.ndarray]:
    """The tensors of safetensors bytes ``data`` (every dtype flowc has; ValueError for
    others)."""
    from safetensors import deserialize
    out = {}
    for name, view in deserialize(data):
        dtype = _SAFETENSORS_DTYPES.get(view["dtype"])
        if dtype is None:
            raise ValueError(f"tensor '{name}' has dtype {view['dtype']}, which flowc lacks")
        out[name] = np.frombuffer(view["data"], dtype=dtype.np.newbyteorder("<")
                                  ).astype(dtype.np, copy=False).reshape(view["shape"])
    return out


def _load_verified(prefix: str, index: dict) -> Dict[str, np.ndarray]:
    data_path = os.path.join(os.path.dirname(prefix), index["data_file"])
    try:
        with open(data_path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint '{prefix}': its data file {data_path} is missing",
                              _DATA_LOSS) from None
    except OSError as e:
        raise CheckpointError(f"checkpoint '{prefix}': cannot read {data_path}: "
                              f"{e.strerror or e}", _DATA_LOSS) from None
    if len(data) != index["data_size"]:
        what = "truncated" if len(data) < index["data_size"] else "longer than its index says"
        raise CheckpointError(f"checkpoint '{prefix}': data file {data_path} is {what} "
                              f"({len(data)} bytes, the index says {index['data_size']})",
                              _DATA_LOSS)
    if hashlib.sha256(data).hexdigest() != index["data_sha256"]:
        raise CheckpointError(f"checkpoint '{prefix}': data file {data_path} is corrupt (its "
                              "SHA-256 does not match the index)", _DATA_LOSS)
    try:
        tensors = _load_safetensors(data)
    except Exception as e:
        raise CheckpointError(f"checkpoint '{prefix}': data file {data_path} is not valid "
                              f"safetensors ({e})", _DATA_LOSS) from None
    # The hash ties the data to the index; still, the index must describe this data.
    disagree = []
    for name in sorted(set(tensors) | set(index["tensors"])):
        entry = index["tensors"].get(name)
        arr = tensors.get(name)
        if not isinstance(entry, dict) or arr is None or entry.get("dtype") != _dtype_name(arr) \
                or entry.get("shape") != list(arr.shape):
            disagree.append(name)
    if disagree:
        raise CheckpointError(f"checkpoint '{prefix}': index and data disagree about "
                              + ", ".join(f"'{n}'" for n in disagree), _DATA_LOSS)
    return tensors


def _dtype_name(arr: np.ndarray) -> str:
    try:
        return DType.from_numpy(arr.dtype).ir_name
    except TypeError:
        return str(arr.dtype)


def read_checkpoint(prefix: str, names: Sequence[str], dtypes: Sequence[DType],
                    shapes: Sequence[Optional[Sequence[Optional[int]]]]) -> List[np.ndarray]:
    """The tensors ``names`` of checkpoint ``prefix``, each checked against its expected dtype
    and shape (``None`` dims match any size; a ``None`` shape any shape).

    Raises ``CheckpointError`` naming every tensor that is missing or does not match, before
    returning anything: the caller assigns all or nothing. Its ``mismatches`` lists the
    problems ("not in the checkpoint: 'w'", "wrong shape: ...") without the preamble.
    """
    prefix = os.fspath(prefix)
    if not (len(names) == len(dtypes) == len(shapes)):
        raise CheckpointError(f"{len(names)} names, {len(dtypes)} dtypes and {len(shapes)} "
                              "shapes to restore; they must be as many")
    tensors: Dict[str, np.ndarray] = {}
    wanted = set(names)
    for part in shard_prefixes(prefix):       # a sharded checkpoint reads as its shards' union
        tensors.update(_load_part(part, wanted))
    missing, wrong_dtype, wrong_shape = [], [], []
    out = []
    for name, dtype, shape in zip(names, dtypes, shapes):
        arr = tensors.get(name)
        if arr is None:
            missing.append(f"'{name}'")
            continue
        try:
            have = DType.from_numpy(arr.dtype)
        except TypeError:
            wrong_dtype.append(f"'{name}' is {arr.dtype} in the checkpoint, {dtype.ir_name} here")
            continue
        if have is not dtype:
            wrong_dtype.append(f"'{name}' is {have.ir_name} in the checkpoint, "
                               f"{dtype.ir_name} here")
        if shape is not None and (len(shape) != arr.ndim or any(
                d is not None and d != s for d, s in zip(shape, arr.shape))):
            wrong_shape.append(f"'{name}' is {_type_str(have, arr.shape)} in the checkpoint, "
                               f"{_type_str(dtype, shape)} here")
        out.append(arr)
    problems = []
    if missing:
        problems.append("not in the checkpoint: " + ", ".join(missing))
    if wrong_dtype:
        problems.append("wrong dtype: " + "; ".join(wrong_dtype))
    if wrong_shape:
        problems.append("wrong shape: " + "; ".join(wrong_shape))
    if problems:
        err = CheckpointError(f"checkpoint '{prefix}' does not match what is restored from it "
                              f"(nothing was restored): " + "; ".join(problems), _NOT_FOUND
                              if missing and not wrong_dtype and not wrong_shape else
                              _INVALID_ARGUMENT)
        err.mismatches = problems            # for callers that name the model themselves
        raise err
    return [np.asarray(a, order="C") for a in out]


def _bundle_error(e: tensor_bundle.TensorBundleError) -> CheckpointError:
    """A tensor-bundle reader's error as the CheckpointError of its class."""
    code = (_NOT_FOUND if isinstance(e, tensor_bundle.TensorBundleNotFoundError)
            else _DATA_LOSS if isinstance(e, tensor_bundle.TensorBundleDataLossError)
            else _INVALID_ARGUMENT)
    return CheckpointError(str(e), code)


def _open_bundle(prefix: str) -> tensor_bundle.TensorBundle:
    try:
        return tensor_bundle.open_bundle(prefix)
    except tensor_bundle.TensorBundleError as e:
        raise _bundle_error(e) from None


def _read_bundle(prefix: str, names=None) -> Dict[str, np.ndarray]:
    """The tensors of bundle ``prefix`` (those of ``names`` it has, or all), each verified
    against its checksum. Tensors of a dtype flowc lacks (strings...) are read only when
    named, as object arrays of bytes for strings."""
    bundle = _open_bundle(prefix)
    out: Dict[str, np.ndarray] = {}
    try:
        for key in bundle.keys():
            if names is not None and key not in names:
                continue
            entry = bundle.entry(key)
            if bundle.is_string(key):
                out[key] = np.array(bundle.read_string(key), dtype=object).reshape(entry.shape)
                continue
            out[key] = bundle.read(key)
    except tensor_bundle.TensorBundleError as e:
        raise _bundle_error(e) from None
    return out


def _load_part(prefix: str, names=None) -> Dict[str, np.ndarray]:
    """The tensors of one checkpoint (one shard), of either format, verified."""
    fmt = checkpoint_format(prefix)
    if fmt == BUNDLE:
        return _read_bundle(prefix, names)
    if fmt is None:
        data = [p for p in checkpoint_files(prefix)]
        if data:
            raise CheckpointError(f"checkpoint '{prefix}' is incomplete: its index "
                                  f"{bundle_index_path(prefix)} is missing (a save was "
                                  "interrupted?)", _NOT_FOUND)
        raise CheckpointError(f"no checkpoint at '{prefix}' (no file "
                              f"{bundle_index_path(prefix)})", _NOT_FOUND)
    return _load_verified(prefix, read_index(prefix))


def list_checkpoint(prefix: str) -> Dict[str, tuple]:
    """``{name: (dtype, shape)}`` of the tensors in checkpoint ``prefix`` (from its index);
    the dtype is None for a tensor of a dtype flowc lacks (a TensorFlow string tensor)."""
    out: Dict[str, tuple] = {}
    for part in shard_prefixes(prefix):
        if checkpoint_format(part) == BUNDLE:
            bundle = _open_bundle(part)
            for key in bundle.keys():
                entry = bundle.entry(key)
                try:
                    dtype = bundle.dtype(key)
                except tensor_bundle.TensorBundleError:
                    dtype = None
                out[key] = (dtype, tuple(entry.shape))
            continue
        out.update((name, (DType.parse(e["dtype"]), tuple(e["shape"])))
                   for name, e in read_index(part)["tensors"].items())
    return out


def load_checkpoint(prefix: str, names: Optional[Sequence[str]] = None
                    ) -> Dict[str, np.ndarray]:
    """Every tensor of checkpoint ``prefix`` (or those of ``names`` it has), verified
    (``tf.train.load_checkpoint`` as a dict)."""
    out: Dict[str, np.ndarray] = {}
    wanted = None if names is None else set(names)
    for part in shard_prefixes(prefix):
        out.update(_load_part(part, wanted))
    return out


def delete_checkpoint(prefix: str) -> None:
    """Remove checkpoint ``prefix``: its index first (so it stops looking complete), then data."""
    prefix = os.fspath(prefix)
    try:
        parts = shard_prefixes(prefix)
    except CheckpointError:                         # an incomplete sharded one: what is there
        folder = os.path.dirname(prefix) or "."
        shard = re.compile(re.escape(os.path.basename(prefix)) + r"-\d{5}-of-\d{5}"
                           + r"(\.index(?:\.json)?)$")
        parts = sorted({os.path.join(folder, n[:-len(m.group(1))]) for n in os.listdir(folder)
                        for m in [shard.match(n)] if m})
    if parts and (len(parts) > 1 or parts[0] != prefix):
        for part in parts:
            delete_checkpoint(part)
        return
    for path in checkpoint_files(prefix):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            warnings.warn(f"could not delete old checkpoint file {path}: {e.strerror or e}",
                          RuntimeWarning, stacklevel=2)


# --- host ops: what generated SaveV2/RestoreV2 kernels call ------------------------------------
def _save_host_op(store, node: str, attrs: dict, prefix, *tensors) -> list:
    names = attrs["tensor_names"]
    if len(names) != len(tensors):
        raise CheckpointError(f"{len(names)} tensor names for {len(tensors)} tensors")
    write_checkpoint(prefix_from_bytes(prefix), dict(zip(names, tensors)))
    return []


def _restore_host_op(store, node: str, attrs: dict, prefix) -> list:
    shapes = [None if s is None else tuple(s) for s in attrs["shapes"]]
    return read_checkpoint(prefix_from_bytes(prefix), attrs["tensor_names"],
                           [DType.parse(d) for d in attrs["dtypes"]], shapes)


def _register() -> None:
    from runtime.resources import register_host_op
    register_host_op("SaveV2", _save_host_op)
    register_host_op("RestoreV2", _restore_host_op)


_register()
