"""Lowering: a contraction and a path become a `Schedule` (preparations, pairwise steps with
their kernels, views and modelled costs, the finish), or one direct einsum call."""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterator, Sequence
from typing import Any

from opt_einsum.helpers import flop_count as _flop_count

from ..errors import ContractionError
from ..model.layout import MatmulLayout, best_matmul_layout, profile_of
from ..model.numpy_prices import NUMPY_MODEL, direct_ns, einsum_step_ns
from ..model.protocol import CostModel, size_of
from .ir import EINSUM_LETTERS, FORTRAN, Finish, Labels, Preparation, Schedule, Shape, Step, View, evolve
from .memory import _peak_extra
from .paths import _candidate_paths, _fewest_flops, _find_path, _optimizer_name

# numpy's C einsum takes fewer than 64 operands (32 before numpy 2): more always run pairwise.
DIRECT_MAX_OPERANDS = 31


# --------------------------------------------------------------------------- preparation
def _permutation(current: Sequence[int], wanted: Sequence[int]) -> tuple[int, ...] | None:
    perm = tuple(current.index(label) for label in wanted)
    return None if perm == tuple(range(len(perm))) else perm


def _einsum_string(inputs: Sequence[Sequence[int]], output: Sequence[int]) -> str | None:
    """Letter string for integer-labelled terms, or None past 52 distinct labels."""
    order = dict.fromkeys(label for term in (*inputs, output) for label in term)
    if len(order) > len(EINSUM_LETTERS):
        return None
    letter = dict(zip(order, EINSUM_LETTERS)).__getitem__
    return ",".join("".join(map(letter, t)) for t in inputs) + "->" + "".join(map(letter, output))


def _prepare(labels: Labels, shape: Shape, needed_elsewhere: set[int],
             reverse: bool = False) -> Preparation:
    transpose = None
    if reverse and len(shape) > 1:
        transpose = tuple(reversed(range(len(shape))))
        labels, shape = labels[::-1], shape[::-1]
    # Size-1 axes carry nothing: they broadcast against a full extent elsewhere, or the label
    # is 1 everywhere and the output gets its 1 back from the final reshape.
    kept = [axis for axis, n in enumerate(shape) if n != 1]
    squeeze = tuple(shape[a] for a in kept) if len(kept) != len(shape) else None
    current = [labels[a] for a in kept]
    diagonals = []
    while len(set(current)) != len(current):
        label = next(lab for lab in current if current.count(lab) > 1)
        first = current.index(label)
        second = current.index(label, first + 1)
        diagonals.append((first, second))
        current = [lab for k, lab in enumerate(current) if k not in (first, second)] + [label]
    # Axes nobody else needs are summed now, before they inflate a pairwise step.
    sum_axes = tuple(a for a, lab in enumerate(current) if lab not in needed_elsewhere)
    current = [lab for a, lab in enumerate(current) if a not in sum_axes]
    return Preparation(squeeze=squeeze, diagonals=tuple(diagonals), sum_axes=sum_axes,
                       labels=tuple(current), transpose=transpose)


# ---------------------------------------------------------------------------------- steps
def _in_order_view(labels: Labels, order: Labels, extents: dict[int, int]) -> View:
    """View an array with ``labels`` in ``order``; absent labels become size-1 axes."""
    present = [lab for lab in order if lab in labels]
    return View(permutation=_permutation(labels, present),
                shape=tuple(extents[lab] if lab in labels else 1 for lab in order))


def _preferred_order(lx: Labels, ly: Labels, kept: set[int], final: Labels | None,
                     extents: dict[int, int]) -> Labels:
    """Result order for multiply/einsum steps: the output order on the last step, else the
    larger operand's order then the other's new labels (streams the big one)."""
    if final is not None:
        return final
    big, small = (lx, ly) if size_of(lx, extents) >= size_of(ly, extents) else (ly, lx)
    order = [lab for lab in big if lab in kept]
    order += [lab for lab in small if lab in kept and lab not in order]
    return tuple(order)


#: A call's outer product is written in another order than the output's (and returned as a
#: permuted view) only when modelled at most this share of the output order's time.
PERMUTED_RESULT_SHARE = 0.9


def _ordered(first: Labels, then: Labels, kept: set[int]) -> Labels:
    """The kept labels of ``first`` in its order, then ``then``'s new ones in theirs."""
    return tuple(dict.fromkeys(lab for lab in first + then if lab in kept))


def _gathered(lx: Labels, ly: Labels, layout: MatmulLayout, extents: dict[int, int]) -> int:
    """The elements ``layout`` copies: each operand its factor gathers."""
    x_factor, y_factor = (layout.right, layout.left) if layout.swap else (layout.left, layout.right)
    return size_of(lx, extents) * x_factor.copy + size_of(ly, extents) * y_factor.copy


def _factor_view(labels: Labels, lead: Labels, stack: Shape, outer: Labels, inner: Labels,
                 factor: Any, extents: dict[int, int]) -> View:
    """The view making an operand one matmul factor: ``stack`` then the (outer x inner) matrix."""
    n_outer, n_inner = size_of(outer, extents), size_of(inner, extents)
    if factor.copy:
        return View(permutation=_permutation(labels, lead + outer + inner),
                    shape=(*stack, n_outer, n_inner), gather=True)
    # The plan assumes C-ordered operands; anything else (a caller's Fortran array, a diagonal
    # view) is made contiguous once rather than handed to matmul's slow non-BLAS loop.
    if factor.transposed:
        return View(permutation=_permutation(labels, lead + inner + outer),
                    shape=(*stack, n_inner, n_outer), contiguous_first=True, swap_last=True)
    return View(permutation=_permutation(labels, lead + outer + inner),
                shape=(*stack, n_outer, n_inner), contiguous_first=True)


def _inner_run(order: Labels, lx: Labels, ly: Labels, extents: dict[int, int]) -> int:
    """The length of the innermost loop of a broadcast product written in ``order``: its
    trailing labels that both operands hold, or one holds, alike (numpy's iterator merges
    such axes into one loop; a change of which operand holds a label breaks the run)."""
    run = 1
    side = None
    for lab in reversed(order):
        here = (lab in lx, lab in ly)
        if side is not None and here != side:
            break
        side = here
        run *= extents[lab]
    return run


