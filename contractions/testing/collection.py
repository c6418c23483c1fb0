"""pytest wiring for the evidence suites: configuration lookup, one scan per session, and the
parametrisation of the `contractions_*` arguments. The suites themselves are in
`contractions.testing.suites`; every shape they use comes from `contractions.testing.cases`.

Configuration (docs/harness.md): module attributes `CONTRACTIONS_SCAN_PATHS` /
`CONTRACTIONS_TABLE` (relative to the module) win over the ini options
`contractions_scan_paths` / `contractions_table` (relative to the ini file, declared by the
opt-in plugin `contractions.testing.plugin`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .cases import ShapeCase, shape_matrix
from .oracle import runs_by_definition
from .plugin import record_summary
from .scan import (
    CallSite,
    ScanError,
    VocabularyEntry,
    distinct_subscripts,
    iter_python_files,
    scan_tree,
)
from .sharding import ShardingCase, SweepReport, run_sweep, sharding_cases
from .table import IdentifiabilityTable, TableError, load_table

__all__ = [
    "NOT_CONFIGURED",
    "TABLE_UNREADABLE",
    "HarnessConfig",
    "HarnessNotConfiguredWarning",
    "HarnessState",
    "Param",
    "harness_state",
    "pytest_generate_tests",
    "resolve_config",
    "session_state",
    "shape_matrix_or_none",
    "sweep_report",
    "warn_if_unconfigured",
]

NOT_CONFIGURED = (
    "contractions harness not configured: set contractions_scan_paths and contractions_table "
    "in the pytest ini, or CONTRACTIONS_SCAN_PATHS / CONTRACTIONS_TABLE in this test module"
)

#: The id of the one failing `table_has_entry` test when the table cannot be read.
TABLE_UNREADABLE = "table-unreadable"


class HarnessNotConfiguredWarning(pytest.PytestWarning):
    """The project calls `contract` but the harness is not told what to scan."""


# --- configuration and the scan ----------------------------------------------------------


@dataclass(frozen=True)
class HarnessConfig:
    """What to scan and where the table is; `display_root` shortens paths in test ids."""

    scan_paths: tuple[Path, ...]
    table_path: Path
    display_root: Path


def resolve_config(config: pytest.Config, module: ModuleType | None) -> HarnessConfig | None:
    """Module attributes win over the ini options; None when neither is set."""
    root = Path(str(config.rootpath))
    if module is not None and getattr(module, "CONTRACTIONS_SCAN_PATHS", None):
        base = Path(module.__file__ or ".").resolve().parent
        paths = tuple((base / p).resolve() for p in module.CONTRACTIONS_SCAN_PATHS)
        table = getattr(module, "CONTRACTIONS_TABLE", None)
        if not table:
            raise pytest.UsageError(
                f"{module.__name__} sets CONTRACTIONS_SCAN_PATHS but not CONTRACTIONS_TABLE"
            )
        return HarnessConfig(paths, (base / table).resolve(), root)
    try:
        ini_paths = config.getini("contractions_scan_paths")
        ini_table = config.getini("contractions_table")
    except ValueError:  # the plugin is not registered, so the options do not exist
        return None
    if not ini_paths:
        return None
    if not ini_table:
        raise pytest.UsageError("contractions_scan_paths is set but contractions_table is not")
    return HarnessConfig(
        tuple(Path(p).resolve() for p in ini_paths), Path(ini_table[0]).resolve(), root
    )


@dataclass(frozen=True)
class HarnessState:
    """The scan and the table for one configuration (computed once, at collection)."""

    config: HarnessConfig
    vocabulary: dict[str, list[VocabularyEntry]]
    call_sites: tuple[CallSite, ...]
    table: IdentifiabilityTable | None
    table_error: str | None

    def display(self, path: str) -> str:
        try:
            return os.path.relpath(path, self.config.display_root)
        except ValueError:
            return path

    def table_groups(self, subscripts: str) -> tuple[str, ...] | None:
        return None if self.table is None else self.table.supplement(subscripts)

    def literal_sites(self, subscripts: str) -> list[CallSite]:
        """The literal call sites of `subscripts` (whitespace-insensitive)."""
        key = "".join(subscripts.split())
        return [
            s for s in self.call_sites
            if s.subscripts is not None and "".join(s.subscripts.split()) == key
        ]


def harness_state(config: HarnessConfig) -> HarnessState:
    """Scan the configured paths and read the table (uncached; see `session_state`)."""
    try:
        report = scan_tree(config.scan_paths)
        report.raise_for_unreadable()
    except ScanError as exc:
        raise pytest.UsageError(f"contractions harness: {exc}") from exc
    try:
        table, error = load_table(config.table_path), None
    except TableError as exc:
        table, error = None, str(exc)
    return HarnessState(
        config, distinct_subscripts(report.vocabulary), report.call_sites, table, error
    )


# One scan and one sweep per pytest session and configuration (kept on the session's config,
# so a later session in the same process, e.g. under pytester, sees edited files).
_STATES: pytest.StashKey[dict[HarnessConfig, HarnessState]] = pytest.StashKey()
_SWEEPS: pytest.StashKey[dict[HarnessConfig, SweepReport]] = pytest.StashKey()
_WARNED: pytest.StashKey[bool] = pytest.StashKey()


def session_state(pytest_config: pytest.Config, config: HarnessConfig) -> HarnessState:
    states = pytest_config.stash.setdefault(_STATES, {})
    if config not in states:
        states[config] = harness_state(config)
    return states[config]


def shape_matrix_or_none(subscripts: str) -> list[ShapeCase] | None:
    try:
        return shape_matrix(subscripts)
    except (ValueError, KeyError):  # malformed: reported by the test, not at collection
        return None


def sweep_report(pytest_config: pytest.Config, config: HarnessConfig) -> SweepReport:
    """The compiled sharding sweep over every string with a table entry (once per session)."""
    sweeps = pytest_config.stash.setdefault(_SWEEPS, {})
    if config not in sweeps:
        state = session_state(pytest_config, config)
        cases: list[ShardingCase] = []
        for key in state.vocabulary:
            groups = state.table_groups(key)
            if groups is not None and shape_matrix_or_none(key) is not None:
                cases.extend(sharding_cases(key, groups))
        sweeps[config] = run_sweep(cases)
    return sweeps[config]


def warn_if_unconfigured(pytest_config: pytest.Config, *, suites_imported: bool) -> None:
    """Warn (once per session) when code under the rootdir calls `contract` but nothing tells
    the harness what to scan. From the plugin (`suites_imported=False`) a module importing
    `contractions.testing.suites` anywhere under the rootdir counts as configuration (it may
    set the module attributes, and may just not be collected in this run)."""
    if pytest_config.stash.get(_WARNED, False) or pytest_config.stash.get(_STATES, {}):
        return
    pytest_config.stash[_WARNED] = True
    if resolve_config(pytest_config, None) is not None:
        return
    root = Path(str(pytest_config.rootpath))
    try:
        if not suites_imported and any(_mentions_suites(f) for f in iter_python_files([root])):
            return
        report = scan_tree([root])
    except ScanError:
        return
    if not report.call_sites:
        return
    first = report.call_sites[0]
    warnings.warn(
        HarnessNotConfiguredWarning(
            f"contractions harness: {len(report.call_sites)} contract() call site(s) under "
            f"{root} (first: {os.path.relpath(first.path, root)}:{first.line}) are not checked: "
            "set contractions_scan_paths and contractions_table in the pytest ini, or "
            "CONTRACTIONS_SCAN_PATHS / CONTRACTIONS_TABLE in the module importing "
            "contractions.testing.suites (docs/harness.md)"
        ),
        stacklevel=2,
    )


def _mentions_suites(path: Path) -> bool:
    try:
        return "contractions.testing.suites" in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


# --- parametrisation ------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A parameter: the case plus the configuration it came from (ids come separately)."""

    state: HarnessState
    subject: Any
    extra: Any = None


