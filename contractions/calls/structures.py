"""New shapes of a known structure: run at once, on a program compiled once per structure.

The 'reuse' tier (`calls.tiers`) keeps a structure's decisions; a `Structure` keeps its
compiled program, whose shapes are read from the call's extents
(`backends.compile.compile_any_extents`), so a new shape costs its extents, a price check and
the arithmetic (dev/decisions.md 50).  It declines (the checked route then plans the call,
errors included) unless the extents agree across operands, none is 0, the strategy they take
has a template of this structure, and for the steps the full search does not pay at once
(`tiers.upgrade_after`) and the peak fits the memory limit.  The shape then joins the hot dict
as a provisional runner.  Only default-option numpy calls come here.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..model.protocol import CostModel
from ..plan import PLAN_CACHE_SIZE, Plan
from ..schedule import EINSUM_LETTERS, Schedule
from ..schedule.extent_specs import extent_specs, peak_at, price_at
from ..schedule.lowering import DIRECT_MAX_OPERANDS
from ..schedule.memory import _resolve_limit
from . import tiers
from .remembered import structure_key, templates_of

__all__ = ["DECLINED", "Structure", "structure_key_of"]

#: What `Structure.run` returns when the checked route must take the call.
DECLINED: Any = object()


def structure_key_of(subscripts: str, operands: Sequence[Any], len_items: tuple[Any, ...]
                     ) -> tuple[Any, ...]:
    """The key of a default-option numpy call's structure: the string, each operand's axes of
    extent 1, dtype and memory order, and the ``len_`` items."""
    key: list[Any] = [subscripts]
    for op in operands:
        if type(op) is _ndarray:
            flags = op.flags
            key.append((tuple([n == 1 for n in op.shape]), op.dtype, flags.c_contiguous,
                        flags.f_contiguous))
        else:   # (a torch tensor: its type and device decide the backend and its prices)
            key.append((type(op), tuple([n == 1 for n in op.shape]), op.dtype,
                        getattr(op, "is_cuda", None)))
    key.extend(len_items)
    return tuple(key)


_ndarray = np.ndarray


class Structure:
    """The runners of one structure at any extents (module docstring).

    ``compile_direct(schedule)`` compiles a one-einsum schedule (its runner takes any shape);
    ``compile_steps(schedule, specs)`` a pairwise one into ``for_shape(ext) -> runner``;
    ``provisional(run, upgrade_after, shapes)`` wraps a shape's runner so that its
    ``upgrade_after``-th call runs the full search.
    """

    __slots__ = ("firsts", "checks", "n_labels", "distinct", "direct_limit", "key", "search",
                 "limit", "compile_direct", "compile_steps", "provisional", "programs",
                 "runs_cheap_plans", "one_call_for_steps")

    def __init__(self, plan: Plan, layouts: tuple[int, ...] | None, use_einsum: bool,
                 cost_model: CostModel, limit: Any,
                 compile_direct: Callable[[Schedule], Callable[..., Any]],
                 compile_steps: Callable[[Schedule, Any], Callable[[Any], Callable[..., Any]] | None],
                 provisional: Callable[..., Callable[..., Any]],
                 runs_cheap_plans: bool = True, one_call_for_steps: bool = False) -> None:
        exp = plan.expansion
        firsts: list[tuple[int, int, int]] = []
        checks: list[tuple[int, int, int]] = []
        seen: set[int] = set()
        for k, (labels, shape) in enumerate(zip(exp.inputs, plan.shapes)):
            for axis, (label, n) in enumerate(zip(labels, shape)):
                if n == 1:
                    continue  # (the key fixes which axes are 1)
                (checks if label in seen else firsts).append((k, axis, label))
                seen.add(label)
        self.firsts, self.checks = tuple(firsts), tuple(checks)
        self.n_labels = len(plan.extents)
        self.distinct = tuple(sorted({lab for term in exp.inputs for lab in term}))
        # One einsum call for small work, as `lowering.lower_candidates` decides it.
        fits = (use_einsum and len(exp.inputs) <= DIRECT_MAX_OPERANDS
                and len(self.distinct) <= len(EINSUM_LETTERS))
        self.direct_limit = (-1 if not fits else math.inf if len(exp.inputs) == 1
                             else cost_model.direct_max_naive_cost(len(self.distinct)))
        self.runs_cheap_plans = runs_cheap_plans   # False: every shape is planned (GPU models)
        # True (torch): past one einsum call's threshold with no steps planned yet, the
        # structure's one einsum call runs provisionally (what the model picks for most such
        # calls), priced by its template scaled by the naive FLOPs, until the full search
        self.one_call_for_steps = one_call_for_steps
        self.key = structure_key(plan, layouts, use_einsum, cost_model)
        self.search = tiers.search_ns(len(exp.inputs), cost_model)
        self.limit = limit
        self.compile_direct, self.compile_steps = compile_direct, compile_steps
        self.provisional = provisional
        # template schedule's id -> (the schedule, its runner or for_shape; None: not compiled)
        self.programs: dict[int, tuple[Schedule, Any]] = {}

    def extents(self, shapes: Sequence[tuple[int, ...]]) -> list[int] | None:
        """Each label's extent, or None where the operands disagree."""
        ext = [1] * self.n_labels
        for k, axis, label in self.firsts:
            ext[label] = shapes[k][axis]
        for k, axis, label in self.checks:
            if shapes[k][axis] != ext[label]:
                return None
        return ext

    def _program(self, strategy: str) -> tuple[Schedule, Any] | None:
        known = templates_of(self.key).get(strategy)
        if known is None:
            return None
        schedule = known[0]
        if schedule.blocking is not None and schedule.blocking.base is not None:
            # a blocked template: its unblocked decisions run the shapes that fit the limit
            # (the others are declined below, and blocked by the reuse tier)
            schedule = schedule.blocking.base
        found = self.programs.get(id(schedule))
        if found is None or found[0] is not schedule:
            if strategy == "direct":
                found = (schedule, self.compile_direct(schedule))
            else:
                specs = extent_specs(schedule)
                steps = None if specs is None else self.compile_steps(schedule, specs)
                found = (schedule, None if steps is None else (specs, steps))
            if len(self.programs) >= 8:
                self.programs.clear()
            self.programs[id(schedule)] = found
        return found

    def runner(self, shapes: Sequence[tuple[int, ...]]) -> Callable[..., Any] | Any:
        """The runner of a new shape of this structure, or `DECLINED`."""
        ext = self.extents(shapes)
        if ext is None or 0 in ext or not self.runs_cheap_plans:
            return DECLINED
        naive = math.prod([ext[lab] for lab in self.distinct])
        direct = naive <= self.direct_limit
        # A blocked template's base is checked against the limit before anything is compiled
        # (beyond it: blocks again, the reuse tier's), and only once.
        base = None if direct else self._blocked_base()
        if base is not None and self._beyond_limit(shapes, ext, base):
            return DECLINED
        program = self._program("direct" if direct else "pairwise")
        if program is None and not direct and self.one_call_for_steps:
            one_call = self._program("direct")
            if one_call is None:
                return DECLINED
            template = one_call[0]
            cost = template.cost_ns * naive / max(1, math.prod(
                [template.extents[lab] for lab in self.distinct]))
            after = tiers.upgrade_after(self.search, cost)
            if after <= 1:
                return DECLINED
            return self.provisional(one_call[1], after, shapes)
        if program is None:
            return DECLINED
        schedule, compiled = program
        if direct:
            return compiled
        if compiled is None:
            return DECLINED
        specs, for_shape = compiled
        price = price_at(specs, ext)
        after = tiers.upgrade_after(self.search, price.cost_ns)
        if after <= 1:
            return DECLINED   # large work: the full search pays at once
        if base is None and self._beyond_limit(shapes, ext, schedule, price.steps_size):
            return DECLINED   # another order or blocks: the full search's job
        return self.provisional(for_shape(ext), after, shapes)

    def _blocked_base(self) -> Schedule | None:
        """The unblocked schedule a blocked steps template cut, or None."""
        known = templates_of(self.key).get("pairwise")
        blocking = known[0].blocking if known is not None else None
        return blocking.base if blocking is not None else None

    def _beyond_limit(self, shapes: Sequence[tuple[int, ...]], ext: list[int], schedule: Schedule,
                      steps_size: int | None = None) -> bool:
        """Does ``schedule`` at these extents break the memory limit?  (With ``steps_size``, a
        bound settles it first where it can: seven buffers of each step's span plus twice
        the operands.)"""
        limit = _resolve_limit(self.limit, tuple(shapes), tuple(ext[lab] for lab in schedule.output))
        if limit is None:
            return False
        if steps_size is not None and 7 * steps_size + 2 * sum(math.prod(s) for s in shapes) <= limit:
            return False
        return peak_at(schedule, ext) > limit


# key -> its Structure, or the function that makes it (made on the structure's first new
# shape: a string called at one shape only never pays for it)
_STRUCTURES: dict[tuple[Any, ...], Structure | Callable[[], Structure]] = {}
_LOCK = threading.Lock()


def known_structure(key: tuple[Any, ...]) -> Structure | None:
    """The structure kept for ``key`` (`structure_key_of`), or None."""
    found = _STRUCTURES.get(key)
    if found is None or isinstance(found, Structure):
        return found
    structure = found()
    with _LOCK:
        if _STRUCTURES.get(key) is found:
            _STRUCTURES[key] = structure
    return structure


def remember_structure(key: tuple[Any, ...], make: Callable[[], Structure]) -> None:
    """Keep a structure, made by ``make`` when a new shape first asks for it (once per key;
    the dict is cleared when full)."""
    if key in _STRUCTURES:
        return
    with _LOCK:
        if len(_STRUCTURES) >= PLAN_CACHE_SIZE:
            _STRUCTURES.clear()
        _STRUCTURES.setdefault(key, make)


def clear_structures() -> None:
    """Forget every structure (its next new shape plans through the checked route)."""
    with _LOCK:
        _STRUCTURES.clear()
