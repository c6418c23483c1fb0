"""The five evidence suites as pytest tests, parametrized from an AST scan (SPEC §6).

Import them into one test module of your project and say what to scan::

    # tests/test_contractions_evidence.py
    from contractions.testing.suites import *  # noqa: F401,F403
    CONTRACTIONS_SCAN_PATHS = ["../src/mypkg"]            # relative to this file
    CONTRACTIONS_TABLE = "identifiability_table.txt"      # relative to this file

or configure `contractions_scan_paths` / `contractions_table` in the pytest ini (the plugin,
loaded automatically when the library is installed, declares them). Unconfigured, every test
here is skipped with a message saying how to configure it.

The suites, each named `test_contractions_*`:
  1. `oracle`: every vocabulary string x a shape matrix vs the definitional loop oracle;
  2. `table_has_entry` (completeness) and `table_pins_solver` (both directions);
  3. `call_site`: each literal call site succeeds with exactly the `len_*` it passes;
  4. `split_invariance` (+ `runs_match_solver`): every split of a co-travelling run is
     bitwise-identical;
  5. `sharding_sweep` + `sharding_guard`: zero forbidden collectives over 4 virtual devices,
     and a deliberate group-fusing flatten is caught. Marked `slow`.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from .cases import (
    ShapeCase,
    call_site_group_shapes,
    random_operands,
    shape_matrix,
    split_cases,
    supplement_kwargs,
)
from .oracle import co_travelling_runs, loop_contract, split_terms
from .plugin import record_summary
from .scan import (
    CallSite,
    ScanError,
    VocabularyEntry,
    distinct_subscripts,
    scan_call_sites,
    scan_vocabulary,
)
from .sharding import ShardingCase, SweepReport, run_sweep, sharding_cases
from .table import IdentifiabilityTable, TableError, load_table

__all__ = [  # noqa: RUF022 - suite order, which is the order pytest runs them in
    "pytest_generate_tests",
    "contractions_sharding_report",
    "test_contractions_table_has_entry",
    "test_contractions_table_pins_solver",
    "test_contractions_oracle",
    "test_contractions_call_site",
    "test_contractions_runs_match_solver",
    "test_contractions_split_invariance",
    "test_contractions_sharding_guard",
    "test_contractions_sharding_sweep",
]

_NOT_CONFIGURED = (
    "contractions harness not configured: set contractions_scan_paths and contractions_table "
    "in the pytest ini, or CONTRACTIONS_SCAN_PATHS / CONTRACTIONS_TABLE in this test module"
)


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


def harness_state(config: HarnessConfig) -> HarnessState:
    """Scan the configured paths and read the table (uncached; see `_state`)."""
    try:
        vocabulary = distinct_subscripts(scan_vocabulary(config.scan_paths))
        sites = scan_call_sites(config.scan_paths)
    except ScanError as exc:
        raise pytest.UsageError(f"contractions harness: {exc}") from exc
    try:
        table, error = load_table(config.table_path), None
    except TableError as exc:
        table, error = None, str(exc)
    return HarnessState(config, vocabulary, sites, table, error)


# One scan and one sweep per pytest session and configuration (kept on the session's config,
# so a later session in the same process, e.g. under pytester, sees edited files).
_STATES: pytest.StashKey[dict[HarnessConfig, HarnessState]] = pytest.StashKey()
_SWEEPS: pytest.StashKey[dict[HarnessConfig, SweepReport]] = pytest.StashKey()


def _state(pytest_config: pytest.Config, config: HarnessConfig) -> HarnessState:
    states = pytest_config.stash.setdefault(_STATES, {})
    if config not in states:
        states[config] = harness_state(config)
    return states[config]


# --- parametrization ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Param:
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
    for argname in ours:
        if config is None:
            _skip_all(metafunc, argname, _NOT_CONFIGURED)
            continue
        state = _state(metafunc.config, config)
        _record_scan_summary(metafunc.config, state)
        params = _GENERATORS[argname](state)
        if not params:
            _skip_all(metafunc, argname, f"nothing to check for {argname} in the scanned paths")
            continue
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


def _strings(state: HarnessState) -> list[tuple[str, _Param]]:
    return [(key, _Param(state, key, occ)) for key, occ in state.vocabulary.items()]


def _table_entries(state: HarnessState) -> list[tuple[str, _Param]]:
    if state.table is None:
        return [("table-unreadable", _Param(state, None))]
    return [(e.subscripts, _Param(state, e)) for e in state.table.entries]


def _shape_matrix_or_none(subscripts: str) -> list[ShapeCase] | None:
    try:
        return shape_matrix(subscripts)
    except (ValueError, KeyError):  # malformed: reported by the test, not at collection
        return None


def _oracle_cases(state: HarnessState) -> list[tuple[str, _Param]]:
    params = []
    for key in state.vocabulary:
        matrix = _shape_matrix_or_none(key)
        if matrix is None:
            params.append((f"{key}|malformed", _Param(state, key, None)))
        else:
            params.extend((f"{key}|{case.name}", _Param(state, key, case)) for case in matrix)
    return params


def _call_sites(state: HarnessState) -> list[tuple[str, _Param]]:
    return [
        (f"{state.display(site.path)}:{site.line}", _Param(state, site))
        for site in state.call_sites
        if not site.is_dynamic
    ]


def _split_cases(state: HarnessState) -> list[tuple[str, _Param]]:
    return [
        (f"{key}|{''.join(run)}", _Param(state, key, run))
        for key in state.vocabulary
        for run in _runs_or_empty(key)
    ]


def _runs_or_empty(subscripts: str) -> tuple[tuple[str, ...], ...]:
    try:
        return co_travelling_runs(subscripts)
    except ValueError:  # malformed; the oracle and pin suites report it
        return ()


_GENERATORS = {
    "contractions_string": _strings,
    "contractions_table_entry": _table_entries,
    "contractions_oracle_case": _oracle_cases,
    "contractions_call_site": _call_sites,
    "contractions_split_case": _split_cases,
    "contractions_sharding_string": _strings,
}


# --- helpers used at run time --------------------------------------------------------------


def _engine() -> ModuleType:
    import contractions

    return contractions


def _expected_shape(subscripts: str, case: ShapeCase) -> tuple[int, ...]:
    shape: list[int] = []
    for char in split_terms(subscripts).output:
        shape.extend(case.group_shapes[char] if char.isupper() else (case.letter_sizes[char],))
    return tuple(shape)


def _parse_or_fail(subscripts: str) -> None:
    """Fail the test cleanly (no traceback) when the library rejects the string itself."""
    engine = _engine()
    try:
        engine.parse(subscripts)
    except engine.ContractionError as exc:
        error = exc
    else:
        return
    pytest.fail(f"{subscripts!r} is not a valid grouped string: {error}", pytrace=False)


def _required_groups(param: _Param, subscripts: str) -> tuple[str, ...]:
    state: HarnessState = param.state
    if state.table is None:
        pytest.fail(f"the identifiability table is unreadable: {state.table_error}")
    groups = state.table_groups(subscripts)
    if groups is None:
        pytest.skip(
            f"{subscripts!r} has no identifiability-table entry yet "
            "(test_contractions_table_has_entry fails until it is decided by hand)"
        )
    return groups


def _call(subscripts: str, operands: Sequence[Any], kwargs: dict[str, int]) -> Any:
    return _engine().contract(subscripts, *operands, **kwargs)


def _try_call(
    subscripts: str, operands: Sequence[Any], kwargs: dict[str, int]
) -> tuple[Any, Exception | None]:
    """(result, None) or (None, the exception): failures are reported outside the except
    block, so pytest shows one clean message instead of a chained traceback."""
    try:
        return _call(subscripts, operands, kwargs), None
    except Exception as exc:  # noqa: BLE001 - any failure is the finding
        return None, exc


def _describe_call(subscripts: str, shapes: Sequence[tuple[int, ...]], kwargs: dict[str, int]) -> str:
    extra = "".join(f", {k}={v}" for k, v in kwargs.items())
    return f"contract({subscripts!r}, <operands of shapes {list(shapes)}>{extra})"


# --- suite 2: the frozen identifiability table ------------------------------------------------


def test_contractions_table_has_entry(contractions_string: _Param) -> None:
    """Completeness: every scanned grouped string has a hand-decided table entry."""
    state: HarnessState = contractions_string.state
    key: str = contractions_string.subject
    if state.table is None:
        pytest.fail(f"the identifiability table is unreadable: {state.table_error}")
    if key not in state.table:
        where = ", ".join(
            f"{state.display(e.path)}:{e.line}" for e in contractions_string.extra[:3]
        )
        pytest.fail(
            f"grouped string {key!r} (at {where}) has no entry in the identifiability table "
            f"{state.config.table_path}.\nDecide its entry BY HAND: read the string; it needs "
            "len_<G> iff some co-travelling run's total is not fixed by the input terms' "
            "equations (sum of group lengths per input term = ndim - #lowercase). Then add "
            f"the line\n    {key}  -\nor\n    {key}  len_<G>\n"
            "The harness never writes entries; the table then pins the solver to your decision.",
            pytrace=False,
        )


def test_contractions_table_pins_solver(contractions_table_entry: _Param) -> None:
    """The table pins the solver both ways, on every shape of the matrix."""
    state: HarnessState = contractions_table_entry.state
    if state.table is None:
        pytest.fail(f"the identifiability table is unreadable: {state.table_error}", pytrace=False)
    entry = contractions_table_entry.subject
    engine = _engine()
    s, groups = entry.subscripts, entry.groups
    where = f"{entry.source}:{entry.line} says {s!r} needs {entry.describe()}"
    _parse_or_fail(s)

    info = engine.identifiability(s)
    assert info.needs_supplement == bool(groups), (
        f"{where}, but identifiability({s!r}).needs_supplement is {info.needs_supplement}"
    )
    if groups:
        completed = engine.identifiability(s, supplied=groups)
        assert not completed.needs_supplement, (
            f"{where}, but identifiability({s!r}, supplied={groups}) still needs a supplement"
        )

    for case in shape_matrix(s):
        shapes = case.shapes(s)
        operands = [np.zeros(shape) for shape in shapes]
        full = supplement_kwargs(groups, case.group_shapes)
        # Every proper subset of the supplement (incl. none) must be refused by the string...
        for size in range(len(groups)):
            for subset in itertools.combinations(groups, size):
                kwargs = supplement_kwargs(subset, case.group_shapes)
                _, exc = _try_call(s, operands, kwargs)
                if isinstance(exc, engine.UnderdeterminedError):
                    continue
                if exc is not None:
                    pytest.fail(
                        f"{where}; shape case {case.name!r}: {_describe_call(s, shapes, kwargs)} "
                        f"should raise UnderdeterminedError, raised {type(exc).__name__}: {exc}",
                        pytrace=False,
                    )
                pytest.fail(
                    f"{where}; shape case {case.name!r}: {_describe_call(s, shapes, kwargs)} "
                    "succeeded, so the solver resolved a string the table calls underdetermined "
                    "(from the shapes? identifiability must depend on the string alone)",
                    pytrace=False,
                )
        # ...and exactly the supplement completes it.
        result, exc = _try_call(s, operands, full)
        if exc is not None:
            pytest.fail(
                f"{where}; shape case {case.name!r}: {_describe_call(s, shapes, full)} raised "
                f"{type(exc).__name__}: {exc}",
                pytrace=False,
            )
        assert tuple(np.shape(result)) == _expected_shape(s, case), (
            f"{where}; shape case {case.name!r}: result shape {np.shape(result)}, "
            f"expected {_expected_shape(s, case)}"
        )


# --- suite 1: the definitional loop oracle ----------------------------------------------------


def test_contractions_oracle(contractions_oracle_case: _Param) -> None:
    """contract equals SPEC §1's loop definition on every shape of the matrix."""
    s: str = contractions_oracle_case.subject
    case: ShapeCase | None = contractions_oracle_case.extra
    _parse_or_fail(s)
    assert case is not None, f"the oracle cannot read {s!r}, but the library accepts it"
    groups = _required_groups(contractions_oracle_case, s)
    operands = random_operands(s, case)
    kwargs = supplement_kwargs(groups, case.group_shapes)
    expected = loop_contract(s, operands, case.group_shapes)
    got = np.asarray(_call(s, operands, kwargs))
    assert got.shape == expected.shape, (
        f"{_describe_call(s, case.shapes(s), kwargs)}: shape {got.shape}, "
        f"loop oracle {expected.shape} (group shapes {case.group_shapes})"
    )
    np.testing.assert_allclose(
        got,
        expected,
        rtol=1e-10,
        atol=1e-12,
        err_msg=f"{_describe_call(s, case.shapes(s), kwargs)} vs the loop oracle "
        f"(group shapes {case.group_shapes})",
    )


