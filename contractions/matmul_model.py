"""The matmul layout and time model: how one pairwise step is presented to a batched matmul.

A pairwise step contracts two operands.  Run as a batched matrix product, each operand must be
presented as a stack of matrices: batch axes first (anywhere, at any stride), then the matrix,
whose two label groups must each be one contiguous run of axes.  When an operand's axes are not
in such an order it is gathered (copied) into one.  This module prices every way of doing that
with a small time model fitted on the development machine and returns the cheapest
`MatmulLayout`.  It is pure planning (no arrays); the schedule stage calls it and the backends
only read the layout it chose.

>>> extents = {0: 8, 1: 16, 2: 32}
>>> layout = best_matmul_layout((0, 1), (1, 2), set(), {1}, extents, (0, 2))
>>> layout.left.copy, layout.right.copy, layout.left.free, layout.right.free
(False, False, (0,), (2,))

The fitted constants (``NS_PER_*``, ``DIRECT_*``, the per-block overheads) are tunables: on a
machine whose BLAS behaves differently they can be re-measured (``bench/refit_model.py``,
``bench/direct_threshold.py``) and set here; nothing else encodes machine speed.  The schedule
reads them through a `CostModel` (`NUMPY_MODEL` by default): another backend's speed is
another implementation of that protocol, passed as ``make_schedule(..., cost_model=...)``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "CostModel",
    "NUMPY_MODEL",
    "NumpyCostModel",
    "DIRECT_FEW_LABELS",
    "DIRECT_MAX_NAIVE_COST",
    "DIRECT_MAX_NAIVE_COST_MANY_LABELS",
    "EINSUM_VECTOR_STEP_MAX_MACS",
    "DOT_MATMUL_MIN_LENGTH",
    "PERMUTED_WITHIN_EINSUM_ELEMENTS",
    "NS_PER_EINSUM_MAC",
    "NS_PER_BLOCK",
    "NS_PER_BLOCK_STEP",
    "MatmulFactor",
    "MatmulLayout",
    "best_matmul_layout",
    "matmul_ns",
    "NS_PER_MATMUL_CALL",
    "NS_PER_MAC",
    "NS_PER_MATRIX_ELEMENT",
    "NS_PER_COPIED_ELEMENT",
    "THREADED_PRODUCT_MACS",
    "THREAD_GAIN",
    "BLAS_THREADS",
    "blas_threads",
    "thread_speedup",
    "NS_PER_INNER_LOOP",
    "NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT",
    "NS_PER_FRESH_ELEMENT",
    "FRESH_BUFFER_ELEMENTS",
    "CACHE_BLOCK_ELEMENTS",
    "CACHE_BLOCK_MAX_FLOPS_PER_ELEMENT",
    "MEMORY_ELEMENTS",
    "NS_PER_STREAMED_ELEMENT",
    "NS_PER_FAR_RUN",
    "NS_PER_NEAR_RUN",
    "NS_PER_EINSUM_STREAMED_ELEMENT",
    "NS_PER_OUTER_EINSUM_ELEMENT",
    "NS_PER_OUTER_EINSUM_LOOP",
    "NS_PER_OUTER_MULTIPLY_ELEMENT",
    "NS_PER_OUTER_MULTIPLY_LOOP",
    "NEAR_JUMP_ELEMENTS",
    "NS_PER_FAR_LINE",
    "FAR_RUN_ELEMENTS",
    "FAR_JUMP_ELEMENTS",
    "Access",
    "access_pattern",
    "NS_PER_PAGED_ELEMENT",
    "NS_PER_EVICTED_ELEMENT",
    "TLB_PAGES",
    "STREAMS_PREFETCHED",
    "LAYOUT_MEMORY_WORTH",
    "factor_order",
    "gather_passes",
    "GATHER_WINDOW_ELEMENTS",
    "HARD_GATHER_GAIN",
    "factor_read_ns",
    "factor_memory_ns",
    "einsum_read_ns",
    "einsum_walk",
    "einsum_step_ns",
    "NS_PER_STRIDED_EINSUM_MAC",
    "cache_bytes",
    "fresh_buffer_ns",
    "WARM_RESULT_MAX_ELEMENTS",
    "NS_PER_CALL",
    "NS_PER_STEP",
    "direct_ns",
]

Labels = tuple[int, ...]


def size_of(labels: Sequence[int], extents: dict[int, int]) -> int:
    """Number of elements spanned by ``labels``."""
    return math.prod(extents[label] for label in labels)


@dataclass(frozen=True)
class MatmulFactor:
    """How one operand is presented to a batched ``matmul`` as a stack of matrices.

    The stack's leading axes are the step's batch labels, then ``spread`` (this operand's free
    labels that are looped over like batch axes, size 1 in the other factor: matmul broadcasts),
    then the matrix (``free`` x contract for the left factor, contract x ``free`` for the right).
    ``copy``: gather into that order in C layout first.  Otherwise a strided view: batch and spread
    axes may sit anywhere at any stride; the ``free`` group and the contract group must each be a
    contiguous run of axes, one of them ending at the last axis so each matrix is BLAS-able;
    ``transposed`` when the matrix is stored column-major (a BLAS transpose flag, no copy).
    """

    free: Labels
    spread: Labels
    copy: bool
    transposed: bool


@dataclass(frozen=True)
class MatmulLayout:
    """The cheapest way found to run one pairwise step as ``left @ right``.

    ``cost`` is the modelled time in nanoseconds; ``swap`` is True when the step's second
    operand is the left factor; ``batch`` and ``contract`` give the order of those labels in
    the stacked product.
    """

    cost: float
    swap: bool
    batch: Labels
    contract: Labels
    left: MatmulFactor
    right: MatmulFactor


def _is_run(labels: Labels, group: Labels, at_end: bool) -> bool:
    """Do ``group``'s labels sit consecutively, in this order, in ``labels`` (ending it)?"""
    if not group:
        return True
    if group[0] not in labels:
        return False
    start = labels.index(group[0])
    if labels[start : start + len(group)] != group:
        return False
    return start + len(group) == len(labels) or not at_end


