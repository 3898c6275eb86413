"""Signed artifacts: ``write_artifact(..., sign_key=)`` records an HMAC-SHA256 of the manifest;
``load_artifact(path, verify_key=)`` (bytes, or the path of a key file) refuses an artifact
whose signature does not match that key, one that is not signed, and one edited by someone
without the key, even where they rewrote every hash and the manifest's own checksum."""
import hashlib
import json
import os
import shutil

import numpy as np
import pytest

from runtime import ArtifactError, load_artifact
from runtime.artifact import MANIFEST, canonical_json, verify_artifact
from runtime.cuda_module import load_cuda_artifact
from artifact_cases import read_manifest, small_feeds, write_small_artifact

KEY = bytes(range(7, 39))                 # 32 bytes
OTHER_KEY = bytes(range(8, 40))


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    return write_small_artifact(tmp_path_factory.mktemp("signed") / "art", sign_key=KEY)


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "flowc.key"
    path.write_bytes(KEY)
    return path


@pytest.fixture
def art(signed, tmp_path):
    path = tmp_path / "art"
    shutil.copytree(signed, path)
    return path


def rewrite_with_checksum(path, manifest):
    """What someone without the key can do: rewrite the manifest and its own checksum."""
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    manifest = dict(body, manifest_sha256=hashlib.sha256(canonical_json(body).encode()).hexdigest())
    with open(os.path.join(str(path), MANIFEST), "w") as f:
        json.dump(manifest, f)


def refused(path, key, *words):
    with pytest.raises(ArtifactError) as info:
        load_artifact(str(path), verify_key=key)
    msg = str(info.value)
    for word in (str(path),) + words:
        assert word in msg, msg
    return msg


def test_signed_artifact_loads_with_its_key_as_bytes_or_key_file(signed, key_file):
    assert "manifest_hmac_sha256" in read_manifest(signed)
    for key in (KEY, str(key_file), key_file):
        y, _ = load_artifact(signed, verify_key=key).run(small_feeds())
        np.testing.assert_array_equal(y, [[0.0, 1.0, 5.0]])
    assert verify_artifact(signed, verify_key=KEY)["format"] == "flowc-artifact"


def test_a_key_is_optional_where_none_is_asked_for(signed):
    load_artifact(signed)


def test_wrong_key_is_refused(signed):
    refused(signed, OTHER_KEY, "signature", "does not match")


def test_unsigned_artifact_is_refused_when_a_key_is_given(tmp_path):
    plain = write_small_artifact(tmp_path / "plain")
    assert "manifest_hmac_sha256" not in read_manifest(plain)
    refused(plain, KEY, "not signed")


def test_edit_by_someone_without_the_key_is_refused(art):
    manifest = read_manifest(art)
    manifest["fetches"][0]["name"] = "renamed"
    rewrite_with_checksum(art, manifest)
    load_artifact(str(art))                        # the checksum alone does not notice
    refused(art, KEY, "signature", "does not match")


def test_removing_the_signature_is_refused(art):
    manifest = read_manifest(art)
    del manifest["manifest_hmac_sha256"]
    rewrite_with_checksum(art, manifest)
    refused(art, KEY, "not signed")


def test_replaced_file_with_rewritten_hashes_is_refused(art):
    source = art / "cpu_0.c"
    source.write_text(source.read_text() + "\n/* changed */\n")
    manifest = read_manifest(art)
    manifest["files"]["cpu_0.c"] = hashlib.sha256(source.read_bytes()).hexdigest()
    rewrite_with_checksum(art, manifest)
    load_artifact(str(art))                        # every hash matches again
    refused(art, KEY, "signature", "does not match")


@pytest.mark.parametrize("bad", ["short", "missing", "empty", "not-bytes"])
def test_unusable_keys_are_refused(signed, tmp_path, bad):
    key = {"short": b"0123456789",
           "missing": str(tmp_path / "no-such.key"),
           "empty": tmp_path / "empty.key",
           "not-bytes": 12345}[bad]
    if bad == "empty":
        key.write_bytes(b"")
    with pytest.raises(ArtifactError) as info:
        load_artifact(str(signed), verify_key=key)
    msg = str(info.value)
    assert "key" in msg
    if bad == "missing":
        assert "no-such.key" in msg


def test_gpu_loader_checks_the_key_too(signed):
    with pytest.raises(ArtifactError, match="signature"):
        load_cuda_artifact(str(signed), verify_key=OTHER_KEY)
    load_cuda_artifact(str(signed), verify_key=KEY)
