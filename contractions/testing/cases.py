"""Shape choices for the suites: the oracle's shape matrix, call-site and split-invariance cases.

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

import numpy as np

from .oracle import split_terms

__all__ = [
    "ShapeCase",
    "call_site_group_shapes",
    "letter_sizes",
    "random_operands",
    "shape_matrix",
    "split_cases",
    "supplement_kwargs",
]

# Above this many index assignments the loop oracle gets slow; the matrix shrinks instead.
LOOP_BUDGET = 4096


@dataclass(frozen=True)
class ShapeCase:
    """Group shapes (full extents), letter sizes, and per-operand size-1 broadcast overrides.

    `broadcast` lists (operand index, group, sub-axis) whose extent is 1 in that operand.
    """

    name: str
    group_shapes: dict[str, tuple[int, ...]]
    letter_sizes: dict[str, int]
    broadcast: tuple[tuple[int, str, int], ...] = ()

    def shapes(self, subscripts: str) -> list[tuple[int, ...]]:
        terms = split_terms(subscripts)
        shapes = []
        for index, term in enumerate(terms.inputs):
            shape: list[int] = []
            for char in term:
                if char.isupper():
                    for k, n in enumerate(self.group_shapes[char]):
                        shape.append(1 if (index, char, k) in self.broadcast else n)
                else:
                    shape.append(self.letter_sizes[char])
            shapes.append(tuple(shape))
        return shapes


def letter_sizes(subscripts: str) -> dict[str, int]:
    """Small distinct-ish sizes per lowercase letter (2, 3, 4, 2, ...), in alphabetical order."""
    terms = split_terms(subscripts)
    letters = sorted({c for term in (*terms.inputs, terms.output) for c in term if c.islower()})
    return {c: (2, 3, 4)[i % 3] for i, c in enumerate(letters)}


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
    return cases


def random_operands(subscripts: str, case: ShapeCase, seed_text: str = "") -> list[np.ndarray]:
    """float64 operands of the case's shapes, seeded from the string and case name."""
    seed = zlib.crc32(f"{subscripts}|{case.name}|{seed_text}".encode())
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in case.shapes(subscripts)]


def supplement_kwargs(
    groups: Iterable[str], group_shapes: Mapping[str, Sequence[int]]
) -> dict[str, int]:
    """`len_<G>=number of axes` for each named group."""
    return {f"len_{g}": len(group_shapes[g]) for g in groups}


def call_site_group_shapes(
    subscripts: str, pinned: Mapping[str, int], default_axes: int = 1, extent: int = 2
) -> dict[str, tuple[int, ...]]:
    """Group shapes consistent with a call site's literal `len_*` values (others: default)."""
    return {
        g: (extent,) * pinned.get(g, default_axes) for g in split_terms(subscripts).groups
    }


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
