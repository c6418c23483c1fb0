"""Compile a schedule once for every extent of its structure: the shapes are read at call time.

`compile.compile_schedule` bakes a schedule's shapes into its closures, so each new shape of a
string needs its own schedule and its own compiled program.  Here the shapes come from the
schedule's `ExtentSpecs` (`schedule.extent_specs`) and the extents the call passes, so the
program compiled for one shape of a structure runs every other shape of it (the structure's
decisions kept: the 'reuse' tier of `calls.tiers`, without a schedule built per shape).
The arithmetic is the same operations on the same views as the compiled schedule's.

>>> import numpy as np
>>> from contractions.schedule import schedule_labels
>>> from contractions.schedule.extent_specs import extent_specs
>>> from contractions.backends.numpy_backend import NUMPY_OPS
>>> s = schedule_labels(((0, 1), (1, 2)), (0, 2), ((20, 30), (30, 40)), strategy='pairwise')
>>> run = compile_any_extents(s, extent_specs(s), NUMPY_OPS)
>>> x, y = np.ones((5, 6)), np.ones((6, 7))
>>> np.array_equal(run((5, 6, 7), x, y), x @ y)
True
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from typing import Any

from ..schedule import Schedule, Step
from ..schedule.extent_specs import ExtentSpecs, Spec
from .compile import ArrayOps

__all__ = ["compile_any_extents"]

Resolver = Callable[[Any], tuple[int, ...]]


def _resolver(spec: Spec) -> Resolver:
    """``spec``'s shape at the call's extents, by the cheapest means it allows."""
    if not spec:
        return lambda ext: ()
    if all(len(labels) == 1 for labels in spec):
        if len(spec) == 1:
            label = spec[0][0]
            return lambda ext: (ext[label],)
        return operator.itemgetter(*(labels[0] for labels in spec))
    prod = math.prod
    return lambda ext: tuple([prod([ext[lab] for lab in labels]) for labels in spec])


def _view(spec: Spec, perm: tuple[int, ...] | None, gather: bool, contiguous_first: bool,
          swap_last: bool, ops: ArrayOps) -> Callable[[Any, Any], Any]:
    # The order of `View`'s operations (compile._view_fn), the reshape's shape resolved per call.
    shape, permute, reshape, contiguous, swap = (_resolver(spec), ops.permute, ops.reshape,
                                                 ops.contiguous, ops.swap_last)

    if gather:   # (a gather is C-ordered by its copy: nothing before it, no swap after)
        def gathered(x: Any, ext: Any) -> Any:
            if perm is not None:
                x = permute(x, perm)
            return reshape(contiguous(x), shape(ext))

        return gathered

    def view(x: Any, ext: Any) -> Any:
        if contiguous_first:
            x = contiguous(x)
        if perm is not None:
            x = permute(x, perm)
        x = reshape(x, shape(ext))
        return swap(x) if swap_last else x

    return view


def _step(step: Step, spec_x: Spec | None, spec_y: Spec | None, result: Spec, wide: Spec,
          ops: ArrayOps, intermediate: bool) -> Callable[[Any, Any, Any], Any]:
    vx = vy = None
    if spec_x is not None and step.x_view is not None:
        v = step.x_view
        vx = _view(spec_x, v.permutation, v.gather, v.contiguous_first, v.swap_last, ops)
    if spec_y is not None and step.y_view is not None:
        v = step.y_view
        vy = _view(spec_y, v.permutation, v.gather, v.contiguous_first, v.swap_last, ops)
    sum_x, sum_y, total, reshape = step.sum_x, step.sum_y, ops.sum, ops.reshape
    kernel_name, einsum, multiply = step.kernel, ops.einsum, ops.multiply
    matmul = ops.matmul_c if intermediate and ops.matmul_c is not None else ops.matmul
    subscripts, swap, reduce_axes = step.einsum, step.swap, step.reduce_axes
    result_shape, wide_shape = _resolver(result), _resolver(wide)

    def run(x: Any, y: Any, ext: Any) -> Any:
        if sum_x:
            x = total(x, sum_x)
        if sum_y:
            y = total(y, sum_y)
        if vx is not None and vy is not None:
            x, y = vx(x, ext), vy(y, ext)
        if kernel_name == "einsum":
            return einsum(subscripts, x, y)
        if kernel_name == "multiply":
            return multiply(x, y)
        product = matmul(y, x) if swap else matmul(x, y)
        if reduce_axes:
            return total(reshape(product, wide_shape(ext)), reduce_axes)
        return reshape(product, result_shape(ext))

    return run


def compile_any_extents(schedule: Schedule, specs: ExtentSpecs, ops: ArrayOps,
                        dtype: Any = None) -> Callable[..., Any]:
    """``run(ext, *arrays)``: ``schedule`` (unblocked, pairwise) on arrays of any extents of
    its structure; ``ext[label]`` is each label's extent (the caller checked them against the
    arrays).  ``dtype``: the dtype to compute in (None: the operands' common dtype)."""
    assert schedule.finish is not None and schedule.blocking is None
    preps = []
    for prep, squeeze in zip(schedule.preparations, specs.squeezes):
        preps.append(None if prep.is_identity else (
            prep.transpose, None if squeeze is None else _resolver(squeeze), prep.diagonals,
            prep.sum_axes))
    last = len(schedule.steps) - 1
    steps = tuple((s.operands[0], s.operands[1],
                   _step(s, sp.x_view, sp.y_view, sp.result, sp.wide, ops, k < last))
                  for k, (s, sp) in enumerate(zip(schedule.steps, specs.steps)))
    finish = schedule.finish
    out_shape = _resolver(specs.output)
    scalar = not schedule.output_shape
    permute, reshape, diagonal, total = ops.permute, ops.reshape, ops.diagonal, ops.sum
    common_dtype, dtype_of, astype, copy, as_array = (ops.common_dtype, ops.dtype, ops.astype,
                                                      ops.copy, ops.as_array)
    fixed = dtype

    def execute(ext: Any, *arrays: Any) -> Any:
        dtype = common_dtype(arrays) if fixed is None else fixed
        work = []
        for array, prep in zip(arrays, preps):
            if dtype_of(array) != dtype:
                array = astype(array, dtype)
            if prep is not None:
                transpose, squeeze, diagonals, sum_axes = prep
                if transpose is not None:
                    array = permute(array, transpose)
                if squeeze is not None:
                    array = reshape(array, squeeze(ext))
                for a, b in diagonals:
                    array = diagonal(array, a, b)
                if sum_axes:
                    array = total(array, sum_axes)
            work.append(array)
        for i, j, kernel in steps:
            y = work.pop(j)
            x = work.pop(i)
            work.append(kernel(x, y, ext))
        z = work[0]
        if finish.permutation is not None:
            z = permute(z, finish.permutation)
        if scalar:
            z = as_array(z)
        elif finish.reshape:
            z = reshape(z, out_shape(ext))
        return copy(z) if finish.copy else z

    return execute


def bind(run: Callable[..., Any], ext: Any) -> Callable[..., Any]:
    """``run`` (from `compile_any_extents`) for one shape: its extents bound."""
    return functools.partial(run, ext)
