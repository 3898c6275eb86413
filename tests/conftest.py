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
