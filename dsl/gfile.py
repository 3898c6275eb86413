"""``tf.gfile`` (TF1): file access as thin wrappers of ``os``/``shutil``/``glob`` for local
paths, raising TensorFlow's error classes (``NotFoundError`` for a missing file,
``AlreadyExistsError`` where TF refuses to overwrite)."""
from __future__ import annotations

import errno
import glob as _glob
import os
import shutil
from typing import Iterator, List, NamedTuple

from runtime.errors import AlreadyExistsError, FailedPreconditionError, NotFoundError, OpError

__all__ = ["GFile", "Open", "FastGFile", "Exists", "IsDirectory", "MakeDirs", "MkDir", "Glob",
           "ListDirectory", "Remove", "DeleteRecursively", "Rename", "Copy", "Stat", "Walk"]


def _error(e: OSError, path: str) -> OpError:
    if e.errno == errno.ENOENT:
        return NotFoundError(None, None, f"{path}; No such file or directory")
    if e.errno == errno.EEXIST:
        return AlreadyExistsError(None, None, f"{path}; File exists")
    return FailedPreconditionError(None, None, f"{path}; {e.strerror}")


class GFile:
    """A file (``tf.gfile.GFile(name, mode)``): ``read(n=-1)``, ``readline``, ``readlines``,
    ``write``, ``seek``/``tell``, ``size``, iteration, ``with``. Text unless ``mode`` has b."""

    def __init__(self, name: str, mode: str = "r"):
        self.name, self.mode = os.fspath(name), mode
        self._file = None

    def _f(self):
        if self._file is None:
            try:
                self._file = open(self.name, self.mode,
                                  **({} if "b" in self.mode else {"encoding": "utf-8"}))
            except OSError as e:
                raise _error(e, self.name) from None
        return self._file

    def read(self, n: int = -1):
        return self._f().read(n)

    def readline(self):
        return self._f().readline()

    def readlines(self) -> list:
        return self._f().readlines()

    def write(self, data) -> None:
        self._f().write(data)

    def seek(self, offset: int = 0, whence: int = 0) -> None:
        self._f().seek(offset, whence)

    def tell(self) -> int:
        return self._f().tell()

    def size(self) -> int:
        return os.path.getsize(self.name)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __iter__(self):
        return iter(self._f())

    def __next__(self):
        return next(self._f())

    def __enter__(self) -> "GFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


Open = GFile
FastGFile = GFile


def Exists(filename) -> bool:  # noqa: N802  (TF's names)
    return os.path.exists(filename)


def IsDirectory(dirname) -> bool:  # noqa: N802
    return os.path.isdir(dirname)


def MakeDirs(dirname) -> None:  # noqa: N802
    """Create ``dirname`` and its parents; an existing directory is fine."""
    try:
        os.makedirs(dirname, exist_ok=True)
    except OSError as e:
        raise _error(e, os.fspath(dirname)) from None


def MkDir(dirname) -> None:  # noqa: N802
    """Create ``dirname`` (its parent must exist; it must not)."""
    try:
        os.mkdir(dirname)
    except OSError as e:
        raise _error(e, os.fspath(dirname)) from None


def Glob(filename) -> List[str]:  # noqa: N802
    """The paths matching the pattern (or each pattern of a list)."""
    patterns = [filename] if isinstance(filename, (str, bytes, os.PathLike)) else filename
    return [p for pat in patterns for p in sorted(_glob.glob(os.fspath(pat)))]


def ListDirectory(dirname) -> List[str]:  # noqa: N802
    """The entries of ``dirname`` (names, not paths)."""
    if not os.path.isdir(dirname):
        raise NotFoundError(None, None, f"Could not find directory {dirname}")
    return sorted(os.listdir(dirname))


def Remove(filename) -> None:  # noqa: N802
    try:
        os.remove(filename)
    except OSError as e:
        raise _error(e, os.fspath(filename)) from None


def DeleteRecursively(dirname) -> None:  # noqa: N802
    try:
        if os.path.isdir(dirname):
            shutil.rmtree(dirname)
        else:
            os.remove(dirname)
    except OSError as e:
        raise _error(e, os.fspath(dirname)) from None


def Rename(oldname, newname, overwrite: bool = False) -> None:  # noqa: N802
    if not overwrite and os.path.exists(newname):
        raise AlreadyExistsError(None, None, f"file already exists: {newname}")
    try:
        os.replace(oldname, newname)
    except OSError as e:
        raise _error(e, os.fspath(oldname)) from None


def Copy(oldpath, newpath, overwrite: bool = False) -> None:  # noqa: N802
    if not overwrite and os.path.exists(newpath):
        raise AlreadyExistsError(None, None, f"file already exists: {newpath}")
    try:
        shutil.copyfile(oldpath, newpath)
    except OSError as e:
        raise _error(e, os.fspath(oldpath)) from None


class FileStatistics(NamedTuple):
    length: int
    mtime_nsec: int
    is_directory: bool


def Stat(filename) -> FileStatistics:  # noqa: N802
    try:
        st = os.stat(filename)
    except OSError as e:
        raise _error(e, os.fspath(filename)) from None
    return FileStatistics(st.st_size, st.st_mtime_ns, os.path.isdir(filename))


def Walk(top, in_order: bool = True) -> Iterator:  # noqa: N802
    """``(dirname, subdirs, files)`` for ``top`` and each directory below it."""
    return os.walk(top, topdown=in_order)
