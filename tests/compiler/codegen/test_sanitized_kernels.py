"""The sanitizer job: ``python3 -m pytest -m sanitize`` (deselected from the plain suite; CI
runs it after the suite, ``.ci/run``).

First, that the set-up catches what it is for: a module built through
``build_shared_object`` under ``FLOWC_SANITIZE`` that reads past a malloc'd buffer, past what
it asked of the buffer pool, or into a pooled block it gave back, or that overflows a signed
int, stops its process with a sanitizer report. Then the kernel tests of ``tests/sanitizers.py``
(``SUITE``: the hostile inputs of every data-indexing kernel and the op tests of those
kernels) run in a child pytest with every compiled kernel, the C library runtime and the
fast-call extension sanitized, and pass with no report.
"""
from __future__ import annotations

import pytest

import sanitizers

pytestmark = pytest.mark.sanitize

_CANARY = r'''
import sys
import cffi
from compiler.codegen.build import build_shared_object

SOURCE = r"""
#include "flowc_rt.h"
#include <limits.h>
int read_past(int n, int at) {
    int *p = (int *)malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) p[i] = i;
    volatile int x = p[at];
    free(p);
    return x;
}
int pool_slack(int n, int at) {            /* the class of 100 bytes holds 128 */
    static flowc_pool pool;
    flowc_pool_init(&pool, 1 << 20);
    char *p = (char *)flowc_pool_alloc(&pool, (size_t)n);
    memset(p, 1, (size_t)n);
    volatile char c = p[at];
    flowc_pool_release(p);
    return c;
}
int pool_idle(int n, int at) {             /* a block read after it went back to the pool */
    static flowc_pool pool;
    flowc_pool_init(&pool, 1 << 20);
    char *p = (char *)flowc_pool_alloc(&pool, (size_t)n);
    memset(p, 1, (size_t)n);
    flowc_pool_release(p);
    volatile char c = p[at];
    return c;
}
int add_overflow(int n, int at) { return n + (INT_MAX - at); }
"""
ffi = cffi.FFI()
ffi.cdef("int read_past(int, int); int pool_slack(int, int); int pool_idle(int, int);"
         "int add_overflow(int, int);")
lib = ffi.dlopen(build_shared_object(SOURCE, name="canary").path)
fn, n, at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print("returned", getattr(lib, fn)(n, at))
'''


@pytest.mark.parametrize("fn, bad, good, report", [
    ("read_past", (100, 100), (100, 99), "AddressSanitizer: heap-buffer-overflow"),
    ("pool_slack", (100, 100), (100, 99), "AddressSanitizer: use-after-poison"),
    ("pool_idle", (100, 0), None, "AddressSanitizer: use-after-poison"),
    ("add_overflow", (1, 0), (0, 0), "runtime error: signed integer overflow")])
def test_a_sanitized_module_that_misbehaves_stops_with_a_report(fn, bad, good, report):
    run = sanitizers.run_python(["-c", _CANARY, fn, *map(str, bad)], timeout=300)
    text = "\n".join(run.reports) + run.output
    assert run.returncode != 0 and not run.clean, run.summary()
    assert report in text and fn in text, run.summary()
    assert "returned" not in run.output
    if good is not None:                    # within bounds, the same function just returns
        ok = sanitizers.run_python(["-c", _CANARY, fn, *map(str, good)], timeout=300)
        assert ok.clean and "returned" in ok.output, ok.summary()


def test_the_kernel_tests_run_clean_under_the_sanitizers():
    run = sanitizers.run_pytest(sanitizers.SUITE)
    assert run.clean, run.summary()
    assert " passed" in run.output, run.summary()