def _contiguous(labels: Labels, extents: dict[int, int]) -> View:
    """An operand as it is, made C-contiguous first if it is not (a no-op for C arrays)."""
    return View(permutation=None, shape=tuple(extents[lab] for lab in labels), contiguous_first=True)


def broadcast_step_ns(order: Labels, lx: Labels, ly: Labels, extents: dict[int, int],
                      model: CostModel, final: bool = False) -> float:
    """Modelled time of a step with nothing to sum writing its result in ``order``, whichever
    kernel runs it: the broadcast-product price the paths are chosen with (`_broadcast_kernel`
    picks the kernel apart).  That price holds a fresh buffer's first touch; the call's own
    result (``final``) is priced as `result_buffer_ns` says instead."""
    elements = size_of(order, extents)
    cost = model.multiply_ns(elements, _inner_run(order, lx, ly, extents))
    if final:
        cost -= model.fresh_buffer_ns(elements) - model.result_buffer_ns(elements)
    return cost


def _broadcast_kernel(order: Labels, lx: Labels, ly: Labels, extents: dict[int, int],
                      model: CostModel) -> str:
    """The kernel for a step with nothing to sum: for an outer product (each side holds labels
    the other lacks) the one the backend prices lowest, else np.multiply (einsum's loop for a
    large result in another order than its larger operand's).  Only the kernel
    follows these prices, not the step's cost: the lower outer-product prices, used for the
    path search too, drew paths through large outer-product intermediates that ran slower
    (dev/decisions.md, decision 33)."""
    if set(lx) - set(ly) and set(ly) - set(lx):
        prices = model.outer_product_ns(size_of(order, extents), _inner_run(order, lx, ly, extents))
        return min(prices, key=prices.__getitem__)
    # One side's labels within the other's: np.multiply, except a large result written in
    # another order than the larger side's (einsum's loop measured faster there; decision 42).
    threshold = model.permuted_within_einsum_elements()
    if threshold and size_of(order, extents) >= threshold:
        larger = lx if len(lx) >= len(ly) else ly
        if [lab for lab in order if extents[lab] != 1] != [lab for lab in larger if extents[lab] != 1]:
            return "einsum"
    return "multiply"


def reduce_ns(wide: int, result: int, final: bool, model: CostModel) -> float:
    """Modelled time of summing a product of ``wide`` elements (promoted labels kept as batch
    axes, `Step.reduce`) into its ``result``: the product's fresh buffer, one pass over it
    (einsum's price for a multiply-add: a reduction reads and adds each element once), and
    the result's buffer (the call's own when ``final``)."""
    written = model.result_buffer_ns(result) if final else model.fresh_buffer_ns(result)
    return model.fresh_buffer_ns(wide) + model.einsum_ns(wide) + written


def _promotions(lx: Labels, ly: Labels, contract_set: set[int]) -> list[tuple[int, ...]]:
    """Sets of contracted labels worth running as batch labels and summing after, to spare a
    gather: those stored before every label the other side lacks, on both sides (for
    'WCiab,WCjab->Cij', W: each (W, C) pair is then an (i x ab) @ (ab x j) product of views),
    and the leading run of contracted labels both operands start with.  Never all of them
    (a product with nothing to contract is an outer product)."""
    def before_own(labels: Labels, other: Labels) -> tuple[int, ...]:
        own = [k for k, lab in enumerate(labels) if lab not in other]
        first = own[0] if own else len(labels)
        return tuple(lab for lab in labels[:first] if lab in contract_set)

    def leading(labels: Labels) -> tuple[int, ...]:
        run = []
        for lab in labels:
            if lab not in contract_set:
                break
            run.append(lab)
        return tuple(run)

    found = []
    for x_part, y_part in ((before_own(lx, ly), before_own(ly, lx)), (leading(lx), leading(ly))):
        promoted = tuple(lab for lab in x_part if lab in y_part)
        if promoted and len(promoted) < len(contract_set) and promoted not in found:
            found.append(promoted)
    return found


