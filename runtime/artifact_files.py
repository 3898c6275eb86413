"""The files of an artifact folder, read only as its checked manifest names them.

Every file the runtime reads from an artifact (each device's module, a GPU module's device
code, the IR) is named by a manifest entry that ``runtime/manifest.py`` has checked: a plain
file name inside the folder, one of the manifest's ``files``. Here each is opened without
following a symbolic link (``O_NOFOLLOW``: a link could lead out of the folder), must be a
regular file, and must have the SHA-256 the manifest records.

A module is read once through an open file descriptor: those bytes are hashed and checked to
be a flowc module (its exported symbols: ``dlopen`` runs a shared object's constructors, so
this happens before it), and just before ``dlopen`` the name must still be that same file
(inode, size, modification time): a module swapped after the artifact was verified is hashed
again here and refused. What remains is the instant between that last check and ``dlopen``
opening the name; someone who can write the folder while it loads can race that, and only a
loader reading from a folder others cannot write is safe from it (docs: README, "Artifacts").
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
from typing import Iterator, Tuple

from runtime.elf import ElfError, exported_symbols
from runtime.errors import ArtifactError
from runtime.manifest import MANIFEST, plain_file_name_problem

# What every flowc module exports (runtime/csrc/flowc_rt.h); the runtime calls each of them.
MODULE_SYMBOLS = ("flowc_abi_version", "flowc_entry", "flowc_free")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _elf_platform() -> bool:
    """Whether this platform's shared objects are ELF files (Linux, the BSDs)."""
    return sys.platform.startswith(("linux", "freebsd", "netbsd", "openbsd"))


class ArtifactFolder:
    """An artifact folder and its checked manifest: the only way the loader reads its files."""

    def __init__(self, path: str, manifest: dict):
        self.path = path
        self.manifest = manifest
        self.files = manifest["files"]
        self.mpath = os.path.join(path, MANIFEST)

    def _open(self, name: str) -> Tuple[int, str]:
        """(an open descriptor of file ``name``, its path); one of the manifest's files, a
        regular file, not a link. (``O_NONBLOCK``: opening a named pipe must not hang.)"""
        if plain_file_name_problem(name) or name not in self.files:
            raise ArtifactError(f"{self.mpath}: {name!r} is not one of the manifest's files; "
                                "only those are read")
        fpath = os.path.join(self.path, name)
        try:
            fd = os.open(fpath, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK)
        except FileNotFoundError:
            raise ArtifactError(f"artifact file missing: {fpath}") from None
        except OSError as e:
            if os.path.islink(fpath):
                raise ArtifactError(f"artifact file {fpath} is a symbolic link; an artifact's "
                                    "files must be in its folder, not links to elsewhere") from None
            raise ArtifactError(f"artifact file {fpath}: cannot open it: {e.strerror or e}") \
                from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ArtifactError(f"artifact file {fpath} is not a regular file")
        return fd, fpath

    def _read_checked(self, fd: int, fpath: str, name: str) -> bytes:
        chunks = []
        with open(fd, "rb", closefd=False) as f:
            f.seek(0)
            for chunk in iter(lambda: f.read(1 << 20), b""):
                chunks.append(chunk)
        data = b"".join(chunks)
        self._check_hash(hashlib.sha256(data).hexdigest(), fpath, name)
        return data

    def _check_hash(self, actual: str, fpath: str, name: str) -> None:
        expected = self.files[name]
        if actual != expected:
            raise ArtifactError(f"artifact file {fpath} does not match its manifest hash "
                                f"(expected {expected[:12]}…, found {actual[:12]}…): it was "
                                "modified or corrupted")

    def verify_all(self) -> None:
        """Check the hash of every file the manifest lists."""
        for name in self.files:
            fd, fpath = self._open(name)
            try:
                h = hashlib.sha256()
                with open(fd, "rb", closefd=False) as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
            finally:
                os.close(fd)
            self._check_hash(h.hexdigest(), fpath, name)

    def read(self, name: str) -> bytes:
        """The bytes of file ``name`` (a checked manifest entry), hash-checked."""
        fd, fpath = self._open(name)
        try:
            return self._read_checked(fd, fpath, name)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def open_module(self, name: str, entry: str) -> Iterator[str]:
        """The path to ``dlopen`` for the module file ``name`` (manifest entry ``entry``, such
        as ``devices[0].module``), once the file has its manifest hash and is a flowc module.
        Load it inside the ``with`` block: the file is held open, and the path is checked to
        still be that file just before the block starts."""
        fd, fpath = self._open(name)
        try:
            before = os.fstat(fd)
            data = self._read_checked(fd, fpath, name)
            if _elf_platform():
                try:
                    symbols = exported_symbols(data)
                except ElfError as e:
                    raise ArtifactError(f"{self.mpath}: {entry}: {fpath} is not a flowc module "
                                        f"({e}); it was not loaded") from None
                missing = [s for s in MODULE_SYMBOLS if s not in symbols]
                if missing:
                    raise ArtifactError(f"{self.mpath}: {entry}: {fpath} is not a flowc module "
                                        f"(it does not export {', '.join(missing)}); it was not "
                                        "loaded")
            after = os.fstat(fd)
            try:
                now = os.lstat(fpath)
            except OSError:
                now = None
            if now is None or _identity(now) != _identity(after) \
                    or _identity(before) != _identity(after):
                raise ArtifactError(f"artifact file {fpath} changed while it was being checked; "
                                    "it was not loaded")
            yield fpath
        finally:
            os.close(fd)


def _identity(st: os.stat_result) -> tuple:
    """What tells one version of a file from another: the same inode, size and mtime."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, stat.S_IFMT(st.st_mode))
