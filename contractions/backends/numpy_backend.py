"""BLAS-aware numpy planner and executor for expanded contractions.

The engine hands this module a contraction already expanded to integer axis labels (one int per
axis, any number of distinct labels: there is no 52-letter ceiling) plus the operand shapes.
``build_program`` plans once per shape signature and returns a ``NumpyProgram`` whose call does
only arithmetic.

    >>> import numpy as np
    >>> program = build_program(((0, 1), (1, 2)), (0, 2), ((2, 3), (3, 4)))
    >>> x, y = np.ones((2, 3)), np.ones((3, 4))
    >>> program(x, y).tolist() == np.einsum('ij,jk->ik', x, y).tolist()
    True

Two strategies:

* ``direct``: one ``einsum`` call on a precomputed letter string. Used when the problem is so
  small that Python call overhead dominates (and it has at most 52 distinct labels).
* ``pairwise``: an opt_einsum path over the real sizes; before pairing, each operand drops its
  size-1 axes (broadcast or trivially summed), takes its diagonals and sums the axes no one else
  needs; each pairwise step then runs as a batched ``matmul`` (BLAS) after the transposes and
  reshapes that put it in ``(batch, left, contract) @ (batch, contract, right)`` form, as a
  broadcast multiply when nothing is contracted, or as a small relabelled ``einsum`` when the
  step is vector-like and BLAS would first need a copy. Each step uses at most a handful of
  letters whatever the total number of labels, which is how the ceiling disappears.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from opt_einsum import paths as _opt_paths

try:  # numpy >= 2
    from numpy._core.multiarray import c_einsum as _c_einsum
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import c_einsum as _c_einsum  # type: ignore[no-redef]

__all__ = [
    "DIRECT_FEW_LABELS",
    "DIRECT_MAX_NAIVE_COST",
    "DIRECT_MAX_NAIVE_COST_MANY_LABELS",
    "NumpyProgram",
    "build_program",
    "build_program_with",
]

Labels = tuple[int, ...]
Shape = tuple[int, ...]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

# The direct path runs numpy's einsum as ONE nested loop over every distinct label, so its cost is
# ~ (product of all label extents) x a few ns plus a per-call setup that grows with the number of
# labels; the pairwise path pays ~1-2 us of Python per step but only the pairwise flops.  Chosen by
# measurement (bench/direct_threshold.py; its docstring has the numbers): on every multi-operand
# string of the repo's vocabulary, extents grown from 2 until the single call clearly loses, both
# strategies timed at each of ~1350 points.  "direct iff naive count <= T" costs, in total over
# all points, 1.062x the per-point best at T=1024 (1.070x at 512, 1.086x at 2048); letting T
# depend on the number of labels -- 4096 up to 7 labels, 512 beyond (einsum's setup is ~1.2 us at
# 6 labels, ~2.5-5 us at 8-9) -- brings it to 1.051x and the tiny-size points from 1.075x to 1.047x.
DIRECT_MAX_NAIVE_COST = 4096
DIRECT_MAX_NAIVE_COST_MANY_LABELS = 512
DIRECT_FEW_LABELS = 7

# A vector-like step (one side has no free axis) whose per-batch matrix is at most this many
# multiply-adds runs faster as einsum's SIMD loop than as one BLAS call per batch element
# (measured: (1e4 x 4x16) @ (1e4 x 16) 0.32 ms einsum vs 0.50 ms matmul; 32x32 is a tie).
_EINSUM_VECTOR_STEP_MAX_MACS = 256


@dataclass(frozen=True)
class NumpyProgram:
    """A planned numpy contraction for one shape signature; calling it does only arithmetic.

    ``strategy`` is ``'direct'`` (one einsum on ``einsum``) or ``'pairwise'``; ``steps`` describes
    the plan in words (for ``explain`` and debugging). ``execute`` is the bare callable behind
    ``__call__`` (an engine may call it directly to save a frame).

        >>> p = build_program(((0, 1),), (1, 0), ((2, 3),))
        >>> p(np.arange(6.0).reshape(2, 3)).shape
        (3, 2)
    """

    inputs: tuple[Labels, ...]
    output: Labels
    shapes: tuple[Shape, ...]
    output_shape: Shape
    strategy: str
    einsum: str | None
    steps: tuple[str, ...]
    execute: Callable[..., np.ndarray] = field(repr=False, compare=False)

    def __call__(self, *arrays: np.ndarray) -> np.ndarray:
        return self.execute(*arrays)


# --------------------------------------------------------------------------------------------
# planning helpers


def _global_extents(inputs: Sequence[Labels], shapes: Sequence[Shape]) -> dict[int, int]:
    """Extent of every label: the non-1 extent if any operand has one (size 1 broadcasts)."""
    extents: dict[int, int] = {}
    for labels, shape in zip(inputs, shapes):
        for label, extent in zip(labels, shape):
            if extents.get(label, 1) == 1:
                extents[label] = extent
    return extents


def _size(labels: Sequence[int], extents: dict[int, int]) -> int:
    return math.prod(extents[label] for label in labels)


def _letters_for(labels: Sequence[int]) -> dict[int, str]:
    mapping: dict[int, str] = {}
    for label in labels:
        if label not in mapping:
            mapping[label] = _LETTERS[len(mapping)]
    return mapping


def _einsum_string(inputs: Sequence[Sequence[int]], output: Sequence[int]) -> str | None:
    """Letter string for the given labels, or None if they need more than 52 letters."""
    distinct = {label for term in inputs for label in term}
    if len(distinct) > len(_LETTERS):
        return None
    letters = _letters_for([label for term in inputs for label in term])
    terms = ",".join("".join(letters[label] for label in term) for term in inputs)
    return terms + "->" + "".join(letters[label] for label in output)


def _permutation(current: Sequence[int], wanted: Sequence[int]) -> tuple[int, ...] | None:
    """Axis permutation taking ``current`` label order to ``wanted``; None when it is identity."""
    perm = tuple(current.index(label) for label in wanted)
    return None if perm == tuple(range(len(perm))) else perm


# --------------------------------------------------------------------------------------------
# per-operand preparation: drop size-1 axes, take diagonals, sum private axes


def _reshaper(shape: Shape) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: x.reshape(shape)


def _diagonal_taker(first: int, second: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: x.diagonal(0, first, second)


def _summer(axes: tuple[int, ...]) -> Callable[[np.ndarray], np.ndarray]:
    # dtype=x.dtype keeps ints/bools as einsum does (add.reduce would widen small ints).
    return lambda x: np.add.reduce(x, axes, x.dtype)


def _prepare_operand(
    labels: Labels, shape: Shape, needed_elsewhere: set[int]
) -> tuple[tuple[Callable[[np.ndarray], np.ndarray], ...], Labels, bool, list[str]]:
    """Ops that bring one operand to unique labels with no size-1 and no private axes.

    Returns (ops, resulting labels, whether an op allocates a fresh array, descriptions).
    """
    ops: list[Callable[[np.ndarray], np.ndarray]] = []
    notes: list[str] = []
    fresh = False

    # Size-1 axes carry nothing: either they broadcast against a full extent elsewhere, or the
    # label is 1 everywhere and the output gets its 1 back from the final reshape.  Dropping a
    # size-1 axis is always a view.
    kept_axes = [axis for axis, extent in enumerate(shape) if extent != 1]
    current = [labels[axis] for axis in kept_axes]
    if len(kept_axes) != len(shape):
        new_shape = tuple(shape[axis] for axis in kept_axes)
        ops.append(_reshaper(new_shape))
        notes.append(f"drop size-1 axes -> {new_shape}")

    # Diagonals: a repeated label collapses to one axis (np.diagonal appends it last).
    while len(set(current)) != len(current):
        label = next(lab for lab in current if current.count(lab) > 1)
        first = current.index(label)
        second = current.index(label, first + 1)
        ops.append(_diagonal_taker(first, second))
        current = [lab for k, lab in enumerate(current) if k not in (first, second)] + [label]
        notes.append(f"diagonal over label {label}")

    # Axes nobody else needs are summed now, before they inflate a pairwise step.
    private = tuple(axis for axis, lab in enumerate(current) if lab not in needed_elsewhere)
    if private:
        ops.append(_summer(private))
        notes.append(f"sum private labels {[current[a] for a in private]}")
        current = [lab for axis, lab in enumerate(current) if axis not in private]
        fresh = True
    return tuple(ops), tuple(current), fresh, notes


# --------------------------------------------------------------------------------------------
# pairwise steps


def _view_in_order(labels: Labels, order: Labels, extents: dict[int, int]):
    """Op viewing an array with ``labels`` in ``order`` (absent labels become size-1 axes)."""
    present = [label for label in order if label in labels]
    perm = _permutation(labels, present)
    shape = tuple(extents[label] if label in labels else 1 for label in order)
    if perm is None:
        return lambda x: x.reshape(shape)
    return lambda x: x.transpose(perm).reshape(shape)


def _reduce_op(labels: Labels, drop: set[int]):
    axes = tuple(axis for axis, label in enumerate(labels) if label in drop)
    if not axes:
        return None, labels
    remaining = tuple(label for label in labels if label not in drop)
    return _summer(axes), remaining


def _preferred_result_order(
    lx: Labels, ly: Labels, kept: set[int], final_order: Labels | None, extents: dict[int, int]
) -> Labels:
    """Result label order for elementwise/einsum steps: the output order on the last step,
    else the larger operand's order followed by the other's new labels (streams the big one)."""
    if final_order is not None:
        return final_order
    big, small = (lx, ly) if _size(lx, extents) >= _size(ly, extents) else (ly, lx)
    order = [label for label in big if label in kept]
    order += [label for label in small if label in kept and label not in order]
    return tuple(order)


@dataclass(frozen=True)
class _Factor:
    """How one operand is presented to ``np.matmul`` as a stack of matrices.

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
class _MatmulLayout:
    cost: float
    swap: bool  # True: the Y operand is the left matmul factor
    batch: Labels
    contract: Labels
    left: _Factor
    right: _Factor


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
) -> list[tuple[float, _Factor]]:
    """Ways to present one operand as a matmul factor, each with its copy cost (elements)."""
    options = [(float(size), _Factor(free=free, spread=(), copy=True, transposed=False))]
    free_set = set(free)
    for run in [*_free_runs(labels, free_set), ()]:
        spread = tuple(label for label in free if label not in run)
        # left factor: rows=run, cols=contract; right factor: rows=contract, cols=run
        outer, inner = (run, contract) if is_left else (contract, run)
        if inner and _is_run(labels, inner, at_end=True) and _is_run(labels, outer, at_end=False):
            options.append((0.0, _Factor(free=run, spread=spread, copy=False, transposed=False)))
        if outer and _is_run(labels, outer, at_end=True) and _is_run(labels, inner, at_end=False):
            options.append((0.0, _Factor(free=run, spread=spread, copy=False, transposed=True)))
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
_NS_PER_MATMUL_CALL = 18.0
_NS_PER_MAC = 0.0166
_NS_PER_MATRIX_ELEMENT = 0.275
_NS_PER_COPIED_ELEMENT = 1.5
_NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT = 0.75


