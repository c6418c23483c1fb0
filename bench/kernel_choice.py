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

from timing import best_seconds  # noqa: E402

from contractions import contract  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
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
