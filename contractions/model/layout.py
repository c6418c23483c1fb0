"""The matmul layout: how one pairwise step is presented to a batched matmul.

A pairwise step contracts two operands.  Run as a batched matrix product, each operand must be
presented as a stack of matrices: batch axes first (anywhere, at any stride), then the matrix,
whose two label groups must each be one contiguous run of axes.  When an operand's axes are not
in such an order it is gathered (copied) into one.  `best_matmul_layout` prices every way of
doing that with a `CostModel` and returns the cheapest `MatmulLayout`.  It is pure planning (no
arrays); the schedule stage calls it and the backends only read the layout it chose.

>>> extents = {0: 8, 1: 16, 2: 32}
>>> layout = best_matmul_layout((0, 1), (1, 2), set(), {1}, extents, (0, 2))
>>> layout.left.copy, layout.right.copy, layout.left.free, layout.right.free
(False, False, (0,), (2,))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .numpy_prices import NUMPY_MODEL, access_pattern, gather_passes
from .profile import Profile, active_profile
from .protocol import CostModel, Labels, size_of

__all__ = ["MatmulFactor", "MatmulLayout", "best_matmul_layout", "factor_memory_ns", "factor_order",
           "factor_read_ns", "profile_of"]


def profile_of(model: Any) -> Profile:
    """The profile a cost model carries (its ``profile``), else the active one: where the
    schedule reads the decision margins that are not questions of the protocol."""
    found = getattr(model, "profile", None)
    return found if isinstance(found, Profile) else active_profile()


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


def _views(labels: Labels, free: Labels, contract: Labels, is_left: bool) -> list[_Shown]:
    """Ways to present one operand (``labels``, each label once) as a matmul factor: gathered,
    or a strided view, as plain (free, spread, copy, transposed) tuples (`MatmulFactor`'s
    fields: the layout search builds one only for the presentation it picks).

    A view needs the contract group and the matrix's free run each consecutive, one of them
    ending the operand; a free run (`_free_runs`) is consecutive by construction.
    """
    options: list[_Shown] = [(free, (), True, False)]
    if contract:
        start = labels.index(contract[0]) if contract[0] in labels else -1
        contract_anywhere = start >= 0 and labels[start:start + len(contract)] == contract
        contract_last = contract_anywhere and start + len(contract) == len(labels)
    else:
        contract_anywhere = contract_last = True
    for run in [*_free_runs(labels, set(free)), ()]:
        spread = tuple(label for label in free if label not in run)
        run_last = not run or run[-1] == labels[-1]
        # left factor: rows=run, cols=contract; right factor: rows=contract, cols=run; the
        # group stored last is the matrix's inner one (transposed: the other way round)
        if is_left:
            if contract and contract_last:
                options.append((run, spread, False, False))
            if run and run_last and contract_anywhere:
                options.append((run, spread, False, True))
        else:
            if run and run_last and contract_anywhere:
                options.append((run, spread, False, False))
            if contract and contract_last:
                options.append((run, spread, False, True))
    return options


# A presentation as the layout search carries it: MatmulFactor's fields in order.
_Shown = tuple[Labels, Labels, bool, bool]


def factor_order(batch: Labels, contract: Labels, factor: MatmulFactor, is_left: bool) -> Labels:
    """The order a matmul factor's labels are read in: batch, spread, then its matrix (rows
    then columns as stored: ``transposed`` keeps them column-major)."""
    outer, inner = (factor.free, contract) if is_left else (contract, factor.free)
    if factor.transposed:
        outer, inner = inner, outer
    return batch + factor.spread + outer + inner


def factor_read_ns(labels: Labels, batch: Labels, contract: Labels, factor: MatmulFactor,
                   is_left: bool, extents: dict[int, int], model: CostModel,
                   size: int | None = None) -> float:
    """Bringing one operand (``labels`` in its stored order, ``size`` elements) to the product
    as ``factor``, beyond the products themselves: its gather when copied, and reading it from
    memory."""
    size = size_of(labels, extents) if size is None else size
    return _presented(labels, batch, contract, factor, is_left, extents, model, size,
                      model.gather_window_elements())[2]


def _presented(labels: Labels, batch: Labels, contract: Labels, factor: MatmulFactor,
               is_left: bool, extents: dict[int, int], model: CostModel, size: int,
               window: int, last: bool = False, memory: int | None = None,
               ) -> tuple[MatmulFactor, float, float, int, int, int]:
    """(``factor``, its gather's price, that plus its reads from memory, the sizes of its
    spread and free labels, the elements its gather or read sweeps again past the first;
    a view's sweeps are counted on the ``last`` step only, where they break ties).
    ``memory``: the model's `CostModel.memory_elements`, where the caller has it at hand."""
    spread = math.prod(map(extents.__getitem__, factor.spread))
    free = math.prod(map(extents.__getitem__, factor.free))
    if not factor.copy and not last and size <= (model.memory_elements() if memory is None else memory):
        return factor, 0.0, 0.0, spread, free, 0  # a view within the caches: nothing to price
    passes = 1
    if factor.copy or last:
        passes = gather_passes(labels, factor_order(batch, contract, factor, is_left), extents, window)
    gather = model.gather_ns(size, passes) if factor.copy else 0.0
    return (factor, gather,
            gather + factor_memory_ns(labels, batch, contract, factor, is_left, extents, model, size),
            spread, free, size * (passes - 1))


def factor_memory_ns(labels: Labels, batch: Labels, contract: Labels, factor: MatmulFactor,
                     is_left: bool, extents: dict[int, int], model: CostModel, size: int) -> float:
    """The part of `factor_read_ns` past the in-cache model: reading an operand of ``size``
    elements from memory (0 within `CostModel.memory_elements`)."""
    if size <= model.memory_elements():
        return 0.0
    access = access_pattern(labels, factor_order(batch, contract, factor, is_left), extents)
    return model.streamed_ns(size) + model.strided_read_ns(size, access)


def best_matmul_layout(
    lx: Labels,
    ly: Labels,
    batch: set[int],
    contract: set[int],
    extents: dict[int, int],
    final_order: Labels | None,
    model: CostModel | None = None,
) -> MatmulLayout:
    """Choose operand roles, group orders and per-operand presentations for the fastest matmul.

    Every combination is priced with the time model above (copies, the stacked products, the
    transposed-right penalty, and for operands past `CostModel.memory_elements` their reads from memory).
    The layout the in-cache terms alone would pick is kept unless the full price of another is
    ``layout_memory_worth`` (the model's profile) times lower; either way the returned ``cost`` is the full price.  Ties
    prefer gathers that sweep their source once (`gather_passes`), then a result already in
    output order, then more rows
    than columns (OpenBLAS is faster that way round for thin inner dimensions: (576x24)@(24x832)
    330 us vs 246 us for the transposed product).
    """
    model = NUMPY_MODEL if model is None else model
    # (the search runs on plain tuples, a new string's first call meets several of them:
    # best and cached are (cost, in-cache cost, swap, batch, contract, left, right))
    best: tuple[float, float, bool, Labels, Labels, _Shown, _Shown] | None = None
    cached: tuple[float, float, bool, Labels, Labels, _Shown, _Shown] | None = None
    get = extents.__getitem__
    nb = math.prod(map(get, batch))
    window = model.gather_window_elements()
    memory = model.memory_elements()
    worth = profile_of(model).layout_memory_worth
    last = final_order is not None
    nk = math.prod(map(get, contract))

    def reads(labels: Labels, size: int, b: Labels, c: Labels, shown: list[_Shown],
              is_left: bool) -> list[tuple[_Shown, float, float, int, int, int]]:
        # each presentation's gather, the gather plus its reads from memory, the sizes of its
        # spread and free labels, and the elements its gather or its read as a view sweeps
        # again past the first (`_presented`'s, priced once per batch and contract order)
        out = []
        for f in shown:
            free, spread, copy, transposed = f
            n_spread, n_free = math.prod(map(get, spread)), math.prod(map(get, free))
            if not copy and not (last and size > window) and size <= memory:
                # a view within the caches (swept once: the source fits the window)
                out.append((f, 0.0, 0.0, n_spread, n_free, 0))
                continue
            outer, inner = (free, c) if is_left else (c, free)
            order = b + spread + (inner + outer if transposed else outer + inner)
            passes = 1
            if (copy or last) and size > window:
                passes = gather_passes(labels, order, extents, window)
            gather = model.gather_ns(size, passes) if copy else 0.0
            read = 0.0
            if size > memory:
                read = model.streamed_ns(size) + model.strided_read_ns(
                    size, access_pattern(labels, order, extents))
            out.append((f, gather, gather + read, n_spread, n_free, size * (passes - 1)))
        return out

    for swap in (False, True):
        lp, lq = (ly, lx) if swap else (lx, ly)
        size_p, size_q = math.prod(map(get, lp)), math.prod(map(get, lq))
        free_p = tuple(label for label in lp if label not in batch and label not in contract)
        free_q = tuple(label for label in lq if label not in batch and label not in contract)
        # Both operands may give the same batch or contract order: price each distinct one once
        # (the first of equal costs wins, so skipping repeats changes nothing).
        orders_b = dict.fromkeys(tuple(label for label in source if label in batch) for source in (lp, lq))
        orders_c = dict.fromkeys(tuple(label for label in source if label in contract) for source in (lp, lq))
        shown = {c: (_views(lp, free_p, c, True), _views(lq, free_q, c, False)) for c in orders_c}
        for b in orders_b:
            for c in orders_c:
                reads_p = reads(lp, size_p, b, c, shown[c][0], True)
                reads_q = reads(lq, size_q, b, c, shown[c][1], False)
                for p, p_copy, p_ns, spread_p, rows, swept_p in reads_p:
                    for q, q_copy, q_ns, spread_q, cols, swept_q in reads_q:
                        calls = nb * spread_p * spread_q
                        products = model.matmul_ns(calls, rows, nk, cols)
                        if q[3] and calls > 1:  # (the right factor transposed)
                            products += model.batched_right_transpose_ns(calls, rows, cols)
                        tie = 1.0
                        if last and (swept_p or swept_q):
                            # tie-break first on the last step: factors whose gather or read
                            # sweeps their source again (hard transposes, batch axes read out of
                            # order) lose to ones that stay within tiles; only ties move.  Not
                            # on intermediates: their order changes the next steps' layouts,
                            # which a tie on one step does not see (dev/decisions.md, 37)
                            swept = swept_p + swept_q
                            tie += 1e-5 * swept / (swept + size_p + size_q)
                        if last and b + p[1] + q[1] + p[0] + q[0] != final_order:
                            tie += 1e-6  # tie-break: a strided result view is fine
                        if rows < cols:
                            tie += 1e-9  # tie-break: orientation
                        cost = (p_ns + q_ns + products) * tie
                        in_cache = (p_copy + q_copy + products) * tie
                        if best is None or cost < best[0]:
                            best = (cost, in_cache, swap, b, c, p, q)
                        if cached is None or in_cache < cached[1]:
                            cached = (cost, in_cache, swap, b, c, p, q)
    assert best is not None and cached is not None
    # The memory terms are rougher than the in-cache fit (numpy's copy and einsum loops walk
    # strides their own way): they decide the layout only when they model it clearly faster.
    chosen = best if best[0] * worth < cached[0] else cached
    cost, _, swap, b, c, p, q = chosen
    return MatmulLayout(cost=cost, swap=swap, batch=b, contract=c, left=MatmulFactor(*p),
                        right=MatmulFactor(*q))
