"""A full search's decisions as plain data, and the schedule they make again.

What a full search decides is small: the pairwise order, and for a blocked run which labels
are cut into chunks of which sizes.  `decisions_of` writes those as JSON-ready data;
`from_decisions` lowers them again for a plan, pricing only that path (no search), for the plan
store (`calls.store`).  Every decision is checked against the call (operands that exist, cut
labels of the call within their extents, the memory limit kept); anything else gives None and
the caller searches afresh, so a wrong decision costs speed, never a wrong result.

>>> from contractions.plan import make_plan
>>> from contractions.schedule import make_schedule
>>> plan = make_plan('ab,bc,cd->ad', ((30, 40), (40, 50), (50, 60)), ())
>>> found = make_schedule(plan, memory_limit='default')
>>> again = from_decisions(plan, decisions_of(found), memory_limit='default')
>>> again.path == found.path and again.steps == found.steps
True
>>> from_decisions(plan, {'strategy': 'pairwise', 'path': [[0, 7]]}) is None
True
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ContractionError
from ..model.numpy_prices import NUMPY_MODEL
from ..model.protocol import CostModel
from ..plan import Plan
from .blocking import MAX_BLOCKS, _assemble, as_one_einsum
from .ir import Schedule, evolve
from .lowering import lower_candidates
from .memory import _resolve_limit

__all__ = ["decisions_of", "from_decisions"]


def decisions_of(schedule: Schedule) -> dict[str, Any]:
    """What the full search decided for ``schedule``, as JSON-ready data: the strategy, the
    path and, for a blocked run, the labels cut, their chunk sizes and why."""
    found: dict[str, Any] = {"strategy": schedule.strategy,
                             "path": [list(pair) for pair in schedule.path]}
    if schedule.blocking is not None:
        blocking = schedule.blocking
        found["blocks"] = {"labels": list(blocking.labels), "chunks": list(blocking.chunks),
                           "purpose": blocking.purpose}
    return found


def from_decisions(plan: Plan, decisions: Any, use_einsum: bool = True, memory_limit: Any = None,
                   layouts: tuple[int, ...] | None = None,
                   cost_model: CostModel = NUMPY_MODEL) -> Schedule | None:
    """The schedule ``decisions`` (from `decisions_of`) make for ``plan``, or None where they do
    not fit it (the caller then runs the full search)."""
    try:
        strategy, path, blocks = _checked(decisions, len(plan.shapes))
    except (TypeError, ValueError, KeyError):
        return None
    exp = plan.expansion
    try:
        # (an explicit path is validated as a caller's optimize= would be)
        base = lower_candidates(exp.inputs, exp.output, plan.shapes, path, "pairwise", use_einsum,
                                plan.extents, layouts, cost_model)[0]
        limit = _resolve_limit(memory_limit, plan.shapes, base.output_shape)
        if strategy == "direct":
            # one einsum call: along the path the model chose for the steps (torch), or the
            # small problem's one call, along the stored path
            one_call = as_one_einsum(evolve(base, optimizer="auto"), "auto", cost_model)
            if one_call.strategy != "direct":
                one_call = lower_candidates(exp.inputs, exp.output, plan.shapes, path, "direct",
                                            use_einsum, plan.extents, layouts, cost_model)[0]
            return evolve(one_call, optimizer="auto", memory_limit=limit)
    except (ContractionError, ValueError, IndexError, TypeError):
        return None
    base = evolve(base, optimizer="auto")
    if blocks is None:
        if limit is not None and base.peak_extra > limit:
            return None
        return evolve(base, memory_limit=limit)
    labels, chunks, purpose = blocks
    extents = base.extents
    cut = [lab for lab in {lab for t in base.inputs for lab in t} if extents[lab] > 1]
    if (len(labels) != len(chunks) or len(set(labels)) != len(labels)
            or not all(lab in cut and 1 <= c < extents[lab] for lab, c in zip(labels, chunks))
            or math.prod(-(-extents[lab] // c) for lab, c in zip(labels, chunks)) > MAX_BLOCKS):
        return None
    blocked = _assemble(base, dict(zip(labels, chunks)), list(labels), use_einsum, cost_model)
    if purpose == "memory" and limit is not None and blocked.peak_extra > limit:
        return None
    assert blocked.blocking is not None
    return evolve(blocked, memory_limit=limit, blocking=evolve(blocked.blocking, purpose=purpose))


def _checked(decisions: Any, n_operands: int
             ) -> tuple[str, tuple[tuple[int, ...], ...], tuple[tuple[int, ...], tuple[int, ...], str] | None]:
    """The decisions' parts, their types checked (a `ValueError` or `TypeError` otherwise)."""
    strategy = decisions["strategy"]
    if strategy not in ("direct", "pairwise"):
        raise ValueError(strategy)
    path = tuple(tuple(_index(k) for k in pair) for pair in decisions["path"])
    if strategy == "pairwise" and n_operands > 1 and (
            len(path) != n_operands - 1 or any(len(pair) != 2 for pair in path)):
        raise ValueError(path)
    blocks = decisions.get("blocks")
    if blocks is None:
        return strategy, path, None
    purpose = blocks["purpose"]
    if purpose not in ("memory", "cache"):
        raise ValueError(purpose)
    return (strategy, path, (tuple(_index(lab) for lab in blocks["labels"]),
                             tuple(_index(c) for c in blocks["chunks"]), purpose))


def _index(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise TypeError(value)
    return value
