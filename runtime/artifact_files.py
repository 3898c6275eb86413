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

A device's big constants (its manifest entry's ``constants``: ``.bin`` blobs the module does
not include) are mapped read-only and hashed from that mapping, once; the module is then bound
to those very pages (``CModule.bind_constants``), so what it reads is what was hashed. A blob
is read nowhere else, and is never copied into the module as well.

Given a ``VerificationRecord`` (``runtime/verified_files.py``: the compile cache's, never an
artifact from elsewhere), a file the record says was checked, and that is still that same
file (device, inode, size, mtime and ctime), is not hashed again; every other file is, and is
then noted in the record. A module trusted that way is mapped, not read, for its symbol check.
"""
from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import stat
import sys
from typing import Dict, Iterator, List, Optional, Tuple

from runtime.elf import ElfError, exported_symbols
from runtime.errors import ArtifactError
from runtime.manifest import MANIFEST, plain_file_name_problem
from runtime.verified_files import VerificationRecord, identity

# What every flowc module exports (runtime/csrc/flowc_rt.h); the runtime calls each of them.
MODULE_SYMBOLS = ("flowc_abi_version", "flowc_entry", "flowc_free")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)     # fault the pages in at once (Linux)


def _elf_platform() -> bool:
    """Whether this platform's shared objects are ELF files (Linux, the BSDs)."""
    return sys.platform.startswith(("linux", "freebsd", "netbsd", "openbsd"))


