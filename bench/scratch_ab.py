"""Scratch buffers on and off (decision 40, dev/decisions.md): ``contract`` in a loop with
the default pool against ``scratch_limit(0)``, each string and setting in a process of its own
(what a user's loop sees: the allocator's state is that call's alone)::

    python bench/scratch_ab.py --size mid
    python bench/scratch_ab.py --size large 'WCiab,WCjab->Cij'

Only strings whose default schedule keeps a scratch buffer are timed.  Each setting runs twice,
alternating (off, on, off, on); a process warms up with 3 calls and times 15, and the better
median of the two processes counts.  Each line: both medians of both settings and the speed-up
(time without scratch / time with it: above 1 the pool is faster); the last line the geometric
mean, the worst and the best.  ``--interleaved`` times both settings in one process instead
(two compiled programs, alternating calls): there the fresh variant's frees disturb the
allocator the pooled one sees, so it measures less than a loop gets.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
from vocabulary import make_case, vocabulary  # noqa: E402

from contractions.backends import compile as engine  # noqa: E402
from contractions.backends.numpy_backend import NUMPY_OPS  # noqa: E402
from contractions.plan import make_plan  # noqa: E402
from contractions.schedule import make_schedule, scratch_sites  # noqa: E402

FRESH_OPS = dataclasses.replace(NUMPY_OPS, scratch_contiguous=None, scratch_matmul=None)

CHILD = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[4])
from vocabulary import make_case
import contractions
subscripts, size, mode = sys.argv[1:4]
if mode == "off":
    contractions.scratch_limit(0)
case = make_case(subscripts, size)
arrays, pins = case.arrays(), {"len_" + g: n for g, n in case.supplements}
for _ in range(3):
    contractions.contract(subscripts, *arrays, **pins)
times = []
for _ in range(15):
    start = time.perf_counter()
    contractions.contract(subscripts, *arrays, **pins)
    times.append(time.perf_counter() - start)
print(json.dumps(statistics.median(times)))
"""


def keeps_scratch(subscripts: str, size: str) -> bool:
    case = make_case(subscripts, size)
    schedule = make_schedule(make_plan(subscripts, case.shapes, case.supplements))
    return any(any(site) for site in scratch_sites(schedule, NUMPY_OPS.scratch_min_elements))


def in_processes(subscripts: str, size: str) -> tuple[dict[str, list[float]], float]:
    times: dict[str, list[float]] = {"off": [], "on": []}
    for mode in ("off", "on", "off", "on"):
        out = subprocess.run([sys.executable, "-c", CHILD, subscripts, size, mode, str(HERE)],
                             capture_output=True, text=True, check=True)
        times[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return times, min(times["off"]) / min(times["on"])


def interleaved(subscripts: str, size: str, repeats: int = 7) -> tuple[dict[str, list[float]], float]:
    case = make_case(subscripts, size)
    schedule = make_schedule(make_plan(subscripts, case.shapes, case.supplements))
    arrays = case.arrays()
    runs = {"on": engine.compile_schedule(schedule, NUMPY_OPS),
            "off": engine.compile_schedule(schedule, FRESH_OPS)}
    np.testing.assert_array_equal(runs["on"](*arrays), runs["off"](*arrays))
    samples: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run(*arrays)
            samples[name].append(time.perf_counter() - start)
    times = {name: [statistics.median(v)] for name, v in samples.items()}
    return times, times["off"][0] / times["on"][0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("strings", nargs="*")
    parser.add_argument("--size", default="mid", choices=("mid", "large"))
    parser.add_argument("--interleaved", action="store_true")
    args = parser.parse_args(argv)
    strings = [s for s in (args.strings or vocabulary()) if keeps_scratch(s, args.size)]
    print(f"{len(strings)} strings keep scratch buffers at {args.size}", flush=True)
    ratios = []
    for subscripts in strings:
        times, ratio = (interleaved if args.interleaved else in_processes)(subscripts, args.size)
        ratios.append(ratio)
        shown = "  ".join(f"{mode} " + ",".join(f"{t * 1e3:.3f}" for t in ts)
                          for mode, ts in times.items())
        print(f"{subscripts:36s} {shown} ms  speed-up {ratio:5.2f}", flush=True)
    if ratios:
        print(f"{len(ratios)} strings: speed-up geomean "
              f"{math.exp(statistics.fmean(map(math.log, ratios))):.2f}, worst {min(ratios):.2f}, "
              f"best {max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
