"""The matmul layout and time model: how one pairwise step is presented to a batched matmul.

A pairwise step contracts two operands.  Run as a batched matrix product, each operand must be
presented as a stack of matrices: batch axes first (anywhere, at any stride), then the matrix,
whose two label groups must each be one contiguous run of axes.  When an operand's axes are not
in such an order it is gathered (copied) into one.  This module prices every way of doing that
with a small time model fitted on the development machine and returns the cheapest
`MatmulLayout`.  It is pure planning (no arrays); the schedule stage calls it and the backends
only read the layout it chose.

>>> extents = {0: 8, 1: 16, 2: 32}
>>> layout = best_matmul_layout((0, 1), (1, 2), set(), {1}, extents, (0, 2))
>>> layout.left.copy, layout.right.copy, layout.left.free, layout.right.free
(False, False, (0,), (2,))

The fitted constants (``NS_PER_*``) are tunables: on a machine whose BLAS behaves differently
they can be re-measured and set here; nothing else encodes machine speed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "MatmulFactor",
    "MatmulLayout",
    "best_matmul_layout",
    "matmul_ns",
    "NS_PER_MATMUL_CALL",
    "NS_PER_MAC",
    "NS_PER_MATRIX_ELEMENT",
    "NS_PER_COPIED_ELEMENT",
    "NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT",
    "NS_PER_FRESH_ELEMENT",
    "FRESH_BUFFER_ELEMENTS",
    "fresh_buffer_ns",
]

Labels = tuple[int, ...]


def size_of(labels: Sequence[int], extents: dict[int, int]) -> int:
    """Number of elements spanned by ``labels``."""
    return math.prod(extents[label] for label in labels)


@dataclass(frozen=True)
class MatmulFactor:
    """How one operand is presented to a batched ``matmul`` as a stack of matrices.

    The stack's leading axes are the step's batch labels, then ``spread`` (this operand's free
    labels that are looped over like batch axes, size 1 in the other factor: matmul broadcasts),
    then the matrix (``free`` x contract for the left factor, contract x ``free`` for the right).
    ``copy``: gather into that order in C layout first.  Otherwise a strided view: batch and spread
    axes may sit anywhere at any stride; the ``free`` group and the contract group must each be a
    contiguous run of axes, one of them ending at the last axis so each matrix is BLAS-able;
    ``transposed`` when the matrix is stored column-major (a BLAS transpose flag, no copy).
    """

    free: Labels
    spread: Labels
    copy: bool
    transposed: bool


@dataclass(frozen=True)
class MatmulLayout:
    """The cheapest way found to run one pairwise step as ``left @ right``.

    ``cost`` is the modelled time in nanoseconds; ``swap`` is True when the step's second
    operand is the left factor; ``batch`` and ``contract`` give the order of those labels in
    the stacked product.
    """

    cost: float
    swap: bool
    batch: Labels
    contract: Labels
    left: MatmulFactor
    right: MatmulFactor


def _is_run(labels: Labels, group: Labels, at_end: bool) -> bool:
    """Do ``group``'s labels sit consecutively, in this order, in ``labels`` (ending it)?"""
    if not group:
        return True
    if group[0] not in labels:
        return False
    start = labels.index(group[0])
    if labels[start : start + len(group)] != group:
        return False
    return start + len(group) == len(labels) or not at_end


def _free_runs(labels: Labels, free: set[int]) -> list[Labels]:
    """Maximal runs of consecutive free labels (each a candidate matrix dimension)."""
    runs: list[Labels] = []
    current: list[int] = []
    for label in labels:
        if label in free:
            current.append(label)
        elif current:
            runs.append(tuple(current))
            current = []
    if current:
        runs.append(tuple(current))
    return runs


def _presentations(
    labels: Labels, free: Labels, contract: Labels, is_left: bool, size: int
) -> list[tuple[float, MatmulFactor]]:
    """Ways to present one operand as a matmul factor, each with its copy cost (elements)."""
    options = [(float(size), MatmulFactor(free=free, spread=(), copy=True, transposed=False))]
    free_set = set(free)
    for run in [*_free_runs(labels, free_set), ()]:
        spread = tuple(label for label in free if label not in run)
        # left factor: rows=run, cols=contract; right factor: rows=contract, cols=run
        outer, inner = (run, contract) if is_left else (contract, run)
        if inner and _is_run(labels, inner, at_end=True) and _is_run(labels, outer, at_end=False):
            options.append((0.0, MatmulFactor(free=run, spread=spread, copy=False, transposed=False)))
        if outer and _is_run(labels, outer, at_end=True) and _is_run(labels, inner, at_end=False):
            options.append((0.0, MatmulFactor(free=run, spread=spread, copy=False, transposed=True)))
    return options


