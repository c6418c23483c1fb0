"""The evidence suites as pytest tests, parametrized from an AST scan (docs/harness.md).

Import them into one test module (``from contractions.testing.suites import *``) and set
`CONTRACTIONS_SCAN_PATHS` / `CONTRACTIONS_TABLE` there, or the plugin's ini options;
unconfigured, every test is skipped saying how to configure it.  The wiring is
`contractions.testing.collection`; the shapes come from `contractions.testing.cases`.  The
suites: `oracle`; `table_has_entry`, `table_pins_solver`, `table_matches_call_sites`;
`call_site`; `split_invariance` (+ `runs_match_solver`); `sharding_sweep` + `sharding_guard`
(marked `slow`).
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from contractions import ContractionError, UnderdeterminedError, contract, identifiability, parse

from .cases import (
    ShapeCase,
    call_site_cases,
    random_operands,
    shape_matrix,
    split_case,
    split_cases,
    supplement_kwargs,
)
from .collection import (
    NOT_CONFIGURED,
    HarnessState,
    Param,
    pytest_generate_tests,
    resolve_config,
    sweep_report,
)
from .oracle import loop_contract, runs_by_definition, split_terms
from .plugin import record_summary
from .scan import CallSite
from .sharding import SweepReport

__all__ = [  # noqa: RUF022 - suite order, which is the order pytest runs them in
    "pytest_generate_tests",
    "contractions_sharding_report",
    "test_contractions_table_has_entry",
    "test_contractions_table_pins_solver",
    "test_contractions_table_matches_call_sites",
    "test_contractions_oracle",
    "test_contractions_call_site",
    "test_contractions_runs_match_solver",
    "test_contractions_split_invariance",
    "test_contractions_sharding_guard",
    "test_contractions_sharding_sweep",
]


# --- helpers used at run time --------------------------------------------------------------


def _parse_or_fail(subscripts: str) -> None:
    """Fail the test cleanly (no traceback) when the library rejects the string itself."""
    try:
        parse(subscripts)
    except ContractionError as exc:
        error = exc
    else:
        return
    pytest.fail(f"{subscripts!r} is not a valid grouped string: {error}", pytrace=False)


def _required_groups(param: Param, subscripts: str) -> tuple[str, ...]:
    state: HarnessState = param.state
    if state.table is None:
        pytest.skip(
            "the identifiability table is unreadable; reported once, by "
            "test_contractions_table_has_entry"
        )
    groups = state.table_groups(subscripts)
    if groups is None:
        pytest.skip(
            f"{subscripts!r} has no identifiability-table entry yet "
            "(test_contractions_table_has_entry fails until it is decided by hand)"
        )
    return groups


def _try_call(
    subscripts: str, operands: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[Any, Exception | None]:
    """(result, None) or (None, the exception): failures are reported outside the except
    block, so pytest shows one clean message instead of a chained traceback."""
    try:
        return contract(subscripts, *operands, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - any failure is the finding
        return None, exc


def _describe_call(subscripts: str, shapes: Sequence[tuple[int, ...]], kwargs: dict[str, Any]) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    return f"contract({subscripts!r}, <operands of shapes {list(shapes)}>{extra})"


# --- suite 2: the frozen identifiability table ------------------------------------------------


def test_contractions_table_has_entry(contractions_entry_string: Param) -> None:
    """Completeness: every scanned grouped string has a hand-decided table entry."""
    state: HarnessState = contractions_entry_string.state
    if state.table is None:
        pytest.fail(f"the identifiability table is unreadable: {state.table_error}", pytrace=False)
    key: str = contractions_entry_string.subject
    if key not in state.table:
        where = ", ".join(
            f"{state.display(e.path)}:{e.line}" for e in contractions_entry_string.extra[:3]
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


def test_contractions_table_pins_solver(contractions_table_entry: Param) -> None:
    """The table pins the solver both ways, on every shape of the matrix."""
    entry = contractions_table_entry.subject
    s, groups = entry.subscripts, entry.groups
    where = f"{entry.source}:{entry.line} says {s!r} needs {entry.describe()}"
    _parse_or_fail(s)

    info = identifiability(s)
    assert info.needs_supplement == bool(groups), (
        f"{where}, but identifiability({s!r}).needs_supplement is {info.needs_supplement}"
    )
    if groups:
        completed = identifiability(s, supplied=groups)
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
                if isinstance(exc, UnderdeterminedError):
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
        assert tuple(np.shape(result)) == case.output_shape(s), (
            f"{where}; shape case {case.name!r}: result shape {np.shape(result)}, "
            f"expected {case.output_shape(s)}"
        )


def test_contractions_table_matches_call_sites(contractions_supplied_entry: Param) -> None:
    """The supplement a table entry names is one the code passes at some call site."""
    state: HarnessState = contractions_supplied_entry.state
    entry = contractions_supplied_entry.subject
    sites: tuple[CallSite, ...] = contractions_supplied_entry.extra
    passed = {name for site in sites for name, _ in site.len_keywords}
    missing = [keyword for keyword in entry.keywords if keyword not in passed]
    if not missing:
        return
    if any(site.splats_kwargs for site in sites):
        pytest.skip(
            f"no call site of {entry.subscripts!r} passes {', '.join(missing)} visibly, but one "
            "passes **kwargs, which may carry it"
        )
    seen = "; ".join(
        f"{state.display(site.path)}:{site.line} passes "
        + (", ".join(name for name, _ in site.len_keywords) or "no len_*")
        for site in sites
    )
    pytest.fail(
        f"{entry.source}:{entry.line} says {entry.subscripts!r} needs {entry.describe()}, but no "
        f"call site passes {', '.join(missing)} ({seen}). The entry names the supplement the "
        "code passes: correct the entry (by hand) or the call sites.",
        pytrace=False,
    )


# --- suite 1: the definitional loop oracle ----------------------------------------------------


def test_contractions_oracle(contractions_oracle_case: Param) -> None:
    """contract equals the loop definition of the dialect on every shape of the matrix."""
    s: str = contractions_oracle_case.subject
    case: ShapeCase | None = contractions_oracle_case.extra
    _parse_or_fail(s)
    assert case is not None, f"the oracle cannot read {s!r}, but the library accepts it"
    groups = _required_groups(contractions_oracle_case, s)
    operands = random_operands(s, case)
    kwargs = supplement_kwargs(groups, case.group_shapes)
    expected = loop_contract(s, operands, case.group_shapes)
    got = np.asarray(contract(s, *operands, **kwargs))
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


def test_contractions_call_site(contractions_call_site: Param) -> None:
    """A literal call site succeeds with exactly the keywords it passes, as written."""
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
    literals = site.literals
    unwritten = [name for name in site.other_keywords if name not in literals]
    if unwritten:
        pytest.skip(
            f"{where} passes {', '.join(unwritten)} with a value that is not a literal, so the "
            "call cannot be reproduced from the source"
        )
    # Keywords pass as written; a len_* whose value is not a literal gets a chosen 1. Only
    # a non-negative int literal fixes its group's axis count (anything else must fail).
    kwargs: dict[str, Any] = {name: literals.get(name, 1) for name, _ in site.len_keywords}
    kwargs.update((name, literals[name]) for name in site.other_keywords)
    pinned = {
        name[len("len_"):]: value
        for name, value in kwargs.items()
        if name.startswith("len_") and type(value) is int and value >= 0
    }
    for case in call_site_cases(s, pinned):
        try:
            shapes = case.shapes(s)
        except (KeyError, ValueError, TypeError):
            shapes = []
        _, exc = _try_call(s, [np.zeros(shape) for shape in shapes], kwargs)
        if exc is not None:
            pytest.fail(
                f"{where}: {_describe_call(s, shapes, kwargs)} raised {type(exc).__name__}: {exc}",
                pytrace=False,
            )


# --- suite 4: split invariance -------------------------------------------------------------------


def test_contractions_runs_match_solver(contractions_string: Param) -> None:
    """The solver's co-travelling runs equal the definition read off the string."""
    s: str = contractions_string.subject
    _parse_or_fail(s)
    expected = set(runs_by_definition(s))
    got = {tuple(run) for run in identifiability(s).runs if len(run) >= 2}
    assert got == expected, (
        f"identifiability({s!r}).runs gives {sorted(got)}, the definition gives {sorted(expected)}"
    )


