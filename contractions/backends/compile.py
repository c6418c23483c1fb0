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
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..schedule import Finish, Preparation, Schedule, Step, View, path_einsums, scratch_sites, step_tokens
from ..schedule.extent_specs import ExtentSpecs, Spec, StepSpecs, resolve
from ..schedule.strides import product_shape

__all__ = ["ArrayOps", "compile_any_extents", "compile_schedule", "finisher"]

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
    # matmul_into(x, y, dest, shape): the product written into ``dest`` (a block's slice of the
    # result buffer) reshaped to ``shape``, a view (`Blocking.in_place`); None: each block's
    # product is copied into its slice
    matmul_into: Callable[..., Any] | None = None    # (x, y, dest, shape, workers=1)
    # matmul_split(x, y, workers, capacity): a product whose stack's leading axis is cut into
    # ``workers`` parts run at once (`Step.workers`), into a C array (or, given a capacity, a
    # scratch buffer as `scratch_matmul`'s); None: the library threads its products itself,
    # and ``workers`` is not read
    matmul_split: Callable[[Any, Any, int, int], Any] | None = None
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


NO_SCRATCH = (0, 0, 0)

Table = tuple[tuple[int, ...], ...]
Run = Callable[[Any, Table], Any]   # one operand (or result) and the program's shape table


class _Shapes:
    """The shapes a compiled program reads, one slot each, in the order its closures index
    them: every reshape reads its shape from the table the call passes (``t[slot]``).  A
    fixed-shape program's table holds the schedule's own shapes (`table`); a program compiled
    for every extent of its structure resolves each slot's spec (the labels whose extents
    multiply into each axis, `schedule.extent_specs`) at a shape's extents (`table_at`).  So
    one program runs both: a fixed shape is the program with its table bound."""

    __slots__ = ("shapes", "specs", "_resolvers")

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []
        self.specs: list[Spec | None] = []
        self._resolvers: tuple[Callable[[Any], tuple[int, ...]], ...] | None = None

    def slot(self, shape: tuple[int, ...], spec: Spec | None = None) -> int:
        self.shapes.append(tuple(shape))
        self.specs.append(spec)
        return len(self.shapes) - 1

    def table(self) -> Table:
        return tuple(self.shapes)

    def table_at(self, ext: Any) -> Table:
        # (a structure's loop meets a new shape on almost every call: each slot resolved by
        # the cheapest means its spec allows, found once)
        if self._resolvers is None:
            self._resolvers = tuple(_resolver(shape, spec) for shape, spec in zip(self.shapes, self.specs))
        return tuple([resolve_slot(ext) for resolve_slot in self._resolvers])


def _resolver(shape: tuple[int, ...], spec: Spec | None) -> Callable[[Any], tuple[int, ...]]:
    if spec is None:
        return lambda ext: shape
    if not spec:
        return lambda ext: ()
    if all(len(labels) == 1 for labels in spec):
        if len(spec) == 1:
            label = spec[0][0]
            return lambda ext: (ext[label],)
        return operator.itemgetter(*(labels[0] for labels in spec))
    return lambda ext: resolve(spec, ext)


def _view_fn(view: View, spec: Spec | None, ops: ArrayOps, shapes: _Shapes, scratch: int = 0) -> Run:
    # One closure per case, decided here, so a call pays one Python frame per operand view.
    perm, i = view.permutation, shapes.slot(view.shape, spec)
    permute, reshape, swap = ops.permute, ops.reshape, ops.swap_last
    contiguous = ops.contiguous
    if scratch and ops.scratch_contiguous is not None:
        contiguous = functools.partial(_into_scratch, ops.scratch_contiguous, scratch)
    if view.gather:
        if perm is None:
            return lambda x, t: reshape(contiguous(x), t[i])
        return lambda x, t: reshape(contiguous(permute(x, perm)), t[i])
    if view.contiguous_first:
        if perm is None and not view.swap_last:
            return lambda x, t: reshape(contiguous(x), t[i])
        if perm is None:
            return lambda x, t: swap(reshape(contiguous(x), t[i]))
        if not view.swap_last:
            return lambda x, t: reshape(permute(contiguous(x), perm), t[i])
        return lambda x, t: swap(reshape(permute(contiguous(x), perm), t[i]))
    if perm is None and view.swap_last:
        return lambda x, t: swap(reshape(x, t[i]))
    if perm is None:
        return lambda x, t: reshape(x, t[i])
    if view.swap_last:
        return lambda x, t: swap(reshape(permute(x, perm), t[i]))
    return lambda x, t: reshape(permute(x, perm), t[i])


