"""The solver on strings of thousands of terms: exact answers, work bounded per group."""

import pytest

from contractions import InconsistentError, solve_lengths
from contractions import solver as _solver


def _count_repacks(monkeypatch):
    # (the exact elimination's work: the single-unknown substitution that solves most strings
    # first is switched off, so the elimination runs on every equation)
    monkeypatch.setattr(_solver, "_peeled", lambda equations, n_groups: None)
    monkeypatch.setattr(_solver, "_run_totals_solved", lambda equations, runs: None)
    calls = []
    original = _solver._System._repack

    def counting(self):
        calls.append(1)
        original(self)

    monkeypatch.setattr(_solver._System, "_repack", counting)
    return calls


@pytest.mark.parametrize("k", [2, 50, 3000])
def test_many_terms_sharing_a_group_solve_with_one_reduction_per_group(monkeypatch, k):
    calls = _count_repacks(monkeypatch)
    _solver.solve.cache_clear()
    s = "Wa," * (k - 1) + "Wa->W"
    assert solve_lengths(s, (4,) * k) == {"W": 3}
    # one reduction when the system is created, one per group raising the rank: never per term
    assert len(calls) == 2


def test_many_distinct_terms_are_reduced_at_most_once_per_group(monkeypatch):
    calls = _count_repacks(monkeypatch)
    _solver.solve.cache_clear()
    groups = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    terms = [groups[i % 26] + groups[(i * 7 + 3) % 26] + "a" for i in range(2000)]
    terms = [t if t[0] != t[1] else t[0] + "a" for t in terms] + [g + "a" for g in groups]
    lengths = {g: i % 3 for i, g in enumerate(groups)}
    ndims = [sum(lengths.get(ch, 1) for ch in t) for t in terms]
    solved = solve_lengths(",".join(terms) + "->" + groups, ndims)
    assert solved == lengths
    assert len(calls) <= 1 + 26


def test_a_clash_far_down_a_long_string_names_both_equations():
    k = 2000
    s = "Wa," * (k - 1) + "Wa->W"
    ndims = [4] * (k - 1) + [5]
    with pytest.raises(InconsistentError) as info:
        solve_lengths(s, ndims)
    msg = str(info.value)
    assert "operand 0, term 'Wa', ndim 4:  W = 3" in msg
    assert f"operand {k - 1}, term 'Wa', ndim 5:  W = 4" in msg
    assert msg.count("\n  operand") == 2     # exactly the two equations that clash
    assert "(6002 characters)" in msg         # the long string quoted by start and length


def test_a_combination_of_terms_contradicting_another_names_all_three():
    # X + Y = 2, Y = 1, X = 2: the third contradicts the first two together.
    with pytest.raises(InconsistentError) as info:
        solve_lengths("XY,Y,X->XY", (2, 1, 2))
    msg = str(info.value)
    for part in ("operand 0, term 'XY', ndim 2:  X + Y = 2", "operand 1, term 'Y', ndim 1:  Y = 1",
                 "operand 2, term 'X', ndim 2:  X = 2"):
        assert part in msg
