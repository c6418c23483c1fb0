"""Stage 5 of the pipeline: turn a `Plan` into a `Schedule`, the execution as frozen data.

A schedule says exactly what runs, with no arrays involved:

* ``strategy == 'direct'``: one einsum call on ``einsum`` (small problems, where Python
  overhead would dominate a pairwise run);
* ``strategy == 'pairwise'``: per operand a `Preparation` (drop size-1 axes, take diagonals,
  sum the axes no one else needs), then the pairwise `Step` list in opt_einsum's path order
  (each a batched ``matmul``, a broadcast ``multiply`` or a small relabelled ``einsum``, with
  the views it needs and its modelled cost), then the `Finish` (final permutation/reshape).

Backends *compile* a schedule (``contractions.backends``); they never re-derive extents,
letters or paths.  ``path`` is the pairwise order in opt_einsum's list-of-pairs form: it can
be passed back as ``optimize=`` and is what the JAX backend hands to ``jnp.einsum``.

>>> from contractions.plan import make_plan
>>> plan = make_plan('WCa,Caib,WCi->WCb', ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50)), ())
>>> s = make_schedule(plan)
>>> s.strategy, s.path, [step.kernel for step in s.steps]
('pairwise', ((1, 2), (0, 1)), ['matmul', 'matmul'])
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from opt_einsum import paths as _opt_paths
from opt_einsum.helpers import flop_count as _flop_count

from .errors import ContractionError, MemoryLimitError, PathError
from .expand import symbol_past_letters
from .matmul_model import (
    CACHE_BLOCK_MAX_FLOPS_PER_ELEMENT,
    DIRECT_FEW_LABELS,
    DIRECT_MAX_NAIVE_COST,
    DIRECT_MAX_NAIVE_COST_MANY_LABELS,
    EINSUM_VECTOR_STEP_MAX_MACS,
    NS_PER_BLOCK,
    NS_PER_BLOCK_STEP,
    NS_PER_EINSUM_MAC,
    NUMPY_MODEL,
    CostModel,
    MatmulLayout,
    best_matmul_layout,
    size_of,
)
from .plan import PLAN_CACHE_SIZE, Plan

__all__ = [
    "CONVERTED",
    "FORTRAN",
    "MAX_BLOCKS",
    "NUMPY_MODEL",
    "STRIDED",
    "CostModel",
    "DIRECT_FEW_LABELS",
    "EINSUM_VECTOR_STEP_MAX_MACS",
    "NS_PER_BLOCK",
    "NS_PER_BLOCK_STEP",
    "NS_PER_EINSUM_MAC",
    "DIRECT_MAX_NAIVE_COST",
    "DIRECT_MAX_NAIVE_COST_MANY_LABELS",
    "DIRECT_MAX_OPERANDS",
    "EINSUM_LETTERS",
    "Finish",
    "Preparation",
    "Schedule",
    "Step",
    "View",
    "make_schedule",
    "normalise_optimize",
    "schedule_labels",
]

Labels = tuple[int, ...]
Shape = tuple[int, ...]

#: The letters one einsum call may use (numpy's and torch's einsum know exactly these 52).
EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

# numpy's C einsum takes fewer than 64 operands (32 before numpy 2): more always run pairwise.
DIRECT_MAX_OPERANDS = 31


# ------------------------------------------------------------------------------ the data
@dataclass(frozen=True)
class View:
    """Present an array with another axis order and shape (a view unless ``gather``).

    Applied in this order: ``contiguous_first`` (make the input C-contiguous, a no-op for
    C arrays: BLAS needs unit inner strides), ``permutation`` (None: keep the order),
    ``gather`` (copy into C order), reshape to ``shape``, ``swap_last`` (swap the two last
    axes: a column-major matrix handed to BLAS with its transpose flag, no copy).
    """

    permutation: tuple[int, ...] | None
    shape: Shape
    gather: bool = False
    contiguous_first: bool = False
    swap_last: bool = False


@dataclass(frozen=True)
class Preparation:
    """How one operand reaches unique, non-trivial labels before any pairing.

    ``transpose`` (first) permutes the axes: a Fortran-ordered operand is read as its
    reversed-axes transpose, which is C-ordered (a view).  ``squeeze`` reshapes away size-1
    axes (a view); each of ``diagonals`` takes the diagonal of two axes (appended last, as
    ``numpy.diagonal`` does); ``sum_axes`` are summed (labels no other operand and not the
    output needs).  ``labels`` are the operand's labels after.
    """

    squeeze: Shape | None
    diagonals: tuple[tuple[int, int], ...]
    sum_axes: tuple[int, ...]
    labels: Labels
    transpose: tuple[int, ...] | None = None

    @property
    def is_identity(self) -> bool:
        return (self.squeeze is None and not self.diagonals and not self.sum_axes
                and self.transpose is None)


@dataclass(frozen=True)
class Step:
    """One pairwise contraction.

    ``operands`` are positions in the working list (both removed, the result appended last:
    opt_einsum's convention).  Each operand first sums ``sum_x``/``sum_y`` (axes nobody needs
    later), then the ``kernel`` runs:

    * ``'matmul'``: ``matmul(x_view(x), y_view(y))`` (operands swapped when ``swap``), then a
      reshape to ``result_shape``; ``layout`` is the priced layout it came from;
    * ``'multiply'``: ``multiply(x_view(x), y_view(y))``, both broadcast to ``result`` order;
    * ``'einsum'``: one einsum call on the local letter string ``einsum``.

    ``cost_ns`` is the modelled time, ``flops`` opt_einsum's count for the step.
    """

    operands: tuple[int, int]
    x_labels: Labels
    y_labels: Labels
    sum_x: tuple[int, ...]
    sum_y: tuple[int, ...]
    batch: Labels
    contract: Labels
    result: Labels
    result_shape: Shape
    kernel: str
    einsum: str | None
    x_view: View | None
    y_view: View | None
    swap: bool
    layout: MatmulLayout | None
    cost_ns: float
    flops: int

    @property
    def result_size(self) -> int:
        return math.prod(self.result_shape)


@dataclass(frozen=True)
class Finish:
    """The last touches: permute to output order, reshape (size-1 axes come back), and copy
    when nothing allocated a fresh array (the result must never alias an input)."""

    permutation: tuple[int, ...] | None
    shape: Shape
    reshape: bool
    copy: bool


@dataclass(frozen=True)
class Blocking:
    """The steps whose buffers would break the memory limit, run block by block.

    Each label in ``labels`` is cut into chunks of ``chunks`` (``counts`` of them, the last
    possibly shorter).  ``sliced[k]`` says whether operand ``k`` carries a cut label (a
    broadcast size-1 axis does not count); the others are prepared once.  The steps numbered
    in ``hoisted`` (positions in ``Schedule.steps``) depend on no sliced operand: they run
    once, before the loop, on the whole operands, and their results are shared by every
    block (a hoisted prologue).  Every other step is inside the loop: a block slices the
    sliced operands along ``operand_axes[k]`` (per cut label, the axes of operand ``k``
    carrying it), runs those steps of the schedule in ``inner`` for its chunk sizes, and
    writes its result into the output at ``output_axes`` (or, for a label summed over,
    adds it: ``accumulate``).  ``purpose`` says why: ``'memory'`` (the limit) or
    ``'cache'`` (a bandwidth-bound chain, its intermediates kept cache-sized).
    """

    labels: Labels
    chunks: tuple[int, ...]
    counts: tuple[int, ...]
    accumulate: bool
    operand_axes: tuple[tuple[tuple[int, ...], ...], ...]
    output_axes: tuple[tuple[int, ...], ...]
    inner: tuple[tuple[tuple[int, ...], Schedule], ...]
    hoisted: tuple[int, ...] = ()
    sliced: tuple[bool, ...] = ()
    purpose: str = "memory"

    @property
    def n_blocks(self) -> int:
        return math.prod(self.counts)


@dataclass(frozen=True)
class Schedule:
    """A complete, backend-neutral execution recipe for one shape signature.

    ``inputs``/``output`` are integer labels, ``extents`` maps every label to its extent.
    ``flops`` counts the scheduled work (steps and preparation sums), ``naive_flops`` that of
    one einsum loop, ``peak_extra`` the most elements alive at once beyond the operands and the
    result, and ``cost_ns`` the modelled time.  ``optimizer`` names what chose ``path``.
    ``blocking`` is set when the call runs in blocks to stay within ``memory_limit`` (elements;
    None: unbounded).  ``layouts[k]`` describes operand ``k`` as the peak counts it (``None``:
    every operand C-contiguous and of the computation's dtype; else bit `STRIDED`: neither C-
    nor Fortran-contiguous, so a BLAS step copies it; bit `FORTRAN`: Fortran-ordered, read as
    its transpose; bit `CONVERTED`: converted to the computation's dtype, a copy).
    """

    inputs: tuple[Labels, ...]
    output: Labels
    shapes: tuple[Shape, ...]
    output_shape: Shape
    extents: dict[int, int] = field(compare=False, repr=False)
    strategy: str = "pairwise"
    einsum: str | None = None
    preparations: tuple[Preparation, ...] = ()
    steps: tuple[Step, ...] = ()
    path: tuple[tuple[int, ...], ...] = ()
    finish: Finish | None = None
    optimizer: str = "auto"
    flops: int = 0
    naive_flops: int = 0
    peak_extra: int = 0
    cost_ns: float = 0.0
    memory_limit: int | None = None
    blocking: Blocking | None = None
    layouts: tuple[int, ...] | None = None


# ------------------------------------------------------------------------------ optimize=
#: What ``optimize=`` accepts, normalised: a preset name, ``'direct'`` (one einsum call),
#: an explicit path (tuple of tuples) or a PathOptimizer instance.
Optimize = Any


def normalise_optimize(optimize: Any) -> Any:
    """Check an ``optimize=`` value and return a hashable, canonical form.

    Accepted: an opt_einsum preset name (``'auto'``, ``'greedy'``, ``'optimal'``, ``'dp'``,
    ``'branch-2'``, ``'auto-hq'``, ``'random-greedy'``, ...), ``True`` (``'auto'``), ``False``
    (one einsum call, no pairwise path), an explicit path (``[(1, 2), (0, 1)]``, optionally
    led by numpy's ``'einsum_path'``) or an ``opt_einsum.paths.PathOptimizer`` instance (such
    as cotengra's ``HyperOptimizer``).

    >>> normalise_optimize([(1, 2), [0, 1]])
    ((1, 2), (0, 1))
    >>> normalise_optimize(False)
    'direct'
    """
    if optimize is True:
        return "auto"
    if optimize is False:
        return "direct"
    if isinstance(optimize, str):
        name = optimize.lower()
        if name == "direct":
            return name
        try:
            _opt_paths.get_path_fn(name)
        except KeyError:
            known = sorted(_opt_paths._PATH_OPTIONS)  # the registry opt_einsum looks names up in
            raise ValueError(
                f"optimize={optimize!r} names no path optimizer; use one of {known}, an explicit "
                "path such as [(0, 1), (0, 1)], an opt_einsum PathOptimizer, or False for one "
                "einsum call") from None
        return name
    if isinstance(optimize, _opt_paths.PathOptimizer):
        return optimize
    if isinstance(optimize, (list, tuple)):
        items = list(optimize)
        if items and items[0] == "einsum_path":  # numpy's np.einsum_path output
            items = items[1:]
        path = []
        for pair in items:
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence):
                raise TypeError(f"optimize= path entries must be tuples of operand positions, "
                                f"got {pair!r} in {optimize!r}")
            try:
                path.append(tuple(int(k) for k in pair))
            except (TypeError, ValueError):
                raise TypeError(f"optimize= path entries must be tuples of ints, got {pair!r}") from None
        return tuple(path)
    raise TypeError(
        f"optimize= must be a preset name ('auto', 'greedy', 'optimal', 'dp', ...), True/False, "
        f"an explicit path like [(0, 1)] or an opt_einsum PathOptimizer, not {type(optimize).__name__}")


def _optimizer_name(optimize: Any) -> str:
    if isinstance(optimize, str):
        return optimize
    if isinstance(optimize, tuple):
        return "explicit path"
    return type(optimize).__name__


def _find_path(optimize: Any, terms: list[Labels], output: Labels,
               extents: dict[int, int]) -> tuple[tuple[int, ...], ...]:
    if len(terms) == 1:
        return ((0,),)
    if isinstance(optimize, tuple):
        return _checked_path(optimize, len(terms))
    size_dict = {label: extents[label] for term in terms for label in term}
    if isinstance(optimize, str):
        name = "auto" if optimize == "direct" else optimize
        found = _opt_paths.get_path_fn(name)([frozenset(t) for t in terms], frozenset(output), size_dict)
    else:
        # A PathOptimizer (cotengra's among them) gets string indices, as from opt_einsum.
        sym = {label: _opt_symbol(label) for label in size_dict}
        found = optimize([tuple(sym[lab] for lab in t) for t in terms],
                         tuple(sym[lab] for lab in output if lab in sym),
                         {sym[lab]: n for lab, n in size_dict.items()})
    return _checked_path(tuple(tuple(int(k) for k in step) for step in found), len(terms))


def _opt_symbol(label: int) -> str:
    # opt_einsum's symbol order, past the surrogates that get_symbol would hand out
    return EINSUM_LETTERS[label] if label < len(EINSUM_LETTERS) else symbol_past_letters(label)


def _checked_path(path: tuple[tuple[int, ...], ...], n: int) -> tuple[tuple[int, ...], ...]:
    """Validate a path in opt_einsum's form against ``n`` operands."""
    count = n
    for k, step in enumerate(path):
        if len(step) == 0 or len(set(step)) != len(step) or any(not 0 <= i < count for i in step):
            raise PathError(
                f"optimize= path {list(path)} is invalid at entry {k} {step}: with {count} operands "
                f"left, each entry names distinct positions 0..{count - 1} (contracted operands are "
                "removed and the result appended last, as in opt_einsum)")
        count -= len(step) - 1
    if count != 1:
        raise PathError(
            f"optimize= path {list(path)} leaves {count} operands uncontracted; it must end with one "
            f"(for {n} operands, e.g. {[(0, 1)] * (n - 1)})")
    return path


# --------------------------------------------------------------------------- preparation
def _permutation(current: Sequence[int], wanted: Sequence[int]) -> tuple[int, ...] | None:
    perm = tuple(current.index(label) for label in wanted)
    return None if perm == tuple(range(len(perm))) else perm


def _einsum_string(inputs: Sequence[Sequence[int]], output: Sequence[int]) -> str | None:
    """Letter string for integer-labelled terms, or None past 52 distinct labels."""
    letters: dict[int, str] = {}
    for term in (*inputs, output):
        for label in term:
            if label not in letters:
                if len(letters) == len(EINSUM_LETTERS):
                    return None
                letters[label] = EINSUM_LETTERS[len(letters)]
    return ",".join("".join(letters[lab] for lab in t) for t in inputs) + "->" + "".join(
        letters[lab] for lab in output)


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

    if not contract_set:
        # Nothing to sum: an outer/elementwise product of broadcast views.
        order = _preferred_order(lx, ly, kept, final, extents)
        shape = tuple(extents[lab] for lab in order)
        return Step(**common, batch=tuple(lab for lab in order if lab in batch_set), contract=(),
                    result=order, result_shape=shape, kernel="multiply", einsum=None,
                    x_view=_in_order_view(lx, order, extents), y_view=_in_order_view(ly, order, extents),
                    swap=False, layout=None,
                    cost_ns=model.multiply_ns(math.prod(shape), _inner_run(order, lx, ly, extents)))

    layout = best_matmul_layout(lx, ly, batch_set, contract_set, extents, final, model)
    nl, nr, nc = size_of(left, extents), size_of(right, extents), size_of(layout.contract, extents)
    needs_copy = layout.left.copy or layout.right.copy
    vector_like = not left or not right
    small = nl * nc * nr <= model.einsum_step_max_macs()
    letters_ok = use_einsum and len(kept | contract_set) <= len(EINSUM_LETTERS)
    if letters_ok and vector_like and (needs_copy or small or (not left and not right)):
        # einsum's loop reads any strides, so a vector-like step never copies; BLAS would only
        # gain on a large single matrix-vector product with a free layout.
        order = _preferred_order(lx, ly, kept, final, extents)
        subscripts = _einsum_string((lx, ly), order)
        assert subscripts is not None
        shape = tuple(extents[lab] for lab in order)
        macs = math.prod(extents[lab] for lab in every)
        return Step(**common, batch=layout.batch, contract=layout.contract, result=order,
                    result_shape=shape, kernel="einsum", einsum=subscripts, x_view=None,
                    y_view=None, swap=False, layout=None,
                    cost_ns=model.einsum_ns(macs) + model.fresh_buffer_ns(math.prod(shape)))

    lp, lq = (ly, lx) if layout.swap else (lx, ly)
    b, c, p, q = layout.batch, layout.contract, layout.left, layout.right
    ext = lambda labels: tuple(extents[lab] for lab in labels)  # noqa: E731
    # Stack axes: batch, the left factor's spread labels, then the right's (each factor has 1s
    # in the other's spread positions; matmul broadcasts them).
    left_stack = (*ext(b), *ext(p.spread), *(1 for _ in q.spread))
    right_stack = (*ext(b), *(1 for _ in p.spread), *ext(q.spread))
    view_p = _factor_view(lp, b + p.spread, left_stack, p.free, c, p, extents)
    view_q = _factor_view(lq, b + q.spread, right_stack, c, q.free, q, extents)
    result = b + p.spread + q.spread + p.free + q.free
    x_view, y_view = (view_q, view_p) if layout.swap else (view_p, view_q)
    return Step(**common, batch=b, contract=c, result=result, result_shape=ext(result),
                kernel="matmul", einsum=None, x_view=x_view, y_view=y_view, swap=layout.swap,
                layout=layout, cost_ns=layout.cost + model.fresh_buffer_ns(size_of(result, extents)))


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
            path: tuple[tuple[int, ...], ...], naive: int, optimizer: str) -> Schedule:
    summed = {lab for term in inputs for lab in term} - set(output)
    # einsum returns a view for a pure transpose/diagonal of one operand: copy it then.
    finish = Finish(permutation=None, shape=output_shape, reshape=False,
                    copy=len(inputs) == 1 and not summed)
    return Schedule(inputs=inputs, output=output, shapes=shapes, output_shape=output_shape,
                    extents=extents, strategy="direct", einsum=einsum, path=path, finish=finish,
                    optimizer=optimizer, flops=naive, naive_flops=naive,
                    peak_extra=0, cost_ns=float(naive))


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
    current = [p.labels for p in preps]
    output_set = set(final_order)
    steps: list[Step] = []
    for contraction in path:
        positions = sorted(contraction)
        while len(positions) > 1:
            i, j = positions[0], positions[1]
            rest = [t for k, t in enumerate(current) if k not in (i, j)]
            keep = set(output_set).union(*rest) if rest else set(output_set)
            final = final_order if not rest else None
            # Candidate paths share most of their steps: price each distinct one once.
            key = (current[i], current[j], frozenset(keep), final)
            found = memo.get(key) if memo is not None else None
            if found is None:
                found = _step((i, j), current[i], current[j], keep, extents, final, use_einsum,
                              model)
                if memo is not None:
                    memo[key] = found
            step = found if found.operands == (i, j) else replace(found, operands=(i, j))
            steps.append(step)
            current = rest + [step.result]
            positions = sorted([p - (p > i) - (p > j) for p in positions[2:]] + [len(current) - 1])
    assert len(current) == 1, current
    return steps


#: Bits of `Schedule.layouts`: the operand is not C-contiguous (nor Fortran-ordered: a BLAS
#: step that needs its matrix contiguous copies it); the operand is converted to the
#: computation's dtype (a copy).
STRIDED = 1
CONVERTED = 2
#: Bit of `Schedule.layouts`: the operand is Fortran-ordered (read as its transpose, a C array).
FORTRAN = 4

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
              final_is_extra: bool, full_shapes: tuple[Shape, ...] | None = None) -> int:
    """Run the buffers of ``operands`` (prepared first, as the executor does) and then of
    ``steps`` through ``alive`` (token -> (elements held, maybe strided)); the peak elements.

    Counted: converted copies, preparation sums, the copies a step makes (sums of private
    axes, gathers, contiguous copies of strided inputs), results waiting to be consumed, and
    the last step's result when it is not the output itself (a block's result, or a result
    that the final reshape copies).
    """
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
        for view, size, strided in ((step.x_view, sx, x_strided), (step.y_view, sy, y_strided)):
            if view is not None and (view.gather or (view.contiguous_first and strided)):
                live += size
        result = size_of(step.result, ext)
        if k != last:
            live += result
        else:
            live += result * (int(final_is_extra) + int(reshape_copies))
        peak = max(peak, live)
        kept = result if k != last else 0
        alive[("s", k)] = (kept, step.kernel != "matmul")
        held += kept
    if not schedule.steps and final_is_extra:
        peak = max(peak, held + size_of(schedule.output, ext))
    return peak


