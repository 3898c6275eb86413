"""The import floors of docs/internals.md, checked on every import statement of the packages,
function-level ones included: runtime < compiler/ir < compiler/ops < compiler/passes <
compiler/codegen < the rest of compiler < dsl. A module imports its own floor and the floors
below it, never one above; the basement (errors, options, devices, build_cache) is below every
compiler floor and imports none."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASEMENT = ("compiler.errors", "compiler.options", "compiler.devices", "compiler.build_cache")
FLOORS = [("runtime",), BASEMENT, ("compiler.ir",), ("compiler.ops",), ("compiler.passes",),
          ("compiler.codegen",), ("compiler",), ("dsl",)]


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def floor_of(module: str) -> int:
    """The floor of a module: the most specific prefix that names it decides."""
    best, level = -1, None
    for k, prefixes in enumerate(FLOORS):
        for p in prefixes:
            if _under(module, p) and len(p) > best:
                best, level = len(p), k
    return level


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported(path: pathlib.Path, module: str):
    """(line, imported module) for every import in ``path``; ``from a import b`` yields both
    ``a`` and ``a.b`` (``b`` may be a submodule)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"


def upward_imports():
    """One line per import statement that names a module above its own floor."""
    found = {}
    for top in ("runtime", "compiler", "dsl"):
        for path in sorted((ROOT / top).rglob("*.py")):
            module = module_name(path)
            here = floor_of(module)
            for line, target in imported(path, module):
                if target == "compiler":          # the package itself: no floor of its own
                    continue
                there = floor_of(target)
                where = f"{path.relative_to(ROOT)}:{line}"
                if there is not None and there > here and where not in found:
                    found[where] = f"{where}: {module} imports {target}"
    return [found[k] for k in sorted(found)]


def test_no_import_runs_upward_between_floors():
    found = upward_imports()
    assert not found, "imports that run upward:\n" + "\n".join(found)


@pytest.mark.parametrize("module, expected", [
    ("runtime.module", 0), ("compiler.errors", 1), ("compiler.options", 1),
    ("compiler.ir.graph", 2), ("compiler.ops.math", 3), ("compiler.passes.place", 4),
    ("compiler.codegen.emitter", 5), ("compiler.step", 6), ("compiler.cli.commands", 6),
    ("dsl.session", 7)])
def test_floors_are_read_from_module_names(module, expected):
    assert floor_of(module) == expected


def test_the_check_sees_a_function_level_upward_import(tmp_path, monkeypatch):
    pkg = tmp_path / "compiler" / "ops"
    pkg.mkdir(parents=True)
    (pkg / "bad.py").write_text("def f():\n    from compiler.codegen.emitter import x\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert upward_imports() == [
        "compiler/ops/bad.py:2: compiler.ops.bad imports compiler.codegen.emitter"]