def _step(operands: tuple[int, int], lx: Labels, ly: Labels, keep: set[int],
          extents: dict[int, int], final: Labels | None, use_einsum: bool = True,
          model: CostModel = NUMPY_MODEL) -> Step:
    """Schedule one pairwise contraction of ``lx`` and ``ly`` keeping the labels in ``keep``."""
    x_labels, y_labels = lx, ly
    # Labels only one side has and nobody needs later are summed first.
    sum_x = tuple(a for a, lab in enumerate(lx) if lab not in ly and lab not in keep)
    sum_y = tuple(a for a, lab in enumerate(ly) if lab not in lx and lab not in keep)
    lx = tuple(lab for a, lab in enumerate(lx) if a not in sum_x)
    ly = tuple(lab for a, lab in enumerate(ly) if a not in sum_y)
    shared = set(lx) & set(ly)
    batch_set = {lab for lab in shared if lab in keep}
    contract_set = shared - batch_set
    kept = (set(lx) | set(ly)) - contract_set
    left = tuple(lab for lab in lx if lab not in shared)
    right = tuple(lab for lab in ly if lab not in shared)
    every = tuple(dict.fromkeys(lx + ly))
    flops = _flop_count(every, bool(contract_set), 2, extents)
    common = dict(operands=operands, x_labels=x_labels, y_labels=y_labels, sum_x=sum_x,
                  sum_y=sum_y, flops=flops)
    # Whatever the kernel, the step reads both operands and writes its result: no price
    # below what those bytes and its FLOPs take (`CostModel.roofline_ns`); a gather adds
    # its copy, written and read again.
    plain = size_of(x_labels, extents) + size_of(y_labels, extents) + size_of(tuple(kept), extents)
    floor = model.roofline_ns(flops, plain, plain)

    if not contract_set:
        # Nothing to sum: an outer/elementwise product of broadcast views, or of an outer
        # product einsum's loop where the model prices that lower.
        order = _preferred_order(lx, ly, kept, final, extents)
        cost = broadcast_step_ns(order, lx, ly, extents, model, final is not None)
        if final is not None:
            # The call's result may be written in an operand's order, returned as a permuted
            # view (as a matmul's is): long runs rather than short ones in output order, where
            # modelled a tenth faster (a permuted result costs its caller later; decision 57).
            best = cost * PERMUTED_RESULT_SHARE
            for other in (_preferred_order(lx, ly, kept, None, extents), _ordered(lx, ly, kept),
                          _ordered(ly, lx, kept)):
                priced = broadcast_step_ns(other, lx, ly, extents, model, True)
                if priced < best:
                    order, cost, best = other, priced, priced
        cost = max(cost, floor)
        shape = tuple(extents[lab] for lab in order)
        subscripts = _einsum_string((lx, ly), order) if use_einsum else None
        if subscripts is not None and _broadcast_kernel(order, lx, ly, extents, model) == "einsum":
            # Strided inputs (a block's slices, a caller's transposed array) are made contiguous
            # first: einsum's loop over them walks more axes, and ran a block 2.1x slower than
            # on copies of its slices, which cost a twentieth of that (decision 33); the inputs
            # of an outer product are small beside its result.
            return Step(**common, batch=tuple(lab for lab in order if lab in batch_set), contract=(),
                        result=order, result_shape=shape, kernel="einsum", einsum=subscripts,
                        x_view=_contiguous(lx, extents), y_view=_contiguous(ly, extents),
                        swap=False, layout=None, cost_ns=cost)
        return Step(**common, batch=tuple(lab for lab in order if lab in batch_set), contract=(),
                    result=order, result_shape=shape, kernel="multiply", einsum=None,
                    x_view=_in_order_view(lx, order, extents), y_view=_in_order_view(ly, order, extents),
                    swap=False, layout=None, cost_ns=cost)

    layout = best_matmul_layout(lx, ly, batch_set, contract_set, extents, final, model)
    nl, nr, nc = size_of(left, extents), size_of(right, extents), size_of(layout.contract, extents)
    needs_copy = layout.left.copy or layout.right.copy
    vector_like = not left or not right
    small = nl * nc * nr <= model.einsum_step_max_macs()
    letters_ok = use_einsum and len(kept | contract_set) <= len(EINSUM_LETTERS)
    # The last step writes the call's result, which a caller's loop reuses warm.
    result_ns = model.result_buffer_ns if final is not None else model.fresh_buffer_ns
    copied = _gathered(lx, ly, layout, extents)
    workers, spared = _split(layout, extents, model)
    matmul_ns = max(layout.cost - spared + result_ns(size_of(tuple(kept), extents)),
                    model.roofline_ns(flops, plain + 2 * copied, plain + copied))
    if (layout.left.copy or layout.right.copy) and left and right and model.promotes_contracted():
        # A gather might be spared by running some contracted labels as batch labels and
        # summing them after (`Step.reduce`): kept where the model prices it lower.
        promoted = _promoted_step(lx, ly, batch_set, contract_set, kept, extents, final, model,
                                  common, matmul_ns, plain)
        if promoted is not None:
            return promoted
    far = max(size_of(lx, extents), size_of(ly, extents)) > model.memory_elements()
    # A stack of dot products goes to einsum's loop unless its dots are long and no copy is
    # needed (`DOT_MATMUL_MIN_LENGTH`, measured).
    long_dots = not left and not right and not needs_copy and nc >= model.dot_matmul_min_length()
    einsum_first = needs_copy or (small and not long_dots) or (not left and not right and not long_dots)
    if letters_ok and vector_like and (einsum_first or far):
        # einsum's loop reads any strides, so a vector-like step never copies; BLAS would only
        # gain on a large matrix-vector product with a free layout ...
        order = _preferred_order(lx, ly, kept, final, extents)
        shape = tuple(extents[lab] for lab in order)
        einsum_ns = max(einsum_step_ns((lx, ly), order, extents, model, final=final is not None), floor)
        # ... or where einsum's walk reads an operand past the caches in far-apart pieces that
        # the stacked product streams as views (the memory terms decide only by a clear
        # margin; a gather of such an operand measured 2-3x its price, so never for one).
        # A large one past the caches goes to einsum, which streams it, only by that margin
        # too (stacked (1 x k) @ (k x n) products read such an operand at 2x einsum's time).
        worth = profile_of(model).layout_memory_worth
        if einsum_first:
            use = needs_copy or not (far and matmul_ns * worth < einsum_ns)
        else:
            use = einsum_ns * worth < matmul_ns
        if use:
            subscripts = _einsum_string((lx, ly), order)
            assert subscripts is not None
            return Step(**common, batch=layout.batch, contract=layout.contract, result=order,
                        result_shape=shape, kernel="einsum", einsum=subscripts, x_view=None,
                        y_view=None, swap=False, layout=None, cost_ns=einsum_ns)

    x_view, y_view, result = _matmul_views(lx, ly, layout, extents)
    return Step(**common, batch=layout.batch, contract=layout.contract, result=result,
                result_shape=tuple(extents[lab] for lab in result), kernel="matmul", einsum=None,
                x_view=x_view, y_view=y_view, swap=layout.swap, layout=layout, cost_ns=matmul_ns,
                workers=workers)


def products_ns(layout: MatmulLayout, extents: dict[int, int], model: CostModel) -> float:
    """The modelled time of ``layout``'s stack of products run whole: the stacked products
    and, for a column-major right factor, their transposed-read extra."""
    ext = extents.__getitem__
    calls = math.prod(map(ext, layout.batch + layout.left.spread + layout.right.spread))
    rows, cols = math.prod(map(ext, layout.left.free)), math.prod(map(ext, layout.right.free))
    products = model.matmul_ns(calls, rows, math.prod(map(ext, layout.contract)), cols)
    if layout.right.transposed and calls > 1:
        products += model.batched_right_transpose_ns(calls, rows, cols)
    return products


def _split(layout: MatmulLayout, extents: dict[int, int], model: CostModel,
           products: float | None = None) -> tuple[int, float]:
    """(workers, time spared): the parts ``layout``'s stack of products is cut into along its
    leading axis to run at once (`CostModel.split_products`), and what that spares of the
    products' time (``products``: `products_ns`, where the caller has it; 0.0 run whole)."""
    stack = layout.batch + layout.left.spread + layout.right.spread
    if not stack:
        return 1, 0.0
    ext = extents.__getitem__
    products = products_ns(layout, extents, model) if products is None else products
    workers, split = model.split_products(
        extents[stack[0]], math.prod(map(ext, stack)), math.prod(map(ext, layout.left.free)),
        math.prod(map(ext, layout.contract)), math.prod(map(ext, layout.right.free)), products)
    return workers, products - split