def _matmul_ns(calls: int, m: int, k: int, n: int) -> float:
    return calls * (
        _NS_PER_MATMUL_CALL + _NS_PER_MAC * m * k * n + _NS_PER_MATRIX_ELEMENT * (m * k + k * n + m * n)
    )


def _best_matmul_layout(
    lx: Labels,
    ly: Labels,
    batch: set[int],
    contract: set[int],
    extents: dict[int, int],
    final_order: Labels | None,
) -> _MatmulLayout:
    """Choose operand roles, group orders and per-operand presentations for the fastest matmul.

    Every combination is priced with the time model above (copies, the stacked products, the
    transposed-right penalty).  Ties prefer a result already in output order, then more rows
    than columns (OpenBLAS is faster that way round for thin inner dimensions: (576x24)@(24x832)
    330 us vs 246 us for the transposed product).
    """
    best: _MatmulLayout | None = None
    size_x, size_y = _size(lx, extents), _size(ly, extents)
    nb = _size(tuple(batch), extents)
    for swap in (False, True):
        lp, lq, size_p, size_q = (ly, lx, size_y, size_x) if swap else (lx, ly, size_x, size_y)
        free_p = tuple(label for label in lp if label not in batch and label not in contract)
        free_q = tuple(label for label in lq if label not in batch and label not in contract)
        nk = _size(tuple(contract), extents)
        for batch_source in (lp, lq):
            b = tuple(label for label in batch_source if label in batch)
            for contract_source in (lp, lq):
                c = tuple(label for label in contract_source if label in contract)
                for p_copied, p in _presentations(lp, free_p, c, True, size_p):
                    for q_copied, q in _presentations(lq, free_q, c, False, size_q):
                        calls = nb * _size(p.spread, extents) * _size(q.spread, extents)
                        rows, cols = _size(p.free, extents), _size(q.free, extents)
                        cost = _NS_PER_COPIED_ELEMENT * (p_copied + q_copied) + _matmul_ns(
                            calls, rows, nk, cols
                        )
                        if q.transposed and calls > 1:
                            cost += _NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT * calls * rows * cols
                        result = b + p.spread + q.spread + p.free + q.free
                        if final_order is not None and result != final_order:
                            cost *= 1.0 + 1e-6  # tie-break: a strided result view is fine
                        if rows < cols:
                            cost *= 1.0 + 1e-9  # tie-break: orientation
                        if best is None or cost < best.cost:
                            best = _MatmulLayout(cost=cost, swap=swap, batch=b, contract=c, left=p, right=q)
    assert best is not None
    return best


