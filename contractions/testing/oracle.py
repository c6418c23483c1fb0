"""The definitional loop oracle: the dialect's meaning (docs/dialect.md, "Meaning") executed
literally.

For every assignment of indices to every group's axes, slice each operand at those indices,
run the lowercase-only einsum on the slices, and write (groups in the output) or accumulate
(groups absent from the output) into the output. Size-1 group axes broadcast as in numpy.

numpy's ellipsis is read the same way: ``...`` is one more group whose axes are the broadcast
(right-aligned) of the operands' leftover axes; an operand whose ellipsis has fewer axes lines
up with the last ones. A string without ``->`` takes numpy's implicit output.

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
>>> loop_contract('...a,a', [np.ones((2, 3)), np.ones(3)], {}).tolist()
[3.0, 3.0]
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ELLIPSIS",
    "OracleTerms",
    "axis_layout",
    "loop_contract",
    "operand_shapes",
    "runs_by_definition",
    "split_terms",
]


ELLIPSIS = "."
"""How `OracleTerms` writes ``...`` (one character); `loop_contract` treats it as a group."""


def _is_group(char: str) -> bool:
    return "A" <= char <= "Z"


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
                if _is_group(char):
                    seen.setdefault(char)
        return tuple(seen)


def split_terms(subscripts: str) -> OracleTerms:
    """Split on '->' and ',' after dropping whitespace; no other validation beyond that.
    ``...`` becomes `ELLIPSIS`; without '->' the output is numpy's implicit one (the
    ellipsis, then the symbols seen exactly once, sorted).

    >>> split_terms(' WCa , Caib -> WCb ')
    OracleTerms(inputs=('WCa', 'Caib'), output='WCb')
    >>> split_terms('...ba,bc')
    OracleTerms(inputs=('.ba', 'bc'), output='.ac')
    """
    compact = "".join(subscripts.split()).replace("...", ELLIPSIS)
    if compact.count("->") > 1:
        raise ValueError(f"oracle needs at most one '->' in {subscripts!r}")
    if "->" in compact:
        lhs, output = compact.split("->")
        inputs = tuple(lhs.split(","))
        if ELLIPSIS not in lhs:  # numpy: an output '...' with none in the inputs is no axes
            output = output.replace(ELLIPSIS, "")
        return OracleTerms(inputs, output)
    inputs = tuple(compact.split(","))
    symbols = "".join(inputs)
    once = sorted(c for c in set(symbols) if symbols.count(c) == 1 and c != ELLIPSIS)
    return OracleTerms(inputs, (ELLIPSIS if ELLIPSIS in symbols else "") + "".join(once))


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
        if char == ELLIPSIS:
            shape.extend(int(n) for n in group_shapes["..."])
        elif _is_group(char):
            shape.extend(int(n) for n in group_shapes[char])
        else:
            shape.append(int(letter_sizes[char]))
    return tuple(shape)


def _lowercase(term: str) -> str:
    return "".join(c for c in term if not _is_group(c) and c != ELLIPSIS)


def axis_layout(term: str, group_shapes: Mapping[str, Sequence[int]],
                ndim: int | None = None) -> list[tuple[str, int]]:
    """Per axis of an operand: (group, sub-axis) for group axes, (letter, -1) for lowercase.

    The ellipsis is the group ``'...'``; an operand of ``ndim`` axes has as many ellipsis axes
    as are left over, which are the *last* sub-axes of ``group_shapes['...']`` (right-aligned).
    """
    layout: list[tuple[str, int]] = []
    for char in term:
        if char == ELLIPSIS:
            width = len(group_shapes["..."])
            rank = width if ndim is None else ndim - _fixed_axes(term, group_shapes)
            layout.extend(("...", k) for k in range(width - rank, width))
        elif _is_group(char):
            layout.extend((char, k) for k in range(len(group_shapes[char])))
        else:
            layout.append((char, -1))
    return layout


def _fixed_axes(term: str, group_shapes: Mapping[str, Sequence[int]]) -> int:
    return sum(len(group_shapes[c]) if _is_group(c) else 1 for c in term if c != ELLIPSIS)


def _ellipsis_shape(terms: OracleTerms, operands: Sequence[np.ndarray],
                    group_shapes: Mapping[str, Sequence[int]]) -> tuple[int, ...]:
    """The broadcast of every operand's leftover axes, right-aligned, as numpy defines it."""
    parts = []
    for term, op in zip(terms.inputs, operands):
        if ELLIPSIS in term:
            rank = op.ndim - _fixed_axes(term, group_shapes)
            if rank < 0:
                raise ValueError(f"operand for term {term!r} has too few axes ({op.ndim})")
            at = term.index(ELLIPSIS)
            before = _fixed_axes(term[:at], group_shapes)
            parts.append(op.shape[before:before + rank])
    width = max(map(len, parts), default=0)
    shape = []
    for k in range(width):
        sizes = {p[len(p) - width + k] for p in parts if len(p) - width + k >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"ellipsis axes do not broadcast: {parts}")
        shape.append(sizes.pop() if sizes else 1)
    return tuple(shape)


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
    group_names = list(terms.groups)
    if any(ELLIPSIS in term for term in terms.inputs):
        group_shapes = {**group_shapes, "...": _ellipsis_shape(terms, operands, group_shapes)}
        group_names.append("...")

    layouts = [axis_layout(term, group_shapes, op.ndim) for term, op in zip(terms.inputs, operands)]
    for term, layout, op in zip(terms.inputs, layouts, operands):
        if op.ndim != len(layout):
            raise ValueError(f"operand for term {term!r} has ndim {op.ndim}, expected {len(layout)}")
        for (name, k), extent in zip(layout, op.shape):
            if k >= 0 and extent not in (1, group_shapes[name][k]):
                raise ValueError(
                    f"group {name} sub-axis {k}: extent {extent} is neither 1 nor "
                    f"{group_shapes[name][k]}"
                )

    # np.einsum takes ASCII letters only: any other single-axis letter gets a stand-in
    letters = sorted({c for term in terms.inputs for c in _lowercase(term)})
    ascii_name = dict(zip(letters, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    lower_inputs = ["".join(ascii_name[c] for c in _lowercase(term)) for term in terms.inputs]
    lower_output = "".join(ascii_name[c] for c in _lowercase(terms.output))
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
        if char == ELLIPSIS:
            out_shape.extend(group_shapes["..."])
        else:
            out_shape.extend(group_shapes[char] if _is_group(char) else (lower_extent[ascii_name[char]],))
    out = np.zeros(out_shape, dtype=np.result_type(*operands))

    # Every sub-axis of every group, in a fixed order; the loop runs over their product.
    all_axes = [(g, k) for g in group_names for k in range(len(group_shapes[g]))]
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
            name = "..." if char == ELLIPSIS else char
            if char == ELLIPSIS or _is_group(char):
                out_index.extend(index_of[(name, k)] for k in range(len(group_shapes[name])))
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
            if not _is_group(char):
                continue
            after = term[i + 1] if i + 1 < len(term) else None
            before = term[i - 1] if i > 0 else None
            followers.setdefault(char, set()).add(after)
            leaders.setdefault(char, set()).add(before)
    successor: dict[str, str] = {}
    for x, nexts in followers.items():
        if len(nexts) == 1:
            (y,) = nexts
            if y is not None and _is_group(y) and leaders[y] == {x}:
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