def _peak_extra(schedule: Schedule) -> int:
    """Elements alive at once beyond the operands and the result, at the worst moment, for
    the unblocked schedule (`_simulate` says what is counted)."""
    if schedule.strategy == "direct":
        return 0
    n = len(schedule.inputs)
    return _simulate(schedule, schedule.extents, range(n), range(len(schedule.steps)), {},
                     (False,) * n, final_is_extra=False)


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
        naive_flops=naive, cost_ns=sum(s.cost_ns for s in steps), layouts=layouts)
    return replace(schedule, peak_extra=_peak_extra(schedule))


def _candidate_paths(terms: list[Labels], output: Labels,
                     extents: dict[int, int]) -> list[tuple[tuple[int, ...], ...]]:
    """Paths worth pricing with the time model: every pairwise order up to four operands
    (the FLOP-optimal one among them), else opt_einsum's auto, greedy and dp paths and, when
    it is installed, cotengra's."""
    n = len(terms)
    if n <= 4:
        return list(_all_pairwise_paths(n))
    found: list[tuple[tuple[int, ...], ...]] = []
    for name in ("auto", "greedy", "dp") if n <= 16 else ("auto", "greedy"):
        path = _find_path(name, terms, output, extents)
        if path not in found:
            found.append(path)
    cotengra_path = _cotengra_path(terms, output, extents)
    if cotengra_path is not None and cotengra_path not in found:
        found.append(cotengra_path)
    return found