def _matmul_views(lx: Labels, ly: Labels, layout: MatmulLayout,
                  extents: dict[int, int]) -> tuple[View, View, Labels]:
    """The views presenting ``lx`` and ``ly`` as ``layout``'s two factors, and the labels of
    the product (batch, the spread labels, then the rows and columns)."""
    lp, lq = (ly, lx) if layout.swap else (lx, ly)
    b, c, p, q = layout.batch, layout.contract, layout.left, layout.right
    ext = lambda labels: tuple(extents[lab] for lab in labels)  # noqa: E731
    # Stack axes: batch, the left factor's spread labels, then the right's (each factor has 1s
    # in the other's spread positions; matmul broadcasts them).
    left_stack = (*ext(b), *ext(p.spread), *(1 for _ in q.spread))
    right_stack = (*ext(b), *(1 for _ in p.spread), *ext(q.spread))
    view_p = _factor_view(lp, b + p.spread, left_stack, p.free, c, p, extents)
    view_q = _factor_view(lq, b + q.spread, right_stack, c, q.free, q, extents)
    x_view, y_view = (view_q, view_p) if layout.swap else (view_p, view_q)
    return x_view, y_view, b + p.spread + q.spread + p.free + q.free


def _promoted_step(lx: Labels, ly: Labels, batch_set: set[int],
                   contract_set: set[int], kept: set[int], extents: dict[int, int],
                   final: Labels | None, model: CostModel, common: dict[str, Any],
                   to_beat: float, plain: int) -> Step | None:
    """The cheapest matmul step with some contracted labels promoted to batch labels and
    summed after (`_promotions`), if the model prices it below ``to_beat``; ``plain``: the
    elements the step reads and writes without its wide product and copies (its floor's)."""
    best: tuple[float, MatmulLayout, tuple[int, ...]] | None = None
    result_size = size_of(tuple(kept), extents)
    for promoted in _promotions(lx, ly, contract_set):
        layout = best_matmul_layout(lx, ly, batch_set | set(promoted), contract_set - set(promoted),
                                    extents, None, model)
        wide = result_size * size_of(promoted, extents)
        copied = _gathered(lx, ly, layout, extents)
        cost = max(layout.cost + reduce_ns(wide, result_size, final is not None, model),
                   model.roofline_ns(common["flops"], plain + 2 * (wide + copied), plain + wide + copied))
        if cost < to_beat and (best is None or cost < best[0]):
            best = (cost, layout, promoted)
    if best is None:
        return None
    cost, layout, promoted = best
    x_view, y_view, wide_labels = _matmul_views(lx, ly, layout, extents)
    result = tuple(lab for lab in wide_labels if lab not in promoted)
    ext = lambda labels: tuple(extents[lab] for lab in labels)  # noqa: E731
    return Step(**common, batch=tuple(lab for lab in layout.batch if lab not in promoted),
                contract=tuple(promoted) + layout.contract, result=result, result_shape=ext(result),
                kernel="matmul", einsum=None, x_view=x_view, y_view=y_view, swap=layout.swap,
                layout=layout, cost_ns=cost, reduce=tuple(promoted),
                reduce_axes=tuple(k for k, lab in enumerate(wide_labels) if lab in promoted),
                wide_shape=ext(wide_labels))


# ------------------------------------------------------------------------------ schedules
def _extents_of(inputs: Sequence[Labels], shapes: Sequence[Shape]) -> dict[int, int]:
    extents: dict[int, int] = {}
    for labels, shape in zip(inputs, shapes):
        for label, n in zip(labels, shape):
            if extents.get(label, 1) == 1:
                extents[label] = n
    return extents


def _direct(inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...],
            output_shape: Shape, extents: dict[int, int], einsum: str,
            path: tuple[tuple[int, ...], ...], naive: int, optimizer: str,
            model: CostModel = NUMPY_MODEL, follow: Schedule | None = None) -> Schedule:
    summed = {lab for term in inputs for lab in term} - set(output)
    # einsum returns a view for a pure transpose/diagonal of one operand: copy it then.
    finish = Finish(permutation=None, shape=output_shape, reshape=False,
                    copy=len(inputs) == 1 and not summed)
    return Schedule(inputs=inputs, output=output, shapes=shapes, output_shape=output_shape,
                    extents=extents, strategy="direct", einsum=einsum, path=path, finish=finish,
                    optimizer=optimizer, flops=naive, naive_flops=naive,
                    peak_extra=0, cost_ns=(_scaled(follow.cost_ns, naive, follow.naive_flops)
                                           if follow is not None else
                                           direct_ns(inputs, output, extents, model) + model.call_ns(1)),
                    priced_by=getattr(model, "priced_by", ""))


def _along_path(inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...],
                output_shape: Shape, extents: dict[int, int], einsum: str | None, naive: int,
                model: CostModel = NUMPY_MODEL) -> Schedule | None:
    """One einsum call per pair along the path of fewest FLOPs (`_fewest_flops`), nothing else
    decided: no preparation, kernel, layout or order is planned, so it costs the path alone.
    Its FLOPs and peak (the intermediates alive at once: einsum's loop copies nothing) are
    counted, its price is einsum's loop for those FLOPs (`Schedule.along_path`); None past
    the letters one einsum call can name.

    >>> s = _along_path(((0, 1), (1, 2), (2, 3)), (0, 3), ((10, 2), (2, 10), (10, 2)), (10, 2),
    ...                 {0: 10, 1: 2, 2: 10, 3: 2}, 'ab,bc,cd->ad', 400)
    >>> s.strategy, s.along_path, s.path, s.peak_extra      # (b c)(c d) first: a 2 x 2 intermediate
    ('direct', True, ((1, 2), (0, 1)), 4)
    """
    if einsum is None or len(inputs) < 2 or len(inputs) > DIRECT_MAX_OPERANDS:
        return None
    path = _fewest_flops(list(inputs), output, extents)
    flops = peak = held = moved = 0
    sizes = [0] * len(inputs)   # elements each working term holds beyond the caller's operands
    last = len(path) - 1
    for k, (i, j, x, y, result, summed) in enumerate(_pair_terms(inputs, output, path)):
        flops += _flop_count(tuple(dict.fromkeys(x + y)), summed, 2, extents)
        written = math.prod(map(extents.__getitem__, result))
        moved += size_of(tuple(dict.fromkeys(x)), extents) + size_of(tuple(dict.fromkeys(y)), extents) + written
        size = written if k != last else 0  # (the last: the result)
        peak = max(peak, held + size)
        held += size - sizes[i] - sizes[j]
        sizes = [n for m, n in enumerate(sizes) if m != i and m != j] + [size]
    cost = max(model.einsum_ns(flops), model.roofline_ns(flops, moved, moved)) + model.call_ns(len(path))
    finish = Finish(permutation=None, shape=output_shape, reshape=False, copy=False)
    return Schedule(inputs=inputs, output=output, shapes=shapes, output_shape=output_shape,
                    extents=extents, strategy="direct", einsum=einsum, path=path, finish=finish,
                    optimizer="auto", flops=flops, naive_flops=naive, peak_extra=peak,
                    cost_ns=cost, along_path=True, priced_by=getattr(model, "priced_by", ""))


