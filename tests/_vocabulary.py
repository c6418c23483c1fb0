"""The repo's vocabulary (every string of tests/identifiability_table.txt) with random data.

`vocabulary()` reads the hand-decided table directly (no library code), and `random_problem`
draws group lengths and extents for one string, builds the operands itself and returns the
`len_*` keywords the table says the string needs, so a test can compare any backend with the
loop oracle on every string the code base uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

TABLE = Path(__file__).with_name("identifiability_table.txt")


def vocabulary() -> list[tuple[str, tuple[str, ...]]]:
    """``(subscripts, groups that need a len_*)`` for every table entry, in file order."""
    entries = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        subscripts, *supplements = line.split()
        pins = tuple(s[4:] for s in supplements if s != "-")
        entries.append((subscripts, pins))
    return entries


@dataclass(frozen=True)
class VocabularyProblem:
    subscripts: str
    operands: tuple[np.ndarray, ...]
    group_shapes: dict[str, tuple[int, ...]]
    len_kwargs: dict[str, int]


def random_problem(subscripts: str, pins: tuple[str, ...], rng: np.random.Generator,
                   max_group_axes: int = 2, extents: tuple[int, int] = (1, 3),
                   dtype: type = np.float64) -> VocabularyProblem:
    """Operands for ``subscripts`` with random group lengths (0..max) and extents."""
    lhs, _ = subscripts.split("->")
    terms = lhs.split(",")
    symbols = sorted(set(lhs.replace(",", "")))
    group_shapes = {s: tuple(int(n) for n in rng.integers(extents[0], extents[1] + 1,
                                                           size=int(rng.integers(0, max_group_axes + 1))))
                    for s in symbols if s.isupper()}
    letters = {s: int(rng.integers(extents[0], extents[1] + 1)) for s in symbols if not s.isupper()}
    operands = []
    for term in terms:
        shape: list[int] = []
        for s in term:
            shape.extend(group_shapes[s] if s.isupper() else (letters[s],))
        operands.append(rng.standard_normal(shape).astype(dtype))
    return VocabularyProblem(subscripts, tuple(operands), group_shapes,
                             {f"len_{g}": len(group_shapes[g]) for g in pins})