def _cotengra_path(terms: list[Labels], output: Labels,
                   extents: dict[int, int]) -> tuple[tuple[int, ...], ...] | None:
    """cotengra's own 'auto' path when cotengra is installed (imported on first need, ~0.3 s);
    None without it, or if it fails: it is one candidate among several, never required."""
    if importlib.util.find_spec("cotengra") is None:
        return None
    try:
        import cotengra

        found = cotengra.array_contract_path(
            [tuple(t) for t in terms], output=tuple(output),
            size_dict={lab: extents[lab] for t in terms for lab in t}, optimize="auto")
        return _checked_path(tuple(tuple(int(k) for k in step) for step in found), len(terms))
    except Exception:  # a candidate source, never a dependency: any failure just drops it
        return None


def _all_pairwise_paths(n: int):
    if n == 1:
        yield ((0,),)
        return
    if n == 2:
        yield ((0, 1),)
        return
    for pair in itertools.combinations(range(n), 2):
        for rest in _all_pairwise_paths(n - 1):
            yield (pair, *rest)


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
    ``cost_model`` prices every choice (`matmul_model.CostModel`; numpy's by default).

    >>> schedule_labels(((0, 1), (1, 2)), (0, 2), ((2, 3), (3, 4))).strategy
    'direct'
    >>> schedule_labels(((0, 1), (1, 2)), (0, 2), ((2, 3), (3, 4)), strategy='pairwise').path
    ((0, 1),)
    """
    extents = (dict(enumerate(extents_by_label)) if extents_by_label is not None
               else _extents_of(inputs, shapes))
    output_shape = tuple(extents[lab] for lab in output)
    distinct = {lab for term in inputs for lab in term}
    naive = _flop_count(tuple(distinct), bool(distinct - set(output)), max(len(inputs), 1), extents)
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
        path = _find_path(path_by, list(inputs), output, extents)
        return replace(_direct(inputs, output, shapes, output_shape, extents, einsum, path, naive,
                               _optimizer_name(optimize)),
                       memory_limit=_resolve_limit(memory_limit, shapes, output_shape))
    final_order = tuple(lab for lab in output if extents[lab] != 1)
    if layouts is not None and not any(layouts):
        layouts = None
    preps = _preparations(inputs, shapes, final_order, layouts)
    terms = [p.labels for p in preps]
    if optimize in ("auto", "direct"):
        # Price every candidate order with the time model (FLOP-optimal ones included) and
        # keep the fastest modelled: FLOPs alone ignore copies, small-product BLAS speed and
        # the page faults of large fresh buffers.
        paths = _candidate_paths(terms, final_order, extents)
        name = "auto"
    else:
        paths = [_find_path(optimize, terms, final_order, extents)]
        name = _optimizer_name(optimize)
    memo: dict[Any, Step] = {}
    options = [_pairwise(inputs, output, shapes, output_shape, extents, path, name, naive, einsum,
                         use_einsum, preps, layouts, cost_model, memo) for path in paths]
    return _within_limit(options, _resolve_limit(memory_limit, shapes, output_shape), use_einsum,
                         strict=memory_limit != "default", model=cost_model)


def _cache_blocked(schedule: Schedule, use_einsum: bool, model: CostModel) -> Schedule:
    """``schedule`` in cache-sized blocks where it is a bandwidth-bound chain whose
    intermediates outgrow the cache (`matmul_model.CACHE_BLOCK_ELEMENTS`); else unchanged.
    Only under a memory bound: ``memory_limit=None`` means one unblocked run (and is what
    backends that cannot run blocks get).

    Bandwidth-bound: at most `CACHE_BLOCK_MAX_FLOPS_PER_ELEMENT` FLOPs per element its steps
    read or write.  Kept only when the blocks cost at most `CACHE_BLOCK_OVERHEAD` of the
    modelled time (the model prices the per-block work, not the cache it saves).
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
            CACHE_BLOCK_MAX_FLOPS_PER_ELEMENT * moved):
        return schedule
    blocked, _ = _blocked(replace(schedule, memory_limit=None), _limit_for(cache), use_einsum, model)
    if (blocked is None or blocked.blocking is None or blocked.blocking.accumulate
            or blocked.peak_extra > 2 * cache
            or blocked.cost_ns > CACHE_BLOCK_OVERHEAD * schedule.cost_ns):
        return schedule
    return replace(blocked, memory_limit=schedule.memory_limit,
                   blocking=replace(blocked.blocking, purpose="cache"))


