"""The definitional loop oracle: the dialect's meaning (docs/dialect.md, "Meaning") executed
literally.

For every assignment of indices to every group's axes, slice each operand at those indices,
run the lowercase-only einsum on the slices, and write (groups in the output) or accumulate
(groups absent from the output) into the output. Size-1 group axes broadcast as in numpy.

It shares no mechanism with the library: it has its own few-line parser (split on ',' and
'->'), is told every group's axes explicitly instead of solving for them, never expands a
group into einsum letters, and never imports anything from `contractions`. It is slow by
design (one `np.einsum` per index assignment); keep extents small.

>>> import numpy as np
>>> x = np.arange(6.0).reshape(2, 3)          # W = (2,), a = 3
>>> m = np.ones((3, 2))                        # a = 3, b = 2
>>> loop_contract('Wa,ab->Wb', [x, m], {'W': (2,)}).tolist()
[[3.0, 3.0], [12.0, 12.0]]
>>> operand_shapes('WCa,Cab->WCb', {'W': (2, 3), 'C': ()}, {'a': 4, 'b': 5})
((2, 3, 4), (4, 5))
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "OracleTerms",
    "axis_layout",
    "loop_contract",
    "operand_shapes",
    "runs_by_definition",
    "split_terms",
]


@dataclass(frozen=True)
class OracleTerms:
    """The oracle's own reading of a subscripts string: input terms and output term."""

    inputs: tuple[str, ...]
    output: str

    @property
    def groups(self) -> tuple[str, ...]:
        """Uppercase letters in first-appearance order (inputs, then output)."""
        seen: dict[str, None] = {}
        for term in (*self.inputs, self.output):
            for char in term:
                if char.isupper():
                    seen.setdefault(char)
        return tuple(seen)


def split_terms(subscripts: str) -> OracleTerms:
    """Split on '->' and ',' after dropping whitespace; no other validation beyond that.

    >>> split_terms(' WCa , Caib -> WCb ')
    OracleTerms(inputs=('WCa', 'Caib'), output='WCb')
    """
    compact = "".join(subscripts.split())
    if compact.count("->") != 1:
        raise ValueError(f"oracle needs exactly one '->' in {subscripts!r}")
    lhs, output = compact.split("->")
    return OracleTerms(tuple(lhs.split(",")), output)


def operand_shapes(
    subscripts: str,
    group_shapes: Mapping[str, Sequence[int]],
    letter_sizes: Mapping[str, int],
) -> tuple[tuple[int, ...], ...]:
    """The operand shapes the string implies for the given group shapes and letter sizes."""
    terms = split_terms(subscripts)
    return tuple(_term_shape(term, group_shapes, letter_sizes) for term in terms.inputs)


def _term_shape(
    term: str, group_shapes: Mapping[str, Sequence[int]], letter_sizes: Mapping[str, int]
) -> tuple[int, ...]:
    shape: list[int] = []
    for char in term:
        if char.isupper():
            shape.extend(int(n) for n in group_shapes[char])
        else:
            shape.append(int(letter_sizes[char]))
    return tuple(shape)


def _lowercase(term: str) -> str:
    return "".join(c for c in term if not c.isupper())


def axis_layout(term: str, group_shapes: Mapping[str, Sequence[int]]) -> list[tuple[str, int]]:
    """Per axis of an operand: (group, sub-axis) for group axes, (letter, -1) for lowercase."""
    layout: list[tuple[str, int]] = []
    for char in term:
        if char.isupper():
            layout.extend((char, k) for k in range(len(group_shapes[char])))
        else:
            layout.append((char, -1))
    return layout


