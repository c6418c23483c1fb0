"""The introspection verbs: `explain` (a report of how a call is solved, expanded, scheduled and
run), `explanation` (the same report as data) and `expand_subscripts` (the plain einsum string a
grouped call expands to).  They plan exactly as a call would (`api`'s caches) and change
nothing a later call does.

>>> expand_subscripts('WCa,Caib,WCi->WCb', 4, 5, 4)
'ABCa,BCaib,ABCi->ABCb'
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .arguments import normalise_supplements
from .backends import Backend, backend_for, load
from .calls.runners import _DEFAULT_OPTIONS, _NUMPY, backend_limit, framework_path, planned
from .calls.tiers import first_schedule
from .checks import (
    check_axis_count,
    check_subscripts,
    checked_backend,
    checked_optimize,
    layouts_of,
    normalise_memory_limit,
    result_itemsize,
    split_shapes_or_ndims,
)
from .compat import numpy_optimize
from .expand import ellipsis_ranks, expand
from .model.numpy_prices import NUMPY_MODEL
from .plan import Plan, make_plan
from .plotting import ExplanationText
from .schedule import ExplainedGroup, Explanation, FirstCall, explained_steps
from .solver import identifiability, solve_call

__all__ = ["expand_subscripts", "explain", "explanation"]


def expand_subscripts(subscripts: str, *shapes_or_ndims: Any, **len_groups: int) -> str:
    """The plain einsum string a grouped call expands to (no arithmetic).

    Pass one shape tuple, array or ndim (int) per operand.

    >>> expand_subscripts('WCa,Caib,WCi->WCb', 4, 5, 4)
    'ABCa,BCaib,ABCi->ABCb'
    >>> expand_subscripts('Vo,VWo->WVo', (3, 5), (3, 2, 2, 5))
    'Ao,ABCo->BCAo'
    """
    check_subscripts(subscripts)
    supplements = normalise_supplements(len_groups, subscripts, expand_subscripts)
    shapes, ndims = split_shapes_or_ndims(shapes_or_ndims, "expand_subscripts")
    check_axis_count(subscripts, ndims, supplements, "ndim" if shapes is None else "shape",
                     "expand_subscripts")
    if shapes is not None:
        return make_plan(subscripts, shapes, supplements).expansion.einsum
    parsed, lengths = solve_call(subscripts, ndims, supplements, what="ndim")
    return expand(parsed, lengths, ellipsis_ranks(parsed, lengths, ndims)).einsum


def explain(subscripts: str, *shapes_or_operands: Any, optimize: Any = "auto",
            backend: str | None = None, memory_limit: Any = "default",
            **len_groups: int) -> ExplanationText:
    """A report of how ``subscripts`` is solved, expanded, scheduled and run.

    With shapes (or arrays) it includes the extents and the schedule the backend would run:
    its strategy, the pairwise path in ``optimize=`` form, each step with its kernel and
    modelled cost, any blocks, the FLOP count and the peak extra memory (elements alive at once
    beyond operands and result) against ``memory_limit``.  The backend is the operands' (with
    arrays) or ``backend`` (``'numpy'`` by default); with bare ndims (ints) the report stops at
    the expansion.  `explanation` returns the same report as data.  The text is an
    `ExplanationText`, a ``str`` that also draws itself: ``.plot()`` (a matplotlib figure of the
    contraction tree) and, in a notebook, a table of the steps.

    >>> print(explain('WCo,WCa->Cao', (3, 2, 5), (3, 2, 4), len_W=1))  # doctest: +ELLIPSIS
    subscripts      'WCo,WCa->Cao'
    ...
    path            [(0, 1)]...
    ...
    """
    return ExplanationText(explanation(subscripts, *shapes_or_operands, optimize=optimize,
                                       backend=backend, memory_limit=memory_limit, **len_groups))


def explanation(subscripts: str, *shapes_or_operands: Any, optimize: Any = "auto",
                backend: str | None = None, memory_limit: Any = "default",
                **len_groups: int) -> Explanation:
    """The `explain` report as an `Explanation`: its numbers as attributes (the path, each
    step's kernel, FLOPs and modelled time, the blocks, the peak), its text as ``str()``.
    Takes exactly `explain`'s arguments.

    >>> e = explanation('WCa,Caib,WCi->WCb', (40, 2, 30), (2, 30, 50, 60), (40, 2, 50),
    ...                 optimize='greedy')
    >>> e.path, [step.flops for step in e.steps], e.group_lengths   # (kernels: priced, per machine)
    (((1, 2), (0, 1)), [14400000, 288000], {'W': 1, 'C': 1})
    >>> {step.kernel for step in e.steps} <= {'matmul', 'einsum', 'multiply'}
    True
    >>> str(e) == explain('WCa,Caib,WCi->WCb', (40, 2, 30), (2, 30, 50, 60), (40, 2, 50),
    ...                   optimize='greedy')
    True
    """
    check_subscripts(subscripts)
    supplements = normalise_supplements(len_groups, subscripts, explain)
    shapes, ndims = split_shapes_or_ndims(shapes_or_operands, "explain")
    info = identifiability(subscripts, [g for g, _ in supplements])
    check_axis_count(subscripts, ndims, supplements, "ndim" if shapes is None else "shape", "explain")
    alone = identifiability(subscripts).describe()
    state = None
    if supplements:
        state = "determined" if not info.needs_supplement else info.describe()
    runs = tuple("".join(r) for r in info.runs if len(r) > 1)
    plan: Plan | None = None
    first_call: FirstCall | None = None
    if backend is not None:
        chosen = checked_backend(backend)
    elif any(hasattr(item, "shape") for item in shapes_or_operands):
        chosen = backend_for(shapes_or_operands)
    else:
        chosen = _NUMPY
    if shapes is not None:
        opt = checked_optimize(numpy_optimize(optimize), subscripts, len(shapes))
        arrays = [item for item in shapes_or_operands if hasattr(item, "dtype")]
        limit = backend_limit(chosen, normalise_memory_limit(
            memory_limit, result_itemsize(arrays, _DEFAULT_OPTIONS)))   # 8 bytes for bare shapes
        plan = make_plan(subscripts, shapes, supplements)
        schedule = None
        if not framework_path(chosen, opt):
            layouts = (layouts_of(shapes_or_operands, _DEFAULT_OPTIONS)
                       if chosen is _NUMPY and arrays and len(arrays) == len(shapes_or_operands) else None)
            if opt == "auto":  # before the full search below, which a later first call would reuse
                first = first_schedule(plan, opt,
                                       chosen.uses_einsum, limit, layouts, chosen.cost_model or NUMPY_MODEL,
                                       remember=False, along_path=chosen.einsum_along_path)
                if first.search_ns or first.tier == "stored":  # (one einsum call: nothing to search)
                    blocking = first.schedule.blocking
                    first_call = FirstCall(first.tier, first.search_ns, first.schedule.path,
                                           first.schedule.cost_ns, first.upgrade_after,
                                           blocking.n_blocks if blocking is not None else 0)
            schedule = planned(plan, opt, limit, layouts, chosen.uses_einsum, chosen.cost_model,
                               keep=False)
        exp, lengths = plan.expansion, plan.lengths
    else:
        parsed, lengths = solve_call(subscripts, ndims, supplements, what="ndim")
        exp = expand(parsed, lengths, ellipsis_ranks(parsed, lengths, ndims))
    groups = tuple(
        ExplainedGroup(g, n, "".join(exp.readable_symbol(lab) for lab in labels) or "-",
                       tuple(plan.extents[lab] for lab in labels) if plan is not None else None)
        for (g, labels), n in zip(exp.group_labels, lengths))
    base = Explanation(subscripts=subscripts, identifiability=alone, co_travelling=runs,
                       groups=groups, expanded=exp.readable, supplements=supplements,
                       identifiability_with=state)
    if plan is None:
        return base
    module = load(chosen)
    if schedule is None:  # the framework chooses the path: report the one it will choose
        return _framework_explanation(base, chosen, module, plan)
    runs_steps = getattr(module, "RUNS_SCHEDULE_STEPS", False)
    described = module.describe(plan, schedule, _DEFAULT_OPTIONS)
    if hasattr(module, "describe_operands") and shapes_or_operands and all(
            hasattr(item, "shape") and not isinstance(item, np.ndarray) for item in shapes_or_operands[:1]):
        # a backend whose work depends on the operands themselves (dask: their chunks)
        described = module.describe_operands(plan, schedule, _DEFAULT_OPTIONS, shapes_or_operands)
    reported = replace(
        base, output_shape=plan.output_shape, backend=chosen.name, optimizer=schedule.optimizer,
        path=schedule.path,
        path_taken=not (runs_steps and schedule.strategy == "direct" and len(plan.shapes) > 1
                        and not getattr(module, "EINSUM_TAKES_PATH", False)),
        schedule_lines=tuple(described), flops=schedule.flops, naive_flops=schedule.naive_flops)
    if not runs_steps:
        return reported
    return replace(reported, strategy=schedule.strategy, blocking=schedule.blocking,
                   steps=explained_steps(schedule, exp.readable_symbol),
                   peak_extra=schedule.peak_extra, memory_limit=schedule.memory_limit,
                   cost_ns=schedule.cost_ns if schedule.strategy == "pairwise" else None,
                   time_model=getattr(chosen.cost_model, "time_model_name", "numpy"),
                   first_call=first_call)


def _framework_explanation(base: Explanation, backend: Backend, module: Any, plan: Plan) -> Explanation:
    """explain's report for a backend that picks its own path (JAX's default): the path is the
    one ``jnp.einsum`` computes for these shapes (opt_einsum's ``'auto'``)."""
    import opt_einsum

    path, info = opt_einsum.contract_path(plan.expansion.einsum, *plan.shapes, shapes=True,
                                          optimize="auto")
    return replace(base, output_shape=plan.output_shape, backend=backend.name,
                   path=tuple(tuple(int(k) for k in p) for p in path),
                   schedule_lines=tuple(module.describe(plan, None, _DEFAULT_OPTIONS)),
                   flops=int(info.opt_cost), naive_flops=int(info.naive_cost))