def _matmul_factor(
    labels: Labels,
    lead: Labels,
    stack_shape: Shape,
    outer: Labels,
    inner: Labels,
    factor: _Factor,
    extents: dict[int, int],
):
    """Op turning an operand into its matmul factor: ``stack_shape`` (the ``lead`` labels' extents
    with 1s where the other factor has spread axes) followed by the (outer x inner) matrix."""
    n_outer, n_inner = _size(outer, extents), _size(inner, extents)
    contiguous = np.ascontiguousarray
    if factor.copy:
        perm = _permutation(labels, lead + outer + inner)
        shape = (*stack_shape, n_outer, n_inner)
        if perm is None:
            return lambda x: contiguous(x).reshape(shape)
        return lambda x: contiguous(x.transpose(perm)).reshape(shape)
    if factor.transposed:
        perm = _permutation(labels, lead + inner + outer)
        shape = (*stack_shape, n_inner, n_outer)
    else:
        perm = _permutation(labels, lead + outer + inner)
        shape = (*stack_shape, n_outer, n_inner)
    # The plan assumed C-ordered operands; anything else (a caller's Fortran array, a diagonal
    # view) is copied once rather than handed to matmul's slow non-BLAS loop.
    if perm is None and not factor.transposed:
        return lambda x: contiguous(x).reshape(shape)
    if perm is None:
        return lambda x: contiguous(x).reshape(shape).swapaxes(-1, -2)
    if not factor.transposed:
        return lambda x: contiguous(x).transpose(perm).reshape(shape)
    return lambda x: contiguous(x).transpose(perm).reshape(shape).swapaxes(-1, -2)


