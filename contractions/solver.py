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

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .arguments import check_operand_count, normalise_supplements
from .caching import byte_bounded_cache
from .errors import InconsistentError, SupplementError, UnderdeterminedError, quoted, uppercase_hint
from .parser import ELLIPSIS, ParsedSubscripts, is_group, parse, weight_with_parses

__all__ = [
    "Identifiability",
    "identifiability",
    "co_travelling_runs",
    "solve",
    "solve_lengths",
    "solve_call",
    "SOLVE_CACHE_SIZE",
    "SOLVE_CACHE_BYTES",
]

SOLVE_CACHE_SIZE = 4096
SOLVE_CACHE_BYTES = 64 * 2**20
"""Bytes each solver cache may hold (keys hold the parsed string); see `contractions.caching`."""


_solver_cache = byte_bounded_cache(maxsize=SOLVE_CACHE_SIZE, maxbytes=SOLVE_CACHE_BYTES,
                                   weigh_results=False, weigh_args=weight_with_parses)


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


@_solver_cache
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
@dataclass
class _Row:
    """A reduced equation: 1 at its pivot, 0 at every other pivot; ``combination`` records
    which original equations (by index) it is made of, and with which factors."""

    coefficients: list[Fraction]
    rhs: Fraction
    combination: dict[int, Fraction]


class _System:
    """The group-length equations, reduced one at a time (exact, `Fraction`).

    At most one row per group survives, so adding an equation costs O(groups^2) when it
    raises the rank or clashes, and otherwise (the common case: thousands of terms repeating a
    few group sets) one comparison of packed integers: an equation is implied by the rows so
    far exactly when it equals the sum of the rows at its ones' pivots (reduced form), which
    `_packed` checks as one integer sum per equation.  Repeated equations are skipped outright.
    Solving a string of n terms is therefore linear in n.
    """

    def __init__(self, ncols: int) -> None:
        self.ncols = ncols
        self.rows: dict[int, _Row] = {}
        self._seen: set[tuple[frozenset[int], int]] = set()
        self._repack()

    def _repack(self) -> None:
        rows = self.rows.values()
        self._scale = math.lcm(*(x.denominator for r in rows for x in (*r.coefficients, r.rhs)))
        top = max((abs(x) * self._scale for r in rows for x in r.coefficients), default=0)
        self._width = int(2 * (self.ncols + 1) * max(top, self._scale)).bit_length() + 1
        self._packed = {p: sum(int(x * self._scale) << (c * self._width)
                               for c, x in enumerate(r.coefficients) if x)
                        for p, r in self.rows.items()}
        self._scaled_rhs = {p: int(r.rhs * self._scale) for p, r in self.rows.items()}

    def _implied(self, ones: frozenset[int], rhs: int) -> bool:
        pivots = [c for c in ones if c in self._packed]
        unit = sum(1 << (c * self._width) for c in ones)
        return (sum(self._packed[p] for p in pivots) == self._scale * unit
                and sum(self._scaled_rhs[p] for p in pivots) == self._scale * rhs)

    def add(self, index: int, ones: frozenset[int], rhs: int) -> list[int] | None:
        """Add equation ``index`` (sum of the ``ones`` columns = ``rhs``); return the indices
        of the equations it contradicts together with, or None when consistent."""
        if (ones, rhs) in self._seen:
            return None
        self._seen.add((ones, rhs))
        if self._implied(ones, rhs):
            return None
        v = [Fraction(int(c in ones)) for c in range(self.ncols)]
        r = Fraction(rhs)
        combination = {index: Fraction(1)}
        for p, row in self.rows.items():
            f = v[p]
            if f:
                v = [a - f * b for a, b in zip(v, row.coefficients)]
                r -= f * row.rhs
                for j, g in row.combination.items():
                    combination[j] = combination.get(j, Fraction(0)) - f * g
        pivot = next((c for c in range(self.ncols) if v[c]), None)
        if pivot is None:  # implied coefficients, a different right-hand side
            return sorted(j for j, f in combination.items() if f)
        scale = v[pivot]
        new = _Row([a / scale for a in v], r / scale, {j: f / scale for j, f in combination.items()})
        for row in self.rows.values():
            f = row.coefficients[pivot]
            if f:
                row.coefficients = [a - f * b for a, b in zip(row.coefficients, new.coefficients)]
                row.rhs -= f * new.rhs
                for j, g in new.combination.items():
                    row.combination[j] = row.combination.get(j, Fraction(0)) - f * g
        self.rows[pivot] = new
        self._repack()
        return None


