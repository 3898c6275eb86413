"""FLOWC_SANITIZE in a plain (unsanitized) run: the names it takes, the flags they add to
every build and cache key, and the typed errors where a sanitized module could not be
loaded. The sanitized runs themselves are the sanitizer job's
(tests/compiler/codegen/test_sanitized_kernels.py, ``python3 -m pytest -m sanitize``)."""
from __future__ import annotations

import pytest

from compiler.codegen.build import build_shared_object, sanitize_flags
from compiler.errors import BuildError
from compiler.options import ENVIRONMENT_BY_NAME, code_tag
from runtime import fastcall, sanitize

_SOURCE = "int flowc_sanitize_probe(int a) { return a + 1; }\n"


def test_the_names_are_a_comma_list_of_address_and_undefined():
    assert sanitize.parse("") == ()
    assert sanitize.parse(" undefined , address ") == ("address", "undefined")
    assert sanitize.parse("address,address") == ("address",)
    with pytest.raises(sanitize.SanitizerError, match=r"unknown sanitizer memory.*address, "
                                                      r"undefined"):
        sanitize.parse("address,memory")
    flags = sanitize.compile_flags(("address", "undefined"))
    assert flags[0] == "-fsanitize=address,undefined" and "-fno-sanitize-recover=all" in flags
    assert sanitize.compile_flags(()) == ()


def test_the_setting_is_documented_and_changes_artifact_keys(monkeypatch):
    assert ENVIRONMENT_BY_NAME["FLOWC_SANITIZE"].changes_code
    assert code_tag({}) == "" and "FLOWC_SANITIZE=undefined" in code_tag(
        {"FLOWC_SANITIZE": "undefined"})
    monkeypatch.delenv("FLOWC_SANITIZE", raising=False)
    assert sanitize_flags() == ()


def test_an_unknown_sanitizer_is_a_build_error(monkeypatch):
    monkeypatch.setenv("FLOWC_SANITIZE", "thread")
    with pytest.raises(BuildError, match="FLOWC_SANITIZE='thread': unknown sanitizer thread"):
        build_shared_object(_SOURCE, name="probe")


@pytest.mark.skipif(sanitize.asan_runtime_loaded(), reason="AddressSanitizer is preloaded here")
def test_address_without_its_runtime_preloaded_is_refused_before_anything_loads(monkeypatch):
    """Loading an AddressSanitizer module into this process would stop it; the build says
    what to preload instead, and the fast-call extension falls back to cffi with the reason."""
    monkeypatch.setenv("FLOWC_SANITIZE", "address,undefined")
    with pytest.raises(BuildError, match="must be loaded first: run Python with LD_PRELOAD="):
        build_shared_object(_SOURCE, name="probe")
    monkeypatch.setattr(fastcall, "_loaded", [])
    monkeypatch.setattr(fastcall, "build_error", None)
    assert fastcall.load() is None and "LD_PRELOAD=" in fastcall.build_error


def test_undefined_alone_builds_a_module_of_its_own(monkeypatch):
    """UBSan needs no preload; its flags make a cache key of their own."""
    monkeypatch.delenv("FLOWC_SANITIZE", raising=False)
    plain = build_shared_object(_SOURCE, name="probe")
    monkeypatch.setenv("FLOWC_SANITIZE", "undefined")
    checked = build_shared_object(_SOURCE, name="probe")
    assert checked.key != plain.key
    with open(checked.path, "rb") as f:
        assert b"libubsan" in f.read()


def test_the_preload_environment_makes_reports_fatal():
    env = sanitize.preload_environment(("undefined",), log_prefix="/tmp/x/report")
    assert env["FLOWC_SANITIZE"] == "undefined" and "LD_PRELOAD" not in env
    assert "halt_on_error=1" in env["UBSAN_OPTIONS"] and "log_path=/tmp/x/report" in \
        env["UBSAN_OPTIONS"]
    if sanitize.asan_library():
        env = sanitize.preload_environment()
        assert env["LD_PRELOAD"].endswith(".so") and "detect_leaks=0" in env["ASAN_OPTIONS"]
        assert "abort_on_error=1" in env["ASAN_OPTIONS"]
