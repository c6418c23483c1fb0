"""Re-fit the matmul time model's constants (contractions/matmul_model.py) on this machine.

    python bench/refit_model.py            # 700 stacks (3 passes) + copies + transposed + threaded products, ~45 s
    python bench/refit_model.py --quick    # ~150 stacks, well under a minute

Prints the fitted values of NS_PER_MATMUL_CALL, NS_PER_MAC, NS_PER_MATRIX_ELEMENT,
NS_PER_COPIED_ELEMENT, NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT and THREAD_GAIN, the fit's median error, and
the same error for the constants currently in the source; it edits nothing (paste the printed
lines into contractions/matmul_model.py by hand if you decide to adopt them: `NUMPY_MODEL`, the
schedule's default `CostModel`, reads those constants).

What is timed, as in the comment above the constants:
- stacks of ``calls`` products (m x k) @ (k x n), ``np.matmul`` on C-contiguous stacks into a
  preallocated ``out=`` (the result's first-touch cost is `NS_PER_FRESH_ELEMENT`, priced apart),
  with m, n drawn log-uniformly from 1..400 (``MAX_DIM``), k from 2..400 and calls from
  1..8192, every array of a stack together within ``IN_CACHE_ELEMENTS`` (reads from memory are
  the memory terms' job: a fit that let them in came out about 2x too high on in-cache
  products); fitted by least
  squares on *relative* error to
      time ~ NUMPY_CALL + calls * (NS_PER_MATMUL_CALL + NS_PER_MAC m k n
                                   + NS_PER_MATRIX_ELEMENT (m k + k n + m n))
  where NUMPY_CALL, the fixed cost of one ``np.matmul`` call (~1 us), is fitted so it does not
  leak into the per-product constants, and printed but not a model constant: every kernel call
  of a schedule pays one alike.  Inner dimension 1 is never drawn: the schedule drops size-1 axes
  before it plans, and numpy runs such products outside BLAS;
- gathering an operand into a new layout: ``np.ascontiguousarray`` of a transposed 4-d view into
  a fresh array (2**14..2**22 elements: the sizes worth gathering, where the per-element cost,
  including first-touch page faults, dominates the per-call one), time per element (least
  squares through the origin, relative error): NS_PER_COPIED_ELEMENT;
- the same stacks with a column-major (transposed) right factor, calls > 1: the time beyond the
  plain stack's, per result element (least squares on relative error of the transposed stack's
  time, predicted as the measured plain time plus the constant times calls * m * n):
  NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT;
- single products and stacks of 4 of 2**15..2**27 multiply-adds against the fitted single-thread
  model: the median speedup of those OpenBLAS splits over threads, per thread past the first:
  THREAD_GAIN, taken against the source's single-thread constants (the stacks above leave out
  products of 2 * THREADED_PRODUCT_MACS or more).

Each point is the best of several batches of repeated calls, taken in three passes over the
grid in shuffled order (a shared machine only ever adds time, and this VM's speed shifts by up
to 2x for seconds at a time), so re-run on a quiet machine; BLAS threading is left at its default, as in the benchmark.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import timing  # noqa: E402

from contractions import matmul_model  # noqa: E402

# Every array of a stack together (elements): two second-level caches of float64 here, so the
# products run from cache (past it the memory terms price the reads).
IN_CACHE_ELEMENTS = 1 << 19
MAX_MACS = 1 << 27  # per stack
# The largest m, k, n drawn: the vocabulary's large size runs products up to a few hundred on
# a side (27 x 256 x 540), where a fit on 2..64 alone over-promised BLAS speed 2x.
MAX_DIM = 400
PASSES = 3


def best_seconds(func, batch_seconds: float = 0.002, repeats: int = 3) -> float:
    """Best per-call time over short batches (at most 10,000 calls each)."""
    return timing.best_seconds(func, batch_seconds, repeats, max_number=10_000)


def stack_grid(points: int, seed: int = 0) -> list[tuple[int, int, int, int]]:
    """(calls, m, k, n), log-uniform, within the cache and a work cap, without duplicates."""
    rng = np.random.default_rng(seed)
    grid: dict[tuple[int, int, int, int], None] = {}
    while len(grid) < points:
        m, n = (int(round(math.exp(rng.uniform(0, math.log(MAX_DIM))))) for _ in range(2))
        k = int(round(math.exp(rng.uniform(math.log(2), math.log(MAX_DIM)))))
        calls = int(round(math.exp(rng.uniform(0, math.log(8192)))))
        elements = m * k + k * n + m * n
        if elements > IN_CACHE_ELEMENTS or m * k * n >= 2 * matmul_model.THREADED_PRODUCT_MACS:
            continue  # from memory, or split over threads: priced by terms of their own
        calls = max(1, min(calls, IN_CACHE_ELEMENTS // elements, MAX_MACS // (m * k * n)))
        grid[(calls, m, k, n)] = None
    return list(grid)


def time_stacks(grid, log) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features per point: [1, calls, calls mkn, calls (mk+kn+mn)], plain seconds,
    transposed-right seconds), each the best over `PASSES` shuffled passes."""
    rng = np.random.default_rng(1)
    cases = []
    for calls, m, k, n in grid:
        a = rng.standard_normal((calls, m, k))
        b = rng.standard_normal((calls, k, n))
        bt = np.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)  # same values, column-major
        if calls == 1:
            a, b, bt = a[0], b[0], bt[0]
        cases.append((a, b, bt, np.empty(np.matmul(a, b).shape)))
    plain = np.full(len(grid), np.inf)
    transposed = np.full(len(grid), np.inf)
    for done in range(PASSES):
        for index in rng.permutation(len(grid)):
            a, b, bt, out = cases[index]
            plain[index] = min(plain[index], best_seconds(lambda a=a, b=b, out=out: np.matmul(a, b, out=out)))
            if grid[index][0] > 1:
                transposed[index] = min(transposed[index],
                                        best_seconds(lambda a=a, bt=bt, out=out: np.matmul(a, bt, out=out)))
        log(f"  pass {done + 1}/{PASSES} over {len(grid)} stacks timed")
    transposed[[calls == 1 for calls, *_ in grid]] = math.nan
    features = [[1, calls, calls * m * k * n, calls * (m * k + k * n + m * n)] for calls, m, k, n in grid]
    return np.array(features, dtype=float), plain, transposed


