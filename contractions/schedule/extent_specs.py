"""A schedule's shapes as functions of its extents, so one structure runs at any extents.

A `Schedule` is planned for one shape signature: its views, step results and finish hold
concrete shapes.  The decisions behind them (path, kernels, result orders, matmul layouts) are
the structure's: the 'reuse' tier (`calls.tiers`) keeps them for other extents of the same
structure (the same labels, the same axes of extent 1, the same layouts).  `extent_specs`
writes every shape of an unblocked schedule as a `Spec`: per axis, the labels whose extents
multiply into it, so a runner compiled once per structure (`backends.compile.compile_any_extents`) computes its
shapes from the call's extents instead of being re-planned and re-compiled for every shape.

Its prices and its peak at other extents come from the same specs (`price_at`, `peak_at`),
scaled as the reuse tier scales them (by FLOPs), so a call at new extents is priced without a
`Schedule` being built.

>>> from contractions.schedule import schedule_labels
>>> s = schedule_labels(((0, 1), (1, 2)), (0, 2), ((20, 30), (30, 40)), strategy='pairwise')
>>> specs = extent_specs(s)
>>> resolve(specs.output, (5, 6, 7)), resolve(specs.steps[0].result, (5, 6, 7))
((5, 7), (5, 7))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .ir import Labels, Schedule, Shape, View
from .lowering import _contiguous, _in_order_view, _matmul_views
from .memory import _simulate

__all__ = ["ExtentSpecs", "PriceAt", "Spec", "StepSpecs", "extent_specs", "peak_at", "price_at", "resolve"]

#: One array shape: per axis, the labels whose extents multiply into it (``()``: an axis of 1).
Spec = tuple[Labels, ...]


@dataclass(frozen=True)
class StepSpecs:
    """The shapes of one `Step` (``None`` where the step has no such view), and what scales
    its price: its FLOPs are ``flops_per_size`` times the product of ``sized``'s extents."""

    x_view: Spec | None
    y_view: Spec | None
    result: Spec
    wide: Spec
    sized: Labels
    flops_per_size: float
    cost_per_flop: float


@dataclass(frozen=True)
class ExtentSpecs:
    """Every shape of an unblocked schedule as a `Spec`; ``squeezes[k]`` is operand ``k``'s
    preparation reshape (None: none), ``output`` the call's result."""

    squeezes: tuple[Spec | None, ...]
    steps: tuple[StepSpecs, ...]
    output: Spec
    summed_inputs: tuple[Labels, ...]   # inputs their preparation sums: counted as FLOPs
    overhead_ns: float                  # the schedule's price that no extent scales


class _Product:
    """A symbolic extent: the product of some labels' extents (multiplied, never compared)."""

    __slots__ = ("labels",)

    def __init__(self, labels: Labels) -> None:
        self.labels = labels

    def __mul__(self, other: Any) -> _Product:
        if isinstance(other, _Product):
            return _Product(self.labels + other.labels)
        if other == 1:
            return self
        raise TypeError("a symbolic extent multiplies only by another or by 1")

    __rmul__ = __mul__


class _Symbolic(dict):  # type: ignore[type-arg]
    """Extents whose values are the labels themselves (`_Product`), for the lowering's view
    builders: what they multiply is what a `Spec` records."""

    def __missing__(self, label: int) -> _Product:
        return _Product((label,))


def _spec(shape: tuple[Any, ...]) -> Spec:
    out = []
    for n in shape:
        if isinstance(n, _Product):
            out.append(n.labels)
        elif n == 1:
            out.append(())
        else:
            raise TypeError(f"a concrete extent {n!r} in a symbolic shape")
    return tuple(out)


def _view_spec(view: View | None) -> Spec | None:
    return None if view is None else _spec(view.shape)


def resolve(spec: Spec, ext: Any) -> Shape:
    """The shape ``spec`` stands for at the extents ``ext`` (indexed by label)."""
    return tuple(math.prod(ext[lab] for lab in labels) for labels in spec)