def _equations(parsed: ParsedSubscripts, labels: Callable[[int], str],
               equations: list[tuple[frozenset[int], int]], involved: Iterable[int]) -> str:
    """The original equations ``involved``, one per line, labelled."""
    lines = []
    for j in involved:
        ones, rhs = equations[j]
        lhs = " + ".join(g for c, g in enumerate(parsed.groups) if c in ones) or "0"
        lines.append(f"  {labels(j)}:  {lhs} = {rhs}")
    return "\n".join(lines)


# ------------------------------------------------------------------ identifiability
SMALLEST_SETS_SHOWN = 3
"""How many smallest completing sets `Identifiability` lists (and messages quote)."""


@dataclass(frozen=True)
class Identifiability:
    """What the subscripts string (plus the names of supplied ``len_*``) decides.

    ``undetermined`` lists the groups, not supplied, whose number of axes the string cannot
    decide (members of co-travelling runs are only listed when the run's total is open).
    ``minimum_pins`` is the smallest number of further ``len_*`` that determines the string,
    and ``smallest_sets`` lists up to `SMALLEST_SETS_SHOWN` sets of that many groups that do,
    earliest groups first (``more_smallest_sets`` says whether other such sets exist);
    ``completion`` is the first of them.  ``candidates`` lists every group ``G`` whose
    ``len_G`` alone completes the solve (empty unless ``minimum_pins == 1``).
    ``rank_deficit`` is how many run totals the equations leave free; a run is only closed
    once all its members are pinned, so ``minimum_pins`` can exceed it.

    >>> info = identifiability('WKCDa->WKa')     # runs (W, K) and (C, D); one equation
    >>> info.rank_deficit, info.minimum_pins, info.smallest_sets
    (1, 2, (('W', 'K'), ('C', 'D')))
    """

    subscripts: str
    groups: tuple[str, ...]
    runs: tuple[tuple[str, ...], ...]
    supplied: tuple[str, ...]
    undetermined: tuple[str, ...]
    candidates: tuple[str, ...]
    rank_deficit: int
    completion: tuple[str, ...]
    minimum_pins: int = 0
    smallest_sets: tuple[tuple[str, ...], ...] = ()
    more_smallest_sets: bool = False

    @property
    def needs_supplement(self) -> bool:
        """True when a call without further ``len_*`` raises `UnderdeterminedError`."""
        return bool(self.undetermined)

    def describe(self) -> str:
        """One line for reports: ``'determined'`` or which ``len_*`` would complete it."""
        if not self.undetermined:
            return "determined"
        if self.minimum_pins == 1:
            return "needs one of " + ", ".join(f"len_{g}" for g in self.candidates)
        more = "more " if self.supplied else ""
        return f"needs {self.minimum_pins} {more}supplements{_sets_text(self)}"


def _sets_text(info: Identifiability) -> str:
    """``': {len_W, len_K} or {len_C, len_D}'``, or ``', e.g. ...'`` when more sets exist."""
    sets = ["{" + ", ".join(f"len_{g}" for g in names) + "}" for names in info.smallest_sets]
    listed = sets[0] if len(sets) == 1 else ", ".join(sets[:-1]) + " or " + sets[-1]
    return (", e.g. " if info.more_smallest_sets else ": ") + listed


