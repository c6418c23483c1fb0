"""Every shape the suites use, chosen in one place: the oracle's shape matrix, the call-site,
split-invariance and sharding cases.

Shapes are chosen from the string alone (its groups and letters, via the oracle's own parse);
group lengths are *chosen* here and then told to `contract` only through the operands' ndims
and the supplements the table (or the call site) names — never read back from the library.

>>> [c.name for c in shape_matrix('WCa,Caib,WCi->WCb')]
['empty', 'single', 'multi', 'mixed-0', 'mixed-1', 'mixed-2', 'broadcast', 'zero-extent']
>>> shape_matrix('Wa->Wa')[2].group_shapes
{'W': (2, 3)}
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .oracle import ELLIPSIS, axis_layout, split_terms

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ShapeCase",
    "call_site_cases",
    "letter_sizes",
    "random_operands",
    "shape_matrix",
    "sharded_group_shapes",
    "split_case",
    "split_cases",
    "supplement_kwargs",
]

# Above this many index assignments the loop oracle gets slow; the matrix shrinks instead.
LOOP_BUDGET = 4096


@dataclass(frozen=True)
class ShapeCase:
    """Group shapes (full extents), letter sizes, and per-operand size-1 broadcast overrides.

    `broadcast` lists (operand index, group, sub-axis) whose extent is 1 in that operand.

    >>> case = ShapeCase('c', {'W': (2, 3)}, {'a': 4}, broadcast=((0, 'W', 1),))
    >>> case.shapes('Wa,Wa->Wa'), case.output_shape('Wa,Wa->Wa')
    ([(2, 1, 4), (2, 3, 4)], (2, 3, 4))
    """

    name: str
    group_shapes: dict[str, tuple[int, ...]]
    letter_sizes: dict[str, int]
    broadcast: tuple[tuple[int, str, int], ...] = ()

    def _term_shape(self, index: int, term: str) -> tuple[int, ...]:
        return tuple(
            self.letter_sizes[name]
            if k < 0
            else (1 if (index, name, k) in self.broadcast else self.group_shapes[name][k])
            for name, k in axis_layout(term, self.group_shapes)
        )

    def shapes(self, subscripts: str) -> list[tuple[int, ...]]:
        """The operands' shapes (with the broadcast overrides)."""
        return [self._term_shape(i, term) for i, term in enumerate(split_terms(subscripts).inputs)]

    def output_shape(self, subscripts: str) -> tuple[int, ...]:
        """The shape the output term implies for these group shapes and letter sizes."""
        return self._term_shape(-1, split_terms(subscripts).output)


def letter_sizes(subscripts: str, sizes: Sequence[int] = (2, 3, 4)) -> dict[str, int]:
    """A size per single-axis letter (any letter but A-Z), cycling through `sizes` in
    alphabetical order."""
    terms = split_terms(subscripts)
    letters = sorted({c for term in (*terms.inputs, terms.output) for c in term
                      if c.isalpha() and not "A" <= c <= "Z"})
    return {c: sizes[i % len(sizes)] for i, c in enumerate(letters)}


def _loop_count(group_shapes: Mapping[str, Sequence[int]]) -> int:
    return math.prod(math.prod(s) for s in group_shapes.values())


