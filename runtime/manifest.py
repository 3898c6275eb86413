"""Reading an artifact's ``manifest.json`` and checking every entry the loader uses.

A manifest is data from outside: it may be damaged, edited or made up. ``read_manifest`` parses
it as strict JSON (UTF-8, no ``NaN``/``Infinity``, no key given twice, bounded size and nesting
depth) and ``check_entries`` checks the type and range of every entry before anything is done
with it, so a bad manifest is always an ``ArtifactError`` that names the manifest and the entry
(``devices[0].module``), never a ``KeyError`` or ``RecursionError`` from deep in the loader.

File names in a manifest (``files``, ``ir``, each device's ``module``, ``source``, ``fatbin``,
``ptx``, ``cubin``) must be plain names of files inside the artifact folder, and every one of
them must be one of ``files``, the files whose SHA-256 the manifest records: nothing the
runtime reads can come from outside the folder or escape the hash check
(``runtime/artifact_files.py`` reads them).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import List, Optional

from runtime.dtypes import DType
from runtime.errors import ArtifactError
from runtime.module import ABI_VERSION

FORMAT = "flowc-artifact"
# 3: a CPU device's big constants are its ``constants`` blobs, which the loader must bind (a
# loader of version 2 would load the module and fail at its first run)
FORMAT_VERSION = 3
MANIFEST = "manifest.json"
CHECKSUM_FIELD = "manifest_sha256"
SIGNATURE_FIELD = "manifest_hmac_sha256"

MAX_MANIFEST_BYTES = 64 << 20     # a manifest with a large kernel table is a few MB
MAX_DEPTH = 32                    # flowc's manifests nest 7 deep (devices/kernels/fused_from)
MAX_RANK = 8                      # flowc_tensor.dims (runtime/csrc/flowc_rt.h)
MAX_INT64 = (1 << 63) - 1
MAX_RENDEZVOUS_SLOTS = 1 << 24    # slots are allocated per step; a real step has a few hundred
MAX_QUEUE_COMPONENTS = 1 << 16
MAX_NAME_BYTES = 255              # one file name (NAME_MAX)
# Where a device entry names files of the artifact (the loader reads ``module`` and ``fatbin``).
DEVICE_FILE_KEYS = ("module", "source", "fatbin", "ptx", "cubin")


def canonical_json(obj) -> str:
    """The one text of ``obj`` that its checksum and signature are computed over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def manifest_checksum(manifest: dict) -> str:
    """SHA-256 of the manifest without its own checksum (the signature, if any, is covered)."""
    body = {k: v for k, v in manifest.items() if k != CHECKSUM_FIELD}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def is_sha256_hex(value) -> bool:
    return (isinstance(value, str) and len(value) == 64
            and all(c in "0123456789abcdef" for c in value))


def plain_file_name_problem(name) -> Optional[str]:
    """Why ``name`` is not a plain name of a file inside an artifact folder (None if it is)."""
    if not isinstance(name, str):
        return f"expected a file name, found {_kind(name)}"
    if name in ("", ".", ".."):
        return f"'{name}' is not a file name"
    if "\x00" in name or len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"{name!r} is not a file name"
    if "/" in name or "\\" in name or os.path.isabs(name) or os.path.basename(name) != name:
        return (f"'{name}' is not a plain file name: it names a path, which could lead outside "
                "the artifact folder")
    if name == MANIFEST:
        return f"'{name}' is the manifest itself"
    return None


# --- reading ---------------------------------------------------------------------------------
def _no_constants(token: str):
    raise ValueError(f"{token} is not a JSON number")