#: Cache-sized blocks are kept while they model at most this much slower than one run.
CACHE_BLOCK_OVERHEAD = 1.15


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
#: would only add Python overhead (measured: a mid-size 4-operand string cut into 64 blocks ran
#: 1.4x slower) to calls whose extra memory is negligible.
DEFAULT_LIMIT_FLOOR = 2**20
#: Blocks are cut until the modelled peak is within this share of the limit: the model counts
#: intermediates, gathered copies and block results, but not every temporary numpy may make
#: (a reshape of a strided view, matmul's own buffers); measured peaks ran up to 1.6x the model.
BLOCK_HEADROOM = 0.6


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
        return replace(fitting[0], memory_limit=limit)
    tried = [replace(f, memory_limit=limit) for f in fitting[:1]]
    smallest = min(o.peak_extra for o in options)
    for option in options[:2]:
        blocked, reached = _blocked(option, limit, use_einsum, model)
        smallest = min(smallest, reached)
        if blocked is not None:
            tried.append(blocked)
    if not tried and not strict:
        return replace(min(options, key=lambda o: o.peak_extra), memory_limit=limit)
    if not tried:
        works = _limit_for(smallest)
        raise MemoryLimitError(
            f"memory_limit={limit:,} elements cannot be honoured: within {MAX_BLOCKS:,} blocks "
            f"this contraction needs at least {works:,} (its fastest order unblocked needs "
            f"{fastest.peak_extra:,}); pass memory_limit={works} or more, or memory_limit=None",
            smallest_limit=works)
    return min(tried, key=lambda o: o.cost_ns)


