"""The C run path must build wherever its inputs are here: a broken build would only show as
skipped tests and a step several times slower (an empty step: about 7 us on the cffi path
against 1-2 us on the C one)."""
import os
import sysconfig

import pytest

from runtime import fastcall


@pytest.mark.skipif(os.environ.get("FLOWC_FASTCALL") == "0", reason="FLOWC_FASTCALL=0")
@pytest.mark.skipif(fastcall._compiler() is None, reason="no C compiler")
@pytest.mark.skipif(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")),
                    reason="no Python headers")
def test_the_c_run_path_builds_where_a_compiler_and_the_headers_are():
    assert fastcall.load() is not None, fastcall.build_error
