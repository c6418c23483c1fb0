"""Stage 2: exact solving, string-level identifiability and co-travelling runs."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import (
    InconsistentError,
    OperandCountError,
    SupplementError,
    UnderdeterminedError,
    co_travelling_runs,
    identifiability,
    solve_lengths,
)

from ._strategies import grouped_problems


# ---- the worked cases of SPEC §2 ---------------------------------------------------
def test_co_travelling_pair_needs_nothing():
    info = identifiability("WKCi,Cio->WKCo")
    assert info.runs == (("W", "K"), ("C",))
    assert not info.needs_supplement
    assert solve_lengths("WKCi,Cio->WKCo", (6, 4)) == {"W": 3, "K": 0, "C": 2}


def test_observable_boundary_needs_either_supplement():
    info = identifiability("WCo,WCa->Cao")
    assert info.undetermined == ("W", "C")
    assert info.candidates == ("W", "C")
    assert info.rank_deficit == 1
    assert solve_lengths("WCo,WCa->Cao", (4, 4), len_W=1) == {"W": 1, "C": 2}
    assert solve_lengths("WCo,WCa->Cao", (4, 4), len_C=1) == {"W": 2, "C": 1}


def test_rank_two_over_three_groups_any_one_completes():
    info = identifiability("WCa,KCaib->WKCib")
    assert set(info.candidates) == {"W", "K", "C"}
    assert solve_lengths("WCa,KCaib->WKCib", (4, 6), len_K=1) == {"W": 1, "C": 2, "K": 1}


def test_determined_without_runs():
    assert not identifiability("Cio,WCo->WCi").needs_supplement
    assert solve_lengths("Cio,WCo->WCi", (4, 4)) == {"C": 2, "W": 1}


def test_supplied_names_make_it_determined():
    assert not identifiability("WCo,WCa->Cao", supplied=["len_W"]).needs_supplement
    assert not identifiability("WCo,WCa->Cao", supplied=["C"]).needs_supplement


def test_deficit_two_lists_a_completion_and_no_single_candidate():
    info = identifiability("XY,Z->YXZ")
    assert info.rank_deficit == 1  # X+Y fixed, Z fixed, but X|Y split observable
    info = identifiability("XYZ->ZYX")
    assert info.rank_deficit == 2
    assert info.candidates == ()
    assert len(info.completion) == 2
    assert not identifiability("XYZ->ZYX", supplied=info.completion).needs_supplement
    with pytest.raises(UnderdeterminedError, match="2 more supplements"):
        solve_lengths("XYZ->ZYX", (3,))


# ---- runs ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "subscripts, runs",
    [
        ("WKCi,Cio->WKCo", (("W", "K"), ("C",))),
        ("WKC,KC->WKC", (("W",), ("K", "C"))),
        ("WKCa,WKCb->WKCab", (("W", "K", "C"),)),
        ("WK,W->WK", (("W",), ("K",))),  # W not followed by K in 'W'
        ("WK,K->K", (("W",), ("K",))),  # K not preceded by W in 'K'
        ("WaK->WK", (("W",), ("K",))),  # a letter between breaks adjacency
        ("WK->KW", (("W",), ("K",))),  # the output counts
    ],
)
def test_runs(subscripts, runs):
    assert co_travelling_runs(subscripts) == runs


def test_pinned_member_of_run_keeps_its_value():
    assert solve_lengths("WKCa,WKCb->WKCab", (6, 6), len_K=2) == {"W": 3, "K": 2, "C": 0}
    assert solve_lengths("WKCa,WKCb->WKCab", (6, 6), len_C=1, len_K=2) == {"W": 2, "K": 2, "C": 1}


# ---- errors ----------------------------------------------------------------------------
def test_underdetermined_message_names_groups_candidates_and_says_string_level():
    with pytest.raises(UnderdeterminedError) as info:
        solve_lengths("WCo,WCa->Cao", (3, 3))
    msg = str(info.value)
    assert "'WCo,WCa->Cao'" in msg
    assert "'W', 'C'" in msg
    assert "len_W" in msg and "len_C" in msg
    assert "string itself, not from these shapes" in msg


def test_underdetermined_is_raised_for_any_ndims_even_degenerate():
    # A zero total would pin both groups to 0 if the solver used non-negativity; it must not.
    for ndims in [(1, 1), (3, 3), (9, 9)]:
        with pytest.raises(UnderdeterminedError):
            solve_lengths("WCo,WCa->Cao", ndims)


def test_inconsistent_names_terms_ndims_and_suggests_operand_order():
    with pytest.raises(InconsistentError) as info:
        solve_lengths("WCa,Caib,WCi->WCb", (4, 5, 5))
    msg = str(info.value)
    assert "'WCa,Caib,WCi->WCb'" in msg
    assert "operand 0, term 'WCa', ndim 4" in msg and "operand 2, term 'WCi', ndim 5" in msg
    assert "operand order" in msg


def test_negative_solution_reported_as_inconsistent():
    with pytest.raises(InconsistentError, match=r"group 'W' would have -1 \(negative\) axes"):
        solve_lengths("WCa,Caib->Wb", (3, 6))


def test_fractional_solution_reported_as_inconsistent():
    with pytest.raises(InconsistentError, match="not a whole number"):
        solve_lengths("XY,YZ,XZ->XYZ", (2, 2, 1))


def test_too_few_axes_for_letters():
    with pytest.raises(InconsistentError, match="operand 1 .*has ndim 2.*at least 3"):
        solve_lengths("Wa,Cabc->W", (2, 2))
    with pytest.raises(InconsistentError, match="exactly 2"):
        solve_lengths("Wa,bc->W", (2, 3))


def test_redundant_supplement_is_checked_not_trusted():
    assert solve_lengths("Cio,WCo->WCi", (4, 4), len_C=2) == {"C": 2, "W": 1}
    with pytest.raises(InconsistentError, match="len_C=1"):
        solve_lengths("Cio,WCo->WCi", (4, 4), len_C=1)


def test_unknown_group_supplement():
    with pytest.raises(SupplementError, match="group 'Q' does not appear") as info:
        solve_lengths("Wa->W", (2,), len_Q=1)
    assert isinstance(info.value, TypeError)


def test_ndim_count_mismatch():
    with pytest.raises(OperandCountError, match="2 input terms but 1"):
        solve_lengths("Wa,Wb->W", (2,))


# ---- properties -----------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(grouped_problems(), st.data())
def test_undetermined_answer_does_not_depend_on_ndims(problem, data):
    """For any two admissible shape choices, solving fails with UnderdeterminedError for
    both or for neither, exactly as the string-level answer says."""
    info = identifiability(problem.subscripts)
    other_shapes = {g: tuple([2] * data.draw(st.integers(0, 3))) for g in problem.group_shapes}
    for shapes in (problem.group_shapes, other_shapes):
        ndims = []
        for term in problem.inputs:
            ndims.append(sum(len(shapes[c]) if c.isupper() else 1 for c in term))
        if info.needs_supplement:
            with pytest.raises(UnderdeterminedError):
                solve_lengths(problem.subscripts, ndims)
        else:
            solved = solve_lengths(problem.subscripts, ndims)
            for run in info.runs:  # only run totals are observable
                assert sum(solved[g] for g in run) == sum(len(shapes[g]) for g in run)


@settings(max_examples=200, deadline=None)
@given(grouped_problems())
def test_the_completion_always_solves_to_the_true_lengths(problem):
    info = identifiability(problem.subscripts)
    ndims = [len(s) for s in problem.operand_shapes()]
    pins = {f"len_{g}": len(problem.group_shapes[g]) for g in info.completion}
    solved = solve_lengths(problem.subscripts, ndims, **pins)
    for run in info.runs:
        assert sum(solved[g] for g in run) == sum(len(problem.group_shapes[g]) for g in run)
    for g in info.completion:
        assert solved[g] == len(problem.group_shapes[g])
    for g in info.candidates:  # every advertised single candidate really completes it
        assert not identifiability(problem.subscripts, supplied=[g]).needs_supplement