# --- suite 3: call-site consistency ------------------------------------------------------------


def test_contractions_call_site(contractions_call_site: _Param) -> None:
    """A literal call site succeeds with exactly the len_* keywords it passes."""
    state: HarnessState = contractions_call_site.state
    site: CallSite = contractions_call_site.subject
    where = f"{state.display(site.path)}:{site.line}"
    if site.splats_kwargs:
        pytest.skip(f"{where} passes **kwargs; its supplements are not visible in the source")
    s = site.subscripts
    assert s is not None
    try:
        terms = split_terms(s)
    except ValueError as error:
        pytest.fail(f"{where}: {s!r} is malformed: {error}", pytrace=False)
    if site.n_operands is not None and site.n_operands != len(terms.inputs):
        pytest.fail(
            f"{where}: passes {site.n_operands} operand(s) but {s!r} has "
            f"{len(terms.inputs)} input term(s)",
            pytrace=False,
        )
    # Non-literal len_* values are chosen (1); literal ones fix that group's axis count.
    kwargs = {name: (1 if value is None else value) for name, value in site.len_keywords}
    pinned = {name[len("len_"):]: value for name, value in kwargs.items()}
    for default_axes in (1, 2):
        group_shapes = call_site_group_shapes(s, pinned, default_axes=default_axes)
        case = ShapeCase(f"call-site-{default_axes}", group_shapes, {c: 2 for c in s if c.islower()})
        try:
            shapes = case.shapes(s)
        except (KeyError, ValueError, TypeError):
            shapes = None
        operands = [np.zeros(shape) for shape in shapes] if shapes is not None else []
        _, exc = _try_call(s, operands, kwargs)
        if exc is not None:
            pytest.fail(
                f"{where}: {_describe_call(s, shapes or [], kwargs)} raised "
                f"{type(exc).__name__}: {exc}",
                pytrace=False,
            )


