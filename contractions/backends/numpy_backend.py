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
    from numpy.core.multiarray import c_einsum as _c_einsum

__all__ = ["DIRECT_MAX_NAIVE_COST", "NumpyProgram", "build_program", "build_program_with"]

Labels = tuple[int, ...]
Shape = tuple[int, ...]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

# The direct path runs numpy's einsum as ONE nested loop over every distinct label, so its cost is
# ~ (product of all label extents) x a few ns plus a per-call setup that grows with the number of
# axes; the pairwise path pays ~1-2 us of Python per step but only the pairwise flops.  Chosen by
# measurement (bench/direct_threshold.py, docstring has the numbers): on every multi-operand
# string of the repo's vocabulary, extents grown from 2 until the single call clearly loses, both
# strategies timed at each point; "direct iff naive count <= T" cost 1.058x the per-point best in
# total at T=1024, vs 1.075x at 256 and 1.218x at 8192.  Re-run that script on other hardware.
DIRECT_MAX_NAIVE_COST = 1024

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
        ops.append(lambda x, _s=new_shape: x.reshape(_s))
        notes.append(f"drop size-1 axes -> {new_shape}")

    # Diagonals: a repeated label collapses to one axis (np.diagonal appends it last).
    while len(set(current)) != len(current):
        label = next(lab for lab in current if current.count(lab) > 1)
        first = current.index(label)
        second = current.index(label, first + 1)
        ops.append(lambda x, _a=first, _b=second: x.diagonal(0, _a, _b))
        current = [lab for k, lab in enumerate(current) if k not in (first, second)] + [label]
        notes.append(f"diagonal over label {label}")

    # Axes nobody else needs are summed now, before they inflate a pairwise step.
    private = tuple(axis for axis, lab in enumerate(current) if lab not in needed_elsewhere)
    if private:
        # dtype=x.dtype keeps ints/bools as einsum does (add.reduce would widen small ints).
        ops.append(lambda x, _axes=private: np.add.reduce(x, _axes, x.dtype))
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
    return (lambda x: np.add.reduce(x, axes, x.dtype)), remaining


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
class _MatmulLayout:
    cost: float
    swap: bool  # True: the Y operand is the left matmul factor
    batch: Labels
    contract: Labels
    left_free: Labels
    right_free: Labels
    left_transposed: bool  # left factor is stored (batch, contract, free): use a swapaxes view
    right_transposed: bool  # right factor is stored (batch, free, contract)
    left_copy: bool
    right_copy: bool


# Cost (in element copies) charged for feeding a batched matmul its right factor as a transposed
# (swapaxes) view, per element of the result: numpy then loses its fast path (measured, b x m x k
# @ b x k x n with the right factor transposed: (1296,64,6,6) 695 vs 305 us plain, (256,64,16,16)
# 332 vs 182 us).  A transposed left factor, and either one in an unbatched (2-D) product, go to
# BLAS as a transpose flag and cost nothing.
_BATCHED_RIGHT_TRANSPOSE_COST = 0.75


