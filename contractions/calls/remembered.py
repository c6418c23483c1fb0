"""What a process remembers about the structures it has planned: their templates.

A structure is what a schedule's decisions depend on, its extents apart: the expanded labels,
which axes of which operands are 1, the operands' layouts, whether einsum may run and the cost
model (`structure_key`, the one key of a structure).  Its *templates* are the schedules
planned for it so far, one per strategy (``'direct'``, ``'pairwise'``) with the tier that made
it, and under ``'first'`` the unplanned first call's (its extents only are read).  The tiers
(`calls.tiers`) follow them at new extents; a full search's template is also kept in the plan
store (`calls.store`) for later processes.

>>> from contractions.plan import make_plan
>>> from contractions.schedule import make_schedule
>>> plan = make_plan('ab,bc->ac', ((20, 30), (30, 40)), ())
>>> key = structure_key(plan, None, True, None)
>>> schedule = make_schedule(plan)
>>> keep_template(key, schedule, "full")
>>> templates_of(key)[schedule.strategy] == (schedule, 'full')
True
>>> clear_templates()
"""

from __future__ import annotations

import threading
from typing import Any

from ..model.protocol import CostModel
from ..plan import PLAN_CACHE_SIZE, Plan
from ..schedule import Schedule

__all__ = ["clear_templates", "keep_template", "mark_first", "structure_key", "templates_of"]

# structure key -> strategy -> (its latest schedule of that strategy, the tier that made it).
# A full search's schedule replaces a cheaper tier's, never the other way round.  Bounded like
# the other caches keyed on callers' strings: cleared when full.
_TEMPLATES: dict[tuple[Any, ...], dict[str, tuple[Schedule, str]]] = {}
_LOCK = threading.Lock()
_NONE: dict[str, tuple[Schedule, str]] = {}


def structure_key(plan: Plan, layouts: tuple[int, ...] | None, use_einsum: bool,
                  cost_model: CostModel | None) -> tuple[Any, ...]:
    """The key of ``plan``'s structure: what a schedule's decisions depend on but its extents."""
    if layouts is not None and not any(layouts):
        layouts = None
    exp = plan.expansion
    # (which axes of which operands are 1: a label of extent 1 everywhere is dropped, an axis
    # of 1 that broadcasts is squeezed away; either changes the decisions)
    return (exp.inputs, exp.output, tuple(n == 1 for shape in plan.shapes for n in shape), layouts,
            use_einsum, cost_model)


def keep_template(key: tuple[Any, ...], schedule: Schedule, tier: str) -> None:
    """Keep ``schedule``, made by ``tier``, as the structure's template of its strategy."""
    blocking = schedule.blocking
    if blocking is not None and (blocking.purpose != "memory" or blocking.base is None):
        return  # cache-sized blocks: the full search weighs them per shape
    with _LOCK:
        known = _TEMPLATES.get(key)
        if known is None:
            if len(_TEMPLATES) >= PLAN_CACHE_SIZE:
                _TEMPLATES.clear()
            known = _TEMPLATES[key] = {}
        if tier == "full" or known.get(schedule.strategy, (None, ""))[1] != "full":
            known[schedule.strategy] = (schedule, tier)


def templates_of(key: tuple[Any, ...]) -> dict[str, tuple[Schedule, str]]:
    """The templates kept for the structure ``key``, by strategy (empty: none)."""
    return _TEMPLATES.get(key, _NONE)


def mark_first(key: tuple[Any, ...], schedule: Schedule) -> None:
    """Note that the structure ``key`` had its first call, unplanned (``schedule``, kept under
    ``'first'``: never followed, only its extents are read)."""
    with _LOCK:
        if key not in _TEMPLATES:
            if len(_TEMPLATES) >= PLAN_CACHE_SIZE:
                _TEMPLATES.clear()
            _TEMPLATES[key] = {"first": (schedule, "first")}


def clear_templates() -> None:
    """Forget every structure planned so far (the next call of each plans afresh)."""
    with _LOCK:
        _TEMPLATES.clear()