def _object(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears more than once in one object")
        out[key] = value
    return out


def _depth_problem(root) -> Optional[str]:
    """Iteratively (a deep value must not exhaust Python's stack here either)."""
    stack = [(root, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"values are nested more than {MAX_DEPTH} deep"
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return None


def read_manifest(path: str) -> dict:
    """The manifest of the artifact folder ``path``, parsed strictly and of this runtime's
    format and version (entries not yet checked: ``check_entries``)."""
    mpath = os.path.join(path, MANIFEST)
    if not os.path.isfile(mpath):
        raise ArtifactError(f"{path} is not a flowc artifact: no {MANIFEST}")
    try:
        with open(mpath, "rb") as f:
            data = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as e:
        raise ArtifactError(f"{mpath}: cannot read it: {e.strerror or e}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ArtifactError(f"{mpath} is larger than {MAX_MANIFEST_BYTES} bytes; no flowc "
                            "manifest is")
    try:
        manifest = json.loads(data.decode("utf-8"), object_pairs_hook=_object,
                              parse_constant=_no_constants)
    except RecursionError:
        raise ArtifactError(f"{mpath} is not a flowc artifact manifest: its values are nested "
                            "too deeply to read") from None
    except UnicodeDecodeError as e:
        raise ArtifactError(f"{mpath} is not valid JSON: not UTF-8 text ({e.reason} at byte "
                            f"{e.start})") from None
    except ValueError as e:          # JSONDecodeError, an integer too long, NaN, a repeated key
        raise ArtifactError(f"{mpath} is not valid JSON: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{mpath} is not a flowc artifact manifest")
    version = manifest.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise ArtifactError(f"{mpath} has format version {_short(version)}; this runtime reads "
                            f"version {FORMAT_VERSION}")
    problem = _depth_problem(manifest)
    if problem:
        raise ArtifactError(f"{mpath} is not a flowc artifact manifest: {problem}")
    return manifest


# --- checking the entries --------------------------------------------------------------------
def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Checker:
    """Checks entries, raising an ArtifactError that names the manifest and the entry."""

    def __init__(self, mpath: str):
        self.mpath = mpath

    def fail(self, where: str, problem: str) -> ArtifactError:
        return ArtifactError(f"{self.mpath}: {where}: {problem}")

    def get(self, obj: dict, key: str, where: str, required: bool = True):
        if key not in obj:
            if required:
                raise self.fail(where + key, "missing (every flowc manifest has it)")
            return None
        return obj[key]

    def of_type(self, value, types, what: str, where: str):
        if isinstance(value, bool) and bool not in types:
            raise self.fail(where, f"expected {what}, found a boolean")
        if not isinstance(value, types):
            raise self.fail(where, f"expected {what}, found {_kind(value)}")
        return value

    def text(self, value, where: str) -> str:
        self.of_type(value, (str,), "a string", where)
        if "\x00" in value:
            raise self.fail(where, f"{_short(value)} contains a NUL character")
        return value

    def integer(self, value, lo: int, hi: int, where: str) -> int:
        self.of_type(value, (int,), "an integer", where)
        if not lo <= value <= hi:
            raise self.fail(where, f"{_short(value)} is out of range [{lo}, {hi}]")
        return value

    def items(self, value, where: str) -> list:
        return self.of_type(value, (list,), "a list", where)

    def mapping(self, value, where: str) -> dict:
        return self.of_type(value, (dict,), "an object", where)

    def tensor_spec(self, value, where: str, as_array: bool = False) -> None:
        """A ``TensorSpec``'s JSON; ``as_array``: a feed or fetch, which crosses into numpy."""
        spec = self.mapping(value, where)
        self.text(self.get(spec, "name", where + "."), where + ".name")
        dtype = self.text(self.get(spec, "dtype", where + "."), where + ".dtype")
        try:
            parsed = DType.parse(dtype)
        except ValueError as e:
            raise self.fail(where + ".dtype", str(e)) from None
        if as_array:
            try:
                parsed.np
            except TypeError:
                raise self.fail(where + ".dtype", f"{dtype} has no numpy equivalent, so no "
                                "value of it can be fed or fetched") from None
        shape = spec.get("shape")
        if shape is None:
            return
        self.items(shape, where + ".shape")
        if len(shape) > MAX_RANK:
            raise self.fail(where + ".shape", f"rank {len(shape)} is more than the runtime's "
                            f"{MAX_RANK}")
        for k, dim in enumerate(shape):
            if dim is not None:
                self.integer(dim, 0, MAX_INT64, f"{where}.shape[{k}]")

    def file_name(self, value, files: dict, where: str) -> str:
        problem = plain_file_name_problem(value)
        if problem:
            raise self.fail(where, problem)
        if value not in files:
            raise self.fail(where, f"'{value}' is not one of the manifest's files (only files "
                            "whose hash the manifest records are read)")
        return value


def check_entries(manifest: dict, path: str) -> None:
    """Check every entry the loader uses (types, ranges, file names, indices); raise an
    ArtifactError naming the first bad one."""
    c = _Checker(os.path.join(path, MANIFEST))
    abi = c.integer(c.get(manifest, "abi_version", ""), 0, MAX_INT64, "abi_version")
    if abi != ABI_VERSION:
        raise c.fail("abi_version", f"the artifact was built for runtime ABI {abi}; this "
                     f"runtime speaks {ABI_VERSION}")
    files = c.mapping(c.get(manifest, "files", ""), "files")
    if not files:
        raise c.fail("files", "the manifest lists no files")
    for name, digest in files.items():
        problem = plain_file_name_problem(name)
        if problem:
            raise c.fail("files", problem)
        if not is_sha256_hex(digest):
            raise c.fail(f"files[{name!r}]", f"expected a SHA-256 (64 hex digits), found "
                         f"{_short(digest)}")
    signature = manifest.get(SIGNATURE_FIELD)
    if signature is not None and not is_sha256_hex(signature):
        raise c.fail(SIGNATURE_FIELD, "expected an HMAC-SHA256 (64 hex digits)")
    for key in ("graph", "signature", "compiler"):
        if key in manifest:
            c.text(manifest[key], key)
    if "ir" in manifest:
        c.file_name(manifest["ir"], files, "ir")
    feeds = c.items(c.get(manifest, "feeds", ""), "feeds")
    fetches = c.items(c.get(manifest, "fetches", ""), "fetches")
    for i, spec in enumerate(feeds):
        c.tensor_spec(spec, f"feeds[{i}]", as_array=True)
    names = set()
    for i, spec in enumerate(feeds):
        if spec["name"] in names:
            raise c.fail(f"feeds[{i}].name", f"feed '{spec['name']}' is listed twice")
        names.add(spec["name"])
    for i, spec in enumerate(fetches):
        c.tensor_spec(spec, f"fetches[{i}]", as_array=True)
    if "rendezvous_slots" in manifest:
        c.integer(manifest["rendezvous_slots"], 0, MAX_RENDEZVOUS_SLOTS, "rendezvous_slots")
    devices = c.items(c.get(manifest, "devices", ""), "devices")
    if not devices:
        raise c.fail("devices", "the manifest lists no devices")
    computed_by: List[Optional[int]] = [None] * len(fetches)
    seen_devices = set()
    for i, d in enumerate(devices):
        where = f"devices[{i}]"
        _check_device(c, c.mapping(d, where), where, files, len(feeds), len(fetches))
        if d["device"] in seen_devices:
            raise c.fail(where + ".device", f"device '{d['device']}' is listed twice")
        seen_devices.add(d["device"])
        for k, index in enumerate(d["fetches"]):
            if computed_by[index] is not None:
                raise c.fail(f"{where}.fetches[{k}]", f"fetch {index} is computed by "
                             f"devices[{computed_by[index]}] already")
            computed_by[index] = i
    missing = [i for i, by in enumerate(computed_by) if by is None]
    if missing:
        raise c.fail("fetches", f"fetch {missing[0]} ('{fetches[missing[0]]['name']}') is "
                     "computed by no device")


def _check_device(c: _Checker, d: dict, where: str, files: dict, n_feeds: int,
                  n_fetches: int) -> None:
    c.text(c.get(d, "device", where + "."), where + ".device")
    c.text(c.get(d, "kind", where + "."), where + ".kind")
    c.file_name(c.get(d, "module", where + "."), files, where + ".module")
    for key in DEVICE_FILE_KEYS[1:]:
        if d.get(key) is not None:
            c.file_name(d[key], files, f"{where}.{key}")
    if "arch" in d:
        c.text(d["arch"], where + ".arch")
    for key, count in (("feeds", n_feeds), ("fetches", n_fetches)):
        seen = set()
        for k, index in enumerate(c.items(c.get(d, key, where + "."), f"{where}.{key}")):
            if count == 0:
                raise c.fail(f"{where}.{key}[{k}]", f"the step has no {key}")
            c.integer(index, 0, count - 1, f"{where}.{key}[{k}]")
            if index in seen:
                raise c.fail(f"{where}.{key}[{k}]", f"index {index} is listed twice")
            seen.add(index)
    for k, spec in enumerate(c.items(d.get("variables", []), where + ".variables")):
        c.tensor_spec(spec, f"{where}.variables[{k}]")
    for k, name in enumerate(c.items(d.get("random_streams", []), where + ".random_streams")):
        c.text(name, f"{where}.random_streams[{k}]")
    for k, name in enumerate(c.items(d.get("features", []), where + ".features")):
        c.text(name, f"{where}.features[{k}]")
    for k, blob in enumerate(c.items(d.get("constants", []), where + ".constants")):
        bw = f"{where}.constants[{k}]"
        c.mapping(blob, bw)
        c.file_name(c.get(blob, "file", bw + "."), files, bw + ".file")
        c.integer(c.get(blob, "nbytes", bw + "."), 1, MAX_INT64, bw + ".nbytes")
    for k, q in enumerate(c.items(d.get("queues", []), where + ".queues")):
        qw = f"{where}.queues[{k}]"
        c.mapping(q, qw)
        c.text(c.get(q, "name", qw + "."), qw + ".name")
        c.integer(c.get(q, "components", qw + "."), 1, MAX_QUEUE_COMPONENTS, qw + ".components")
        c.integer(c.get(q, "capacity", qw + "."), -MAX_INT64 - 1, MAX_INT64, qw + ".capacity")
    if "instrumentation" in d:
        inst = c.mapping(d["instrumentation"], where + ".instrumentation")
        for key, value in inst.items():
            c.of_type(value, (bool,), "true or false", f"{where}.instrumentation.{key}")
    if "kernels" in d:
        for k, kernel in enumerate(c.items(d["kernels"], where + ".kernels")):
            _check_kernel(c, kernel, f"{where}.kernels[{k}]")


def _check_kernel(c: _Checker, kernel, where: str) -> None:
    """One row of a ``--profile`` build's kernel table (``runtime/profile.py`` reads it)."""
    c.mapping(kernel, where)
    c.text(c.get(kernel, "node", where + "."), where + ".node")
    c.text(c.get(kernel, "op", where + "."), where + ".op")
    for key in ("location", "forward"):
        if key in kernel:
            c.text(kernel[key], f"{where}.{key}")
    for k, src in enumerate(c.items(kernel.get("fused_from", []), where + ".fused_from")):
        sw = f"{where}.fused_from[{k}]"
        c.mapping(src, sw)
        c.text(c.get(src, "node", sw + "."), sw + ".node")
        for key in ("op", "location"):
            if key in src:
                c.text(src[key], f"{sw}.{key}")
