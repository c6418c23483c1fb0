"""Modelled against measured time, per step: where the numpy time model and the clock part.

For each string at a size class, the default schedule (the default memory bound) and the
unbounded one (``memory_limit=None``) are run with every step timed; each step's measured time
(summed over its blocks) is printed beside its modelled time, then the rest of the call
(slicing, conversions, writing blocks, per-block Python) as ``other``::

    python bench/steps.py --size large 'WC,WCp,WCq,WCr->Cpqr'
    python bench/steps.py --size mid --all          # the whole vocabulary, one line per call

The ratio ``measured / modelled`` is what ``bench/refit_model.py`` and the model's structure
must keep within 2x.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from vocabulary import make_case, vocabulary  # noqa: E402

import contractions  # noqa: E402
from contractions.backends import compile as engine  # noqa: E402
from contractions.backends.numpy_backend import NUMPY_OPS  # noqa: E402


def timed_run(schedule, arrays, repeats: int = 3):
    """(median seconds of the call, per-step median seconds summed over blocks)."""
    spent: dict[int, float] = {}
    original = engine._step_fn

    def timing_step_fn(step, specs, ops, shapes, intermediate=False, scratch=engine.NO_SCRATCH):
        kernel = original(step, specs, ops, shapes, intermediate, scratch)
        index = schedule_index[id(step)]   # its position in the schedule (or in every block)

        def timed(x, y, table):
            start = time.perf_counter()
            out = kernel(x, y, table)
            spent[index] = spent.get(index, 0.0) + time.perf_counter() - start
            return out

        return timed

    schedule_index = {id(s): k for k, s in enumerate(schedule.steps)}
    if schedule.blocking is not None:
        for _, inner in schedule.blocking.inner:
            schedule_index.update({id(s): k for k, s in enumerate(inner.steps)})
    engine._step_fn = timing_step_fn
    try:
        run = engine.compile_schedule(schedule, NUMPY_OPS)
    finally:
        engine._step_fn = original
    run(*arrays)
    totals, per_step = [], []
    for _ in range(repeats):
        spent.clear()
        start = time.perf_counter()
        run(*arrays)
        totals.append(time.perf_counter() - start)
        per_step.append(dict(spent))
    steps = {k: statistics.median(d.get(k, 0.0) for d in per_step) for k in per_step[0]}
    return statistics.median(totals), steps


def report(subscripts: str, size: str, verbose: bool, limit) -> tuple[float, float]:
    case = make_case(subscripts, size)
    arrays = case.arrays()
    expr = contractions.contract_expression(subscripts, *case.shapes, memory_limit=limit, **case.kwargs)
    schedule = expr.schedule
    seconds, steps = timed_run(schedule, arrays)
    modelled = schedule.cost_ns * 1e-9
    tag = "default" if limit == "default" else "none"
    blocks = schedule.blocking.n_blocks if schedule.blocking is not None else 1
    print(f"{subscripts:34s} {size:5s} {tag:7s} blocks {blocks:5d}  modelled {modelled * 1e3:9.2f} ms"
          f"  measured {seconds * 1e3:9.2f} ms  x{seconds / max(modelled, 1e-12):5.2f}")
    if verbose:
        hoisted = set(schedule.blocking.hoisted) if schedule.blocking is not None else set()
        per = blocks if schedule.blocking is not None else 1
        for k, step in enumerate(schedule.steps):
            times = 1 if k in hoisted else per
            model = step.cost_ns * 1e-9 * times
            got = steps.get(k, 0.0)
            print(f"    step {k + 1} {step.kernel:8s} x{times:<5d} modelled {model * 1e3:9.2f} ms  "
                  f"measured {got * 1e3:9.2f} ms  x{got / max(model, 1e-12):5.2f}")
        print(f"    other                 measured {(seconds - sum(steps.values())) * 1e3:9.2f} ms")
    return modelled, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("strings", nargs="*")
    parser.add_argument("--size", default="large", choices=("tiny", "mid", "large"))
    parser.add_argument("--all", action="store_true", help="every vocabulary string, no per-step lines")
    parser.add_argument("--unbounded", action="store_true", help="also memory_limit=None")
    args = parser.parse_args(argv)
    strings = vocabulary() if args.all else args.strings
    ratios = []
    for s in strings:
        for limit in ("default", None) if args.unbounded or not args.all else ("default",):
            modelled, seconds = report(s, args.size, not args.all, limit)
            ratios.append(seconds / max(modelled, 1e-12))
    if ratios:
        far = sum(1 for r in ratios if r > 2 or r < 0.5)
        print(f"measured/modelled: median {statistics.median(ratios):.2f}, geomean "
              f"{float(np.exp(np.mean(np.log(ratios)))):.2f}, {far} of {len(ratios)} beyond 2x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