def _free_runs(labels: Labels, free: set[int]) -> list[Labels]:
    """Maximal runs of consecutive free labels (each a candidate matrix dimension)."""
    runs: list[Labels] = []
    current: list[int] = []
    for label in labels:
        if label in free:
            current.append(label)
        elif current:
            runs.append(tuple(current))
            current = []
    if current:
        runs.append(tuple(current))
    return runs


def _presentations(labels: Labels, free: Labels, contract: Labels, is_left: bool) -> list[MatmulFactor]:
    """Ways to present one operand as a matmul factor: gathered, or a strided view."""
    options = [MatmulFactor(free=free, spread=(), copy=True, transposed=False)]
    free_set = set(free)
    for run in [*_free_runs(labels, free_set), ()]:
        spread = tuple(label for label in free if label not in run)
        # left factor: rows=run, cols=contract; right factor: rows=contract, cols=run
        outer, inner = (run, contract) if is_left else (contract, run)
        if inner and _is_run(labels, inner, at_end=True) and _is_run(labels, outer, at_end=False):
            options.append(MatmulFactor(free=run, spread=spread, copy=False, transposed=False))
        if outer and _is_run(labels, outer, at_end=True) and _is_run(labels, inner, at_end=False):
            options.append(MatmulFactor(free=run, spread=spread, copy=False, transposed=True))
    return options


# Time model for choosing a matmul layout, in nanoseconds.  The products' constants are fitted
# on this kind of machine (2-core x86 VM, OpenBLAS 0.3.31; bench/refit_model.py: 700 stacks of
# (m x k) @ (k x n) products with m, n in 1..400, k in 2..400, up to 8192 products per stack,
# every stack within two L2 caches and written into a preallocated result; least squares on
# relative error, median error 21%, 90% of points within -42%/+43%, the VM's own drift):
#   matmul of `calls` stacked products ~ calls * (30 + 0.0272 m k n + 0.214 (m k + k n + m n))
#       (and ~0.9 us per np.matmul call, fitted apart and left out: every kernel call pays one)
#       An earlier fit, from stacks up to 32 MB, read about 2x higher: it took in reads from
#       memory and first-touch writes, which `NS_PER_FRESH_ELEMENT` and the memory terms below
#       price apart.  Large products are threaded (`thread_speedup`, below).
#   gathering an operand into a new layout ~ 1.5 per element (0.6 for the strided copy, the rest
#       for first-touching the freshly allocated pages: ~1 us per 4 KiB page fault on that VM)
#   a transposed right factor in a batched product: ~0.75 per result element more (OpenBLAS is
#       slower on it: (1296,64,6,6) 695 vs 305 us plain, (256,64,16,16) 332 vs 182 us); a
#       transposed left factor, or either one in a single 2-D product, costs nothing extra.
NS_PER_MATMUL_CALL = 30.3
NS_PER_MAC = 0.0272
NS_PER_MATRIX_ELEMENT = 0.214
NS_PER_COPIED_ELEMENT = 1.5
NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT = 0.75
# A result buffer above glibc's mmap threshold (128 KiB) is fresh pages every call: first-touch
# page faults cost ~1 us per 4 KiB page here, ~0.9 ns per element beyond the write itself (the
# 1.5 ns of a copied element minus its 0.6 ns strided copy).  Small results reuse warm memory.
# (A single buffer freed and re-made in a loop is reused warm up to 32 MiB, glibc's largest
# dynamic threshold, but a schedule's several large intermediates are not: pricing them warm
# drew paths through 26 MB intermediates that ran 2x slower; decision 35.)
NS_PER_FRESH_ELEMENT = 0.9
FRESH_BUFFER_ELEMENTS = 16384
# The call's own result is the exception below glibc's largest dynamic mmap threshold (32 MiB):
# in a caller's loop the previous result is freed after the next is made, glibc then serves
# that size from its heap, and the next result lands in warm pages.  Measured on the AMD EPYC
# VM (a loop `r = a @ b`, result rebound each call, against `out=` into one buffer): 1, 4, 16
# and 31 MB results within 0.97-1.09x of `out=` (0.0-0.2 ns an element), a 36 MB result 1.23x
# (0.5 ns an element: mmapped afresh each call).  The model prices the result's first touch
# only from 2**22 float64 elements (`result_buffer_ns`); an intermediate stays fresh (above).
WARM_RESULT_MAX_ELEMENTS = 1 << 22
# A product of at least 2 * 2**18 multiply-adds runs on two threads (OpenBLAS gives a product
# one thread per 2**18, up to its thread count: `blas_threads`), each thread past the first
# adding ~0.5 of a thread's speed: on the AMD EPYC VM (2 cores) single products and stacks of
# 1-16 products of 24..768 a side ran at 0.95-1.15x the model below 2**19 multiply-adds and
# at 0.60-0.77x (median 0.67) from 2**19 up (bench/refit_model.py, threaded products).
THREADED_PRODUCT_MACS = 1 << 18
THREAD_GAIN = 0.5