def test_contractions_split_invariance(contractions_split_case: Param) -> None:
    """Every split of a co-travelling run's total gives bit-identical results."""
    s: str = contractions_split_case.subject
    run: tuple[str, ...] = contractions_split_case.extra
    groups = _required_groups(contractions_split_case, s)
    case, total = split_case(s, run)
    operands = random_operands(s, case)
    base_kwargs = supplement_kwargs(groups, case.group_shapes)
    baseline = np.asarray(contract(s, *operands, **base_kwargs))
    for split in split_cases(run, total):
        kwargs = {k: v for k, v in base_kwargs.items() if k[len("len_"):] not in run}
        kwargs.update({f"len_{m}": n for m, n in zip(run, split)})
        got = np.asarray(contract(s, *operands, **kwargs))
        assert got.shape == baseline.shape and got.dtype == baseline.dtype, (
            f"{_describe_call(s, case.shapes(s), kwargs)}: {got.shape}/{got.dtype} vs "
            f"{baseline.shape}/{baseline.dtype} without the split"
        )
        assert np.array_equal(got, baseline), (
            f"{_describe_call(s, case.shapes(s), kwargs)} is not bitwise equal to the call "
            f"that leaves the split of run {run} to the solver"
        )


# --- suite 5: the any-axis sharding sweep ---------------------------------------------------------


@pytest.fixture(scope="module")
def contractions_sharding_report(request: pytest.FixtureRequest) -> SweepReport:
    """One compiled sweep (a subprocess with 4 virtual CPU devices) for the whole vocabulary."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed; the sharding sweep needs it")
    config = resolve_config(request.config, request.module)
    if config is None:
        pytest.skip(NOT_CONFIGURED)
    report = sweep_report(request.config, config)
    record_summary(request.config, "sharding", report.summary())
    print(report.summary())
    return report


@pytest.mark.slow
def test_contractions_sharding_sweep(
    contractions_sharding_string: Param, contractions_sharding_report: SweepReport
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
