"""Stage 2: exact solving, string-level identifiability and co-travelling runs."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from contractions import (
    ContractionError,
    InconsistentError,
    OperandCountError,
    SupplementError,
    UnderdeterminedError,
    co_travelling_runs,
    contract,
    identifiability,
    solve_lengths,
)
from contractions import solver as _solver
from contractions.solver import _packed_null_space, _reduced_rows

from ._strategies import grouped_problems


# ---- the worked cases of docs/solver.md ----------------------------------------------
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
    assert info.rank_deficit == 2 and info.minimum_pins == 2
    assert info.candidates == ()
    assert info.smallest_sets == (("X", "Y"), ("X", "Z"), ("Y", "Z"))
    assert not info.more_smallest_sets and info.completion == ("X", "Y")
    assert not identifiability("XYZ->ZYX", supplied=info.completion).needs_supplement
    assert info.describe() == "needs 2 supplements: {len_X, len_Y}, {len_X, len_Z} or {len_Y, len_Z}"
    with pytest.raises(UnderdeterminedError, match=r"Pass 2 supplements together \(each "
                       r"len_<G>=<number of axes>\): \{len_X, len_Y\}, \{len_X, len_Z\} or "
                       r"\{len_Y, len_Z\}\."):
        solve_lengths("XYZ->ZYX", (3,))


def test_open_runs_need_all_their_members_pinned():
    # One equation W + K + C + D = ndim - 1 over the runs (W, K) and (C, D): the rank deficit
    # is 1, but a single pin leaves its run's total open, so two pins are needed.
    info = identifiability("WKCDa->WKa")
    assert info.runs == (("W", "K"), ("C", "D"))
    assert info.rank_deficit == 1
    assert info.minimum_pins == 2 and info.candidates == ()
    assert info.smallest_sets == (("W", "K"), ("C", "D")) and not info.more_smallest_sets
    assert info.describe() == "needs 2 supplements: {len_W, len_K} or {len_C, len_D}"
    for single in "WKCD":
        assert identifiability("WKCDa->WKa", supplied=[single]).needs_supplement
    with pytest.raises(UnderdeterminedError) as err:
        contract("WKCDa->WKa", np.ones((2, 3, 4, 5, 6)))
    msg = str(err.value)
    assert "'WKCDa->WKa'" in msg and "'W', 'K', 'C', 'D'" in msg
    assert "Pass 2 supplements together (each len_<G>=<number of axes>): {len_W, len_K} or " \
           "{len_C, len_D}." in msg
    got = contract("WKCDa->WKa", np.ones((2, 3, 4, 5, 6)), len_C=1, len_D=1)
    assert got.shape == (2, 3, 6) and np.all(got == 20.0)   # W + K = 2 axes, C + D = 2 summed


def test_supplied_members_are_not_undetermined_and_more_is_said():
    info = identifiability("WKCDa->WKa", supplied=["W"])
    assert info.undetermined == ("K", "C", "D")
    assert info.minimum_pins == 1 and info.candidates == ("K",)
    info = identifiability("WKCDEa->WKa", supplied=["C"])   # runs (W, K), (C, D, E)
    assert info.smallest_sets == (("W", "K"), ("D", "E"))
    assert info.describe() == "needs 2 more supplements: {len_W, len_K} or {len_D, len_E}"
    with pytest.raises(UnderdeterminedError, match=r"\(with len_C given\).*Pass 2 more supplements"):
        solve_lengths("WKCDEa->WKa", (6,), len_C=1)


def test_a_long_list_of_smallest_sets_is_cut_and_says_so():
    info = identifiability("WKa,VUb->WVKUab")   # W + K and V + U: one pin from each pair
    assert info.minimum_pins == 2
    assert info.smallest_sets == (("W", "V"), ("W", "U"), ("K", "V")) and info.more_smallest_sets
    assert info.describe() == "needs 2 supplements, e.g. {len_W, len_V}, {len_W, len_U} or {len_K, len_V}"


def test_a_total_sum_is_underdetermined_and_the_message_claims_nothing_false():
    # 'GoC->' sums everything, so every split of G + C gives the same number; the rule is
    # still the syntactic one (G, C are no run), and the message must not say the string
    # observes the split.
    info = identifiability("GoC->")
    assert info.needs_supplement and info.candidates == ("G", "C")
    x = np.arange(24.0).reshape(2, 3, 4)
    with pytest.raises(UnderdeterminedError) as err:
        contract("GoC->", x)
    msg = str(err.value)
    assert "observe" not in msg
    assert "the input terms fix only sums of these lengths, and the solver leaves a split open " \
           "only inside a co-travelling run, where every split expands to the same einsum." in msg
    assert "Pass one of len_G=<number of axes>, len_C=<number of axes>." in msg
    assert contract("GoC->", x, len_G=1) == contract("GoC->", x, len_C=0) == x.sum()


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


@settings(max_examples=300, deadline=None)
@given(grouped_problems(), st.data())
def test_substitution_and_elimination_agree(problem, data):
    """The single-unknown substitution (`solver._peeled`, tried first) and the integer
    elimination over run totals (`solver._run_totals_solved`, tried next) give what the exact
    elimination gives, solution or error, on consistent and inconsistent ndims alike."""
    info = identifiability(problem.subscripts)
    pins = {f"len_{g}": len(problem.group_shapes[g]) for g in info.completion}
    ndims = [len(s) + data.draw(st.sampled_from([0, 0, 0, 1, -1])) for s in problem.operand_shapes()]

    def solved():
        _solver.solve.cache_clear()
        try:
            return solve_lengths(problem.subscripts, [max(n, 0) for n in ndims], **pins)
        except ContractionError as exc:
            return type(exc), str(exc)

    fast = solved()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_solver, "_peeled", lambda equations, n_groups: None)
        by_run_totals = solved()   # (the integer elimination over run totals, where it answers)
        patch.setattr(_solver, "_run_totals_solved", lambda equations, runs: None)
        assert solved() == fast == by_run_totals


# ---- the advice against brute force ------------------------------------------------------
MAX_AXES = 3  # every group takes 0..3 axes in the enumeration


def canonical_expansion(inputs, output, lengths):
    """The einsum for these group lengths: letters keep their names, group axes are numbered
    in order of first appearance (inputs, then output).

    Written here, sharing nothing with `contractions.expand`.  Two assignments give the same
    form exactly when only the boundaries inside co-travelling runs moved.  (Forms that differ
    can still compute the same number, as in the total sum 'WaK->': the solver's rule, and
    its messages, do not claim otherwise.)"""
    number: dict = {}

    def term(text):
        out: list = []
        for ch in text:
            if ch.islower():
                out.append(ch)
            else:
                out.extend(number.setdefault((ch, k), len(number)) for k in range(lengths[ch]))
        return tuple(out)

    return tuple(term(t) for t in inputs), term(output)


def brute_force(inputs, output, groups):
    """Every assignment of 0..MAX_AXES axes per group: (ndims, lengths, canonical einsum)."""
    rows = []
    for combo in itertools.product(range(MAX_AXES + 1), repeat=len(groups)):
        lengths = dict(zip(groups, combo))
        ndims = tuple(sum(lengths[c] if c.isupper() else 1 for c in t) for t in inputs)
        rows.append((ndims, lengths, canonical_expansion(inputs, output, lengths)))
    return rows


def determines(rows, pinned):
    """True when the ndims plus the values of the ``pinned`` groups always fix the einsum."""
    seen: dict = {}
    for ndims, lengths, einsum in rows:
        key = (ndims, tuple(lengths[g] for g in pinned))
        if seen.setdefault(key, einsum) != einsum:
            return False
    return True


@st.composite
def small_strings(draw):
    """Strings over groups W, K, C, D and letters a, b; blocks like 'WK' make runs likely."""
    tokens = ["W", "K", "C", "D", "WK", "KC", "CD", "WKC", "a", "b"]
    inputs = []
    for _ in range(draw(st.integers(1, 3))):
        term = ""
        for token in draw(st.lists(st.sampled_from(tokens), min_size=1, max_size=4)):
            if not any(ch.isupper() and ch in term for ch in token):
                term += token
        inputs.append(term)
    used = sorted(set("".join(inputs)))
    output = "".join(draw(st.permutations(used))[:draw(st.integers(0, len(used)))])
    return ",".join(inputs) + "->" + output


@settings(max_examples=150, deadline=None)
@given(small_strings(), st.data())
def test_the_advice_is_exactly_the_smallest_sets_found_by_brute_force(subscripts, data):
    inputs, output = subscripts.split("->")[0].split(","), subscripts.split("->")[1]
    groups = [g for g in dict.fromkeys("".join(inputs)) if g.isupper()]
    supplied = data.draw(st.lists(st.sampled_from(groups), unique=True, max_size=2)) if groups else []
    info = identifiability(subscripts, supplied=supplied)
    rows = brute_force(inputs, output, groups)
    rest = [g for g in groups if g not in supplied]

    assert info.needs_supplement == (not determines(rows, supplied))
    # Every set of the minimum size, in string order, tried by brute force.
    minimum = next(n for n in range(len(rest) + 1)
                   if any(determines(rows, supplied + list(c)) for c in itertools.combinations(rest, n)))
    assert info.minimum_pins == minimum
    smallest = [c for c in itertools.combinations(rest, minimum) if determines(rows, supplied + list(c))]
    if minimum == 0:
        assert info.smallest_sets == () and info.candidates == () and info.describe() == "determined"
        return
    assert info.smallest_sets == tuple(smallest[:3])
    assert info.more_smallest_sets == (len(smallest) > 3)
    assert info.completion == smallest[0]
    assert info.candidates == (tuple(c[0] for c in smallest) if minimum == 1 else ())
    assert info.rank_deficit <= minimum
    # What the error says is what the analysis found.
    ndims = tuple(sum(1 if c.islower() else 0 for c in t) for t in inputs)
    with pytest.raises(UnderdeterminedError) as err:
        solve_lengths(subscripts, ndims, **{f"len_{g}": 0 for g in supplied})
    for names in info.smallest_sets:
        listed = ", ".join(f"len_{g}" for g in names)
        assert (listed if minimum > 1 else f"len_{names[0]}=<number of axes>") in str(err.value)


def test_twenty_six_groups_answers_decided_by_hand():
    """Two of the adversarial strings `bench/solver_speed.py` times (no timing here)."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    info = identifiability(letters + "->" + letters[::-1])   # one equation, 26 singleton runs
    assert info.minimum_pins == 25 and info.smallest_sets[0] == tuple(letters[:25])
    pairs = letters + "->" + "".join(letters[i:i + 2] for i in range(24, -1, -2))  # 13 runs of 2
    info = identifiability(pairs)
    assert info.runs == tuple(tuple(letters[i:i + 2]) for i in range(0, 26, 2))
    assert info.rank_deficit == 12 and info.minimum_pins == 24
    assert info.smallest_sets[0] == tuple(letters[:24])   # close all runs but the last


