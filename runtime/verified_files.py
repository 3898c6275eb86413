"""A record of an artifact's files whose SHA-256 was checked, so that a later load trusts a file
that is still the very same file instead of reading and hashing it again.

For each file the record keeps its identity when it was checked — (device, inode, size,
mtime_ns, ctime_ns) — and the SHA-256 it had. A load trusts a file without hashing it only when
the open file has exactly that identity and the manifest records that same SHA-256. Writing a
file changes its mtime and ctime; setting the mtime back (``utime``) sets the ctime to now, and
no user can set a ctime back; replacing the file makes another inode. So a file changed after
its check has another identity and is hashed again (and refused when it no longer matches).

Timestamps tick coarsely (a few milliseconds), so a change made in the tick the record was
written could keep a file's identity: an entry counts only when the file's ctime is older
than the record file's own mtime (git's "racily clean" rule); a younger one is hashed again.
A file whose identity changed while it was being hashed is not recorded.

What it guards is what the manifest's hashes guard: accidental damage and a file changed
afterwards (by the user, a tool, a half-finished copy). Whoever can write the cache folder can
write its records as they can recompute an unsigned manifest's hashes; a signature is what
stands against them, and a signed load does not use records.

Only the compile cache keeps records (``compiler/master.py``, beside each cached artifact,
where only the cache's owner writes): an artifact from elsewhere (``flowc run``,
``load_artifact(path)``) gets no record and is hashed whole, and a load that checks a
signature (``verify_key``) ignores records (a signature must cover every byte loaded, and a
record is not signed). A record that is missing, damaged or written for other files only
means the full check; it can never make a load refuse a good artifact.
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from typing import Dict, Optional, Tuple

Identity = Tuple[int, int, int, int, int]

RECORD_FORMAT = "flowc-verified-files"
RECORD_VERSION = 1
MAX_RECORD_BYTES = 1 << 20
# How long ``save`` waits, at most, for the filesystem's clock to tick past the files it records.
_TICK_WAIT_S = 0.05


def identity(st: os.stat_result) -> Identity:
    """What tells one version of a regular file from another, ctime included."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _is_sha256(value) -> bool:
    return (isinstance(value, str) and len(value) == 64
            and all(c in "0123456789abcdef" for c in value))


class VerificationRecord:
    """The record kept at ``path`` (a file outside the artifact folder it describes)."""

    def __init__(self, path: str):
        self.path = path
        self._entries: Optional[Dict[str, Tuple[Identity, str]]] = None
        self._written_ns = 0            # the record file's mtime: entries must be older
        self._changed = False

    def _load(self) -> Dict[str, Tuple[Identity, str]]:
        if self._entries is not None:
            return self._entries
        self._entries = {}
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return self._entries
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RECORD_BYTES:
                return self._entries
            with open(fd, "rb", closefd=False) as f:
                data = f.read(MAX_RECORD_BYTES + 1)
        except OSError:
            return self._entries
        finally:
            os.close(fd)
        try:
            record = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            return self._entries
        if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT \
                or record.get("version") != RECORD_VERSION \
                or not isinstance(record.get("files"), dict):
            return self._entries
        entries = {}
        for name, entry in record["files"].items():
            if not (isinstance(entry, list) and len(entry) == 6 and _is_sha256(entry[5])
                    and all(type(v) is int for v in entry[:5])):
                return self._entries            # not written by ``save``: trust none of it
            entries[name] = (tuple(entry[:5]), entry[5])
        self._entries = entries
        self._written_ns = st.st_mtime_ns
        return self._entries

    def trusted(self, name: str, st: os.stat_result, sha256: str) -> bool:
        """Whether file ``name``, now ``st`` (an ``fstat`` of the open file), was checked to
        have ``sha256`` and is unchanged since."""
        entry = self._load().get(name)
        return (entry is not None and entry[1] == sha256 and entry[0] == identity(st)
                and st.st_ctime_ns < self._written_ns)

    def note(self, name: str, st: os.stat_result, sha256: str) -> None:
        """File ``name``, as ``st`` says it is, was just checked to have ``sha256``."""
        entries = self._load()
        value = (identity(st), sha256)
        if entries.get(name) != value or st.st_ctime_ns >= self._written_ns:
            entries[name] = value
            self._changed = True

    def save(self) -> None:
        """Write the record if anything was noted (atomically: a temporary file renamed). It
        waits a few milliseconds where a file's ctime is in the clock tick of the writing, so
        the record is not born racy; a failure to write only costs the next load its hashing."""
        if not self._changed:
            return
        files = {name: list(ident) + [sha] for name, (ident, sha) in self._entries.items()}
        text = json.dumps({"format": RECORD_FORMAT, "version": RECORD_VERSION, "files": files},
                          sort_keys=True)
        newest = max((ident[4] for ident, _ in self._entries.values()), default=0)
        folder = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".verified-")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                deadline = time.monotonic() + _TICK_WAIT_S
                while True:
                    written = os.stat(tmp).st_mtime_ns
                    if written > newest or time.monotonic() > deadline:
                        break
                    time.sleep(0.001)
                    os.utime(tmp)                   # now: once the clock has ticked past
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            return
        self._written_ns = written
        self._changed = False