def extent_specs(schedule: Schedule) -> ExtentSpecs | None:
    """The shapes of ``schedule`` (unblocked, pairwise) as specs, or None where they cannot be
    written so (then the structure is re-planned per shape, as before).  Checked: every spec
    resolved at the schedule's own extents gives the schedule's own shape."""
    if schedule.strategy != "pairwise" or schedule.blocking is not None or schedule.finish is None:
        return None
    sym = _Symbolic()
    squeezes: list[Spec | None] = []
    for prep, labels, shape in zip(schedule.preparations, schedule.inputs, schedule.shapes):
        if prep.squeeze is None:
            squeezes.append(None)
            continue
        kept = tuple((lab,) for lab, n in zip(labels, shape) if n != 1)
        squeezes.append(kept[::-1] if prep.transpose else kept)
    steps = []
    for step in schedule.steps:
        lx = tuple(lab for a, lab in enumerate(step.x_labels) if a not in step.sum_x)
        ly = tuple(lab for a, lab in enumerate(step.y_labels) if a not in step.sum_y)
        wide: Spec = ()
        vx: View | None
        vy: View | None
        try:
            if step.kernel == "matmul":
                if step.layout is None:
                    return None
                vx, vy, wide_labels = _matmul_views(lx, ly, step.layout, sym)
                wide = tuple((lab,) for lab in wide_labels) if step.reduce else ()
            elif step.kernel == "multiply":
                vx, vy = _in_order_view(lx, step.result, sym), _in_order_view(ly, step.result, sym)
            elif step.x_view is not None:
                vx, vy = _contiguous(lx, sym), _contiguous(ly, sym)
            else:
                vx = vy = None
            x_spec, y_spec = _view_spec(vx), _view_spec(vy)
        except TypeError:
            return None   # a view builder compared an extent: not a pure product of labels
        sized = tuple(dict.fromkeys(lx + ly))
        size = math.prod(schedule.extents[lab] for lab in sized)
        steps.append(StepSpecs(x_view=x_spec, y_view=y_spec,
                               result=tuple((lab,) for lab in step.result), wide=wide,
                               sized=sized, flops_per_size=step.flops / size if size else 0.0,
                               cost_per_flop=step.cost_ns / step.flops if step.flops else 0.0))
    specs = ExtentSpecs(
        squeezes=tuple(squeezes), steps=tuple(steps),
        output=tuple((lab,) for lab in schedule.output),
        summed_inputs=tuple(labels for prep, labels in zip(schedule.preparations, schedule.inputs)
                            if prep.sum_axes),
        overhead_ns=schedule.cost_ns - sum(step.cost_ns for step in schedule.steps))
    return specs if _reproduces(specs, schedule) else None


def _reproduces(specs: ExtentSpecs, schedule: Schedule) -> bool:
    """Do the specs give back the schedule's own shapes at its own extents?"""
    ext = schedule.extents
    for spec, prep in zip(specs.squeezes, schedule.preparations):
        if (spec is None) != (prep.squeeze is None) or (spec is not None and resolve(spec, ext) != prep.squeeze):
            return False
    for spec_step, step in zip(specs.steps, schedule.steps):
        for spec, view in ((spec_step.x_view, step.x_view), (spec_step.y_view, step.y_view)):
            if (spec is None) != (view is None) or (
                    spec is not None and view is not None and resolve(spec, ext) != view.shape):
                return False
        if resolve(spec_step.result, ext) != step.result_shape:
            return False
        if step.reduce and resolve(spec_step.wide, ext) != step.wide_shape:
            return False
    return resolve(specs.output, ext) == schedule.output_shape


@dataclass(frozen=True)
class PriceAt:
    """A schedule priced at other extents (`price_at`): modelled ns, FLOPs, and a bound on
    its steps' buffers (at most ``7 * steps_size`` elements alive beyond the operands)."""

    cost_ns: float
    flops: int
    steps_size: int


def price_at(specs: ExtentSpecs, ext: Any) -> PriceAt:
    """The schedule at the extents ``ext``: every step's price scaled by its FLOPs, as the
    reuse tier scales them (`lowering.reextent`), and the elements its steps span.

    Each step holds at most seven buffers of its labels' span (its two inputs summed and
    gathered, its result, the product before promoted labels are summed, a finishing copy),
    so ``7 * steps_size`` plus twice the operands bounds the peak `peak_at` counts exactly.
    """
    cost, flops, spanned = specs.overhead_ns, 0.0, 0
    prod = math.prod
    for step in specs.steps:
        size = prod([ext[lab] for lab in step.sized])
        spanned += size
        step_flops = step.flops_per_size * size
        flops += step_flops
        cost += step.cost_per_flop * step_flops
    flops += sum(prod([ext[lab] for lab in labels]) for labels in specs.summed_inputs)
    return PriceAt(cost, int(flops), spanned)


def peak_at(schedule: Schedule, ext: Any) -> int:
    """The schedule's peak extra elements (`memory._simulate`) at the extents ``ext``."""
    n = len(schedule.inputs)
    extents = dict(enumerate(ext)) if not isinstance(ext, dict) else ext
    return _simulate(schedule, extents, range(n), range(len(schedule.steps)), {}, (False,) * n,
                     final_is_extra=False)
