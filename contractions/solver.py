"""Stage 2 of the pipeline: solve every group's number of axes.

Each input term contributes one linear equation over the unknowns ``x_G`` (the number of
axes of group ``G``)::

    sum(x_G for G in term) = ndim(operand) - (number of lowercase letters in the term)

and each ``len_G=n`` pins ``x_G = n``.  Everything is exact (`fractions.Fraction`).

*Identifiability* is decided from the coefficient matrix alone, i.e. from the string and
the set of supplied ``len_*`` names, never from the ndims of one call: a call site either
always needs a supplement or never does.  Groups that always travel together
(`co_travelling_runs`) only need their total determined, since every split of the total
gives the same expanded einsum.

>>> identifiability('WCo,WCa->Cao').candidates
('W', 'C')
>>> solve_lengths('WCo,WCa->Cao', (3, 3), len_W=2)
{'W': 2, 'C': 0}
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .arguments import check_operand_count, normalise_supplements
from .errors import InconsistentError, SupplementError, UnderdeterminedError
from .parser import ParsedSubscripts, is_group, parse

__all__ = [
    "Identifiability",
    "identifiability",
    "co_travelling_runs",
    "solve",
    "solve_lengths",
    "solve_call",
    "SOLVE_CACHE_SIZE",
]

SOLVE_CACHE_SIZE = 4096


# --------------------------------------------------------------------------- runs
def _always_followed_by(parsed: ParsedSubscripts, first: str, second: str) -> bool:
    """True when every occurrence of ``first`` is immediately followed by ``second``
    and every occurrence of ``second`` immediately preceded by ``first`` (all terms,
    output included)."""
    for term in parsed.terms:
        i = term.find(first)
        if i >= 0 and (i + 1 >= len(term) or term[i + 1] != second):
            return False
        j = term.find(second)
        if j >= 0 and (j == 0 or term[j - 1] != first):
            return False
    return True


@functools.lru_cache(maxsize=SOLVE_CACHE_SIZE)
def _runs_of(parsed: ParsedSubscripts) -> tuple[tuple[str, ...], ...]:
    successor: dict[str, str] = {}
    for g in parsed.groups:
        for term in parsed.terms:
            i = term.find(g)
            if i >= 0:
                nxt = term[i + 1] if i + 1 < len(term) else ""
                if is_group(nxt) and _always_followed_by(parsed, g, nxt):
                    successor[g] = nxt
                break  # the first occurrence fixes the only possible successor
    has_predecessor = set(successor.values())
    runs = []
    for g in parsed.groups:
        if g in has_predecessor:
            continue
        run = [g]
        while run[-1] in successor:
            run.append(successor[run[-1]])
        runs.append(tuple(run))
    return tuple(runs)


def co_travelling_runs(subscripts: str) -> tuple[tuple[str, ...], ...]:
    """Maximal runs of groups that always appear together, adjacent and in order.

    Every group belongs to exactly one run (most runs have one member).

    >>> co_travelling_runs('WKCi,Cio->WKCo')
    (('W', 'K'), ('C',))
    """
    return _runs_of(parse(subscripts))


# -------------------------------------------------------------------- linear algebra
def _eliminate(rows: list[list[Fraction]], ncols: int) -> list[int]:
    """Reduce ``rows`` in place to reduced row echelon form over their first ``ncols``
    columns (extra columns ride along); return the pivot column of each leading row."""
    pivots: list[int] = []
    r = 0
    for c in range(ncols):
        pivot_row = next((i for i in range(r, len(rows)) if rows[i][c] != 0), None)
        if pivot_row is None:
            continue
        rows[r], rows[pivot_row] = rows[pivot_row], rows[r]
        scale = rows[r][c]
        rows[r] = [v / scale for v in rows[r]]
        for i in range(len(rows)):
            if i != r and rows[i][c] != 0:
                factor = rows[i][c]
                rows[i] = [a - factor * b for a, b in zip(rows[i], rows[r])]
        pivots.append(c)
        r += 1
        if r == len(rows):
            break
    return pivots


def _coefficients(parsed: ParsedSubscripts, supplied: Iterable[str]) -> list[list[Fraction]]:
    rows = [[Fraction(int(g in term)) for g in parsed.groups] for term in parsed.inputs]
    for name in supplied:
        rows.append([Fraction(int(g == name)) for g in parsed.groups])
    return rows


def _null_space(rows: list[list[Fraction]], pivots: list[int], ncols: int) -> list[list[Fraction]]:
    free = [c for c in range(ncols) if c not in pivots]
    basis = []
    for f in free:
        v = [Fraction(0)] * ncols
        v[f] = Fraction(1)
        for row, p in zip(rows, pivots):
            v[p] = -row[f]
        basis.append(v)
    return basis


def _rank(vectors: list[list[Fraction]], ncols: int) -> int:
    rows = [list(v) for v in vectors]
    return len(_eliminate(rows, ncols)) if rows else 0


# ------------------------------------------------------------------ identifiability
@dataclass(frozen=True)
class Identifiability:
    """What the subscripts string (plus the names of supplied ``len_*``) decides.

    ``undetermined`` lists the groups whose number of axes the string cannot decide
    (members of co-travelling runs are only listed when the run's total is open);
    ``candidates`` lists every group ``G`` for which adding ``len_G`` alone completes
    the solve; ``rank_deficit`` is how many more independent supplements are needed;
    ``completion`` is one smallest set of extra supplements that completes it.
    """

    subscripts: str
    groups: tuple[str, ...]
    runs: tuple[tuple[str, ...], ...]
    supplied: tuple[str, ...]
    undetermined: tuple[str, ...]
    candidates: tuple[str, ...]
    rank_deficit: int
    completion: tuple[str, ...]

    @property
    def needs_supplement(self) -> bool:
        """True when a call without further ``len_*`` raises `UnderdeterminedError`."""
        return bool(self.undetermined)

    def describe(self) -> str:
        """One line for reports: ``'determined'`` or which ``len_*`` would complete it."""
        if not self.undetermined:
            return "determined"
        if self.candidates:
            return "needs one of " + ", ".join(f"len_{g}" for g in self.candidates)
        return (f"needs {self.rank_deficit} more supplements, e.g. "
                + ", ".join(f"len_{g}" for g in self.completion))


def _analyse(parsed: ParsedSubscripts, supplied: tuple[str, ...]):
    """Return (undetermined groups, rank deficit) for ``supplied`` pins."""
    n = len(parsed.groups)
    rows = _coefficients(parsed, supplied)
    pivots = _eliminate(rows, n)
    null = _null_space(rows, pivots, n)
    runs = _runs_of(parsed)
    index = {g: i for i, g in enumerate(parsed.groups)}
    # Project the null space onto run totals: a run is open when some direction
    # of freedom changes its total; splits inside a run are unobservable.
    projected = [[sum((v[index[g]] for g in run), Fraction(0)) for run in runs] for v in null]
    open_runs = [run for k, run in enumerate(runs) if any(p[k] != 0 for p in projected)]
    undetermined = tuple(g for g in parsed.groups if any(g in run for run in open_runs))
    return undetermined, _rank(projected, len(runs))


@functools.lru_cache(maxsize=SOLVE_CACHE_SIZE)
def _identifiability(parsed: ParsedSubscripts, supplied: tuple[str, ...]) -> Identifiability:
    undetermined, deficit = _analyse(parsed, supplied)
    candidates: tuple[str, ...] = ()
    completion: tuple[str, ...] = ()
    if undetermined:
        candidates = tuple(g for g in parsed.groups if g not in supplied
                           and not _analyse(parsed, supplied + (g,))[0])
        # Greedy smallest completion: each accepted pin lowers the deficit by one,
        # and pins that change nothing are skipped, so the result has exactly
        # ``deficit`` members.
        chosen: list[str] = []
        current = deficit
        for g in parsed.groups:
            if current == 0:
                break
            if g in supplied:
                continue
            trial = _analyse(parsed, supplied + tuple(chosen) + (g,))[1]
            if trial < current:
                chosen.append(g)
                current = trial
        completion = tuple(chosen)
    return Identifiability(
        subscripts=parsed.subscripts,
        groups=parsed.groups,
        runs=_runs_of(parsed),
        supplied=supplied,
        undetermined=undetermined,
        candidates=candidates,
        rank_deficit=deficit,
        completion=completion,
    )


def _check_supplied(parsed: ParsedSubscripts, supplied: Iterable[str]) -> tuple[str, ...]:
    names = tuple(sorted(set(supplied), key=lambda g: (g not in parsed.groups, g)))
    for g in names:
        if g not in parsed.groups:
            raise SupplementError(
                f"len_{g} was passed but group {g!r} does not appear in {parsed.subscripts!r}; "
                f"its groups are {', '.join(parsed.groups) or '(none)'}. Remove len_{g} or fix the string."
            )
    return tuple(g for g in parsed.groups if g in names)


def identifiability(subscripts: str, supplied: Iterable[str] = ()) -> Identifiability:
    """Decide from the string alone which groups are undetermined and what completes them.

    ``supplied`` names groups whose ``len_<G>`` the call passes (names like ``'W'``; a
    ``'len_W'`` spelling is accepted too).  No shapes are involved, so the answer holds
    for every call with this string.

    >>> info = identifiability('WCa,KCaib->WKCib')
    >>> info.undetermined, info.candidates
    (('W', 'C', 'K'), ('W', 'C', 'K'))
    >>> identifiability('WKCi,Cio->WKCo').needs_supplement
    False
    """
    parsed = parse(subscripts)
    names = [g[4:] if g.startswith("len_") else g for g in supplied]
    return _identifiability(parsed, _check_supplied(parsed, names))


# ------------------------------------------------------------------------- solving
def _equation_text(parsed: ParsedSubscripts, coeffs: Sequence[Fraction], rhs: Fraction) -> str:
    lhs = " + ".join(g for g, c in zip(parsed.groups, coeffs) if c != 0) or "0"
    return f"{lhs} = {rhs}"


@functools.lru_cache(maxsize=SOLVE_CACHE_SIZE)
def solve(parsed: ParsedSubscripts, ndims: tuple[int, ...],
          supplements: tuple[tuple[str, int], ...] = ()) -> tuple[int, ...]:
    """Group lengths (in ``parsed.groups`` order) for these ndims and ``(group, n)`` pins.

    Raises `UnderdeterminedError` (decided from the string and the pin names only),
    `InconsistentError` (no non-negative integer solution) or `SupplementError`.
    Assumes ``len(ndims) == len(parsed.inputs)`` (the caller checks operand counts).
    """
    s = parsed.subscripts
    names = _check_supplied(parsed, [g for g, _ in supplements])
    info = _identifiability(parsed, names)
    if info.undetermined:
        raise UnderdeterminedError(_underdetermined_message(info))

    labels: list[str] = []
    for k, (term, nd) in enumerate(zip(parsed.inputs, ndims)):
        nlower = parsed.lowercase_count(k)
        has_group = any(is_group(ch) for ch in term)
        if nd < nlower or (not has_group and nd != nlower):
            want = f"at least {nlower}" if has_group else f"exactly {nlower}"
            raise InconsistentError(
                f"inconsistent operands for {s!r}: operand {k} (term {term!r}) has ndim {nd}, "
                f"but its term needs {want} axes ({nlower} single-axis letters"
                f"{' plus its groups' if has_group else ''}). Check the operand order and "
                f"that operand {k} is the array you meant."
            )
        labels.append(f"operand {k}, term {term!r}, ndim {nd}")
    for g, n in supplements:
        labels.append(f"len_{g}={n}")

    n_groups = len(parsed.groups)
    n_eq = len(labels)
    coeffs = _coefficients(parsed, [g for g, _ in supplements])
    rhs = [Fraction(nd - parsed.lowercase_count(k)) for k, nd in enumerate(ndims)]
    rhs += [Fraction(n) for _, n in supplements]
    # Augment with [rhs | identity] so each reduced row remembers which original
    # equations it combines; that is what lets the error name the culprits.
    rows = [c + [r] + [Fraction(int(i == j)) for j in range(n_eq)]
            for i, (c, r) in enumerate(zip(coeffs, rhs))]
    originals = [list(r) for r in rows]
    pivots = _eliminate(rows, n_groups)

    def _equations(involved: list[int]) -> str:
        return "\n".join(
            f"  {labels[j]}:  {_equation_text(parsed, originals[j][:n_groups], originals[j][n_groups])}"
            for j in involved)

    def culprits(row: list[Fraction]) -> str:
        return _equations([j for j in range(n_eq) if row[n_groups + 1 + j] != 0])

    for row in rows[len(pivots):]:
        if row[n_groups] != 0:
            raise InconsistentError(
                f"inconsistent operands for {s!r}: these group-length equations cannot all hold\n"
                f"{culprits(row)}\n"
                "Check the operand order (operands follow the input terms left to right), "
                "each operand's ndim, and any len_* you passed."
            )

    null = _null_space(rows, pivots, n_groups)
    determined = [all(v[c] == 0 for v in null) for c in range(n_groups)]
    particular = [Fraction(0)] * n_groups
    pivot_row = {}
    for r, p in enumerate(pivots):
        particular[p] = rows[r][n_groups]
        pivot_row[p] = r
    index = {g: i for i, g in enumerate(parsed.groups)}
    values = list(particular)
    for run in info.runs:
        members = [index[g] for g in run]
        open_members = [m for m in members if not determined[m]]
        if not open_members:
            continue
        # The run total is determined (checked above); every split is equivalent, so
        # give the remainder to the first open member and zero to the rest.
        total = sum((particular[m] for m in members), Fraction(0))
        fixed = sum((particular[m] for m in members if determined[m]), Fraction(0))
        for m in open_members:
            values[m] = Fraction(0)
        values[open_members[0]] = total - fixed
    run_of = {index[g]: [index[m] for m in run] for run in info.runs for g in run}
    for c, v in enumerate(values):
        if v < 0 or v.denominator != 1:
            g = parsed.groups[c]
            what = f"{v} (negative)" if v < 0 else f"{v} (not a whole number)"
            # The value came from the pivot rows of its run's members; their identity
            # columns record every original equation that went into it.
            source_rows = [rows[pivot_row[m]] for m in run_of[c] if m in pivot_row]
            involved = [j for j in range(n_eq)
                        if any(row[n_groups + 1 + j] != 0 for row in source_rows)]
            raise InconsistentError(
                f"inconsistent operands for {s!r}: group {g!r} would have {what} axes from\n"
                f"{_equations(involved)}\n"
                "Check the operand order (operands follow the input terms left to right), "
                "each operand's ndim, and any len_* you passed."
            )
    return tuple(int(v) for v in values)


def _underdetermined_message(info: Identifiability) -> str:
    groups = ", ".join(repr(g) for g in info.undetermined)
    pinned = f" (with {', '.join('len_' + g for g in info.supplied)} given)" if info.supplied else ""
    if info.candidates:
        fix = "Pass one of " + ", ".join(f"len_{g}=<number of axes>" for g in info.candidates) + "."
    else:
        fix = (f"Pass {info.rank_deficit} more supplements, e.g. "
               + ", ".join(f"len_{g}=<n>" for g in info.completion) + ".")
    return (
        f"underdetermined subscripts {info.subscripts!r}{pinned}: the number of axes of groups "
        f"{groups} cannot be decided from the operands' ndims: the input terms fix only combined "
        f"lengths of these groups, and the string still observes how each combination splits. {fix} "
        "This need comes from the string itself, not from these shapes: every call with this "
        "string needs the same supplement."
    )


def solve_lengths(subscripts: str, ndims: Sequence[int], **len_groups: int) -> dict[str, int]:
    """Number of axes of every group, for operands of these ``ndims``.

    >>> solve_lengths('WCa,Caib,WCi->WCb', (5, 5, 5))
    {'W': 2, 'C': 2}
    >>> solve_lengths('WKCi,Cio->WKCo', (5, 3))   # W, K co-travel: total 3, split canonically
    {'W': 3, 'K': 0, 'C': 1}
    """
    ndims = tuple(operator.index(n) for n in ndims)
    parsed, lengths = solve_call(subscripts, ndims, normalise_supplements(len_groups), what="ndim")
    return dict(zip(parsed.groups, lengths))


def solve_call(subscripts: str, ndims: tuple[int, ...], supplements: tuple[tuple[str, int], ...],
               what: str = "operand") -> tuple[ParsedSubscripts, tuple[int, ...]]:
    """Parse, check the operand count, solve: the one sequence every caller runs.

    ``supplements`` are already normalised (`normalise_supplements`); ``what`` names the
    counted things in the count error (operands, shapes, ndims).

    >>> solve_call('WCa,Caib,WCi->WCb', (4, 5, 4), ())[1]   # W = 1 axis, C = 2
    (1, 2)
    """
    parsed = parse(subscripts)
    check_operand_count(parsed, len(ndims), what=what)
    return parsed, solve(parsed, ndims, supplements)

