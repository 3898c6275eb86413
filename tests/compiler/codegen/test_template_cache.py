"""Compiled code templates are kept in the cache folder (jinja2's bytecode cache): a new
process loads them instead of compiling them again, and a damaged entry is compiled again,
never an error, nor is a cache folder deleted under a running process."""
import os
import subprocess
import sys
from repo_paths import ROOT

LOAD = ("from compiler.codegen import templates; "
        "env = templates.environment('c'); "
        "[env.get_template(t) for t in ('elementwise.c.j2', 'matmul.c.j2', 'parallel.c.j2')]")


def _load_in_new_process(cache):
    env = dict(os.environ, FLOWC_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", LOAD], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return sorted((cache / "templates").iterdir())


def test_a_new_process_finds_the_compiled_templates(tmp_path):
    first = _load_in_new_process(tmp_path)
    assert len(first) == 3
    stamps = {p.name: p.stat().st_mtime_ns for p in first}
    second = _load_in_new_process(tmp_path)
    assert {p.name: p.stat().st_mtime_ns for p in second} == stamps     # loaded, not rewritten


def test_a_damaged_entry_is_compiled_again(tmp_path):
    for p in _load_in_new_process(tmp_path):
        p.write_bytes(b"not bytecode")
    again = _load_in_new_process(tmp_path)
    assert all(p.read_bytes() != b"not bytecode" for p in again)


GONE = ("import os, shutil; from compiler.codegen import templates; "
        "env = templates.environment('c'); env.get_template('elementwise.c.j2'); "
        "shutil.rmtree(os.environ['FLOWC_CACHE_DIR']); "
        "print(env.get_template('matmul.c.j2').name)")


def test_a_cache_folder_deleted_under_a_running_process_is_no_error(tmp_path):
    """The process keeps its first cache folder's templates in memory; one it compiles after
    that folder is gone (a benchmark's temporary cache) is not kept, and not an error."""
    env = dict(os.environ, FLOWC_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", GONE], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "matmul.c.j2", out.stderr
