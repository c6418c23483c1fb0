"""Re-measure the profile's ``direct_max_naive`` thresholds: where one einsum call stops beating the pairwise plan.

    python bench/direct_threshold.py            # a few minutes; prints the evaluation

Method.  For every multi-operand string of the vocabulary, start from tiny shapes (groups of 2
sub-axes, every extent 2) and grow the extents one symbol at a time, round robin, so the naive
loop count (product of all extents: what numpy's single-call einsum iterates over) climbs from
~1e2 until the direct call is clearly losing (3x slower) or the count passes 3e5.  At every point
both strategies of the numpy backend are timed (warm, best of 5 batches).  Each candidate rule
("direct iff naive count <= T", or T depending on the number of distinct labels) is scored by the
total time over all points relative to always picking the faster strategy, and by its worst
single-point slowdown.

Result on the development machine (2 shared cores, OpenBLAS; 1346 points over 80 strings):
naive <= 512: 1.070, <= 1024: 1.062, <= 2048: 1.086, <= 4096: 1.129 (worst point ~2.4x);
naive <= 4096 up to 7 labels, else <= 512: 1.051 (worst 2.39x), and on the tiny-size points
(all extents 2) 1.047 vs 1.075 for the single threshold 1024.  The crossover depends mostly on
the number of labels: einsum's per-call setup is ~1.2 us at 6 labels and 2.5-5 us at 8-9, so
strings with few labels keep the single call ahead to ~1e4 iterations while strings with 8+
labels lose it from ~256.  The two-level rule is what the backend uses.
"""

from __future__ import annotations

import math
import sys
import timeit
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vocabulary import make_case, vocabulary  # noqa: E402

from contractions.backends.numpy_backend import build_program_with  # noqa: E402
from contractions.model import NUMPY_MODEL  # noqa: E402

# the thresholds of the profile in use
DIRECT_MAX_NAIVE_COST = NUMPY_MODEL.profile.direct_max_naive
DIRECT_MAX_NAIVE_COST_MANY_LABELS = NUMPY_MODEL.profile.direct_max_naive_many_labels
DIRECT_FEW_LABELS = NUMPY_MODEL.profile.direct_few_labels

CANDIDATES = (256, 512, 1024, 2048, 4096, 8192)
# two-level rules (limit up to `labels` labels, limit beyond)
TWO_LEVEL = [(t1, t2, n) for t1 in (2048, 4096, 8192) for t2 in (256, 512, 1024) for n in (6, 7, 8)]


def best_time(func, budget: float = 0.005) -> float:
    number = max(1, int(budget / max(timeit.timeit(func, number=1), 1e-7)))
    return min(timeit.repeat(func, number=number, repeat=5)) / number


def sweep(subscripts: str, max_naive: float = 3e5) -> list[tuple[int, int, float, float]]:
    """(naive count, labels, direct seconds, pairwise seconds) along the growth of one string."""
    case = make_case(subscripts, "tiny")
    lhs, out = case.expanded.split("->")
    terms = lhs.split(",")
    letters = sorted(set(lhs))
    inputs = tuple(tuple(letters.index(c) for c in t) for t in terms)
    output = tuple(letters.index(c) for c in out)
    extent = dict.fromkeys(letters, 2)
    points = []
    turn = 0
    while math.prod(extent.values()) <= max_naive:
        shapes = tuple(tuple(extent[c] for c in t) for t in terms)
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(s) for s in shapes]
        direct = build_program_with("direct", inputs, output, shapes)
        pairwise = build_program_with("pairwise", inputs, output, shapes)
        t_direct = best_time(lambda d=direct, a=arrays: d(*a))
        t_pairwise = best_time(lambda p=pairwise, a=arrays: p(*a))
        points.append((math.prod(extent.values()), len(letters), t_direct, t_pairwise))
        if t_direct > 3 * t_pairwise and t_direct > 2e-5:
            break
        extent[letters[turn % len(letters)]] += 1
        turn += 1
    return points


def evaluate(points, rule) -> tuple[float, float]:
    """(total time / oracle, worst point slowdown) of a rule(naive, labels) -> direct?"""
    oracle = sum(min(d, p) for _, _, d, p in points)
    chosen = [(d if rule(n, k) else p, min(d, p)) for n, k, d, p in points]
    return sum(c for c, _ in chosen) / oracle, max(c / b for c, b in chosen)


def main() -> None:
    points: list[tuple[int, int, float, float]] = []
    for subscripts in vocabulary():
        if "," not in subscripts.split("->")[0]:
            continue  # single operands always take the direct path
        string_points = sweep(subscripts)
        points.extend(string_points)
        first_loss = next((n for n, _, d, p in string_points if p < d), None)
        print(f"{subscripts:36s} pairwise first faster at naive count {first_loss}", flush=True)
    print(f"\n{len(points)} points; rule -> total time / per-point best, worst point slowdown")
    for threshold in CANDIDATES:
        total, worst = evaluate(points, lambda n, k, t=threshold: n <= t)
        print(f"  naive <= {threshold:6d}                     {total:.3f}  {worst:.2f}")
    for t1, t2, few in TWO_LEVEL:
        total, worst = evaluate(points, lambda n, k, a=t1, b=t2, f=few: n <= (a if k <= f else b))
        current = (t1, t2, few) == (
            DIRECT_MAX_NAIVE_COST,
            DIRECT_MAX_NAIVE_COST_MANY_LABELS,
            DIRECT_FEW_LABELS,
        )
        print(
            f"  naive <= {t1} (<= {few} labels) else {t2:5d}  {total:.3f}  {worst:.2f}"
            + ("  <- current" if current else "")
        )


if __name__ == "__main__":
    main()
