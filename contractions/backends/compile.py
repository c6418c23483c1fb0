"""Compile a `Schedule` into a callable, for any array library that offers a few operations.

The pairwise logic exists once, here: numpy runs it with `ArrayOps` built on numpy, torch
(past 52 axes, or with an explicit ``optimize=``) with the same code on torch functions.
Compiling builds one closure per preparation and per step, so a call does only arithmetic.

>>> import numpy as np
>>> from contractions.schedule import schedule_labels
>>> from contractions.backends.numpy_backend import NUMPY_OPS
>>> run = compile_schedule(schedule_labels(((0, 1), (1, 2)), (2, 0), ((2, 3), (3, 4)),
...                                        strategy='pairwise'), NUMPY_OPS)
>>> x, y = np.ones((2, 3)), np.ones((3, 4))
>>> run(x, y).tolist() == np.einsum('ij,jk->ki', x, y).tolist()
True
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..schedule import Finish, Preparation, Schedule, Step, View, path_einsums, scratch_sites, step_tokens

__all__ = ["ArrayOps", "compile_schedule"]

Fn = Callable[[Any], Any]


@dataclass(frozen=True)
class ArrayOps:
    """The array operations a compiled schedule calls; one instance per array library.

    Every operation must keep the dtype of its input (``sum`` included: integer sums stay
    integer, as in einsum) and return a new array or a view, never modify its input.
    """

    einsum: Callable[..., Any]            # einsum(subscripts, *arrays); letters a-zA-Z only
    matmul: Callable[[Any, Any], Any]     # batched, broadcasting over leading axes
    multiply: Callable[[Any, Any], Any]   # broadcasting elementwise product
    permute: Callable[[Any, tuple[int, ...]], Any]
    reshape: Callable[[Any, tuple[int, ...]], Any]
    diagonal: Callable[[Any, int, int], Any]   # diagonal of two axes, appended last
    sum: Callable[[Any, tuple[int, ...]], Any]
    contiguous: Fn                         # C-contiguous (no copy when it already is)
    swap_last: Fn                          # swap the last two axes (a view)
    copy: Fn                               # a fresh copy
    as_array: Fn                           # einsum's 0-d result as an array of the library
    common_dtype: Callable[[Sequence[Any]], Any]
    dtype: Fn
    astype: Callable[[Any, Any], Any]
    # blocked execution: a zero-filled or uninitialised result like an operand, and writes
    zeros: Callable[[tuple[int, ...], Any, Any], Any] | None = None   # (shape, dtype, like)
    empty: Callable[[tuple[int, ...], Any, Any], Any] | None = None
    set_block: Callable[[Any, tuple[slice, ...], Any], None] | None = None   # out[idx] = block
    add_block: Callable[[Any, tuple[slice, ...], Any], None] | None = None   # out[idx] += block
    # matmul whose result is C-ordered whatever its operands' layout (for intermediates,
    # which the schedule counts as C arrays); None: ``matmul``'s results always are
    matmul_c: Callable[[Any, Any], Any] | None = None
    # scratch (numpy): the gathers and matmul intermediates that `scratch_sites` picks (of at
    # least `scratch_min_elements` elements, within the schedule's peak) go into buffers the
    # library reuses from call to call, sparing the page faults a fresh large array pays
    # (dev/decisions.md, decision 40); None: fresh arrays.  Each is `contiguous` or `matmul_c`
    # with the same result, given the buffer's capacity in elements (a full block's size, of
    # which a shorter block uses a prefix); never used for the arrays a call returns.
    scratch_contiguous: Callable[[Any, int], Any] | None = None
    scratch_matmul: Callable[[Any, Any, int], Any] | None = None
    scratch_min_elements: int = 0


def _chain(fns: Sequence[Fn]) -> Fn | None:
    fns = list(fns)
    if not fns:
        return None
    if len(fns) == 1:
        return fns[0]

    def run(x: Any) -> Any:
        for fn in fns:
            x = fn(x)
        return x

    return run


NO_SCRATCH = (0, 0, 0)


def _view_fn(view: View, ops: ArrayOps, scratch: int = 0) -> Fn:
    # One closure per case, decided here, so a call pays one Python frame per operand view.
    perm, shape = view.permutation, view.shape
    permute, reshape, swap = ops.permute, ops.reshape, ops.swap_last
    contiguous = ops.contiguous
    if scratch and ops.scratch_contiguous is not None:
        contiguous = functools.partial(_into_scratch, ops.scratch_contiguous, scratch)
    if view.gather:
        if perm is None:
            return lambda x: reshape(contiguous(x), shape)
        return lambda x: reshape(contiguous(permute(x, perm)), shape)
    if view.contiguous_first:
        if perm is None and not view.swap_last:
            return lambda x: reshape(contiguous(x), shape)
        if perm is None:
            return lambda x: swap(reshape(contiguous(x), shape))
        if not view.swap_last:
            return lambda x: reshape(permute(contiguous(x), perm), shape)
        return lambda x: swap(reshape(permute(contiguous(x), perm), shape))
    if perm is None:
        return lambda x: reshape(x, shape)
    if view.swap_last:
        return lambda x: swap(reshape(permute(x, perm), shape))
    return lambda x: reshape(permute(x, perm), shape)


def _permute(permute: Callable[..., Any], perm: tuple[int, ...], x: Any) -> Any:
    return permute(x, perm)


def _reshape(reshape: Callable[..., Any], shape: tuple[int, ...], x: Any) -> Any:
    return reshape(x, shape)


def _diagonal(diagonal: Callable[..., Any], a: int, b: int, x: Any) -> Any:
    return diagonal(x, a, b)


def _sum(total: Callable[..., Any], axes: tuple[int, ...], x: Any) -> Any:
    return total(x, axes)


def _prep_fn(prep: Preparation, ops: ArrayOps) -> Fn | None:
    fns: list[Fn] = []
    if prep.transpose is not None:
        fns.append(functools.partial(_permute, ops.permute, prep.transpose))
    if prep.squeeze is not None:
        fns.append(functools.partial(_reshape, ops.reshape, prep.squeeze))
    for a, b in prep.diagonals:
        fns.append(functools.partial(_diagonal, ops.diagonal, a, b))
    if prep.sum_axes:
        fns.append(functools.partial(_sum, ops.sum, prep.sum_axes))
    return _chain(fns)


def _sites(schedule: Schedule, ops: ArrayOps) -> tuple[tuple[int, int, int], ...]:
    # The scratch buffers of every step, where the library keeps any (`scratch_sites`).
    if ops.scratch_contiguous is None:
        return (NO_SCRATCH,) * len(schedule.steps)
    return scratch_sites(schedule, ops.scratch_min_elements)


def _into_scratch(scratch: Callable[..., Any], capacity: int, *arrays: Any) -> Any:
    return scratch(*arrays, capacity)


def _step_fn(step: Step, ops: ArrayOps, intermediate: bool = False,
             scratch: tuple[int, int, int] = NO_SCRATCH) -> Callable[[Any, Any], Any]:
    """The kernel of one step; ``intermediate``: its result feeds another step; ``scratch``:
    the scratch buffers (elements; 0: fresh) of its left gather, right gather and result
    (`scratch_sites`)."""
    kernel: Callable[[Any, Any], Any]
    if step.kernel == "einsum" and step.x_view is not None and step.y_view is not None:
        vx, vy, einsum, subscripts = _view_fn(step.x_view, ops, scratch[0]), _view_fn(step.y_view, ops, scratch[1]), ops.einsum, step.einsum

        def kernel(x: Any, y: Any) -> Any:
            return einsum(subscripts, vx(x), vy(y))

    elif step.kernel == "einsum":
        kernel = functools.partial(ops.einsum, step.einsum)
    elif step.kernel == "multiply":
        assert step.x_view is not None and step.y_view is not None
        vx, vy, multiply = _view_fn(step.x_view, ops, scratch[0]), _view_fn(step.y_view, ops, scratch[1]), ops.multiply

        def kernel(x: Any, y: Any) -> Any:
            return multiply(vx(x), vy(y))

    else:
        assert step.x_view is not None and step.y_view is not None
        vx, vy, reshape = _view_fn(step.x_view, ops, scratch[0]), _view_fn(step.y_view, ops, scratch[1]), ops.reshape
        matmul = ops.matmul_c if intermediate and ops.matmul_c is not None else ops.matmul
        if intermediate and scratch[2] and ops.scratch_matmul is not None and not step.reduce:
            matmul = functools.partial(_into_scratch, ops.scratch_matmul, scratch[2])
        shape = step.result_shape
        if step.reduce:
            # promoted contracted labels: the product keeps them as batch axes, then sums them
            wide, axes, total = step.wide_shape, step.reduce_axes, ops.sum
            if step.swap:

                def kernel(x: Any, y: Any) -> Any:
                    return total(reshape(matmul(vy(y), vx(x)), wide), axes)

            else:

                def kernel(x: Any, y: Any) -> Any:
                    return total(reshape(matmul(vx(x), vy(y)), wide), axes)

        elif step.swap:

            def kernel(x: Any, y: Any) -> Any:
                return reshape(matmul(vy(y), vx(x)), shape)

        else:

            def kernel(x: Any, y: Any) -> Any:
                return reshape(matmul(vx(x), vy(y)), shape)

    if not step.sum_x and not step.sum_y:
        return kernel
    sum_x, sum_y, total = step.sum_x, step.sum_y, ops.sum

    def summed_first(x: Any, y: Any) -> Any:
        if sum_x:
            x = total(x, sum_x)
        if sum_y:
            y = total(y, sum_y)
        return kernel(x, y)

    return summed_first


def _finish_fn(finish: Finish, ops: ArrayOps, scalar: bool) -> Fn:
    fns: list[Fn] = []
    if finish.permutation is not None:
        fns.append(functools.partial(_permute, ops.permute, finish.permutation))
    if scalar:
        fns.append(ops.as_array)
    elif finish.reshape:
        fns.append(functools.partial(_reshape, ops.reshape, finish.shape))
    if finish.copy:
        # Only views ran (transposes, diagonals, reshapes): the result would alias an input.
        fns.append(ops.copy)
    return _chain(fns) or (lambda z: z)


def compile_schedule(schedule: Schedule, ops: ArrayOps, dtype: Any = None) -> Callable[..., Any]:
    """A callable running ``schedule`` on arrays of the library ``ops`` wraps.

    ``dtype``: the dtype to compute in (operands are converted, per block when blocked);
    None: the operands' common dtype.
    """
    if schedule.blocking is not None:
        return _compile_blocked(schedule, ops, dtype)
    assert schedule.finish is not None
    scalar = not schedule.output_shape
    if schedule.strategy == "direct":
        run: Callable[..., Any] = (_along_path(schedule, ops) if schedule.along_path
                                   else functools.partial(ops.einsum, schedule.einsum))
        if dtype is not None:
            einsum, astype, dtype_of = run, ops.astype, ops.dtype

            def converted(*arrays: Any) -> Any:
                return einsum(*(a if dtype_of(a) == dtype else astype(a, dtype) for a in arrays))

            run = converted

        if schedule.finish.copy or scalar:
            finish = _finish_fn(schedule.finish, ops, scalar)
            return lambda *arrays: finish(run(*arrays))
        return run

    preps = tuple(_prep_fn(p, ops) for p in schedule.preparations)
    last = len(schedule.steps) - 1
    sites = _sites(schedule, ops)
    steps = tuple((s.operands[0], s.operands[1], _step_fn(s, ops, k < last, sites[k]))
                  for k, s in enumerate(schedule.steps))
    finish = _finish_fn(schedule.finish, ops, scalar)
    common_dtype, dtype_of, astype = ops.common_dtype, ops.dtype, ops.astype
    fixed = dtype

    def execute(*arrays: Any) -> Any:
        dtype = common_dtype(arrays) if fixed is None else fixed
        work = []
        for array, prep in zip(arrays, preps):
            if dtype_of(array) != dtype:
                array = astype(array, dtype)
            if prep is not None:
                array = prep(array)
            work.append(array)
        for i, j, kernel in steps:
            y = work.pop(j)
            x = work.pop(i)
            work.append(kernel(x, y))
        return finish(work[0])

    return execute


def _along_path(schedule: Schedule, ops: ArrayOps) -> Callable[..., Any]:
    """One einsum call per pair of the schedule's path (`Schedule.along_path`).

    Operands of mixed dtypes are converted to their common dtype first, as every pairwise
    run is: a pair's einsum computes in the pair's own type, so two bool operands would sum
    as a logical or, and a float32 pair under a float64 result would round at float32.  One
    einsum call over all operands needs no such care (it casts to the common type itself)."""
    pairs = path_einsums(schedule)
    einsum, dtype_of, astype, common_dtype = ops.einsum, ops.dtype, ops.astype, ops.common_dtype

    def along_path(*arrays: Any) -> Any:
        first = dtype_of(arrays[0])
        for a in arrays:
            if dtype_of(a) != first:
                dtype = common_dtype(arrays)
                arrays = tuple(b if dtype_of(b) == dtype else astype(b, dtype) for b in arrays)
                break
        work = list(arrays)
        for i, j, subscripts in pairs:
            y = work.pop(j)
            x = work.pop(i)
            work.append(einsum(subscripts, x, y))
        return work[0]

    return along_path


def _compile_blocked(schedule: Schedule, ops: ArrayOps, fixed: Any = None) -> Callable[..., Any]:
    """Run the schedule block by block: the hoisted steps once, on the whole operands; then
    per block, slice the sliced operands (views, converted per block), run the steps inside
    the loop and write (or add) the block's result into the preallocated output."""
    blocking = schedule.blocking
    assert blocking is not None
    if ops.zeros is None or ops.empty is None or ops.set_block is None or ops.add_block is None:
        raise TypeError("this backend cannot run blocked schedules (memory_limit); pass "
                        "memory_limit=None")
    n = len(schedule.inputs)
    sliced = blocking.sliced or (True,) * n
    hoisted = set(blocking.hoisted)
    tokens = step_tokens(schedule)
    loop = [k for k in range(len(schedule.steps)) if k not in hoisted]
    # Prologue: the unsliced operands and the hoisted steps, exactly as in the schedule.  A
    # step inside the loop keeps one scratch buffer per site for every block (sized for a full
    # one), which `scratch_sites` counted in the blocked peak.
    unsliced = [(k, _prep_fn(schedule.preparations[k], ops)) for k in range(n) if not sliced[k]]
    sites = _sites(schedule, ops)
    prologue = [(tokens[k][0], tokens[k][1], ("s", k),
                 _step_fn(schedule.steps[k], ops, True, sites[k])) for k in sorted(hoisted)]
    needed = {t for k in loop for t in tokens[k]}
    last: tuple[str, int] = ("s", len(schedule.steps) - 1) if schedule.steps else ("o", 0)
    scalar = not schedule.output_shape
    # The result buffer holds the output's labels in `Blocking.storage` order, the order the
    # steps produce them: each block's finish only reshapes (or permutes a short last block)
    # into its slice, and the call returns the buffer permuted to output order, a view, as
    # an unblocked schedule does.
    bodies = {}
    for lengths, inner in blocking.inner:
        assert inner.finish is not None
        bodies[lengths] = (
            tuple((k, _prep_fn(inner.preparations[k], ops)) for k in range(n) if sliced[k]),
            tuple((tokens[k][0], tokens[k][1], ("s", k),
                   _step_fn(inner.steps[k], ops, k < len(inner.steps) - 1 or bool(sites[k][2]),
                            sites[k])) for k in loop),
            _finish_fn(replace(inner.finish, copy=False), ops, scalar))
    assert schedule.finish is not None
    to_output = _finish_fn(replace(schedule.finish, copy=False), ops, False)
    ranges = [[(start, min(start + chunk, extent)) for start in range(0, extent, chunk)]
              for chunk, extent in zip(blocking.chunks, (schedule.extents[lab] for lab in blocking.labels))]
    # Per cut label, the axes to slice in each operand and in the output (built per block:
    # a compiled program holds O(labels) slice data, not O(blocks)).
    operand_axes = [(k, len(schedule.shapes[k]), blocking.operand_axes[k]) for k in range(n) if sliced[k]]
    out_shape = tuple(schedule.extents[lab] for lab in blocking.storage)
    make = ops.zeros if blocking.accumulate else ops.empty
    write = ops.add_block if blocking.accumulate else ops.set_block
    common_dtype, dtype_of, astype = ops.common_dtype, ops.dtype, ops.astype

    def index(ndim: int, cuts: Sequence[slice], axes_per_label: tuple[tuple[int, ...], ...]
              ) -> tuple[slice, ...]:
        where = [slice(None)] * ndim
        for cut, axes in zip(cuts, axes_per_label):
            for axis in axes:
                where[axis] = cut
        return tuple(where)

    def execute(*arrays: Any) -> Any:
        dtype = common_dtype(arrays) if fixed is None else fixed
        env: dict[Any, Any] = {}
        for k, prep in unsliced:
            a = arrays[k]
            if dtype_of(a) != dtype:
                a = astype(a, dtype)
            env[("o", k)] = prep(a) if prep is not None else a
        for tx, ty, tr, kernel in prologue:
            env[tr] = kernel(env.pop(tx), env.pop(ty))
        env = {t: v for t, v in env.items() if t in needed}
        out = make(out_shape, dtype, arrays[0])
        for combo in itertools.product(*ranges):
            preps, steps, finish = bodies[tuple(stop - start for start, stop in combo)]
            cuts = [slice(start, stop) for start, stop in combo]
            local = dict(env)
            for (k, prep), (_, ndim, axes) in zip(preps, operand_axes):
                a = arrays[k][index(ndim, cuts, axes)]
                if dtype_of(a) != dtype:
                    a = astype(a, dtype)
                local[("o", k)] = prep(a) if prep is not None else a
            for tx, ty, tr, kernel in steps:
                local[tr] = kernel(local.pop(tx), local.pop(ty))
            write(out, index(len(out_shape), cuts, blocking.storage_axes), finish(local.pop(last)))
        return to_output(out)

    return execute