# --- suite 4: split invariance -------------------------------------------------------------------


def test_contractions_runs_match_solver(contractions_string: _Param) -> None:
    """The solver's co-travelling runs equal SPEC §2's definition read off the string."""
    s: str = contractions_string.subject
    _parse_or_fail(s)
    expected = set(co_travelling_runs(s))
    got = {tuple(run) for run in _engine().identifiability(s).runs if len(run) >= 2}
    assert got == expected, f"identifiability({s!r}).runs gives {sorted(got)}, SPEC §2 gives {sorted(expected)}"


def test_contractions_split_invariance(contractions_split_case: _Param) -> None:
    """Every split of a co-travelling run's total gives bit-identical results."""
    s: str = contractions_split_case.subject
    run: tuple[str, ...] = contractions_split_case.extra
    groups = _required_groups(contractions_split_case, s)
    total = 3 if len(run) == 2 else 2
    group_shapes: dict[str, tuple[int, ...]] = {g: (2,) for g in split_terms(s).groups}
    for member in run:
        group_shapes[member] = ()
    group_shapes[run[0]] = (2, 3, 2)[:total]  # operands only see the run's total
    case = ShapeCase(f"run-{''.join(run)}", group_shapes, {c: (2, 3, 4)[ord(c) % 3] for c in s if c.islower()})
    operands = random_operands(s, case)
    base_kwargs = supplement_kwargs(groups, group_shapes)
    baseline = np.asarray(_call(s, operands, base_kwargs))
    for split in split_cases(run, total):
        kwargs = {k: v for k, v in base_kwargs.items() if k[len("len_"):] not in run}
        kwargs.update({f"len_{m}": n for m, n in zip(run, split)})
        got = np.asarray(_call(s, operands, kwargs))
        assert got.shape == baseline.shape and got.dtype == baseline.dtype, (
            f"{_describe_call(s, case.shapes(s), kwargs)}: {got.shape}/{got.dtype} vs "
            f"{baseline.shape}/{baseline.dtype} without the split"
        )
        assert np.array_equal(got, baseline), (
            f"{_describe_call(s, case.shapes(s), kwargs)} is not bitwise equal to the call "
            f"that leaves the split of run {run} to the solver"
        )