def _pairwise_step(
    lx: Labels,
    ly: Labels,
    keep: set[int],
    extents: dict[int, int],
    final_order: Labels | None,
) -> tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], Labels, str]:
    """One pairwise contraction: returns (op(x, y), result labels, description)."""
    # Labels only one side has and nobody needs later are summed first (after the per-operand
    # preparation this only happens in unusual paths, but it keeps each step self-contained).
    reduce_x, lx = _reduce_op(lx, {lab for lab in lx if lab not in ly and lab not in keep})
    reduce_y, ly = _reduce_op(ly, {lab for lab in ly if lab not in lx and lab not in keep})

    shared = set(lx) & set(ly)
    batch = {label for label in shared if label in keep}
    contract = shared - batch
    left = tuple(label for label in lx if label not in shared)
    right = tuple(label for label in ly if label not in shared)
    kept = set(lx) | set(ly)
    kept -= contract
    nl, nr = _size(left, extents), _size(right, extents)

    kernel: Callable[[np.ndarray, np.ndarray], np.ndarray]
    if not contract:
        # Nothing to sum: an outer/elementwise product, done by broadcasting strided views.
        order = _preferred_result_order(lx, ly, kept, final_order, extents)
        view_x = _view_in_order(lx, order, extents)
        view_y = _view_in_order(ly, order, extents)

        def kernel(x, y):
            # order 'K' (default) writes in the operands' memory order, ~1.5x faster than
            # forcing C order when the output order transposes them; a strided result is fine
            return np.multiply(view_x(x), view_y(y))

        description = f"multiply (no contraction) -> {list(order)}"
        result = order
    else:
        layout = _best_matmul_layout(lx, ly, batch, contract, extents, final_order)
        needs_copy = layout.left.copy or layout.right.copy
        vector_like = not left or not right
        nc = _size(layout.contract, extents)
        small_matrix = nl * nc * nr <= _EINSUM_VECTOR_STEP_MAX_MACS
        letters_ok = len(kept | contract) <= len(_LETTERS)
        if letters_ok and vector_like and (needs_copy or small_matrix or (not left and not right)):
            # einsum's loop reads any strides, so a vector-like step never copies; BLAS would
            # only gain on a large single matrix-vector product with a free layout.
            order = _preferred_result_order(lx, ly, kept, final_order, extents)
            subscripts = _einsum_string((lx, ly), order)
            assert subscripts is not None

            def kernel(x, y):
                return _c_einsum(subscripts, x, y)

            description = f"einsum {subscripts}"
            result = order
        else:
            kernel, result, description = _matmul_kernel(lx, ly, layout, extents)

    if reduce_x is None and reduce_y is None:
        return kernel, result, description

    def reduced_kernel(x, y):
        if reduce_x is not None:
            x = reduce_x(x)
        if reduce_y is not None:
            y = reduce_y(y)
        return kernel(x, y)

    return reduced_kernel, result, "sum unshared labels, then " + description