def _limit_for(peak: int) -> int:
    """The smallest limit whose blocking target (`BLOCK_HEADROOM` of it) admits ``peak``."""
    works = max(1, math.ceil(peak / BLOCK_HEADROOM))
    while int(works * BLOCK_HEADROOM) < peak:
        works += 1
    return works


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


def _step_cost(step: Step, ext: dict[int, int], model: CostModel = NUMPY_MODEL) -> float:
    """The modelled time of ``step`` at extents ``ext`` (its kernel and layout unchanged)."""
    result = size_of(step.result, ext)
    if step.kernel == "multiply":
        return model.multiply_ns(result, _inner_run(step.result, step.x_labels, step.y_labels, ext))
    if step.kernel == "einsum" or step.layout is None:
        every = set(step.x_labels) | set(step.y_labels)
        return model.einsum_ns(size_of(tuple(every), ext)) + model.fresh_buffer_ns(result)
    lay = step.layout
    p, q = lay.left, lay.right
    calls = size_of(lay.batch, ext) * size_of(p.spread, ext) * size_of(q.spread, ext)
    rows, cols, nk = size_of(p.free, ext), size_of(q.free, ext), size_of(lay.contract, ext)
    copied = 0
    for factor, labels in ((p, step.y_labels if lay.swap else step.x_labels),
                           (q, step.x_labels if lay.swap else step.y_labels)):
        if factor.copy:
            copied += size_of(labels, ext)
    cost = model.copy_ns(copied) + model.matmul_ns(calls, rows, nk, cols)
    if q.transposed and calls > 1:
        cost += model.batched_right_transpose_ns(calls, rows, cols)
    return cost + model.fresh_buffer_ns(result)