def _skip_all(metafunc: pytest.Metafunc, argname: str, reason: str) -> None:
    metafunc.parametrize(
        argname, [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="none")]
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize the `contractions_*` arguments from the scan of the configured paths."""
    ours = [name for name in metafunc.fixturenames if name in _GENERATORS]
    if not ours:
        return
    config = resolve_config(metafunc.config, metafunc.module)
    if config is None:
        warn_if_unconfigured(metafunc.config, suites_imported=True)
    for argname in ours:
        if config is None:
            _skip_all(metafunc, argname, NOT_CONFIGURED)
            continue
        state = session_state(metafunc.config, config)
        _record_scan_summary(metafunc.config, state)
        params = _GENERATORS[argname](state)
        if isinstance(params, str):
            _skip_all(metafunc, argname, params)
        elif not params:
            _skip_all(metafunc, argname, f"nothing to check for {argname} in the scanned paths")
        else:
            metafunc.parametrize(argname, [pytest.param(p, id=i) for i, p in params])


def _record_scan_summary(config: pytest.Config, state: HarnessState) -> None:
    occurrences = sum(len(v) for v in state.vocabulary.values())
    literal = sum(1 for s in state.call_sites if not s.is_dynamic)
    table = f"{len(state.table)} table entries" if state.table else f"table error: {state.table_error}"
    record_summary(
        config,
        "scan",
        f"{len(state.vocabulary)} grouped strings ({occurrences} occurrences), "
        f"{len(state.call_sites)} call sites ({literal} literal, "
        f"{len(state.call_sites) - literal} dynamic); {table}",
    )


# A generator returns (id, Param) pairs, or a string: the reason every case is skipped.
_Generated = list[tuple[str, Param]] | str

_TABLE_REPORTED = (
    "the identifiability table is unreadable; reported once, by "
    f"test_contractions_table_has_entry[{TABLE_UNREADABLE}]"
)


def _strings(state: HarnessState) -> _Generated:
    return [(key, Param(state, key, occ)) for key, occ in state.vocabulary.items()]


def _strings_needing_entries(state: HarnessState) -> _Generated:
    if state.table is None:
        return [(TABLE_UNREADABLE, Param(state, None))]
    return _strings(state)


def _table_entries(state: HarnessState) -> _Generated:
    if state.table is None:
        return _TABLE_REPORTED
    return [(e.subscripts, Param(state, e)) for e in state.table.entries]


def _supplied_entries(state: HarnessState) -> _Generated:
    """Table entries naming a supplement, with the literal call sites of their string."""
    if state.table is None:
        return _TABLE_REPORTED
    params = []
    for entry in state.table.entries:
        sites = state.literal_sites(entry.subscripts)
        if entry.groups and sites:
            params.append((entry.subscripts, Param(state, entry, tuple(sites))))
    return params


def _oracle_cases(state: HarnessState) -> _Generated:
    params = []
    for key in state.vocabulary:
        matrix = shape_matrix_or_none(key)
        if matrix is None:
            params.append((f"{key}|malformed", Param(state, key, None)))
        else:
            params.extend((f"{key}|{case.name}", Param(state, key, case)) for case in matrix)
    return params


def _call_sites(state: HarnessState) -> _Generated:
    return [
        (f"{state.display(site.path)}:{site.line}", Param(state, site))
        for site in state.call_sites
        if not site.is_dynamic
    ]


def _split_cases(state: HarnessState) -> _Generated:
    return [
        (f"{key}|{''.join(run)}", Param(state, key, run))
        for key in state.vocabulary
        for run in _runs_or_empty(key)
    ]


def _runs_or_empty(subscripts: str) -> tuple[tuple[str, ...], ...]:
    try:
        return runs_by_definition(subscripts)
    except ValueError:  # malformed; the oracle and pin suites report it
        return ()


_GENERATORS: dict[str, Callable[[HarnessState], _Generated]] = {
    "contractions_string": _strings,
    "contractions_entry_string": _strings_needing_entries,
    "contractions_table_entry": _table_entries,
    "contractions_supplied_entry": _supplied_entries,
    "contractions_oracle_case": _oracle_cases,
    "contractions_call_site": _call_sites,
    "contractions_split_case": _split_cases,
    "contractions_sharding_string": _strings,
}

