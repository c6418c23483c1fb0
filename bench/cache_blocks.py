"""Cache-sized blocks for bandwidth-bound chains: does cutting a chain into blocks whose
intermediates stay in cache pay, and at which block size?

For each chain (matrix-vector chains, quadratic forms, a reduction after a product) the
schedule is built with the numpy model's ``cache_elements`` set to each size in the sweep (0:
never block) and every variant is timed side by side (interleaved batches, medians; see
bench/timing.py).  The ratio is unblocked time over blocked time (above 1: blocking pays).
``CACHE_BLOCKS_PER_L2`` and ``CACHE_BLOCK_MAX_FLOPS_PER_ELEMENT`` in
the profile (contractions/model/profile.py) are set from this table.  Run on a quiet machine::

    python bench/cache_blocks.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from timing import interleaved_medians  # noqa: E402

from contractions.backends import compile as engine  # noqa: E402
from contractions.backends.numpy_backend import NUMPY_OPS  # noqa: E402
from contractions.model import NUMPY_MODEL  # noqa: E402
from contractions.model.host import cache_bytes  # noqa: E402
from contractions.plan import make_plan  # noqa: E402
from contractions.schedule import make_schedule  # noqa: E402

CHAINS = [
    ("Bi,ij,Bj->B", [(1 << 20, 8), (8, 8), (1 << 20, 8)]),
    ("Bi,ij,Bj->B", [(1 << 18, 32), (32, 32), (1 << 18, 32)]),
    ("Bi,Bij,Bj->B", [(1 << 16, 16), (1 << 16, 16, 16), (1 << 16, 16)]),
    ("Bi,ij,jk->Bk", [(1 << 20, 8), (8, 8), (8, 8)]),
    ("Bi,ij,jk,Bk->B", [(1 << 19, 16), (16, 16), (16, 16), (1 << 19, 16)]),
    ("Pi,Pj,ij->P", [(1 << 19, 12), (1 << 19, 12), (12, 12)]),
]
SIZES = (0, 1 << 15, 1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20)   # elements per block (0: off)


def main() -> int:
    rng = np.random.default_rng(0)
    print(f"L2 here: {cache_bytes(2) // 1024} KiB; the profile's block "
          f"{NUMPY_MODEL.profile.cache_elements:,} elements")
    print("chain | " + " | ".join(f"{s:,}" if s else "off" for s in SIZES))
    for subscripts, shapes in CHAINS:
        arrays = [rng.standard_normal(s) for s in shapes]
        plan = make_plan(subscripts, tuple(shapes), ())
        funcs, notes = {}, []
        for size in SIZES:
            model = NUMPY_MODEL.with_prices(cache_elements=size)
            schedule = make_schedule(plan, memory_limit="default", cost_model=model)
            run = engine.compile_schedule(schedule, NUMPY_OPS)
            funcs[size] = (lambda run=run, arrays=arrays: run(*arrays))
            blocks = schedule.blocking.n_blocks if schedule.blocking is not None else 1
            notes.append(blocks)
        reference = funcs[0]()
        for func in funcs.values():
            np.testing.assert_allclose(func(), reference, rtol=1e-9, atol=1e-9)
        medians = interleaved_medians(funcs, repeats=7, batch_seconds=0.05)
        cells = [f"{medians[0] * 1e3:.1f} ms"] + [
            f"{medians[0] / medians[s]:.2f}x ({n} blocks)" for s, n in zip(SIZES[1:], notes[1:])]
        print(f"{subscripts} {shapes[0]} | " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
