"""Measure the kernels a batched outer product or a stack of tiny products could run as.

The schedule runs a step with nothing contracted as a broadcast ``multiply`` and small
vector-like steps as one ``einsum`` loop.  For batched outer products (``Wi,Cib->WCb``) a
reshaped GEMM (cotengra's tensordot route: the shared axis as a length-1 contraction, or the
batch folded into rows) may be faster; for stacks of tiny products, einsum's loop may beat a
batched matmul.  This script times, per case, the kernels side by side (best of several warm
batches, ``bench/timing.py``) and what ``contract`` runs now, so a rule can be decided from
numbers; it changes nothing.  Run on a quiet machine::

    python bench/kernel_choice.py            # every case at mid size
    python bench/kernel_choice.py --quick    # tiny sizes, a smoke run
    python bench/kernel_choice.py --outer    # the fit behind the outer-product kernel choice

``--outer`` times broadcast products with nothing to sum -- outer products ``bi,bj->bij`` and
``bi,bj->bji``, and for contrast products where one side's labels lie within the other's
(``bi,b->bi``, ``bi,bi->bi``, ``bj,bij->bij``) -- over a grid of extents (results of 2e3 to 4e6
elements), both as ``np.einsum`` and as ``np.multiply`` of broadcast views, interleaved, and
fits each kernel per kind as ``a * elements + c * innermost loops`` (least squares on relative
error): the profile's prices `ns_per_outer_einsum_*` and `ns_per_outer_multiply_*` in
contractions/model/profile.py (decision 33 in dev/decisions.md).  About two minutes.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from timing import best_seconds, interleaved_medians  # noqa: E402

from contractions import contract  # noqa: E402
from contractions.schedule.lowering import _inner_run  # noqa: E402

# (grouped string, hand-expanded numpy string, shapes at mid size); every group one axis here
CASES = [
    ("WiR,Cib->WCbR", "wir,cib->wcbr", [(64, 24, 8), (16, 24, 24)], {"len_W": 1}),
    ("Wi,Cib->WCb", "wi,cib->wcb", [(256, 24), (16, 24, 24)], {}),
    ("Wi,Cip->WCp", "wi,cip->wcp", [(256, 24), (16, 24, 24)], {}),
    ("Bi,Bj->Bij", "bi,bj->bij", [(4096, 16), (4096, 16)], {}),
    ("Bij,Bjk->Bik", "bij,bjk->bik", [(4096, 3, 3), (4096, 3, 3)], {}),
]




def tensordot_route(expanded: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The two-operand product as one GEMM after transposes/reshapes (a tensordot-style
    route: shared kept axes are looped by einsum's own optimize path, so this is numpy's
    BLAS route for the same string)."""
    return np.einsum(expanded, a, b, optimize=["einsum_path", (0, 1)])


OUTER = ("bi,bj->bij", "bi,bj->bji")
WITHIN = ("bi,b->bi", "bi,bi->bi", "bj,bij->bij")


def outer_fit() -> None:
    rng = np.random.default_rng(1)
    rows = []
    for pattern in (*OUTER, *WITHIN):
        (x, y), out = pattern.split("->")[0].split(","), pattern.split("->")[1]
        for b in (1, 16, 256, 4096):
            for i in (4, 16, 48, 200):
                for j in (4, 16, 48, 200) if "j" in pattern else (4,):
                    ext = {"b": b, "i": i, "j": j}
                    n = int(np.prod([ext[c] for c in out]))
                    if not 2000 <= n <= 1 << 22:
                        continue
                    ops = [rng.standard_normal([ext[c] for c in t]) for t in (x, y)]
                    views = [op.transpose([t.index(c) for c in out if c in t]).reshape(
                        [ext[c] if c in t else 1 for c in out]) for t, op in zip((x, y), ops)]
                    med = interleaved_medians(
                        {"einsum": functools.partial(np.einsum, pattern, *ops),
                         "multiply": functools.partial(np.multiply, *views)},
                        repeats=5, batch_seconds=0.01)
                    # the innermost loop's length as the schedule counts it (letters as labels)
                    inner = _inner_run(tuple(out), tuple(x), tuple(y), ext)
                    rows.append((pattern, n, n / inner,
                                 med["einsum"] * 1e9, med["multiply"] * 1e9))
    for kind, patterns in (("outer products", OUTER), ("one side within the other", WITHIN)):
        picked = [r for r in rows if r[0] in patterns]
        features = np.array([[r[1], r[2]] for r in picked], float)
        ratio = np.array([r[3] / r[4] for r in picked])
        print(f"{kind}: {len(picked)} products, einsum/multiply time median {np.median(ratio):.2f} "
              f"(range {ratio.min():.2f}-{ratio.max():.2f}), einsum faster in {int((ratio < 1).sum())}")
        for name, column in (("einsum", 3), ("multiply", 4)):
            ns = np.array([r[column] for r in picked])
            coef = np.linalg.lstsq(features / ns[:, None], np.ones(len(ns)), rcond=None)[0]
            error = np.abs(np.log(features @ coef / ns))
            print(f"  {name:8s} {coef[0]:.3f} ns an element + {coef[1]:.2f} a loop "
                  f"(median error {np.expm1(np.median(error)):.0%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--outer", action="store_true", help="fit the outer-product kernels")
    args = parser.parse_args()
    if args.outer:
        outer_fit()
        return
    rng = np.random.default_rng(0)
    print(f"{'string':16s} {'contract us':>12s} {'multiply us':>12s} {'einsum us':>10s} {'gemm route us':>14s}")
    for grouped, expanded, shapes, kwargs in CASES:
        if args.quick:
            shapes = [tuple(min(n, 4) for n in s) for s in shapes]
        a, b = (rng.standard_normal(s) for s in shapes)
        left, right = expanded.split("->")[0].split(",")
        output = expanded.split("->")[1]
        assert np.allclose(contract(grouped, a, b, **kwargs), np.einsum(expanded, a, b))
        times = {
            "contract": best_seconds(functools.partial(contract, grouped, a, b, **kwargs)),
            "einsum": best_seconds(functools.partial(np.einsum, expanded, a, b)),
            "gemm": best_seconds(functools.partial(tensordot_route, expanded, a, b)),
            "multiply": float("nan"),
        }
        if not (set(left) & set(right)) - set(output):   # nothing contracted: broadcast multiply
            va = np.einsum(f"{left}->{''.join(c for c in output if c in left)}", a).reshape(
                [a.shape[left.index(c)] if c in left else 1 for c in output])
            vb = np.einsum(f"{right}->{''.join(c for c in output if c in right)}", b).reshape(
                [b.shape[right.index(c)] if c in right else 1 for c in output])
            times["multiply"] = best_seconds(functools.partial(np.multiply, va, vb))
        print(f"{grouped:16s} {times['contract'] * 1e6:12.1f} {times['multiply'] * 1e6:12.1f} "
              f"{times['einsum'] * 1e6:10.1f} {times['gemm'] * 1e6:14.1f}")


if __name__ == "__main__":
    main()
