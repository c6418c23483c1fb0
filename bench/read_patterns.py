"""Two measurements behind the numpy model's read terms (decision 30 in dev/decisions.md).

1. Interleaved streams (`streams_prefetched`): copy a 32 MB array stored ``(S, N, r)`` in the
   order ``(N, S, r)``, so runs of ``r`` elements are read from ``S`` far-apart places in turn
   and each is continued on the next ``N``.  ns per element against a contiguous copy.
2. A strided inner einsum loop (`ns_per_strided_einsum_mac`): ``'ki,oik->ko'`` (its innermost
   label ``i`` read at a stride) against ``'ki,oki->ko'``, in cache.  ns per multiply-add.
3. Near jumps (`ns_per_near_run`, `NEAR_JUMP_ELEMENTS`): copy a 32 MB array stored ``(N, K, r)``
   in the order ``(K, N, r)``: runs of ``r`` elements whose starts are ``K * r`` apart (most
   under a page), thousands of them interleaved.  Extra ns per element over a contiguous copy,
   and per run.
4. Streaming into einsum's loop (`ns_per_einsum_streamed_element`): ``'bo,boi->bi'`` and
   ``'bi,boi->bo'`` from operands of 0.1 to 128 MB, against the same products as stacked
   ``(1 x o) @ (o x i)`` matmuls; ns per multiply-add.
5. einsum's inner-loop restarts (`ns_per_inner_loop` in `einsum_step_ns`): ``'ib,jb->ij'`` with
   inner lengths ``b`` of 2..1024 at a fixed count of multiply-adds.

    python bench/read_patterns.py

Prints only; the prices live in the profile (`contractions/model/profile.py`).
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def _median(f, repeats: int = 7) -> float:
    f()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def streams(total: int = 1 << 22) -> None:
    flat, out = np.random.rand(total), np.empty(total)
    print(f"contiguous copy: {_median(lambda: np.copyto(out, flat)) / total * 1e9:.2f} ns/element")
    for run in (8, 16, 48):
        for count in (2, 4, 8, 16, 32, 64, 128, 512, 2048):
            n = total // (count * run)
            stored = np.random.rand(count, n, run)
            dest = np.empty((n, count, run))
            walked = stored.transpose(1, 0, 2)
            ns = _median(lambda: np.copyto(dest, walked)) / stored.size * 1e9  # noqa: B023
            print(f"runs of {run:2d}, {count:4d} streams {n * run * 8 >> 10:6d} KB apart: "
                  f"{ns:.2f} ns/element")


def strided_einsum() -> None:
    for o, i, k in ((64, 64, 32), (32, 128, 64), (144, 144, 16)):
        a = np.random.rand(k, i)
        b = np.random.rand(o, i, k)
        c = np.ascontiguousarray(b.transpose(0, 2, 1))
        macs = o * i * k
        strided = _median(lambda: np.einsum("ki,oik->ko", a, b)) / macs * 1e9  # noqa: B023
        unit = _median(lambda: np.einsum("ki,oki->ko", a, c)) / macs * 1e9  # noqa: B023
        print(f"o, i, k = {o}, {i}, {k}: strided inner {strided:.2f}, unit stride {unit:.2f} ns/MAC")


def near_jumps(total: int = 1 << 22) -> None:
    flat, out = np.random.rand(total), np.empty(total)
    contiguous = _median(lambda: np.copyto(out, flat)) / total * 1e9
    for run in (8, 16, 32, 48):
        for apart in (3, 4, 8, 32, 128, 512):
            n = total // (apart * run)
            stored = np.random.rand(n, apart, run)
            dest = np.empty((apart, n, run))
            walked = stored.transpose(1, 0, 2)
            extra = _median(lambda: np.copyto(dest, walked)) / stored.size * 1e9 - contiguous  # noqa: B023
            print(f"runs of {run:2d}, starts {apart:3d} runs ({apart * run * 8:6d} B) apart: "
                  f"{extra:5.2f} ns/element extra, {extra * run:5.1f} ns a run")


def einsum_streaming() -> None:
    rng = np.random.default_rng(0)
    for b, o, i in ((16, 16, 64), (64, 32, 128), (32, 64, 1024), (144, 144, 192), (256, 256, 256)):
        m, x, y = rng.standard_normal((b, o, i)), rng.standard_normal((b, o)), rng.standard_normal((b, i))
        macs = b * o * i
        row = _median(lambda: np.einsum("bo,boi->bi", x, m)) / macs * 1e9  # noqa: B023
        dot = _median(lambda: np.einsum("bi,boi->bo", y, m)) / macs * 1e9  # noqa: B023
        stacked = _median(lambda: np.matmul(x[:, None, :], m)) / macs * 1e9  # noqa: B023
        print(f"{macs * 8 / 2**20:6.1f} MB: einsum 'bo,boi->bi' {row:.2f}, 'bi,boi->bo' {dot:.2f}, "
              f"stacked matmul {stacked:.2f} ns/MAC")


def inner_loops(total: int = 1 << 20) -> None:
    for b in (2, 4, 6, 8, 16, 36, 64, 256, 1024):
        m = int((total // b) ** 0.5)
        x, y = np.random.rand(m, b), np.random.rand(m, b)
        seconds = _median(lambda: np.einsum("ib,jb->ij", x, y))  # noqa: B023
        print(f"inner loop {b:4d}: {seconds / (m * m * b) * 1e9:.2f} ns/MAC, "
              f"{seconds / (m * m) * 1e9:.1f} ns a loop")


if __name__ == "__main__":
    streams()
    strided_einsum()
    near_jumps()
    einsum_streaming()
    inner_loops()
