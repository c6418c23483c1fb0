"""Eager (un-jitted) JAX call overhead: `contract` vs `jnp.einsum` on the hand-expanded string.

Eager ``jnp.einsum`` plans its contraction path in Python (opt_einsum) on every call before it
dispatches; eager `contract` looks its plan up and calls a jitted ``jnp.einsum`` cached per
expansion, which costs one C++ dispatch.  On tiny arrays the arithmetic is negligible, so the
per-call time is the overhead.  For context the table also shows a hand-written ``jax.jit``
of the expanded einsum (the floor: dispatch only).

Every call is followed by ``block_until_ready()`` so asynchronous dispatch cannot hide work.
Timing is warm and interleaved (see ``bench/timing.py``); the result section is written to
``docs/benchmarks_eager.md`` (pasted into ``docs/benchmarks.md``)::

    python bench/eager_overhead.py                 # full run, writes docs/benchmarks_eager.md
    python bench/eager_overhead.py --quick --out - # a fast look, printed only
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax
import jax.numpy as jnp
from timing import interleaved_medians

from contractions import contract, expand_subscripts

# (subscripts, operand shapes, supplements).  Every extent is 2 (the "tiny" class of
# bench/vocabulary.py): the arithmetic is negligible, so the time per call is the overhead.
# (Larger "tiny" shapes can already send XLA:CPU down a threaded dot kernel whose fixed cost is
# the same for both contenders and would only dilute the comparison.)
CASES = [
    ("Wa,ab->Wb", [(2, 2), (2, 2)], {}),
    ("WCa,Caib,WCi->WCb", [(2, 2, 2, 2, 2), (2, 2, 2, 2, 2), (2, 2, 2, 2, 2)], {}),
    ("WCo,WCa->Cao", [(2, 2, 2), (2, 2, 2)], {"len_W": 1}),
    ("BHqd,BHkd->BHqk", [(2, 2, 2, 2), (2, 2, 2, 2)], {}),
    ("Wii->W", [(2, 2, 2)], {}),
]


def measure(repeats: int, batch_seconds: float) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for subscripts, shapes, supp in CASES:
        ops = [jnp.asarray(rng.standard_normal(s), jnp.float32) for s in shapes]
        hand = expand_subscripts(subscripts, *shapes, **supp)
        jitted = jax.jit(functools.partial(jnp.einsum, hand))
        funcs = {  # default arguments bind this iteration's values
            "contract": lambda s=subscripts, o=ops, k=supp: contract(s, *o, **k).block_until_ready(),
            "jnp.einsum": lambda h=hand, o=ops: jnp.einsum(h, *o).block_until_ready(),
            "jax.jit(jnp.einsum)": lambda f=jitted, o=ops: f(*o).block_until_ready(),
        }
        np.testing.assert_array_equal(np.asarray(funcs["contract"]()),
                                      np.asarray(jnp.einsum(hand, *ops)))
        medians = interleaved_medians(funcs, repeats=repeats, batch_seconds=batch_seconds)
        rows.append({"subscripts": subscripts, "expanded": hand, "shapes": shapes,
                     **{k: v * 1e6 for k, v in medians.items()},
                     "speedup": medians["jnp.einsum"] / medians["contract"]})
    return rows


def render(rows: list[dict], command: str) -> str:
    lines = [
        "## Eager JAX call overhead",
        "",
        "Per-call time (µs, median of interleaved warm batches, each call followed by",
        "`block_until_ready()`) of an *un-jitted* call on tiny float32 arrays (every extent 2), where the",
        "arithmetic is negligible and the time is overhead. `contract` reuses a jitted",
        "`jnp.einsum` cached per expansion; eager `jnp.einsum` re-plans its path in Python on",
        "every call. `jax.jit(jnp.einsum)` is a hand-jitted einsum: the dispatch-only floor.",
        "",
        "| subscripts | expanded | contract | jnp.einsum | jax.jit(jnp.einsum) | jnp.einsum / contract |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| `{r['subscripts']}` | `{r['expanded']}` | {r['contract']:.1f} | "
                     f"{r['jnp.einsum']:.1f} | {r['jax.jit(jnp.einsum)']:.1f} | "
                     f"{r['speedup']:.1f}× |")
    worst = min(r["speedup"] for r in rows)
    lines += [
        "",
        f"Smallest speedup over eager `jnp.einsum`: **{worst:.1f}×** (target: at least 5×).",
        "Under `jit` there is no difference at all: the staged program is the hand-expanded",
        "einsum's (see [transforms](transforms.md)).",
        "",
        (f"Environment: jax {jax.__version__}, {jax.devices()[0].platform} backend, Python "
         f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPU cores "
         "(shared machine)."),
        f"Reproduce: `{command}`.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "benchmarks_eager.md"),
                        help="markdown file to write ('-' prints only)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--batch-seconds", type=float, default=0.05)
    parser.add_argument("--quick", action="store_true", help="3 repeats of 10 ms batches")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.batch_seconds = 3, 0.01
    rows = measure(args.repeats, args.batch_seconds)
    text = render(rows, "python bench/eager_overhead.py")
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