class ArtifactFolder:
    """An artifact folder and its checked manifest: the only way the loader reads its files."""

    def __init__(self, path: str, manifest: dict,
                 verified: Optional[VerificationRecord] = None):
        self.path = path
        self.manifest = manifest
        self.files = manifest["files"]
        self.mpath = os.path.join(path, MANIFEST)
        self.verified = verified
        # blobs of big constants mapped and hashed by ``verify_all``, until a module takes them
        self._mapped: Dict[str, mmap.mmap] = {}

    def _trusted(self, fd: int, name: str) -> bool:
        """File ``name`` (open as ``fd``) was checked before and is unchanged since."""
        return self.verified is not None and \
            self.verified.trusted(name, os.fstat(fd), self.files[name])

    def _note(self, fd: int, name: str, before: os.stat_result) -> None:
        """File ``name`` (open as ``fd``, ``before`` its ``fstat`` before it was read) was
        just found to have its manifest hash; not noted if it changed while it was read."""
        if self.verified is not None:
            after = os.fstat(fd)
            if identity(after) == identity(before):
                self.verified.note(name, after, self.files[name])

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
        before = os.fstat(fd)
        trusted = self._trusted(fd, name)
        chunks = []
        with open(fd, "rb", closefd=False) as f:
            f.seek(0)
            for chunk in iter(lambda: f.read(1 << 20), b""):
                chunks.append(chunk)
        data = b"".join(chunks)
        if not trusted:
            self._check_hash(hashlib.sha256(data).hexdigest(), fpath, name)
            self._note(fd, name, before)
        return data

    def _check_hash(self, actual: str, fpath: str, name: str) -> None:
        expected = self.files[name]
        if actual != expected:
            raise ArtifactError(f"artifact file {fpath} does not match its manifest hash "
                                f"(expected {expected[:12]}…, found {actual[:12]}…): it was "
                                "modified or corrupted")

    def constant_files(self) -> set:
        """The names of the blobs some device's module reads its big constants from."""
        return {blob["file"] for d in self.manifest.get("devices", [])
                for blob in d.get("constants", [])}

    def verify_all(self, keep_constants: bool = False) -> None:
        """Check the hash of every file the manifest lists (not of those the verification
        record vouches for); the record notes the files hashed. ``keep_constants``: the
        constants' blobs are hashed through the read-only mapping ``constants`` hands to the
        module later, so they are hashed once and the module reads the bytes hashed."""
        constant_files = self.constant_files() if keep_constants else set()
        for name in self.files:
            fd, fpath = self._open(name)
            try:
                if self._trusted(fd, name):
                    continue
                if name in constant_files:
                    self._mapped[name] = self._map_checked(fd, fpath, name)
                    continue
                before = os.fstat(fd)
                h = hashlib.sha256()
                with open(fd, "rb", closefd=False) as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                self._check_hash(h.hexdigest(), fpath, name)
                self._note(fd, name, before)
            finally:
                os.close(fd)
        if self.verified is not None:
            self.verified.save()

    def constants(self, index: int, d: dict) -> List[Tuple[str, str, mmap.mmap]]:
        """Device ``index``'s (manifest entry ``d``) big constants in the order its module's
        table takes them: (file name, SHA-256, its bytes mapped read-only), each hash-checked
        (once: ``verify_all`` may have mapped it already) and of the size the manifest says.
        Whoever binds the mappings closes them (``CModule.bind_constants``)."""
        out: List[Tuple[str, str, mmap.mmap]] = []
        try:
            for k, blob in enumerate(d.get("constants", [])):
                name = blob["file"]
                mapped = self._mapped.pop(name, None)
                if mapped is None:
                    fd, fpath = self._open(name)
                    try:
                        mapped = self._map_checked(fd, fpath, name)
                    finally:
                        os.close(fd)
                out.append((name, self.files[name], mapped))
                if len(mapped) != blob["nbytes"]:
                    raise ArtifactError(
                        f"{self.mpath}: devices[{index}].constants[{k}]: "
                        f"{os.path.join(self.path, name)} holds {len(mapped)} bytes; the module "
                        f"reads {blob['nbytes']}")
        except BaseException:
            for _, _, mapped in out:
                mapped.close()
            raise
        return out

    def _map_checked(self, fd: int, fpath: str, name: str) -> mmap.mmap:
        """File ``name`` (open as ``fd``) mapped read-only and private, hash-checked from the
        mapping unless the record vouches for the file (then mapped lazily, as ``dlopen``
        maps a module). Truncated, empty or changed, it is an ArtifactError naming it."""
        before = os.fstat(fd)
        trusted = self._trusted(fd, name)
        if before.st_size == 0:
            if not trusted:
                self._check_hash(hashlib.sha256(b"").hexdigest(), fpath, name)
            raise ArtifactError(f"artifact file {fpath} is empty; a constant's blob holds its "
                                "bytes")
        try:
            mapped = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE | (0 if trusted else _POPULATE),
                               prot=mmap.PROT_READ)
        except (OSError, ValueError) as e:
            raise ArtifactError(f"artifact file {fpath}: cannot map it: {e}") from None
        if not trusted:
            try:
                self._check_hash(hashlib.sha256(mapped).hexdigest(), fpath, name)
            except BaseException:
                mapped.close()
                raise
            self._note(fd, name, before)
        return mapped

    def close(self) -> None:
        """Unmap the blobs ``verify_all`` mapped that no module took."""
        for mapped in self._mapped.values():
            mapped.close()
        self._mapped.clear()

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
            with self._module_bytes(fd, fpath, name) as data:
                if _elf_platform():
                    try:
                        symbols = exported_symbols(data)
                    except ElfError as e:
                        raise ArtifactError(f"{self.mpath}: {entry}: {fpath} is not a flowc "
                                            f"module ({e}); it was not loaded") from None
                    missing = [s for s in MODULE_SYMBOLS if s not in symbols]
                    if missing:
                        raise ArtifactError(f"{self.mpath}: {entry}: {fpath} is not a flowc "
                                            f"module (it does not export {', '.join(missing)}); "
                                            "it was not loaded")
            if self.verified is not None:
                self.verified.save()
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


    @contextlib.contextmanager
    def _module_bytes(self, fd: int, fpath: str, name: str) -> Iterator[memoryview]:
        """The module's bytes: mapped where the record vouches for the file (nothing to hash,
        and the symbol check reads only its headers and symbol table), else read and hashed."""
        if self._trusted(fd, name) and os.fstat(fd).st_size > 0:
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            view = memoryview(mapped)
            try:
                yield view
            finally:
                view.release()
                try:
                    mapped.close()
                except BufferError:     # a view is still held (by an error's traceback):
                    pass                # the mapping goes when that does
            return
        yield memoryview(self._read_checked(fd, fpath, name))


def _identity(st: os.stat_result) -> tuple:
    """What tells one version of a file from another: the same inode, size and mtime."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, stat.S_IFMT(st.st_mode))
