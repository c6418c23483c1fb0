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

    python bench/cold_plan.py                 # every vocabulary string, 7 repetitions;
                                              # writes docs/benchmarks_cold_plan.md
    python bench/cold_plan.py --quick         # 12 strings, 3 repetitions (a smoke run, prints only)

The JAX columns time what a default-options JAX call plans: the plan stage only (no schedule is
built; jnp.einsum chooses the path).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from vocabulary import make_case, vocabulary  # noqa: E402

import contractions  # noqa: E402
from contractions import expand, parser, plan, schedule, solver  # noqa: E402
from contractions.calls import runners  # noqa: E402
from contractions.calls.runners import planned  # noqa: E402

NEW_SHAPE_TARGET_MS = 0.5
NEW_STRING_TARGET_MS = 5.0


def clear_caches() -> None:
    """Every lru cache of the engine's stages and the API, and the hot dict."""
    # the schedule is a package: its caches live in its modules (schedule.memory, ...)
    parts = [value for value in vars(schedule).values() if isinstance(value, types.ModuleType)]
    for module in (parser, solver, expand, plan, schedule, *parts, runners):
        for value in vars(module).values():
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()
    runners.HOT.clear()


def plan_once(subscripts: str, shapes, supplements, jax: bool = False) -> float:
    start = time.perf_counter()
    if jax:
        plan.make_plan(subscripts, shapes, supplements)
    else:
        planned(plan.make_plan(subscripts, shapes, supplements), "auto", "default")
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


def measure(subscripts: str, reps: int, jax: bool = False) -> tuple[float, float] | None:
    case = make_case(subscripts, "mid")
    supplements = case.supplements
    try:
        planned(plan.make_plan(subscripts, case.shapes, supplements), "auto", "default")
    except contractions.ContractionError:
        return None
    new_shape = []
    for rep in range(reps):
        shapes = grown(subscripts, case.shapes, supplements, rep + 1)
        if shapes is not None:
            new_shape.append(plan_once(subscripts, shapes, supplements, jax))
    new_string = []
    for _ in range(reps):
        clear_caches()
        new_string.append(plan_once(subscripts, case.shapes, supplements, jax))
    if not new_shape:
        return None
    return statistics.median(new_shape) * 1e3, statistics.median(new_string) * 1e3


def main() -> None:
    parser_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser_.add_argument("--quick", action="store_true", help="12 strings, 3 repetitions, prints only")
    parser_.add_argument("--reps", type=int, default=None)
    args = parser_.parse_args()
    strings = vocabulary()
    if args.quick:
        strings = strings[:12]
    reps = args.reps or (3 if args.quick else 7)
    rows = []
    print(f"{'subscripts':40s} {'operands':>8s} {'new shape ms':>13s} {'new string ms':>14s} {'jax shape':>10s} {'jax string':>10s}")
    start = time.perf_counter()
    for subscripts in strings:
        found = measure(subscripts, reps)
        on_jax = measure(subscripts, reps, jax=True)
        if found is None or on_jax is None:
            continue
        n = subscripts.count(",") + 1
        rows.append((subscripts, n, *found, *on_jax))
        print(f"{subscripts:40s} {n:8d} {found[0]:13.3f} {found[1]:14.3f} {on_jax[0]:10.3f} {on_jax[1]:10.3f}")
    text = render(rows, reps, time.perf_counter() - start)
    print(text)
    if not args.quick:
        (HERE.parent / "docs" / "benchmarks_cold_plan.md").write_text(text, encoding="utf-8")


def render(rows: list[tuple], reps: int, wall: float) -> str:
    small = [r for r in rows if r[1] <= 4]
    lines = ["## Cold planning", "",
             f"Generated by `python bench/cold_plan.py` on {time.strftime('%Y-%m-%d %H:%M')} ({wall:.0f} s): "
             f"median of {reps} repetitions per string (mid size), default options. *new shape*: the string "
             "is known, one extent is new; *new string*: every engine cache cleared first. numpy plans "
             "parse, solve, expand, extents and the schedule; JAX's default plans up to the extents only.", ""]
    if small:
        med = [statistics.median(r[k] for r in small) for k in (2, 3, 4, 5)]
        worst = [max(r[k] for r in small) for k in (2, 3, 4, 5)]
        lines += [
            f"Over the {len(small)} strings with at most four operands:", "",
            "| | new shape (ms) | new string (ms) |", "|---|---:|---:|",
            f"| numpy, median | {med[0]:.3f} | {med[1]:.3f} |",
            f"| numpy, worst | {worst[0]:.3f} | {worst[1]:.3f} |",
            f"| JAX default, median | {med[2]:.3f} | {med[3]:.3f} |",
            f"| JAX default, worst | {worst[2]:.3f} | {worst[3]:.3f} |",
            f"| target | {NEW_SHAPE_TARGET_MS} | {NEW_STRING_TARGET_MS} |", ""]
    lines += ["| subscripts | operands | numpy new shape | numpy new string | JAX new shape | JAX new string |",
              "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| `{r[0]}` | {r[1]} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.3f} |" for r in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