def path_einsums(schedule: Schedule) -> tuple[tuple[int, int, str], ...]:
    """A `Schedule.along_path` schedule's einsum calls: per pair of its path, the positions
    taken from the working list (the result is appended) and the pair's subscripts.

    >>> s = _along_path(((0, 1), (1, 2), (2, 3)), (0, 3), ((10, 2), (2, 10), (10, 2)), (10, 2),
    ...                 {0: 10, 1: 2, 2: 10, 3: 2}, 'ab,bc,cd->ad', 400)
    >>> path_einsums(s)
    ((1, 2, 'bc,cd->bd'), (0, 1, 'ab,bd->ad'))
    """
    letter = dict(zip(dict.fromkeys(lab for term in (*schedule.inputs, schedule.output)
                                    for lab in term), EINSUM_LETTERS)).__getitem__
    return tuple((i, j, "".join(map(letter, x)) + "," + "".join(map(letter, y)) + "->"
                  + "".join(map(letter, result)))
                 for i, j, x, y, result, _ in _pair_terms(schedule.inputs, schedule.output,
                                                          schedule.path))


def framework_path_peak(schedule: Schedule, views: bool = True) -> int:
    """The most elements a framework einsum run along ``schedule.path`` (one call per pair,
    the peer a backend may measure against its steps) can hold beyond the operands and the
    result: the intermediates alive at once, plus, at each pair, a copy of each term its
    matmul cannot read as it lies.  The rule is numpy 2.4's pairwise einsum's: the term at the
    later position is the left factor, wanted as batch, kept, contracted labels (batch and
    contracted in its order), the other as batch, contracted, kept; a caller's operand is read
    as a view when it holds exactly those labels, each once and of extent above 1, and either
    lies in that order or needs no fusing (one label a group: a transposed view is read by
    BLAS as it lies); anything else is counted as copied: an intermediate always (numpy orders
    its labels by extent and may return it permuted), and the right factor beside one unless at
    most one label is batch and one contracted (their order is the intermediate's); a pair
    that contracts nothing (a broadcast product) counts both terms and its product once more.
    ``views=False`` (an einsum without that rule, such as numpy's before 2.4, which hands pairs
    to ``tensordot`` in its own label order): every pair counts both terms and its product.

    >>> s = _along_path(((0, 1), (1, 2), (2, 3)), (0, 3), ((10, 2), (2, 10), (10, 2)), (10, 2),
    ...                 {0: 10, 1: 2, 2: 10, 3: 2}, 'ab,bc,cd->ad', 400)
    >>> framework_path_peak(s)     # cd,bc->bd: two views and 4 kept; ab,bd: 4 held + bd copied
    8
    """
    extents = schedule.extents
    size = extents.__getitem__
    peak = held = 0
    sizes = [0] * len(schedule.inputs)
    given = [True] * len(schedule.inputs)   # a caller's operand (else an intermediate)
    last = len(schedule.path) - 1
    for k, (i, j, x, y, result, _) in enumerate(_pair_terms(schedule.inputs, schedule.output,
                                                             schedule.path)):
        kept = set(result)
        con = [lab for lab in dict.fromkeys(y) if lab in x and lab not in kept]
        batch = [lab for lab in dict.fromkeys(y) if lab in x and lab in kept]
        own_y = [lab for lab in dict.fromkeys(y) if lab not in x and lab in kept]
        own_x = [lab for lab in dict.fromkeys(x) if lab not in y and lab in kept]
        copies = 0
        for position, term, order, groups in ((j, y, (*batch, *own_y, *con), (batch, own_y, con)),
                                              (i, x, (*batch, *con, *own_x), (batch, con, own_x))):
            fused = any(len(group) != 1 for group in (groups if batch else groups[1:]))
            as_view = (views and con and given[position] and sorted(term) == sorted(order)
                       and all(extents[lab] > 1 for lab in term) and (term == order or not fused)
                       # (the left factor's labels order both: unknown for an intermediate)
                       and (given[j] or (len(batch) <= 1 and len(con) <= 1)))
            if not as_view:
                copies += math.prod(map(size, dict.fromkeys(term)))
        kept_size = math.prod(map(size, result)) if k != last else 0
        if not con or not views:
            copies += math.prod(map(size, result))   # (a product that may be laid out anew)
        peak = max(peak, held + kept_size + copies)
        held += kept_size - sizes[i] - sizes[j]
        sizes = [n for m, n in enumerate(sizes) if m != i and m != j] + [kept_size]
        given = [g for m, g in enumerate(given) if m != i and m != j] + [False]
    return peak


def _pair_terms(inputs: Sequence[Labels], output: Labels, path: Sequence[tuple[int, ...]]
                ) -> Iterator[tuple[int, int, Labels, Labels, Labels, bool]]:
    """Per pair of ``path`` over a working list (each result appended): the positions taken,
    the two terms, the result's labels (those the output or a term left needs; the output
    itself last) and whether a label is summed."""
    terms = list(inputs)
    for pair in path:
        i, j = sorted(pair)
        rest = [t for k, t in enumerate(terms) if k != i and k != j]
        keep = set(output).union(*rest)
        both = tuple(dict.fromkeys(terms[i] + terms[j]))
        result = tuple(lab for lab in both if lab in keep) if rest else output
        yield i, j, terms[i], terms[j], result, any(lab not in keep for lab in both)
        terms = rest + [result]


