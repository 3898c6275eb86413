"""Signing an artifact's manifest with a secret key (HMAC-SHA256), and checking the signature.

What each check protects: the SHA-256 of every file and the manifest's own checksum catch
*accidental* damage (a truncated copy, a flipped bit, a half-written folder). They are not
secret: anyone who can edit the folder can recompute them. The signature is an HMAC-SHA256 of
the manifest under a key only its holders have, and the manifest records every file's hash, so
it covers every file the runtime reads: an artifact changed by someone *without the key* is
refused by a loader given the key (``load_artifact(path, verify_key=...)``, ``flowc run
--verify-key``). A key is shared by who signs and who verifies (there is no public half); keep
it out of the artifact folder.

A key is given as bytes, or as the path of a key file whose bytes (all of them, as they are)
are the key; either must be at least ``MIN_KEY_BYTES`` long. Make one with
``head -c 32 /dev/urandom > flowc.key``.
"""
from __future__ import annotations

import hmac
import hashlib
import os
from typing import Union

from runtime.errors import ArtifactError
from runtime.manifest import CHECKSUM_FIELD, SIGNATURE_FIELD, canonical_json

MIN_KEY_BYTES = 16
MAX_KEY_FILE_BYTES = 1 << 20
Key = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]


def load_key(key: Key, what: str = "key") -> bytes:
    """The key's bytes: ``key`` itself (bytes) or the contents of the key file it names.
    ``what`` names it in errors (``--sign-key``, ``verify_key``)."""
    if isinstance(key, (bytes, bytearray, memoryview)):
        data = bytes(key)
        source = f"{what} (bytes)"
    elif isinstance(key, (str, os.PathLike)):
        path = os.fspath(key)
        source = f"{what} {path}"
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_KEY_FILE_BYTES + 1)
        except FileNotFoundError:
            raise ArtifactError(f"{source}: no such key file") from None
        except IsADirectoryError:
            raise ArtifactError(f"{source}: is a folder, not a key file") from None
        except OSError as e:
            raise ArtifactError(f"{source}: cannot read the key file: {e.strerror or e}") from None
        if len(data) > MAX_KEY_FILE_BYTES:
            raise ArtifactError(f"{source}: a key file of more than {MAX_KEY_FILE_BYTES} bytes "
                                "is not a key")
    else:
        raise ArtifactError(f"{what}: expected the key as bytes or the path of a key file, "
                            f"got {type(key).__name__}")
    if len(data) < MIN_KEY_BYTES:
        raise ArtifactError(f"{source}: a key must be at least {MIN_KEY_BYTES} bytes (this one "
                            f"has {len(data)}); make one with `head -c 32 /dev/urandom > FILE`")
    return data


def manifest_signature(manifest: dict, key: bytes) -> str:
    """HMAC-SHA256 (hex) of the manifest without its checksum and signature fields."""
    body = {k: v for k, v in manifest.items() if k not in (CHECKSUM_FIELD, SIGNATURE_FIELD)}
    return hmac.new(key, canonical_json(body).encode(), hashlib.sha256).hexdigest()


def check_signature(manifest: dict, key: bytes, mpath: str) -> None:
    """Refuse a manifest that is not signed, or not signed with ``key``."""
    recorded = manifest.get(SIGNATURE_FIELD)
    if recorded is None:
        raise ArtifactError(f"{mpath}: the artifact is not signed (no {SIGNATURE_FIELD}), and a "
                            "key to verify it was given; sign it with `flowc compile "
                            "--sign-key FILE`")
    if not isinstance(recorded, str) or not hmac.compare_digest(
            recorded.encode("utf-8", "replace"), manifest_signature(manifest, key).encode()):
        raise ArtifactError(f"{mpath}: the manifest's signature does not match the key: the "
                            "artifact was changed after it was signed, or signed with another key")
