"""numpy's time model: the prices of a `Profile` turned into the `CostModel` the schedule asks,
and the formulas that read an operand's access pattern and einsum's loop order.

`NumpyCostModel` takes a profile (``NumpyCostModel(profile=...)``; default: the active one,
`contractions.model.profile.active_profile`); `NUMPY_MODEL`, the schedule's default, is built
from the active profile once, at import.  Nothing here holds a price: the few constants below
describe the hardware's geometry (a 64-byte cache line, a 4 KiB page), not its speed.

>>> NUMPY_MODEL.matmul_ns(1, 64, 64, 64) == matmul_ns(1, 64, 64, 64)
True
>>> slow = NUMPY_MODEL.with_prices(ns_per_mac=1.0)
>>> slow.matmul_ns(1, 64, 64, 64) > NUMPY_MODEL.matmul_ns(1, 64, 64, 64)
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .profile import Profile, active_profile
from .protocol import Access, CostModel, Labels, size_of

__all__ = ["FAR_JUMP_ELEMENTS", "LINE_ELEMENTS", "NEAR_JUMP_ELEMENTS", "NUMPY_MODEL", "NumpyCostModel",
           "access_pattern", "direct_ns", "einsum_read_ns", "einsum_step_ns", "einsum_walk",
           "fresh_buffer_ns", "gather_passes", "matmul_ns", "roofline", "thread_speedup"]

#: float64 elements in a 64-byte cache line; in a 4 KiB page (a jump this far or further
#: crosses pages, which the prefetcher does not follow); and 256 B, the jump from which runs
#: read as more than a few streams cost a run each (`NumpyCostModel.strided_read_ns`).
LINE_ELEMENTS = 8
FAR_JUMP_ELEMENTS = 512
NEAR_JUMP_ELEMENTS = 32


@dataclass(frozen=True)
class NumpyCostModel:
    """The numpy/OpenBLAS model: ``profile``'s prices (`Profile`), and the variant switch
    ``promote_contracted`` (`CostModel.promotes_contracted`).

    >>> from contractions.model.profile import Profile
    >>> NumpyCostModel(Profile()).matmul_ns(1, 64, 64, 64) == NumpyCostModel(Profile()).matmul_ns(1, 64, 64, 64)
    True
    """

    profile: Profile = field(default_factory=active_profile)
    promote_contracted: bool = True

    def with_prices(self, **prices: Any) -> NumpyCostModel:
        """This model with some of its profile's prices changed (`Profile` field names)."""
        return replace(self, profile=replace(self.profile, **prices))

    @property
    def priced_by(self) -> str:
        """Where the prices come from, in one line (``explain`` prints it)."""
        return self.profile.describe()

    def matmul_ns(self, calls: int, m: int, k: int, n: int) -> float:
        p = self.profile
        macs = m * k * n
        product = (p.ns_per_matmul_call + p.ns_per_mac * macs
                   + p.ns_per_matrix_element * (m * k + k * n + m * n))
        if macs >= 2 * p.threaded_product_macs:
            product /= thread_speedup(macs, p.blas_threads, p.threaded_product_macs,
                                      p.thread_gain)
        return calls * product

    def batched_right_transpose_ns(self, calls: int, m: int, n: int) -> float:
        return self.profile.ns_per_batched_right_transpose_element * calls * m * n

    def split_products(self, lead: int, calls: int, m: int, k: int, n: int,
                       products_ns: float) -> tuple[int, float]:
        # numpy runs a stack's products one after another; BLAS threads none below
        # `split_max_macs`, and below `split_min_macs` parts contend (decision 63)
        p = self.profile
        workers = min(p.blas_threads, lead)
        if workers < 2 or calls < 2 or not p.split_min_macs <= m * k * n < p.split_max_macs:
            return 1, products_ns
        split = products_ns / (1.0 + p.split_gain * (workers - 1)) + p.ns_per_split
        return (workers, split) if split < products_ns else (1, products_ns)

    def copy_ns(self, elements: int) -> float:
        return self.profile.ns_per_copied_element * elements

    def fresh_buffer_ns(self, elements: int) -> float:
        p = self.profile
        return p.ns_per_fresh_element * elements if elements > p.fresh_buffer_elements else 0.0

    def result_buffer_ns(self, elements: int) -> float:
        return self.fresh_buffer_ns(elements) if elements >= self.profile.warm_result_max_elements else 0.0

    def multiply_ns(self, elements: int, inner: int = 0) -> float:
        p = self.profile
        loops = elements / inner if inner else 0.0
        return p.ns_per_copied_element * elements + p.ns_per_inner_loop * loops

    def outer_product_ns(self, elements: int, inner: int) -> dict[str, float]:
        p = self.profile
        loops = elements / inner if inner else 0.0
        return {"einsum": p.ns_per_outer_einsum_element * elements + p.ns_per_outer_einsum_loop * loops,
                "multiply": (p.ns_per_outer_multiply_element * elements
                             + p.ns_per_outer_multiply_loop * loops)}

    def einsum_ns(self, macs: int, strided: bool = False, inner: int = 0) -> float:
        p = self.profile
        loops = macs / inner if inner else 0.0
        return ((p.ns_per_strided_einsum_mac if strided else p.ns_per_einsum_mac) * macs
                + p.ns_per_inner_loop * loops)

    def einsum_step_max_macs(self) -> int:
        return self.profile.einsum_vector_step_max_macs

    def dot_matmul_min_length(self) -> int:
        return self.profile.min_dot_matmul_length

    def permuted_within_einsum_elements(self) -> int:
        return self.profile.permuted_within_einsum_min_elements

    def promotes_contracted(self) -> bool:
        return self.promote_contracted

    def block_ns(self, steps: int) -> float:
        return self.profile.ns_per_block + self.profile.ns_per_block_step * steps

    def call_ns(self, steps: int) -> float:
        return self.profile.ns_per_call + self.profile.ns_per_step * steps

    def direct_max_naive_cost(self, labels: int) -> int:
        p = self.profile
        return (p.direct_max_naive if labels <= p.direct_few_labels
                else p.direct_max_naive_many_labels)

    def cache_block_elements(self) -> int:
        return self.profile.cache_elements

    def memory_elements(self) -> int:
        return self.profile.memory_threshold

    def gather_window_elements(self) -> int:
        return self.profile.gather_window

    def gather_ns(self, elements: int, passes: int) -> float:
        p = self.profile
        cost = p.ns_per_copied_element * elements
        if passes > 1 and p.hard_gather_gain:
            cost *= 1.0 + p.hard_gather_gain * math.log2(passes)
        return cost

    def streamed_ns(self, elements: int, kernel: str = "matmul") -> float:
        p = self.profile
        if kernel == "einsum":
            return p.ns_per_einsum_streamed_element * elements
        return p.ns_per_streamed_element * elements

    def strided_read_ns(self, elements: int, access: Access) -> float:
        p = self.profile
        if elements <= p.memory_threshold or access.run >= p.far_run_elements:
            return 0.0
        if access.run >= LINE_ELEMENTS:
            if access.jump < NEAR_JUMP_ELEMENTS or 0 < access.streams <= p.streams_prefetched:
                return 0.0
            if access.jump < FAR_JUMP_ELEMENTS:
                return elements / access.run * p.ns_per_near_run
            lines = -(-access.run // LINE_ELEMENTS)
            return elements / access.run * (p.ns_per_far_run + p.ns_per_far_line * lines)
        if access.lines > p.memory_threshold // LINE_ELEMENTS:
            return p.ns_per_evicted_element * elements
        if access.pages > p.tlb_pages:
            return p.ns_per_paged_element * elements
        return 0.0

    def roofline_ns(self, flops: int, moved: int, touched: int) -> float:
        return roofline(self.profile, flops, moved, touched)

    def contraction_floor_ns(self, batch: int, rows: int, contract: int, cols: int) -> float | None:
        # Any matmul layout runs at least ``batch`` products of at most these sizes (spread
        # labels only add calls and re-read factors; a promoted label adds calls), each at
        # most `thread_speedup`'s best, or its stack split over the threads at most
        # `split_products`' best; einsum's loop at its cheaper rate per multiply-add.
        # Every other term of a step's price (gathers, reads past the caches, transposes,
        # sums) is a price of elements, at least 0.
        p = self.profile
        macs = batch * rows * contract * cols
        fastest = max(1.0, 1.0 + max(p.thread_gain, p.split_gain) * (p.blas_threads - 1))
        products = (batch * max(p.ns_per_matmul_call, 0.0) + max(p.ns_per_mac, 0.0) * macs
                    + max(p.ns_per_matrix_element, 0.0) * batch
                    * (rows * contract + contract * cols + rows * cols)) / fastest
        loop = max(min(p.ns_per_einsum_mac, p.ns_per_strided_einsum_mac), 0.0) * macs
        return min(products, loop)

    def one_einsum_path(self, schedule: Any, optimize: Any) -> tuple[tuple[int, ...], ...] | None:
        return None   # numpy: the steps past the direct threshold (np.einsum's pairs are slower)


#: The default cost model: numpy on its BLAS, priced by the active profile.
NUMPY_MODEL = NumpyCostModel(active_profile())


def roofline(profile: Profile, flops: int, moved: int, touched: int) -> float:
    """The least time ``flops`` floating-point operations and ``moved`` float64 elements read
    or written can take: the FLOPs at ``profile``'s peak, the bytes at its cache bandwidth
    while the ``touched`` elements (the distinct ones) fit within its `memory_threshold`, else
    at its memory bandwidth.  A price of 0 means unmeasured: no floor from it.

    >>> from contractions.model.profile import Profile
    >>> p = Profile(cache_bytes_per_ns=80.0, memory_bytes_per_ns=25.0, peak_flops_per_ns=180.0)
    >>> roofline(p, 0, 1000, 1000)                   # 8 kB within the caches, at 80 B/ns
    100.0
    >>> roofline(p, 0, 4_000_000, 4_000_000)         # 32 MB past them, at 25 B/ns
    1280000.0
    >>> roofline(p, 18_000, 10, 10)                  # the FLOPs bound it
    100.0
    """
    bandwidth = (profile.cache_bytes_per_ns if touched <= profile.memory_threshold
                 else profile.memory_bytes_per_ns)
    return max(flops / profile.peak_flops_per_ns if profile.peak_flops_per_ns > 0 else 0.0,
               8.0 * moved / bandwidth if bandwidth > 0 else 0.0)


def fresh_buffer_ns(elements: int) -> float:
    """Modelled page-fault cost of allocating a result of ``elements`` elements (`NUMPY_MODEL`)."""
    return NUMPY_MODEL.fresh_buffer_ns(elements)


def matmul_ns(calls: int, m: int, k: int, n: int) -> float:
    """Modelled nanoseconds for ``calls`` stacked ``(m x k) @ (k x n)`` products (`NUMPY_MODEL`)."""
    return NUMPY_MODEL.matmul_ns(calls, m, k, n)


def thread_speedup(macs: int, threads: int, macs_per_thread: int = Profile.threaded_product_macs,
                   gain: float = 0.5) -> float:
    """How much faster one ``macs``-sized product runs threaded: one thread per
    ``macs_per_thread`` multiply-adds pays, up to ``threads``; each thread past the first adds
    ``gain``.

    >>> thread_speedup(1 << 20, 2), thread_speedup(1 << 21, 2), thread_speedup(1 << 30, 1)
    (1.0, 1.5, 1.0)
    """
    used = min(threads, macs // macs_per_thread)
    return 1.0 + gain * (used - 1) if used > 1 else 1.0


def direct_ns(inputs: Sequence[Labels], output: Labels, extents: dict[int, int],
              model: CostModel) -> float:
    """Modelled time of a direct schedule: one einsum loop over ``inputs`` writing the call's
    result ``output``, or, for a pure transpose of one operand (einsum returns a view), the
    copy that makes it the result: at the gather's price where it moves elements one by one,
    at its bytes' roofline where it moves runs of a line or more (the trailing axes stay
    together).

    >>> model = NumpyCostModel(Profile())          # (the reference prices, not this machine's)
    >>> ext = {0: 64, 1: 64, 2: 117}
    >>> direct_ns(((0, 1, 2),), (2, 1, 0), ext, model) == (
    ...     model.copy_ns(64 * 64 * 117) - model.fresh_buffer_ns(64 * 64 * 117))
    True
    >>> direct_ns(((0, 1, 2),), (1, 0, 2), ext, model) == model.roofline_ns(
    ...     0, 2 * 64 * 64 * 117, 2 * 64 * 64 * 117)                 # runs of 117
    True
    """
    distinct = {lab for labels in inputs for lab in labels}
    if len(inputs) == 1 and distinct == set(output) and len(inputs[0]) == len(output):
        elements = size_of(output, extents)
        floor = model.roofline_ns(0, 2 * elements, 2 * elements)
        access = access_pattern(inputs[0], output, extents)
        if access.run >= LINE_ELEMENTS:
            # (measured on the development VM: 0.2-0.4 ns an element in runs of 24 within the
            # caches, 0.56 in runs of 48 past them, at a contiguous copy's speed; 0.4-2.7
            # element by element, where the gather's price is fitted; decision 58)
            return floor + model.result_buffer_ns(elements)
        return max(model.copy_ns(elements) - model.fresh_buffer_ns(elements)
                   + model.result_buffer_ns(elements), floor)
    return einsum_step_ns(inputs, output, extents, model, final=True)


def _c_strides(labels: Labels, extents: dict[int, int]) -> dict[int, int]:
    """Each label's stride, in elements, in a C-contiguous array with axes ``labels``."""
    stride, step = {}, 1
    for label in reversed(labels):
        stride[label] = step
        step *= extents[label]
    return stride


def access_pattern(stored: Labels, order: Labels, extents: dict[int, int],
                   walked: dict[int, int] | None = None) -> Access:
    """How an array stored C-contiguous with axes ``stored`` is read when walked axis by axis
    in ``order`` (outermost first).  ``walked`` gives the extents of the part read (a block of a
    blocked run; default whole): a label read over less than its extent ends the run.  Labels
    not stored, and extents of 1, are ignored.

    >>> access_pattern((0, 1, 2), (0, 1, 2), {0: 4, 1: 5, 2: 6})   # in memory order
    Access(run=120, jump=0, lines=1, pages=1, streams=0)
    >>> access_pattern((0, 1, 2), (1, 0, 2), {0: 4, 1: 5, 2: 6})   # runs of 6, 30 apart
    Access(run=6, jump=30, lines=4, pages=1, streams=0)
    >>> access_pattern((0, 1, 2), (1, 0, 2), {0: 4, 1: 512, 2: 8})  # 4 streams of 8-runs
    Access(run=8, jump=4096, lines=1, pages=1, streams=4)
    """
    stride = _c_strides(stored, extents)
    walked = extents if walked is None else walked
    path = [label for label in order if label in stride and extents[label] != 1]
    run = 1
    for k in range(len(path) - 1, -1, -1):
        label = path[k]
        if stride[label] != run:
            break
        run *= walked.get(label, extents[label])
        if walked.get(label, extents[label]) < extents[label]:
            return Access(run, stride[path[k - 1]] if k else 0)
    else:
        return Access(run, 0)
    jump = stride[path[k]]
    # Runs of a line or more that do not nearly follow each other: outward from the breaking
    # label, the first one that steps a short way (within a page for far runs, a few lines or
    # just past the run for near ones) continues every run read so far: those interleaved runs
    # are streams the prefetcher follows.
    short = (FAR_JUMP_ELEMENTS if jump >= FAR_JUMP_ELEMENTS
             else NEAR_JUMP_ELEMENTS if jump >= NEAR_JUMP_ELEMENTS else 0)
    if run >= LINE_ELEMENTS and short:
        streams = 1
        for label in reversed(path[:k + 1]):
            if stride[label] < max(short, run + 1):
                return Access(run, jump, streams=streams)
            streams *= walked.get(label, extents[label])
        return Access(run, jump)
    lines = pages = 1
    if run < LINE_ELEMENTS and stored:
        # the axes walked inside the reuse of one line: those inside the stored axis that
        # holds the line's next elements (its stride is the run's length)
        neighbour = next((label for label in stored if stride[label] == run
                          and extents[label] != 1), None)
        window = path[path.index(neighbour) + 1:] if neighbour in path else path
        for label in window:
            n = walked.get(label, extents[label])
            lines *= n if stride[label] >= LINE_ELEMENTS else 1
            pages *= n if stride[label] >= FAR_JUMP_ELEMENTS else 1
    return Access(run, jump, lines, pages)


def gather_passes(stored: Labels, order: Labels, extents: dict[int, int], window: int) -> int:
    """How many times gathering an array stored C-contiguous with axes ``stored`` into
    ``order`` sweeps across more than ``window`` elements of it: each label of ``order``
    that steps less far than a label inside it, over a span of the source larger than the
    window, multiplies the sweeps by its extent (a permutation local to a small tile sweeps
    once).  A flat copy price cannot see this; measured, moving a contracted axis to the
    front of a 2.6 MB operand (24 sweeps) took 0.55 ms and to the end (a local transpose of
    24 x 6 tiles) 0.23 ms.

    >>> ext = {0: 36, 1: 24, 2: 6}
    >>> gather_passes((0, 1, 2), (1, 0, 2), ext, 4096), gather_passes((0, 1, 2), (0, 2, 1), ext, 4096)
    (24, 1)
    """
    if window <= 0:
        return 1
    stride = _c_strides(stored, extents)
    passes, span, widest = 1, 1, 0   # of the labels inside the current one
    for label in reversed(order):
        if label not in stride or extents[label] == 1:
            continue
        if widest > stride[label] and span > window:
            passes *= extents[label]
        span += (extents[label] - 1) * stride[label]
        widest = max(widest, stride[label])
    return passes


def einsum_walk(operands: Sequence[Labels], result: Labels, extents: dict[int, int]) -> Labels:
    """The order, outermost first, in which numpy's einsum loop walks its labels when every
    operand is C-contiguous in ``operands``' order and the result is written in ``result``.

    Its iterator starts from the result's labels and then the summed ones in the order of
    their letters (letters go to labels by first appearance, ``a``..``z`` then ``A``..``Z``,
    and sort by character code), then moves a label inward past the next one only if every
    operand holding both steps less along it (its stable sort by strides; on a conflict the
    starting order stands).  The result is allocated in the walk's order, so it plays no part.

    >>> einsum_walk(((0, 1), (1, 2)), (0, 2), {0: 4, 1: 5, 2: 6})   # ij,jk->ik
    (0, 1, 2)
    >>> einsum_walk(((0, 1, 2), (1, 2, 0, 3)), (0, 1, 3), {0: 4, 1: 5, 2: 6, 3: 7})
    (0, 1, 2, 3)
    """
    first: dict[int, int] = {}
    for labels in (*operands, result):
        for label in labels:
            first.setdefault(label, len(first))
    summed = sorted((label for label in first if label not in result),
                    key=lambda label: (first[label] < 26, first[label]))
    strides = [_c_strides(labels, extents) for labels in operands]
    inner_first = [label for label in reversed((*result, *summed)) if extents[label] != 1]
    for i in range(1, len(inner_first)):
        label, at = inner_first[i], i
        for j in range(i - 1, -1, -1):
            other = inner_first[j]
            votes = [s[other] > s[label] for s in strides if label in s and other in s]
            if not votes:
                continue
            if not all(votes):
                break
            at = j
        inner_first.insert(at, inner_first.pop(i))
    return tuple(reversed(inner_first))


def einsum_read_ns(operands: Sequence[Labels], walk: Labels, extents: dict[int, int],
                   model: CostModel) -> float:
    """Reading the operands of an einsum step that outgrow the caches, in the order its loop
    walks them (`einsum_walk`: einsum reads any strides, so that order decides how far apart
    its reads are)."""
    ns = 0.0
    for labels in operands:
        size = size_of(labels, extents)
        if len(set(labels)) < len(labels):
            # a diagonal: the loop reads one element per distinct index, which `access_pattern`
            # (one stride per label) cannot describe; its multiply-adds price those reads
            continue
        if size > model.memory_elements():
            ns += model.streamed_ns(size, "einsum") + model.strided_read_ns(
                size, access_pattern(labels, walk, extents))
    return ns


def einsum_step_ns(operands: Sequence[Labels], result: Labels, extents: dict[int, int],
                   model: CostModel, final: bool = False) -> float:
    """Modelled time of one einsum step writing ``result``: its multiply-adds (slower when the
    innermost loop steps through some operand with a stride), its fresh result buffer (the
    call's own result when ``final``: `result_buffer_ns`), and its reads of operands past the
    caches.

    >>> model, ext = NumpyCostModel(Profile()), {0: 64, 1: 64, 2: 32}   # (the reference prices)
    >>> einsum_step_ns(((2, 1), (0, 2, 1)), (2, 0), ext, model) < einsum_step_ns(
    ...     ((2, 1), (0, 1, 2)), (2, 0), ext, model)   # 'ki,oki->ko' beats 'ki,oik->ko'
    True
    """
    walk = einsum_walk(operands, result, extents)
    every = tuple({label for labels in operands for label in labels})
    # The innermost label is read at unit stride by an operand that stores it last (after its
    # extent-1 axes are dropped); any other holder reads it strided, without SIMD.
    inner = walk[-1] if walk else None
    strided = any(inner in labels and next(lab for lab in reversed(labels) if extents[lab] != 1)
                  != inner for labels in operands)
    elements = size_of(result, extents)
    macs = size_of(every, extents)
    loop = model.einsum_ns(macs, strided, _einsum_inner_run(operands, result, walk, extents))
    if len(operands) == 1:
        # one operand (a sum, a diagonal): the loop reads one element per multiply-add where
        # the two-operand loop the price was measured on reads two, and multiplies nothing,
        # so the part of the price that grows with the multiply-adds is halved; the inner
        # loop's restarts and any fixed cost a model adds stay whole (measured on the
        # development VM: 0.14-0.22 ns an element read, against 0.46 a two-operand
        # multiply-add; decision 58)
        loop -= (model.einsum_ns(macs, strided) - model.einsum_ns(0, strided)) / 2
    cost = (loop
            + (model.result_buffer_ns(elements) if final else model.fresh_buffer_ns(elements))
            + einsum_read_ns(operands, walk, extents, model))
    moved = sum(size_of(tuple(dict.fromkeys(labels)), extents) for labels in operands) + elements
    return max(cost, model.roofline_ns((2 if set(every) - set(result) else 1) * macs, moved, moved))


def _einsum_inner_run(operands: Sequence[Labels], result: Labels, walk: Labels,
                      extents: dict[int, int]) -> int:
    """The length of einsum's innermost loop: the trailing labels of ``walk`` that its
    iterator coalesces into one (every array, the result included, steps through them as
    through one axis)."""
    arrays = [*operands, tuple(label for label in walk if label in result)]
    strides = [_c_strides(labels, extents) for labels in arrays]
    run = 1
    inside = None
    for label in reversed(walk):
        if inside is not None and any(s.get(label, 0) != s.get(inside, 0) * extents[inside]
                                      for s in strides):
            break
        run *= extents[label]
        inside = label
    return run


