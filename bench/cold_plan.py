"""Cold planning: what the first call of a new shape, or of a new string, spends planning.

Planning is parse -> solve -> expand -> plan -> schedule (numpy path, default options), what
``contract`` does on a cache miss before it compiles and runs.  Two cases per string of the
benchmark vocabulary (bench/vocabulary.py, mid size):

* **new shape**: the string is known (parsed, solved and expanded for these ndims), the
  extents are new: one extent of the first operand grows by ``rep + 1`` per repetition, so
  every repetition misses the shape-keyed caches and hits the ndims-keyed ones;
* **new string**: every cache of the engine is cleared first (each repetition plans the string
  as if never seen).

Prints a table of median times (ms) per string and the medians over strings with at most four
operands, beside the targets (0.5 ms for a new shape, 5 ms for a new string).  Run it on a
quiet machine::

    python bench/cold_plan.py                 # every vocabulary string, 7 repetitions
    python bench/cold_plan.py --quick         # 12 strings, 3 repetitions (a smoke run)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from vocabulary import make_case, vocabulary  # noqa: E402

import contractions  # noqa: E402
from contractions import api, expand, parser, plan, schedule, solver  # noqa: E402

NEW_SHAPE_TARGET_MS = 0.5
NEW_STRING_TARGET_MS = 5.0


def clear_caches() -> None:
    """Every lru cache of the engine's stages and the API, and the hot dict."""
    for module in (parser, solver, expand, plan, schedule, api):
        for value in vars(module).values():
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()
    api._HOT.clear()


def plan_once(subscripts: str, shapes, supplements) -> float:
    start = time.perf_counter()
    api._planned(subscripts, shapes, supplements, "auto", "default")
    return time.perf_counter() - start


def grown(subscripts: str, shapes, supplements, by: int):
    """The shapes with one axis (the first operand's first non-1 one) grown by ``by``
    wherever it appears, so the operands still agree."""
    found = plan.make_plan(subscripts, shapes, supplements)
    inputs = found.expansion.inputs
    label = next((lab for lab, n in zip(inputs[0], shapes[0]) if n != 1), None)
    if label is None:
        return None
    return tuple(tuple(n + by if lab == label and n != 1 else n for lab, n in zip(t, s))
                 for t, s in zip(inputs, shapes))


def measure(subscripts: str, reps: int) -> tuple[float, float] | None:
    case = make_case(subscripts, "mid")
    supplements = case.supplements
    try:
        api._planned(subscripts, case.shapes, supplements, "auto", "default")
    except contractions.ContractionError:
        return None
    new_shape = []
    for rep in range(reps):
        shapes = grown(subscripts, case.shapes, supplements, rep + 1)
        if shapes is not None:
            new_shape.append(plan_once(subscripts, shapes, supplements))
    new_string = []
    for _ in range(reps):
        clear_caches()
        new_string.append(plan_once(subscripts, case.shapes, supplements))
    if not new_shape:
        return None
    return statistics.median(new_shape) * 1e3, statistics.median(new_string) * 1e3


def main() -> None:
    parser_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser_.add_argument("--quick", action="store_true", help="12 strings, 3 repetitions")
    parser_.add_argument("--reps", type=int, default=None)
    args = parser_.parse_args()
    strings = vocabulary()
    if args.quick:
        strings = strings[:12]
    reps = args.reps or (3 if args.quick else 7)
    rows = []
    print(f"{'subscripts':40s} {'operands':>8s} {'new shape ms':>13s} {'new string ms':>14s}")
    for subscripts in strings:
        found = measure(subscripts, reps)
        if found is None:
            continue
        n = subscripts.count(",") + 1
        rows.append((subscripts, n, *found))
        print(f"{subscripts:40s} {n:8d} {found[0]:13.3f} {found[1]:14.3f}")
    small = [r for r in rows if r[1] <= 4]
    if small:
        shape_ms = statistics.median(r[2] for r in small)
        string_ms = statistics.median(r[3] for r in small)
        print(f"\nmedian over {len(small)} strings with <= 4 operands: new shape {shape_ms:.3f} ms "
              f"(target {NEW_SHAPE_TARGET_MS}), new string {string_ms:.3f} ms (target "
              f"{NEW_STRING_TARGET_MS})")
        print(f"worst: new shape {max(r[2] for r in small):.3f} ms, new string "
              f"{max(r[3] for r in small):.3f} ms")


if __name__ == "__main__":
    main()
