"""Adopting the harness from another project: the plugin, the ini options, the table workflow.

Each test builds a small downstream project with pytester and runs pytest on it, exactly as
docs/harness.md tells a user to set it up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Imported here so pytester's in-process runs find them already loaded (it restores
# sys.modules after each run, and numpy's C core cannot be loaded twice in one process).
import contractions
import contractions.testing.plugin
import contractions.testing.suites  # noqa: F401

pytest_plugins = ["pytester"]

PACKAGE_ROOT = Path(__file__).resolve().parents[1]

PYPROJECT = """
[tool.pytest.ini_options]
contractions_scan_paths = ["src"]
contractions_table = "tests/identifiability_table.txt"
"""

OPS = """\
from contractions import contract

def apply(x, cores):
    return contract("WCa,Caib->WCb", x, cores)
"""

LIFT = """\
import contractions as ct

def lift(zo, za):
    return ct.contract("WCo,WCa->Cao", zo, za, len_W=1)
"""


# The plugin is opt-in: a project names it (here on the command line). The module is already
# imported (above), so pytest cannot assertion-rewrite it: silence that warning.
PLUGIN = ("-p", "contractions.testing.plugin", "-W", "ignore::pytest.PytestAssertRewriteWarning")

EVIDENCE = "from contractions.testing.suites import *\n"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.syspathinsert(PACKAGE_ROOT)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    (pytester.path / "src" / "mypkg").mkdir(parents=True)
    (pytester.path / "src" / "mypkg" / "ops.py").write_text(textwrap.dedent(OPS))
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_evidence.py").write_text(EVIDENCE)
    table(pytester, "WCa,Caib->WCb  -")
    return pytester


def table(pytester: pytest.Pytester, *lines: str) -> None:
    text = "# decided by hand\n" + "\n".join(lines) + "\n"
    (pytester.path / "tests" / "identifiability_table.txt").write_text(text)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*PLUGIN, "-m", "not slow", "-v", *args)


def test_configured_project_gets_the_suites(project: pytest.Pytester) -> None:
    result = run(project)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    assert "HarnessNotConfiguredWarning" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*test_contractions_table_has_entry?WCa,Caib->WCb? PASSED*",
            "*test_contractions_table_pins_solver?WCa,Caib->WCb? PASSED*",
            "*test_contractions_oracle?WCa,Caib->WCb|multi? PASSED*",
            "*test_contractions_call_site?src/mypkg/ops.py:4? PASSED*",
            "*scan: 1 grouped strings (1 occurrences), 1 call sites (1 literal, 0 dynamic)*",
        ]
    )


def test_a_new_string_fails_until_decided_by_hand_then_is_covered(project: pytest.Pytester) -> None:
    (project.path / "src" / "mypkg" / "lift.py").write_text(textwrap.dedent(LIFT))
    result = run(project)
    result.assert_outcomes(failed=1, passed=result.parseoutcomes()["passed"],
                           skipped=result.parseoutcomes()["skipped"])
    result.stdout.fnmatch_lines(
        [
            "*test_contractions_table_has_entry?WCo,WCa->Cao? FAILED*",
            "*grouped string 'WCo,WCa->Cao' (at src/mypkg/lift.py:4) has no entry*",
            "*Decide its entry BY HAND*",
        ]
    )
    assert "test_contractions_oracle[WCo,WCa->Cao|multi] SKIPPED" in result.stdout.str()

    table(project, "WCa,Caib->WCb  -", "WCo,WCa->Cao  len_W")
    result = run(project)
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*test_contractions_table_pins_solver?WCo,WCa->Cao? PASSED*",
            "*test_contractions_oracle?WCo,WCa->Cao|multi? PASSED*",
            "*test_contractions_call_site?src/mypkg/lift.py:4? PASSED*",
        ]
    )


@pytest.mark.parametrize(
    ("entries", "needle"),
    [
        # The table says a supplement is needed, but the string decides itself.
        (["WCa,Caib->WCb  len_W"], "*says 'WCa,Caib->WCb' needs len_W, but identifiability*"),
        # The table says nothing is needed, but the string is underdetermined.
        (["WCa,Caib->WCb  -", "WCo,WCa->Cao  -"], "*says 'WCo,WCa->Cao' needs -, but identifiability*"),
    ],
)
def test_a_wrong_entry_fails_the_pin_in_both_directions(
    project: pytest.Pytester, entries: list[str], needle: str
) -> None:
    (project.path / "src" / "mypkg" / "lift.py").write_text(textwrap.dedent(LIFT))
    table(project, *entries)
    result = run(project, "-k", "pins_solver")
    assert result.parseoutcomes().get("failed", 0) == 1, result.stdout.str()
    result.stdout.fnmatch_lines([needle])


def test_a_call_site_missing_its_supplement_fails(project: pytest.Pytester) -> None:
    (project.path / "src" / "mypkg" / "lift.py").write_text(
        textwrap.dedent(LIFT).replace(", len_W=1", "")
    )
    table(project, "WCa,Caib->WCb  -", "WCo,WCa->Cao  len_W")
    result = run(project, "-k", "call_site and not matches")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*src/mypkg/lift.py:4: contract('WCo,WCa->Cao'*UnderdeterminedError*"])


def test_a_malformed_string_fails_its_tests_without_breaking_collection(
    project: pytest.Pytester,
) -> None:
    (project.path / "src" / "mypkg" / "bad.py").write_text('BAD = "Wa->Wb->W"\n')
    table(project, "WCa,Caib->WCb  -", "Wa->Wb->W  -")
    result = run(project)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 3 and outcomes.get("error", 0) == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*'Wa->Wb->W' is not a valid grouped string*"])
    assert "test_contractions_oracle[Wa->Wb->W|malformed] FAILED" in result.stdout.str()


def test_unconfigured_the_suites_are_inert(pytester: pytest.Pytester) -> None:
    pytester.syspathinsert(PACKAGE_ROOT)
    pytester.makepyfile(test_evidence=EVIDENCE)
    result = run(pytester, "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) == 0
    result.stdout.fnmatch_lines(["*contractions harness not configured*"])


def test_module_attributes_configure_without_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.syspathinsert(PACKAGE_ROOT)
    (pytester.path / "src").mkdir()
    (pytester.path / "src" / "ops.py").write_text(textwrap.dedent(OPS))
    (pytester.path / "table.txt").write_text("WCa,Caib->WCb  -\n")
    pytester.makepyfile(
        test_evidence=EVIDENCE
        + 'CONTRACTIONS_SCAN_PATHS = ["src"]\nCONTRACTIONS_TABLE = "table.txt"\n'
    )
    result = pytester.runpytest("-p", "no:contractions.testing.plugin", "-m", "not slow",
                                "-k", "oracle or has_entry")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes["passed"] >= 7, result.stdout.str()


KEYWORDS = """\
from contractions import contract