def _write_ns(elements: int, accumulate: bool, model: CostModel) -> float:
    """Writing one block's result into its slice of the output: a strided copy, or, when a
    contracted label is cut, a read-add-write of the slice (measured: the adds of a 64-block
    accumulating run took a fifth of its time, which the per-step costs never saw)."""
    return model.copy_ns(elements) * (3 if accumulate else 1)


def step_tokens(schedule: Schedule) -> tuple[tuple[tuple[str, int], tuple[str, int]], ...]:
    """What each step of ``schedule`` consumes: ``('o', k)`` operand ``k`` (prepared),
    ``('s', k)`` the result of step ``k`` (positions in the working list resolved).

    >>> from contractions.plan import make_plan
    >>> plan = make_plan('ij,jk,kl->il', ((30, 40), (40, 50), (50, 60)), ())
    >>> step_tokens(make_schedule(plan, [(1, 2), (0, 1)]))
    ((('o', 1), ('o', 2)), (('o', 0), ('s', 0)))
    """
    return _tokens_of(schedule)


def _structure(base: Schedule, cut: set[int]) -> tuple[tuple[bool, ...], tuple[int, ...]]:
    """(which operands carry a cut label, which steps depend on none of them)."""
    sliced = tuple(any(lab in cut and n != 1 for lab, n in zip(t, s))
                   for t, s in zip(base.inputs, base.shapes))
    depends: list[bool] = []
    for tx, ty in _tokens_of(base):
        depends.append(any(sliced[k] if kind == "o" else depends[k] for kind, k in (tx, ty)))
    return sliced, tuple(k for k, dep in enumerate(depends) if not dep)