def _prep_fn(prep: Preparation, spec: Spec | None, ops: ArrayOps, shapes: _Shapes) -> Run | None:
    if prep.is_identity:
        return None
    transpose, diagonals, sum_axes = prep.transpose, prep.diagonals, prep.sum_axes
    permute, reshape, diagonal, total = ops.permute, ops.reshape, ops.diagonal, ops.sum
    i = None if prep.squeeze is None else shapes.slot(prep.squeeze, spec)

    def prepare(x: Any, t: Table) -> Any:
        if transpose is not None:
            x = permute(x, transpose)
        if i is not None:
            x = reshape(x, t[i])
        for a, b in diagonals:
            x = diagonal(x, a, b)
        if sum_axes:
            x = total(x, sum_axes)
        return x

    return prepare


def _sites(schedule: Schedule, ops: ArrayOps) -> tuple[tuple[int, int, int], ...]:
    # The scratch buffers of every step, where the library keeps any (`scratch_sites`).
    if ops.scratch_contiguous is None:
        return (NO_SCRATCH,) * len(schedule.steps)
    return scratch_sites(schedule, ops.scratch_min_elements)


def _into_scratch(scratch: Callable[..., Any], capacity: int, *arrays: Any) -> Any:
    return scratch(*arrays, capacity)


def _step_fn(step: Step, specs: StepSpecs | None, ops: ArrayOps, shapes: _Shapes,
             intermediate: bool = False, scratch: tuple[int, int, int] = NO_SCRATCH
             ) -> Callable[[Any, Any, Table], Any]:
    """The kernel of one step; ``intermediate``: its result feeds another step; ``scratch``:
    the scratch buffers (elements; 0: fresh) of its left gather, right gather and result
    (`scratch_sites`); ``specs``: its shapes' specs (a program for every extent), else None."""
    kernel: Callable[[Any, Any, Table], Any]
    x_spec = y_spec = result_spec = wide_spec = None
    if specs is not None:
        x_spec, y_spec, result_spec, wide_spec = specs.x_view, specs.y_view, specs.result, specs.wide
    if step.kernel == "einsum" and step.x_view is not None and step.y_view is not None:
        vx, vy = _view_fn(step.x_view, x_spec, ops, shapes, scratch[0]), _view_fn(step.y_view, y_spec, ops, shapes, scratch[1])
        einsum, subscripts = ops.einsum, step.einsum

        def kernel(x: Any, y: Any, t: Table) -> Any:
            return einsum(subscripts, vx(x, t), vy(y, t))

    elif step.kernel == "einsum":
        einsum, subscripts = ops.einsum, step.einsum

        def kernel(x: Any, y: Any, t: Table) -> Any:
            return einsum(subscripts, x, y)

    elif step.kernel == "multiply":
        assert step.x_view is not None and step.y_view is not None
        vx, vy = _view_fn(step.x_view, x_spec, ops, shapes, scratch[0]), _view_fn(step.y_view, y_spec, ops, shapes, scratch[1])
        multiply = ops.multiply

        def kernel(x: Any, y: Any, t: Table) -> Any:
            return multiply(vx(x, t), vy(y, t))

    else:
        assert step.x_view is not None and step.y_view is not None
        vx, vy = _view_fn(step.x_view, x_spec, ops, shapes, scratch[0]), _view_fn(step.y_view, y_spec, ops, shapes, scratch[1])
        reshape = ops.reshape
        matmul = ops.matmul_c if intermediate and ops.matmul_c is not None else ops.matmul
        capacity = scratch[2] if intermediate and ops.scratch_matmul is not None and not step.reduce else 0
        if step.workers > 1 and ops.matmul_split is not None:
            # (into the scratch buffer where one was chosen, else a fresh C array)
            split, workers = ops.matmul_split, step.workers

            def matmul(x: Any, y: Any) -> Any:
                return split(x, y, workers, capacity)

        elif capacity and ops.scratch_matmul is not None:
            matmul = functools.partial(_into_scratch, ops.scratch_matmul, capacity)
        if step.reduce:
            # promoted contracted labels: the product keeps them as batch axes, then sums them
            w, axes, total = shapes.slot(step.wide_shape, wide_spec), step.reduce_axes, ops.sum
            if step.swap:

                def kernel(x: Any, y: Any, t: Table) -> Any:
                    return total(reshape(matmul(vy(y, t), vx(x, t)), t[w]), axes)

            else:

                def kernel(x: Any, y: Any, t: Table) -> Any:
                    return total(reshape(matmul(vx(x, t), vy(y, t)), t[w]), axes)

        else:
            r = shapes.slot(step.result_shape, result_spec)
            if step.swap:

                def kernel(x: Any, y: Any, t: Table) -> Any:
                    return reshape(matmul(vy(y, t), vx(x, t)), t[r])

            else:

                def kernel(x: Any, y: Any, t: Table) -> Any:
                    return reshape(matmul(vx(x, t), vy(y, t)), t[r])

    if not step.sum_x and not step.sum_y:
        return kernel
    sum_x, sum_y, total = step.sum_x, step.sum_y, ops.sum
    inner = kernel

    def summed_first(x: Any, y: Any, t: Table) -> Any:
        if sum_x:
            x = total(x, sum_x)
        if sum_y:
            y = total(y, sum_y)
        return inner(x, y, t)

    return summed_first