# The direct strategy runs numpy's einsum as ONE nested loop over every distinct label, so its
# cost is ~ (product of all label extents) x a few ns plus a per-call setup that grows with the
# number of labels; the pairwise strategy pays ~1-2 us of Python per step but only the pairwise
# flops.  Chosen by measurement (bench/direct_threshold.py; its docstring has the numbers): on
# every multi-operand string of the repo's vocabulary, extents grown from 2 until the single
# call clearly loses, both strategies timed at each of ~1350 points.  "direct iff naive count
# <= T" costs, in total over all points, 1.062x the per-point best at T=1024; letting T depend
# on the number of labels -- 4096 up to 7 labels, 512 beyond (einsum's setup is ~1.2 us at 6
# labels, ~2.5-5 us at 8-9) -- brings it to 1.051x.
DIRECT_MAX_NAIVE_COST = 4096
DIRECT_MAX_NAIVE_COST_MANY_LABELS = 512
DIRECT_FEW_LABELS = 7
# A vector-like step (one side has no free axis) whose per-batch matrix is at most this many
# multiply-adds runs faster as einsum's SIMD loop than as one BLAS call per batch element
# (measured: (1e4 x 4x16) @ (1e4 x 16) 0.32 ms einsum vs 0.50 ms matmul; 32x32 is a tie).
EINSUM_VECTOR_STEP_MAX_MACS = 256
# A stack of dot products (neither side has a free axis: 'bk,bk->b') runs faster as stacked
# (1 x k) @ (k x 1) matmuls than as einsum's loop once the dots are this long (measured on
# the AMD EPYC VM, contiguous operands, stacks of 512-32768: einsum faster up to k = 32, by
# 1.2-1.6x at k = 24; a tie at 48; matmul 1.1-1.4x faster from 64 up; 'WCab,WCab->WC' at mid,
# 4096 dots of 117: 0.15 ms against 0.22).  Only where the operands need no copy for it.
DOT_MATMUL_MIN_LENGTH = 64
# einsum's C loop on such steps: ~0.5 ns per multiply-add (the measurement above) and, like a
# broadcast product, `NS_PER_INNER_LOOP` each time its innermost loop restarts ('ib,jb->ij' in
# cache: 0.45-0.55 ns a multiply-add plus 7-13 ns a loop for inner lengths 2-1024), ~1.6 when
# its innermost loop reads an operand at a stride (no SIMD; measured 'ki,oik->ko' in cache at
# 1.5-1.7 ns against 0.5-0.7 for 'ki,oki->ko', three shapes of 64k-330k multiply-adds;
# bench/read_patterns.py).
NS_PER_EINSUM_MAC = 0.5
NS_PER_STRIDED_EINSUM_MAC = 1.6
# A broadcast outer product (each operand holds labels the other lacks: 'bi,bj->bij') runs
# faster as einsum's loop than as np.multiply of broadcast views, which pays more per element
# and per innermost loop (measured on the AMD EPYC VM of decision 33, bench/kernel_choice.py
# --outer: 88 products 'bi,bj->bij' and 'bi,bj->bji' of 2e3-4e6 elements, least squares on
# relative error, median error 12-15%: einsum 0.42 ns an element plus 4.4 a loop, multiply
# 0.58-0.60 plus 7.2-7.4, two runs; einsum took 0.68x multiply's time at the median, faster in
# 79 of the 88).  Neither fit found a cost of fresh result pages, so these prices hold none.
# An elementwise product or a scaling (one operand's labels within the other's) stays with
# np.multiply, faster there in 45 of 60 (einsum 1.21x its time at the median, up to 2.99x).
# These prices pick the kernel only; the step's cost stays `multiply_ns` (decision 33).
# One exception, measured after (decision 42): a product whose result is written in another
# order than its larger operand's ('bj,bij->jbi', 'ab,abc->cab'), 190 products of 2e3-4e6
# elements: multiply still wins at the median (einsum 1.11x its time), but from 2**18 result
# elements einsum's loop won 57 of 75 (0.90x at the median, 0.72x at best): such a product
# goes to einsum's loop.
PERMUTED_WITHIN_EINSUM_ELEMENTS = 1 << 18
NS_PER_OUTER_EINSUM_ELEMENT = 0.42
NS_PER_OUTER_EINSUM_LOOP = 4.4
NS_PER_OUTER_MULTIPLY_ELEMENT = 0.58
NS_PER_OUTER_MULTIPLY_LOOP = 7.2
# a broadcast product pays per innermost loop too: numpy's iterator restarts its inner loop
#   for every run of the result's trailing axes that the operands hold alike, ~12 ns a loop
#   (measured: a (65536,4,4) product of two strided blocks ran at 9.2 ns an element against
#   2.1 with 20-long runs, which made a 35-block run 3x slower than the model said).
NS_PER_INNER_LOOP = 12.0

