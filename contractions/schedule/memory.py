"""Memory accounting: which buffers a schedule holds at once, and the one ``memory_limit``
parser.

`_simulate` follows the executor's buffers step by step; `_peak_extra` is the unblocked peak
and `_loop_peak` a blocked run's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from ..model.protocol import size_of
from ..plan import PLAN_CACHE_SIZE
from .ir import CONVERTED, FORTRAN, STRIDED, Schedule, Shape

Token = tuple[str, int]


@functools.lru_cache(maxsize=PLAN_CACHE_SIZE)
def _step_tokens(n_operands: int, positions: tuple[tuple[int, int], ...]
                 ) -> tuple[tuple[Token, Token], ...]:
    """What each step consumes, named independently of list positions: ``('o', k)`` is
    operand ``k`` (prepared), ``('s', k)`` the result of step ``k``."""
    work: list[Token] = [("o", k) for k in range(n_operands)]
    out = []
    for k, (i, j) in enumerate(positions):
        y = work.pop(j)
        x = work.pop(i)
        out.append((x, y))
        work.append(("s", k))
    return tuple(out)


def _tokens_of(schedule: Schedule) -> tuple[tuple[Token, Token], ...]:
    return _step_tokens(len(schedule.inputs), tuple(s.operands for s in schedule.steps))


def _operand_token(schedule: Schedule, k: int, ext: dict[int, int], sliced: bool,
                   full_shape: Shape | None = None) -> tuple[int, int, bool]:
    """(elements held, transient elements while preparing, maybe not C-contiguous) of the
    prepared operand ``k`` at extents ``ext``; 0 held when it is a view of the caller's array."""
    prep, code = schedule.preparations[k], (schedule.layouts or ())[k:k + 1]
    flags = code[0] if code else 0
    block = [ext[lab] if n != 1 else 1 for lab, n in zip(schedule.inputs[k], schedule.shapes[k])]
    raw = math.prod(block)
    held = transient = raw if flags & CONVERTED else 0
    if sliced:
        # A block of a C array is C-contiguous when every axis before its last cut one has
        # length 1 in the block (a cut of the leading axes); a converted copy is compact.
        shape = full_shape or schedule.shapes[k]
        if flags & FORTRAN:   # read through its transpose: the same rule, axes reversed
            block, shape = block[::-1], tuple(shape[::-1])
        cut = [a for a, (b, n) in enumerate(zip(block, shape)) if b != n]
        sliced = bool(cut) and any(block[a] != 1 for a in range(cut[-1]))
    strided = bool(flags & STRIDED) or bool(prep.diagonals) or (sliced and not flags & CONVERTED)
    if prep.sum_axes:
        summed = size_of(prep.labels, ext)
        transient += summed
        held, strided = summed, bool(flags & STRIDED)
    return held, max(transient, held), strided


def _simulate(schedule: Schedule, ext: dict[int, int], operands: Sequence[int],
              steps: Sequence[int], alive: dict[Token, tuple[int, bool]], sliced: Sequence[bool],
              final_is_extra: bool, full_shapes: tuple[Shape, ...] | None = None,
              retained: frozenset[tuple[int, int]] = frozenset(),
              scratch_held: list[int] | None = None, preheld: bool = False) -> int:
    """Run the buffers of ``operands`` (prepared first, as the executor does) and then of
    ``steps`` through ``alive`` (token -> (elements held, maybe strided)); the peak elements.

    Counted: converted copies, preparation sums, the copies a step makes (sums of private
    axes, gathers, contiguous copies of strided inputs, a product before its promoted labels
    are summed: `Step.reduce`), results waiting to be consumed, and
    the last step's result when it is not the output itself (a block's result, or a result
    that the final reshape copies).  ``retained``: buffers a scratch pool keeps once made,
    ``(k, 0)``/``(k, 1)`` step ``k``'s copy of its left/right input and ``(k, 2)`` its result,
    held from their step to the end of the call (`scratch_sites`); ``scratch_held``, when
    given, carries the elements they hold in and out (a blocked run's prologue to its block);
    ``preheld``: it already counts them (a block after the first finds every one made).
    """
    scratch = scratch_held[0] if scratch_held else 0
    held = sum(n for n, _ in alive.values())
    peak = held
    for k in operands:
        n, transient, strided = _operand_token(schedule, k, ext, sliced[k],
                                               full_shapes[k] if full_shapes else None)
        peak = max(peak, held + transient)
        alive[("o", k)] = (n, strided)
        held += n
    tokens = _tokens_of(schedule)
    last = len(schedule.steps) - 1
    fin = schedule.finish
    reshape_copies = fin is not None and fin.permutation is not None and fin.reshape
    for k in steps:
        step = schedule.steps[k]
        tx, ty = tokens[k]
        (nx, x_strided), (ny, y_strided) = alive.pop(tx), alive.pop(ty)
        held -= nx + ny
        live = held + nx + ny
        sx = size_of([lab for a, lab in enumerate(step.x_labels) if a not in step.sum_x], ext)
        sy = size_of([lab for a, lab in enumerate(step.y_labels) if a not in step.sum_y], ext)
        if step.sum_x:
            live, x_strided = live + sx, False
        if step.sum_y:
            live, y_strided = live + sy, False
        for role, view, size, strided in ((0, step.x_view, sx, x_strided),
                                          (1, step.y_view, sy, y_strided)):
            if view is not None and (view.gather or (view.contiguous_first and strided)):
                if (k, role) in retained:
                    scratch += 0 if preheld else size
                else:
                    live += size
        result = size_of(step.result, ext)
        kept = result if k != last else 0
        if step.reduce:   # the product before its promoted labels are summed, beside the sum
            live += size_of(step.reduce, ext) * result
        if (k, 2) in retained:
            scratch, kept = scratch + (0 if preheld else result), 0
            if k == last:
                live += result * int(reshape_copies)
        elif k != last:
            live += result
        else:
            live += result * (int(final_is_extra) + int(reshape_copies))
        peak = max(peak, live + scratch)
        alive[("s", k)] = (kept, step.kernel != "matmul")
        held += kept
    if not schedule.steps and final_is_extra:
        peak = max(peak, held + size_of(schedule.output, ext))
    if scratch_held is not None:
        scratch_held[:] = [scratch]
    return peak


