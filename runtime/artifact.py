"""Compiled artifacts on disk: ``manifest.json`` + per-device modules + the IR they came from.

The loader checks the format version and every file's hash, and refuses a tampered or
mismatched artifact with an error that names the file.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence

from runtime.errors import ArtifactError, FeedError
from runtime.executor import DevicePart, MultiDeviceExecutable
from runtime.module import CModule, Executable, TensorSpec

FORMAT = "flowc-artifact"
FORMAT_VERSION = 2
MANIFEST = "manifest.json"


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

    def run(self, feeds: Dict[str, object] | Sequence = (), store=None) -> list:
        """Run one step. ``feeds`` maps feed names to values (or is a list in feed order).
        Variables and random streams come from ``store`` (a ``ResourceStore``; by default
        one the artifact keeps across runs)."""
        if isinstance(feeds, dict):
            unknown = set(feeds) - {f.name for f in self.feeds}
            if unknown:
                raise FeedError(f"unknown feed(s) {', '.join(sorted(unknown))}; this artifact takes "
                                f"{', '.join(f.name for f in self.feeds) or 'no feeds'}")
            missing = [f.name for f in self.feeds if f.name not in feeds]
            if missing:
                raise FeedError(f"missing feed(s) {', '.join(missing)}")
            values = [feeds[f.name] for f in self.feeds]
        else:
            values = list(feeds)
        return self.executable.run(values, store=store)


def _read_manifest(path: str) -> dict:
    mpath = os.path.join(path, MANIFEST)
    if not os.path.isfile(mpath):
        raise ArtifactError(f"{path} is not a flowc artifact: no {MANIFEST}")
    try:
        with open(mpath) as f:
            manifest = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{mpath} is not valid JSON: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{mpath} is not a flowc artifact manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ArtifactError(f"{mpath} has format version {manifest.get('format_version')}; "
                            f"this runtime reads version {FORMAT_VERSION}")
    return manifest


def verify_artifact(path: str) -> dict:
    """Check the manifest and the hash of every file it lists; return the manifest."""
    manifest = _read_manifest(path)
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise ArtifactError(f"{os.path.join(path, MANIFEST)} lists no files")
    expected_self = manifest.get("manifest_sha256")
    body = dict(manifest)
    body.pop("manifest_sha256", None)
    if expected_self != hashlib.sha256(canonical_json(body).encode()).hexdigest():
        raise ArtifactError(f"{os.path.join(path, MANIFEST)} was modified after it was written "
                            "(its own checksum does not match)")
    for name, digest in files.items():
        fpath = os.path.join(path, name)
        if os.path.basename(name) != name:
            raise ArtifactError(f"manifest names a file outside the artifact: {name}")
        if not os.path.isfile(fpath):
            raise ArtifactError(f"artifact file missing: {fpath}")
        actual = sha256_file(fpath)
        if actual != digest:
            raise ArtifactError(f"artifact file {fpath} does not match its manifest hash "
                                f"(expected {digest[:12]}…, found {actual[:12]}…): it was modified or corrupted")
    return manifest


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def write_manifest(path: str, manifest: dict) -> None:
    body = dict(manifest)
    body.pop("manifest_sha256", None)
    body["manifest_sha256"] = hashlib.sha256(canonical_json(body).encode()).hexdigest()
    tmp = os.path.join(path, MANIFEST + ".tmp")
    with open(tmp, "w") as f:
        json.dump(body, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(path, MANIFEST))


def _cpu_module(path: str, d: dict) -> CModule:
    if d.get("kind") != "cpu":
        raise ArtifactError(f"{path}: device {d.get('device')} is of kind {d.get('kind')!r}; "
                            "this runtime runs CPU modules")
    return CModule(os.path.join(path, d["module"]))


def load_artifact(path: str, load_module: Callable[[str, dict], CModule] = _cpu_module) -> Artifact:
    """Load an artifact: one ``Executable`` per device (run together when there are several).
    ``load_module(path, device_entry)`` loads each device's module (CPU modules by default;
    ``runtime.cuda_module`` passes one that also loads GPU modules)."""
    manifest = verify_artifact(path)
    devices = manifest.get("devices") or []
    if not devices:
        raise ArtifactError(f"{path}: the manifest lists no devices")
    feeds = [TensorSpec.from_json(f) for f in manifest["feeds"]]
    fetches = [TensorSpec.from_json(f) for f in manifest["fetches"]]
    parts = []
    for d in devices:
        module = load_module(path, d)
        try:
            exe = Executable(module, [feeds[i] for i in d["feeds"]],
                             [fetches[i] for i in d["fetches"]],
                             [TensorSpec.from_json(v) for v in d.get("variables", [])],
                             list(d.get("random_streams", [])), list(d.get("queues", [])))
        except (IndexError, KeyError) as e:
            raise ArtifactError(f"{path}: the manifest entry of {d.get('device')} is malformed "
                                f"({e})") from None
        if "kernels" in d:                        # a --profile build: its kernel table
            exe.kernel_table = {"device": d["device"], "kernels": list(d["kernels"])}
        parts.append(DevicePart(d["device"], exe, d["feeds"], d["fetches"]))
    if len(parts) == 1 and parts[0].feeds == list(range(len(feeds))) \
            and parts[0].fetches == list(range(len(fetches))):
        return Artifact(path, manifest, parts[0].executable)
    return Artifact(path, manifest, MultiDeviceExecutable(parts, feeds, fetches,
                                                          int(manifest.get("rendezvous_slots", 0))))
