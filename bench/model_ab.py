"""A/B of a time-model change, in one process: the schedules the default numpy model chooses
against those of a variant, each string compiled both ways and timed interleaved.

Only the calls whose schedules differ are timed (the rest run the same code)::

    python bench/model_ab.py --size large                 # default model vs memory terms off
    python bench/model_ab.py --size mid 'WCa,Caib,WCi->WCb'

Against another checkout (a baseline commit), dump its schedules there and compare here::

    git worktree add /tmp/base HEAD~1 && (cd /tmp/base && python bench/model_ab.py --dump /tmp/base.pkl)
    python bench/model_ab.py --against /tmp/base.pkl

The variants: ``--without vector-einsum`` sends no small vector-like step to einsum's loop;
``--without before-incache`` runs the matmul constants in use before decision 31,
``--without refit`` an earlier refit, ``--without before-near`` reads near-apart runs for free
(as before decision 32), ``--without before-outer`` runs outer products with np.multiply (before
decision 33), ``--without before-einsum-stream`` charges einsum's loop the streaming price of a
matmul factor (before decision 34), ``--without before-threads`` prices large products
single-threaded (before decision 35), ``--without before-gather-passes`` breaks ties between
layouts without `gather_passes` (before decision 37), ``--without before-hard-gather`` prices
every gather flat (before decision 38), ``--without before-warm-result`` prices the call's
result as a fresh buffer and its Python as free (before decision 43), ``--without
before-promote`` gathers rather than summing promoted labels after (before decision 45),
``--without before-thread-threshold`` credits products with threads from 2**19 multiply-adds
and ``--without before-roofline`` floors no price at its roofline (both before decision 57);
``--without before-split`` runs every stack of products whole (before decision 63);
``--without before-host-peak`` floors FLOP-bound prices at the development machine's peak
rather than this CPU's estimate (before decision 62); ``--without builtin-walks``, run under a calibrated profile (``CONTRACTIONS_PROFILE``), prices
strided walks at the built-in prices rather than the profile's measured ones (decision 58).  The variant ``--without memory`` zeroes the memory prices of the profile (streaming,
far-apart runs, paged and evicted reads): the in-cache model alone.  Each line prints both
medians, both modelled times and the speed ratio (variant time / default time: above 1 the
default is faster); the last line the geometric mean and the worst.
"""

from __future__ import annotations

import argparse
import math
import pickle
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from vocabulary import make_case, vocabulary  # noqa: E402

from contractions.backends import compile as engine  # noqa: E402
from contractions.backends.numpy_backend import NUMPY_OPS  # noqa: E402
from contractions.model import NUMPY_MODEL  # noqa: E402
from contractions.plan import make_plan  # noqa: E402
from contractions.schedule import make_schedule  # noqa: E402

VARIANTS = {
    "memory": NUMPY_MODEL.with_prices(ns_per_streamed_element=0.0, ns_per_far_run=0.0,
                      ns_per_far_line=0.0, ns_per_paged_element=0.0, ns_per_evicted_element=0.0),
    "vector-einsum": NUMPY_MODEL.with_prices(einsum_vector_step_max_macs=0),
    # the constants in use before decision 31 (dev/decisions.md), for re-running its A/B
    "before-incache": NUMPY_MODEL.with_prices(ns_per_matmul_call=18.0, ns_per_mac=0.0166,
                              ns_per_matrix_element=0.275),
    # an earlier refit that took in reads from memory (not adopted: decision 30)
    "refit": NUMPY_MODEL.with_prices(ns_per_matmul_call=112.0, ns_per_mac=0.0516,
                     ns_per_matrix_element=0.591),
    # decision 31's in-cache fit of the transposed-right penalty too (not adopted)
    "transpose-refit": NUMPY_MODEL.with_prices(ns_per_batched_right_transpose_element=0.356),
    # before decision 32: runs of a line or more less than a page apart read for free
    "before-near": NUMPY_MODEL.with_prices(ns_per_near_run=0.0),
    # before decision 33: outer products always run by np.multiply
    "before-outer": NUMPY_MODEL.with_prices(ns_per_outer_einsum_element=1e9),
    # before decision 34: einsum's loop paid the matmul factors' streaming price
    "before-einsum-stream": NUMPY_MODEL.with_prices(
                                    ns_per_einsum_streamed_element=NUMPY_MODEL.profile.ns_per_streamed_element),
    # before decision 35: large products priced single-threaded
    "before-threads": NUMPY_MODEL.with_prices(thread_gain=0.0),
    # before decision 57: products credited with threads from 2 * 2**18 multiply-adds, and no
    # step price floored at its roofline
    "before-thread-threshold": NUMPY_MODEL.with_prices(threaded_product_macs=1 << 18),
    # a candidate after decision 57: far-apart runs priced as this VM reads a constant-stride
    # walk of them (about 15 ns a run, no extra per line; measured, see decision 57)
    "far-runs-15": NUMPY_MODEL.with_prices(ns_per_far_run=15.0, ns_per_far_line=0.0),
    # decision 58: under a calibrated profile, its measured walks against the built-in walk
    # prices (run with CONTRACTIONS_PROFILE=a profile `contractions calibrate` wrote)
    "builtin-walks": NUMPY_MODEL.with_prices(ns_per_far_run=50.0, ns_per_near_run=30.0, ns_per_far_line=10.0),
    "before-roofline": NUMPY_MODEL.with_prices(cache_bytes_per_ns=0.0, memory_bytes_per_ns=0.0,
                                               peak_flops_per_ns=0.0),
    # before decision 37: layouts of equal price not told apart by how their gathers sweep
    "before-gather-passes": NUMPY_MODEL.with_prices(gather_window=0),
    # before decision 38: a gather's price flat, whatever its sweeps
    "before-hard-gather": NUMPY_MODEL.with_prices(hard_gather_gain=0.0),
    # decision 38's stronger variant (measured, not kept)
    "hard-gather-25": NUMPY_MODEL.with_prices(hard_gather_gain=0.25),
    # before decision 41: every stack of dot products ran as one einsum loop
    "before-dot-matmul": NUMPY_MODEL.with_prices(min_dot_matmul_length=10**9),
    # before decision 42: a product with one side within the other always by np.multiply
    "before-permuted-within": NUMPY_MODEL.with_prices(permuted_within_einsum_min_elements=0),
    # before decision 43: the call's result priced as a fresh buffer, no Python per call/step
    "before-warm-result": NUMPY_MODEL.with_prices(warm_result_max_elements=0, ns_per_call=0.0,
                                  ns_per_step=0.0),
    # before decision 45: a product that gathers never runs contracted labels as batch labels
    "before-promote": replace(NUMPY_MODEL, promote_contracted=False),
    # a candidate after decision 40: copies priced warm, as kept scratch buffers run (0.6 ns an
    # element, the strided copy without first-touch page faults; measured, not kept)
    "warm-copies": NUMPY_MODEL.with_prices(ns_per_copied_element=0.6),
    # the development machine's peak in place of this CPU's estimate (before decision 62)
    "before-host-peak": NUMPY_MODEL.with_prices(peak_flops_per_ns=180.0),
    # every stack of products run whole on one core (before decision 63)
    "before-split": NUMPY_MODEL.with_prices(split_gain=0.0),
}