# A bandwidth-bound chain (few FLOPs per element moved: matrix-vector chains, quadratic forms,
# reductions after a product) whose intermediate outgrows the cache writes it out to memory
# and reads it back; made in blocks of about CACHE_BLOCKS_PER_L2 L2 caches (float64), each
# block's intermediate is consumed while still cached.  See bench/cache_blocks.py for the
# measured sweep behind the size; CACHE_BLOCK_ELEMENTS = 0 turns it off.
CACHE_BLOCKS_PER_L2 = 4
CACHE_BLOCK_MAX_FLOPS_PER_ELEMENT = 16

# Python work per block of a blocked schedule: slicing the operands, one call per step inside
# the loop, the write into the result (measured: ~9 us for a block of two tiny steps, ~14 us
# with the machine loaded).
NS_PER_BLOCK = 4000.0
NS_PER_BLOCK_STEP = 2500.0
# Python work of an unblocked call: `contract`'s cached lookup and the compiled program's entry
# (~2.5 us: the bench's tiny overhead is 1.5 us over the program), and per step (a pairwise
# step, or the direct strategy's one einsum call) its views, reshapes and numpy call (~2 us:
# programs of 1-4 steps on 2x2 operands ran 3-12 us, 1.5-2.5 us a step).  Every candidate
# path of one contraction has as many steps, so these price microsecond calls without
# changing any choice between paths; a blocked run's loop is priced by `NS_PER_BLOCK_STEP`.
NS_PER_CALL = 2500.0
NS_PER_STEP = 2000.0

# Reading from memory, for arrays that outgrow the caches (`MEMORY_ELEMENTS`); the constants
# above were fitted on products that fit in them:
#   streaming: a matmul factor read from memory costs ~0.8 ns per element more (a batched
#       matrix-vector product over a 32 MB operand ran at 1.06-1.3 ns an element, 0.3 in cache);
#   far-apart runs: read in contiguous runs of one cache line up to `FAR_RUN_ELEMENTS` whose
#       starts are a page or more apart (`FAR_JUMP_ELEMENTS`), each run costs ~50 ns plus ~10 ns
#       a line: the hardware prefetcher does not follow jumps across pages (measured: a gather
#       in runs of 8 with 330 KB jumps at 9-12 ns an element against 1.5 contiguous; matmul
#       factors with 48-long rows 98 KB apart at 4.5x, 15-long rows at 3.2x the in-cache model).
#   shorter runs (less than a line) reuse each line, so what counts is what the walk touches
#       before it comes back to a line (`Access.lines`, `.pages`): more pages than the first-level
#       TLB holds (`TLB_PAGES`) ~5 ns an element (measured 5.0-7.9 for 16 x 16 pages 98 KB
#       apart, 2.2 within a page), more lines than `MEMORY_ELEMENTS` holds ~10 (7-17 measured:
#       the line is gone when the walk comes back).
#   far-apart runs read in turn and each continued later (a walk over a few rows of every
#       matrix of a stack) are streams the prefetcher follows: up to `STREAMS_PREFETCHED` of
#       them read at the contiguous speed (bench/read_patterns.py: copies of runs of 8, 16 and
#       48 elements from 2..2048 interleaved streams over 32 MB ran at 0.9-1.7 ns an element
#       up to 16 streams, 1.15 contiguous; 1.9-3.7 at 32, 2.2-8.7 beyond).
#   near runs: runs of a line or more whose starts lie `NEAR_JUMP_ELEMENTS` (256 B) or more
#       but less than a page apart, read as more than a few interleaved streams, cost ~30 ns a
#       run on the AMD EPYC VM of decision 32 (bench/read_patterns.py, near jumps: 32 MB
#       arrays, runs of 8 to 48 elements with starts 4 to 512 runs apart, 17-54 ns a run over
#       a contiguous copy, median 32; runs of 8 whose starts are 192 B apart cost 8).  Before,
#       jumps under a page were read for free, which was never measured.
#   streaming into einsum's loop costs nothing extra (`NS_PER_EINSUM_STREAMED_ELEMENT`): on the
#       AMD EPYC VM of decision 34, 'bo,boi->bi' and 'bi,boi->bo' ran at 0.27-0.36 ns a
#       multiply-add over 30-128 MB operands and 0.24-0.56 on operands within the caches, while
#       the same products as stacked (1 x k) @ (k x n) matmuls went from 0.13 in cache to
#       0.56-0.61 from memory (bench/read_patterns.py, streaming).
NS_PER_STREAMED_ELEMENT = 0.8
NS_PER_EINSUM_STREAMED_ELEMENT = 0.0
NS_PER_FAR_RUN = 50.0
NS_PER_NEAR_RUN = 30.0
NEAR_JUMP_ELEMENTS = 32
NS_PER_FAR_LINE = 10.0
NS_PER_PAGED_ELEMENT = 5.0
NS_PER_EVICTED_ELEMENT = 10.0
TLB_PAGES = 64
STREAMS_PREFETCHED = 16
# A layout chosen by the memory terms replaces the one the in-cache terms choose only when it
# models at least this much faster (measured with bench/model_ab.py on the large vocabulary:
# letting the terms decide every layout changed 41 schedules, which ran 0.88x at the geometric
# mean, worst 0.21x; with this margin 27 change and run 1.20x, worst 0.60x).
LAYOUT_MEMORY_WORTH = 1.5
FAR_RUN_ELEMENTS = 64
FAR_JUMP_ELEMENTS = 512
LINE_ELEMENTS = 8


