"""The schedule within a memory limit: the fastest candidate that fits, else one run in
blocks (`Blocking`), and the cached entry points `schedule_labels` and `make_schedule`.

Blocking re-lowers each kind of block through `schedule_labels`, so the entry points live
here, after the lowering they call.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ContractionError, MemoryLimitError
from ..model.layout import factor_read_ns, profile_of
from ..model.numpy_prices import NUMPY_MODEL, access_pattern, einsum_step_ns
from ..model.protocol import CostModel, size_of
from ..plan import PLAN_CACHE_SIZE, Plan
from .ir import Blocking, Finish, Labels, Schedule, Shape, Step, evolve
from .lowering import (
    Candidates,
    _naive_flops,
    _permutation,
    _split,
    broadcast_step_ns,
    lower_candidates,
    products_ns,
    reduce_ns,
    reextent,
)
from .memory import (
    BLOCK_HEADROOM,
    _limit_for,
    _loop_peak,
    _operand_token,
    _resolve_limit,
    _tokens_of,
)
from .paths import normalise_optimize
from .strides import slices_as_views, writes_in_place


@functools.lru_cache(maxsize=PLAN_CACHE_SIZE)
def schedule_labels(inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...],
                    optimize: Any = "auto", strategy: str | None = None,
                    use_einsum: bool = True, memory_limit: Any = None,
                    extents_by_label: tuple[int, ...] | None = None,
                    layouts: tuple[int, ...] | None = None,
                    cost_model: CostModel = NUMPY_MODEL) -> Schedule:
    """Schedule a contraction given directly as integer labels (cached, pure).

    ``inputs[k]`` labels operand ``k``'s axes (a repeated label is a diagonal), ``output`` the
    result's; extents must already agree up to size-1 broadcasting (the plan checks that).
    ``optimize`` must be normalised (`normalise_optimize`).  ``strategy`` forces ``'direct'``
    or ``'pairwise'`` (for tests and re-measuring the threshold); by default tiny problems
    run direct unless an explicit path or optimizer was asked for.  ``use_einsum=False``
    schedules for a library without einsum (the Array API standard has none): pairwise, and
    every step a ``matmul`` or a ``multiply``.  ``memory_limit`` bounds the elements alive at
    once beyond operands and result: an int, ``'max_input'`` (the largest operand),
    ``'default'`` (the largest operand or the result) or None (unbounded); a call that would
    exceed it takes another order or runs in blocks (`Blocking`).  ``extents_by_label`` is
    the plan's validated extents (label ``k`` has extent ``extents_by_label[k]``); without it
    they are read off the shapes.  ``layouts`` is `Schedule.layouts` (what the operands
    will cost to copy: strided, converted), None for C-contiguous operands of one dtype.
    ``cost_model`` prices every choice (`model.protocol.CostModel`; numpy's by default).

    >>> schedule_labels(((0, 1), (1, 2)), (0, 2), ((2, 3), (3, 4))).strategy
    'direct'
    >>> schedule_labels(((0, 1), (1, 2)), (0, 2), ((2, 3), (3, 4)), strategy='pairwise').path
    ((0, 1),)
    """
    if strategy is None and _nothing_to_multiply(shapes, extents_by_label):
        return _trivial(inputs, output, shapes, optimize, use_einsum, memory_limit, extents_by_label,
                        layouts, cost_model)
    options = lower_candidates(inputs, output, shapes, optimize, strategy, use_einsum, extents_by_label,
                               layouts, cost_model, keep_within=BLOCKING_WORTH)
    limit = _resolve_limit(memory_limit, shapes, options[0].output_shape)
    if options[0].strategy == "direct":
        return evolve(options[0], memory_limit=limit)
    strict = memory_limit != "default"
    if isinstance(options, Candidates) and not options.complete:
        # Paths proved slower were left out.  Every path within `BLOCKING_WORTH` of the
        # fastest, and the two fastest, are here, so a choice that models within that of the
        # fastest and fits is the one all paths give; any other choice prices them all.
        try:
            chosen: Schedule | None = _within_limit(options, limit, use_einsum, strict, cost_model)
        except MemoryLimitError:
            chosen = None
        fastest = min(o.cost_ns for o in options)
        if chosen is not None and chosen.cost_ns <= BLOCKING_WORTH * fastest and (
                limit is None or chosen.peak_extra <= limit):
            return chosen
        options = lower_candidates(inputs, output, shapes, optimize, strategy, use_einsum,
                                   extents_by_label, layouts, cost_model)
    return _within_limit(options, limit, use_einsum, strict=strict, model=cost_model)


def _nothing_to_multiply(shapes: tuple[Shape, ...], extents_by_label: tuple[int, ...] | None) -> bool:
    """Is the call trivial: an extent of 0 (its result is all zeros, maybe empty) or every
    operand 0-d or of one element (so is the result)?"""
    extents = extents_by_label if extents_by_label is not None else tuple(n for s in shapes for n in s)
    return 0 in extents or all(n == 1 for n in extents)


def _trivial(inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...], optimize: Any,
             use_einsum: bool, memory_limit: Any, extents_by_label: tuple[int, ...] | None,
             layouts: tuple[int, ...] | None, cost_model: CostModel) -> Schedule:
    """A trivial call (`_nothing_to_multiply`) as one einsum call, which allocates nothing
    beyond its result, so any ``memory_limit`` holds without blocks (the path stays the
    asked one where it is explicit, else the left-to-right one: see `paths.trivial_path`).
    Where one einsum call cannot run it (a library without einsum, more axes or operands than
    one call takes), the pairwise schedule runs unblocked: no search for blocks, whose sizes
    mean nothing on an empty extent."""
    try:
        options = lower_candidates(inputs, output, shapes, optimize, "direct" if use_einsum else "pairwise",
                                   use_einsum, extents_by_label, layouts, cost_model)
    except ContractionError:
        options = lower_candidates(inputs, output, shapes, optimize, "pairwise", use_einsum,
                                   extents_by_label, layouts, cost_model)
    limit = _resolve_limit(memory_limit, shapes, options[0].output_shape)
    return evolve(min(options, key=lambda o: o.cost_ns), memory_limit=limit)


def _within_limit(options: list[Schedule], limit: int | None, use_einsum: bool,
                  strict: bool = True, model: CostModel = NUMPY_MODEL) -> Schedule:
    """The fastest modelled schedule whose buffers stay within ``limit`` (blocked if need be).

    Not ``strict`` (the default limit): when nothing fits, the smallest peak found is taken
    instead of an error.
    """
    options = sorted(options, key=lambda o: o.cost_ns)
    fastest = options[0]
    if limit is None:
        return fastest
    fitting = [o for o in options if o.peak_extra <= limit]
    if fitting and fitting[0].cost_ns <= BLOCKING_WORTH * fastest.cost_ns:
        return evolve(fitting[0], memory_limit=limit)
    tried = [evolve(f, memory_limit=limit) for f in fitting[:1]]
    smallest = min(o.peak_extra for o in options)
    for option in options[:2]:
        blocked, reached = _blocked(option, limit, use_einsum, model)
        smallest = min(smallest, reached)
        if blocked is not None:
            tried.append(blocked)
    if not tried and not strict:
        return evolve(min(options, key=lambda o: o.peak_extra), memory_limit=limit)
    if not tried:
        works = _smallest_working_limit(options, _limit_for(smallest), use_einsum, model)
        raise MemoryLimitError(
            f"memory_limit={limit:,} elements cannot be honoured: within {MAX_BLOCKS:,} blocks "
            f"this contraction needs at least {works:,} (its fastest order unblocked needs "
            f"{fastest.peak_extra:,}); pass memory_limit={works} or more, or memory_limit=None",
            smallest_limit=works)
    return min(tried, key=lambda o: o.cost_ns)


def _smallest_working_limit(options: list[Schedule], estimate: int, use_einsum: bool,
                            model: CostModel) -> int:
    """The smallest limit from ``estimate`` up that `_within_limit` keeps for ``options`` (the
    limit a `MemoryLimitError` advises, so passing it back always works).

    The block search's smallest peak is an estimate, which a blocked run assembled at block
    shapes can miss (another kernel or layout there, a schedule with nothing to cut but its
    preparations); each candidate is therefore tried as the call would try it.  The least
    unblocked peak always works, so the search ends there at the latest: the estimate first,
    then a bisection up to that peak (an error path, so a few block searches are affordable).
    """
    ceiling = min(o.peak_extra for o in options)

    def works(limit: int) -> bool:
        return any(o.peak_extra <= limit for o in options) or any(
            _blocked(o, limit, use_einsum, model)[0] is not None for o in options[:2])

    if estimate >= ceiling or works(estimate):
        return min(estimate, ceiling)
    low, high = estimate + 1, ceiling
    while low < high:
        middle = (low + high) // 2
        if works(middle):
            high = middle
        else:
            low = middle + 1
    return high


#: A schedule that fits the limit unblocked is kept unless blocking a faster order models at
#: least this much faster.
BLOCKING_WORTH = 1.25


#: A cut along batch labels only (see `_blocked`) is preferred unless a cut of other labels
#: models at least this much faster (measured at large size: a cut of a free letter into
#: chunks of 2 modelled 1.14x the batch cut's time and ran 2.1x it).
BATCH_CUT_WORTH = 1.5


#: The most blocks a blocked schedule may have.  A limit that would need more is refused
#: (`MemoryLimitError`, naming the smallest limit that works) before any arithmetic: past
#: this, Python overhead per block dominates any call, and planning and compiled programs
#: would grow with the count.
MAX_BLOCKS = 10_000


def _step_cost(step: Step, ext: dict[int, int], model: CostModel = NUMPY_MODEL,
               final: bool = False) -> float:
    """The modelled time of ``step`` at extents ``ext`` (its kernel and layout unchanged);
    ``final`` for the schedule's last step, whose result a block writes out and remakes at the
    same size (priced as the call's result is: `result_buffer_ns`)."""
    result = size_of(step.result, ext)
    lx = tuple(lab for a, lab in enumerate(step.x_labels) if a not in step.sum_x)
    ly = tuple(lab for a, lab in enumerate(step.y_labels) if a not in step.sum_y)
    if not step.contract and step.kernel in ("multiply", "einsum"):
        return broadcast_step_ns(step.result, lx, ly, ext, model, final)
    if step.kernel == "einsum" or step.layout is None:
        return einsum_step_ns((lx, ly), step.result, ext, model, final)
    lay = step.layout
    lp, lq = (ly, lx) if lay.swap else (lx, ly)
    products = products_ns(lay, ext, model)
    cost = (factor_read_ns(lp, lay.batch, lay.contract, lay.left, True, ext, model)
            + factor_read_ns(lq, lay.batch, lay.contract, lay.right, False, ext, model) + products)
    if step.reduce:
        return cost + reduce_ns(result * size_of(step.reduce, ext), result, final, model)
    cost -= _split(lay, ext, model, products)[1]   # (a block re-lowered at these extents splits so)
    return cost + (model.result_buffer_ns(result) if final else model.fresh_buffer_ns(result))


def _structure(base: Schedule, cut: set[int]) -> tuple[tuple[bool, ...], tuple[int, ...]]:
    """(which operands carry a cut label, which steps depend on none of them)."""
    sliced = tuple(any(lab in cut and n != 1 for lab, n in zip(t, s))
                   for t, s in zip(base.inputs, base.shapes))
    depends: list[bool] = []
    for tx, ty in _tokens_of(base):
        depends.append(any(sliced[k] if kind == "o" else depends[k] for kind, k in (tx, ty)))
    return sliced, tuple(k for k, dep in enumerate(depends) if not dep)


def _storage_order(base: Schedule) -> Labels:
    """The label order of a blocked run's result buffer: the order the last step (or, with
    no step, the prepared operand) produces the output's labels in, so that a block is
    written into its slice without a transpose.  Writing each block transposed into an
    output-ordered buffer cost `WCa,KCaib,Wi->WKCb` 14 ms of its 28 (the unblocked call
    returns the same permutation as a view)."""
    if base.steps:
        return base.steps[-1].result
    return base.preparations[0].labels


def _into_storage(block: Schedule, storage: Labels) -> Finish:
    """A block's finish: its result permuted into ``storage`` order and reshaped to the block
    of the buffer (a label cut to chunks of 1 is not in the block's result: a size-1 axis)."""
    produced = _storage_order(block)
    present = tuple(lab for lab in storage if lab in produced)
    return Finish(permutation=_permutation(produced, present),
                  shape=tuple(block.extents[lab] for lab in storage),
                  reshape=len(present) != len(storage), copy=False)


def _write_ns(result: Labels, storage: Labels, extents: dict[int, int], block: dict[int, int],
              accumulate: bool, model: CostModel) -> float:
    """Writing one block's result (``result`` order, C-contiguous at ``block`` extents) into
    its slice of the result buffer (``storage`` order): a strided copy, or, when a
    contracted label is cut, a read-add-write of the slice (measured: the adds of a
    64-block accumulating run took a fifth of its time, which the per-step costs never
    saw).  Either side read or written in short runs far apart (a block in another order, a
    slice of short rows) pays for it."""
    elements = size_of(storage, block)
    far = 0.0
    if elements > model.memory_elements():
        far = max(model.strided_read_ns(elements, access_pattern(result, storage, block)),
                  model.strided_read_ns(elements, access_pattern(storage, storage, extents, block)))
    copy = model.copy_ns(elements)
    if not model.result_buffer_ns(size_of(storage, extents)):
        copy -= model.fresh_buffer_ns(elements)   # the result buffer is reused warm, as unblocked
    return (copy + far) * (3 if accumulate else 1)


def _slice_copies_ns(base: Schedule, loop: Sequence[int], sliced: Sequence[bool],
                     ext: dict[int, int], model: CostModel, block: Schedule | None = None) -> float:
    """The per-block copies of operand slices that a step inside the loop needs contiguous
    (a block of a C array is strided unless only its leading axes are cut); the steps'
    views are ``block``'s where given (none where a slice reaches its product as a view,
    `strides.slices_as_views`), else ``base``'s."""
    tokens = _tokens_of(base)
    ns = 0.0
    for k in loop:
        step = (block or base).steps[k]
        for view, (kind, j) in ((step.x_view, tokens[k][0]), (step.y_view, tokens[k][1])):
            if (view is not None and view.contiguous_first and kind == "o" and sliced[j]
                    and _operand_token(base, j, ext, True)[2]):
                size = size_of(base.inputs[j], ext)
                ns += model.copy_ns(size)
                if size > model.memory_elements():
                    access = access_pattern(base.inputs[j], base.inputs[j], base.extents, ext)
                    ns += model.strided_read_ns(size, access)
    return ns


def _slice_reads_ns(base: Schedule, loop: Sequence[int], sliced: Sequence[bool],
                    ext: dict[int, int], model: CostModel) -> float:
    """Reading the slices of operands past the caches that the steps inside the loop take:
    a block's slice comes from memory (the call touched the rest of its operand since), but
    a step priced at block extents reads a slice that fits the cache as if it were there
    (measured: `WCaib,WCajb->Cij` at large in 4 blocks of 1.04M-element slices of 5.4M
    operands, modelled 12 ms, ran 23-34; unblocked, 30 modelled, 33-40 measured)."""
    tokens = _tokens_of(base)
    threshold = model.memory_elements()
    ns = 0.0
    for k in loop:
        step = base.steps[k]
        kernel = "einsum" if step.kernel == "einsum" else "matmul"
        for kind, j in tokens[k]:
            if kind != "o" or not sliced[j] or math.prod(base.shapes[j]) <= threshold:
                continue
            size = size_of(base.preparations[j].labels, ext)
            if size <= threshold:   # past the threshold the step's own price reads memory
                ns += model.streamed_ns(size, kernel)
    return ns


def _blocked(base: Schedule, limit: int, use_einsum: bool,
             model: CostModel = NUMPY_MODEL) -> tuple[Schedule | None, int]:
    """Cut labels into chunks until every buffer of a blocked run is within ``limit``; only
    the steps that carry a cut label run per block.  Returns (the schedule or None, the
    smallest peak reached within `MAX_BLOCKS` blocks).

    Each round halves the chunk of one label, chosen by the time model: the halving that
    buys the most peak reduction per unit of modelled slowdown (large BLAS shapes and few
    blocks cost least), labels kept in the output first (no accumulation).
    """
    inputs, output, shapes, extents = base.inputs, base.output, base.shapes, base.extents
    labels = sorted({lab for t, s in zip(inputs, shapes) for lab, n in zip(t, s) if n != 1})
    if base.strategy != "pairwise" or not labels:
        return None, base.peak_extra
    n_steps = len(base.steps)
    storage = _storage_order(base)

    measured: dict[tuple[int, ...], tuple[int, float, int]] = {}
    # A trial halves one label: the steps without it, and the cut set, mostly repeat.  Each
    # step's price depends on its own labels' extents only; the structure on the cut set.
    step_labels = [tuple(sorted(set(step.x_labels) | set(step.y_labels))) for step in base.steps]
    step_prices: dict[tuple[Any, ...], float] = {}
    structures: dict[frozenset[int], tuple[tuple[bool, ...], tuple[int, ...]]] = {}

    def step_price(k: int, ext: dict[int, int]) -> float:
        key = (k, *(ext[lab] for lab in step_labels[k]))
        found = step_prices.get(key)
        if found is None:
            found = step_prices[key] = _step_cost(base.steps[k], ext, model, k == n_steps - 1)
        return found

    def measure(chunks: dict[int, int]) -> tuple[int, float, int]:
        # (the greedy passes and the local search try many of the same chunkings: each is
        # measured once)
        key = tuple(chunks[lab] for lab in labels)
        found = measured.get(key)
        if found is None:
            found = measured[key] = measure_afresh(chunks)
        return found

    def measure_afresh(chunks: dict[int, int]) -> tuple[int, float, int]:
        cut = frozenset(lab for lab in labels if chunks[lab] < extents[lab])
        found = structures.get(cut)
        if found is None:
            found = structures[cut] = _structure(base, set(cut))
        sliced, hoisted = found
        ext = {**extents, **chunks}
        peak = _loop_peak(base, base, ext, ext, sliced, hoisted)
        n_blocks = math.prod(-(-extents[lab] // chunks[lab]) for lab in cut)
        loop = [k for k in range(n_steps) if k not in set(hoisted)]
        per_block = (model.block_ns(len(loop)) + _slice_copies_ns(base, loop, sliced, ext, model)
                     + _slice_reads_ns(base, loop, sliced, ext, model))
        per_block += sum(step_price(k, ext) for k in loop)
        per_block += _write_ns(storage, storage, extents, ext, bool(cut - set(output)), model)
        cost = (sum(base.steps[k].cost_ns for k in hoisted) + model.call_ns(len(hoisted))
                + n_blocks * per_block)
        return peak, cost, n_blocks

    def greedy(by_rate: bool, target: int, start: dict[int, int], kept: frozenset[int] = frozenset(),
               allowed: Sequence[int] = labels) -> tuple[bool, dict[int, int], int, float, int]:
        """(whether the peak reached ``target``, the chunks, the smallest peak seen, the
        modelled time, the peak) of halving labels one at a time, never past `MAX_BLOCKS`."""
        chunks = dict(start)
        peak, cost, _ = measure(chunks)
        smallest = peak
        while peak > target:
            best: tuple[tuple[Any, ...], dict[int, int], int, float] | None = None
            for lab in allowed:
                if chunks[lab] == 1 or lab in kept:
                    continue
                trial = dict(chunks)
                trial[lab] = -(-chunks[lab] // 2)
                p, c, n = measure(trial)
                if n > MAX_BLOCKS:
                    continue
                # modelled slowdown per halving of the peak (no reduction ranks last), or
                # simply the lowest peak; then labels kept in the output, the longest chunk
                rate = math.log(max(c, 1.0) / max(cost, 1.0)) / math.log(peak / p) if p < peak else math.inf
                key = ((p >= peak, rate) if by_rate else (p, c)) + (lab not in output, -chunks[lab], lab)
                if best is None or key < best[0]:
                    best = (key, trial, p, c)
            if best is None:
                return False, chunks, smallest, cost, peak
            _, chunks, peak, cost = best
            smallest = min(smallest, peak)
        return True, chunks, smallest, cost, peak

    def attempts(target: int) -> tuple[list[tuple[float, dict[int, int], int]], float]:
        found: list[tuple[float, dict[int, int], int]] = []
        stuck: list[dict[int, int]] = []
        smallest = math.inf
        if batch_like:
            # Cuts along labels every step batches over keep each step's BLAS shapes and need
            # no accumulation: the model prices the narrow products other cuts make least
            # reliably, so such a cut is kept unless another models `BATCH_CUT_WORTH` faster.
            ok, chunks, reached, cost, peak = greedy(True, target, whole, allowed=batch_like)
            smallest = min(smallest, reached)
            if ok:
                found.append((cost / BATCH_CUT_WORTH, chunks, peak))
        for by_rate in (True, False):
            ok, chunks, reached, cost, peak = greedy(by_rate, target, whole)
            smallest = min(smallest, reached)
            if ok:
                found.append((cost, chunks, peak))
            else:
                stuck.append(chunks)
        if not found:
            # Both ran out of blocks: a label cut early (cheap at first) can use up the
            # budget another label needs later.  Retry with each such label kept whole.
            for kept in sorted({lab for ch in stuck for lab in labels if ch[lab] < extents[lab]}):
                for by_rate in (True, False):
                    ok, chunks, reached, cost, peak = greedy(by_rate, target, whole, frozenset([kept]))
                    smallest = min(smallest, reached)
                    if ok:
                        found.append((cost, chunks, peak))
        return found, smallest

    batch_like = [lab for lab in labels if lab in output and all(
        lab in step.batch for step in base.steps
        if step.kernel == "matmul" and (lab in step.x_labels or lab in step.y_labels))]
    target = max(1, int(limit * BLOCK_HEADROOM))
    whole = {lab: extents[lab] for lab in labels}
    smallest = math.inf
    while True:
        found, reached = attempts(target)
        smallest = min(smallest, reached)
        if not found:
            return None, int(smallest)
        cost, chunks, peak = min(found, key=lambda f: f[0])
        if all(chunks[lab] == extents[lab] for lab in labels if lab not in batch_like):
            cost = measure(chunks)[1]
            chunks, peak, cost = _improve(chunks, peak, cost, target, batch_like, extents, measure)
        else:
            chunks, peak, cost = _improve(chunks, peak, cost, target, labels, extents, measure)
        blocked = _assemble(base, chunks, labels, use_einsum, model)
        if blocked.peak_extra <= limit:
            return evolve(blocked, memory_limit=limit), int(min(smallest, blocked.peak_extra))
        # the estimate missed (another kernel or layout at block shapes): aim lower
        target = max(1, min(target - 1, int(target * limit / blocked.peak_extra)))


def block_like(base: Schedule, template: Blocking, limit: int,
               model: CostModel = NUMPY_MODEL) -> Schedule | None:
    """``base`` (an unblocked schedule that follows a structure's decisions at new extents,
    `reextent`) run in blocks as ``template``, the blocks its structure's full search chose
    at other extents, within ``limit``: nothing searched and nothing priced.  Each label the
    template cut is cut into as many chunks as there (the peak scales with the chunks);
    while the blocked run's peak is beyond the limit's headroom, the chunk whose halving
    lowers it most is halved.  A block takes the decisions of the template's block of its
    structure (lowered for block shapes), else ``base``'s.  None when these
    labels cannot bring the peak within ``limit`` in `MAX_BLOCKS` blocks (the full search's
    job).

    >>> from contractions.schedule import schedule_labels
    >>> from contractions.schedule.ir import Blocking
    >>> base = schedule_labels(((0, 1, 2), (0, 2, 3)), (0, 1, 3), ((8, 30, 40), (8, 40, 50)),
    ...                        strategy='pairwise')
    >>> cut = Blocking(labels=(0,), chunks=(4,), counts=(2,), accumulate=False, operand_axes=(),
    ...                storage=(), storage_axes=(), inner=())
    >>> blocked = block_like(base, cut, 3_000)
    >>> blocked.blocking.labels, blocked.blocking.chunks, blocked.peak_extra <= 3_000
    ((0,), (1,), True)
    """
    extents = base.extents
    counts = {lab: n for lab, n in zip(template.labels, template.counts) if extents.get(lab, 1) > 1}
    labels = list(counts)
    if base.strategy != "pairwise" or base.blocking is not None or not labels:
        return None
    target = max(1, int(limit * BLOCK_HEADROOM))

    def peak(chunks: dict[int, int]) -> int:
        sliced, hoisted = _structure(base, {lab for lab in labels if chunks[lab] < extents[lab]})
        block = {**extents, **chunks}
        return _loop_peak(base, base, block, block, sliced, hoisted)

    chunks = {lab: -(-extents[lab] // min(counts[lab], extents[lab])) for lab in labels}
    reached = peak(chunks)
    while reached > target:
        trials = []
        for lab in labels:
            if chunks[lab] > 1:
                trial = {**chunks, lab: -(-chunks[lab] // 2)}
                trials.append((peak(trial), -chunks[lab], trial))
        if not trials:
            return None
        reached, _, chunks = min(trials, key=lambda t: t[:2])
        if math.prod(-(-extents[lab] // chunks[lab]) for lab in labels) > MAX_BLOCKS:
            return None
    blocked = _assemble(base, chunks, labels, True, model,
                        follow=[inner for _, inner in template.inner])
    if blocked.blocking is None or not blocked.blocking.labels or blocked.peak_extra > limit:
        return None
    return evolve(blocked, memory_limit=limit)


def _improve(chunks: dict[int, int], peak: int, cost: float, target: int, labels: list[int],
             extents: dict[int, int], measure: Callable[[dict[int, int]], tuple[int, float, int]],
             rounds: int = 16) -> tuple[dict[int, int], int, float]:
    """Local search after the greedy halving: move a cut from one label to another (double
    one chunk, halve another) or undo it, while the peak stays within ``target`` and the
    modelled time falls (the halving order can cut a label whose steps could have been
    hoisted)."""
    for _ in range(rounds):
        found = None
        for grow in labels:
            if chunks[grow] == extents[grow]:
                continue
            bigger = min(extents[grow], chunks[grow] * 2)
            for shrink in [None, *labels]:
                if shrink == grow or (shrink is not None and chunks[shrink] == 1):
                    continue
                trial = dict(chunks)
                trial[grow] = bigger
                if shrink is not None:
                    trial[shrink] = -(-chunks[shrink] // 2)
                p, c, n = measure(trial)
                if p <= target and n <= MAX_BLOCKS and c < cost * (1 - 1e-3) and (
                        found is None or c < found[2]):
                    found = (trial, p, c)
        if found is None:
            break
        chunks, peak, cost = found
    return chunks, peak, cost


def _assemble(base: Schedule, chunks: dict[int, int], labels: list[int], use_einsum: bool,
              model: CostModel = NUMPY_MODEL, follow: Sequence[Schedule] | None = None) -> Schedule:
    """The blocked schedule for these chunk sizes: one inner schedule per kind of block
    (full chunks, and the shorter last chunk of each cut label), its exact peak and cost.
    Each block is lowered afresh for its shapes, or, given ``follow`` (blocks planned at
    other extents), takes the decisions of the one of its structure (the same axes of 1),
    else ``base``'s (`reextent`: nothing searched, prices scaled by FLOPs)."""
    inputs, output, shapes, extents = base.inputs, base.output, base.shapes, base.extents
    sliced_labels = tuple(lab for lab in labels if chunks[lab] < extents[lab])
    sizes = tuple(chunks[lab] for lab in sliced_labels)
    counts = tuple(-(-extents[lab] // chunks[lab]) for lab in sliced_labels)
    sliced, hoisted = _structure(base, set(sliced_labels))
    loop = [k for k in range(len(base.steps)) if k not in set(hoisted)]
    accumulate = any(lab not in output for lab in sliced_labels)
    variants: list[tuple[tuple[int, ...], Schedule]] = []
    writes: list[tuple[int, float]] = []   # (blocks, the price of copying one into its slice)
    total = sum(base.steps[k].cost_ns for k in hoisted) + model.call_ns(len(hoisted))
    peak = 0
    storage = _storage_order(base)
    storage_shape = tuple(extents[lab] for lab in storage)
    in_place = bool(base.steps) and len(base.steps) - 1 in loop
    for lengths in itertools.product(*[
            sorted({c, extents[lab] % c} - {0}, reverse=True) for lab, c in zip(sliced_labels, sizes)]):
        length_of = dict(zip(sliced_labels, lengths))
        block_shapes = tuple(tuple(length_of.get(lab, n) if n != 1 else 1 for lab, n in zip(t, s))
                             for t, s in zip(inputs, shapes))
        if follow is not None:
            block_extents = {**extents, **length_of}
            ones = [n == 1 for shape in block_shapes for n in shape]
            like = next((f for f in follow if [n == 1 for shape in f.shapes for n in shape] == ones), base)
            block = reextent(like, block_shapes, block_extents,
                             _naive_flops(inputs, output, block_extents), model, peak=False)
        else:
            block = schedule_labels(inputs, output, block_shapes, base.path, "pairwise", use_einsum,
                                    layouts=base.layouts, cost_model=model)
        block = slices_as_views(evolve(block, finish=_into_storage(block, storage)), base, loop, sliced,
                                model.memory_elements())
        variants.append((lengths, block))
        how_many = math.prod(
            (extents[lab] // c) if n == c else 1 for lab, c, n in zip(sliced_labels, sizes, lengths))
        in_place = in_place and writes_in_place(block, storage_shape, accumulate)
        total += how_many * (model.block_ns(len(loop)) + sum(block.steps[k].cost_ns for k in loop)
                             + _slice_copies_ns(base, loop, sliced, block.extents, model, block)
                             + _slice_reads_ns(base, loop, sliced, block.extents, model))
        writes.append((how_many, _write_ns(_storage_order(block), storage, extents, block.extents,
                                           accumulate, model)))
        peak = max(peak, _loop_peak(base, block, extents, block.extents, sliced, hoisted))
    if not in_place:   # (a last product written straight into its slice copies nothing)
        total += sum(how_many * ns for how_many, ns in writes)
    first = variants[0][1]
    # The buffer is in the unblocked schedule's result order, so its finish is the call's
    # (no copy: the buffer is fresh).
    assert base.finish is not None
    to_output = evolve(base.finish, copy=False)
    blocking = Blocking(
        labels=sliced_labels, chunks=sizes, counts=counts,
        accumulate=accumulate,
        operand_axes=tuple(tuple(tuple(a for a, (l2, n) in enumerate(zip(t, s)) if l2 == lab and n != 1)
                                 for lab in sliced_labels) for t, s in zip(inputs, shapes)),
        storage=storage,
        storage_axes=tuple(tuple(a for a, l2 in enumerate(storage) if l2 == lab) for lab in sliced_labels),
        inner=tuple(variants), hoisted=hoisted, sliced=sliced, in_place=in_place, base=base)
    return evolve(base, preparations=first.preparations, steps=first.steps, finish=to_output,
                  peak_extra=peak, cost_ns=total, blocking=blocking)


def make_schedule(plan: Plan, optimize: Any = "auto", use_einsum: bool = True,
                  memory_limit: Any = None, layouts: tuple[int, ...] | None = None,
                  cost_model: CostModel = NUMPY_MODEL) -> Schedule:
    """The schedule for a validated `Plan` (cached per plan and ``optimize``).

    ``use_einsum=False`` avoids einsum entirely, ``cost_model`` prices the choices (see
    `schedule_labels`).

    >>> from contractions.plan import make_plan
    >>> plan = make_plan('Wa,Wa->W', ((2, 3), (2, 3)), ())
    >>> make_schedule(plan).einsum   # local letters, first-appearance order
    'ab,ab->a'
    """
    exp = plan.expansion
    optimize = normalise_optimize(optimize)
    schedule = schedule_labels(exp.inputs, exp.output, plan.shapes, optimize,
                               use_einsum=use_einsum, memory_limit=memory_limit,
                               extents_by_label=plan.extents, layouts=layouts, cost_model=cost_model)
    one_call = as_one_einsum(schedule, optimize, cost_model)
    if one_call is not schedule:
        return one_call
    if optimize != "auto":
        return schedule   # an explicit path or optimizer: run it as asked
    # Here, not in `schedule_labels`: the blocks' own schedules come from there, unblocked.
    return _cache_blocked(schedule, use_einsum, cost_model)


def as_one_einsum(schedule: Schedule, optimize: Any, cost_model: CostModel) -> Schedule:
    """``schedule`` as one einsum call along its path where the model prices that call below
    the steps (torch: one C++ call instead of a Python dispatch per operation); else itself."""
    if schedule.strategy == "pairwise" and schedule.blocking is None and schedule.einsum is not None:
        path = cost_model.one_einsum_path(schedule, optimize)
        if path is not None:
            return evolve(schedule, strategy="direct", preparations=(), steps=(), path=path,
                          finish=Finish(None, schedule.output_shape, False, False), peak_extra=0)
    return schedule


def _cache_blocked(schedule: Schedule, use_einsum: bool, model: CostModel) -> Schedule:
    """``schedule`` in cache-sized blocks where it is a bandwidth-bound chain whose
    intermediates outgrow the cache (`CostModel.cache_block_elements`); else unchanged.
    Only under a memory bound: ``memory_limit=None`` means one unblocked run (and is what
    backends that cannot run blocks get).

    Bandwidth-bound: at most the profile's ``cache_block_max_flops_per_element`` FLOPs per element its steps
    read or write, and an intermediate at least half the largest operand.  Kept only when
    the blocks cost at most `CACHE_BLOCK_OVERHEAD` of the modelled time (the model prices the
    per-block work, not the cache it saves).
    """
    cache = model.cache_block_elements()
    steps = schedule.steps
    if (not cache or schedule.memory_limit is None or schedule.strategy != "pairwise"
            or schedule.blocking is not None or len(steps) < 2):
        return schedule
    ext = schedule.extents
    largest = max(size_of(step.result, ext) for step in steps[:-1])
    moved = sum(size_of(step.x_labels, ext) + size_of(step.y_labels, ext) + step.result_size
                for step in steps)
    if largest <= 2 * cache or sum(step.flops for step in steps) > (
            profile_of(model).cache_block_max_flops_per_element * moved):
        return schedule
    if 2 * largest < max(math.prod(shape) for shape in schedule.shapes):
        # the traffic is reading an operand, not an intermediate: nothing for a cache to keep
        # (measured: `Bi,Bij,Bj->B` ran 0.86x in 8 blocks)
        return schedule
    blocked, _ = _blocked(evolve(schedule, memory_limit=None), _limit_for(cache), use_einsum, model)
    if (blocked is None or blocked.blocking is None or blocked.blocking.accumulate
            or blocked.peak_extra > 2 * cache
            or blocked.cost_ns > CACHE_BLOCK_OVERHEAD * schedule.cost_ns):
        return schedule
    return evolve(blocked, memory_limit=schedule.memory_limit,
                  blocking=evolve(blocked.blocking, purpose="cache"))


#: Cache-sized blocks are kept while they model at most this much slower than one run.
CACHE_BLOCK_OVERHEAD = 1.15

