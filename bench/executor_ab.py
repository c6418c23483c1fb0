"""The one executor against the two it replaced: pairwise calls in this tree and another.

`backends/compile.py` now compiles a schedule once into closures whose reshapes read a shape
table: a fixed shape binds the schedule's own shapes, a structure's new shape the shapes
resolved at its extents (dev/decisions.md 56).  Before, fixed shapes baked their shapes into
the closures and `backends/any_extents.py` resolved every reshape's shape per call.  This
times, in fresh processes taking turns, this tree against another checkout (``--base``):

- warm pairwise calls (numpy; the schedule's steps, bound table): small, mid and large;
- a loop whose shapes change on every call (a structure's program at new extents, 60 calls).

    git worktree add /tmp/base HEAD~1
    python bench/executor_ab.py --base /tmp/base            # prints medians and ratios
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from tree_ab import compare  # noqa: E402

WORKER = r"""
rng = np.random.default_rng(0)
cases = {
    "small chain ab,bc,cd->ad (24)": ("ab,bc,cd->ad", [(24, 24), (24, 24), (24, 24)]),
    "mid WCa,Caib,WCi->WCb": ("WCa,Caib,WCi->WCb", [(40, 2, 30), (2, 30, 50, 60), (40, 2, 50)]),
    "mid Wa,Wab,Wb->W": ("Wa,Wab,Wb->W", [(64, 40), (64, 40, 50), (64, 50)]),
    "large Ia,Ib,abc->Ic": ("Ia,Ib,abc->Ic", [(1200, 40), (1200, 40), (40, 40, 20)]),
}
funcs = {}
for name, (s, shapes) in cases.items():
    ops = [rng.standard_normal(sh) for sh in shapes]
    for _ in range(600):   # past the upgrade: the full search's schedule, warm
        contract(s, *ops)
    assert "pairwise" in explain(s, *ops), name
    funcs[name] = (lambda s=s, ops=ops: contract(s, *ops))
out = interleaved_medians(funcs, repeats=15, batch_seconds=0.02)
# a loop whose shapes change on every call: the structure's program at new extents
s = "WCa,Caib,WCi->WCb"
contract(s, rng.standard_normal((8, 2, 6)), rng.standard_normal((2, 6, 7, 5)), rng.standard_normal((8, 2, 7)))
loop = [[rng.standard_normal(sh) for sh in ((8 + k, 2, 6 + k), (2, 6 + k, 7, 5), (8 + k, 2, 7))] for k in range(1, 61)]
start = time.perf_counter()
for ops in loop:
    contract(s, *ops)
out["60 new shapes of a known string (per call)"] = (time.perf_counter() - start) / 60
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"| call | before (us) | after (us) | after / before |  ({args.rounds} processes each)")
    print("|---|---:|---:|---:|")
    for case, (old, new) in compare(WORKER, args.base, args.rounds).items():
        print(f"| {case} | {old * 1e6:.2f} | {new * 1e6:.2f} | {new / old:.3f}x |")


if __name__ == "__main__":
    main()