def _scaled(cost_ns: float, flops: int, template_flops: int) -> float:
    """A followed schedule's or step's price: its template's, scaled by their FLOPs (the reuse
    tier prices nothing: the model's prices cost more than the arithmetic of a small call)."""
    return cost_ns * flops / template_flops if template_flops else cost_ns


def _preparations(inputs: tuple[Labels, ...], shapes: tuple[Shape, ...],
                  final_order: Labels, layouts: tuple[int, ...] | None = None) -> list[Preparation]:
    # Labels of extent 1 everywhere are dropped from the whole computation; the final reshape
    # puts their 1s back into the output.
    surviving = [tuple(lab for lab, n in zip(t, s) if n != 1) for t, s in zip(inputs, shapes)]
    preps = []
    for k, (labels, shape) in enumerate(zip(inputs, shapes)):
        elsewhere = set(final_order)
        for other, term in enumerate(surviving):
            if other != k:
                elsewhere.update(term)
        preps.append(_prepare(labels, shape, elsewhere,
                              reverse=bool(layouts is not None and layouts[k] & FORTRAN)))
    return preps


def _walk(preps: list[Preparation], path: tuple[tuple[int, ...], ...], final_order: Labels,
          extents: dict[int, int], use_einsum: bool, model: CostModel = NUMPY_MODEL,
          memo: dict[Any, Step] | None = None) -> list[Step]:
    """The steps of ``path`` over the prepared operands (entries of 3+ folded pairwise)."""
    return list(_walk_steps([p.labels for p in preps], path, final_order, extents, use_einsum,
                            model, memo))


def _walk_steps(terms: list[Labels], path: tuple[tuple[int, ...], ...], final_order: Labels,
                extents: dict[int, int], use_einsum: bool, model: CostModel,
                memo: dict[Any, Step] | None) -> Iterator[Step]:
    """`_walk`'s steps one at a time (the bounded search prices a path's steps lazily)."""
    current = list(terms)
    output_set = set(final_order)
    for i, j in _pair_positions(path, len(current)):
        rest = [t for k, t in enumerate(current) if k not in (i, j)]
        keep = set(output_set).union(*rest) if rest else set(output_set)
        final = final_order if not rest else None
        # Candidate paths share most of their steps: price each distinct one once.
        key = (current[i], current[j], frozenset(keep), final)
        memoised = memo.get(key) if memo is not None else None
        found = memoised or _step((i, j), current[i], current[j], keep, extents, final,
                                  use_einsum, model)
        if memo is not None:
            memo[key] = found
        yield found if found.operands == (i, j) else evolve(found, operands=(i, j))
        current = rest + [found.result]
    assert len(current) == 1, current


def _pair_positions(path: tuple[tuple[int, ...], ...], n_terms: int) -> Iterator[tuple[int, int]]:
    """The positions of each pair ``path`` contracts in a working list of ``n_terms`` terms
    (each result appended; an entry of 3+ operands folded pairwise, its partial result taking
    the next pair's place)."""
    for contraction in path:
        positions = sorted(contraction)
        while len(positions) > 1:
            i, j = positions[0], positions[1]
            yield i, j
            n_terms -= 1
            positions = sorted([p - (p > i) - (p > j) for p in positions[2:]] + [n_terms - 1])


def _step_floors(terms: list[Labels], path: tuple[tuple[int, ...], ...], final_order: Labels,
                 extents: dict[int, int], model: CostModel) -> list[float] | None:
    """A lower bound on each step's price along ``path`` (`CostModel.contraction_floor_ns`
    plus the result buffer every kernel pays), from label sets alone: nothing lowered.  None
    where the model has no floor."""
    current = [frozenset(t) for t in terms]
    output_set = frozenset(final_order)
    floors: list[float] = []
    for i, j in _pair_positions(path, len(current)):
        rest = [t for k, t in enumerate(current) if k not in (i, j)]
        keep = output_set.union(*rest)
        x, y = current[i], current[j]
        shared = x & y
        contract = shared - keep
        result = (x | y) & keep
        floor = 0.0   # (an outer or elementwise product: priced by elements alone)
        if contract:
            found = model.contraction_floor_ns(
                size_of(tuple(shared & keep), extents), size_of(tuple((x & keep) - shared), extents),
                size_of(tuple(contract), extents), size_of(tuple((y & keep) - shared), extents))
            if found is None:
                return None
            elements = size_of(tuple(result), extents)
            floor = found + (model.result_buffer_ns(elements) if not rest
                             else model.fresh_buffer_ns(elements))
            # every step price also keeps its roofline (`_step`): both operands read, the
            # result written, at least
            moved = size_of(tuple(x), extents) + size_of(tuple(y), extents) + elements
            every = (x & (y | keep)) | (y & (x | keep))   # (a label one side alone sums goes first)
            floor = max(floor, model.roofline_ns(_flop_count(tuple(every), True, 2, extents), moved, moved))
        floors.append(floor)
        current = rest + [result]
    return floors


class Candidates(list[Schedule]):
    """`lower_candidates`' schedules; ``complete`` is False where the bounded search
    (``keep_within``) left out paths it proved slower."""

    complete: bool = True


def _bounded(paths: list[tuple[tuple[int, ...], ...]], terms: list[Labels], final_order: Labels,
             extents: dict[int, int], use_einsum: bool, model: CostModel, keep_within: float,
             memo: dict[Any, Step]) -> list[int] | None:
    """Which of ``paths`` to lower: every one whose modelled cost is at most ``keep_within``
    times the fastest's, or at most the second fastest's (a branch and bound: each path's
    steps priced lazily in order, the unpriced ones counted at their floor, the path of
    lowest bound advanced first and the search ended once no bound is within reach).  None
    where the model has no floor (lower them all)."""
    floors = [_step_floors(terms, path, final_order, extents, model) for path in paths]
    if any(f is None for f in floors):
        return None
    call = model.call_ns(len(terms) - 1)
    walks = [_walk_steps(terms, path, final_order, extents, use_einsum, model, memo) for path in paths]
    priced = [0.0] * len(paths)
    counted = [0] * len(paths)
    heap = [(call + sum(f or ()), k) for k, f in enumerate(floors)]
    heapq.heapify(heap)
    done: list[float] = []
    lowered: list[int] = []
    while heap:
        bound, k = heapq.heappop(heap)
        if len(done) >= 2 and bound > max(keep_within * done[0], done[1]):
            break   # every bound left is at least this one
        step = next(walks[k], None)
        if step is None:
            lowered.append(k)
            bisect.insort(done, bound)
            continue
        priced[k] += step.cost_ns
        counted[k] += 1
        rest = floors[k] or ()
        heapq.heappush(heap, (call + priced[k] + sum(rest[counted[k]:]), k))
    return sorted(lowered)


