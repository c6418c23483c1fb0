"""Independent references shared by the backend tests.

`loop_reference` evaluates a grouped string with the definitional loop oracle, reading each
group's broadcast extents off the operands with group lengths the *test* states, so neither
the library's solver nor its expansion is involved.  Cheap when most group axes have extent 1,
which is how the tests reach more than 52 axes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from contractions.testing.oracle import loop_contract


def broadcast_group_shapes(subscripts: str, arrays: Sequence[np.ndarray],
                           lengths: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    """Each group's extents, broadcast (size 1 against n) across the operands carrying it."""
    shapes: dict[str, tuple[int, ...]] = {}
    for term, array in zip(subscripts.split("->")[0].split(","), arrays):
        position = 0
        for symbol in term:
            count = lengths[symbol] if symbol.isupper() else 1
            if symbol.isupper():
                own = tuple(array.shape[position:position + count])
                shapes[symbol] = tuple(np.broadcast_shapes(shapes.get(symbol, own), own))
            position += count
    return shapes


def loop_reference(subscripts: str, arrays: Sequence[np.ndarray],
                   lengths: Mapping[str, int]) -> np.ndarray:
    """The loop oracle's value of ``subscripts`` on ``arrays`` with these group lengths."""
    arrays = [np.asarray(a) for a in arrays]
    return loop_contract(subscripts, arrays, broadcast_group_shapes(subscripts, arrays, lengths))