def _peak_extra(schedule: Schedule) -> int:
    """Elements alive at once beyond the operands and the result, at the worst moment, for
    the unblocked schedule (`_simulate` says what is counted)."""
    if schedule.strategy == "direct":
        return 0
    n = len(schedule.inputs)
    return _simulate(schedule, schedule.extents, range(n), range(len(schedule.steps)), {},
                     (False,) * n, final_is_extra=False)


def scratch_sites(schedule: Schedule, min_elements: int) -> tuple[tuple[int, int, int], ...]:
    """Per step of ``schedule``, the elements of the scratch buffer its left gather, right
    gather and result may use (0: a fresh array), for a pool that keeps such buffers from one
    call to the next (numpy's, contractions/backends/scratch.py).

    A kept buffer is not freed when its step is done, so on a call that has to make it, it
    adds to every later step's memory.  Chosen here, largest first, are the gathers
    (`View.gather`) and matmul results of at least ``min_elements`` elements that keep that
    call's peak within the schedule's own.  In a blocked run a step inside the loop keeps
    one buffer sized for a full block, which the shorter blocks use a prefix of; a result
    there is an intermediate even on the last step (it is written into the result and
    dropped).  Direct schedules keep none.

    >>> from contractions.plan import make_plan
    >>> from contractions.schedule import make_schedule
    >>> plan = make_plan('Cab,Cbc,Ccd->Cad', ((64, 40, 40),) * 3, ())
    >>> [result for _, _, result in scratch_sites(make_schedule(plan, memory_limit=None), 1)]
    [102400, 0]
    """
    none = (0, 0, 0)
    if schedule.strategy != "pairwise" or not schedule.steps:
        return tuple(none for _ in schedule.steps)
    n, ext, last = len(schedule.inputs), schedule.extents, len(schedule.steps) - 1
    blocking = schedule.blocking
    hoisted: set[int] = set()
    if blocking is None:
        steps_at = [(step, ext) for step in schedule.steps]

        def peak(retained: frozenset[tuple[int, int]]) -> int:
            return _simulate(schedule, ext, range(n), range(len(schedule.steps)), {}, (False,) * n,
                             final_is_extra=False, retained=retained)
    else:
        # The inner schedule of full blocks: the largest lengths of every cut label.
        full = max(blocking.inner, key=lambda item: item[0])[1]
        hoisted = set(blocking.hoisted)
        steps_at = [(schedule.steps[k], ext) if k in hoisted else (full.steps[k], full.extents)
                    for k in range(len(schedule.steps))]
        last = -1                        # every block's last result is dropped after its write

        def peak(retained: frozenset[tuple[int, int]]) -> int:
            # every kind of block, each beside every kept buffer (made by the full blocks)
            assert blocking is not None
            in_loop = sum(sizes[site] for site in retained if site[0] not in hoisted)
            return max(_loop_peak(schedule, body, ext, body.extents, blocking.sliced,
                                  blocking.hoisted, retained, in_loop)
                       for _, body in blocking.inner)

    candidates = []
    sizes: dict[tuple[int, int], int] = {}
    for k, (step, at) in enumerate(steps_at):
        for role, view, labels, summed in ((0, step.x_view, step.x_labels, step.sum_x),
                                           (1, step.y_view, step.y_labels, step.sum_y)):
            # gathers only: a contiguous copy of an input is made or not by its layout at run time
            size = size_of([lab for a, lab in enumerate(labels) if a not in summed], at)
            if view is not None and view.gather and size >= min_elements:
                candidates.append((size, (k, role)))
                sizes[k, role] = size
        size = size_of(step.result, at)
        if step.kernel == "matmul" and not step.reduce and k != last and size >= min_elements:
            candidates.append((size, (k, 2)))
            sizes[k, 2] = size
    if not candidates:  # nothing large enough to keep (every small call): no simulation
        return tuple(none for _ in schedule.steps)
    bound = peak(frozenset())
    chosen: dict[tuple[int, int], int] = {}
    for size, site in sorted(candidates, key=lambda c: (-c[0], c[1])):
        if peak(frozenset(chosen) | {site}) <= bound:
            chosen[site] = size
    return tuple((chosen.get((k, 0), 0), chosen.get((k, 1), 0), chosen.get((k, 2), 0))
                 for k in range(len(schedule.steps)))