def _pairwise(inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...],
              output_shape: Shape, extents: dict[int, int], path: tuple[tuple[int, ...], ...],
              optimizer: str, naive: int, einsum: str | None, use_einsum: bool = True,
              preps: list[Preparation] | None = None,
              layouts: tuple[int, ...] | None = None, model: CostModel = NUMPY_MODEL,
              memo: dict[Any, Step] | None = None) -> Schedule:
    final_order = tuple(lab for lab in output if extents[lab] != 1)
    if preps is None:
        preps = _preparations(inputs, shapes, final_order)
    steps = _walk(preps, path, final_order, extents, use_einsum, model, memo)
    labels = steps[-1].result if steps else preps[0].labels
    fresh = bool(steps) or any(p.sum_axes for p in preps)
    finish = Finish(permutation=_permutation(labels, final_order), shape=output_shape,
                    reshape=tuple(extents[lab] for lab in final_order) != output_shape,
                    copy=not fresh)
    flops = sum(math.prod(extents[lab] for lab in lab_in) for p, lab_in in zip(preps, inputs)
                if p.sum_axes) + sum(s.flops for s in steps)
    schedule = Schedule(
        inputs=inputs, output=output, shapes=shapes, output_shape=output_shape, extents=extents,
        strategy="pairwise", einsum=einsum, preparations=tuple(preps), steps=tuple(steps),
        path=path, finish=finish, optimizer=optimizer, flops=flops,
        naive_flops=naive, cost_ns=sum(s.cost_ns for s in steps) + model.call_ns(len(steps)),
        layouts=layouts, priced_by=getattr(model, "priced_by", ""))
    return evolve(schedule, peak_extra=_peak_extra(schedule))


def lower_candidates(inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...],
                     optimize: Any = "auto", strategy: str | None = None, use_einsum: bool = True,
                     extents_by_label: tuple[int, ...] | None = None,
                     layouts: tuple[int, ...] | None = None,
                     cost_model: CostModel = NUMPY_MODEL, tier: str = "full",
                     follow: Sequence[Schedule] = (), keep_within: float | None = None,
                     ) -> list[Schedule]:
    """The unbounded schedules `schedule_labels` chooses from (its arguments but the limit):
    one direct schedule, or one pairwise schedule per candidate path.

    ``tier`` says how much of the search a default ``optimize='auto'`` runs (`calls.tiers`):
    ``'full'`` prices every candidate path, ``'quick'`` only the one of fewest FLOPs, and
    ``'reuse'`` takes the schedule of ``follow`` (schedules of the same labels at other
    extents and of the same structure: labels, axes of extent 1, layouts) whose strategy these
    extents take, with its path and its steps' decisions (`reextent`; an empty list where none
    has that strategy).

    ``keep_within`` (the full tier's candidate paths): leave out the paths a branch and bound
    proves slower than ``keep_within`` times the fastest and than the second fastest (each
    step's price bounded below by the model's `CostModel.contraction_floor_ns`); the list is
    then a `Candidates` whose ``complete`` is False.  None (the default) lowers every path.

    >>> [s.path for s in lower_candidates(((0, 1), (1, 2), (2, 3)), (0, 3), ((2, 3), (3, 4), (4, 5)),
    ...                                   strategy='pairwise')][:2]
    [((0, 1), (0, 1)), ((0, 2), (0, 1))]
    """
    extents = (dict(enumerate(extents_by_label)) if extents_by_label is not None
               else _extents_of(inputs, shapes))
    output_shape = tuple(extents[lab] for lab in output)
    distinct = {lab for term in inputs for lab in term}
    naive = _naive_flops(inputs, output, extents)
    einsum = _einsum_string(inputs, output)
    if strategy not in (None, "direct", "pairwise"):
        raise ValueError(f"strategy must be 'direct' or 'pairwise', got {strategy!r}")
    if strategy is None:
        limit = cost_model.direct_max_naive_cost(len(distinct))
        small = math.prod(extents[lab] for lab in distinct) <= limit
        # A single operand (transpose/diagonal/sum) is one memory-bound pass that einsum's C
        # loop does best at any size ('CDaa->CD' 72 us vs 184 us via diagonal + add.reduce).
        wants_direct = optimize == "direct" or (optimize == "auto" and (small or len(inputs) == 1))
        fits = einsum is not None and len(inputs) <= DIRECT_MAX_OPERANDS
        strategy = "direct" if fits and wants_direct and use_einsum else "pairwise"
        if optimize == "direct" and use_einsum:
            strategy = "direct"  # asked for explicitly (optimize=False): refused past the limits
    if strategy == "direct":
        if einsum is None:
            raise ContractionError(
                f"a single einsum call takes at most {len(EINSUM_LETTERS)} distinct axes; this "
                f"contraction has {len(distinct)}: use a pairwise optimize= (the default 'auto')")
        if len(inputs) > DIRECT_MAX_OPERANDS:
            raise ContractionError(
                f"a single einsum call takes at most {DIRECT_MAX_OPERANDS} operands here; this "
                f"contraction has {len(inputs)}: use a pairwise optimize= (the default 'auto')")
        path_by = "auto" if optimize == "direct" else optimize  # what JAX is handed
        known = [f for f in follow if f.strategy == "direct"] if tier == "reuse" else []
        if known and optimize == "auto":
            # a structure's one einsum call: its path is only what explain and JAX read
            return [_direct(inputs, output, shapes, output_shape, extents, einsum, known[0].path,
                            naive, "auto", cost_model, known[0])]
        if tier == "reuse":
            return []
        if tier in ("quick", "first") and path_by == "auto":
            # (one einsum call runs no path on numpy; torch's small calls hardly feel it: the
            # path of fewest FLOPs, counted in a few microseconds, instead of opt_einsum's search)
            path = _fewest_flops(list(inputs), output, extents)
        else:
            path = _find_path(path_by, list(inputs), output, extents)
        return [_direct(inputs, output, shapes, output_shape, extents, einsum, path, naive,
                        _optimizer_name(optimize), cost_model)]
    if tier == "first":
        # a structure's first call: one einsum per pair along the path of fewest FLOPs, no step
        # planned (`calls.tiers` decides whether it runs so)
        found = _along_path(inputs, output, shapes, output_shape, extents, einsum, naive, cost_model)
        return [found] if found is not None else []
    if optimize in ("auto", "direct") and tier == "reuse":
        # (the structure fixes the preparations' labels: `calls.tiers` keys on it)
        known = [f for f in follow if f.strategy == "pairwise"]
        return [reextent(known[0], shapes, extents, naive, cost_model)] if known else []
    final_order = tuple(lab for lab in output if extents[lab] != 1)
    if layouts is not None and not any(layouts):
        layouts = None
    preps = _preparations(inputs, shapes, final_order, layouts)
    terms = [p.labels for p in preps]
    if optimize in ("auto", "direct") and tier == "quick":
        paths = [_fewest_flops(terms, final_order, extents)]
        name = "auto"
    elif optimize in ("auto", "direct"):
        # Price every candidate order with the time model (FLOP-optimal ones included) and
        # keep the fastest modelled: FLOPs alone ignore copies, small-product BLAS speed and
        # the page faults of large fresh buffers.
        paths = _candidate_paths(terms, final_order, extents)
        name = "auto"
    else:
        paths = [_find_path(optimize, terms, final_order, extents)]
        name = _optimizer_name(optimize)
    memo: dict[Any, Step] = {}
    complete = True
    if keep_within is not None and len(paths) > 2:
        chosen = _bounded(paths, terms, final_order, extents, use_einsum, cost_model, keep_within, memo)
        if chosen is not None and len(chosen) < len(paths):
            paths, complete = [paths[k] for k in chosen], False
    lowered = Candidates(_pairwise(inputs, output, shapes, output_shape, extents, path, name, naive,
                                   einsum, use_einsum, preps, layouts, cost_model, memo) for path in paths)
    lowered.complete = complete
    return lowered


