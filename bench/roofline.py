"""This machine's roofline, measured in the same run as the contractions.

    peak   float64 matmul GFLOP/s: best of several np.matmul calls on square matrices
           (n = 1024 and 1536; BLAS threading left at its default)
    bw     memory bandwidth, STREAM-copy style: best of np.copyto on 256 MiB arrays, counting
           the bytes read plus the bytes written

A contraction's ideal time is max(flops / peak, bytes / bw), where flops is opt_einsum's count for
its best path (2 per multiply-add) and bytes is every operand read once plus the output written
once -- a bound no implementation can beat, so measured/ideal >= 1 (less only by noise).
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

    def ideal_seconds(self, flops: float, nbytes: float) -> float:
        return max(flops / self.peak_flops, nbytes / self.bandwidth)


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
    return Roofline(peak_flops=peak, bandwidth=_copy_bandwidth(256 << 20, repeats))


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