def _matmul_kernel(lx: Labels, ly: Labels, layout: _MatmulLayout, extents: dict[int, int]):
    lp, lq = (ly, lx) if layout.swap else (lx, ly)
    b, c, left, right = layout.batch, layout.contract, layout.left, layout.right

    def extents_of(labels: Labels) -> Shape:
        return tuple(extents[label] for label in labels)

    # stack axes: batch, the left factor's spread labels, then the right factor's (each factor
    # has 1s in the other's spread positions and matmul broadcasts them)
    left_stack = (*extents_of(b), *extents_of(left.spread), *(1 for _ in right.spread))
    right_stack = (*extents_of(b), *(1 for _ in left.spread), *extents_of(right.spread))
    factor_p = _matmul_factor(lp, b + left.spread, left_stack, left.free, c, left, extents)
    factor_q = _matmul_factor(lq, b + right.spread, right_stack, c, right.free, right, extents)
    result = b + left.spread + right.spread + left.free + right.free
    result_shape = extents_of(result)
    matmul = np.matmul

    if layout.swap:

        def kernel(x, y):
            return matmul(factor_p(y), factor_q(x)).reshape(result_shape)

    else:

        def kernel(x, y):
            return matmul(factor_p(x), factor_q(y)).reshape(result_shape)

    def form(factor: _Factor) -> str:
        how = "copied" if factor.copy else ("transposed view" if factor.transposed else "view")
        return how + (f", spread {list(factor.spread)}" if factor.spread else "")

    description = (
        f"matmul batch={list(b)} ({_size(b, extents)}) left={list(left.free)} "
        f"({_size(left.free, extents)}) contract={list(c)} ({_size(c, extents)}) "
        f"right={list(right.free)} ({_size(right.free, extents)}); "
        f"left {form(left)}; right {form(right)}"
    )
    return kernel, result, description