def _resolve_limit(memory_limit: Any, shapes: tuple[Shape, ...], output_shape: Shape) -> int | None:
    if memory_limit is None:
        return None
    largest_input = max((math.prod(s) for s in shapes), default=1)
    if memory_limit == "max_input":
        return largest_input
    if memory_limit == "default":
        return max(largest_input, math.prod(output_shape), DEFAULT_LIMIT_FLOOR)
    return int(memory_limit)


#: The default limit never goes below this many elements (8 MiB of float64): below it, blocks
#: only add Python overhead (dev/decisions.md 24).
DEFAULT_LIMIT_FLOOR = 2**20


#: Blocks are cut until the modelled peak is within this share of the limit.  The model counts
#: intermediates, gathered and converted copies, slice copies and block results; the share
#: leaves room for what it cannot see (matmul's own buffers, a reshape of a strided view;
#: measured: dev/decisions.md 24).
BLOCK_HEADROOM = 0.9


def _limit_for(peak: int) -> int:
    """The smallest limit whose blocking target (`BLOCK_HEADROOM` of it) admits ``peak``."""
    works = max(1, math.ceil(peak / BLOCK_HEADROOM))
    while int(works * BLOCK_HEADROOM) < peak:
        works += 1
    return works


def step_tokens(schedule: Schedule) -> tuple[tuple[tuple[str, int], tuple[str, int]], ...]:
    """What each step of ``schedule`` consumes: ``('o', k)`` operand ``k`` (prepared),
    ``('s', k)`` the result of step ``k`` (positions in the working list resolved).

    >>> from contractions.plan import make_plan
    >>> from contractions.schedule import make_schedule
    >>> plan = make_plan('ij,jk,kl->il', ((30, 40), (40, 50), (50, 60)), ())
    >>> step_tokens(make_schedule(plan, [(1, 2), (0, 1)]))
    ((('o', 1), ('o', 2)), (('o', 0), ('s', 0)))
    """
    return _tokens_of(schedule)


def _loop_peak(prologue: Schedule, body: Schedule, ext_full: dict[int, int],
               ext_block: dict[int, int], sliced: tuple[bool, ...], hoisted: tuple[int, ...],
               retained: frozenset[tuple[int, int]] = frozenset(), in_loop: int = 0) -> int:
    """The peak of a blocked run: the prologue (unsliced operands and hoisted steps, whole),
    then one block of ``body`` beside the prologue results the loop still needs (and the
    scratch buffers ``retained`` keeps, `_simulate`: the ``in_loop`` elements of those inside
    the loop are all held from the second block on)."""
    n = len(sliced)
    alive: dict[Token, tuple[int, bool]] = {}
    scratch = [0]
    first = _simulate(prologue, ext_full, [k for k in range(n) if not sliced[k]], hoisted, alive,
                      sliced, final_is_extra=True, retained=retained, scratch_held=scratch)
    loop = [k for k in range(len(body.steps)) if k not in set(hoisted)]
    scratch[0] += in_loop
    block = _simulate(body, ext_block, [k for k in range(n) if sliced[k]], loop, dict(alive), sliced,
                      final_is_extra=True, full_shapes=prologue.shapes, retained=retained,
                      scratch_held=scratch, preheld=True)
    return max(first, block)
