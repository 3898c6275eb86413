"""Compiled artifacts on disk: ``manifest.json`` + per-device modules + the IR they came from.

The loader checks the manifest (``runtime/manifest.py``: strict JSON, every entry's type and
range, file names confined to the folder), its checksum and, given a key, its signature
(``runtime/signing.py``), and every file's hash; it loads modules only through
``runtime/artifact_files.py``, which reads nothing the manifest does not hash and nothing
outside the folder, and checks a module is one before ``dlopen``. A CPU module's big
constants are the artifact's ``.bin`` blobs (stored once: the module does not include them),
mapped, hashed once and bound to the module before it runs (``load_cpu_module``). A tampered,
malformed or mismatched artifact is refused with an ArtifactError that names the artifact and
the entry or file. The compile cache passes a ``VerificationRecord``
(``runtime/verified_files.py``) so its files, hashed once, are not hashed again at every start
while they stay the same files.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from runtime.artifact_files import ArtifactFolder
from runtime.errors import ArtifactError, FeedError
from runtime.executor import DevicePart, MultiDeviceExecutable
from runtime.manifest import (CHECKSUM_FIELD, FORMAT, FORMAT_VERSION, MANIFEST,  # noqa: F401
                              SIGNATURE_FIELD, canonical_json, check_entries, manifest_checksum,
                              read_manifest)
from runtime.module import CModule, Executable, TensorSpec
from runtime.signing import Key, check_signature, load_key, manifest_signature
from runtime.verified_files import VerificationRecord

# (the artifact's folder, the device's index in the manifest, its manifest entry) -> its module
ModuleLoader = Callable[[ArtifactFolder, int, dict], CModule]


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class Artifact:
    path: str
    manifest: dict
    executable: "Executable | MultiDeviceExecutable"

    @property
    def feeds(self) -> List[TensorSpec]:
        return self.executable.feeds

    @property
    def fetches(self) -> List[TensorSpec]:
        return self.executable.fetches

    @property
    def store(self):
        """The ``ResourceStore`` the artifact's runs use by default (variables, streams,
        queues), kept across runs."""
        exe = self.executable
        first = exe.parts[0].executable if hasattr(exe, "parts") else exe
        return first._own_store()

    @property
    def instrumentation(self) -> dict:
        """What the artifact was compiled with: ``{"profile": ..., "check_numerics": ...}``."""
        devices = self.manifest.get("devices") or [{}]
        return dict(devices[0].get("instrumentation") or
                    {"profile": False, "check_numerics": False})

    @property
    def variables(self) -> List[TensorSpec]:
        """Every variable the artifact's devices use, once each."""
        seen: Dict[str, TensorSpec] = {}
        for d in self.manifest.get("devices", []):
            for v in d.get("variables", []):
                spec = TensorSpec.from_json(v)
                seen.setdefault(spec.name, spec)
        return list(seen.values())

    def restore(self, prefix: str, store=None) -> List[str]:
        """Set the artifact's variables from checkpoint ``prefix`` (written by a Saver whose
        names are the variables' names, the default). All or nothing: a checkpoint that lacks
        a variable or does not match it is refused and no variable changes. Returns the
        names restored."""
        from runtime.checkpoint import read_checkpoint
        specs = self.variables
        values = read_checkpoint(prefix, [s.name for s in specs], [s.dtype for s in specs],
                                 [s.shape for s in specs])
        store = store if store is not None else self.store
        for spec, value in zip(specs, values):
            store.variable(spec.name, spec.dtype, spec.shape).assign(value)
        return [s.name for s in specs]

    def __post_init__(self) -> None:
        self._feed_names = tuple(f.name for f in self.feeds)
        # The C run path bound to the artifact's own store (``Executable.direct``), made on
        # the first run without a store: (the C call, its constant arguments), or False
        # where there is none (several devices, or no C run path built here).
        self._route: object = None

    def run(self, feeds: Dict[str, object] | Sequence = (), store=None) -> list:
        """Run one step. ``feeds`` maps feed names to values (or is a list in feed order).
        Variables and random streams come from ``store`` (a ``ResourceStore``; by default
        one the artifact keeps across runs).

        The common call, every feed given by name (or in order) and no ``store``, goes
        straight to the compiled step's C run path (``runtime/csrc/flowc_fastcall.c``), which
        takes arrays of exactly a feed's dtype and shape as they are and refuses any other
        value; a refused value goes through the feed's check (``runtime/feeds.py``), which
        converts it (a list, ints into a float feed) or raises a FeedError saying why."""
        names = self._feed_names
        if type(feeds) is dict:
            try:
                values = [feeds[n] for n in names]
            except KeyError:
                values = None
            if values is None or len(feeds) != len(names):
                raise self._feed_names_error(feeds)
        else:
            values = list(feeds)
        route = self._route
        if store is None and len(values) == len(names):
            if route is None:
                route = self._bind_route()
            if route:
                call, step = route
                got = call(step, values, 0, 0, False)
                if type(got) is list:
                    return got
                return self.executable.finish_direct(got, values, step)
        return self.executable.run(values, store=store)

    def _bind_route(self):
        exe = self.executable
        direct = exe.direct(exe._own_store()) if isinstance(exe, Executable) else None
        self._route = route = direct or False
        return route

    def _feed_names_error(self, feeds: dict) -> FeedError:
        """Why a dict of feeds does not name exactly this artifact's feeds."""
        unknown = set(feeds) - set(self._feed_names)
        if unknown:
            return FeedError(f"unknown feed(s) {', '.join(sorted(map(str, unknown)))}; this "
                             f"artifact takes {', '.join(self._feed_names) or 'no feeds'}")
        missing = [n for n in self._feed_names if n not in feeds]
        return FeedError(f"missing feed(s) {', '.join(missing)}")


