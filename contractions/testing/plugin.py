"""pytest plugin: configuration for the evidence suites, and a summary of what they checked.

Opt-in (not a `pytest11` entry point): load it with ``-p contractions.testing.plugin`` or
``pytest_plugins``.  It adds no tests; it declares the ini options ``contractions_scan_paths``
and ``contractions_table`` (relative to the ini file), and warns when loaded unconfigured
while code under the rootdir calls `contract`.  See docs/harness.md.
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
