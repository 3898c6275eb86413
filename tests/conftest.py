import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)


@pytest.fixture
def graph():
    import dsl as fl
    g = fl.Graph()
    with g.as_default():
        yield g


@pytest.fixture(autouse=True)
def _cpu_only(request, monkeypatch):
    """A test marked ``cpu_only`` checks CPU internals (the fetch pool, split compiles, the C
    kernels' own numerics and error order): its sessions see no GPU, also where the process
    has one (a GPU, or FLOWC_CUDA_SIMULATOR=1 set for a whole run of the suite)."""
    if request.node.get_closest_marker("cpu_only") is not None:
        import dsl.session_devices as session_devices
        monkeypatch.setattr(session_devices, "_detected_gpus", lambda: ())
        monkeypatch.delenv("FLOWC_CUDA_SIMULATOR", raising=False)
    yield


@pytest.fixture
def rng():
    import numpy as np
    return np.random.default_rng(1234)


_SUMMARY_LINES = []


@pytest.fixture(scope="session")
def report_summary():
    """``report_summary(line)`` prints ``line`` in pytest's terminal summary (pass rates)."""
    return _SUMMARY_LINES.append


def pytest_terminal_summary(terminalreporter):
    for line in _SUMMARY_LINES:
        terminalreporter.write_line(line)


@pytest.fixture(params=[pytest.param("gpu", marks=pytest.mark.gpu), "simulator"])
def gpu_target(request, monkeypatch, tmp_path_factory):
    """Where a GPU test runs: on this machine's GPU (marked ``gpu``; skipped with the reason
    where pycuda, a GPU or nvcc is missing), and on flowc's CUDA simulator (the generated
    CUDA built by the C++ compiler, its kernels run on the host: every machine), where a
    kernel found writing past a device buffer fails the test."""
    from dsl.session_devices import _detected_gpus
    monkeypatch.delenv("FLOWC_CUDA_SIMULATOR", raising=False)
    if request.param == "gpu":
        from compiler.codegen.cuda_build import find_nvcc
        from runtime.cuda_module import cuda_status
        ok, why = cuda_status()
        if not ok:
            pytest.skip(f"no usable GPU: {why}")
        if find_nvcc() is None:
            pytest.skip("nvcc (the CUDA compiler) is not installed")
    else:
        monkeypatch.setenv("FLOWC_CUDA_SIMULATOR", "1")
        monkeypatch.delenv("FLOWC_CUDA_ARCH", raising=False)
        faults = tmp_path_factory.mktemp("cuda-sim") / "faults.txt"
        monkeypatch.setenv("FLOWC_CUDA_SIMULATOR_FAULTS", str(faults))
    _detected_gpus.cache_clear()
    yield request.param
    _detected_gpus.cache_clear()
    if request.param == "simulator" and faults.exists():
        pytest.fail(f"the CUDA simulator found a kernel writing out of bounds: {faults.read_text()}")