# Time model for choosing a matmul layout, in nanoseconds, fitted on the development machine
# (2-core x86, OpenBLAS; 693 timed stacks of (m x k) @ (k x n) products with m, k, n in 2..64 and
# up to 4096 products per stack; median error 9%, 90% of points within -24%/+18%):
#   matmul of `calls` stacked products ~ calls * (18 + 0.0166 m k n + 0.275 (m k + k n + m n))
#       (small products run at 13 GFLOP/s for 9^3, 41 for 24^3: far below the 2-thread peak)
#   gathering an operand into a new layout ~ 1.5 per element (0.6 for the strided copy, the rest
#       for first-touching the freshly allocated pages: ~1 us per 4 KiB page fault on that VM)
#   a transposed right factor in a batched product: ~0.75 per result element more (OpenBLAS is
#       slower on it: (1296,64,6,6) 695 vs 305 us plain, (256,64,16,16) 332 vs 182 us); a
#       transposed left factor, or either one in a single 2-D product, costs nothing extra.
NS_PER_MATMUL_CALL = 18.0
NS_PER_MAC = 0.0166
NS_PER_MATRIX_ELEMENT = 0.275
NS_PER_COPIED_ELEMENT = 1.5
NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT = 0.75
# A result buffer above glibc's mmap threshold (128 KiB) is fresh pages every call: first-touch
# page faults cost ~1 us per 4 KiB page here, ~0.9 ns per element beyond the write itself (the
# 1.5 ns of a copied element minus its 0.6 ns strided copy).  Small results reuse warm memory.
NS_PER_FRESH_ELEMENT = 0.9
FRESH_BUFFER_ELEMENTS = 16384


def fresh_buffer_ns(elements: int) -> float:
    """Modelled page-fault cost of allocating a result of ``elements`` elements."""
    return NS_PER_FRESH_ELEMENT * elements if elements > FRESH_BUFFER_ELEMENTS else 0.0


def matmul_ns(calls: int, m: int, k: int, n: int) -> float:
    """Modelled nanoseconds for ``calls`` stacked ``(m x k) @ (k x n)`` products."""
    return calls * (
        NS_PER_MATMUL_CALL + NS_PER_MAC * m * k * n + NS_PER_MATRIX_ELEMENT * (m * k + k * n + m * n)
    )


def best_matmul_layout(
    lx: Labels,
    ly: Labels,
    batch: set[int],
    contract: set[int],
    extents: dict[int, int],
    final_order: Labels | None,
) -> MatmulLayout:
    """Choose operand roles, group orders and per-operand presentations for the fastest matmul.

    Every combination is priced with the time model above (copies, the stacked products, the
    transposed-right penalty).  Ties prefer a result already in output order, then more rows
    than columns (OpenBLAS is faster that way round for thin inner dimensions: (576x24)@(24x832)
    330 us vs 246 us for the transposed product).
    """
    best: MatmulLayout | None = None
    size_x, size_y = size_of(lx, extents), size_of(ly, extents)
    nb = size_of(tuple(batch), extents)
    for swap in (False, True):
        lp, lq, size_p, size_q = (ly, lx, size_y, size_x) if swap else (lx, ly, size_x, size_y)
        free_p = tuple(label for label in lp if label not in batch and label not in contract)
        free_q = tuple(label for label in lq if label not in batch and label not in contract)
        nk = size_of(tuple(contract), extents)
        for batch_source in (lp, lq):
            b = tuple(label for label in batch_source if label in batch)
            for contract_source in (lp, lq):
                c = tuple(label for label in contract_source if label in contract)
                for p_copied, p in _presentations(lp, free_p, c, True, size_p):
                    for q_copied, q in _presentations(lq, free_q, c, False, size_q):
                        calls = nb * size_of(p.spread, extents) * size_of(q.spread, extents)
                        rows, cols = size_of(p.free, extents), size_of(q.free, extents)
                        cost = NS_PER_COPIED_ELEMENT * (p_copied + q_copied) + matmul_ns(
                            calls, rows, nk, cols
                        )
                        if q.transposed and calls > 1:
                            cost += NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT * calls * rows * cols
                        result = b + p.spread + q.spread + p.free + q.free
                        if final_order is not None and result != final_order:
                            cost *= 1.0 + 1e-6  # tie-break: a strided result view is fine
                        if rows < cols:
                            cost *= 1.0 + 1e-9  # tie-break: orientation
                        if best is None or cost < best.cost:
                            best = MatmulLayout(cost=cost, swap=swap, batch=b, contract=c, left=p, right=q)
    assert best is not None
    return best


