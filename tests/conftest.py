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
