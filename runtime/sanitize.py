"""Sanitized builds of compiled C: ``FLOWC_SANITIZE=address,undefined``.

With ``FLOWC_SANITIZE`` set, every C module the compiler builds (``compiler/codegen/build.py``,
``compiler/codegen/c_library.py``) and the runtime's C extension (``runtime/fastcall.py``) are
compiled with gcc's or clang's AddressSanitizer (``address``: reads and writes outside a buffer,
use after free) and UndefinedBehaviorSanitizer (``undefined``: signed overflow, bad shifts,
misaligned or null pointers, ...), and every report is fatal (``-fno-sanitize-recover=all``):
a kernel that reads past its input stops the process with a report naming the kernel function
(``k<n>_<Op>``) and the line of the generated source, instead of returning garbage. The buffer
pool of ``flowc_rt.h`` poisons the slack of its blocks and the blocks it keeps idle, so a
kernel reading past a pooled tensor is caught too.

The value is a comma list of ``address`` and ``undefined`` (empty: no sanitizer). The names
change the compile flags, so they are part of every cache key; sanitized and plain modules
never mix. This module is on the runtime floor because the runtime's own C extension is built
with the same flags; the runtime reads ``os.environ`` itself (the compiler reads the variable
through ``compiler.options.setting``).

A sanitized module is loaded into a Python that is not sanitized: AddressSanitizer's runtime
library must be the first library of the process (``preload_environment`` gives the variables:
``LD_PRELOAD`` of ``libasan.so``, options that make a report fatal and keep leak checking off,
since Python never frees everything). A process that loads such a module without it would be
stopped by AddressSanitizer itself; ``check_loadable`` says so first, as a typed error.
UBSan alone needs no preload. ``tests/sanitizers.py`` runs tests this way (docs/internals.md).
"""
from __future__ import annotations

import ctypes
import functools
import os
import subprocess
from typing import Dict, Mapping, Optional, Tuple

from runtime.errors import FlowcError

ENV_VAR = "FLOWC_SANITIZE"
SANITIZERS = ("address", "undefined")
# Flags beside -fsanitize=: every report stops the process; frame pointers and line tables
# make the reports' stacks name the kernel and the line of the generated source; -O1 (after
# the build's -O3, so it wins) halves the time gcc takes over an instrumented module, and is
# what the sanitizers' authors advise.
EXTRA_FLAGS = ("-O1", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g")
# What a sanitized process runs with: a report is fatal (abort, so a test run stops at the
# first one), leak checking is off (Python keeps objects alive at exit by design).
ASAN_OPTIONS = "detect_leaks=0:abort_on_error=1:halt_on_error=1"
UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1:abort_on_error=1"


class SanitizerError(FlowcError):
    """``FLOWC_SANITIZE`` names an unknown sanitizer, or a sanitized module cannot be loaded
    into this process (AddressSanitizer's runtime is not preloaded)."""


def parse(value: str) -> Tuple[str, ...]:
    """The sanitizers a ``FLOWC_SANITIZE`` value names, in a canonical order (``()``: none)."""
    names = {part.strip() for part in value.split(",") if part.strip()}
    unknown = sorted(names - set(SANITIZERS))
    if unknown:
        raise SanitizerError(f"{ENV_VAR}={value!r}: unknown sanitizer {', '.join(unknown)} "
                             f"(known: {', '.join(SANITIZERS)}; a comma list)")
    return tuple(s for s in SANITIZERS if s in names)


def from_environ(environ: Optional[Mapping[str, str]] = None) -> Tuple[str, ...]:
    """The sanitizers ``FLOWC_SANITIZE`` names in ``environ`` (default: this process's)."""
    environ = os.environ if environ is None else environ
    return parse(environ.get(ENV_VAR, ""))


def compile_flags(sanitizers: Tuple[str, ...]) -> Tuple[str, ...]:
    """The flags that build C with these sanitizers (for the compile and the link line)."""
    if not sanitizers:
        return ()
    return (f"-fsanitize={','.join(sanitizers)}",) + EXTRA_FLAGS


def asan_runtime_loaded() -> bool:
    """Whether AddressSanitizer's runtime is in this process (preloaded, or a sanitized
    executable)."""
    return hasattr(ctypes.CDLL(None), "__asan_init")


@functools.lru_cache(maxsize=None)
def asan_library(cc: str = "cc") -> str:
    """The path of the C compiler's ``libasan.so`` ('' when it has none)."""
    try:
        out = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    path = out.stdout.strip()
    return path if out.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else ""


def check_loadable(sanitizers: Tuple[str, ...], cc: str = "cc") -> None:
    """Raise SanitizerError when a module built with ``sanitizers`` cannot be loaded here:
    AddressSanitizer must be preloaded (loading one without it stops the process)."""
    if "address" in sanitizers and not asan_runtime_loaded():
        lib = asan_library(cc) or "$(cc -print-file-name=libasan.so)"
        raise SanitizerError(
            f"{ENV_VAR}={','.join(sanitizers)} builds modules with AddressSanitizer, whose runtime "
            f"must be loaded first: run Python with LD_PRELOAD={lib} "
            f"ASAN_OPTIONS={ASAN_OPTIONS} (or python3 tests/sanitizers.py for the tests)")


def preload_environment(sanitizers: Tuple[str, ...] = SANITIZERS, cc: str = "cc",
                        log_prefix: str = "") -> Dict[str, str]:
    """The environment variables a Python process needs to build and load modules with
    ``sanitizers``: ``FLOWC_SANITIZE``, ``LD_PRELOAD`` of AddressSanitizer's runtime, and
    options that make every report fatal. ``log_prefix``: write reports to files
    ``<log_prefix>.<pid>`` instead of stderr (a test harness reads them back)."""
    env = {ENV_VAR: ",".join(sanitizers)}
    asan = ASAN_OPTIONS
    ubsan = UBSAN_OPTIONS
    if log_prefix:
        asan += f":log_path={log_prefix}"
        ubsan += f":log_path={log_prefix}"
    if "address" in sanitizers:
        lib = asan_library(cc)
        if not lib:
            raise SanitizerError(f"the C compiler '{cc}' has no AddressSanitizer runtime "
                                 "(libasan.so); install it (gcc: libasan) or leave 'address' out")
        env["LD_PRELOAD"] = lib
        env["ASAN_OPTIONS"] = asan
    if "undefined" in sanitizers:
        env["UBSAN_OPTIONS"] = ubsan
    return env
