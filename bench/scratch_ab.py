"""Scratch buffers on and off: the same default schedules compiled with numpy's scratch pool
and without it, timed interleaved in one process (decision 40, dev/decisions.md)::

    python bench/scratch_ab.py --size mid
    python bench/scratch_ab.py --size large 'WCiab,WCjab->Cij'

Each line is a call whose two timings differ by more than 10%, or whose warm call still
allocates (its buffers do not all fit its schedule's peak, so the pool releases some): medians
and the speed-up (time without scratch / time with it: above 1 the pool is faster); the last
line the geometric mean over every call timed, the worst and the best.  Calls that use no scratch buffer (direct
einsum calls, schedules without a large copy or intermediate) are skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from vocabulary import make_case, vocabulary  # noqa: E402

from contractions.backends import compile as engine  # noqa: E402
from contractions.backends import scratch  # noqa: E402
from contractions.backends.numpy_backend import NUMPY_OPS  # noqa: E402
from contractions.plan import make_plan  # noqa: E402
from contractions.schedule import make_schedule  # noqa: E402

FRESH_OPS = dataclasses.replace(NUMPY_OPS, scratch_contiguous=None, scratch_matmul=None)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("strings", nargs="*")
    parser.add_argument("--size", default="mid", choices=("mid", "large"))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--limit", default="default", help="'default' or 'none'")
    args = parser.parse_args(argv)
    limit = None if args.limit == "none" else "default"
    ratios, missing = [], []
    for subscripts in args.strings or vocabulary():
        case = make_case(subscripts, args.size)
        plan = make_plan(subscripts, case.shapes, case.supplements)
        schedule = make_schedule(plan, memory_limit=limit)
        if schedule.strategy == "direct":
            continue
        arrays = case.arrays()
        runs = {"scratch": engine.compile_schedule(schedule, NUMPY_OPS),
                "fresh": engine.compile_schedule(schedule, FRESH_OPS)}
        before = scratch.scratch_info().allocated
        want = runs["fresh"](*arrays)
        np.testing.assert_array_equal(runs["scratch"](*arrays), want)
        if scratch.scratch_info().allocated == before and scratch.scratch_info().reused == 0:
            continue
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeats):
            for name, run in runs.items():
                start = time.perf_counter()
                run(*arrays)
                times[name].append(time.perf_counter() - start)
        s, f = statistics.median(times["scratch"]), statistics.median(times["fresh"])
        ratios.append(f / s)
        allocated = scratch.scratch_info().allocated
        runs["scratch"](*arrays)
        misses = scratch.scratch_info().allocated - allocated   # a warm call that still allocates
        if misses:
            missing.append(subscripts)
        if abs(math.log(f / s)) > math.log(1.1) or misses:
            blocks = schedule.blocking.n_blocks if schedule.blocking is not None else 1
            print(f"{subscripts:36s} blocks {blocks:3d}  fresh {f * 1e3:9.3f} ms  scratch "
                  f"{s * 1e3:9.3f} ms  speed-up {f / s:5.2f}  warm allocations {misses}",
                  flush=True)
    if ratios:
        print(f"{len(ratios)} calls use scratch: speed-up geomean "
              f"{math.exp(statistics.fmean(map(math.log, ratios))):.2f}, worst {min(ratios):.2f}, "
              f"best {max(ratios):.2f}; {len(missing)} still allocate when warm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