def _finish_fn(finish: Finish, spec: Spec | None, ops: ArrayOps, shapes: _Shapes, scalar: bool) -> Run:
    permutation, permute, reshape, copy = finish.permutation, ops.permute, ops.reshape, ops.copy
    as_array = ops.as_array
    i = shapes.slot(finish.shape, spec) if finish.reshape and not scalar else None
    copied = finish.copy   # (only views ran: the result would alias an input)
    if permutation is None and not scalar and not copied:   # (the common cases, one frame)
        if i is None:
            return lambda z, t: z
        return lambda z, t: reshape(z, t[i])

    def done(z: Any, t: Table) -> Any:
        if permutation is not None:
            z = permute(z, permutation)
        if scalar:
            z = as_array(z)
        elif i is not None:
            z = reshape(z, t[i])
        return copy(z) if copied else z

    return done


def finisher(finish: Finish, ops: ArrayOps, scalar: bool = False) -> Fn:
    """``finish`` as a function of the result alone (its shapes bound)."""
    shapes = _Shapes()
    done, table = _finish_fn(finish, None, ops, shapes, scalar), shapes.table()
    return lambda z: done(z, table)


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
            finish = finisher(schedule.finish, ops, scalar)
            return lambda *arrays: finish(run(*arrays))
        return run
    bind, shapes = _program(schedule, None, ops, dtype, _sites(schedule, ops))
    return bind(shapes.table())


def compile_any_extents(schedule: Schedule, specs: ExtentSpecs, ops: ArrayOps,
                        dtype: Any = None) -> Callable[[Any], Callable[..., Any]]:
    """``for_shape(ext)``: ``schedule`` (unblocked, pairwise) run at any extents ``ext`` of its
    structure (``ext[label]``: each label's extent; the caller checked them against the
    arrays), one program compiled once: each shape's runner is it with its shape table
    resolved at ``ext`` (`_Shapes.table_at`).  ``dtype``: as for `compile_schedule`.

    >>> import numpy as np
    >>> from contractions.schedule import schedule_labels
    >>> from contractions.schedule.extent_specs import extent_specs
    >>> from contractions.backends.numpy_backend import NUMPY_OPS
    >>> s = schedule_labels(((0, 1), (1, 2)), (0, 2), ((20, 30), (30, 40)), strategy='pairwise')
    >>> for_shape = compile_any_extents(s, extent_specs(s), NUMPY_OPS)
    >>> x, y = np.ones((5, 6)), np.ones((6, 7))
    >>> np.array_equal(for_shape((5, 6, 7))(x, y), x @ y)
    True
    """
    assert schedule.finish is not None and schedule.blocking is None
    # (no scratch buffers: their sizes are a shape's, and a structure runs many)
    bind, shapes = _program(schedule, specs, ops, dtype, (NO_SCRATCH,) * len(schedule.steps))
    return lambda ext: bind(shapes.table_at(ext))


