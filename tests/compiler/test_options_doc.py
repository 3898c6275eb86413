"""docs/options.md lists every pipeline flag and every FLOWC_* variable the code knows, and the
code reads no FLOWC_* variable the table does not document."""
import os
import re

from compiler.options import ENVIRONMENT, FLAGS, code_tag, setting
from repo_paths import ROOT

import pytest


def _doc() -> str:
    with open(os.path.join(ROOT, "docs", "options.md")) as f:
        return f.read()


def test_every_flag_and_variable_has_a_row():
    doc = _doc()
    missing = [f"--{f.name}" for f in FLAGS if f"| `--{f.name}" not in doc]
    missing += [v.name for v in ENVIRONMENT if f"| `{v.name}` |" not in doc]
    assert not missing, f"docs/options.md lacks rows for {missing}"


def test_the_code_reads_only_documented_variables():
    documented = {v.name for v in ENVIRONMENT}
    read = set()
    for top in ("compiler", "runtime", "dsl", "codegen_templates"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".py", ".j2", ".c", ".h")):
                    with open(os.path.join(dirpath, name), errors="replace") as f:
                        text = f.read()
                    read |= set(re.findall(r"""(?:environ(?:\.get)?\(?\[?|getenv\(|setting\()\s*["'](FLOWC_[A-Z0-9_]+)""", text))
    assert read, "the scan found no reads at all"
    assert read <= documented, f"read but not documented: {sorted(read - documented)}"


def test_only_code_changing_settings_enter_the_cache_key():
    assert code_tag({}) == ""
    assert code_tag({"FLOWC_CC_JOBS": "3", "FLOWC_TOKEN": "x"}) == ""
    assert code_tag({"FLOWC_STREAM_MIN_BYTES": "4096"}) == "FLOWC_STREAM_MIN_BYTES=4096"
    with pytest.raises(KeyError, match="not a documented"):
        setting("FLOWC_NO_SUCH_THING")