def fresh_buffer_ns(elements: int) -> float:
    """Modelled page-fault cost of allocating a result of ``elements`` elements."""
    return NS_PER_FRESH_ELEMENT * elements if elements > FRESH_BUFFER_ELEMENTS else 0.0


def direct_ns(inputs: Sequence[Labels], output: Labels, extents: dict[int, int],
              model: CostModel) -> float:
    """Modelled time of a direct schedule: one einsum loop over ``inputs`` writing the call's
    result ``output``, or, for a pure transpose of one operand (einsum returns a view), the
    copy that makes it the result.

    >>> ext = {0: 64, 1: 64, 2: 117}
    >>> direct_ns(((0, 1, 2),), (1, 0, 2), ext, NUMPY_MODEL) == (
    ...     NUMPY_MODEL.copy_ns(64 * 64 * 117) - NUMPY_MODEL.fresh_buffer_ns(64 * 64 * 117))
    True
    """
    distinct = {lab for labels in inputs for lab in labels}
    if len(inputs) == 1 and distinct == set(output) and len(inputs[0]) == len(output):
        elements = size_of(output, extents)
        return (model.copy_ns(elements) - model.fresh_buffer_ns(elements)
                + model.result_buffer_ns(elements))
    return einsum_step_ns(inputs, output, extents, model, final=True)