def loop_contract(
    subscripts: str,
    operands: Sequence[np.ndarray],
    group_shapes: Mapping[str, Sequence[int]],
) -> np.ndarray:
    """Evaluate `subscripts` on `operands` by the loop definition (docs/dialect.md, "Meaning").

    `group_shapes[G]` is the full (broadcast) extent of each of G's axes; its length is the
    number of axes G has. An operand's group axis may instead have extent 1 (broadcast).
    """
    terms = split_terms(subscripts)
    operands = [np.asarray(op) for op in operands]
    if len(operands) != len(terms.inputs):
        raise ValueError(
            f"{subscripts!r} has {len(terms.inputs)} input terms but {len(operands)} operands"
        )
    missing = [g for g in terms.groups if g not in group_shapes]
    if missing:
        raise ValueError(f"oracle needs the shape of group(s) {missing} for {subscripts!r}")

    layouts = [axis_layout(term, group_shapes) for term in terms.inputs]
    for term, layout, op in zip(terms.inputs, layouts, operands):
        if op.ndim != len(layout):
            raise ValueError(f"operand for term {term!r} has ndim {op.ndim}, expected {len(layout)}")
        for (name, k), extent in zip(layout, op.shape):
            if k >= 0 and extent not in (1, group_shapes[name][k]):
                raise ValueError(
                    f"group {name} sub-axis {k}: extent {extent} is neither 1 nor "
                    f"{group_shapes[name][k]}"
                )

    lower_inputs = [_lowercase(term) for term in terms.inputs]
    lower_output = _lowercase(terms.output)
    lower_expr = ",".join(lower_inputs) + "->" + lower_output

    # The lowercase part of the output shape, found on stand-ins with the group axes removed
    # (works even when some group has a zero extent and the loop below never runs).
    stand_ins = [
        np.zeros([n for (name, k), n in zip(layout, op.shape) if k < 0])
        for layout, op in zip(layouts, operands)
    ]
    lower_shape = np.einsum(lower_expr, *stand_ins).shape

    # The output in the output term's own order: group axes where the groups stand, and the
    # lowercase axes (in the order the slice einsum returns them) where the letters stand.
    lower_extent = dict(zip(lower_output, lower_shape))
    out_shape: list[int] = []
    for char in terms.output:
        out_shape.extend(group_shapes[char] if char.isupper() else (lower_extent[char],))
    out = np.zeros(out_shape, dtype=np.result_type(*operands))

    # Every sub-axis of every group, in a fixed order; the loop runs over their product.
    all_axes = [(g, k) for g in terms.groups for k in range(len(group_shapes[g]))]
    ranges = [range(int(group_shapes[g][k])) for g, k in all_axes]
    for assignment in itertools.product(*ranges):
        index_of = dict(zip(all_axes, assignment))
        slices = []
        for layout, op in zip(layouts, operands):
            idx = tuple(
                (index_of[(name, k)] if op.shape[axis] != 1 else 0) if k >= 0 else slice(None)
                for axis, (name, k) in enumerate(layout)
            )
            slices.append(op[idx])
        out_index: list[int | slice] = []
        for char in terms.output:
            if char.isupper():
                out_index.extend(index_of[(char, k)] for k in range(len(group_shapes[char])))
            else:
                out_index.append(slice(None))
        out[tuple(out_index)] += np.einsum(lower_expr, *slices)
    return out


def runs_by_definition(subscripts: str) -> tuple[tuple[str, ...], ...]:
    """Maximal co-travelling runs (length >= 2) by their definition (docs/solver.md,
    "Co-travelling runs"), read off the terms.

    X, Y pair when every occurrence of X (inputs and output) is immediately followed by Y and
    every occurrence of Y is immediately preceded by X; chains of pairs form a run. Computed
    here from the oracle's own parse, independently of the library's solver.

    >>> runs_by_definition('WKCi,Cio->WKCo')
    (('W', 'K'),)
    >>> runs_by_definition('WCo,WCa->Cao')
    ()
    """
    terms = split_terms(subscripts)
    all_terms = (*terms.inputs, terms.output)
    followers: dict[str, set[str | None]] = {}
    leaders: dict[str, set[str | None]] = {}
    for term in all_terms:
        for i, char in enumerate(term):
            if not char.isupper():
                continue
            after = term[i + 1] if i + 1 < len(term) else None
            before = term[i - 1] if i > 0 else None
            followers.setdefault(char, set()).add(after)
            leaders.setdefault(char, set()).add(before)
    successor: dict[str, str] = {}
    for x, nexts in followers.items():
        if len(nexts) == 1:
            (y,) = nexts
            if y is not None and y.isupper() and leaders[y] == {x}:
                successor[x] = y
    has_predecessor = set(successor.values())
    runs = []
    for group in terms.groups:
        if group in successor and group not in has_predecessor:
            run = [group]
            while run[-1] in successor:
                run.append(successor[run[-1]])
            runs.append(tuple(run))
    return tuple(runs)
