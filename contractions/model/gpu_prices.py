"""The GPU time model: on a CUDA device, a step costs its kernel launch, not numpy's loop prices.

A GPU runs the vocabulary's products in microseconds or less; what a call pays is the host
side: each kernel launched from Python (a gather, a ``matmul``, a sum) costs a dispatch and a
launch, a view (permute, reshape) a dispatch, and the framework's own einsum its parsing and,
per pairwise contraction inside it, the same few kernels.  So the model counts kernels and
views, adds the arithmetic at GPU throughput (multiply-adds and copied elements, both tiny per
unit), charges a batched product one launch however many matrices it stacks (cuBLAS's strided
batched call: fewer, larger batched products win), and has no caches, page faults or threads
to price.  dev/decisions.md (decision 48) gives the rule and its reasons.

`GpuCostModel` is a `model.protocol.CostModel`.  Two instances: `CUPY_MODEL` (the CuPy registry
entry's ``cost_model``: ``cupy.einsum`` is Python code whose parsing and per-pair logic cost far
more than the kernels it launches, so the schedule's own steps usually win) and
`TORCH_CUDA_MODEL` (torch tensors on a CUDA device: ``torch.einsum``'s pairs run in C++, so one
einsum call along a path usually wins).  The constants are estimates from the frameworks'
published per-call overheads and an H200's throughput, not fitted on a GPU (calls ran 5-20x
their modelled time), so the model does not have the last word on the route: with the default
``optimize`` the schedule keeps its steps and the CUDA runner measures the steps against one
framework einsum along the path on the shape's first calls (``backends/measured.py``,
dev/decisions.md, decision 49).  `modelled_path` is the model's own pick, which runs until
then (and while a CUDA graph is captured) and which ``explain`` prints.

>>> from contractions.plan import make_plan
>>> from contractions.schedule import make_schedule
>>> plan = make_plan('WCa,Caib,WCi->WCb', ((4, 2, 3), (2, 3, 5, 6), (4, 2, 5)), ())
>>> schedule = make_schedule(plan, use_einsum=False, cost_model=TORCH_CUDA_MODEL)
>>> schedule.strategy          # the steps are kept: the route is measured on the first calls
'pairwise'
>>> TORCH_CUDA_MODEL.modelled_path(schedule) is not None   # the model's pick: one torch.einsum
True
>>> CUPY_MODEL.modelled_path(schedule) is None             # cupy: the steps
True
>>> make_schedule(plan, optimize=False, cost_model=CUPY_MODEL).strategy   # asked for: one einsum
'direct'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .torch_prices import TORCH_MODEL, torch_default_path

__all__ = ["CUPY_MODEL", "TORCH_CUDA_MODEL", "GpuCostModel"]


@dataclass(frozen=True)
class GpuCostModel:
    """Modelled nanoseconds of a schedule on a GPU, for one framework.

    ``ns_per_kernel``: one kernel-launching operation called from Python (dispatch and launch);
    ``ns_per_view``: one host-only operation (a permute, a reshape: no kernel);
    ``ns_per_einsum_call``: the framework einsum's fixed host cost (parsing, checks);
    ``ns_per_einsum_pair``: its host cost per pairwise contraction, beyond the kernels;
    ``ns_per_einsum_kernel``: one kernel launched from inside the einsum (C++ for torch, Python
    for CuPy); ``einsum_kernels_per_pair``: the kernels each of its pairs launches (the two
    transposing copies and the product);
    ``ns_per_mac``: one multiply-add of a product (GPU throughput, float32);
    ``ns_per_element``: one element read and written by a copy or an elementwise kernel;
    ``einsum_copy_share``: the share of each pair's operand elements the einsum copies (it
    permutes both to batch-free-contract order, a copy unless they already are);
    ``steps_margin``: the model picks the steps only when modelled at most this share of the
    one einsum call (which is, by construction, what the framework's own einsum does);
    ``measured``: with an optimizer (not ``optimize=False``) the schedule keeps its steps and
    the backend measures the routes (`modelled_path` is then the first guess); False: the
    model's pick is the schedule (as the benchmark's forced routes use it).
    """

    ns_per_kernel: float
    ns_per_view: float
    ns_per_einsum_call: float
    ns_per_einsum_pair: float
    ns_per_einsum_kernel: float
    einsum_kernels_per_pair: float = 3.0
    ns_per_mac: float = 7e-5
    ns_per_element: float = 3e-3
    einsum_copy_share: float = 1.0
    steps_margin: float = 0.5
    measured: bool = True

    #: how ``explain`` names this model
    time_model_name = "GPU"
    #: ``explain``'s line on the prices' source (`Schedule.priced_by`)
    priced_by = "GPU time model estimates, not fitted (contractions/model/gpu_prices.py)"
    #: no cheap first plans (`calls.tiers`): these prices are estimates not yet fitted on a
    #: GPU (measured calls ran 5-20x their modelled time), so the rule that defers the full
    #: search until it costs a tenth of the calls' modelled time would defer it far too long;
    #: a GPU call's first plan is the full search
    cheap_first_plans = False

    # ------------------------------------------------------------------ the two routes
    def steps_features(self, schedule: Any) -> tuple[int, int, int, float, float]:
        """(kernels launched, host-only operations, einsum steps, elements copied,
        multiply-adds) of running the schedule's steps."""
        kernels = views = einsums = 0
        copied = 0.0
        extents = schedule.extents
        for prep in schedule.preparations:
            views += (prep.transpose is not None) + (prep.squeeze is not None) + len(prep.diagonals)
            kernels += bool(prep.sum_axes)
        for step in schedule.steps:
            kernels += bool(step.sum_x) + bool(step.sum_y)
            if step.kernel == "einsum":
                einsums += 1
                continue
            kernels += 1 + bool(step.reduce)
            views += step.kernel == "matmul"   # the product's reshape
            for view, labels in ((step.x_view, step.x_labels), (step.y_view, step.y_labels)):
                if view is None:
                    continue
                views += 1 + (view.permutation is not None) + view.swap_last
                if view.gather:
                    kernels += 1
                    copied += math.prod(extents[lab] for lab in labels)
        finish = schedule.finish
        if finish is not None:
            views += (finish.permutation is not None) + finish.reshape
            kernels += finish.copy
        macs = float(schedule.flops if schedule.strategy == "pairwise" else schedule.naive_flops) / 2
        return kernels, views, einsums, copied, macs

    def steps_ns(self, schedule: Any) -> float:
        """The schedule's own steps: a launch per kernel, a dispatch per view, the work."""
        if schedule.strategy == "direct":
            return self.one_einsum_ns(schedule)
        kernels, views, einsums, copied, macs = self.steps_features(schedule)
        return (kernels * self.ns_per_kernel + (views + 1) * self.ns_per_view
                + einsums * self._einsum_host_ns(1) + copied * self.ns_per_element
                + macs * self.ns_per_mac)

    def _einsum_host_ns(self, pairs: float) -> float:
        return self.ns_per_einsum_call + pairs * (
            self.ns_per_einsum_pair + self.einsum_kernels_per_pair * self.ns_per_einsum_kernel)

    def one_einsum_ns(self, schedule: Any, path: Any = None) -> float:
        """One framework einsum along ``path`` (default: the schedule's path)."""
        pairs, _, copied, macs = TORCH_MODEL.einsum_features(schedule, path)
        return (self._einsum_host_ns(pairs) + self.einsum_copy_share * copied * self.ns_per_element
                + macs * self.ns_per_mac)

    def roofline_ns(self, flops: int, moved: int, touched: int) -> float:
        # (the device's memory and product throughput these estimates assume: an element read
        # or written is half a copied one's price, a FLOP half a multiply-add's)
        return max(flops * self.ns_per_mac, moved * self.ns_per_element) / 2

    def contraction_floor_ns(self, batch: int, rows: int, contract: int, cols: int) -> float | None:
        return None   # (no floor derived for these prices: every candidate path is priced)

    def one_einsum_path(self, schedule: Any, optimize: Any = "auto") -> tuple[tuple[int, ...], ...] | None:
        """The schedule's question (`model.protocol.CostModel`): the path of the one framework
        einsum to run instead of the steps, or None to run the steps.

        ``optimize=False`` (one einsum call, asked for) takes the schedule's path.  Otherwise,
        for a ``measured`` model, None: the steps are kept and the backend measures them
        against one einsum along the path on the first calls; else `modelled_path`.
        """
        if schedule.einsum is None or schedule.blocking is not None:
            return None
        if optimize == "direct":
            return tuple(schedule.path)
        return None if self.measured else self.modelled_path(schedule, optimize)

    def modelled_path(self, schedule: Any, optimize: Any = "auto") -> tuple[tuple[int, ...], ...] | None:
        """The model's pick: the path of one framework einsum, or None for the steps.

        The einsum runs along the cheaper (modelled) of the schedule's path and opt_einsum's
        ``'auto'`` path (with ``optimize='auto'``), and the steps are picked only when modelled
        at most ``steps_margin`` of it; a schedule without an einsum string (more than 52
        labels) or with blocks always runs its steps.
        """
        if schedule.einsum is None or schedule.blocking is not None:
            return None
        cost, path = self.one_einsum_ns(schedule), tuple(schedule.path)
        own = torch_default_path(schedule) if optimize == "auto" else None
        if own is not None and own != path:
            own_cost = self.one_einsum_ns(schedule, own)
            if own_cost < cost:
                cost, path = own_cost, own
        if self.steps_ns(schedule) <= self.steps_margin * cost:
            return None
        return path

    # ------------------------------------------------------------- the schedule's protocol
    def matmul_ns(self, calls: int, m: int, k: int, n: int) -> float:
        # one launch for the whole stack (strided batched), whatever ``calls`` is
        return (self.ns_per_kernel + calls * m * k * n * self.ns_per_mac
                + calls * (m * k + k * n + m * n) * self.ns_per_element / 2)

    def batched_right_transpose_ns(self, calls: int, m: int, n: int) -> float:
        return 0.0   # cuBLAS reads a transposed factor through its op flag

    def split_products(self, lead: int, calls: int, m: int, k: int, n: int,
                       products_ns: float) -> tuple[int, float]:
        return 1, products_ns   # the library spreads a stack over its threads itself

    def copy_ns(self, elements: int) -> float:
        return self.ns_per_kernel + elements * self.ns_per_element

    def fresh_buffer_ns(self, elements: int) -> float:
        return 0.0   # the frameworks' memory pools hand out device memory without page faults

    def result_buffer_ns(self, elements: int) -> float:
        return 0.0

    def promotes_contracted(self) -> bool:
        return False   # a gather and a sum after are one kernel each: nothing to spare

    def call_ns(self, steps: int) -> float:
        return self.ns_per_view * (steps + 1)

    def multiply_ns(self, elements: int, inner: int = 0) -> float:
        return self.ns_per_kernel + 1.5 * elements * self.ns_per_element

    def outer_product_ns(self, elements: int, inner: int) -> dict[str, float]:
        return {"multiply": self.multiply_ns(elements, inner)}

    def einsum_ns(self, macs: int, strided: bool = False, inner: int = 0) -> float:
        # an einsum step: the framework einsum's host cost for one pair, the work off BLAS
        return self._einsum_host_ns(1) + macs * self.ns_per_mac * 4

    def einsum_step_max_macs(self) -> int:
        return 0   # a batched product is one launch: never an einsum loop instead

    def dot_matmul_min_length(self) -> int:
        return 1

    def permuted_within_einsum_elements(self) -> int:
        return 0

    def block_ns(self, steps: int) -> float:
        return self.ns_per_view * (steps + 1)

    def direct_max_naive_cost(self, labels: int) -> int:
        return 0   # one einsum call is `one_einsum_path`'s choice, priced there

    def memory_elements(self) -> int:
        return 1 << 62   # no cache hierarchy is modelled: every read is at bandwidth

    def gather_window_elements(self) -> int:
        return 0

    def gather_ns(self, elements: int, passes: int) -> float:
        return self.copy_ns(elements)

    def streamed_ns(self, elements: int, kernel: str = "matmul") -> float:
        return 0.0

    def strided_read_ns(self, elements: int, access: Any) -> float:
        return 0.0

    def cache_block_elements(self) -> int:
        return 0


#: CuPy: every operation is a Python call into Cython (a kernel launch ~10 us, a view ~1 us);
#: ``cupy.einsum`` parses its string and runs each pair's transposes and ``matmul`` from Python.
CUPY_MODEL = GpuCostModel(ns_per_kernel=10_000.0, ns_per_view=1_000.0,
                          ns_per_einsum_call=40_000.0, ns_per_einsum_pair=25_000.0,
                          ns_per_einsum_kernel=10_000.0)

#: torch on CUDA: an eager operation from Python ~5 us of dispatch plus its launch; inside
#: ``torch.einsum`` the pairs' permutes and ``bmm`` are dispatched from C++.  The steps must
#: win clearly (``steps_margin``): ``torch.einsum`` along a path is the safe default.
TORCH_CUDA_MODEL = GpuCostModel(ns_per_kernel=9_000.0, ns_per_view=2_500.0,
                                ns_per_einsum_call=12_000.0, ns_per_einsum_pair=3_000.0,
                                ns_per_einsum_kernel=5_000.0, einsum_copy_share=0.5,
                                steps_margin=0.4)