def shape_of(schedule) -> tuple:
    """What a schedule runs (path, kernels, layouts, blocks), for telling two apart."""
    steps = tuple((s.kernel, s.result, s.x_view, s.y_view, s.workers,
                   s.layout and (s.layout.swap, s.layout.batch, s.layout.contract,
                                 s.layout.left, s.layout.right)) for s in schedule.steps)
    blocks = schedule.blocking and (schedule.blocking.labels, schedule.blocking.chunks)
    return schedule.strategy, schedule.path, steps, blocks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("strings", nargs="*")
    parser.add_argument("--size", default="large", choices=("tiny", "mid", "large"))
    parser.add_argument("--without", default="memory", choices=sorted(VARIANTS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dump", metavar="FILE", help="write this checkout's schedules and stop")
    parser.add_argument("--against", metavar="FILE", help="the variant: schedules from --dump")
    args = parser.parse_args(argv)
    variant = VARIANTS[args.without]
    baseline = None
    if args.against:
        with open(args.against, "rb") as f:
            baseline = pickle.load(f)
        args.without = "baseline"
    dumped = {}
    ratios = []
    for subscripts in args.strings or vocabulary():
        case = make_case(subscripts, args.size)
        plan = make_plan(subscripts, case.shapes, case.supplements)
        for limit in ("default", None):
            if args.dump:
                dumped[subscripts, limit] = make_schedule(plan, memory_limit=limit)
                continue
            chosen = {name: make_schedule(plan, memory_limit=limit, cost_model=model)
                      for name, model in (("default", NUMPY_MODEL), ("variant", variant))}
            if baseline is not None:
                if (subscripts, limit) not in baseline:
                    continue
                chosen["variant"] = baseline[subscripts, limit]
            if shape_of(chosen["default"]) == shape_of(chosen["variant"]):
                continue
            arrays = case.arrays()
            runs = {name: engine.compile_schedule(s, NUMPY_OPS) for name, s in chosen.items()}
            want = runs["variant"](*arrays)
            np.testing.assert_allclose(runs["default"](*arrays), want, rtol=1e-7,
                                       atol=1e-9 * float(np.max(np.abs(want), initial=1.0)))
            times: dict[str, list[float]] = {"default": [], "variant": []}
            for _ in range(args.repeats):
                for name, run in runs.items():
                    start = time.perf_counter()
                    run(*arrays)
                    times[name].append(time.perf_counter() - start)
            d, v = statistics.median(times["default"]), statistics.median(times["variant"])
            ratios.append(v / d)
            print(f"{subscripts:34s} {str(limit):8s} default {d * 1e3:8.2f} ms (model "
                  f"{chosen['default'].cost_ns * 1e-6:8.2f})  without {args.without} {v * 1e3:8.2f} ms "
                  f"(model {chosen['variant'].cost_ns * 1e-6:8.2f})  ratio {v / d:5.2f}", flush=True)
    if args.dump:
        with open(args.dump, "wb") as f:
            pickle.dump(dumped, f)
        print(f"{len(dumped)} schedules written to {args.dump}")
        return 0
    if ratios:
        print(f"{len(ratios)} calls differ: variant/default geomean "
              f"{math.exp(statistics.fmean(map(math.log, ratios))):.2f}, worst {min(ratios):.2f}")
    else:
        print("no schedule differs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
