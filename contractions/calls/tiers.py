"""Planning that pays for itself: which tier plans a call, and when the full search runs.

The full search (`make_schedule`) costs milliseconds, for calls that often run in tens of
microseconds, so a call of ``optimize='auto'`` is planned in the cheapest sound tier and the
full search runs once it pays for itself (dev/decisions.md 47, 51):

* ``'reuse'``: a schedule of the same structure was planned at other extents: its path and
  decisions are taken as they are, views recomputed, prices scaled by FLOPs (blocks cut as
  its blocks were: `blocking.block_like`);
* ``'first'``: the structure's first call on a backend that runs einsum along a path: one
  einsum call per pair of the path of fewest FLOPs, when priced below `quick_ns` and within
  the memory limit;
* ``'quick'``: the candidate path of fewest FLOPs lowered alone;
* ``'full'``: every candidate priced, the memory limit met by another order or by blocks;
* ``'stored'``: the plan store's (`calls.store`) decisions of an earlier process's full
  search at these extents, lowered again and checked (`stored_schedule`): tried before the
  quick tier for a structure this process has not planned whose operands hold
  `STORE_FIRST_ELEMENTS` or more, and by the full search before it searches.

The full search runs when its predicted cost (`search_ns`, plus `blocks_search_ns` where the
cheap schedule breaks the memory limit) is at most `SEARCH_FRACTION` of the shape's calls'
time so far (`upgrade_after`).  A direct schedule, a zero extent, an explicit ``optimize=``
and a model with ``cheap_first_plans = False`` always go to the full search.

>>> from contractions.plan import make_plan
>>> from contractions.calls.remembered import clear_templates
>>> clear_templates()                      # (as in a fresh process: no structure planned yet)
>>> plan = make_plan('WCa,Caib,WCi->WCb', ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50)), ())
>>> first_schedule(plan).tier in ('quick', 'full')
True
>>> plan = make_plan('WCa,Caib,WCi->WCb', ((40, 2, 31), (2, 31, 50, 60), (40, 2, 50)), ())
>>> first_schedule(plan).tier
'reuse'
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ..model.numpy_prices import NUMPY_MODEL
from ..model.profile import active_profile
from ..model.protocol import CostModel
from ..plan import Plan
from ..schedule import Schedule, make_schedule
from ..schedule.blocking import as_one_einsum, block_like
from ..schedule.decisions import decisions_of, from_decisions
from ..schedule.ir import evolve
from ..schedule.lowering import lower_candidates
from ..schedule.memory import _resolve_limit
from ..schedule.paths import normalise_optimize
from .remembered import keep_template, mark_first, structure_key, templates_of
from .store import PlanStore, active_store

#: The full search runs once its predicted cost is at most this share of the predicted time
#: the shape's calls have run, the call it plans included: planning costs at most a tenth
#: of the running (so a large first call takes at most ~1.1x its warm call).
SEARCH_FRACTION = 0.1


#: A structure's first call that would be planned (not the first tier) looks for a stored
#: plan first when its operands hold at least this many elements.  A lookup that finds
#: nothing costs 15-100 us (one file opened; more in a cold process), a share of a small
#: call's first call that a stored plan could not win back; smaller calls meet the store
#: when their full search runs (dev/decisions.md 59).
STORE_FIRST_ELEMENTS = 1 << 15


def upgrade_after(search_ns: float, cost_ns: float) -> int:
    """The call of a shape that runs the full search, counting the first as 1: the first
    whose running time so far (``cost_ns`` a call) pays `SEARCH_FRACTION` for the search
    (``search_ns``).  The one rule of when planning pays for itself; 1 or less: at once.

    >>> upgrade_after(1_000_000, 20_000), upgrade_after(1_000_000, 20_000_000)
    (500, 1)
    """
    return math.ceil(search_ns / (SEARCH_FRACTION * max(cost_ns, 1.0)))


@dataclass(frozen=True)
class FirstPlan:
    """The schedule a shape's first call runs, and when its full search will run.

    ``tier`` is ``'full'``, ``'stored'``, ``'reuse'``, ``'quick'`` or ``'first'``; ``search_ns`` the full
    search's predicted cost (0 for one einsum call: nothing to search); ``upgrade_after`` the
    call of this shape (counting this one as 1) that runs the full search (for ``'first'``:
    that plans the shape again, in the cheapest tier then sound), 0 when this schedule came
    from the full search (or the store's copy of it).
    """

    schedule: Schedule
    tier: str
    search_ns: float
    upgrade_after: int


def search_ns(n_operands: int, model: CostModel = NUMPY_MODEL) -> float:
    """The full search's predicted cost for ``n_operands`` operands: the model's profile's
    ``search_*`` prices (`contractions.model.profile.Profile`), the active profile's for a model
    without a profile.

    >>> search_ns(4) > search_ns(3) > search_ns(2) > 0
    True
    """
    prices = getattr(model, "profile", None) or active_profile()
    fixed, step = prices.search_fixed_ns, prices.search_step_ns
    if n_operands <= 1:
        return fixed
    if n_operands <= 4:
        paths = math.prod(math.comb(k, 2) for k in range(2, n_operands + 1))
        return fixed + step * paths * (n_operands - 1)
    return fixed + prices.search_paths_ns + step * 4 * (n_operands - 1)


def quick_ns(n_operands: int, model: CostModel = NUMPY_MODEL) -> float:
    """The quick tier's predicted cost for ``n_operands`` operands: one path's steps priced
    (the profile's ``search_fixed_ns`` and ``search_step_ns`` per step, as `search_ns` counts
    them for every path).

    >>> search_ns(4) > quick_ns(4) > quick_ns(3) > 0
    True
    """
    prices = getattr(model, "profile", None) or active_profile()
    return prices.search_fixed_ns + prices.search_step_ns * max(n_operands - 1, 1)


def blocks_search_ns(model: CostModel = NUMPY_MODEL) -> float:
    """What the full search adds where the memory limit asks for blocks: the profile's
    ``search_blocks_ns`` (the active profile's for a model without a profile).

    >>> blocks_search_ns() > search_ns(4)
    True
    """
    prices = getattr(model, "profile", None) or active_profile()
    return prices.search_blocks_ns


def remember_full(plan: Plan, schedule: Schedule, optimize: Any = "auto", use_einsum: bool = True,
                  layouts: tuple[int, ...] | None = None, cost_model: CostModel = NUMPY_MODEL) -> None:
    """Keep a full search's ``schedule`` of ``plan`` as its structure's decisions for later
    shapes (the ``'reuse'`` tier); called for what runs, never for a report."""
    if layouts is not None and not any(layouts):
        layouts = None
    if normalise_optimize(optimize) == "auto":
        keep_template(structure_key(plan, layouts, use_einsum, cost_model), schedule, "full")


def _store_for(optimize: Any) -> PlanStore | None:
    """The plan store a call's full search may read and keep: only the default
    ``optimize='auto'`` is stored (None: another ``optimize``, or no store)."""
    return active_store() if normalise_optimize(optimize) == "auto" else None


def full_search(plan: Plan, optimize: Any = "auto", use_einsum: bool = True, memory_limit: Any = None,
                layouts: tuple[int, ...] | None = None, cost_model: CostModel = NUMPY_MODEL,
                keep: bool = True, look_up: bool = True) -> tuple[Schedule, bool]:
    """The full search's schedule of ``plan`` and whether the plan store gave it: its stored
    decisions for this structure at these extents lowered again (`schedule.decisions`), else
    the search (`make_schedule`), whose decisions the store then keeps (unless ``keep`` is
    False: a report).  Only the default ``optimize='auto'`` is stored; ``look_up=False``: the
    caller has just looked and found none."""
    store = _store_for(optimize)
    key = store_key(plan, use_einsum, memory_limit, layouts, cost_model) if store is not None else ""
    if store is not None and look_up:
        found = _lowered(store, key, plan, use_einsum, memory_limit, layouts, cost_model)
        if found is not None:
            return found, True
    schedule = make_schedule(plan, optimize, use_einsum=use_einsum, memory_limit=memory_limit,
                             layouts=layouts, cost_model=cost_model)
    if store is not None and keep:
        store.put(key, decisions_of(schedule))
    return schedule, False


def stored_schedule(plan: Plan, optimize: Any = "auto", use_einsum: bool = True,
                    memory_limit: Any = None, layouts: tuple[int, ...] | None = None,
                    cost_model: CostModel = NUMPY_MODEL) -> Schedule | None:
    """The plan store's decisions for ``plan``'s structure at these extents, lowered again
    and checked against the call, or None (none stored, the store off, ``optimize`` not the
    default; an entry that does not fit is dropped)."""
    store = _store_for(optimize)
    if store is None:
        return None
    return _lowered(store, store_key(plan, use_einsum, memory_limit, layouts, cost_model), plan,
                    use_einsum, memory_limit, layouts, cost_model)


def _lowered(store: PlanStore, key: str, plan: Plan, use_einsum: bool, memory_limit: Any,
             layouts: tuple[int, ...] | None, cost_model: CostModel) -> Schedule | None:
    """``store``'s decisions under ``key`` lowered for ``plan`` (`from_decisions`); an entry
    that does not fit the call is dropped."""
    decisions = store.get(key)
    if decisions is None:
        return None
    found = from_decisions(plan, decisions, use_einsum, memory_limit, layouts, cost_model)
    if found is None:
        store.drop(key, "does not fit the call it was found for")
    return found


def store_key(plan: Plan, use_einsum: bool, memory_limit: Any, layouts: tuple[int, ...] | None,
              cost_model: CostModel) -> str:
    """The plan store's key of a full search: the structure (`structure_key`, its cost model by
    name), the extents and the memory limit it was planned for, as JSON text."""
    inputs, output, ones, layouts, use_einsum, _ = structure_key(plan, layouts, use_einsum, cost_model)
    model = f"{type(cost_model).__name__}:{getattr(cost_model, 'name', '')}"
    limit = memory_limit if memory_limit is None or isinstance(memory_limit, (int, str)) else repr(memory_limit)
    return json.dumps([inputs, output, ones, layouts, use_einsum, model, limit, plan.extents],
                      separators=(",", ":"))


def first_schedule(plan: Plan, optimize: Any = "auto", use_einsum: bool = True,
                   memory_limit: Any = None, layouts: tuple[int, ...] | None = None,
                   cost_model: CostModel = NUMPY_MODEL, remember: bool = True,
                   along_path: bool = False) -> FirstPlan:
    """The schedule of a shape's first call, from the cheapest sound tier (module docstring).

    Arguments as for `make_schedule`; ``remember=False`` (a report: `explain`) leaves the
    structures known so far as they are; ``along_path``: the backend runs one einsum call
    along a path (`Schedule.along_path`), so a structure's first call may take the
    ``'first'`` tier.
    """
    if layouts is not None and not any(layouts):
        layouts = None
    search = search_ns(len(plan.shapes), cost_model)

    looked = False   # (whether this call has looked in the plan store already)

    def full() -> FirstPlan:
        schedule, stored = full_search(plan, optimize, use_einsum, memory_limit, layouts, cost_model,
                                       keep=remember, look_up=not looked)
        if remember:
            remember_full(plan, schedule, optimize, use_einsum, layouts, cost_model)
        return FirstPlan(schedule, "stored" if stored else "full", search, 0)

    if (normalise_optimize(optimize) != "auto" or 0 in plan.extents
            or not getattr(cost_model, "cheap_first_plans", True)):
        return full()
    key = structure_key(plan, layouts, use_einsum, cost_model)
    entry = templates_of(key)
    known = tuple(schedule for schedule, _ in entry.values() if not schedule.along_path) if entry else ()
    exp = plan.expansion
    # The first tier: the structure's first call, and any call at the same extents before
    # anything is planned (a split of a co-travelling run is the same contraction: it runs the
    # same einsum calls, so every split gives the same bits)
    first = entry.get("first") if entry else None
    unplanned = not entry or (not known and first is not None
                                  and first[0].extents == dict(enumerate(plan.extents)))
    tier = "reuse" if known else "first" if unplanned and along_path else "quick"
    look = not known and sum(map(math.prod, plan.shapes)) >= STORE_FIRST_ELEMENTS

    def stored_first() -> FirstPlan | None:
        # A structure this process has not planned, about to be planned (not the first
        # tier), on operands large enough: a plan stored by an earlier process serves instead
        # (lowering it costs about what the quick tier's lowering does, and it runs the full
        # search's schedule from the first call)
        nonlocal looked
        if not look:
            return None
        looked = True
        stored = stored_schedule(plan, optimize, use_einsum, memory_limit, layouts, cost_model)
        if stored is not None and remember:
            remember_full(plan, stored, optimize, use_einsum, layouts, cost_model)
        return None if stored is None else FirstPlan(stored, "stored", search, 0)

    if tier == "quick" and (found := stored_first()) is not None:
        return found
    # (a blocked run is followed through the unblocked schedule its blocks cut)
    cheap = lower_candidates(exp.inputs, exp.output, plan.shapes, "auto", None, use_einsum,
                             plan.extents, layouts, cost_model, tier=tier,
                             follow=tuple(s.blocking.base if s.blocking and s.blocking.base else s
                                          for s in known))
    if tier == "first":
        # (a one-einsum call is planned alike by every tier: the quick tier's from here)
        tier = "quick"
        if cheap and cheap[0].along_path:
            along = cheap[0]
            limit = _resolve_limit(memory_limit, plan.shapes, along.output_shape)
            if (along.cost_ns <= quick_ns(len(plan.shapes), cost_model)
                    and (limit is None or along.peak_extra <= limit)):
                if remember:
                    mark_first(key, along)
                return FirstPlan(evolve(along, memory_limit=limit), "first", search, 2)
            if (found := stored_first()) is not None:
                return found
            cheap = []   # planning can pay for itself on this call: the quick tier
    if not cheap:  # none of this strategy, or it did not fit these labels; or not the first tier
        tier = "quick"
        cheap = lower_candidates(exp.inputs, exp.output, plan.shapes, "auto", None, use_einsum,
                                 plan.extents, layouts, cost_model, tier=tier)
    schedule = cheap[0]
    limit = _resolve_limit(memory_limit, plan.shapes, schedule.output_shape)
    if schedule.strategy == "direct":
        # one einsum call (a small problem): every tier plans it alike, nothing to search (its
        # path, which only explain and JAX read, is the structure's where one was planned)
        if remember and tier == "quick":
            keep_template(key, schedule, "full")
        return FirstPlan(evolve(schedule, memory_limit=limit), "full", 0.0, 0)
    if limit is not None and schedule.peak_extra > limit:
        # The full search would search for blocks too (`blocks_search_ns`).  The reuse tier
        # cuts the labels the structure's full search cut, when it did; otherwise another
        # order or blocks found by search: the full search's job.
        search += blocks_search_ns(cost_model)
        cut = next((s.blocking for s in known if s.blocking is not None), None)
        blocked = block_like(schedule, cut, limit, cost_model) if tier == "reuse" and cut else None
        if blocked is None:
            return full()
        schedule = blocked
    after = upgrade_after(search, schedule.cost_ns)
    if after <= 1:
        return full()
    if tier == "quick" and remember:
        keep_template(key, schedule, tier)
    return FirstPlan(as_one_einsum(evolve(schedule, memory_limit=limit), "auto", cost_model), tier,
                     search, after)
