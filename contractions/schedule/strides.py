"""Where a blocked run's arrays stay views: numpy's no-copy reshape rule, and matrices BLAS
reads as they lie.

A block slices the caller's operands and writes into its slice of the result buffer; both are
strided arrays.  Copying a slice contiguous (or a block's result into its slice) is a pass
over its memory; where the product can read the slice, or write its result, strided, that pass
is saved.  These are pure functions of shapes and strides (elements): the schedule decides,
the backends only follow (`View.contiguous_first`, `Blocking.in_place`).

>>> reshaped_strides((3, 4, 5), (40, 5, 1), (12, 5)) is None   # rows 8 apart in a run of 5: copies
True
>>> blas_matrix((6, 30), (1200, 1))            # rows of 30, 1200 apart: BLAS reads it as it lies
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .ir import Schedule, Shape, View, evolve
from .memory import _tokens_of

__all__ = ["blas_matrix", "reshaped_strides", "slice_is_a_view", "slices_as_views", "writes_in_place"]


def reshaped_strides(shape: Sequence[int], strides: Sequence[int],
                     new_shape: Sequence[int]) -> tuple[int, ...] | None:
    """The strides of ``new_shape`` as a view of an array of ``shape`` and ``strides``
    (elements), or None where that reshape must copy (numpy's rule: each run of old axes
    merged into new ones must step evenly).

    >>> reshaped_strides((3, 4, 5), (40, 5, 1), (3, 20))         # a slice of rows: merges
    (40, 1)
    >>> reshaped_strides((3, 4, 5), (40, 8, 1), (3, 20)) is None  # rows 8 apart: copies
    True
    """
    old = [(n, st) for n, st in zip(shape, strides) if n != 1]
    new = list(new_shape)
    found = [1] * len(new)
    if math.prod(new) != math.prod(n for n, _ in old):
        return None
    i = j = 0
    while i < len(old) and j < len(new):
        ip, jp = i + 1, j + 1
        have, want = old[i][0], new[j]
        while have != want:
            if have < want:
                have *= old[ip][0]
                ip += 1
            else:
                want *= new[jp]
                jp += 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(i, ip - 1)):
            return None
        found[jp - 1] = old[ip - 1][1]
        for k in range(jp - 1, j, -1):
            found[k - 1] = found[k] * new[k]
        i, j = ip, jp
    return tuple(found)


def blas_matrix(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a matrix of ``shape`` at ``strides`` is one BLAS reads (or writes) as it lies:
    one axis at unit stride, the other at least that axis's extent apart, both longer than 1
    (a vector's strides numpy may handle another way)."""
    (m, n), (sm, sn) = shape, strides
    return m > 1 and n > 1 and ((sn == 1 and sm >= n) or (sm == 1 and sn >= m))


def _c_strides(shape: Shape) -> list[int]:
    return [math.prod(shape[a + 1:]) for a in range(len(shape))]


def slice_is_a_view(base: Schedule, block: Schedule, j: int, view: View | None) -> bool:
    """Whether ``block``'s slice of operand ``j`` (a C array of ``base.shapes[j]``, cut to
    ``block``'s shape) reaches ``view``'s stack of matrices without a copy: the block prepares
    nothing on it, its permutation and reshape stay views (`reshaped_strides`) and each
    matrix is a `blas_matrix`.  Then the slice is handed to the product strided, not made
    contiguous first.

    >>> from contractions.schedule import schedule_labels
    >>> base = schedule_labels(((0, 1, 2), (0, 2, 3)), (0, 1, 3), ((6, 40, 30), (6, 30, 20)),
    ...                        strategy='pairwise')
    >>> block = schedule_labels(((0, 1, 2), (0, 2, 3)), (0, 1, 3), ((6, 20, 30), (6, 30, 20)),
    ...                         strategy='pairwise')
    >>> slice_is_a_view(base, block, 0, View(None, (6, 20, 30), contiguous_first=True))
    True
    """
    if (view is None or view.gather or not view.contiguous_first or (base.layouts or (0,) * (j + 1))[j]
            or not block.preparations[j].is_identity or len(block.shapes[j]) != len(base.shapes[j])):
        return False
    shape, strides = list(block.shapes[j]), _c_strides(base.shapes[j])
    if view.permutation is not None:
        if len(view.permutation) != len(shape):
            return False
        shape, strides = [shape[a] for a in view.permutation], [strides[a] for a in view.permutation]
    found = reshaped_strides(shape, strides, view.shape)
    return found is not None and len(found) >= 2 and blas_matrix(view.shape[-2:], found[-2:])


def slices_as_views(block: Schedule, base: Schedule, loop: Sequence[int], sliced: Sequence[bool],
                    past: int) -> Schedule:
    """``block`` with each product that takes a slice of an operand of more than ``past``
    elements handed it strided where that slice needs no copy (`slice_is_a_view`).  A
    smaller slice is still copied: the copy stays in cache and BLAS reads it faster
    (bench/model_ab.py: mid-sized blocks ran 0.9x strided, large ones 1.25x; decision 57)."""
    tokens = _tokens_of(block)
    steps = list(block.steps)
    for k in loop:
        step = steps[k]
        if step.kernel != "matmul":
            continue   # (einsum's loop over a strided slice walks more axes: copied, decision 33)
        views = []
        for view, (kind, j) in ((step.x_view, tokens[k][0]), (step.y_view, tokens[k][1])):
            if (kind == "o" and sliced[j] and math.prod(block.shapes[j]) > past
                    and slice_is_a_view(base, block, j, view)):
                view = evolve(view, contiguous_first=False)
            views.append(view)
        if views != [step.x_view, step.y_view]:
            steps[k] = evolve(step, x_view=views[0], y_view=views[1])
    return evolve(block, steps=tuple(steps)) if steps != list(block.steps) else block


def product_shape(step: Any) -> Shape | None:
    """The shape a matmul step's product has before its reshape to ``result_shape``: the
    stacks of its two factors broadcast, then its rows and columns (None: not a product)."""
    if step.kernel != "matmul" or step.x_view is None or step.y_view is None:
        return None
    left, right = (step.y_view, step.x_view) if step.swap else (step.x_view, step.y_view)

    def matrix(view: View) -> tuple[int, int]:
        rows, cols = view.shape[-2:]
        return (cols, rows) if view.swap_last else (rows, cols)

    if len(left.shape) != len(right.shape):
        return None
    stack = tuple(max(a, b) for a, b in zip(left.shape[:-2], right.shape[:-2]))
    return (*stack, matrix(left)[0], matrix(right)[1])


def writes_in_place(block: Schedule, storage_shape: Shape, accumulate: bool) -> bool:
    """Whether ``block``'s last product can write straight into its slice of a C-contiguous
    result buffer of ``storage_shape`` (``np.matmul(..., out=)``): a product with nothing summed
    after it and no sum before, its block finished without a permutation (the block is in
    storage order), not added into the buffer (``accumulate``), and the slice, reshaped to
    the product's shape, a view whose matrices are `blas_matrix`es.  Then the block's copy
    into the buffer is saved."""
    if accumulate or not block.steps or block.finish is None or block.finish.permutation is not None:
        return False
    step = block.steps[-1]
    raw = product_shape(step)
    if raw is None or step.reduce or step.sum_x or step.sum_y or len(raw) < 2:
        return False
    found = reshaped_strides(block.finish.shape, _c_strides(storage_shape), raw)
    return found is not None and blas_matrix(raw[-2:], found[-2:])