# --------------------------------------------------------------------------------------------
# program construction


def _direct_program(
    inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...], output_shape: Shape
) -> NumpyProgram:
    subscripts = _einsum_string(inputs, output)
    assert subscripts is not None
    summed = {label for term in inputs for label in term} - set(output)
    execute: Callable[..., np.ndarray]
    if len(inputs) == 1 and not summed:
        # einsum returns a view for a pure transpose/diagonal; the result must not alias.
        def execute(*arrays):
            return np.array(_c_einsum(subscripts, *arrays))  # copies (and 0-d for scalars)

    elif not output:
        # einsum hands back a numpy scalar; return a 0-d array like every other path.
        def execute(*arrays):
            return np.asarray(_c_einsum(subscripts, *arrays))

    else:
        execute = functools.partial(_c_einsum, subscripts)
    return NumpyProgram(
        inputs=inputs,
        output=output,
        shapes=shapes,
        output_shape=output_shape,
        strategy="direct",
        einsum=subscripts,
        steps=(f"einsum {subscripts}",),
        execute=execute,
    )


def _pairwise_program(
    inputs: tuple[Labels, ...],
    output: Labels,
    shapes: tuple[Shape, ...],
    output_shape: Shape,
    extents: dict[int, int],
) -> NumpyProgram:
    notes: list[str] = []
    # Labels of extent 1 everywhere are dropped from the whole computation; the final reshape
    # puts their 1s back into the output.
    surviving = [tuple(lab for lab, n in zip(term, shape) if n != 1) for term, shape in zip(inputs, shapes)]
    final_order = tuple(label for label in output if extents[label] != 1)
    output_set = set(final_order)

    preps = []
    current: list[Labels] = []
    fresh = False
    for k, (labels, shape) in enumerate(zip(inputs, shapes)):
        elsewhere = set(output_set)
        for other, term in enumerate(surviving):
            if other != k:
                elsewhere.update(term)
        ops, prepared, op_fresh, op_notes = _prepare_operand(labels, shape, elsewhere)
        preps.append(ops)
        current.append(prepared)
        fresh = fresh or op_fresh
        notes.extend(f"operand {k}: {note}" for note in op_notes)

    size_dict = {label: extents[label] for term in current for label in term}
    path = _opt_paths.auto([frozenset(term) for term in current], frozenset(output_set), size_dict)

    steps = []
    for contraction in path:
        positions = sorted(contraction)
        # opt_einsum's optimal/branch/greedy produce pairs; fold anything longer pairwise.
        while len(positions) > 1:
            i, j = positions[0], positions[1]
            lx, ly = current[i], current[j]
            rest = [term for k, term in enumerate(current) if k not in (i, j)]
            keep = set(output_set)
            for term in rest:
                keep.update(term)
            is_last = not rest
            kernel, result, description = _pairwise_step(
                lx, ly, keep, extents, final_order if is_last else None
            )
            steps.append((i, j, kernel))
            notes.append(f"step {len(steps)}: {description}")
            current = rest + [result]
            fresh = True
            # the merged operand now sits last; re-point the remaining positions of this group
            positions = [p - (p > i) - (p > j) for p in positions[2:]] + [len(current) - 1]
            positions.sort()

    assert len(current) == 1, current
    (labels,) = current
    perm = _permutation(labels, final_order)
    needs_reshape = tuple(extents[label] for label in final_order) != output_shape
    must_copy = not fresh
    scalar = not output_shape

    def finish(z):
        if perm is not None:
            z = z.transpose(perm)
        if scalar:
            z = np.asarray(z)
        elif needs_reshape:
            z = np.reshape(z, output_shape)
        if must_copy:
            # Only transposes/diagonals/reshapes ran: the result is a view of the input.
            z = np.array(z)
        return z

    step_tuple = tuple(steps)
    prep_tuple = tuple(preps)
    result_type = np.result_type

    def execute(*arrays):
        dtype = result_type(*arrays)
        work = []
        for array, ops in zip(arrays, prep_tuple):
            if array.dtype != dtype:
                array = array.astype(dtype)
            for op in ops:
                array = op(array)
            work.append(array)
        for i, j, kernel in step_tuple:
            y = work.pop(j)
            x = work.pop(i)
            work.append(kernel(x, y))
        return finish(work[0])

    if perm is not None:
        notes.append(f"transpose to output order {list(final_order)}")
    return NumpyProgram(
        inputs=inputs,
        output=output,
        shapes=shapes,
        output_shape=output_shape,
        strategy="pairwise",
        einsum=_einsum_string(inputs, output),
        steps=tuple(notes),
        execute=execute,
    )


