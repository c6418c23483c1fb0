"""The torch time model: run a schedule's pairwise steps, or one ``torch.einsum`` along its path?

Eager torch pays a Python-to-C++ dispatch for every operation, so a pairwise step (a few views,
a ``matmul``, a reshape) costs several dispatches, while ``torch.einsum`` along the same path
is one call whose C++ loop permutes, reshapes and multiplies each pair itself.  The arithmetic
is the same BLAS products either way; what differs is the per-operation overhead and the copies
each route makes.  This module prices both from a `Schedule` (pure Python, no torch import), so
the choice is made once per shape signature, as data, like every other execution decision.

`TorchCostModel` is a `model.protocol.CostModel`: the torch registry entry declares
``cost_model=TORCH_MODEL``, the api plans torch calls with it, and `schedule.make_schedule`
asks its `one_einsum_path` whether the schedule runs as its steps or as one einsum call along a
path (``strategy='direct'`` with that ``path``).  The torch backend only compiles the answer.
Its prices are the ``torch_*`` fields of the active `Profile` (``contractions calibrate --torch``
measures them; ``python bench/refit_torch_model.py`` prints a re-fit and the errors of both).

>>> from contractions.plan import make_plan
>>> from contractions.schedule import make_schedule
>>> plan = make_plan('WCa,Caib,WCi->WCb', ((4, 2, 3), (2, 3, 5, 6), (4, 2, 5)), ())
>>> TORCH_MODEL.choose(make_schedule(plan, 'greedy'))[0]     # tiny: one call beats the steps
'einsum'
>>> plan = make_plan('Wa,Wab->Wb', ((4096, 64), (4096, 64, 64)), ())
>>> steps = make_schedule(plan, cost_model=TORCH_MODEL)
>>> TORCH_MODEL.choose(steps)[0]   # einsum's permute would copy the big operand
'steps'
>>> make_schedule(plan, cost_model=TORCH_MODEL).strategy   # the schedule carries the choice
'pairwise'
>>> plan = make_plan('OIJ,KI,KJ->KO', ((8,) * 6, (8,) * 4, (8,) * 4), (('O', 2),))
>>> make_schedule(plan).strategy, make_schedule(plan, cost_model=TORCH_MODEL).strategy
('pairwise', 'direct')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from .numpy_prices import NumpyCostModel, roofline
from .profile import Profile, active_profile

__all__ = ["TORCH_MODEL", "TorchCostModel"]


def _torch_price(name: str) -> Any:
    """A read-only attribute of a `TorchCostModel`: its profile's ``torch_<name>``."""
    return property(lambda self: getattr(self.profile, f"torch_{name}"))