def _primitive(v: list[int]) -> list[int]:
    d = math.gcd(*v)
    return [x // d for x in v] if d > 1 else v


def _reduced_rows(rows: Sequence[tuple[int, ...]], ncols: int,
                  packing: bool | None = None) -> list[tuple[int, list[int]]]:
    """Integer reduced row echelon form of 0/1 rows, each given by the columns of its ones:
    ``(pivot column, row)`` pairs, each row zero in the other rows' pivot columns.

    Fraction-free (rows are combined crosswise and divided by their gcd), hence exact; the
    pivots are the first basis of columns in column order.  With many rows, a row already in
    the span is recognised without elimination: it is orthogonal to every null vector, and all
    those dot products come out of one sum of packed integers (`_packed_null_space`), so a
    string with thousands of terms costs one addition per group occurrence, not a reduction
    per term.  ``packing`` forces the choice (tests); by default it is used with many rows.
    """
    basis: list[tuple[int, list[int]]] = []
    if packing is None:
        packing = len(rows) > 4 * ncols  # else rebuilding the packing costs more than it saves
    packed = _packed_null_space(basis, ncols) if packing else []
    for ones in rows:
        if packing and sum(packed[c] for c in ones) == 0:
            continue  # in the row space
        v = [0] * ncols
        for c in ones:
            v[c] = 1
        for p, r in basis:
            if v[p]:
                v = _primitive([r[p] * a - v[p] * b for a, b in zip(v, r)])
        pivot = next((c for c in range(ncols) if v[c]), None)
        if pivot is None:
            continue  # in the row space
        for i, (q, r) in enumerate(basis):
            if r[pivot]:
                basis[i] = (q, _primitive([v[pivot] * a - r[pivot] * b for a, b in zip(r, v)]))
        basis.append((pivot, v))
        if len(basis) == ncols:
            break
        if packing:
            packed = _packed_null_space(basis, ncols)
    return basis


def _packed_null_space(basis: list[tuple[int, list[int]]], ncols: int) -> list[int]:
    """The null space of ``basis`` (reduced rows), packed for dot products with 0/1 rows:
    a 0/1 row is in the row space exactly when the sum of the packed columns of its ones is 0.

    Null vector ``j`` has, per free column ``f``, ``L`` at ``f`` and ``-r[f] * L / r[p]`` at
    each pivot ``p`` (``L`` the lcm of the pivots).  Column ``c`` is packed as
    ``sum(z_j[c] * B**j)`` with ``B = 2**w`` above every possible dot product, so the sum over
    a row's ones is ``sum(dot_j * B**j)``, which is zero only if every ``dot_j`` is (the lowest
    nonzero one would have to be a multiple of ``B``).
    """
    pivots = {p: r for p, r in basis}
    lcm = math.lcm(*(r[p] for p, r in basis)) if basis else 1
    null = []
    for f in range(ncols):
        if f in pivots:
            continue
        z = [0] * ncols
        z[f] = lcm
        for p, r in pivots.items():
            z[p] = -r[f] * (lcm // r[p])
        null.append(z)
    width = (ncols * max((abs(x) for z in null for x in z), default=0)).bit_length() + 1
    return [sum(z[c] << (j * width) for j, z in enumerate(null)) for c in range(ncols)]


def _exchange(rows: dict[int, list[int]], out: int, into: int, column: int) -> dict[int, list[int]]:
    """Basis exchange on a tableau (``rows[b]``: coordinates on basis element ``b``, scaled
    so that its own entry is the scale): ``into`` (at ``column``) replaces ``out``."""
    pivot_row = rows[out]
    f = pivot_row[column]
    new = {}
    for x, r in rows.items():
        if x == out:
            new[into] = pivot_row
        elif r[column]:
            new[x] = _primitive([f * a - r[column] * b for a, b in zip(r, pivot_row)])
        else:
            new[x] = r
    return new


@_solver_cache
def _identifiability(parsed: ParsedSubscripts, supplied: tuple[str, ...]) -> Identifiability:
    """The string-level analysis (docs/solver.md, "The algorithm, briefly").

    Every term contains either all members of a co-travelling run or none, so the equations
    only see run totals: one 0/1 column per run.  A run with an unpinned member can take any
    total, so the string is determined exactly when the columns of those *free* runs are
    linearly independent; pinning all unpinned members of a run removes its column.  The
    cheapest removal (a run costs its number of unpinned members) leaves a maximum-weight
    basis of the free columns, which the greedy order (heaviest runs first) finds, and every
    smallest set is the complement of one such basis.
    """
    runs = _runs_of(parsed)
    pinned = set(supplied)
    free = [run for run in runs if any(g not in pinned for g in run)]
    members = [tuple(g for g in run if g not in pinned) for run in free]
    # Columns heaviest first (stable), so the pivots are a maximum-weight basis.
    columns = sorted(range(len(free)), key=lambda j: -len(members[j]))
    where = {g: c for c, j in enumerate(columns) for g in free[j]}
    rows = {tuple(sorted(where[g] for g in term if g in where)) for term in set(parsed.inputs)
            if ELLIPSIS not in term}  # an ellipsis absorbs the rest of its operand's axes
    rows.discard(())
    basis = _reduced_rows(sorted(rows), len(columns))
    pivots = {p for p, _ in basis}
    deficit = len(columns) - len(basis)
    if deficit == 0:
        return Identifiability(parsed.subscripts, parsed.groups, runs, supplied, (), (), 0, ())

    # A run is open unless it is in every basis: a pivot whose row is zero off its pivot.
    closed = {p for p, r in basis if not any(r[c] for c in range(len(columns)) if c not in pivots)}
    open_groups = {g for c, j in enumerate(columns) if c not in closed for g in members[j]}
    undetermined = tuple(g for g in parsed.groups if g in open_groups)
    minimum = sum(len(members[columns[c]]) for c in range(len(columns)) if c not in pivots)

    if minimum == 1:
        # One non-pivot column, of weight 1: the only dependency is its circuit, and closing
        # any run of weight 1 in it (pinning its one unpinned member) breaks it.
        (free_column,) = (c for c in range(len(columns)) if c not in pivots)
        circuit = {free_column} | {p for p, r in basis if r[free_column]}
        singles = [members[columns[c]] for c in sorted(circuit, key=lambda c: columns[c])
                   if len(members[columns[c]]) == 1]
        return _advice(parsed, runs, supplied, undetermined, deficit, minimum, singles)

    # Maximum-weight bases are, weight class by weight class, the bases of the class's
    # columns modulo everything heavier: the reduced rows pivoting in the class, restricted
    # to its columns, are the tableau of that class.  A depth-first search over the runs in
    # string order (closing before keeping) lists the smallest sets earliest groups first;
    # each step is checked feasible on the tableau, so the search never backtracks emptily.
    weight = {c: len(members[columns[c]]) for c in range(len(columns))}
    in_class = {w: [c for c in sorted(weight, key=lambda c: columns[c]) if weight[c] == w]
                for w in set(weight.values())}
    local = {c: in_class[weight[c]].index(c) for c in weight}
    tableaus = {w: {p: [r[c] for c in cols] for p, r in basis if weight[p] == w}
                for w, cols in in_class.items()}
    order = sorted(weight, key=lambda c: columns[c])
    found: list[tuple[str, ...]] = []

    def visit(i: int, tabs: dict[int, dict[int, list[int]]], pins: tuple[str, ...]) -> bool:
        if i == len(order):
            found.append(pins)
            return len(found) > SMALLEST_SETS_SHOWN
        e = order[i]
        w = weight[e]
        tableau = tabs[w]
        later = in_class[w][local[e] + 1:]  # the class's undecided columns
        closing = pins + members[columns[e]]
        if e not in tableau:  # close e: the basis stands without it
            if visit(i + 1, tabs, closing):
                return True
        else:  # close e: swap in an undecided non-basis column with a nonzero coordinate
            u = next((u for u in later if u not in tableau and tableau[e][local[u]]), None)
            if u is not None and visit(i + 1, {**tabs, w: _exchange(tableau, e, u, local[u])}, closing):
                return True
        if e in tableau:  # keep e
            return visit(i + 1, tabs, pins)
        b = next((b for b in later if b in tableau and tableau[b][local[e]]), None)
        return b is not None and visit(i + 1, {**tabs, w: _exchange(tableau, b, e, local[e])}, pins)

    visit(0, tableaus, ())
    return _advice(parsed, runs, supplied, undetermined, deficit, minimum, found)


def _advice(parsed: ParsedSubscripts, runs: tuple[tuple[str, ...], ...], supplied: tuple[str, ...],
            undetermined: tuple[str, ...], deficit: int, minimum: int,
            found: list[tuple[str, ...]]) -> Identifiability:
    """The `Identifiability` of an underdetermined string from its smallest sets ``found``
    (every one when ``minimum == 1``, else up to one more than are shown)."""
    return Identifiability(
        subscripts=parsed.subscripts,
        groups=parsed.groups,
        runs=runs,
        supplied=supplied,
        undetermined=undetermined,
        candidates=tuple(names[0] for names in found) if minimum == 1 else (),
        rank_deficit=deficit,
        completion=found[0],
        minimum_pins=minimum,
        smallest_sets=tuple(found[:SMALLEST_SETS_SHOWN]),
        more_smallest_sets=len(found) > SMALLEST_SETS_SHOWN,
    )


def _check_supplied(parsed: ParsedSubscripts, supplied: Iterable[str]) -> tuple[str, ...]:
    names = tuple(sorted(set(supplied), key=lambda g: (g not in parsed.groups, g)))
    for g in names:
        if g not in parsed.groups:
            raise SupplementError(
                f"len_{g} was passed but group {g!r} does not appear in {quoted(parsed.subscripts)}; "
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
    return _identifiability(parsed, _check_supplied(parsed, _supplied_names(supplied)))


def _supplied_names(supplied: Any) -> list[str]:
    """``supplied=`` as group names; a bare string or a non-string name is a `TypeError`
    (a string would otherwise be read one character at a time)."""
    if isinstance(supplied, str) or not isinstance(supplied, Iterable):
        hint = f"supplied=[{supplied!r}]" if isinstance(supplied, str) and len(supplied) < 40 else "supplied=['W']"
        raise TypeError(f"supplied= must be a collection of group names (e.g. ['W'] or ['len_W']), not "
                        f"{type(supplied).__name__}; write {hint}")
    names = []
    for name in supplied:
        if not isinstance(name, str):
            raise TypeError(f"supplied= holds {name!r} ({type(name).__name__}); each entry names a "
                            "group, as 'W' or 'len_W'")
        names.append(name[4:] if name.startswith("len_") else name)
    return names


# ------------------------------------------------------------------------- solving
@_solver_cache
def solve(parsed: ParsedSubscripts, ndims: tuple[int, ...],
          supplements: tuple[tuple[str, int], ...] = ()) -> tuple[int, ...]:
    """Group lengths (in ``parsed.groups`` order) for these ndims and ``(group, n)`` pins.

    Raises `UnderdeterminedError` (decided from the string and the pin names only),
    `InconsistentError` (no non-negative integer solution) or `SupplementError`.
    Assumes ``len(ndims) == len(parsed.inputs)`` (the caller checks operand counts).
    """
    s = parsed.subscripts
    names = _check_supplied(parsed, [g for g, _ in supplements])

    def string_level() -> Identifiability:
        # (the string-level analysis: an underdetermined string is reported as such before
        # anything these ndims get wrong)
        info = _identifiability(parsed, names)
        if info.undetermined:
            raise UnderdeterminedError(_underdetermined_message(info, ndims))
        return info

    counts = [parsed.lowercase_count(k) for k in range(len(ndims))]
    for k, (term, nd, nlower) in enumerate(zip(parsed.inputs, ndims, counts)):
        has_group = len(term) > nlower
        if nd < nlower or (not has_group and nd != nlower):
            string_level()
            want = f"at least {nlower}" if has_group else f"exactly {nlower}"
            raise InconsistentError(
                f"inconsistent operands for {quoted(s)}: operand {k} (term {quoted(term.replace(ELLIPSIS, '...'))}) has ndim {nd}, "
                f"but its term needs {want} axes ({nlower} single-axis letters"
                f"{' plus its groups' if has_group else ''}). Check the operand order and "
                f"that operand {k} is the array you meant."
            )

    def labels(j: int) -> str:
        if j < len(ndims):
            return f"operand {j}, term {quoted(parsed.inputs[j].replace(ELLIPSIS, '...'))}, ndim {ndims[j]}"
        g, n = supplements[j - len(ndims)]
        return f"len_{g}={n}"

    n_groups = len(parsed.groups)
    column = {g: c for c, g in enumerate(parsed.groups)}
    # A term with '...' fixes nothing: its ellipsis takes whatever axes are left.
    equations = [(frozenset(), 0) if ELLIPSIS in term else
                 (frozenset(column[g] for g in term if is_group(g)), nd - nlower)
                 for term, nd, nlower in zip(parsed.inputs, ndims, counts)]
    equations += [(frozenset((column[g],)), n) for g, n in supplements]
    peeled = _peeled(equations, n_groups)
    if peeled is None:
        peeled = _run_totals_solved(equations, [[column[g] for g in run] for run in _runs_of(parsed)])
    if peeled is not None:
        # Every length (or run total) pinned: the equations have full rank over the runs, so
        # the string is determined (no need of the string-level analysis).
        return peeled
    info = string_level()
    system = _System(n_groups)
    for j, (ones, rhs) in enumerate(equations):
        clash = system.add(j, ones, rhs)
        if clash is not None:
            raise InconsistentError(
                f"inconsistent operands for {quoted(s)}: these group-length equations cannot all hold\n"
                f"{_equations(parsed, labels, equations, clash)}\n"
                "Check the operand order (operands follow the input terms left to right), "
                "each operand's ndim, and any len_* you passed."
            )

    free_columns = [c for c in range(n_groups) if c not in system.rows]
    determined = [c in system.rows and all(system.rows[c].coefficients[f] == 0 for f in free_columns)
                  for c in range(n_groups)]
    particular = [system.rows[c].rhs if c in system.rows else Fraction(0) for c in range(n_groups)]
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
            # The value came from the pivot rows of its run's members; each row records
            # every original equation that went into it.
            involved = sorted({j for m in run_of[c] if m in system.rows
                               for j, f in system.rows[m].combination.items() if f})
            raise InconsistentError(
                f"inconsistent operands for {quoted(s)}: group {g!r} would have {what} axes from\n"
                f"{_equations(parsed, labels, equations, involved)}\n"
                "Check the operand order (operands follow the input terms left to right), "
                "each operand's ndim, and any len_* you passed."
            )
    return tuple(int(v) for v in values)


def _peeled(equations: list[tuple[frozenset[int], int]], n_groups: int) -> tuple[int, ...] | None:
    """The lengths when equations with one unknown length left determine them all, one at a
    time, every length whole and non-negative and every equation holding; else None (the
    exact elimination then decides, and words any error).  Most strings are solved so: a
    term of one group, then the terms that group leaves one unknown in.  A unique solution is
    the elimination's too, so the result is the same either way, without its rationals.

    >>> _peeled([(frozenset({0, 1}), 3), (frozenset({1}), 2)], 2)
    (1, 2)
    >>> _peeled([(frozenset({0, 1}), 3)], 2) is None     # (one sum: the elimination's case)
    True
    """
    values: list[int | None] = [None] * n_groups
    progress = True
    while progress:
        progress = False
        for ones, rhs in equations:
            unknown = [c for c in ones if values[c] is None]
            if len(unknown) == 1:
                value = rhs - sum(values[c] or 0 for c in ones if c != unknown[0])
                if value < 0:
                    return None
                values[unknown[0]] = value
                progress = True
    known = [v for v in values if v is not None]
    if len(known) != n_groups:
        return None
    if any(sum(known[c] for c in ones) != rhs for ones, rhs in equations):
        return None
    return tuple(known)


#: `_run_totals_solved` leaves systems of more distinct equations than this to the exact
#: elimination (whose work per repeated equation is one integer comparison).
RUN_TOTALS_MAX_EQUATIONS = 64


def _run_totals_solved(equations: list[tuple[frozenset[int], int]],
                       runs: list[list[int]]) -> tuple[int, ...] | None:
    """The lengths when the equations have one solution in run totals (each co-travelling
    run's total given to its first member, 0 to the rest, as the exact elimination splits
    it), found by integer Gauss-Jordan elimination; else None (the exact elimination then
    decides, and words any error or underdetermination).  For the strings `_peeled` cannot
    solve, such as a cycle of groups ('BP,PQ,BQ->B'): a tenth of the exact elimination's
    time, which keeps the combinations every error message needs.  Rows are combined
    crosswise and divided by their gcd, as `_reduced_rows` does for the string-level rows
    (which carry no right-hand side).

    >>> _run_totals_solved([(frozenset({0, 1}), 3), (frozenset({1, 2}), 3), (frozenset({0, 2}), 2)],
    ...                    [[0], [1], [2]])
    (1, 2, 1)
    >>> _run_totals_solved([(frozenset({0, 1, 2}), 4)], [[0, 1], [2]]) is None   # (a free total)
    True
    """
    run_of = {c: r for r, members in enumerate(runs) for c in members}
    rows: set[tuple[frozenset[int], int]] = set()
    for ones, rhs in equations:
        cut = {run_of[c] for c in ones}
        if any(len(runs[r]) > 1 and not ones.issuperset(runs[r]) for r in cut):
            return None   # a pin inside a run: the exact elimination splits the run around it
        rows.add((frozenset(cut), rhs))
    n = len(runs)
    if len(rows) > RUN_TOTALS_MAX_EQUATIONS or len(rows) < n:
        return None
    matrix = [[int(r in cut) for r in range(n)] + [rhs] for cut, rhs in rows]
    for c in range(n):
        p = next((i for i in range(c, len(matrix)) if matrix[i][c]), None)
        if p is None:
            return None   # a run total the equations leave free
        matrix[c], matrix[p] = matrix[p], matrix[c]
        pivot = matrix[c]
        for i, row in enumerate(matrix):
            if i != c and row[c]:
                matrix[i] = _primitive([pivot[c] * x - row[c] * y for x, y in zip(row, pivot)])
    if any(row[-1] for row in matrix[n:]):
        return None   # inconsistent: the exact elimination names the equations
    values = [0] * len(run_of)
    for c, members in enumerate(runs):
        a, b = matrix[c][c], matrix[c][-1]
        if b % a or b // a < 0:
            return None   # not a whole, non-negative number of axes
        values[members[0]] = b // a
    return tuple(values)


def _input_terms(info: Identifiability) -> tuple[str, ...]:
    """The input terms of the string ``info`` describes."""
    return parse(info.subscripts).inputs


def _underdetermined_message(info: Identifiability, ndims: Sequence[int] = ()) -> str:
    groups = ", ".join(repr(g) for g in info.undetermined)
    pinned = f" (with {', '.join('len_' + g for g in info.supplied)} given)" if info.supplied else ""
    if info.minimum_pins == 1:
        fix = "Pass one of " + ", ".join(f"len_{g}=<number of axes>" for g in info.candidates) + "."
    else:
        more = "more " if info.supplied else ""
        fix = (f"Pass {info.minimum_pins} {more}supplements together "
               f"(each len_<G>=<number of axes>){_sets_text(info)}.")
    ellipsis = (" (a term with '...' fixes no length: its ellipsis takes the axes left over)"
                if any(ELLIPSIS in term for term in _input_terms(info)) else "")
    # A string of UPPERCASE letters only is most likely numpy's (which takes them as single
    # axes): say so first, with the lowercase string when it fits these operands.
    terms = [term.replace(ELLIPSIS, "") for term in _input_terms(info)]
    one_axis_each = len(ndims) == len(terms) and all(
        nd == len(term) or (ELLIPSIS in full and nd >= len(term))
        for nd, term, full in zip(ndims, terms, _input_terms(info)))
    hint = uppercase_hint(info.subscripts, one_axis_each)
    return (
        f"underdetermined subscripts {quoted(info.subscripts)}{pinned}: "
        f"{hint + '. As groups, the' if hint else 'the'} operands' ndims do "
        f"not determine the number of axes of groups {groups}: the input terms fix only "
        f"sums of these lengths{ellipsis}, and the solver leaves a split open only inside a "
        f"co-travelling run, where every split expands to the same einsum. {fix} This need comes from the "
        "string itself, not from these shapes: every call with this string needs the same "
        "supplement."
    )


def solve_lengths(subscripts: str, ndims: Sequence[int], **len_groups: int) -> dict[str, int]:
    """Number of axes of every group, for operands of these ``ndims``.

    >>> solve_lengths('WCa,Caib,WCi->WCb', (5, 5, 5))
    {'W': 2, 'C': 2}
    >>> solve_lengths('WKCi,Cio->WKCo', (5, 3))   # W, K co-travel: total 3, split canonically
    {'W': 3, 'K': 0, 'C': 1}
    """
    ndims = _checked_ndims(ndims)
    parsed, lengths = solve_call(subscripts, ndims, normalise_supplements(len_groups, subscripts, solve_lengths),
                                 what="ndim")
    return dict(zip(parsed.groups, lengths))


def _checked_ndims(ndims: Any) -> tuple[int, ...]:
    """``ndims`` as a tuple of ints; a non-int or negative entry is named by its position."""
    if isinstance(ndims, (str, bytes)) or not isinstance(ndims, Iterable):
        raise TypeError(f"solve_lengths: ndims must be a sequence of ints (one per input term), not "
                        f"{type(ndims).__name__}")
    out = []
    for k, n in enumerate(ndims):
        if isinstance(n, bool) or type(n).__name__ == "bool_":
            raise TypeError(f"solve_lengths: ndim {k} is a bool ({n!r}); pass the operand's ndim as an int")
        try:
            n = operator.index(n)
        except TypeError:
            raise TypeError(f"solve_lengths: ndim {k} must be an int, got {type(n).__name__} "
                            f"({n!r:.40}); pass the operand's ndim, e.g. x.ndim") from None
        if n < 0:
            raise InconsistentError(f"solve_lengths: ndim {k} is {n}; an ndim is 0 or more")
        out.append(n)
    return tuple(out)


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