def fraction_rank(rows, ncols):
    """Rank by textbook elimination over the rationals (the independent reference)."""
    m = [[Fraction(int(c in ones)) for c in range(ncols)] for ones in rows]
    rank = 0
    for c in range(ncols):
        pivot = next((i for i in range(rank, len(m)) if m[i][c] != 0), None)
        if pivot is None:
            continue
        m[rank], m[pivot] = m[pivot], m[rank]
        for i in range(len(m)):
            if i != rank and m[i][c] != 0:
                f = m[i][c] / m[rank][c]
                m[i] = [a - f * b for a, b in zip(m[i], m[rank])]
        rank += 1
    return rank


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.frozensets(st.integers(0, n - 1), min_size=1), max_size=30))),
    st.sampled_from([False, True]))
def test_exact_integer_elimination_agrees_with_fractions(case, packing):
    # Both ways of recognising a row already in the span: reduction, and packed dot products.
    ncols, sets = case
    rows = sorted({tuple(sorted(x)) for x in sets})
    basis = _reduced_rows(rows, ncols, packing=packing)
    assert len(basis) == fraction_rank(rows, ncols)
    # The pivots are the first basis of columns: column c is a pivot iff it raises the rank.
    pivots = sorted(p for p, _ in basis)
    expected = [c for c in range(ncols)
                if fraction_rank([tuple(k for k in ones if k <= c) for ones in rows], c + 1)
                > fraction_rank([tuple(k for k in ones if k < c) for ones in rows], c)]
    assert pivots == expected
    for p, r in basis:   # reduced: zero in the other pivots' columns
        assert r[p] != 0 and all(r[q] == 0 for q, _ in basis if q != p)