def verify_artifact(path: str, verify_key: Optional[Key] = None,
                    verified: Optional[VerificationRecord] = None) -> dict:
    """Check the manifest (strict JSON, every entry, its own checksum, and with
    ``verify_key`` its signature) and the hash of every file it lists; return the manifest.
    Raises an ArtifactError naming the artifact and what is wrong. ``verified``: the record
    of files hashed before (the compile cache's); a file still the same as it records is not
    hashed again, the others are and are recorded. Ignored with ``verify_key``."""
    return _checked_folder(path, verify_key, verified).manifest


def _checked_folder(path: str, verify_key: Optional[Key], verified: Optional[VerificationRecord],
                    keep_constants: bool = False) -> ArtifactFolder:
    """``verify_artifact``'s checks; the folder they passed (``keep_constants``: holding the
    constants' blobs mapped as they were hashed, for the modules to bind)."""
    manifest = read_manifest(path)
    mpath = os.path.join(path, MANIFEST)
    if manifest.get(CHECKSUM_FIELD) != manifest_checksum(manifest):
        raise ArtifactError(f"{mpath} was modified after it was written "
                            "(its own checksum does not match)")
    if verify_key is not None:
        check_signature(manifest, load_key(verify_key, "verify_key"), mpath)
    check_entries(manifest, path)
    folder = ArtifactFolder(path, manifest, None if verify_key is not None else verified)
    folder.verify_all(keep_constants)
    return folder


def write_manifest(path: str, manifest: dict, sign_key: Optional[Key] = None) -> None:
    """Write ``manifest`` into the folder ``path`` with its checksum and, with ``sign_key``
    (bytes or a key file), its signature (docs: what each protects). Atomic: written to a
    temporary file, synced, renamed."""
    body = {k: v for k, v in manifest.items() if k not in (CHECKSUM_FIELD, SIGNATURE_FIELD)}
    if sign_key is not None:
        body[SIGNATURE_FIELD] = manifest_signature(body, load_key(sign_key, "sign_key"))
    body[CHECKSUM_FIELD] = manifest_checksum(body)
    tmp = os.path.join(path, MANIFEST + ".tmp")
    with open(tmp, "w") as f:
        json.dump(body, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(path, MANIFEST))


def load_cpu_module(folder: ArtifactFolder, index: int, d: dict) -> CModule:
    """Device ``index``'s CPU module (manifest entry ``d``), bound to its big constants: the
    artifact's blobs, mapped and hash-checked (``ArtifactFolder.constants``)."""
    with folder.open_module(d["module"], f"devices[{index}].module") as path:
        module = CModule(path)
    module.bind_constants(folder.constants(index, d))
    return module


def _cpu_module(folder: ArtifactFolder, index: int, d: dict) -> CModule:
    if d["kind"] != "cpu":
        raise ArtifactError(f"{folder.path}: device {d['device']} is of kind {d['kind']!r}; "
                            "this runtime runs CPU modules")
    return load_cpu_module(folder, index, d)


def load_artifact(path: str, load_module: ModuleLoader = _cpu_module, *,
                  verify_key: Optional[Key] = None,
                  verified: Optional[VerificationRecord] = None) -> Artifact:
    """Load an artifact: one ``Executable`` per device (run together when there are several).

    ``verify_key`` (bytes, or the path of a key file): refuse the artifact unless its manifest
    is signed with that key (``flowc compile --sign-key``). Without it, the hashes still catch
    accidental damage, but not an edit (docs: README, "Artifacts").
    ``load_module(folder, index, device_entry)`` loads each device's module from the
    ``ArtifactFolder`` (CPU modules by default; ``runtime.cuda_module`` passes one that also
    loads GPU modules). Nothing is loaded before the whole artifact is checked, and nothing
    from outside its folder. ``verified``: the compile cache's record of the artifact's files
    hashed before (``runtime/verified_files.py``); not used with ``verify_key``."""
    if verify_key is not None:
        verified = None
    folder = _checked_folder(path, verify_key, verified, keep_constants=True)
    try:
        return _load_checked(folder, load_module)
    finally:
        folder.close()           # blobs mapped for a module that was not loaded


def _load_checked(folder: ArtifactFolder, load_module: ModuleLoader) -> Artifact:
    path, manifest = folder.path, folder.manifest
    devices = manifest["devices"]
    feeds = [TensorSpec.from_json(f) for f in manifest["feeds"]]
    fetches = [TensorSpec.from_json(f) for f in manifest["fetches"]]
    parts = []
    for index, d in enumerate(devices):
        module = load_module(folder, index, d)
        exe = Executable(module, [feeds[i] for i in d["feeds"]],
                         [fetches[i] for i in d["fetches"]],
                         [TensorSpec.from_json(v) for v in d.get("variables", [])],
                         list(d.get("random_streams", [])), list(d.get("queues", [])))
        if "kernels" in d:                        # a --profile build: its kernel table
            exe.kernel_table = {"device": d["device"], "kernels": list(d["kernels"])}
        parts.append(DevicePart(d["device"], exe, d["feeds"], d["fetches"]))
    if len(parts) == 1 and parts[0].feeds == list(range(len(feeds))) \
            and parts[0].fetches == list(range(len(fetches))):
        return Artifact(path, manifest, parts[0].executable)
    return Artifact(path, manifest, MultiDeviceExecutable(parts, feeds, fetches,
                                                          int(manifest.get("rendezvous_slots", 0))))
