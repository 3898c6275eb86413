"""A malformed manifest is an ArtifactError naming the artifact and the entry, never another
exception: missing or mistyped entries, an unknown dtype, an index out of range, JSON nested
too deeply, integers too big for any field, NaN, repeated keys. Most cases rewrite the
manifest's checksum too, so that it is the checks of the entries, not the checksum, that answer."""
import json
import os
import shutil

import pytest

from runtime import ArtifactError, load_artifact
from runtime.artifact import MANIFEST, write_manifest
from artifact_cases import read_manifest, write_small_artifact


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return write_small_artifact(tmp_path_factory.mktemp("manifest") / "good")


@pytest.fixture
def art(built, tmp_path):
    path = tmp_path / "art"
    shutil.copytree(built, path)
    return path


def refused(path, *words):
    with pytest.raises(ArtifactError) as info:
        load_artifact(str(path))
    msg = str(info.value)
    for word in (str(path),) + words:
        assert word in msg, msg
    return msg


def _set(obj, where, value):
    *parents, last = where
    for key in parents:
        obj = obj[key]
    if value is DELETE:
        del obj[last]
    else:
        obj[last] = value


DELETE = object()
HUGE = 10 ** 30

# (the entry to change, its new value, words the error must contain)
EDITS = [
    (("feeds",), DELETE, "feeds"),
    (("fetches",), DELETE, "fetches"),
    (("devices",), DELETE, "devices"),
    (("feeds",), {"name": "x"}, "feeds"),
    (("feeds", 0, "dtype"), "f99", "feeds[0].dtype"),
    (("feeds", 0, "dtype"), 7, "feeds[0].dtype"),
    (("fetches", 0, "dtype"), "resource", "fetches[0].dtype"),
    (("feeds", 1, "dtype"), "resource", "feeds[1].dtype"),
    (("feeds", 0, "name"), None, "feeds[0].name"),
    (("feeds", 0, "shape"), [HUGE, 3], "feeds[0].shape"),
    (("feeds", 0, "shape"), [-1, 3], "feeds[0].shape"),
    (("feeds", 0, "shape"), [1] * 9, "feeds[0].shape"),
    (("fetches", 1, "shape"), "16384", "fetches[1].shape"),
    (("devices", 0), "cpu_0.so", "devices[0]"),
    (("devices", 0, "feeds"), [0, 7], "devices[0].feeds"),
    (("devices", 0, "feeds"), [True, 0], "devices[0].feeds"),
    (("devices", 0, "fetches"), [0], "fetches"),           # fetch 1 computed by no device
    (("devices", 0, "fetches"), [0, 1, 1], "devices[0].fetches"),
    (("devices", 0, "fetches"), [HUGE], "devices[0].fetches"),
    (("devices", 0, "module"), DELETE, "devices[0].module"),
    (("devices", 0, "module"), 42, "devices[0].module"),
    (("devices", 0, "kind"), ["cpu"], "devices[0].kind"),
    (("devices", 0, "variables"), [{"name": "v", "dtype": "f32", "shape": [HUGE]}],
     "devices[0].variables[0].shape"),
    (("devices", 0, "queues"), [{"name": "q", "components": 1, "capacity": HUGE}],
     "devices[0].queues[0].capacity"),
    (("devices", 0, "random_streams"), [1, 2], "devices[0].random_streams[0]"),
    (("devices", 0, "kernels"), [{"node": 3}], "devices[0].kernels[0]"),
    (("devices", 0, "instrumentation"), {"profile": "yes"}, "devices[0].instrumentation"),
    (("rendezvous_slots",), HUGE, "rendezvous_slots"),
    (("files",), [], "files"),
    (("files", "graph.ir"), 5, "files"),
    (("abi_version",), HUGE, "abi_version"),
    (("abi_version",), 3, "runtime ABI 3"),
]


@pytest.mark.parametrize("where,value,word", EDITS,
                         ids=[".".join(map(str, e[0])) + f"={str(e[1])[:12]}" for e in EDITS])
def test_malformed_entries_are_artifact_errors(art, where, value, word):
    manifest = read_manifest(art)
    _set(manifest, where, value)
    write_manifest(str(art), manifest)
    refused(art, word)


def write_text(path, text):
    with open(os.path.join(str(path), MANIFEST), "w") as f:
        f.write(text)


def test_deep_nesting_is_an_artifact_error(art):
    write_text(art, '{"format": "flowc-artifact", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(art, "nested")


def test_nesting_deeper_than_any_manifest_needs_is_refused_even_with_a_checksum(art):
    manifest = read_manifest(art)
    deep = []
    for _ in range(200):
        deep = [deep]
    manifest["extra"] = deep
    write_manifest(str(art), manifest)
    refused(art, "nested")


def test_integer_too_long_to_parse_is_an_artifact_error(art):
    text = (art / MANIFEST).read_text()
    write_text(art, text.replace('"rendezvous_slots": 0', '"rendezvous_slots": ' + "9" * 5000))
    refused(art, MANIFEST)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_json_numbers_are_refused(art, token):
    text = (art / MANIFEST).read_text()
    write_text(art, text.replace('"rendezvous_slots": 0', f'"rendezvous_slots": {token}'))
    refused(art, token)


def test_repeated_keys_are_refused(art):
    text = (art / MANIFEST).read_text()
    write_text(art, text.replace('"rendezvous_slots": 0',
                                 '"rendezvous_slots": 0, "rendezvous_slots": 1'))
    refused(art, "rendezvous_slots", "more than once")


@pytest.mark.parametrize("text", ['[1, 2]', '"flowc"', 'null', '{"format": 3}', '\xff\xfe',
                                  '{"format": "flowc-artifact", "format_version": true}'])
def test_manifests_that_are_not_objects_or_of_no_version_are_refused(art, text):
    with open(art / MANIFEST, "wb") as f:
        f.write(text.encode("latin-1"))
    refused(art, MANIFEST)


def test_a_good_manifest_has_none_of_these_problems(built):
    load_artifact(built)
    with open(os.path.join(built, MANIFEST)) as f:
        assert json.load(f)["format_version"] == 3