@dataclass(frozen=True)
class TorchCostModel:
    """Modelled nanoseconds of the two eager torch routes for one schedule, at the prices of
    ``profile`` (its ``torch_*`` fields, read through the properties below without the prefix).

    ``ns_per_op``: one eager torch operation called from Python (permute, reshape, matmul,
    sum, ...), dispatch included; ``ns_per_einsum_call``: the fixed cost of one
    ``torch.einsum`` call given its path (equation parsing, operand bookkeeping);
    ``ns_per_einsum_pair``: each pairwise contraction inside it (its permutes, reshapes and the
    ``bmm`` dispatch); ``ns_per_matmul_call``: each matrix product of a batched product (torch
    runs small batched products one by one); ``ns_per_mac``: one multiply-add of the products (the same BLAS on both
    routes); ``ns_per_copied_element``: one element gathered into a new layout;
    ``einsum_copy_share``: the share of each pair's operand elements torch's einsum copies
    (it permutes both operands to batch-free-contract order, which is a copy unless they
    already are in that order); ``steps_margin``: the steps are taken only when modelled at
    most this share of the best einsum route (one einsum along torch's own path is never
    slower than ``torch.einsum``, so the steps must clearly win to be worth the risk);
    ``steps_model``: what prices the steps' own kernels and layouts for the schedule (the
    same BLAS products and copies as numpy's: numpy's model on the same profile).
    """

    profile: Profile = field(default_factory=active_profile)
    steps_model: NumpyCostModel = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps_model", NumpyCostModel(self.profile))

    def with_prices(self, **prices: Any) -> TorchCostModel:
        """This model with some of its profile's prices changed (`Profile` field names:
        ``torch_ns_per_op=...``)."""
        return replace(self, profile=replace(self.profile, **prices))

    @property
    def priced_by(self) -> str:
        """Where the prices come from, in one line (``explain`` prints it)."""
        return self.profile.describe()

    # the profile's torch prices under the names the formulas use (``torch_<name>``)
    ns_per_op = _torch_price("ns_per_op")
    ns_per_matmul_call = _torch_price("ns_per_matmul_call")
    ns_per_einsum_call = _torch_price("ns_per_einsum_call")
    ns_per_einsum_pair = _torch_price("ns_per_einsum_pair")
    ns_per_mac = _torch_price("ns_per_mac")
    ns_per_copied_element = _torch_price("ns_per_copied_element")
    einsum_copy_share = _torch_price("einsum_copy_share")
    steps_margin = _torch_price("steps_margin")

    # ------------------------------------------------------------------ the two routes
    def steps_features(self, schedule: Any) -> tuple[float, float, float, float]:
        """(torch operations dispatched, matrix products, elements copied, multiply-adds) of
        the steps route."""
        ops, calls, copied = 1.0, 0.0, 0.0   # the dtype check
        for prep in schedule.preparations:
            ops += (prep.squeeze is not None) + len(prep.diagonals) + bool(prep.sum_axes)
        for step in schedule.steps:
            ops += bool(step.sum_x) + bool(step.sum_y)
            if step.kernel == "einsum":
                ops += 3   # torch.einsum on two operands: parse, permute, bmm
                calls += _size(schedule, step.batch)
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
            if step.kernel == "matmul" and step.x_view is not None and step.y_view is not None:
                copied += _broadcast_copies(step.x_view.shape, step.y_view.shape)
                calls += math.prod(max(a, b) for a, b in zip(
                    _padded(step.x_view.shape[:-2], step.y_view.shape[:-2]),
                    _padded(step.y_view.shape[:-2], step.x_view.shape[:-2])))
        finish = schedule.finish
        if finish is not None:
            ops += (finish.permutation is not None) + finish.reshape + finish.copy
        return ops, calls, copied, _macs(schedule)

    def einsum_features(self, schedule: Any, path: Any = None) -> tuple[float, float, float, float]:
        """(pairwise contractions, matrix products, operand elements of those pairs,
        multiply-adds) of one ``torch.einsum`` along ``path`` (default: the schedule's)."""
        path = schedule.path if path is None else path
        extents = schedule.extents
        work = [tuple(dict.fromkeys(t)) for t in schedule.inputs]
        pairs = calls = copied = macs = 0.0
        for pair in path:
            if len(pair) != 2:   # a single operand reduced on its own: torch does it in place
                work.append(work.pop(pair[0]))
                continue
            i, j = sorted(pair)
            y, x = work.pop(j), work.pop(i)
            later = {lab for t in work for lab in t} | set(schedule.output)
            both = set(x) | set(y)
            kept = tuple(lab for lab in dict.fromkeys(x + y) if lab in later)
            batch = [lab for lab in kept if lab in x and lab in y]
            pairs += 1
            calls += math.prod(extents[lab] for lab in batch)
            copied += _size(schedule, x) + _size(schedule, y)
            macs += math.prod(extents[lab] for lab in both)
            work.append(kept)
        return pairs, calls, copied, macs

    def steps_ns(self, schedule: Any) -> float:
        """The schedule's own steps on torch: a dispatch per operation, its copies, its MACs."""
        if schedule.strategy == "direct":
            return self.one_einsum_ns(schedule) + self.ns_per_op   # one einsum call (and a finish)
        ops, calls, copied, macs = self.steps_features(schedule)
        return (ops * self.ns_per_op + calls * self.ns_per_matmul_call
                + copied * self.ns_per_copied_element + macs * self.ns_per_mac)

    def one_einsum_ns(self, schedule: Any, path: Any = None) -> float:
        """One ``torch.einsum`` along ``path`` (default: the schedule's path)."""
        pairs, calls, copied, macs = self.einsum_features(schedule, path)
        return (self.ns_per_einsum_call + pairs * self.ns_per_einsum_pair
                + calls * self.ns_per_matmul_call
                + self.einsum_copy_share * copied * self.ns_per_copied_element
                + macs * self.ns_per_mac)

    def roofline_ns(self, flops: int, moved: int, touched: int) -> float:
        return roofline(self.profile, flops, moved, touched)   # (the same CPU and memory as numpy's)

    def contraction_floor_ns(self, batch: int, rows: int, contract: int, cols: int) -> float | None:
        return None   # (no floor derived for these prices: every candidate path is priced)

    def one_einsum_path(self, schedule: Any, optimize: Any = "auto") -> tuple[tuple[int, ...], ...] | None:
        """The schedule's question (`model.protocol.CostModel`): the path of the one
        ``torch.einsum`` to run instead of the steps, or None to run the steps.

        With the default ``optimize`` the einsum runs along the path ``torch.einsum`` itself
        would search for (opt_einsum's ``'auto'`` on the same problem, found here once instead
        of on every call) unless the schedule's is modelled at most ``steps_margin`` of it;
        with an explicit ``optimize``, along the schedule's.  The steps are kept only when modelled at
        most ``steps_margin`` of the best einsum and free of ``einsum`` kernels (torch runs a
        pairwise einsum through the same C++ as the single call, plus the dispatches; its
        copies of strided operands are what the model prices worst); a schedule without an
        einsum string (more than 52 labels) or with blocks always runs its steps.
        """
        if schedule.einsum is None or schedule.blocking is not None:
            return None
        cost, path = self.one_einsum_ns(schedule), schedule.path
        own = torch_default_path(schedule) if optimize == "auto" else None
        if own is not None and own != schedule.path:
            # torch's own path unless the schedule's is clearly cheaper: measured, the model
            # ranks two einsum paths of equal MACs no better than chance, and torch's own is
            # by construction never slower than torch.einsum (the bar a torch user sets).
            own_cost = self.one_einsum_ns(schedule, own)
            if not cost < self.steps_margin * own_cost:
                cost, path = own_cost, own
        if (schedule.strategy == "pairwise" and all(s.kernel != "einsum" for s in schedule.steps)
                and self.steps_ns(schedule) < self.steps_margin * cost):
            return None
        return path

    def choose(self, schedule: Any) -> tuple[str, Any]:
        """``('steps', None)`` or ``('einsum', path)``: `one_einsum_path` as a route."""
        path = self.one_einsum_path(schedule)
        return ("steps", None) if path is None else ("einsum", path)

    # ------------------------------------------------------------- the schedule's protocol
    # The pairwise steps themselves (kernels, layouts, blocks) are priced as on numpy: the same
    # BLAS products and copies, so the fitted numpy constants (``steps_model``) answer.
    def matmul_ns(self, calls: int, m: int, k: int, n: int) -> float:
        return self.steps_model.matmul_ns(calls, m, k, n)

    def batched_right_transpose_ns(self, calls: int, m: int, n: int) -> float:
        return self.steps_model.batched_right_transpose_ns(calls, m, n)

    def split_products(self, lead: int, calls: int, m: int, k: int, n: int,
                       products_ns: float) -> tuple[int, float]:
        return 1, products_ns   # the library spreads a stack over its threads itself

    def copy_ns(self, elements: int) -> float:
        return self.steps_model.copy_ns(elements)

    def fresh_buffer_ns(self, elements: int) -> float:
        return self.steps_model.fresh_buffer_ns(elements)

    def result_buffer_ns(self, elements: int) -> float:
        return self.steps_model.result_buffer_ns(elements)

    def promotes_contracted(self) -> bool:
        return self.steps_model.promotes_contracted()

    def call_ns(self, steps: int) -> float:
        # one eager torch operation per step (and the call's own): torch's dispatch, not numpy's
        return self.ns_per_op * (steps + 1)

    def multiply_ns(self, elements: int, inner: int = 0) -> float:
        return self.steps_model.multiply_ns(elements, inner)

    def outer_product_ns(self, elements: int, inner: int) -> dict[str, float]:
        # torch.einsum runs an outer product as the same broadcast mul, behind its own parse:
        # one kernel only (numpy's einsum-loop advantage does not carry over)
        return {"multiply": self.steps_model.multiply_ns(elements, inner)}

    def einsum_ns(self, macs: int, strided: bool = False, inner: int = 0) -> float:
        return self.steps_model.einsum_ns(macs, strided, inner)

    def einsum_step_max_macs(self) -> int:
        return self.steps_model.einsum_step_max_macs()

    def dot_matmul_min_length(self) -> int:
        return self.steps_model.dot_matmul_min_length()

    def permuted_within_einsum_elements(self) -> int:
        return 0   # torch offers no einsum kernel for broadcast products (`outer_product_ns`)

    def block_ns(self, steps: int) -> float:
        return self.steps_model.block_ns(steps)

    def direct_max_naive_cost(self, labels: int) -> int:
        return self.steps_model.direct_max_naive_cost(labels)

    def memory_elements(self) -> int:
        return self.steps_model.memory_elements()

    def gather_window_elements(self) -> int:
        return self.steps_model.gather_window_elements()

    def gather_ns(self, elements: int, passes: int) -> float:
        return self.steps_model.gather_ns(elements, passes)

    def streamed_ns(self, elements: int, kernel: str = "matmul") -> float:
        # torch.einsum runs a pair as a bmm, not numpy's streaming loop: one price for both
        return self.steps_model.streamed_ns(elements)

    def strided_read_ns(self, elements: int, access: Any) -> float:
        return self.steps_model.strided_read_ns(elements, access)

    def cache_block_elements(self) -> int:
        # not measured for torch: an unbounded torch call stays one einsum or a few kernels
        return 0