def _program(schedule: Schedule, specs: ExtentSpecs | None, ops: ArrayOps, dtype: Any,
             sites: tuple[tuple[int, int, int], ...]
             ) -> tuple[Callable[[Table], Callable[..., Any]], _Shapes]:
    """The one executor of an unblocked pairwise schedule: ``bind(table)`` gives the callable
    that runs it with that shape table; and the shapes the table holds (``specs``: their specs,
    for a program of every extent)."""
    assert schedule.finish is not None
    shapes = _Shapes()
    preps = tuple(_prep_fn(p, specs.squeezes[k] if specs is not None else None, ops, shapes)
                  for k, p in enumerate(schedule.preparations))
    last = len(schedule.steps) - 1
    steps = tuple((s.operands[0], s.operands[1],
                   _step_fn(s, specs.steps[k] if specs is not None else None, ops, shapes, k < last, sites[k]))
                  for k, s in enumerate(schedule.steps))
    finish = _finish_fn(schedule.finish, specs.output if specs is not None else None, ops, shapes,
                        not schedule.output_shape)
    common_dtype, dtype_of, astype = ops.common_dtype, ops.dtype, ops.astype
    fixed = dtype

    def bind(t: Table) -> Callable[..., Any]:
        # (the table a closure cell, not an argument: a bound call pays no extra layer)
        def execute(*arrays: Any) -> Any:
            dtype = common_dtype(arrays) if fixed is None else fixed
            work = []
            for array, prep in zip(arrays, preps):
                if dtype_of(array) != dtype:
                    array = astype(array, dtype)
                if prep is not None:
                    array = prep(array, t)
                work.append(array)
            for i, j, kernel in steps:
                y = work.pop(j)
                x = work.pop(i)
                work.append(kernel(x, y, t))
            return finish(work[0], t)

        return execute

    return bind, shapes


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
    shapes = _Shapes()   # (every shape of the prologue and of each kind of block: one table)
    unsliced = [(k, _prep_fn(schedule.preparations[k], None, ops, shapes)) for k in range(n) if not sliced[k]]
    sites = _sites(schedule, ops)
    prologue = [(tokens[k][0], tokens[k][1], ("s", k),
                 _step_fn(schedule.steps[k], None, ops, shapes, True, sites[k])) for k in sorted(hoisted)]
    needed = {t for k in loop for t in tokens[k]}
    last: tuple[str, int] = ("s", len(schedule.steps) - 1) if schedule.steps else ("o", 0)
    scalar = not schedule.output_shape
    # The result buffer holds the output's labels in `Blocking.storage` order, the order the
    # steps produce them: each block's finish only reshapes (or permutes a short last block)
    # into its slice, and the call returns the buffer permuted to output order, a view, as
    # an unblocked schedule does.
    # Where every block's last product writes straight into its slice (`Blocking.in_place`),
    # that step is run apart: its product goes into the slice, reshaped (a view, as the
    # schedule checked), and nothing is copied.
    into = ops.matmul_into if blocking.in_place else None
    bodies = {}
    for lengths, inner in blocking.inner:
        assert inner.finish is not None
        inside = [k for k in loop if into is None or k != len(inner.steps) - 1]
        bodies[lengths] = (
            tuple((k, _prep_fn(inner.preparations[k], None, ops, shapes)) for k in range(n) if sliced[k]),
            tuple((tokens[k][0], tokens[k][1], ("s", k),
                   _step_fn(inner.steps[k], None, ops, shapes,
                            k < len(inner.steps) - 1 or bool(sites[k][2]), sites[k])) for k in inside),
            _finish_fn(replace(inner.finish, copy=False), None, ops, shapes, scalar),
            None if into is None else _into_fn(inner.steps[-1], tokens[-1], ops, shapes))
    assert schedule.finish is not None
    to_output = _finish_fn(replace(schedule.finish, copy=False), None, ops, shapes, False)
    t = shapes.table()
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
            env[("o", k)] = prep(a, t) if prep is not None else a
        for tx, ty, tr, kernel in prologue:
            env[tr] = kernel(env.pop(tx), env.pop(ty), t)
        env = {t: v for t, v in env.items() if t in needed}
        out = make(out_shape, dtype, arrays[0])
        for combo in itertools.product(*ranges):
            preps, steps, finish, last_into = bodies[tuple(stop - start for start, stop in combo)]
            cuts = [slice(start, stop) for start, stop in combo]
            local = dict(env)
            for (k, prep), (_, ndim, axes) in zip(preps, operand_axes):
                a = arrays[k][index(ndim, cuts, axes)]
                if dtype_of(a) != dtype:
                    a = astype(a, dtype)
                local[("o", k)] = prep(a, t) if prep is not None else a
            for tx, ty, tr, kernel in steps:
                local[tr] = kernel(local.pop(tx), local.pop(ty), t)
            where = index(len(out_shape), cuts, blocking.storage_axes)
            if last_into is not None:
                last_into(local, t, out[where])
            else:
                write(out, where, finish(local.pop(last), t))
        return to_output(out, t)

    return execute


def _into_fn(step: Step, tokens: tuple[Any, Any], ops: ArrayOps, shapes: _Shapes
             ) -> Callable[[dict[Any, Any], Table, Any], None]:
    """The last product of a block written into ``dest``, its slice of the result buffer,
    reshaped to the product's shape (`Blocking.in_place`)."""
    assert ops.matmul_into is not None and step.x_view is not None and step.y_view is not None
    raw = product_shape(step)
    assert raw is not None
    vx, vy = _view_fn(step.x_view, None, ops, shapes), _view_fn(step.y_view, None, ops, shapes)
    i, (tx, ty), into = shapes.slot(raw), tokens, ops.matmul_into
    if step.workers > 1 and ops.matmul_split is not None:
        into = functools.partial(into, workers=step.workers)

    def run(local: dict[Any, Any], t: Table, dest: Any) -> None:
        x, y = vx(local.pop(tx), t), vy(local.pop(ty), t)
        if step.swap:
            into(y, x, dest, t[i])
        else:
            into(x, y, dest, t[i])

    return run
