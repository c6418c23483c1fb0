"""The torch time model: run a schedule's pairwise steps, or one ``torch.einsum`` along its path?

Eager torch pays a Python-to-C++ dispatch for every operation, so a pairwise step (a few views,
a ``matmul``, a reshape) costs several dispatches, while ``torch.einsum`` along the same path
is one call whose C++ loop permutes, reshapes and multiplies each pair itself.  The arithmetic
is the same BLAS products either way; what differs is the per-operation overhead and the copies
each route makes.  This module prices both from a `Schedule` (pure Python, no torch import), so
the choice is made once per shape signature, as data, like every other execution decision.

The constants are tunables fitted on one machine (``python bench/refit_torch_model.py`` prints
re-fitted values; it edits nothing).  ``TORCH_MODEL`` is the instance the torch backend consults.

>>> from contractions.plan import make_plan
>>> from contractions.schedule import make_schedule
>>> plan = make_plan('WCa,Caib,WCi->WCb', ((4, 2, 3), (2, 3, 5, 6), (4, 2, 5)), ())
>>> TORCH_MODEL.choose(make_schedule(plan, 'greedy'))     # tiny: one call beats the steps
'einsum'
>>> plan = make_plan('Wij,Wjk->Wik', ((64, 200, 300), (64, 300, 400)), ())
>>> TORCH_MODEL.choose(make_schedule(plan, 'greedy'))     # one big batched product: equal work
'steps'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["TORCH_MODEL", "TorchCostModel"]


@dataclass(frozen=True)
class TorchCostModel:
    """Modelled nanoseconds of the two eager torch routes for one schedule.

    ``ns_per_op``: one eager torch operation called from Python (permute, reshape, matmul,
    sum, ...), dispatch included; ``ns_per_einsum_call``: the fixed cost of one
    ``torch.einsum`` call given its path (equation parsing, operand bookkeeping);
    ``ns_per_einsum_pair``: each pairwise contraction inside it (its permutes, reshapes and the
    ``bmm`` dispatch); ``ns_per_mac``: one multiply-add of the products (the same BLAS on both
    routes); ``ns_per_copied_element``: one element gathered into a new layout;
    ``einsum_copy_share``: the share of each pair's operand elements torch's einsum copies
    (it permutes both operands to batch-free-contract order, which is a copy unless they
    already are in that order).
    """

    ns_per_op: float = 1500.0
    ns_per_einsum_call: float = 6000.0
    ns_per_einsum_pair: float = 2500.0
    ns_per_mac: float = 0.02
    ns_per_copied_element: float = 0.4
    einsum_copy_share: float = 0.75

    # ------------------------------------------------------------------ the two routes
    def steps_ns(self, schedule: Any) -> float:
        """The schedule's own steps on torch: a dispatch per operation, its copies, its MACs."""
        if schedule.strategy == "direct":
            return self.einsum_ns(schedule) + self.ns_per_op   # one einsum call (and a finish)
        ops, copied = 1.0, 0.0   # the dtype check
        for prep in schedule.preparations:
            ops += (prep.squeeze is not None) + len(prep.diagonals) + bool(prep.sum_axes)
        for step in schedule.steps:
            ops += bool(step.sum_x) + bool(step.sum_y)
            if step.kernel == "einsum":
                ops += 3   # torch.einsum on two operands: parse, permute, bmm
                continue
            ops += 1 + (step.kernel == "matmul")   # the kernel (and the result's reshape)
            for view, size in ((step.x_view, _size(schedule, step.x_labels)),
                               (step.y_view, _size(schedule, step.y_labels))):
                if view is None:
                    continue
                ops += 1 + (view.permutation is not None) + view.swap_last + view.contiguous_first
                if view.gather:
                    ops += 1
                    copied += size
        finish = schedule.finish
        if finish is not None:
            ops += (finish.permutation is not None) + finish.reshape + finish.copy
        return (ops * self.ns_per_op + copied * self.ns_per_copied_element
                + self._macs(schedule) * self.ns_per_mac)

    def einsum_ns(self, schedule: Any) -> float:
        """One ``torch.einsum`` along the schedule's path."""
        pairs, copied = 0, 0.0
        if schedule.strategy == "pairwise" and schedule.steps:
            for step in schedule.steps:
                pairs += 1
                copied += _size(schedule, step.x_labels) + _size(schedule, step.y_labels)
        else:
            pairs = max(len(schedule.inputs) - 1, 0)
            copied = float(sum(math.prod(s) for s in schedule.shapes))
        return (self.ns_per_einsum_call + pairs * self.ns_per_einsum_pair
                + self.einsum_copy_share * copied * self.ns_per_copied_element
                + self._macs(schedule) * self.ns_per_mac)

    def choose(self, schedule: Any) -> str:
        """``'einsum'`` (one call along the path) or ``'steps'`` (the schedule's own steps).

        A schedule without an einsum string (more than 52 labels) or with blocks always runs
        its steps.
        """
        if schedule.einsum is None or schedule.blocking is not None:
            return "steps"
        return "einsum" if self.einsum_ns(schedule) < self.steps_ns(schedule) else "steps"

    @staticmethod
    def _macs(schedule: Any) -> float:
        return schedule.flops / 2 if schedule.strategy == "pairwise" else schedule.naive_flops / 2


def _size(schedule: Any, labels: tuple[int, ...]) -> int:
    extents = schedule.extents
    return math.prod(extents[lab] for lab in labels)


#: The constants the torch backend uses (fitted on a 2-core x86 CPU with torch 2.13).
TORCH_MODEL = TorchCostModel()
