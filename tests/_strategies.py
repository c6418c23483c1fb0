"""Hypothesis strategies for random grouped contractions, and an independent hand expansion.

`grouped_problems()` draws a valid grouped string together with explicit group shapes and
letter extents.  `hand_expand` writes the plain einsum string for those shapes with its own
letter assignment (lowercase axes renamed too), so it shares no code with
`contractions.expand`.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

GROUP_POOL = "WKCVB"
LETTER_POOL = "abcde"


@dataclass(frozen=True)
class Problem:
    subscripts: str
    inputs: tuple[str, ...]
    output: str
    group_shapes: dict
    letter_sizes: dict

    def operand_shapes(self):
        return [self.term_shape(t) for t in self.inputs]

    def term_shape(self, term):
        shape = []
        for ch in term:
            shape.extend(self.group_shapes[ch] if ch.isupper() else (self.letter_sizes[ch],))
        return tuple(shape)

    def output_shape(self):
        return self.term_shape(self.output)


@st.composite
def grouped_problems(draw, max_terms=3, max_group_axes=2, allow_diagonals=True, min_groups=1):
    n_groups = draw(st.integers(min_groups, 3))
    groups = draw(st.permutations(GROUP_POOL))[:n_groups]
    n_letters = draw(st.integers(0, 3))
    letters = list(LETTER_POOL[:n_letters])
    n_terms = draw(st.integers(1, max_terms))
    inputs = []
    for _ in range(n_terms):
        chosen = draw(st.lists(st.sampled_from(groups + letters), min_size=1, max_size=5))
        term, seen_groups = [], set()
        for ch in chosen:
            if ch.isupper():
                if ch in seen_groups:
                    continue
                seen_groups.add(ch)
            elif ch in term and not allow_diagonals:
                continue
            term.append(ch)
        inputs.append("".join(term))
    used = sorted(set("".join(inputs)))
    out = draw(st.lists(st.sampled_from(used), unique=True, max_size=len(used))) if used else []
    output = "".join(out)
    used_groups = [g for g in groups if g in "".join(inputs)]
    group_shapes = {
        g: tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=max_group_axes)))
        for g in used_groups
    }
    letter_sizes = {c: draw(st.integers(1, 3)) for c in letters}
    subscripts = ",".join(inputs) + "->" + output
    return Problem(subscripts, tuple(inputs), output, group_shapes, letter_sizes)


def hand_expand(problem: Problem) -> str:
    """Plain einsum string for ``problem``'s group shapes, letters assigned independently."""
    pool = iter(string.ascii_letters[::-1])  # from 'Z' downwards: deliberately unlike the library
    names: dict[tuple[str, int], str] = {}

    def symbols(term):
        out = []
        for ch in term:
            count = len(problem.group_shapes[ch]) if ch.isupper() else 1
            for k in range(count):
                if (ch, k) not in names:
                    names[(ch, k)] = next(pool)
                out.append(names[(ch, k)])
        return "".join(out)

    return ",".join(symbols(t) for t in problem.inputs) + "->" + symbols(problem.output)


def random_operands(problem: Problem, rng: np.random.Generator, dtype=np.float64):
    return [rng.standard_normal(shape).astype(dtype) for shape in problem.operand_shapes()]


def needed_supplements(problem: Problem, info) -> dict:
    """The len_* keywords that complete ``problem`` (one smallest completion)."""
    return {f"len_{g}": len(problem.group_shapes[g]) for g in info.completion}