def keywords(x, cores, zo, za, p):
    contract("WCa,Caib->WCb", x, cores, precision="highest")
    contract("WCa,Caib->WCb", x, cores, preferred_element_type="no-such-dtype")
    contract("WCa,Caib->WCb", x, cores, precision=p)
    contract("WCo,WCa->Cao", zo, za, len_W=1.0)
"""


def test_the_call_site_suite_passes_other_keywords_as_written(project: pytest.Pytester) -> None:
    (project.path / "src" / "mypkg" / "keywords.py").write_text(KEYWORDS)
    table(project, "WCa,Caib->WCb  -", "WCo,WCa->Cao  len_W")
    result = run(project, "-k", "call_site and not matches", "-rs")
    result.assert_outcomes(passed=2, failed=2, skipped=1)
    text = result.stdout.str()
    assert "test_contractions_call_site[src/mypkg/keywords.py:4] PASSED" in text
    result.stdout.fnmatch_lines(
        [
            "*src/mypkg/keywords.py:5: contract('WCa,Caib->WCb', *preferred_element_type='no-such-dtype') "
            "raised TypeError*",
            "*src/mypkg/keywords.py:7: contract('WCo,WCa->Cao', *len_W=1.0) raised TypeError*",
            "*src/mypkg/keywords.py:6 passes precision with a value that is not a literal*",
        ]
    )


def test_a_missing_table_is_one_failure(project: pytest.Pytester) -> None:
    (project.path / "src" / "mypkg" / "lift.py").write_text(textwrap.dedent(LIFT))
    (project.path / "tests" / "identifiability_table.txt").unlink()
    result = run(project, "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 1, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*test_contractions_table_has_entry?table-unreadable? FAILED*",
            "*cannot read the identifiability table*",
        ]
    )
    assert "reported once, by test_contractions_table_has_entry" in result.stdout.str()


def test_a_table_supplement_no_call_site_passes_is_reported(project: pytest.Pytester) -> None:
    (project.path / "src" / "mypkg" / "lift.py").write_text(textwrap.dedent(LIFT))  # len_W=1
    table(project, "WCa,Caib->WCb  -", "WCo,WCa->Cao  len_C")  # a valid choice, not the code's
    result = run(project)
    result.assert_outcomes(failed=1, passed=result.parseoutcomes()["passed"],
                           skipped=result.parseoutcomes().get("skipped", 0))
    result.stdout.fnmatch_lines(
        [
            "*test_contractions_table_matches_call_sites?WCo,WCa->Cao? FAILED*",
            "*says 'WCo,WCa->Cao' needs len_C, but no call site passes len_C "
            "(src/mypkg/lift.py:4 passes len_W)*",
        ]
    )


@pytest.mark.parametrize("with_suites", [False, True])
def test_call_sites_without_configuration_warn(pytester: pytest.Pytester, with_suites: bool) -> None:
    pytester.syspathinsert(PACKAGE_ROOT)
    (pytester.path / "src").mkdir()
    (pytester.path / "src" / "ops.py").write_text(textwrap.dedent(OPS))
    pytester.makepyfile(test_evidence=EVIDENCE if with_suites else "def test_nothing():\n    pass\n")
    result = run(pytester)
    result.stdout.fnmatch_lines(
        [
            "*HarnessNotConfiguredWarning: contractions harness: 1 contract() call site(s) under *"
            "(first: src/ops.py:4) are not checked*",
        ]
    )
    (pytester.path / "src" / "ops.py").write_text("x = 1\n")  # no call site: nothing to say
    assert "HarnessNotConfiguredWarning" not in run(pytester).stdout.str()


UNCONFIGURED_PROJECT_TEST = """\
import importlib.metadata
import sys

