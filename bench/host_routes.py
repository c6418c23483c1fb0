"""A large numpy call's two routes, side by side: its steps and np.einsum along its path.

For every vocabulary string at the given sizes whose default schedule measures its route
(`numpy_backend.routes`: unblocked, pairwise, modelled at 1 ms or more, the einsum's copies
within the limit), times in one interleaved run (warm, median of batches): the steps forced,
np.einsum along the path forced, and `contract` once its first calls have measured and
settled; and reports the route chosen, contract over the faster forced route (near 1x: the
measuring picked right) and the steps over contract (what measuring gains)::

    python bench/host_routes.py --size mid large
    python bench/host_routes.py --size large --json bench/results/host_routes.json

Run it alone on the machine (a parallel job makes BLAS timings meaningless on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import timing  # noqa: E402
from vocabulary import make_case, vocabulary  # noqa: E402

import contractions  # noqa: E402
from contractions.backends import BackendOptions, measured, numpy_backend  # noqa: E402


def measure(subscripts: str, size: str, batch_seconds: float, repeats: int) -> dict | None:
    case = make_case(subscripts, size)
    expression = contractions.contract_expression(subscripts, *case.shapes, **case.kwargs)
    schedule = expression.schedule
    if len(numpy_backend.routes(schedule)) < 2:
        return None
    arrays = case.arrays()
    options = BackendOptions()
    steps = numpy_backend.compile(expression.plan, schedule, options, route="steps")
    einsum = numpy_backend.compile(expression.plan, schedule, options, route="einsum")
    want = np.einsum(case.expanded, *arrays, optimize=True)
    for run in (steps, einsum):
        assert np.allclose(run(*arrays), want, rtol=1e-8, atol=1e-8), subscripts
    settle = 2 * measured.HOST_ROUNDS * measured.HOST_RUN + 8   # (after a cheap tier's few calls)
    for _ in range(settle):   # contract's first calls measure, then settle
        contractions.contract(subscripts, *arrays, **case.kwargs)
    chosen = numpy_backend.measured_route(schedule)
    medians = timing.interleaved_medians(
        {"steps": lambda: steps(*arrays), "einsum": lambda: einsum(*arrays),
         "contract": lambda: contractions.contract(subscripts, *arrays, **case.kwargs)},
        repeats, batch_seconds)
    return {"subscripts": subscripts, "size": size, "chosen": chosen, "modelled": schedule.cost_ns * 1e-9,
            "seconds": medians, "measured_seconds": numpy_backend.route_seconds(schedule)}


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", nargs="+", default=["mid", "large"])
    parser.add_argument("--batch-seconds", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    start = time.perf_counter()
    rows = []
    for size in args.size:
        print(f"\n{size}: | subscripts | steps (ms) | np.einsum along the path (ms) | contract (ms) | chosen | "
              "contract / faster route | steps / contract |")
        print("|---|---:|---:|---:|:---:|---:|---:|")
        for subscripts in vocabulary():
            row = measure(subscripts, size, args.batch_seconds, args.repeats)
            if row is None:
                continue
            rows.append(row)
            s = row["seconds"]
            print(f"| `{subscripts}` | {s['steps'] * 1e3:.2f} | {s['einsum'] * 1e3:.2f} | {s['contract'] * 1e3:.2f} "
                  f"| {row['chosen']} | {s['contract'] / min(s['steps'], s['einsum']):.2f}x "
                  f"| {s['steps'] / s['contract']:.2f}x |", flush=True)
        sized = [r for r in rows if r["size"] == size]
        if sized:
            print(f"{size}: {len(sized)} strings measure; einsum chosen on "
                  f"{sum(r['chosen'] == 'einsum' for r in sized)}; contract / faster route geomean "
                  f"{geomean([r['seconds']['contract'] / min(r['seconds']['steps'], r['seconds']['einsum']) for r in sized]):.3f}x, "
                  f"steps / contract geomean {geomean([r['seconds']['steps'] / r['seconds']['contract'] for r in sized]):.3f}x, "
                  f"max {max(r['seconds']['steps'] / r['seconds']['contract'] for r in sized):.2f}x, "
                  f"min {min(r['seconds']['steps'] / r['seconds']['contract'] for r in sized):.2f}x")
    print(f"\n({(time.perf_counter() - start) / 60:.1f} min; cpu: {numpy_backend.cpu_name()}, numpy {np.__version__})")
    if args.json:
        args.json.write_text(json.dumps({"cpu": numpy_backend.cpu_name(), "numpy": np.__version__,
                                         "date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