def _naive_flops(inputs: tuple[Labels, ...], output: Labels, extents: dict[int, int]) -> int:
    """The FLOPs of the contraction as one loop over every label (`Schedule.naive_flops`)."""
    distinct = {lab for term in inputs for lab in term}
    return _flop_count(tuple(distinct), bool(distinct - set(output)), max(len(inputs), 1), extents)


def reextent(template: Schedule, shapes: tuple[Shape, ...], extents: dict[int, int], naive: int,
             model: CostModel = NUMPY_MODEL, peak: bool = True) -> Schedule:
    """``template``, an unblocked pairwise schedule, at other extents of the same structure (the
    same labels and the same axes of extent 1; in a block, an axis cut to 1 that the template
    kept stays an axis): every decision kept (path, kernels, result
    orders, matmul layouts, promoted labels), every shape and view computed for ``extents``,
    FLOPs counted, prices scaled by FLOPs (`_scaled`: nothing is priced), the peak counted
    (unless ``peak`` is False: a block of a blocked run, whose peak the blocking counts).

    >>> from contractions.schedule import schedule_labels
    >>> base = schedule_labels(((0, 1), (1, 2)), (0, 2), ((20, 30), (30, 40)), strategy='pairwise')
    >>> other = reextent(base, ((5, 6), (6, 7)), {0: 5, 1: 6, 2: 7}, 5 * 6 * 7)
    >>> other.output_shape, other.steps[0].result_shape, other.flops
    ((5, 7), (5, 7), 420)
    """
    ext = extents.__getitem__
    # (a squeeze keeps the axes the template kept: the same ones at the same structure, and
    # in a block of a blocked run a label cut to chunks of 1 stays an axis of 1)
    preps = tuple(
        prep if prep.squeeze is None else evolve(prep, squeeze=tuple(
            n for n, was in zip(*((shape[::-1], old[::-1]) if prep.transpose else (shape, old)))
            if was != 1))
        for prep, shape, old in zip(template.preparations, shapes, template.shapes))
    steps = []
    for step in template.steps:
        lx = tuple(lab for a, lab in enumerate(step.x_labels) if a not in step.sum_x)
        ly = tuple(lab for a, lab in enumerate(step.y_labels) if a not in step.sum_y)
        flops = _flop_count(tuple(dict.fromkeys(lx + ly)), bool(step.contract), 2, extents)
        fields: dict[str, Any] = {}
        if step.kernel == "matmul":
            assert step.layout is not None
            x_view, y_view, wide = _matmul_views(lx, ly, step.layout, extents)
            fields = dict(x_view=x_view, y_view=y_view)
            if step.reduce:
                fields["wide_shape"] = tuple(map(ext, wide))
        elif step.kernel == "multiply":
            fields = dict(x_view=_in_order_view(lx, step.result, extents),
                          y_view=_in_order_view(ly, step.result, extents))
        elif step.x_view is not None:  # an outer product by einsum, its inputs made contiguous
            fields = dict(x_view=_contiguous(lx, extents), y_view=_contiguous(ly, extents))
        steps.append(evolve(step, result_shape=tuple(map(ext, step.result)), flops=flops,
                            cost_ns=_scaled(step.cost_ns, flops, step.flops), **fields))
    output_shape = tuple(map(ext, template.output))
    assert template.finish is not None
    flops = sum(math.prod(map(ext, labels)) for prep, labels in zip(preps, template.inputs)
                if prep.sum_axes) + sum(step.flops for step in steps)
    overhead = template.cost_ns - sum(step.cost_ns for step in template.steps)
    schedule = evolve(
        template, shapes=shapes, output_shape=output_shape, extents=extents, preparations=preps,
        steps=tuple(steps), finish=evolve(template.finish, shape=output_shape), flops=flops,
        naive_flops=naive, cost_ns=overhead + sum(step.cost_ns for step in steps),
        memory_limit=None)
    # (``peak=False``: a block of a blocked run, whose peak the blocking counts itself: 0 here)
    return evolve(schedule, peak_extra=_peak_extra(schedule) if peak else 0)

