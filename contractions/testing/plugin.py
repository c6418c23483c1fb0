"""pytest plugin: configuration for the evidence suites, and a summary of what they checked.

Opt-in (it is not a `pytest11` entry point, so installing the library loads nothing into
other projects' pytest runs). Load it from the rootdir's `conftest.py` or the ini::

    # conftest.py (at the rootdir)
    pytest_plugins = ["contractions.testing.plugin"]

    # or pyproject.toml
    [tool.pytest.ini_options]
    addopts = "-p contractions.testing.plugin"

By itself it adds no tests: it declares where to scan and where the identifiability table
lives, and a project imports the suites into one test module::

    # pyproject.toml
    [tool.pytest.ini_options]
    contractions_scan_paths = ["src/mypkg", "examples"]
    contractions_table = "tests/identifiability_table.txt"

    # tests/test_contractions_evidence.py
    from contractions.testing.suites import *  # noqa: F401,F403

Paths in the ini file are relative to the ini file's directory. A test module may instead set
`CONTRACTIONS_SCAN_PATHS` / `CONTRACTIONS_TABLE` (relative to the module's own directory),
which also works without this plugin. Loaded but unconfigured, while code under the rootdir
calls `contract`, it warns. See docs/harness.md.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["SUMMARY_KEY", "record_summary"]

#: Where the suites leave one-line summaries (case counts) for the terminal report.
SUMMARY_KEY: pytest.StashKey[dict[str, str]] = pytest.StashKey()


def record_summary(config: pytest.Config, topic: str, line: str) -> None:
    """Store (or replace) a summary line shown at the end of the run."""
    config.stash.setdefault(SUMMARY_KEY, {})[topic] = line


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "contractions_scan_paths",
        type="paths",
        help="contractions harness: source files/directories to AST-scan for grouped strings "
        "and contract(...) call sites (relative to the ini file)",
    )
    parser.addini(
        "contractions_table",
        type="paths",
        help="contractions harness: the hand-decided identifiability table file",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: long-running evidence (the compiled sharding sweep)"
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    from .collection import warn_if_unconfigured

    warn_if_unconfigured(session.config, suites_imported=False)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    lines = config.stash.get(SUMMARY_KEY, {})
    if lines:
        terminalreporter.write_sep("-", "contractions evidence harness")
        for topic, line in lines.items():
            terminalreporter.write_line(f"{topic}: {line}")