# --- suite 5: the any-axis sharding sweep ---------------------------------------------------------


def _sweep(pytest_config: pytest.Config, config: HarnessConfig) -> SweepReport:
    sweeps = pytest_config.stash.setdefault(_SWEEPS, {})
    if config not in sweeps:
        state = _state(pytest_config, config)
        cases: list[ShardingCase] = []
        for key in state.vocabulary:
            groups = state.table_groups(key)
            if groups is not None and _shape_matrix_or_none(key) is not None:
                cases.extend(sharding_cases(key, groups))
        sweeps[config] = run_sweep(cases)
    return sweeps[config]


@pytest.fixture(scope="module")
def contractions_sharding_report(request: pytest.FixtureRequest) -> SweepReport:
    """One compiled sweep (a subprocess with 4 virtual CPU devices) for the whole vocabulary."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed; the sharding sweep needs it")
    config = resolve_config(request.config, request.module)
    if config is None:
        pytest.skip(_NOT_CONFIGURED)
    report = _sweep(request.config, config)
    record_summary(request.config, "sharding", report.summary())
    print(report.summary())
    return report


@pytest.mark.slow
def test_contractions_sharding_sweep(
    contractions_sharding_string: _Param, contractions_sharding_report: SweepReport
) -> None:
    """Each sub-axis of each group sharded: zero all-gather/all-to-all/collective-permute."""
    s: str = contractions_sharding_string.subject
    _parse_or_fail(s)
    _required_groups(contractions_sharding_string, s)
    mine = {
        case_id: result
        for case_id, result in contractions_sharding_report.results.items()
        if case_id.rsplit(" [", 1)[0] == s
    }
    assert mine, f"no sharding cases were compiled for {s!r}"
    bad = [
        f"  {case_id}: {result.error or result.forbidden}"
        for case_id, result in mine.items()
        if not result.ok
    ]
    assert not bad, (
        f"{s!r}: sharding a group sub-axis (group.sub-axis in brackets) needs data movement "
        "or failed to compile:\n" + "\n".join(bad)
    )


@pytest.mark.slow
def test_contractions_sharding_guard(contractions_sharding_report: SweepReport) -> None:
    """A flatten fusing two groups, sharded on the minor member, must be caught by the counter."""
    guard = contractions_sharding_report.guard
    assert guard.error is None, f"the guard case failed to compile: {guard.error}"
    assert guard.forbidden, (
        "the opcode counter found no forbidden collective in the guard case, so it cannot be "
        f"trusted to find one anywhere (counts: {guard.counts})"
    )