def _shrink(group_shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Trim trailing groups' extra axes until the loop oracle's iteration count is in budget."""
    shapes = dict(group_shapes)
    for group in reversed(list(shapes)):
        if _loop_count(shapes) <= LOOP_BUDGET:
            break
        if len(shapes[group]) > 1:
            shapes[group] = shapes[group][:1]
    for group in reversed(list(shapes)):
        if _loop_count(shapes) <= LOOP_BUDGET:
            break
        shapes[group] = tuple(min(n, 2) for n in shapes[group])
    return shapes


def _one_axis_each(groups: Sequence[str]) -> dict[str, tuple[int, ...]]:
    return {g: ((2, 3)[i % 2],) for i, g in enumerate(groups)}


def shape_matrix(subscripts: str) -> list[ShapeCase]:
    """The oracle suite's shapes: empty, single-axis and multi-axis groups, and mixtures.

    - empty: every group has zero axes;  single: one axis each (2 or 3);
    - multi: two axes each ((2,3) / (3,2));  mixed-k: groups cycle through (), (3,), (2,3);
    - broadcast: multi, with a size-1 sub-axis in the first operand of each shared group;
    - zero-extent: single, with the first group's axis of extent 0.
    """
    terms = split_terms(subscripts)
    groups = terms.groups
    sizes = letter_sizes(subscripts)
    cases = [
        ShapeCase("empty", {g: () for g in groups}, sizes),
        ShapeCase("single", _one_axis_each(groups), sizes),
        ShapeCase("multi", _shrink({g: ((2, 3), (3, 2))[i % 2] for i, g in enumerate(groups)}), sizes),
    ]
    if len(groups) >= 2:
        pattern: tuple[tuple[int, ...], ...] = ((), (3,), (2, 3))
        for shift in range(3):
            shapes = {g: pattern[(i + shift) % 3] for i, g in enumerate(groups)}
            cases.append(ShapeCase(f"mixed-{shift}", _shrink(shapes), sizes))
    shared = [g for g in groups if sum(g in term for term in terms.inputs) >= 2]
    if shared:
        multi = cases[2].group_shapes
        broadcast = tuple(
            (next(i for i, term in enumerate(terms.inputs) if g in term), g, 0) for g in shared
        )
        cases.append(ShapeCase("broadcast", multi, sizes, broadcast))
    if groups:
        zero = _one_axis_each(groups)
        zero[groups[0]] = (0,)
        cases.append(ShapeCase("zero-extent", zero, sizes))
    if any(ELLIPSIS in term for term in terms.inputs):
        cases = _with_ellipsis(terms.inputs, cases)
    return cases


# The ellipsis's axes per case (the oracle reads '...' as one more group).
_ELLIPSIS_SHAPES = {"empty": (), "single": (2,), "multi": (3, 2), "zero-extent": (2,)}


def _with_ellipsis(inputs: Sequence[str], cases: list[ShapeCase]) -> list[ShapeCase]:
    """Every case with axes for '...' too, plus one where the first ellipsis broadcasts (its
    first axis of extent 1)."""
    out = [ShapeCase(c.name, {**c.group_shapes, "...": _ELLIPSIS_SHAPES.get(c.name, (3,))},
                     c.letter_sizes, c.broadcast) for c in cases]
    first = next(i for i, term in enumerate(inputs) if ELLIPSIS in term)
    base = out[0]
    out.append(ShapeCase("ellipsis-broadcast", {**base.group_shapes, "...": (3, 2)},
                         base.letter_sizes, ((first, "...", 0),)))
    return out


def call_site_cases(subscripts: str, pinned: Mapping[str, int]) -> list[ShapeCase]:
    """The call-site suite's shapes: groups a call site pins with a literal `len_<G>=n` get
    n axes, every other group one axis, then two (each of extent 2).

    >>> [c.group_shapes for c in call_site_cases('WCo,WCa->Cao', {'W': 0})]
    [{'W': (), 'C': (2,)}, {'W': (), 'C': (2, 2)}]
    """
    terms = split_terms(subscripts)
    ellipsis = {"...": (2,)} if any(ELLIPSIS in term for term in terms.inputs) else {}
    return [
        ShapeCase(
            f"call-site-{default_axes}",
            {**{g: (2,) * pinned.get(g, default_axes) for g in terms.groups}, **ellipsis},
            letter_sizes(subscripts),
        )
        for default_axes in (1, 2)
    ]


def split_case(subscripts: str, run: Sequence[str]) -> tuple[ShapeCase, int]:
    """The split-invariance suite's shapes for one co-travelling run, and the run's total.

    The run's total (3 axes for a pair, else 2) is given to its first member, the other
    members get none; groups outside the run get one axis. The operands only ever see the
    total, so any split of it describes the same operands.

    >>> case, total = split_case('WKCi,Cio->WKCo', ('W', 'K'))
    >>> case.group_shapes, total
    ({'W': (2, 3, 2), 'K': (), 'C': (2,)}, 3)
    """
    total = 3 if len(run) == 2 else 2
    group_shapes: dict[str, tuple[int, ...]] = {g: (2,) for g in split_terms(subscripts).groups}
    for member in run:
        group_shapes[member] = ()
    group_shapes[run[0]] = (2, 3, 2)[:total]
    if any(ELLIPSIS in term for term in split_terms(subscripts).inputs):
        group_shapes["..."] = (2,)
    return ShapeCase(f"run-{''.join(run)}", group_shapes, letter_sizes(subscripts)), total


def split_cases(run: Sequence[str], total: int) -> list[tuple[int, ...]]:
    """Every split of `total` axes over the members of `run` (compositions with zeros).

    >>> split_cases(('W', 'K'), 2)
    [(0, 2), (1, 1), (2, 0)]
    """
    if len(run) == 1:
        return [(total,)]
    return [
        (first, *rest)
        for first in range(total + 1)
        for rest in split_cases(run[1:], total - first)
    ]


def sharded_group_shapes(
    groups: Sequence[str], group: str, sub_axis: int, *, devices: int, axes_per_group: int,
    other_extent: int,
) -> dict[str, tuple[int, ...]]:
    """The sharding sweep's shapes: `axes_per_group` sub-axes per group, all of extent
    `other_extent` except `group`'s `sub_axis`, whose extent is the device count.

    >>> sharded_group_shapes(['W', 'C'], 'C', 1, devices=4, axes_per_group=2, other_extent=2)
    {'W': (2, 2), 'C': (2, 4)}
    """
    return {
        g: tuple(
            devices if (g == group and k == sub_axis) else other_extent
            for k in range(axes_per_group)
        )
        for g in groups
    }


def random_operands(subscripts: str, case: ShapeCase, seed_text: str = "") -> list[np.ndarray]:
    """float64 operands of the case's shapes, seeded from the string and case name."""
    import numpy as np

    seed = zlib.crc32(f"{subscripts}|{case.name}|{seed_text}".encode())
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in case.shapes(subscripts)]


def supplement_kwargs(
    groups: Iterable[str], group_shapes: Mapping[str, Sequence[int]]
) -> dict[str, int]:
    """`len_<G>=number of axes` for each named group."""
    return {f"len_{g}": len(group_shapes[g]) for g in groups}
