"""The benchmark's workload: the repository's own grouped strings, given shapes at three sizes.

The strings come from an AST scan of ``contractions/`` and ``examples/`` (the same scan the
evidence harness uses), so the benchmark covers whatever the code actually contracts.

Sizes.  Every group gets ``GROUP_AXES`` sub-axes (so grouping is really exercised) and every
symbol (group sub-axis or lowercase letter) a starting extent per size class; then, while the
largest array of the contraction (any operand or the output) exceeds the class's element cap, the
largest extent in that array shrinks by a quarter, and while the best-path flop count (opt_einsum)
exceeds the class's flop cap, the largest extent overall does.  This keeps every string at a
comparable, meaningful size whatever its number of axes, and the whole run within minutes:

    tiny   all extents 2                       (overhead regime: arrays of 4..128 elements)
    mid    sub-axes 8, lowercase 24; <= 2**19 elements (4 MiB float64) per array, <= 2e8 flops
    large  sub-axes 16, lowercase 48; <= 2**22 elements (32 MiB float64) per array, <= 2e9 flops

    >>> case = make_case('WCa,Caib,WCi->WCb', 'tiny')
    >>> case.shapes
    ((2, 2, 2, 2, 2), (2, 2, 2, 2, 2), (2, 2, 2, 2, 2))
    >>> case.expanded
    'ABCDa,CDaib,ABCDi->ABCDb'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import opt_einsum

import contractions
from contractions.testing import scan_vocabulary

REPO = Path(__file__).resolve().parent.parent
SCANNED = (REPO / "contractions", REPO / "examples")
GROUP_AXES = 2

SIZE_CLASSES: dict[str, dict[str, float]] = {
    "tiny": {"sub_axis": 2, "lower": 2, "cap": 1 << 62, "flops": 1e30},
    "mid": {"sub_axis": 8, "lower": 24, "cap": 1 << 19, "flops": 2e8},
    "large": {"sub_axis": 16, "lower": 48, "cap": 1 << 22, "flops": 2e9},
}


@dataclass(frozen=True)
class Case:
    """One string at one size: shapes, the supplements ``contract`` needs, the expansion."""

    subscripts: str
    size: str
    shapes: tuple[tuple[int, ...], ...]
    supplements: tuple[tuple[str, int], ...]  # minimal len_G keywords (from identifiability)
    expanded: str  # the hand-expanded einsum string (what a user would write without groups)
    group_axes: tuple[tuple[str, tuple[int, ...]], ...]  # group -> its sub-axis extents
    lower: tuple[tuple[str, int], ...]  # lowercase letter -> extent

    @property
    def kwargs(self) -> dict[str, int]:
        return {f"len_{group}": n for group, n in self.supplements}

    def arrays(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(shape) for shape in self.shapes]

    @property
    def elements(self) -> int:
        """Total elements of the operands plus the output."""
        out = self.output_shape
        return sum(math.prod(s) for s in self.shapes) + math.prod(out)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return _term_shape(self.subscripts.split("->")[1], dict(self.group_axes), dict(self.lower))


def vocabulary() -> list[str]:
    """Distinct grouped strings of the scanned trees, in first-seen order."""
    seen: dict[str, None] = {}
    for entry in scan_vocabulary(list(SCANNED)):
        seen.setdefault(entry.subscripts.replace(" ", ""), None)
    return list(seen)


def _term_shape(term: str, groups: dict[str, tuple[int, ...]], lower: dict[str, int]) -> tuple[int, ...]:
    shape: list[int] = []
    for symbol in term:
        shape.extend(groups[symbol] if symbol.isupper() else (lower[symbol],))
    return tuple(shape)


def make_case(subscripts: str, size: str) -> Case:
    params = SIZE_CLASSES[size]
    lhs, out = subscripts.split("->")
    terms = lhs.split(",") + [out]
    group_names = sorted({c for c in subscripts if c.isupper()})
    lower_names = sorted({c for c in subscripts if c.islower()})
    # every symbol that carries one extent: (group, k) sub-axes and lowercase letters
    extent: dict[object, int] = {
        (g, k): int(params["sub_axis"]) for g in group_names for k in range(GROUP_AXES)
    }
    extent.update({c: int(params["lower"]) for c in lower_names})

    def symbols_of(term: str) -> list[object]:
        found: list[object] = []
        for c in term:
            found.extend([(c, k) for k in range(GROUP_AXES)] if c.isupper() else [c])
        return found

    def elements(term: str) -> int:
        return math.prod(extent[s] for s in symbols_of(term))

    while True:
        biggest = max(terms, key=elements)
        if elements(biggest) <= params["cap"]:
            break
        candidates = [s for s in symbols_of(biggest) if extent[s] > 2]
        if not candidates:
            break
        symbol = max(candidates, key=lambda s: extent[s])
        extent[symbol] = max(2, (extent[symbol] * 3) // 4)

    def flops() -> float:
        symbols = [symbols_of(term) for term in terms]
        letters = {
            s: opt_einsum.get_symbol(k) for k, s in enumerate(dict.fromkeys(x for t in symbols for x in t))
        }
        expr = (
            ",".join("".join(letters[s] for s in t) for t in symbols[:-1])
            + "->"
            + "".join(letters[s] for s in symbols[-1])
        )
        shapes = [tuple(extent[s] for s in t) for t in symbols[:-1]]
        return float(opt_einsum.contract_path(expr, *shapes, shapes=True, optimize="auto-hq")[1].opt_cost)

    while flops() > params["flops"]:
        candidates = [s for s in extent if extent[s] > 2]
        if not candidates:
            break
        symbol = max(candidates, key=lambda s: extent[s])
        extent[symbol] = max(2, (extent[symbol] * 3) // 4)

    groups = {g: tuple(extent[(g, k)] for k in range(GROUP_AXES)) for g in group_names}
    lower = {c: extent[c] for c in lower_names}
    shapes = tuple(_term_shape(term, groups, lower) for term in lhs.split(","))
    supplied = contractions.identifiability(subscripts).completion
    supplements = tuple((g, GROUP_AXES) for g in supplied)
    expanded = contractions.expand_subscripts(subscripts, *shapes, **{f"len_{g}": n for g, n in supplements})
    return Case(
        subscripts=subscripts,
        size=size,
        shapes=shapes,
        supplements=supplements,
        expanded=expanded,
        group_axes=tuple(groups.items()),
        lower=tuple(lower.items()),
    )