def time_copies(sizes) -> tuple[np.ndarray, np.ndarray]:
    """(elements, seconds) for gathering a transposed 4-d view into a fresh C-ordered array."""
    rng = np.random.default_rng(2)
    elements, seconds = [], []
    for size in sizes:
        side = round(size**0.25)
        shape = (side, side + 1, side, side + 2)
        x = rng.standard_normal(shape).transpose(2, 0, 3, 1)
        elements.append(x.size)
        seconds.append(best_seconds(lambda x=x: np.ascontiguousarray(x)))
    return np.array(elements, dtype=float), np.array(seconds)


def time_threaded(log) -> tuple[list[tuple[int, int, int, int]], np.ndarray]:
    """(calls, m, k, n) and seconds for products of 2**15..2**27 multiply-adds, 1 and 4 per
    stack: those of at least 2 * THREADED_PRODUCT_MACS run on several OpenBLAS threads."""
    rng = np.random.default_rng(3)
    grid = [(calls, m, k, n) for calls in (1, 4) for side in (32, 48, 64, 96, 128, 192, 256, 384)
            for m, k, n in ((side, side, side), (2 * side, side, side), (side, 4 * side, side // 2))]
    seconds = []
    for calls, m, k, n in grid:
        a, b = rng.standard_normal((calls, m, k)), rng.standard_normal((calls, k, n))
        out = np.empty((calls, m, n))
        seconds.append(min(best_seconds(lambda a=a, b=b, out=out: np.matmul(a, b, out=out))
                           for _ in range(PASSES)))
    log(f"  {len(grid)} products timed")
    return grid, np.array(seconds)


def relative_lstsq(features: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Coefficients (ns) minimising the sum of squared relative errors."""
    ns = seconds * 1e9
    weighted = features / ns[:, None]
    coefficients, *_ = np.linalg.lstsq(weighted, np.ones_like(ns), rcond=None)
    return coefficients


def error_summary(predicted_ns: np.ndarray, seconds: np.ndarray) -> str:
    error = predicted_ns / (seconds * 1e9) - 1.0
    low, high = np.percentile(error, [5, 95])
    return (
        f"median |error| {np.median(np.abs(error)) * 100:.0f}%, "
        f"90% of points within {low * 100:+.0f}%/{high * 100:+.0f}%"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller grid (~150 stacks)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.time()

    def log(message: str) -> None:
        print(message, flush=True)

    points = 150 if args.quick else 700
    grid = stack_grid(points, args.seed)
    log(f"timing {len(grid)} matmul stacks (plain and with a column-major right factor) ...")
    features, plain, transposed = time_stacks(grid, log)
    numpy_call, call, mac, element = relative_lstsq(features, plain)

    log("timing gathers (copies into a new layout) ...")
    copy_sizes = [1 << p for p in range(14, 23, 2 if args.quick else 1)]
    copied, copy_seconds = time_copies(copy_sizes)
    (per_copied,) = relative_lstsq(copied[:, None], copy_seconds)

    log("timing products large enough to be threaded ...")
    threaded_grid, threaded_seconds = time_threaded(log)
    # against the source's single-thread terms, which the gain multiplies in the model
    unthreaded = replace(matmul_model.NUMPY_MODEL, thread_gain=0.0)
    single = np.array([numpy_call + unthreaded.matmul_ns(calls, m, k, n) for calls, m, k, n in threaded_grid])
    macs = np.array([m * k * n for _, m, k, n in threaded_grid])
    split = macs >= 2 * matmul_model.THREADED_PRODUCT_MACS
    threads = np.minimum(matmul_model.BLAS_THREADS, macs // matmul_model.THREADED_PRODUCT_MACS)
    speedup = single / (threaded_seconds * 1e9)
    gain = (float(np.median((speedup[split] - 1) / (threads[split] - 1)))
            if matmul_model.BLAS_THREADS > 1 else math.nan)

    batched = ~np.isnan(transposed)
    result_elements = np.array([c * m * n for c, m, _, n in grid], dtype=float)[batched]
    t_plain, t_transposed = plain[batched] * 1e9, transposed[batched] * 1e9
    x, d = result_elements / t_transposed, (t_transposed - t_plain) / t_transposed
    per_transposed = float(np.sum(x * d) / np.sum(x * x))

    current = (
        matmul_model.NS_PER_MATMUL_CALL,
        matmul_model.NS_PER_MAC,
        matmul_model.NS_PER_MATRIX_ELEMENT,
    )
    fitted_ns = features @ np.array([numpy_call, call, mac, element])
    current_ns = features @ np.array([numpy_call, *current])
    copy_fit_ns = per_copied * copied
    copy_current_ns = matmul_model.NS_PER_COPIED_ELEMENT * copied

    print()
    print(
        f"fitted on this machine ({len(grid)} stacks, {len(copied)} gathers, {time.time() - started:.0f} s):"
    )
    print(f"(one np.matmul call: {numpy_call:.3g}; every kernel call pays it, not a constant)")
    print(f"NS_PER_MATMUL_CALL = {call:.3g}")
    print(f"NS_PER_MAC = {mac:.3g}")
    print(f"NS_PER_MATRIX_ELEMENT = {element:.3g}")
    print(f"NS_PER_COPIED_ELEMENT = {per_copied:.3g}")
    print(f"NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT = {per_transposed:.3g}")
    print(f"THREAD_GAIN = {gain:.3g}  ({matmul_model.BLAS_THREADS} BLAS threads; nan: one thread, "
          "nothing to fit)")
    print()
    print(f"matmul stacks, fitted constants:  {error_summary(fitted_ns, plain)}")
    print(
        f"matmul stacks, source constants:  {error_summary(current_ns, plain)}  "
        f"({', '.join(f'{v:g}' for v in current)}; with the fitted call)"
    )
    print(f"gathers, fitted constant:         {error_summary(copy_fit_ns, copy_seconds)}")
    print(
        f"gathers, source constant:         {error_summary(copy_current_ns, copy_seconds)}  "
        f"({matmul_model.NS_PER_COPIED_ELEMENT:g})"
    )
    source_transposed = matmul_model.NS_PER_BATCHED_RIGHT_TRANSPOSE_ELEMENT
    print(
        "transposed right factor, fitted constant: "
        + error_summary(t_plain + per_transposed * result_elements, t_transposed / 1e9)
    )
    print(
        "transposed right factor, source constant: "
        + error_summary(t_plain + source_transposed * result_elements, t_transposed / 1e9)
        + f"  ({source_transposed:g}; both given the measured plain time)"
    )
    print(f"products below {2 * matmul_model.THREADED_PRODUCT_MACS:,} multiply-adds, source "
          f"single-threaded model / measured: median {np.median(speedup[~split]):.2f}; "
          f"at or above: median {np.median(speedup[split]):.2f} "
          f"(source THREAD_GAIN {matmul_model.THREAD_GAIN:g} says "
          f"{1 + matmul_model.THREAD_GAIN * (min(matmul_model.BLAS_THREADS, 2) - 1):.2f} on two threads)")
    if min(call, mac, element, per_copied, per_transposed) < 0:
        print("warning: a fitted constant is negative (noisy machine?): re-run when it is quiet")
    print("nothing was edited; contractions/matmul_model.py holds the constants in use.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