def _loop_peak(prologue: Schedule, body: Schedule, ext_full: dict[int, int],
               ext_block: dict[int, int], sliced: tuple[bool, ...], hoisted: tuple[int, ...]) -> int:
    """The peak of a blocked run: the prologue (unsliced operands and hoisted steps, whole),
    then one block of ``body`` beside the prologue results the loop still needs."""
    n = len(sliced)
    alive: dict[Token, tuple[int, bool]] = {}
    first = _simulate(prologue, ext_full, [k for k in range(n) if not sliced[k]], hoisted, alive,
                      sliced, final_is_extra=True)
    loop = [k for k in range(len(body.steps)) if k not in set(hoisted)]
    block = _simulate(body, ext_block, [k for k in range(n) if sliced[k]], loop, dict(alive), sliced,
                      final_is_extra=True, full_shapes=prologue.shapes)
    return max(first, block)


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

    def measure(chunks: dict[int, int]) -> tuple[int, float, int]:
        cut = {lab for lab in labels if chunks[lab] < extents[lab]}
        sliced, hoisted = _structure(base, cut)
        ext = {**extents, **chunks}
        peak = _loop_peak(base, base, ext, ext, sliced, hoisted)
        n_blocks = math.prod(-(-extents[lab] // chunks[lab]) for lab in cut)
        loop = [k for k in range(n_steps) if k not in set(hoisted)]
        tokens = _tokens_of(base)
        per_block = model.block_ns(len(loop))
        for k in loop:
            step = base.steps[k]
            per_block += _step_cost(step, ext, model)
            for view, (kind, j) in ((step.x_view, tokens[k][0]), (step.y_view, tokens[k][1])):
                if (view is not None and view.contiguous_first and kind == "o" and sliced[j]
                        and _operand_token(base, j, ext, True)[2]):
                    per_block += model.copy_ns(size_of(inputs[j], ext))
        per_block += _write_ns(size_of(output, ext), bool(cut - set(output)), model)
        cost = sum(base.steps[k].cost_ns for k in hoisted) + n_blocks * per_block
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
            return replace(blocked, memory_limit=limit), int(min(smallest, blocked.peak_extra))
        # the estimate missed (another kernel or layout at block shapes): aim lower
        target = max(1, min(target - 1, int(target * limit / blocked.peak_extra)))


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
              model: CostModel = NUMPY_MODEL) -> Schedule:
    """The blocked schedule for these chunk sizes: one inner schedule per kind of block
    (full chunks, and the shorter last chunk of each cut label), its exact peak and cost."""
    inputs, output, shapes, extents = base.inputs, base.output, base.shapes, base.extents
    sliced_labels = tuple(lab for lab in labels if chunks[lab] < extents[lab])
    sizes = tuple(chunks[lab] for lab in sliced_labels)
    counts = tuple(-(-extents[lab] // chunks[lab]) for lab in sliced_labels)
    sliced, hoisted = _structure(base, set(sliced_labels))
    loop = [k for k in range(len(base.steps)) if k not in set(hoisted)]
    accumulate = any(lab not in output for lab in sliced_labels)
    variants: list[tuple[tuple[int, ...], Schedule]] = []
    total = sum(base.steps[k].cost_ns for k in hoisted)
    peak = 0
    for lengths in itertools.product(*[
            sorted({c, extents[lab] % c} - {0}, reverse=True) for lab, c in zip(sliced_labels, sizes)]):
        length_of = dict(zip(sliced_labels, lengths))
        block_shapes = tuple(tuple(length_of.get(lab, n) if n != 1 else 1 for lab, n in zip(t, s))
                             for t, s in zip(inputs, shapes))
        block = schedule_labels(inputs, output, block_shapes, base.path, "pairwise", use_einsum,
                                layouts=base.layouts, cost_model=model)
        variants.append((lengths, block))
        how_many = math.prod(
            (extents[lab] // c) if n == c else 1 for lab, c, n in zip(sliced_labels, sizes, lengths))
        total += how_many * (model.block_ns(len(loop)) + sum(block.steps[k].cost_ns for k in loop)
                             + _write_ns(size_of(output, block.extents), accumulate, model))
        peak = max(peak, _loop_peak(base, block, extents, block.extents, sliced, hoisted))
    first = variants[0][1]
    blocking = Blocking(
        labels=sliced_labels, chunks=sizes, counts=counts,
        accumulate=accumulate,
        operand_axes=tuple(tuple(tuple(a for a, (l2, n) in enumerate(zip(t, s)) if l2 == lab and n != 1)
                                 for lab in sliced_labels) for t, s in zip(inputs, shapes)),
        output_axes=tuple(tuple(a for a, l2 in enumerate(output) if l2 == lab) for lab in sliced_labels),
        inner=tuple(variants), hoisted=hoisted, sliced=sliced)
    return replace(base, preparations=first.preparations, steps=first.steps, finish=first.finish,
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
    # The model may price the steps against one einsum call along a path (torch: one C++ call
    # instead of a Python dispatch per operation); the schedule then says to run that call.
    if schedule.strategy == "pairwise" and schedule.blocking is None and schedule.einsum is not None:
        path = cost_model.one_einsum_path(schedule, optimize)
        if path is not None:
            return replace(schedule, strategy="direct", preparations=(), steps=(), path=path,
                           finish=Finish(None, schedule.output_shape, False, False), peak_extra=0)
    if optimize != "auto":
        return schedule   # an explicit path or optimizer: run it as asked
    # Here, not in `schedule_labels`: the blocks' own schedules come from there, unblocked.
    return _cache_blocked(schedule, use_einsum, cost_model)


def describe_schedule(schedule: Schedule, name: Callable[[int], str] = str) -> list[str]:
    """Lines describing a schedule: the strategy, preparation, each step, the finish.

    ``name`` spells a label (``explain`` passes the expansion's symbols).  These are the lines
    ``explain`` prints; tests compare them with the steps that actually run.
    """
    def labels(ls: Sequence[int]) -> str:
        return "".join(name(lab) for lab in ls) or "-"

    if schedule.strategy == "direct":
        return [f"one einsum {schedule.einsum!r} (small problem: one C loop beats pairwise steps)"]
    lines = []
    blocking = schedule.blocking
    hoisted = set(blocking.hoisted) if blocking is not None else set()
    loop_header = None
    if blocking is not None:
        cuts = ", ".join(f"{labels([lab])} in {n} chunks of {c}"
                         for lab, c, n in zip(blocking.labels, blocking.chunks, blocking.counts))
        how = "adding block results" if blocking.accumulate else "each written into its slice"
        why = ", cache-sized: a bandwidth-bound chain" if blocking.purpose == "cache" else ""
        loop_header = f"blocks: {blocking.n_blocks} ({cuts}; {how}{why}); each block runs:"
    prep_lines = []
    for k, prep in enumerate(schedule.preparations):
        if prep.is_identity:
            continue
        parts = []
        if prep.transpose is not None:
            parts.append("read as its transpose (Fortran order)")
        if prep.squeeze is not None:
            parts.append(f"drop size-1 axes -> {prep.squeeze}")
        parts += [f"diagonal of axes {a},{b}" for a, b in prep.diagonals]
        if prep.sum_axes:
            parts.append(f"sum axes {list(prep.sum_axes)}")
        prep_lines.append(f"prepare operand {k}: " + "; ".join(parts) + f" -> {labels(prep.labels)}")
    step_lines = []
    for n, step in enumerate(schedule.steps, 1):
        what = {"matmul": "matmul", "multiply": "multiply", "einsum": "einsum"}[step.kernel]
        detail = f" {step.einsum!r}" if step.kernel == "einsum" else ""
        if step.kernel == "matmul" and step.layout is not None:
            lay = step.layout

            def form(f: Any) -> str:
                return "copy" if f.copy else ("T-view" if f.transposed else "view")

            detail = f" [{form(lay.left)} @ {form(lay.right)}]"
        step_lines.append((n - 1 in hoisted,
            f"step {n}: {step.operands} {what}{detail} {labels(step.x_labels)},{labels(step.y_labels)}"
            f"->{labels(step.result)} batch {labels(step.batch)} contract {labels(step.contract)}; "
            f"result {step.result_shape}; {step.flops:,} FLOPs; model {step.cost_ns / 1e3:.3g} us"))
    if hoisted:
        lines.append("once, before the blocks (these steps carry no cut label):")
        lines += ["  " + text for once, text in step_lines if once]
    if loop_header is not None:
        lines.append(loop_header)
    lines += prep_lines
    lines += [text for once, text in step_lines if not once]
    fin = schedule.finish
    if fin is not None and fin.permutation is not None:
        lines.append(f"finish: transpose {fin.permutation} to output order")
    return lines
