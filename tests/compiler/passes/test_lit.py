"""Runs every lit-style pass test under tests/compiler/passes/lit (format: see lit_runner.py)."""
import os

import pytest

from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph
from lit_runner import LIT_DIR, all_cases, check_case, lit_ops, missing_ops, read_case

CASES = all_cases()


@pytest.fixture(scope="module", autouse=True)
def registered_test_ops():
    with lit_ops():
        yield


def test_there_are_cases_for_every_pass():
    folders = {os.path.basename(os.path.dirname(p)) for p in CASES}
    assert {"fold_constants", "cse", "simplify", "prune", "infer_shapes"} <= folders


@pytest.mark.parametrize("path", CASES, ids=lambda p: os.path.relpath(p, LIT_DIR))
def test_lit(path):
    case = read_case(path)
    missing = missing_ops(case)
    if missing:
        pytest.skip(f"ops not registered yet: {', '.join(missing)}")
    if case.expected is not None:       # expectations are canonical printer output
        canonical = print_graph(parse_graph(case.expected))
        assert canonical == case.expected, f"{path}: the expected text is not printer output"
    problem = check_case(case)
    if problem:
        pytest.fail(problem, pytrace=False)
