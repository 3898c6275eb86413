"""Where things are, for tests in any folder under tests/: the repository root, the tests
folder (its data/, ext_ops/ and flow_errors/) and the examples."""
import os

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
EXAMPLES = os.path.join(ROOT, "examples")
