"""The `CostModel` protocol: what the schedule asks a backend's time model.

Every execution decision the schedule makes (path, kernel, layout, blocks) is priced through
this protocol, in nanoseconds of modelled time; numpy's implementation is
`contractions.model.numpy_prices.NumpyCostModel`, torch's `contractions.model.torch_prices`.  An
implementation may also carry a ``profile`` (`contractions.model.profile.Profile`): the schedule
reads its two decision margins (``layout_memory_worth``, ``cache_block_max_flops_per_element``)
from it, and ``explain`` names it; a model without one is given the built-in defaults' margins.
A model's ``priced_by`` (a short line, optional) is what ``explain`` prints as the prices' source.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Access", "CostModel", "Labels", "size_of"]

Labels = tuple[int, ...]


def size_of(labels: Sequence[int], extents: dict[int, int]) -> int:
    """Number of elements spanned by ``labels``."""
    return math.prod(map(extents.__getitem__, labels))  # (no generator: the planner calls it often)


@dataclass(frozen=True)
class Access:
    """How an array is read in some order (`access_pattern`): ``run`` elements from consecutive
    memory at a time, ``jump`` elements from one run's start to the next's (0: one run), and,
    for runs shorter than a cache line, the distinct ``lines`` and ``pages`` touched between
    two reads of one line (its reuse window); for runs of a line or more whose starts lie far
    apart, how many of them the walk reads in turn before it comes back to continue the first
    (``streams``; 0 when it never does)."""

    run: int
    jump: int
    lines: int = 1
    pages: int = 1
    streams: int = 0


class CostModel(Protocol):
    """What the schedule asks a backend's time model (nanoseconds; elements, not bytes).

    Implementations must be hashable (the schedule caches on them) and pure.
    """

    def __hash__(self) -> int:
        """Schedules are cached per cost model."""

    def matmul_ns(self, calls: int, m: int, k: int, n: int) -> float:
        """``calls`` stacked ``(m x k) @ (k x n)`` products."""

    def batched_right_transpose_ns(self, calls: int, m: int, n: int) -> float:
        """Extra time of a stack whose right factor is column-major (``calls > 1``)."""

    def split_products(self, lead: int, calls: int, m: int, k: int, n: int,
                       products_ns: float) -> tuple[int, float]:
        """(workers, time): how many parts a stack of ``calls`` ``(m x k) @ (k x n)`` products,
        ``products_ns`` run one after another, is cut into along its leading axis of ``lead``
        entries to run at once (`Step.workers`), and its time so (1 and ``products_ns``:
        whole)."""

    def copy_ns(self, elements: int) -> float:
        """Gathering ``elements`` into a new layout (a strided copy into a fresh buffer)."""

    def fresh_buffer_ns(self, elements: int) -> float:
        """First-touch cost of a fresh result of ``elements``."""

    def result_buffer_ns(self, elements: int) -> float:
        """First-touch cost of the call's own result of ``elements`` (its last step's output),
        in a caller's loop."""

    def multiply_ns(self, elements: int, inner: int = 0) -> float:
        """A broadcast elementwise product writing ``elements`` in innermost loops of
        ``inner`` elements (0: unknown, long)."""

    def outer_product_ns(self, elements: int, inner: int) -> dict[str, float]:
        """The kernels this backend runs a broadcast outer product with (``'multiply'``,
        ``'einsum'``), each with its price, for a result of ``elements`` written in innermost
        loops of ``inner``; the cheapest is used."""

    def einsum_ns(self, macs: int, strided: bool = False, inner: int = 0) -> float:
        """One einsum loop over ``macs`` multiply-adds (a small vector-like step); ``strided``
        when its innermost loop reads an operand at a stride, ``inner`` that loop's length
        (0: not counted)."""

    def einsum_step_max_macs(self) -> int:
        """Largest per-batch vector-like product worth one einsum loop rather than BLAS."""

    def permuted_within_einsum_elements(self) -> int:
        """Smallest result of a product with nothing summed, one side's labels within the
        other's and written in another order than the larger side's, that runs as einsum's
        loop rather than np.multiply (0: never)."""

    def dot_matmul_min_length(self) -> int:
        """Shortest stacked dot product (no free axis on either side) that runs as stacked
        matmuls rather than one einsum loop, when no copy is needed for it."""

    def promotes_contracted(self) -> bool:
        """Whether a product that would gather an operand may instead run some contracted
        labels as batch labels and sum them after (`Step.reduce`), where priced lower."""

    def block_ns(self, steps: int) -> float:
        """Python overhead of one block running ``steps`` steps."""

    def call_ns(self, steps: int) -> float:
        """Python overhead of an unblocked call running ``steps`` steps (outside any loop of
        blocks)."""

    def direct_max_naive_cost(self, labels: int) -> int:
        """Largest naive loop count for which one einsum call beats a pairwise run."""

    def cache_block_elements(self) -> int:
        """Intermediates of a bandwidth-bound chain larger than this are made per block of
        about this size, so each is consumed while still in cache (0: never)."""

    def memory_elements(self) -> int:
        """Arrays larger than this are read from memory (`streamed_ns`, `strided_read_ns`)."""

    def gather_window_elements(self) -> int:
        """A gather that sweeps its source again over spans larger than this is a hard
        transpose (`gather_passes`; breaks ties between layouts; 0: no preference)."""

    def gather_ns(self, elements: int, passes: int) -> float:
        """Gathering ``elements`` into a new layout whose read sweeps the source ``passes``
        times (`gather_passes`)."""

    def streamed_ns(self, elements: int, kernel: str = "matmul") -> float:
        """Extra time of streaming ``elements`` from memory into a product run by ``kernel``
        (``'matmul'``: a BLAS factor; ``'einsum'``: read by einsum's loop)."""

    def strided_read_ns(self, elements: int, access: Access) -> float:
        """Extra time of reading ``elements`` of a large array as ``access`` says."""

    def roofline_ns(self, flops: int, moved: int, touched: int) -> float:
        """The least time a step of ``flops`` FLOPs that reads and writes ``moved`` elements
        (``touched`` distinct ones) can take on this machine: every step price is at least this
        (0: the model knows no such bound)."""

    def contraction_floor_ns(self, batch: int, rows: int, contract: int, cols: int) -> float | None:
        """A lower bound on every price this model gives one pairwise contraction of ``batch``
        stacked ``(rows x contract)`` and ``(contract x cols)`` factors, whatever kernel,
        layout or promotion the step takes, its result buffer left out; None where the model
        offers none (then every candidate path is priced in full)."""

    def one_einsum_path(self, schedule: Any, optimize: Any) -> tuple[tuple[int, ...], ...] | None:
        """Run this pairwise ``schedule`` as one einsum call along the returned path instead
        of its steps (a backend whose single einsum call is cheaper than dispatching the steps:
        torch); None keeps the steps.  ``optimize`` is the normalised ``optimize=``."""
