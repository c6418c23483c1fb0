"""Describing a schedule for people: the records and lines ``explain`` reports.

`explained_steps` turns a schedule's steps into `ExplainedStep` records, `describe_schedule`
renders a schedule as lines, and `Explanation` holds a whole ``explain`` report as data, whose
``str()`` is the report's text.

>>> from contractions import make_plan, make_schedule
>>> plan = make_plan('Wij,Wjk->Wik', ((8, 20, 30), (8, 30, 40)), ())
>>> (step,) = explained_steps(make_schedule(plan, 'greedy'), plan.expansion.readable_symbol)
>>> step.kernel, step.result_shape, step.flops
('matmul', (8, 20, 40), 384000)
>>> print(step)  # doctest: +ELLIPSIS
step 1: (0, 1) matmul [view @ view] Aij,Ajk->Aik batch A contract j...; result (8, 20, 40); ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .ir import Blocking, Schedule, Shape


@dataclass(frozen=True)
class ExplainedStep:
    """One pairwise step as ``explain`` reports it; ``str()`` is its line.

    Labels are spelled with the expansion's symbols.  ``einsum`` is the local letter string of
    an ``'einsum'`` step, ``layout`` how a ``'matmul'`` step presents its two factors
    (``'view'``, ``'T-view'``: transposed, no copy, or ``'copy'``).  ``cost_ns`` is the modelled
    time; ``hoisted``: the step runs once, before the blocks (it carries no cut label);
    ``reduce``: contracted labels the product runs as batch labels and sums after;
    ``workers``: the parts its stack of products is cut into, run at once (`Step.workers`).
    """

    number: int
    operands: tuple[int, int]
    kernel: str
    x_labels: str
    y_labels: str
    result: str
    batch: str
    contract: str
    result_shape: Shape
    flops: int
    cost_ns: float
    einsum: str | None = None
    layout: tuple[str, str] | None = None
    hoisted: bool = False
    reduce: str = ""
    workers: int = 1

    def __str__(self) -> str:
        detail = f" {self.einsum!r}" if self.kernel == "einsum" else ""
        if self.layout is not None:
            detail = f" [{self.layout[0]} @ {self.layout[1]}]"
        notes = (f" (as batch, then summed: {self.reduce})" if self.reduce else "") + (
            f" (stack in {self.workers} parts at once)" if self.workers > 1 else "")
        return (f"step {self.number}: {self.operands} {self.kernel}{detail} {self.x_labels},{self.y_labels}"
                f"->{self.result} batch {self.batch} contract {self.contract}{notes}; "
                f"result {self.result_shape}; {self.flops:,} FLOPs; model {self.cost_ns / 1e3:.3g} us")


def explained_steps(schedule: Schedule, name: Callable[[int], str] = str) -> tuple[ExplainedStep, ...]:
    """The records of ``schedule``'s pairwise steps (none for a direct schedule); ``name``
    spells a label."""
    def labels(ls: Sequence[int]) -> str:
        return "".join(name(lab) for lab in ls) or "-"

    def form(f: Any) -> str:
        return "copy" if f.copy else ("T-view" if f.transposed else "view")

    hoisted = set(schedule.blocking.hoisted) if schedule.blocking is not None else set()
    records = []
    for n, step in enumerate(schedule.steps, 1):
        kernel = {"matmul": "matmul", "multiply": "multiply", "einsum": "einsum"}[step.kernel]
        lay = step.layout if kernel == "matmul" else None
        records.append(ExplainedStep(
            number=n, operands=step.operands, kernel=kernel, x_labels=labels(step.x_labels),
            y_labels=labels(step.y_labels), result=labels(step.result), batch=labels(step.batch),
            contract=labels(step.contract), result_shape=step.result_shape, flops=step.flops,
            cost_ns=step.cost_ns, einsum=step.einsum if kernel == "einsum" else None,
            layout=None if lay is None else (form(lay.left), form(lay.right)),
            hoisted=n - 1 in hoisted, reduce="".join(name(lab) for lab in step.reduce),
            workers=step.workers))
    return tuple(records)


def describe_schedule(schedule: Schedule, name: Callable[[int], str] = str) -> list[str]:
    """Lines describing a schedule: the strategy, preparation, each step, the finish.

    ``name`` spells a label (``explain`` passes the expansion's symbols).  These are the lines
    ``explain`` prints; tests compare them with the steps that actually run.  The last names
    the profile that priced the schedule (`Schedule.priced_by`), when it says.
    """
    lines = _schedule_lines(schedule, name)
    if schedule.priced_by:
        lines.append(f"priced by: {schedule.priced_by}")
    return lines


def _schedule_lines(schedule: Schedule, name: Callable[[int], str]) -> list[str]:
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
        how = ("adding block results" if blocking.accumulate
               else "each product written straight into its slice" if blocking.in_place
               else "each written into its slice")
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
    step_lines = [(step.hoisted, str(step)) for step in explained_steps(schedule, name)]
    if hoisted:
        lines.append("once, before the blocks (these steps carry no cut label):")
        lines += ["  " + text for once, text in step_lines if once]
    if loop_header is not None:
        lines.append(loop_header)
    lines += prep_lines
    lines += [text for once, text in step_lines if not once]
    fin = schedule.finish
    if blocking is not None and fin is not None and fin.permutation is not None:
        lines.append(f"finish: blocks written in {labels(blocking.storage)} order; returned "
                     f"transposed {fin.permutation} to output order (a view)")
    elif fin is not None and fin.permutation is not None:
        lines.append(f"finish: transpose {fin.permutation} to output order")
    return lines


@dataclass(frozen=True)
class ExplainedGroup:
    """One group as ``explain`` reports it: its number of axes, the symbols they expand to
    (``'-'`` for none) and, given shapes, their extents."""

    name: str
    length: int
    symbols: str
    extents: tuple[int, ...] | None = None

    def __str__(self) -> str:
        ext = f" extents {self.extents}" if self.extents is not None else ""
        return f"{self.name}: {self.length} ax{'is' if self.length == 1 else 'es'} -> {self.symbols}{ext}"


@dataclass(frozen=True)
class Explanation:
    """What ``explain`` reports, as data; ``str()`` is the report ``explain`` returns.

    Always set: the ``subscripts``; ``identifiability``, what the string alone decides, and
    ``identifiability_with`` what it decides with the call's ``supplements`` (None without
    any); the ``co_travelling`` runs; the ``groups``; the ``expanded`` einsum.  With bare ndims
    the report stops there and ``output_shape`` is None.  Given shapes: the ``backend``, the
    ``path`` in ``optimize=`` form (``path_taken`` False when one einsum call runs instead) and
    the ``optimizer`` that chose it (None: the framework chooses its own path, JAX's default),
    the backend's own ``schedule_lines``, ``flops`` and ``naive_flops``.  When the backend runs
    the schedule's steps itself (numpy, torch): the ``strategy`` (``'direct'`` or
    ``'pairwise'``), the pairwise ``steps`` (`ExplainedStep`), any ``blocking``, ``peak_extra``
    (elements alive at once beyond operands and result) against ``memory_limit`` (None: no
    limit) and, pairwise, ``cost_ns`` (the time model's total: ``time_model`` names it, numpy's
    or the GPU's); else these are None.
    ``first_call`` says how `contract` plans a first call of these shapes with the default
    ``optimize='auto'`` (`calls.tiers`): its ``tier`` (``'full'``: the schedule above), and
    for a cheaper tier its own path, modelled time and the call of this shape on which the full
    search (the schedule above) takes over; None where no tiers apply (an explicit
    ``optimize=``, a framework's own path, one einsum call: nothing to search).
    """

    subscripts: str
    identifiability: str
    co_travelling: tuple[str, ...]
    groups: tuple[ExplainedGroup, ...]
    expanded: str
    supplements: tuple[tuple[str, int], ...] = ()
    identifiability_with: str | None = None
    output_shape: Shape | None = None
    backend: str | None = None
    optimizer: str | None = None
    path: tuple[tuple[int, ...], ...] = ()
    path_taken: bool = True
    schedule_lines: tuple[str, ...] = ()
    flops: int | None = None
    naive_flops: int | None = None
    strategy: str | None = None
    steps: tuple[ExplainedStep, ...] = ()
    blocking: Blocking | None = None
    peak_extra: int | None = None
    memory_limit: int | None = None
    cost_ns: float | None = None
    first_call: FirstCall | None = None
    time_model: str = "numpy"

    @property
    def group_lengths(self) -> dict[str, int]:
        """Each group's number of axes, by name."""
        return {g.name: g.length for g in self.groups}

    def __str__(self) -> str:
        lines = [f"subscripts      {self.subscripts!r}"]
        if self.supplements:
            given = ", ".join(f"len_{g}={n}" for g, n in self.supplements)
            lines.append(f"identifiability {self.identifiability_with} with {given} "
                         f"(the string alone: {self.identifiability})")
        else:
            lines.append(f"identifiability {self.identifiability}")
        lines.append("co-travelling   " + ("; ".join(f"{run} (only the total matters)" for run in self.co_travelling)
                                           if self.co_travelling else "none"))
        lines.append("groups")
        lines += [f"  {group}" for group in self.groups]
        lines.append(f"expanded        {self.expanded!r}")
        if self.output_shape is None:
            return "\n".join(lines)
        lines.append(f"output shape    {self.output_shape}")
        path = f"{[tuple(p) for p in self.path]}"
        if self.optimizer is None:
            lines.append(f"backend         {self.backend} (optimize='auto': the framework's own path)")
            lines.append(f"path            {path}  (jnp.einsum's choice: opt_einsum 'auto')")
        else:
            strategy = f"{self.strategy}, " if self.strategy is not None else ""
            lines.append(f"backend         {self.backend} ({strategy}optimize={self.optimizer!r})")
            if not self.path_taken:
                path += "  (not taken: one einsum call; pass it as optimize= to run pairwise)"
            lines.append(f"path            {path}")
        lines.append("schedule")
        lines += ["  " + line for line in self.schedule_lines]
        if self.optimizer is None:
            lines.append(f"FLOPs           {self.flops:,} (opt_einsum's count; naive: {self.naive_flops:,})")
        else:
            lines.append(f"FLOPs           {self.flops:,} (naive single einsum: {self.naive_flops:,})")
        if self.peak_extra is not None:
            bound = "no limit" if self.memory_limit is None else f"limit {self.memory_limit:,}"
            lines.append(f"peak extra      {self.peak_extra:,} elements beyond operands and result "
                         f"({bound})")
        else:
            lines.append("peak extra      planned by the framework")
        if self.cost_ns is not None:
            lines.append(f"modelled time   {self.cost_ns / 1e3:.3g} us ({self.time_model} time model)")
        if self.first_call is not None:
            lines.append(f"first call      {self.first_call}")
        return "\n".join(lines)


@dataclass(frozen=True)
class FirstCall:
    """How a first call of a shape is planned (`Explanation.first_call`): the ``tier``, the full
    search's predicted cost ``search_ns``, and for a cheaper tier its ``path``, its modelled
    ``cost_ns`` and ``upgrade_after`` (the call of this shape that runs the full search; for
    the ``'first'`` tier, that plans the shape again); ``blocks``, the blocks it runs in (0:
    unblocked; the reuse tier cuts the labels a blocked structure's search cut)."""

    tier: str
    search_ns: float
    path: tuple[tuple[int, ...], ...] = ()
    cost_ns: float = 0.0
    upgrade_after: int = 0
    blocks: int = 0

    def __str__(self) -> str:
        search = f"{self.search_ns / 1e6:.2g} ms"
        if self.tier == "full":
            return f"full search (the schedule above; its predicted {search} is paid at once)"
        if self.tier == "stored":
            return (f"stored plan (the full search's decisions, kept by an earlier process in the "
                    f"plan store: its path lowered, no search; the search would cost {search})")
        if self.tier == "first":
            return (f"first tier (the structure's first call: one einsum per pair along the path "
                    f"of fewest FLOPs, nothing else planned): path {[tuple(p) for p in self.path]}, "
                    f"modelled {self.cost_ns / 1e3:.3g} us; call {self.upgrade_after} of this shape, "
                    "or the structure's next shape, is planned in the quick or reuse tier, and "
                    f"the full search (the schedule above, predicted {search}) when it pays")
        how = ("the decisions of a schedule planned at other extents" if self.tier == "reuse"
               else "the path of fewest FLOPs alone")
        if self.blocks:
            how += f", in {self.blocks} blocks along the labels its search cut"
        return (f"{self.tier} tier ({how}): path {[tuple(p) for p in self.path]}, modelled "
                f"{self.cost_ns / 1e3:.3g} us; the full search (the schedule above, predicted "
                f"{search}) takes over on call {self.upgrade_after} of this shape")