@settings(max_examples=200, deadline=None)
# With 1-bit fields the dot products (0, 2, -1) of row (3, 4) cancel: 0 + 2*2 - 1*4 == 0.
@example((6, [frozenset({0, 1, 2, 4, 5}), frozenset({0, 3, 5}), frozenset({0, 4})], [frozenset({3, 4})]))
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.frozensets(st.integers(0, n - 1), min_size=1), max_size=12),
    st.lists(st.frozensets(st.integers(0, n - 1), min_size=1), min_size=1, max_size=12))))
def test_packed_null_space_recognises_exactly_the_rows_in_the_span(case):
    ncols, basis_sets, probes = case
    rows = sorted({tuple(sorted(x)) for x in basis_sets})
    packed = _packed_null_space(_reduced_rows(rows, ncols, packing=False), ncols)
    for probe in probes:
        ones = tuple(sorted(probe))
        in_span = fraction_rank(rows + [ones], ncols) == fraction_rank(rows, ncols)
        assert (sum(packed[c] for c in ones) == 0) == in_span


@pytest.mark.parametrize("subscripts, ndims, pins, expected", [
    ("BP,PQ,BQ->B", (3, 4, 5), {}, {"B": 2, "P": 1, "Q": 3}),           # a cycle: no term of one unknown
    ("OIJ,KI,KJ->KO", (6, 4, 4), {"len_O": 2}, {"O": 2, "I": 2, "J": 2, "K": 2}),
    ("WKCi,Cio->WKCo", (5, 3), {}, {"W": 3, "K": 0, "C": 1}),           # a run: its total to W
])
def test_strings_substitution_cannot_peel_solve_by_run_totals(monkeypatch, subscripts, ndims, pins, expected):
    _solver.solve.cache_clear()
    calls = []
    original = _solver._run_totals_solved

    def counting(equations, runs):
        found = original(equations, runs)
        calls.append(found)
        return found

    monkeypatch.setattr(_solver, "_run_totals_solved", counting)
    assert solve_lengths(subscripts, ndims, **pins) == expected
    assert calls and calls[-1] is not None   # answered without the exact elimination