def test_nothing_of_contractions_is_loaded(request):
    assert not [ep for ep in importlib.metadata.entry_points(group="pytest11")
                if ep.value.startswith("contractions")]
    assert "numpy" not in sys.modules and "contractions" not in sys.modules
    assert request.config.pluginmanager.get_plugin("contractions.testing.plugin") is None

def test_named_it_loads(request):
    if "contractions" in sys.modules:
        assert request.config.getini("contractions_scan_paths") == []
"""


def test_the_plugin_is_opt_in_so_other_projects_import_nothing(tmp_path: Path) -> None:
    # A fresh interpreter, as in any project that has the library installed but does not use
    # the harness: pytest must load neither the plugin nor numpy.
    (tmp_path / "test_unconfigured.py").write_text(UNCONFIGURED_PROJECT_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))

    def pytest_run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
        )

    proc = pytest_run("-k", "nothing_of")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    named = pytest_run("-p", "contractions.testing.plugin", "-k", "named")
    assert named.returncode == 0 and "1 passed" in named.stdout, named.stdout + named.stderr


@pytest.mark.slow
def test_the_sharding_sweep_runs_and_reports_its_case_count(project: pytest.Pytester) -> None:
    result = project.runpytest(*PLUGIN, "-m", "slow", "-v")
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*test_contractions_sharding_guard PASSED*",
            "*test_contractions_sharding_sweep?WCa,Caib->WCb? PASSED*",
            (
                "*sharding: sharding sweep: 4 cases over 1 strings on 4 virtual devices, "
                "0 failing; guard detected {'all-gather': 1}*"
            ),
        ]
    )