def blas_threads() -> int:
    """Threads OpenBLAS runs a large product on: its own environment variables, as it reads
    them, else the CPUs this process may use."""
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        try:
            value = int(os.environ.get(name, "").split(",")[0])
        except ValueError:
            continue
        if value > 0:
            return value
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_speedup(macs: int, threads: int, macs_per_thread: int = THREADED_PRODUCT_MACS,
                   gain: float = THREAD_GAIN) -> float:
    """How much faster one ``macs``-sized product runs threaded: OpenBLAS gives a product one
    thread per ``macs_per_thread`` multiply-adds, up to ``threads``; each thread past the first
    adds ``gain``.

    >>> thread_speedup(1 << 18, 2), thread_speedup(1 << 19, 2), thread_speedup(1 << 30, 1)
    (1.0, 1.5, 1.0)
    """
    used = min(threads, macs // macs_per_thread)
    return 1.0 + gain * (used - 1) if used > 1 else 1.0


#: OpenBLAS's thread count in this process, read once at import (as OpenBLAS itself does).
BLAS_THREADS = blas_threads()


def matmul_ns(calls: int, m: int, k: int, n: int) -> float:
    """Modelled nanoseconds for ``calls`` stacked ``(m x k) @ (k x n)`` products (`NUMPY_MODEL`)."""
    return NUMPY_MODEL.matmul_ns(calls, m, k, n)


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


def factor_order(batch: Labels, contract: Labels, factor: MatmulFactor, is_left: bool) -> Labels:
    """The order a matmul factor's labels are read in: batch, spread, then its matrix (rows
    then columns as stored: ``transposed`` keeps them column-major)."""
    outer, inner = (factor.free, contract) if is_left else (contract, factor.free)
    if factor.transposed:
        outer, inner = inner, outer
    return batch + factor.spread + outer + inner


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


def factor_read_ns(labels: Labels, batch: Labels, contract: Labels, factor: MatmulFactor,
                   is_left: bool, extents: dict[int, int], model: CostModel,
                   size: int | None = None) -> float:
    """Bringing one operand (``labels`` in its stored order, ``size`` elements) to the product
    as ``factor``, beyond the products themselves: its gather when copied, and reading it from
    memory."""
    size = size_of(labels, extents) if size is None else size
    return _presented(labels, batch, contract, factor, is_left, extents, model, size,
                      model.gather_window_elements())[2]


def _presented(labels: Labels, batch: Labels, contract: Labels, factor: MatmulFactor,
               is_left: bool, extents: dict[int, int], model: CostModel, size: int,
               window: int, last: bool = False) -> tuple[MatmulFactor, float, float, int, int, int]:
    """(``factor``, its gather's price, that plus its reads from memory, the sizes of its
    spread and free labels, the elements its gather or read sweeps again past the first;
    a view's sweeps are counted on the ``last`` step only, where they break ties)."""
    passes = 1
    if factor.copy or last:
        passes = gather_passes(labels, factor_order(batch, contract, factor, is_left), extents, window)
    gather = model.gather_ns(size, passes) if factor.copy else 0.0
    return (factor, gather,
            gather + factor_memory_ns(labels, batch, contract, factor, is_left, extents, model, size),
            size_of(factor.spread, extents), size_of(factor.free, extents), size * (passes - 1))


def factor_memory_ns(labels: Labels, batch: Labels, contract: Labels, factor: MatmulFactor,
                     is_left: bool, extents: dict[int, int], model: CostModel, size: int) -> float:
    """The part of `factor_read_ns` past the in-cache model: reading an operand of ``size``
    elements from memory (0 within `CostModel.memory_elements`)."""
    if size <= model.memory_elements():
        return 0.0
    access = access_pattern(labels, factor_order(batch, contract, factor, is_left), extents)
    return model.streamed_ns(size) + model.strided_read_ns(size, access)


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

    >>> ext = {0: 64, 1: 64, 2: 32}
    >>> einsum_step_ns(((2, 1), (0, 2, 1)), (2, 0), ext, NUMPY_MODEL) < einsum_step_ns(
    ...     ((2, 1), (0, 1, 2)), (2, 0), ext, NUMPY_MODEL)   # 'ki,oki->ko' beats 'ki,oik->ko'
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
    return (model.einsum_ns(size_of(every, extents), strided,
                            _einsum_inner_run(operands, result, walk, extents))
            + (model.result_buffer_ns(elements) if final else model.fresh_buffer_ns(elements))
            + einsum_read_ns(operands, walk, extents, model))


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


def best_matmul_layout(
    lx: Labels,
    ly: Labels,
    batch: set[int],
    contract: set[int],
    extents: dict[int, int],
    final_order: Labels | None,
    model: CostModel | None = None,
) -> MatmulLayout:
    """Choose operand roles, group orders and per-operand presentations for the fastest matmul.

    Every combination is priced with the time model above (copies, the stacked products, the
    transposed-right penalty, and for operands past `MEMORY_ELEMENTS` their reads from memory).
    The layout the in-cache terms alone would pick is kept unless the full price of another is
    `LAYOUT_MEMORY_WORTH` times lower; either way the returned ``cost`` is the full price.  Ties
    prefer gathers that sweep their source once (`gather_passes`), then a result already in
    output order, then more rows
    than columns (OpenBLAS is faster that way round for thin inner dimensions: (576x24)@(24x832)
    330 us vs 246 us for the transposed product).
    """
    model = NUMPY_MODEL if model is None else model
    best: MatmulLayout | None = None
    cached: tuple[float, MatmulLayout] | None = None
    nb = size_of(tuple(batch), extents)
    window = model.gather_window_elements()
    last = final_order is not None
    for swap in (False, True):
        lp, lq = (ly, lx) if swap else (lx, ly)
        size_p, size_q = size_of(lp, extents), size_of(lq, extents)
        free_p = tuple(label for label in lp if label not in batch and label not in contract)
        free_q = tuple(label for label in lq if label not in batch and label not in contract)
        nk = size_of(tuple(contract), extents)
        # Both operands may give the same batch or contract order: price each distinct one once
        # (the first of equal costs wins, so skipping repeats changes nothing).
        orders_b = dict.fromkeys(tuple(label for label in source if label in batch) for source in (lp, lq))
        orders_c = dict.fromkeys(tuple(label for label in source if label in contract) for source in (lp, lq))
        shown = {c: (_presentations(lp, free_p, c, True), _presentations(lq, free_q, c, False))
                 for c in orders_c}
        for b in orders_b:
            for c in orders_c:
                # (each factor's gather, the gather plus its reads from memory, the sizes of its
                # spread and free labels, and the elements its gather or its read as a view
                # sweeps again past the first: priced once here, not once per pair below)
                reads_p = [_presented(lp, b, c, p, True, extents, model, size_p, window, last)
                           for p in shown[c][0]]
                reads_q = [_presented(lq, b, c, q, False, extents, model, size_q, window, last)
                           for q in shown[c][1]]
                for p, p_copy, p_ns, spread_p, rows, swept_p in reads_p:
                    for q, q_copy, q_ns, spread_q, cols, swept_q in reads_q:
                        calls = nb * spread_p * spread_q
                        products = model.matmul_ns(calls, rows, nk, cols)
                        if q.transposed and calls > 1:
                            products += model.batched_right_transpose_ns(calls, rows, cols)
                        tie = 1.0
                        if final_order is not None and (swept_p or swept_q):
                            # tie-break first on the last step: factors whose gather or read
                            # sweeps their source again (hard transposes, batch axes read out of
                            # order) lose to ones that stay within tiles; only ties move.  Not
                            # on intermediates: their order changes the next steps' layouts,
                            # which a tie on one step does not see (dev/decisions.md, 37)
                            swept = swept_p + swept_q
                            tie += 1e-5 * swept / (swept + size_p + size_q)
                        if final_order is not None and b + p.spread + q.spread + p.free + q.free != final_order:
                            tie += 1e-6  # tie-break: a strided result view is fine
                        if rows < cols:
                            tie += 1e-9  # tie-break: orientation
                        cost = (p_ns + q_ns + products) * tie
                        in_cache = (p_copy + q_copy + products) * tie
                        if best is None or cost < best.cost:
                            best = MatmulLayout(cost=cost, swap=swap, batch=b, contract=c, left=p, right=q)
                        if cached is None or in_cache < cached[0]:
                            cached = (in_cache, MatmulLayout(cost=cost, swap=swap, batch=b, contract=c,
                                                             left=p, right=q))
    assert best is not None and cached is not None
    # The memory terms are rougher than the in-cache fit (numpy's copy and einsum loops walk
    # strides their own way): they decide the layout only when they model it clearly faster.
    if best.cost * LAYOUT_MEMORY_WORTH < cached[1].cost:
        return best
    return cached[1]




def cache_bytes(level: int = 2, fallback: int = 1 << 20) -> int:
    """The size of this CPU's level-``level`` data cache, read from the OS (Linux sysfs,
    then ``sysconf``); ``fallback`` (1 MiB, a common L2) where neither says.

    >>> cache_bytes() > 0
    True
    """
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(root)):
            path = os.path.join(root, entry)
            with open(os.path.join(path, "level")) as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(path, "type")) as f:
                if f.read().strip() not in ("Data", "Unified"):
                    continue
            with open(os.path.join(path, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            return int(text.rstrip("KMG")) * scale
    except (OSError, ValueError):
        pass
    try:
        size = os.sysconf(f"SC_LEVEL{level}_CACHE_SIZE")
        if size > 0:
            return int(size)
    except (AttributeError, ValueError, OSError):
        pass
    return fallback


#: Elements per block of a bandwidth-bound chain (`CACHE_BLOCKS_PER_L2` of this machine's L2).
CACHE_BLOCK_ELEMENTS = CACHE_BLOCKS_PER_L2 * cache_bytes(2) // 8

#: Arrays larger than a quarter of this machine's last-level cache (float64 elements; L3 read
#: from the OS, 32 MiB where it says nothing) are read from memory: measured, a batched
#: matrix-vector product ran at 0.3-0.4 ns an element up to 8 MB operands and 1.06 at 32 MB.
MEMORY_ELEMENTS = cache_bytes(3, fallback=32 << 20) // 4 // 8

#: A gather whose permutation stays within spans of this many elements (float64: this
#: machine's L2 cache, 1 MiB where the OS says nothing) sweeps its source once
#: (`gather_passes`): what it reads again is still in cache.
GATHER_WINDOW_ELEMENTS = cache_bytes(2) // 8

#: A gather that sweeps its source ``passes`` times costs ``1 + HARD_GATHER_GAIN *
#: log2(passes)`` times a flat copy (measured on the AMD EPYC VM: moving two axes of a 13 MB
#: intermediate past six others, 36 passes, 2.5 ns an element against the flat 1.5; fitted on
#: that one point and kept by A/B, dev/decisions.md, decision 38).
HARD_GATHER_GAIN = 0.15


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

    def one_einsum_path(self, schedule: Any, optimize: Any) -> tuple[tuple[int, ...], ...] | None:
        """Run this pairwise ``schedule`` as one einsum call along the returned path instead
        of its steps (a backend whose single einsum call is cheaper than dispatching the steps:
        torch); None keeps the steps.  ``optimize`` is the normalised ``optimize=``."""


@dataclass(frozen=True)
class NumpyCostModel:
    """The numpy/OpenBLAS model, fitted on the development machine (the constants above;
    ``bench/refit_model.py`` re-fits them).

    >>> NUMPY_MODEL.matmul_ns(1, 64, 64, 64) == matmul_ns(1, 64, 64, 64)
    True
    """

    ns_per_matmul_call: float = NS_PER_MATMUL_CALL
    ns_per_mac: float = NS_PER_MAC
    ns_per_matrix_element: float = NS_PER_MATRIX_ELEMENT
    ns_per_copied_element: float = NS_PER_COPIED_ELEMENT
    blas_threads: int = BLAS_THREADS
    threaded_product_macs: int = THREADED_PRODUCT_MACS
    thread_gain: float = THREAD_GAIN
    ns_per_batched_right_transpose_element: float = NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT
    ns_per_fresh_element: float = NS_PER_FRESH_ELEMENT
    fresh_buffer_elements: int = FRESH_BUFFER_ELEMENTS
    warm_result_max_elements: int = WARM_RESULT_MAX_ELEMENTS
    ns_per_inner_loop: float = NS_PER_INNER_LOOP
    ns_per_einsum_mac: float = NS_PER_EINSUM_MAC
    ns_per_outer_einsum_element: float = NS_PER_OUTER_EINSUM_ELEMENT
    ns_per_outer_einsum_loop: float = NS_PER_OUTER_EINSUM_LOOP
    ns_per_outer_multiply_element: float = NS_PER_OUTER_MULTIPLY_ELEMENT
    ns_per_outer_multiply_loop: float = NS_PER_OUTER_MULTIPLY_LOOP
    ns_per_strided_einsum_mac: float = NS_PER_STRIDED_EINSUM_MAC
    einsum_vector_step_max_macs: int = EINSUM_VECTOR_STEP_MAX_MACS
    min_dot_matmul_length: int = DOT_MATMUL_MIN_LENGTH
    permuted_within_einsum_min_elements: int = PERMUTED_WITHIN_EINSUM_ELEMENTS
    promote_contracted: bool = True
    ns_per_block: float = NS_PER_BLOCK
    ns_per_block_step: float = NS_PER_BLOCK_STEP
    ns_per_call: float = NS_PER_CALL
    ns_per_step: float = NS_PER_STEP
    direct_max_naive: int = DIRECT_MAX_NAIVE_COST
    direct_max_naive_many_labels: int = DIRECT_MAX_NAIVE_COST_MANY_LABELS
    direct_few_labels: int = DIRECT_FEW_LABELS
    cache_elements: int = CACHE_BLOCK_ELEMENTS
    memory_threshold: int = MEMORY_ELEMENTS
    ns_per_streamed_element: float = NS_PER_STREAMED_ELEMENT
    ns_per_einsum_streamed_element: float = NS_PER_EINSUM_STREAMED_ELEMENT
    ns_per_far_run: float = NS_PER_FAR_RUN
    ns_per_near_run: float = NS_PER_NEAR_RUN
    ns_per_far_line: float = NS_PER_FAR_LINE
    ns_per_paged_element: float = NS_PER_PAGED_ELEMENT
    ns_per_evicted_element: float = NS_PER_EVICTED_ELEMENT
    gather_window: int = GATHER_WINDOW_ELEMENTS
    hard_gather_gain: float = HARD_GATHER_GAIN

    def matmul_ns(self, calls: int, m: int, k: int, n: int) -> float:
        macs = m * k * n
        product = (self.ns_per_matmul_call + self.ns_per_mac * macs
                   + self.ns_per_matrix_element * (m * k + k * n + m * n))
        if macs >= 2 * self.threaded_product_macs:
            product /= thread_speedup(macs, self.blas_threads, self.threaded_product_macs,
                                      self.thread_gain)
        return calls * product

    def batched_right_transpose_ns(self, calls: int, m: int, n: int) -> float:
        return self.ns_per_batched_right_transpose_element * calls * m * n

    def copy_ns(self, elements: int) -> float:
        return self.ns_per_copied_element * elements

    def fresh_buffer_ns(self, elements: int) -> float:
        return self.ns_per_fresh_element * elements if elements > self.fresh_buffer_elements else 0.0

    def result_buffer_ns(self, elements: int) -> float:
        return self.fresh_buffer_ns(elements) if elements >= self.warm_result_max_elements else 0.0

    def multiply_ns(self, elements: int, inner: int = 0) -> float:
        loops = elements / inner if inner else 0.0
        return self.ns_per_copied_element * elements + self.ns_per_inner_loop * loops

    def outer_product_ns(self, elements: int, inner: int) -> dict[str, float]:
        loops = elements / inner if inner else 0.0
        return {"einsum": self.ns_per_outer_einsum_element * elements + self.ns_per_outer_einsum_loop * loops,
                "multiply": (self.ns_per_outer_multiply_element * elements
                             + self.ns_per_outer_multiply_loop * loops)}

    def einsum_ns(self, macs: int, strided: bool = False, inner: int = 0) -> float:
        loops = macs / inner if inner else 0.0
        return ((self.ns_per_strided_einsum_mac if strided else self.ns_per_einsum_mac) * macs
                + self.ns_per_inner_loop * loops)

    def einsum_step_max_macs(self) -> int:
        return self.einsum_vector_step_max_macs

    def dot_matmul_min_length(self) -> int:
        return self.min_dot_matmul_length

    def permuted_within_einsum_elements(self) -> int:
        return self.permuted_within_einsum_min_elements

    def promotes_contracted(self) -> bool:
        return self.promote_contracted

    def block_ns(self, steps: int) -> float:
        return self.ns_per_block + self.ns_per_block_step * steps

    def call_ns(self, steps: int) -> float:
        return self.ns_per_call + self.ns_per_step * steps

    def direct_max_naive_cost(self, labels: int) -> int:
        return (self.direct_max_naive if labels <= self.direct_few_labels
                else self.direct_max_naive_many_labels)

    def cache_block_elements(self) -> int:
        return self.cache_elements

    def memory_elements(self) -> int:
        return self.memory_threshold

    def gather_window_elements(self) -> int:
        return self.gather_window

    def gather_ns(self, elements: int, passes: int) -> float:
        cost = self.ns_per_copied_element * elements
        if passes > 1 and self.hard_gather_gain:
            cost *= 1.0 + self.hard_gather_gain * math.log2(passes)
        return cost

    def streamed_ns(self, elements: int, kernel: str = "matmul") -> float:
        if kernel == "einsum":
            return self.ns_per_einsum_streamed_element * elements
        return self.ns_per_streamed_element * elements

    def strided_read_ns(self, elements: int, access: Access) -> float:
        if elements <= self.memory_threshold or access.run >= FAR_RUN_ELEMENTS:
            return 0.0
        if access.run >= LINE_ELEMENTS:
            if access.jump < NEAR_JUMP_ELEMENTS or 0 < access.streams <= STREAMS_PREFETCHED:
                return 0.0
            if access.jump < FAR_JUMP_ELEMENTS:
                return elements / access.run * self.ns_per_near_run
            lines = -(-access.run // LINE_ELEMENTS)
            return elements / access.run * (self.ns_per_far_run + self.ns_per_far_line * lines)
        if access.lines > self.memory_threshold // LINE_ELEMENTS:
            return self.ns_per_evicted_element * elements
        if access.pages > TLB_PAGES:
            return self.ns_per_paged_element * elements
        return 0.0

    def one_einsum_path(self, schedule: Any, optimize: Any) -> tuple[tuple[int, ...], ...] | None:
        return None   # numpy: the steps past the direct threshold (np.einsum's pairs are slower)


#: The default cost model: numpy on OpenBLAS, as fitted here.
NUMPY_MODEL = NumpyCostModel()
