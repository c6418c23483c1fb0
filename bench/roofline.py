"""This machine's roofline, measured in the same run as the contractions.

    peak   float64 matmul GFLOP/s: best of several np.matmul calls on square matrices
           (n = 1024 and 1536; BLAS threading left at its default)
    bw     memory bandwidth, STREAM-copy style: best of np.copyto on 256 MiB arrays, counting
           the bytes read plus the bytes written
    cache  the same within the caches: np.copyto on 1 MiB arrays

A contraction's ideal time is max(flops / peak, bytes / bw), where flops is opt_einsum's count for
its best path (2 per multiply-add) and bytes is every operand read once plus the output written
once -- a bound no implementation can beat, so measured/ideal >= 1 (less only by noise).

A schedule step's roofline (`step_rooflines`) is the same bound for one step, derived here from
the step's own fields (not from the engine's floor): its FLOPs, both operands read, its result
written, each gathered operand's copy written and read again, a promoted product's wide result
written and read; its bytes at the cache bandwidth when the arrays it touches fit within a
quarter of the last-level cache (``cache_bytes``), else at the memory bandwidth.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import opt_einsum


@dataclass(frozen=True)
class Roofline:
    peak_flops: float  # FLOP/s
    bandwidth: float  # bytes/s
    cache_bandwidth: float = 0.0  # bytes/s within the caches (0: not measured, use bandwidth)
    cache_bytes: float = 0.0  # what fits "within the caches": a quarter of the last level

    def ideal_seconds(self, flops: float, nbytes: float) -> float:
        return max(flops / self.peak_flops, nbytes / self.bandwidth)

    def step_seconds(self, flops: float, moved: float, touched: float) -> float:
        """The least time of a step moving ``moved`` bytes (``touched`` distinct ones)."""
        fits = touched <= self.cache_bytes and self.cache_bandwidth > 0
        return max(flops / self.peak_flops, moved / (self.cache_bandwidth if fits else self.bandwidth))


def step_traffic(schedule, itemsize: int = 8) -> list[tuple[float, float, float, float]]:
    """(modelled seconds, FLOPs, bytes moved, bytes touched) of each step of ``schedule`` (a
    contractions Schedule; a blocked one's: the steps of each distinct block shape), for
    `Roofline.step_seconds`."""
    if schedule.blocking is not None:
        return [found for _, inner in schedule.blocking.inner for found in step_traffic(inner, itemsize)]
    extents = schedule.extents
    size = lambda labels: math.prod(extents[label] for label in dict.fromkeys(labels))  # noqa: E731
    found = []
    for step in schedule.steps:
        x, y = size(step.x_labels), size(step.y_labels)
        result = math.prod(step.result_shape)
        copies = sum(size(labels) for view, labels in ((step.x_view, step.x_labels), (step.y_view, step.y_labels))
                     if view is not None and view.gather)
        wide = math.prod(step.wide_shape) if step.reduce else 0
        moved = (x + y + result + 2 * copies + 2 * wide) * itemsize
        touched = (x + y + result + copies + wide) * itemsize
        found.append((step.cost_ns * 1e-9, float(step.flops), float(moved), float(touched)))
    return found



def _best(func, repeats: int) -> float:
    func()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def _matmul_flops(n: int, repeats: int) -> float:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    out = np.empty((n, n))
    return 2.0 * n**3 / _best(lambda: np.matmul(a, b, out=out), repeats)


def _copy_bandwidth(nbytes: int, repeats: int) -> float:
    src = np.random.default_rng(0).standard_normal(nbytes // 8)
    dst = np.empty_like(src)
    return 2.0 * src.nbytes / _best(lambda: np.copyto(dst, src), repeats)


def measure(repeats: int = 7) -> Roofline:
    peak = max(_matmul_flops(n, repeats) for n in (1024, 1536))
    from contractions.model.host import this_machine

    return Roofline(peak_flops=peak, bandwidth=_copy_bandwidth(256 << 20, repeats),
                    cache_bandwidth=_copy_bandwidth(1 << 20, 20 * repeats),
                    cache_bytes=this_machine().l3_bytes // 4)


def contraction_cost(expanded: str, shapes, itemsize: int = 8) -> tuple[float, float]:
    """(flops of the best pairwise path, bytes of operands + output) for an einsum string."""
    _, info = opt_einsum.contract_path(expanded, *shapes, shapes=True, optimize="auto-hq")
    flops = float(info.opt_cost)
    lhs, out = expanded.split("->")
    extents: dict[str, int] = {}
    for term, shape in zip(lhs.split(","), shapes):
        for symbol, n in zip(term, shape):
            extents[symbol] = max(extents.get(symbol, 1), n)
    elements = sum(math.prod(s) for s in shapes) + math.prod(extents[c] for c in out)
    return flops, float(elements * itemsize)