def _best_matmul_layout(
    lx: Labels,
    ly: Labels,
    batch: set[int],
    contract: set[int],
    extents: dict[int, int],
    final_order: Labels | None,
) -> _MatmulLayout:
    """Choose operand roles, group orders and per-operand layouts for the cheapest matmul.

    Each factor is used as stored when its (C-ordered) labels already read (batch, rows, cols),
    as a transposed view when they read (batch, cols, rows), or else copied into place.  Costs
    are in elements moved: a copy costs the operand's size, a transposed right factor of a
    batched product ``_BATCHED_RIGHT_TRANSPOSE_COST`` per result element.  Ties prefer a result
    already in output order, then more rows than columns (OpenBLAS is faster that way round for
    thin inner dimensions: (576x24)@(24x832) 330 us vs 246 us for the transposed product).
    """
    best: _MatmulLayout | None = None
    size_x, size_y = _size(lx, extents), _size(ly, extents)
    batched = bool(batch)
    for swap in (False, True):
        lp, lq, size_p, size_q = (ly, lx, size_y, size_x) if swap else (lx, ly, size_x, size_y)
        free_p = tuple(label for label in lp if label not in batch and label not in contract)
        free_q = tuple(label for label in lq if label not in batch and label not in contract)
        rows, cols = _size(free_p, extents), _size(free_q, extents)
        result_size = _size(batch, extents) * rows * cols
        for batch_source in (lp, lq):
            b = tuple(label for label in batch_source if label in batch)
            for contract_source in (lp, lq):
                c = tuple(label for label in contract_source if label in contract)
                # (cost, transposed, copied) per factor
                p_options = [(float(size_p), False, True)]
                if lp == b + free_p + c:
                    p_options.append((0.0, False, False))
                elif lp == b + c + free_p:
                    p_options.append((0.0, True, False))
                q_options = [(float(size_q), False, True)]
                if lq == b + c + free_q:
                    q_options.append((0.0, False, False))
                elif lq == b + free_q + c:
                    q_cost = _BATCHED_RIGHT_TRANSPOSE_COST * result_size if batched else 0.0
                    q_options.append((q_cost, True, False))
                p_cost, p_trans, p_copy = min(p_options)
                q_cost, q_trans, q_copy = min(q_options)
                cost = p_cost + q_cost
                if final_order is not None and b + free_p + free_q != final_order:
                    cost += 1e-3 * result_size  # tie-break: a strided result view is fine
                if rows < cols:
                    cost += 1e-6 * result_size  # tie-break: orientation
                if best is None or cost < best.cost:
                    best = _MatmulLayout(
                        cost=cost,
                        swap=swap,
                        batch=b,
                        contract=c,
                        left_free=free_p,
                        right_free=free_q,
                        left_transposed=p_trans,
                        right_transposed=q_trans,
                        left_copy=p_copy,
                        right_copy=q_copy,
                    )
    assert best is not None
    return best


def _matmul_factor(
    labels: Labels,
    stored: Labels,
    transposed: bool,
    shape3: tuple[int, int, int],
    batched: bool,
):
    """Op giving a (batch, rows, cols) factor (2-D when unbatched) from an operand.

    ``stored`` is the order the operand is brought to before reshaping (a copy happens in the
    reshape when that needs a transpose); ``transposed`` means it is stored (rows<->cols swapped)
    and the factor is a swapaxes view, which BLAS consumes without a copy.
    """
    nb, rows, cols = shape3
    perm = _permutation(labels, stored)
    if transposed:
        flat: tuple[int, ...] = (nb, cols, rows) if batched else (cols, rows)
    else:
        flat = (nb, rows, cols) if batched else (rows, cols)

    if perm is None and not transposed:
        return lambda x: x.reshape(flat)
    if perm is None:
        return lambda x: x.reshape(flat).swapaxes(-1, -2)
    if not transposed:
        return lambda x: x.transpose(perm).reshape(flat)
    return lambda x: x.transpose(perm).reshape(flat).swapaxes(-1, -2)


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
        needs_copy = layout.left_copy or layout.right_copy
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
    b, c = layout.batch, layout.contract
    fp, fq = layout.left_free, layout.right_free
    nb, nc = _size(b, extents), _size(c, extents)
    nl, nr = _size(fp, extents), _size(fq, extents)
    batched = bool(b)
    stored_p = b + c + fp if layout.left_transposed else b + fp + c
    stored_q = b + fq + c if layout.right_transposed else b + c + fq
    factor_p = _matmul_factor(lp, stored_p, layout.left_transposed, (nb, nl, nc), batched)
    factor_q = _matmul_factor(lq, stored_q, layout.right_transposed, (nb, nc, nr), batched)
    result = b + fp + fq
    result_shape = tuple(extents[label] for label in result)
    swap = layout.swap

    if swap:

        def kernel(x, y):
            return np.matmul(factor_p(y), factor_q(x)).reshape(result_shape)

    else:

        def kernel(x, y):
            return np.matmul(factor_p(x), factor_q(y)).reshape(result_shape)

    copies = [name for name, flag in (("left", layout.left_copy), ("right", layout.right_copy)) if flag]
    description = (
        f"matmul batch={list(b)} ({nb}) left={list(fp)} ({nl}) contract={list(c)} ({nc}) "
        f"right={list(fq)} ({nr})" + (f"; copies {'+'.join(copies)}" if copies else "")
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
            kernel, result, description = _pairwise_step(lx, ly, keep, extents, final_order if is_last else None)
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
def build_program(
    inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...]
) -> NumpyProgram:
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
    if len(distinct) <= len(_LETTERS) and (naive_cost <= DIRECT_MAX_NAIVE_COST or len(inputs) == 1):
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