def _macs(schedule: Any) -> float:
    return float(schedule.flops if schedule.strategy == "pairwise" else schedule.naive_flops) / 2


def _broadcast_copies(x: tuple[int, ...], y: tuple[int, ...]) -> int:
    """Elements torch.matmul materialises when one factor's batch broadcasts against the
    other's (it expands the smaller batch to the full one; numpy strides over it instead)."""
    bx, by = x[:-2], y[:-2]
    width = max(len(bx), len(by))
    bx, by = (1,) * (width - len(bx)) + bx, (1,) * (width - len(by)) + by
    full = math.prod(max(a, b) for a, b in zip(bx, by))
    copied = 0
    for batch, matrix in ((bx, x[-2:]), (by, y[-2:])):
        if math.prod(batch) < full:
            copied += full * math.prod(matrix)
    return copied


def _padded(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return (1,) * max(len(b) - len(a), 0) + tuple(a)


def torch_default_path(schedule: Any) -> tuple[tuple[int, ...], ...] | None:
    """The path ``torch.einsum`` would take (opt_einsum ``'auto'`` on the schedule's shapes)."""
    if len(schedule.inputs) < 3 or schedule.einsum is None:
        return None
    from opt_einsum import paths  # a core dependency; imported here to keep importing this module free

    lhs, out = schedule.einsum.split("->")
    terms = lhs.split(",")
    sizes = {ch: 1 for term in terms for ch in term}
    sizes.update({ch: n for term, shape in zip(terms, schedule.shapes)
                  for ch, n in zip(term, shape) if n != 1})
    # (what opt_einsum.contract_path(..., optimize='auto') runs, without its parsing and report)
    path = paths.auto([frozenset(term) for term in terms], frozenset(out), sizes, None)
    return tuple(tuple(int(k) for k in pair) for pair in path)


def _size(schedule: Any, labels: tuple[int, ...]) -> int:
    extents = schedule.extents
    return math.prod(extents[lab] for lab in labels)


#: The torch backend's model, priced by the active profile (built-in: fitted on a 2-core x86 CPU
#: with torch 2.13).
TORCH_MODEL = TorchCostModel(active_profile())
