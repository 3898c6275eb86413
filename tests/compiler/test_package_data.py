"""A non-editable install (``pip install .``, a wheel, the Dockerfile's image) carries only
the packages ``setup.cfg`` finds and the data files its ``[options.package_data]`` globs
match. Checked here against the repository without installing anything: every file of the
packages that is not Python is matched by a glob (the C runtime's sources and headers, the
CUDA simulator's header, the templates, the grammars, the proto), every file the runtime and
the code generator open by path is among them, and every folder of modules is a package the
``find:`` includes name. (The install itself was checked by hand: ``pip install . --target
DIR`` and a compile run from DIR, outside the repository; see docs/distributed.md.)"""
import configparser
import fnmatch
import glob
import os
import subprocess

from repo_paths import ROOT

ROOTS = ("compiler", "runtime", "dsl", "codegen_templates")
NOT_DATA = (".py", ".pyc", ".so", ".o")


def _setup():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    include = cfg.get("options.packages.find", "include").split()
    data = {pkg: [g.strip() for g in value.replace("\n", ",").split(",") if g.strip()]
            for pkg, value in cfg.items("options.package_data")}
    return include, data


def _repo_files():
    """The packages' files, as the repository tracks them (a walk where there is no git)."""
    try:
        r = subprocess.run(["git", "ls-files", "-z", *ROOTS], cwd=ROOT, capture_output=True,
                           timeout=60)
        if r.returncode == 0 and r.stdout:
            return sorted(p for p in r.stdout.decode().split("\0") if p)
    except (OSError, subprocess.TimeoutExpired):
        pass
    out = []
    for top in ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            out += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in filenames]
    return sorted(out)


def _packaged_data():
    """Repository paths of the data files the package_data globs match (setuptools globs
    each package's entries inside that package's folder; the key '' means every package)."""
    include, data = _setup()
    packages = _packages(include)
    matched = set()
    for key, globs in data.items():
        for pkg in (packages if key == "" else [key]):
            folder = os.path.join(ROOT, *pkg.split("."))
            for g in globs:
                matched.update(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(folder, g))
                               if os.path.isfile(p))
    return matched


def _packages(include):
    """The dotted names ``find:`` with these include patterns finds (folders with an
    ``__init__.py`` under the roots)."""
    found = []
    for top in ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            if "__init__.py" in filenames:
                name = os.path.relpath(dirpath, ROOT).replace(os.sep, ".")
                if any(fnmatch.fnmatchcase(name, pat) for pat in include):
                    found.append(name)
    return found


def test_every_data_file_of_the_packages_is_package_data():
    files = [p for p in _repo_files() if not p.endswith(NOT_DATA)]
    assert any(p.endswith(".h") for p in files) and any(p.endswith(".j2") for p in files)
    missing = sorted(set(files) - _packaged_data())
    assert not missing, f"not in setup.cfg's [options.package_data]: {missing}"


def test_the_files_the_runtime_and_codegen_open_are_package_data():
    from compiler.codegen import c_library, cuda_build
    from compiler.codegen.build import RUNTIME_INCLUDE
    from compiler.codegen.templates import TEMPLATE_ROOT
    from compiler.ir import parser as ir_parser
    from dsl.flow import parser as flow_parser
    from runtime import fastcall
    read = [fastcall.SOURCE, ir_parser._GRAMMAR, flow_parser._GRAMMAR]
    read += [os.path.join(RUNTIME_INCLUDE, f) for f in c_library.RUNTIME_SOURCES]
    read += [os.path.join(RUNTIME_INCLUDE, f) for f in os.listdir(RUNTIME_INCLUDE)
             if f.endswith(".h")]                  # module_layout reads every header
    read += glob.glob(os.path.join(cuda_build.SIMULATOR_INCLUDE, "*.h"))   # -I of sim builds
    read += glob.glob(os.path.join(TEMPLATE_ROOT, "**", "*.j2"), recursive=True)
    assert os.path.join(cuda_build.SIMULATOR_INCLUDE, "cuda_runtime.h") in read
    packaged = _packaged_data()
    for path in read:
        assert os.path.isfile(path), path
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(ROOT))
        assert rel in packaged, f"{rel} is read by flowc but not installed"


def test_every_folder_of_modules_is_a_package_find_includes():
    include, _ = _setup()
    packages = set(_packages(include))
    folders = {os.path.dirname(p) for p in _repo_files() if p.endswith(".py")}
    missing = sorted(f for f in folders if f.replace("/", ".") not in packages)
    assert not missing, f"module folders a non-editable install would leave out: {missing}"
