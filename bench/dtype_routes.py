"""Same-dtype calls on the routes that now cast mixed operands: this tree against another.

Every step computes in the result's type (dev/decisions.md 55): a structure's first call on
numpy (one einsum per pair along a path) casts mixed operands first, torch gives numpy's
meaning to bool and integer tensors, JAX casts mixed operands before ``jnp.einsum``.  Calls
whose operands share a dtype must pay nothing for it.  This script times those calls in this
tree and in another checkout (``--base``, e.g. a worktree of the previous commit), in fresh
subprocesses that take turns, and reports medians and ratios side by side::

    git worktree add /tmp/base HEAD~1
    python bench/dtype_routes.py --base /tmp/base          # writes docs/benchmarks_dtypes.md
    python bench/dtype_routes.py --base /tmp/base --out -  # printed only

Measured per process: warm calls (numpy tiny and mid, torch tiny, JAX eager tiny; interleaved
batches, median per call) and first calls (a structure's first call on numpy, each of a set of
strings new to the process, timed once).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from tree_ab import compare  # noqa: E402

WORKER = r"""
rng = np.random.default_rng(0)
out = {}
# first calls: strings new to this process (a structure's first call runs unplanned)
firsts = []
for k, (a, b, c) in enumerate([(30, 40, 20), (24, 50, 16), (40, 30, 25), (36, 20, 30), (28, 44, 18)]):
    ops = [rng.random((a, b)), rng.random((b, c)), rng.random((c, a + k))]
    subscripts = "Ij,jK,Kl->Il" if k % 2 else "ij,Jk,kL->iL"
    start = time.perf_counter()
    contract(subscripts, *ops, **({"len_I": 1, "len_K": 1} if k % 2 else {"len_J": 1, "len_L": 1}))
    firsts.append(time.perf_counter() - start)
    contract("Wa,ab->Wb", rng.random((3, 4)), rng.random((4, 5 + k)))   # another shape between
out["numpy first call (3 operands)"] = statistics.median(firsts)
tiny = [rng.random((2, 3)), rng.random((3, 4))]
mid = [rng.random((8, 16, 32)), rng.random((32, 24)), rng.random((24, 12))]
funcs = {
    "numpy warm tiny": lambda: contract("Wa,ab->Wb", *tiny),
    "numpy warm mid": lambda: contract("WCa,ab,bc->WCc", *mid),
}
import torch
tt = [torch.rand(2, 3), torch.rand(3, 4)]
tm = [torch.rand(8, 16, 32), torch.rand(32, 24), torch.rand(24, 12)]
funcs["torch warm tiny"] = lambda: contract("Wa,ab->Wb", *tt)
funcs["torch warm mid"] = lambda: contract("WCa,ab,bc->WCc", *tm)
import jax.numpy as jnp
jt = [jnp.ones((2, 3)), jnp.ones((3, 4))]
funcs["jax eager tiny"] = lambda: contract("Wa,ab->Wb", *jt).block_until_ready()
out.update(interleaved_medians(funcs, repeats=15, batch_seconds=0.02))
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=7, help="processes per tree, taking turns")
    parser.add_argument("--out", default=str(REPO / "docs" / "benchmarks_dtypes.md"))
    args = parser.parse_args()
    rows = [f"| {case} | {old * 1e6:.2f} | {new * 1e6:.2f} | {new / old:.2f}x |"
            for case, (old, new) in compare(WORKER, args.base, args.rounds).items()]
    text = "\n".join([
        "# Same-dtype calls after the dtype fixes",
        "",
        "Calls whose operands share a dtype, on the routes that now cast mixed operands to the",
        "result type (dev/decisions.md 55), timed in this tree and in the tree before the change,",
        f"in fresh processes taking turns ({args.rounds} each; medians of per-process medians). The first call is a",
        "structure's first call (unplanned: one einsum per pair), the median of five strings new to the",
        "process.",
        "`python bench/dtype_routes.py --base PATH` reruns it.",
        "",
        f"Machine: {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}.",
        "",
        "| call | before (us) | after (us) | after / before |",
        "|---|---:|---:|---:|",
        *rows,
        "",
    ])
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text)
        print(text)


if __name__ == "__main__":
    main()