@pytest.mark.parametrize("subscripts, ndims, pins, error", [
    ("BP,PQ,BQ->B", (3, 4, 6), {}, "not a whole number"),   # B + P + Q would be 6.5
    ("BP,PQ,BQ->B", (2, 1, 5), {}, "negative"),      # P would be -1
    ("WKCi,Cio->WKCo", (5, 3), {"len_W": 1}, None),           # a pin inside a run: W 1, K 2
])
def test_run_totals_leave_errors_and_pinned_runs_to_the_exact_elimination(subscripts, ndims, pins, error):
    _solver.solve.cache_clear()
    if error is None:
        assert solve_lengths(subscripts, ndims, **pins) == {"W": 1, "K": 2, "C": 1}
    else:
        with pytest.raises(InconsistentError, match=error):
            solve_lengths(subscripts, ndims, **pins)


def test_run_totals_answer_none_for_a_contradiction_or_a_free_total():
    # B + P = 1, P + Q = 1, B + Q = 5: one solution in rationals (B = 2.5), none in axes
    assert _solver._run_totals_solved([(frozenset({0, 1}), 1), (frozenset({1, 2}), 1),
                                       (frozenset({0, 2}), 5)], [[0], [1], [2]]) is None
    # the same sums twice with other totals: no solution at all
    assert _solver._run_totals_solved([(frozenset({0, 1}), 2), (frozenset({0, 1}), 3),
                                       (frozenset({0}), 1)], [[0], [1]]) is None
    # two equations over three totals: one is free
    assert _solver._run_totals_solved([(frozenset({0, 1}), 2), (frozenset({1, 2}), 2)],
                                      [[0], [1], [2]]) is None
