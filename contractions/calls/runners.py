"""A call's runner over its life: the hot dict, the runner cache, the tiers' planning, the
runner kinds, and the structures whose new shapes run without planning.

A warm call is one lookup in `HOT` (the api's hot path) and the arithmetic.  A miss takes
`runner`: the byte-bounded `_compiled` cache, else `_compile`: the plan, the cheapest sound
tier's schedule (`calls.tiers`), the backend's compiled program, wrapped as one of the runner
kinds below.  A default-option call's structure is kept (`calls.structures`), so a new shape of
it runs the structure's program at once (`new_shape`).

The runner kinds: the backend's compiled program itself; `Provisional`, a cheap tier's runner
that runs the full search on its ``upgrade_after``-th call and hands later calls the runner it
gets; `_guarded` (numpy), a program planned for C operands of one dtype that re-plans other
layouts; and, on CUDA, the backend's `backends.measured.MeasuredRoute`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..backends import Backend, BackendOptions, backend_named, load
from ..caching import ByteBoundedCache, shapes_key_weight, weight
from ..checks import layouts_of
from ..model.numpy_prices import NUMPY_MODEL
from ..plan import PLAN_CACHE_SIZE, Plan, make_plan
from ..schedule import Schedule
from ..schedule.blocking import as_one_einsum
from .structures import DECLINED, Structure, known_structure, remember_structure, structure_key_of
from .tiers import first_schedule, full_search, remember_full

__all__ = ["HOT", "HOT_CACHE_SIZE", "HOT_KEY_MAX_CHARS", "Provisional", "new_shape", "planned",
           "remember_call", "runner"]

_NUMPY = backend_named("numpy")
_DEFAULT_OPTIONS = BackendOptions()
# numpy's backend is every process's: loaded with the library rather than on its first call
# (a few milliseconds of imports a process's first call would otherwise pay).
load(_NUMPY)
_ndarray = np.ndarray


# ---------------------------------------------------------------------------- the caches
# Every cache keyed on the caller's subscripts is bounded by bytes as well as entries
# (contractions/caching.py), so many distinct long strings cannot pile up in memory; the hot
# dict keeps only strings up to HOT_KEY_MAX_CHARS (longer ones are served by these caches).
CACHE_BYTES = 64 * 2**20
HOT_KEY_MAX_CHARS = 4096


def _plan_key(plan: Plan) -> tuple[Any, ...]:
    # (what names a plan: its string, shapes and the call's len_ items, of which it is the
    # function; two splits of a co-travelling run are one plan, but each call signature keeps
    # a runner of its own, so one's calls never count towards the other's upgrade)
    return (plan.parsed.subscripts, plan.shapes, plan.supplements)


def _caller_parts(key: tuple[Any, ...]) -> int:
    """The weight of a cache key's parts that come from the caller (the subscripts, shapes,
    ``len_`` items and optimize= at 1-4, the layouts at 7; both caches' keys put them there);
    backend entries, options and cost models are shared."""
    return shapes_key_weight(key[1:5]) + weight(key[7])


def _filled_by_get(*key: Any) -> Any:
    raise TypeError("this cache is filled through its get(), by a caller that holds the plan")


_SCHEDULES: ByteBoundedCache[Schedule] = ByteBoundedCache(
    _filled_by_get, PLAN_CACHE_SIZE, CACHE_BYTES, weigh_results=False, weigh_args=_caller_parts)
_COMPILED: ByteBoundedCache[Callable[..., Any]] = ByteBoundedCache(
    _filled_by_get, PLAN_CACHE_SIZE, CACHE_BYTES, weigh_results=False, weigh_args=_caller_parts)


def planned(plan: Plan, optimize: Any, limit: Any = "default",
            layouts: tuple[int, ...] | None = None, use_einsum: bool = True,
            cost_model: Any = None, keep: bool = True) -> Schedule:
    """The full search's schedule of ``plan`` (`tiers.full_search`: the plan store's where it
    has one), cached once per problem however many defaults a caller spells out (a
    `contract_expression` and its numpy program share one entry, so `make_schedule`'s own
    work, such as cache-sized blocking, runs once per shape); ``keep=False`` (a report)
    writes nothing to the store."""
    model = cost_model or NUMPY_MODEL
    return _SCHEDULES.get(
        (use_einsum, *_plan_key(plan), optimize, limit, model, layouts),
        lambda: full_search(plan, optimize, use_einsum, limit, layouts, model, keep=keep)[0])


def runner(backend: Backend, plan: Plan, optimize: Any, options: BackendOptions,
           limit: Any = "default", layouts: tuple[int, ...] | None = None,
           tiered: bool = False) -> Callable[..., Any]:
    """The cached runner of a call (``tiered``: a call of `contract`'s own, planned in the
    cheapest sound tier; else the full search, as for `contract_expression`)."""
    limit = backend_limit(backend, limit)
    if backend is not _NUMPY:
        layouts = None
    try:
        return _COMPILED.get((backend, *_plan_key(plan), optimize, options, limit, layouts, tiered),
                             lambda: _compile(backend, plan, optimize, options, limit, layouts, tiered))
    except TypeError as exc:
        if "unhashable" not in str(exc):
            raise
    # An unhashable option (a list as precision, say): plan through the caches, compile afresh.
    return _compile(backend, plan, optimize, options, limit, layouts, tiered)


def _compile(backend: Backend, plan: Plan, optimize: Any, options: BackendOptions,
             limit: Any = "default", layouts: tuple[int, ...] | None = None,
             tiered: bool = False, unplanned_first: bool = True) -> Callable[..., Any]:
    """The runner: a schedule (in a cheap tier when ``tiered``: `calls.tiers`; the ``'first'``
    tier only with ``unplanned_first``), compiled, and wrapped for other operand layouts
    (numpy) and for the full search to come (a cheap tier)."""
    module = load(backend)
    if framework_path(backend, optimize):
        # The framework picks the path itself (JAX: jnp.einsum's own 'auto', which XLA runs
        # fastest); no schedule is built, so a new shape costs only parse/solve/expand/plan.
        return module.compile(plan, None, options)
    after = 0
    if tiered:
        first = first_schedule(plan, optimize, backend.uses_einsum, limit, layouts,
                               backend.cost_model or NUMPY_MODEL,
                               along_path=backend.einsum_along_path and unplanned_first)
        schedule, after = first.schedule, first.upgrade_after
    else:
        schedule = planned(plan, optimize, limit, layouts, backend.uses_einsum, backend.cost_model)
        remember_full(plan, schedule, optimize, backend.uses_einsum, layouts,
                      backend.cost_model or NUMPY_MODEL)
    run = module.compile(plan, schedule, options)
    if layouts is None and backend is _NUMPY and _layout_matters(schedule):
        run = _guarded(run, backend, lambda: plan, optimize, options, limit)
    if after:
        def full() -> Callable[..., Any]:
            if tiered and first.tier == "first":
                # the structure's first call ran unplanned: plan the shape again, now in the
                # cheapest tier that follows a structure that has been called
                return _compile(backend, plan, optimize, options, limit, layouts, tiered=True,
                                unplanned_first=False)
            return runner(backend, plan, optimize, options, limit, layouts, tiered=False)
        return Provisional(run, after, full)
    return run


class Provisional:
    """A cheap tier's runner (`calls.tiers`): it counts the calls of its shape and, on the
    ``upgrade_after``-th, runs the full search (after the ``'first'`` tier: the next tier) and
    hands the runner it gets to the hot dict entries that hold this one (so later calls reach
    it directly)."""

    __slots__ = ("run", "calls", "upgrade_after", "full", "homes")

    def __init__(self, run: Callable[..., Any], upgrade_after: int,
                 full: Callable[[], Callable[..., Any]]) -> None:
        self.run, self.calls, self.upgrade_after, self.full = run, 0, upgrade_after, full
        self.homes: list[tuple[dict[Any, Any], Any]] = []

    def __call__(self, *arrays: Any) -> Any:
        self.calls += 1
        if self.calls == self.upgrade_after:
            self.run = self.full()
            for home, key in self.homes:
                if home.get(key) is self:
                    home[key] = self.run
            if type(self.run) is Provisional:  # (a cheap tier again: its upgrade updates them)
                self.run.homes.extend(self.homes)
            self.homes = []
        return self.run(*arrays)


def framework_path(backend: Backend, optimize: Any) -> bool:
    """Does this backend take the default ``optimize`` as "let the framework choose"?"""
    return backend.plans_own_path and isinstance(optimize, str) and optimize == "auto"


def _layout_matters(schedule: Schedule) -> bool:
    """Does this schedule (planned for C-contiguous operands of one dtype) run differently on
    other layouts?  A pairwise run does: a Fortran operand is read through its transpose
    instead of copied, and a strided or converted one is copied where the schedule counts it
    (so the call allocates what ``explain`` says, and blocks if the copies would break the
    limit).  One einsum call reads any strides itself."""
    return schedule.strategy == "pairwise"


def _guarded(run: Callable[..., Any], backend: Backend, plan_of: Callable[[], Plan], optimize: Any,
             options: BackendOptions, limit: Any) -> Callable[..., Any]:
    """``run`` for C-contiguous operands of one dtype; any other operands are re-planned with
    their layouts (so the copies they need are counted, and blocked if need be).  ``plan_of()``
    gives the plan, made only when it is needed."""
    target = options.preferred_element_type

    def guarded(*arrays: Any) -> Any:
        dtype = arrays[0].dtype if target is None else target
        for a in arrays:
            if a.dtype != dtype or not a.flags.c_contiguous:
                layouts = layouts_of(arrays, options)
                return runner(backend, plan_of(), optimize, options, limit, layouts,
                              tiered=True)(*arrays)
        return run(*arrays)

    return guarded


def backend_limit(backend: Backend, limit: Any) -> Any:
    """The memory limit a backend's schedule honours, from its declared capabilities: none
    where the framework plans its own buffers (JAX); ``'default'`` only where the backend
    blocks by default (numpy), else only an explicit limit (torch: an unbounded call is one
    einsum or a few kernels, which torch.compile and torch.vmap see whole; dask bounds each of
    its blocks itself)."""
    if not backend.honours_memory_limit or (limit == "default" and not backend.blocks_by_default):
        return None
    return limit


# ------------------------------------------------------------------- the hot dict, structures
# The hot dict: (subscripts, *operand keys, *len_items) -> the call's runner, for calls with
# default options; an operand's key is its shape for a numpy array, else (type, shape, is_cuda):
# the type decides the backend, a torch tensor's device its prices (`operand_key`).  Bounded by
# clearing when full (dict operations are atomic under the GIL, so concurrent callers at worst
# re-plan through the cached `_COMPILED`).
HOT: dict[tuple[Any, ...], Callable[..., Any]] = {}
HOT_CACHE_SIZE = PLAN_CACHE_SIZE


def operand_key(op: Any) -> Any:
    """An operand's part of a hot-dict key, as `contract`'s hot path builds it."""
    return op.shape if type(op) is _ndarray else (type(op), op.shape, getattr(op, "is_cuda", None))


def remember_call(key: tuple[Any, ...], subscripts: str, run: Callable[..., Any]) -> None:
    """Keep ``run`` in the hot dict (cleared when full; strings over `HOT_KEY_MAX_CHARS` are
    left to the byte-bounded caches)."""
    if len(subscripts) <= HOT_KEY_MAX_CHARS:
        if len(HOT) >= HOT_CACHE_SIZE:
            HOT.clear()
        try:
            HOT[key] = run
        except TypeError:  # an unhashable shape (torch.compile's symbolic sizes): not kept
            return
        if type(run) is Provisional:
            run.homes.append((HOT, key))


#: The backends whose new shapes a known structure runs (`calls.structures`): numpy (one
#: einsum call or the steps' program) and torch on the CPU (one einsum call; its steps' choice
#: against one einsum is priced per shape, so a shape past one einsum call is planned).
_STRUCTURED = ("numpy", "torch")


def keep_call(backend: Backend, plan: Plan, arrays: Sequence[Any], len_groups: dict[str, int],
              run: Callable[..., Any], optimize: Any, limit: Any,
              layouts: tuple[int, ...] | None) -> None:
    """Keep a default-option call's runner in `HOT`, and its structure (made when a new
    shape first asks for it) for the new shapes to come."""
    subscripts = plan.parsed.subscripts
    remember_call((subscripts, *map(operand_key, arrays), *len_groups.items()), subscripts, run)
    if backend.name in _STRUCTURED and len(subscripts) <= HOT_KEY_MAX_CHARS:
        remember_structure(
            structure_key_of(subscripts, arrays, tuple(len_groups.items())),
            lambda: structure_for(backend, plan, optimize, limit, layouts))


def new_shape(subscripts: str, operands: tuple[Any, ...], hot_key: tuple[Any, ...]
              ) -> Callable[..., Any] | None:
    """The runner of a default-option call of a new shape whose structure is known
    (`calls.structures`: numpy, and torch on the CPU), now in the hot dict; None: the checked
    route takes the call."""
    n = len(operands)
    try:
        structure = known_structure(structure_key_of(subscripts, operands, hot_key[n + 1:]))
    except (AttributeError, TypeError):   # (no flags or dtype, a symbolic size: never known)
        return None
    if structure is None:
        return None
    run = structure.runner(tuple([tuple(k[1]) if k and isinstance(k[0], type) else k
                                  for k in hot_key[1:n + 1]]))
    if run is DECLINED:
        return None
    remember_call(hot_key, subscripts, run)
    return run  # type: ignore[no-any-return]


def structure_for(backend: Backend, plan: Plan, optimize: Any, limit: Any,
                  layouts: tuple[int, ...] | None) -> Structure:
    """The `Structure` of a default-option call: its programs compiled by the backend, a new
    shape's runner provisional until its full search (`Provisional`)."""
    module, model = load(backend), backend.cost_model or NUMPY_MODEL
    limit = backend_limit(backend, limit)
    options = _DEFAULT_OPTIONS

    def compile_direct(schedule: Schedule) -> Callable[..., Any]:
        return module.compile(plan, schedule, options)  # (one einsum call: any shape)

    def compile_steps(schedule: Schedule, specs: Any) -> Callable[[Any], Callable[..., Any]] | None:
        if backend is _NUMPY:
            return module.compile_any_extents(schedule, specs, options)  # type: ignore[no-any-return]
        # torch: the structure's steps as its model ran them, one einsum call along a path
        # (any shape), or declined (the steps' choice is then priced per shape)
        one_call = as_one_einsum(schedule, "auto", model)
        if one_call.strategy != "direct":
            return None
        run = module.compile(plan, one_call, options)
        return lambda ext: run

    def provisional(run: Callable[..., Any], after: int,
                    new_shapes: tuple[tuple[int, ...], ...]) -> Callable[..., Any]:
        # (the new shape's plan is made only when a later call needs it: other layouts, or
        # the upgrade to the full search)
        def new_plan() -> Plan:
            return make_plan(plan.parsed.subscripts, new_shapes, plan.supplements)

        if layouts is None and backend is _NUMPY:
            run = _guarded(run, backend, new_plan, optimize, options, limit)

        def full() -> Callable[..., Any]:
            return runner(backend, new_plan(), optimize, options, limit, layouts, tiered=False)

        return Provisional(run, after, full)   # (it counts the call it is made for)

    return Structure(plan, layouts, backend.uses_einsum, model, limit,
                     compile_direct, compile_steps, provisional,
                     runs_cheap_plans=getattr(model, "cheap_first_plans", True),
                     one_call_for_steps=backend is not _NUMPY)
