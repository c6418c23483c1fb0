"""numpy's and opt_einsum's own einsum test suites, run against `contract`.

The switch a user makes: numpy's ``test_einsum.py`` with ``np.einsum`` replaced by `contract`,
opt_einsum's test modules with its ``contract``, ``contract_expression`` and ``contract_path``
replaced by this library's (``tests/_upstream.py``, a pytest plugin, does the replacing). Each
suite runs in a subprocess as installed with the library it tests; a test may fail only where
it fails on that library itself, or where this library differs on purpose: every such test is
listed below with the reason, which docs/numpy-compat.md states for users.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: numpy's tests that fail against `contract`, and why.
NUMPY_DIFFERENCES = {
    "test_einsum_views": "a result never aliases an operand (np.einsum returns views)",
}

#: opt_einsum's tests that fail against `contract` (a test's name, or a parameter that fails in
#: every test it parametrizes: matched as a part of the test id), and why.
OPT_EINSUM_DIFFERENCES = {
    "AB,BC->CA": "uppercase letters are groups: 'AB,BC->CA' cannot be sized without len_*",
    "test_large_path": "its symbols past 'z' are uppercase letters, which are groups here",
    "test_contract_expression_checks": "contract_expression(optimize=False) compiles one einsum "
                                       "call rather than refusing; shape errors name the shapes",
    "test_memory_paths": "memory_limit= bounds the whole call (blocks if need be) rather than "
                         "capping intermediates and folding the rest into one einsum",
    "test_optimal_edge_cases": "as test_memory_paths",
    "test_greedy_edge_cases": "as test_memory_paths",
    "test_dp_errors_when_no_contractions_found": "as test_memory_paths: a bound below the "
                                                 "smallest intermediate is honoured with blocks",
    "test_dp_edge_cases_all_singlet_indices": "contract_path reports the path contract runs, "
                                              "after it sums single-operand axes first",
    "test_custom_random_greedy": "a PathOptimizer is asked once per call signature (the schedule "
                                 "is cached), not on every call",
    "test_parallel_random_greedy": "as test_custom_random_greedy",
    "test_bad_path_option": "contract takes no shapes= (contract_path does); an unknown preset "
                            "is an OptionError (a ValueError), not a KeyError",
    "test_sharing_nesting": "opt_einsum.shared_intermediates() caches opt_einsum's own "
                            "intermediates; contract's calls do not take part",
    "test_partial_sharing": "as test_sharing_nesting",
    "test_chain_sharing": "as test_sharing_nesting",
}


def _failures(args: list[str], tmp_path: Path, name: str, plugin: bool) -> tuple[set[str], int]:
    """The ids of the tests that failed or errored, and how many ran."""
    report = tmp_path / f"{name}-{'ours' if plugin else 'theirs'}.xml"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
               "-o", "junit_family=xunit1", *(["-p", "tests._upstream"] if plugin else []), *args]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert report.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    failed, ran = set(), 0
    for case in ET.parse(report).iter("testcase"):
        if case.find("skipped") is not None:
            continue
        ran += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed.add(case.get("name", ""))
    return failed, ran


def _explained(test: str, differences: dict[str, str]) -> bool:
    return any(key in test for key in differences)


@pytest.mark.slow  # numpy's suite runs in seconds, opt_einsum's in about half a minute, twice
def test_numpys_einsum_suite_passes_against_contract(tmp_path: Path) -> None:
    if importlib.util.find_spec("numpy._core.tests.test_einsum") is None:
        pytest.skip("this numpy does not ship its tests")
    args = ["--pyargs", "numpy._core.tests.test_einsum"]
    ours, ran = _failures(args, tmp_path, "numpy", plugin=True)
    theirs, _ = _failures(args, tmp_path, "numpy", plugin=False)
    assert ran > 50
    unexplained = {t for t in ours - theirs if not _explained(t, NUMPY_DIFFERENCES)}
    assert not unexplained, sorted(unexplained)
    # each listed difference is real: the list never outlives the difference it names
    assert {k for k in NUMPY_DIFFERENCES if not any(_explained(t, {k: ""}) for t in ours)} == set()


@pytest.mark.slow
def test_opt_einsums_suites_pass_against_contract(tmp_path: Path) -> None:
    if importlib.util.find_spec("opt_einsum.tests") is None:
        pytest.skip("this opt_einsum does not ship its tests")
    args = ["--pyargs", "opt_einsum.tests"]
    ours, ran = _failures(args, tmp_path, "opt_einsum", plugin=True)
    theirs, _ = _failures(args, tmp_path, "opt_einsum", plugin=False)
    assert ran > 5000
    unexplained = {t for t in ours - theirs if not _explained(t, OPT_EINSUM_DIFFERENCES)}
    assert not unexplained, sorted(unexplained)
    stale = {k for k in OPT_EINSUM_DIFFERENCES if not any(_explained(t, {k: ""}) for t in ours)}
    assert not stale, f"listed differences that no longer fail: {sorted(stale)}"