@functools.lru_cache(maxsize=4096)
def build_program(inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...]) -> NumpyProgram:
    """Plan a contraction over integer labels for these shapes (pure; cached, thread-safe).

    ``inputs[k]`` labels the axes of operand ``k`` (a repeated label is a diagonal), ``output``
    lists the result's labels (unique, each present in some input), ``shapes[k]`` is operand
    ``k``'s shape.  Extents are assumed validated: equal per label up to size-1 broadcasting.

        >>> p = build_program(((7, 7),), (), ((3, 3),))  # trace
        >>> float(p(np.eye(3)))
        3.0
    """
    inputs = tuple(tuple(int(label) for label in term) for term in inputs)
    output = tuple(int(label) for label in output)
    shapes = tuple(tuple(int(n) for n in shape) for shape in shapes)
    extents = _global_extents(inputs, shapes)
    output_shape = tuple(extents[label] for label in output)
    distinct = {label for term in inputs for label in term}
    naive_cost = math.prod(extents[label] for label in distinct)
    limit = DIRECT_MAX_NAIVE_COST if len(distinct) <= DIRECT_FEW_LABELS else DIRECT_MAX_NAIVE_COST_MANY_LABELS
    if len(distinct) <= len(_LETTERS) and (naive_cost <= limit or len(inputs) == 1):
        # A single operand (transpose/diagonal/sum) is one memory-bound pass that einsum's C
        # loop does best at any size (measured: 'CDaa->CD' 72 us vs 184 us via np.diagonal +
        # add.reduce; 'BHqk->Bqk' 169 vs 239 us at 0.5M elements).
        return _direct_program(inputs, output, shapes, output_shape)
    return _pairwise_program(inputs, output, shapes, output_shape, extents)


def build_program_with(
    strategy: str, inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...]
) -> NumpyProgram:
    """``build_program`` with the strategy forced (``'direct'`` or ``'pairwise'``), uncached.

    For tests (both strategies on the same problem) and for re-measuring
    ``DIRECT_MAX_NAIVE_COST``; ``'direct'`` needs at most 52 distinct labels.

        >>> build_program_with('pairwise', ((0,), (0,)), (), ((2,), (2,))).strategy
        'pairwise'
    """
    inputs = tuple(tuple(int(label) for label in term) for term in inputs)
    output = tuple(int(label) for label in output)
    shapes = tuple(tuple(int(n) for n in shape) for shape in shapes)
    extents = _global_extents(inputs, shapes)
    output_shape = tuple(extents[label] for label in output)
    if strategy == "direct":
        if _einsum_string(inputs, output) is None:
            raise ValueError("the direct strategy needs at most 52 distinct labels")
        return _direct_program(inputs, output, shapes, output_shape)
    if strategy == "pairwise":
        return _pairwise_program(inputs, output, shapes, output_shape, extents)
    raise ValueError(f"strategy must be 'direct' or 'pairwise', got {strategy!r}")
