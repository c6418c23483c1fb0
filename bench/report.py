"""Turn one run's measurements into docs/benchmarks.md (results and plots, for readers), the
developer page dev/benchmark-goals.md (the goals and their status) and the plots.

The hand-written analysis (which strings hold a goal back and why) lives in bench/analysis.md and
is copied into the goals page verbatim, so regenerating the numbers never erases it; re-read it
against the fresh numbers after a run.
"""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

import peers
from run import Row, geomean  # type: ignore[attr-defined]

HERE = Path(__file__).resolve().parent
METHOD_TITLES = {
    "contract": "contract",
    "einsum": "np.einsum",
    "einsum_greedy": "np.einsum optimize=True",
    "opt_einsum": "opt_einsum expr",
    "cotengra": "cotengra expr",
    "einx": "einx.dot",
    "flatten": "flatten+einsum",
}
# Goals (dev/benchmark-goals.md).  Speedups are over the per-string fastest of peers.PEERS
# (numpy, opt_einsum and cotengra); a peer whose result is a view of its input (a pure
# permutation) is timed with .copy(), since contract's results never alias.
GOAL_SPEEDUP_GEOMEAN = 2.0  # mid and large
GOAL_SPEEDUP_FLOOR = 0.8  # mid and large, every string
GOAL_ROOFLINE_TOTAL = 2.0  # mid: vocabulary total / total roofline estimate
GOAL_ROOFLINE_STRING = 5.0  # mid: every string / its own estimate
GOAL_TINY_FLOOR = 0.9  # tiny: every string vs np.einsum on the expanded string
GOAL_TINY_OVERHEAD_US = 1.5
GOAL_MEMORY = 1.0  # large: contract's peak extra memory / largest operand or result
GOAL_MODEL_SHARE = 0.9  # mid: strings whose modelled time is within 2x of the clock
GOAL_MODEL_SLOW_US = 100.0  # mid and large: every string slower than this within 2x
STEP_NOISE = 0.95  # a step counts as priced below its roofline under 0.95x it (measurement noise)
# The earlier target, against numpy/opt_einsum peers only, reported for continuity (not a goal).
CONTINUITY_GEOMEAN = 1.5


def _ok(rows: list[Row]) -> list[Row]:
    return [r for r in rows if not r.error and "contract" in r.seconds]


def _listed(items, fmt="{:.2f}x") -> str:
    return ", ".join(f"`{s}` {fmt.format(v)}" for s, v in items) or "none"


def _by_operands(rows: list[Row]) -> dict[str, list[Row]]:
    """``rows`` by their operand count: one, two, three or more."""
    groups: dict[str, list[Row]] = {"1": [], "2": [], "3+": []}
    for r in rows:
        count = r.subscripts.split("->")[0].count(",") + 1
        groups[str(count) if count < 3 else "3+"].append(r)
    return groups


def summarise(results: dict[str, list[Row]], roof) -> dict:
    summary: dict = {}
    for size, rows in results.items():
        rows = _ok(rows)
        speedups = {r.subscripts: r.speedup() for r in rows}
        entry = {
            "strings": len(rows),
            "errors": [(r.subscripts, r.error) for r in results[size] if r.error],
            "geomean_vs_peers": geomean(speedups.values()),
            "geomean_vs_numpy_peers": geomean(r.speedup(peers.NUMPY_PEERS) for r in rows),
            "geomean_vs_all_peers": geomean(
                r.speedup(tuple(m for m in peers.METHODS if m != "contract")) for r in rows
            ),
            "geomean_vs_cotengra": geomean(r.speedup(("cotengra",)) for r in rows),
            "below_floor": sorted(
                ((s, v) for s, v in speedups.items() if v is not None and v < GOAL_SPEEDUP_FLOOR),
                key=lambda x: x[1],
            ),
            "below_one": sum(1 for v in speedups.values() if v is not None and v < 1.0),
            # where the geometric mean comes from: a two-operand string is one product for every
            # contender alike, so its ratio sits near 1x; paths only differ from three operands
            "by_operands": {
                label: (len(group), geomean(speedups[r.subscripts] for r in group))
                for label, group in _by_operands(rows).items() if group
            },
            "fastest_peer_counts": _count(r.best_peer()[0] for r in rows if r.best_peer()),
            "timed_out": sorted(
                (r.subscripts, m) for r in results[size] for m, why in r.skipped.items() if "timed out" in why
            ),
        }
        ideal = {r.subscripts: roof.ideal_seconds(r.flops, r.nbytes) for r in rows}
        ratio = {r.subscripts: r.seconds["contract"] / ideal[r.subscripts] for r in rows}
        entry["roofline_total_ratio"] = sum(r.seconds["contract"] for r in rows) / sum(ideal.values())
        best_peer_total = sum(r.best_peer()[1] for r in rows if r.best_peer())
        entry["best_peer_roofline_total_ratio"] = best_peer_total / sum(ideal.values())
        entry["roofline_worst"] = sorted(ratio.items(), key=lambda x: -x[1])[:6]
        entry["roofline_above"] = sorted(
            ((s, v) for s, v in ratio.items() if v > GOAL_ROOFLINE_STRING), key=lambda x: -x[1]
        )
        tiny_ratio = {
            r.subscripts: r.seconds["einsum"] / r.seconds["contract"] for r in rows if "einsum" in r.seconds
        }
        entry["vs_einsum_geomean"] = geomean(tiny_ratio.values())
        entry["vs_einsum_below_floor"] = sorted(
            ((s, v) for s, v in tiny_ratio.items() if v < GOAL_TINY_FLOOR), key=lambda x: x[1]
        )
        entry["vs_einsum_min"] = min(tiny_ratio.values()) if tiny_ratio else float("nan")
        overheads = sorted(
            (r.seconds["contract"] - r.seconds["program"]) * 1e6 for r in rows if "program" in r.seconds
        )
        entry["overhead_us_median"] = overheads[len(overheads) // 2] if overheads else float("nan")
        entry["overhead_us_p90"] = overheads[int(len(overheads) * 0.9)] if overheads else float("nan")
        memory = {
            r.subscripts: r.memory["contract"] / r.largest_bytes
            for r in rows
            if "contract" in r.memory and r.largest_bytes
        }
        entry["memory_measured"] = len(memory)
        entry["memory_max"] = max(memory.values()) if memory else float("nan")
        entry["memory_above"] = sorted(
            ((s, v) for s, v in memory.items() if v > GOAL_MEMORY), key=lambda x: -x[1]
        )
        entry.update(_model_entry(rows, roof))
        summary[size] = entry
    summary["goals"] = _goals(summary)
    return summary


def step_rooflines(row: Row, roof) -> list[tuple[float, float]]:
    """(modelled, roofline) seconds of each step of the row's default schedule."""
    return [(model, roof.step_seconds(flops, moved, touched)) for model, flops, moved, touched in row.steps]


def schedule_roofline(row: Row, roof) -> float | None:
    """The least time the row's schedule could take: its steps' rooflines summed."""
    return sum(r for _, r in step_rooflines(row, roof)) if row.steps else None


def _model_entry(rows: list[Row], roof) -> dict:
    """How the time model compares with the clock and the roofline, per string and per step."""
    ratios = {r.subscripts: r.modelled / r.seconds["contract"] for r in rows if r.modelled}
    outside = sorted(((s, v) for s, v in ratios.items() if not 0.5 <= v <= 2.0), key=lambda x: abs(math.log(x[1])),
                     reverse=True)
    clock = {r.subscripts: r.seconds["contract"] for r in rows}
    below = [(r.subscripts, k, model / ceiling) for r in rows
             for k, (model, ceiling) in enumerate(step_rooflines(r, roof)) if model < STEP_NOISE * ceiling]
    return {
        "model_strings": len(ratios),
        "model_within_2x": len(ratios) - len(outside),
        "model_outside_2x": outside,
        "model_outside_slow": [(s, v) for s, v in outside if clock[s] * 1e6 > GOAL_MODEL_SLOW_US],
        "steps_priced": sum(len(r.steps) for r in rows),
        "steps_below_roofline": sorted(below, key=lambda x: x[2]),
    }


def _count(names) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda x: -x[1]))


def _goals(summary: dict) -> list[tuple[str, str, str, bool]]:
    goals = []
    for size in ("mid", "large"):
        if size not in summary:
            continue
        s = summary[size]
        goals.append(
            (
                f"{size}: geometric-mean speedup over the per-string fastest peer (numpy, opt_einsum, cotengra)",
                f">= {GOAL_SPEEDUP_GEOMEAN}x",
                f"{s['geomean_vs_peers']:.2f}x (numpy/opt_einsum peers only, the earlier "
                f">= {CONTINUITY_GEOMEAN}x goal: {s['geomean_vs_numpy_peers']:.2f}x; "
                f"vs cotengra alone: {s['geomean_vs_cotengra']:.2f}x)",
                s["geomean_vs_peers"] >= GOAL_SPEEDUP_GEOMEAN,
            )
        )
        goals.append(
            (
                f"{size}: no string slower than that fastest peer by more than the floor "
                "(a peer returning a view is timed with a copy)",
                f"every string >= {GOAL_SPEEDUP_FLOOR}x",
                f"{len(s['below_floor'])} below: {_listed(s['below_floor'])}",
                not s["below_floor"],
            )
        )
    for size in ("mid", "large"):
        if size not in summary or not summary[size].get("model_strings"):
            continue
        s = summary[size]
        share = s["model_within_2x"] / s["model_strings"]
        goals.append(
            (
                f"{size}: the time model within 2x of the clock"
                + (f" on >= {GOAL_MODEL_SHARE:.0%} of strings and" if size == "mid" else "")
                + f" on every string above {GOAL_MODEL_SLOW_US:g} us",
                (f">= {GOAL_MODEL_SHARE:.0%}; " if size == "mid" else "") + "0 slow strings outside",
                f"{s['model_within_2x']} of {s['model_strings']} ({share:.0%}); slow strings outside: "
                f"{len(s['model_outside_slow'])} {_listed(s['model_outside_slow'])}",
                (share >= GOAL_MODEL_SHARE or size != "mid") and not s["model_outside_slow"],
            )
        )
        below = s["steps_below_roofline"]
        if s["steps_priced"]:
            goals.append(
                (
                    f"{size}: no step priced below its roofline (its bytes at the measured bandwidth, its FLOPs "
                    "at the measured peak)",
                    "0 steps",
                    f"{len(below)} of {s['steps_priced']} steps"
                    + (": " + ", ".join(f"`{x}` step {k + 1} {v:.2f}x" for x, k, v in below[:6]) if below else ""),
                    not below,
                )
            )
    if "mid" in summary:
        mid = summary["mid"]
        goals.append(
            (
                "mid: vocabulary total time within 2x of the roofline estimate",
                f"<= {GOAL_ROOFLINE_TOTAL}x",
                f"{mid['roofline_total_ratio']:.2f}x (fastest peers: {mid['best_peer_roofline_total_ratio']:.2f}x)",
                mid["roofline_total_ratio"] <= GOAL_ROOFLINE_TOTAL,
            )
        )
        goals.append(
            (
                "mid: no string above 5x its own roofline estimate",
                f"every string <= {GOAL_ROOFLINE_STRING}x",
                f"{len(mid['roofline_above'])} above: {_listed(mid['roofline_above'], '{:.1f}x')}",
                not mid["roofline_above"],
            )
        )
    if "large" in summary:
        large = summary["large"]
        measured = large["memory_measured"]
        goals.append(
            (
                "large: every string's peak extra memory (tracemalloc peak of one call minus its result) "
                "<= its largest operand or result",
                f"every string <= {GOAL_MEMORY:g}x",
                (
                    f"max {large['memory_max']:.2f}x; {len(large['memory_above'])} above: "
                    + _listed(large["memory_above"])
                )
                if measured
                else "not measured",
                bool(measured) and not large["memory_above"],
            )
        )
    if "tiny" in summary:
        tiny = summary["tiny"]
        goals.append(
            (
                "tiny: speed relative to np.einsum on the expanded string",
                f"every string >= {GOAL_TINY_FLOOR}x",
                f"geomean {tiny['vs_einsum_geomean']:.2f}x, min {tiny['vs_einsum_min']:.2f}x; "
                f"{len(tiny['vs_einsum_below_floor'])} below: {_listed(tiny['vs_einsum_below_floor'])}",
                not tiny["vs_einsum_below_floor"],
            )
        )
        goals.append(
            (
                "tiny: per-call overhead of the cached path (contract minus its bare program)",
                f"<= ~{GOAL_TINY_OVERHEAD_US} us",
                f"median {tiny['overhead_us_median']:.2f} us, 90th pct {tiny['overhead_us_p90']:.2f} us",
                tiny["overhead_us_median"] <= GOAL_TINY_OVERHEAD_US,
            )
        )
    return goals


def _size_line(size: str, s: dict) -> str:
    counts = ", ".join(f"{METHOD_TITLES[m]} {n}" for m, n in s["fastest_peer_counts"].items())
    return (
        f"{size} ({s['strings']} strings): geomean speedup {s['geomean_vs_peers']:.2f}x over the fastest peer "
        f"incl. cotengra ({s['geomean_vs_numpy_peers']:.2f}x over numpy/opt_einsum only, "
        f"{s['geomean_vs_all_peers']:.2f}x counting einx too, {s['geomean_vs_cotengra']:.2f}x over cotengra "
        f"alone; by operand count: "
        + ", ".join(f"{label} ({n} strings) {g:.2f}x" for label, (n, g) in s.get("by_operands", {}).items())
        + f"); {s['below_one']} strings < 1x; total time {s['roofline_total_ratio']:.2f}x the roofline "
        f"estimate (fastest peers: {s['best_peer_roofline_total_ratio']:.2f}x); fastest peer per string: "
        f"{counts or '-'}"
        + (f"; peak extra memory max {s['memory_max']:.2f}x largest array" if s["memory_measured"] else "")
        + (f"; {len(s['timed_out'])} contender call(s) timed out" if s["timed_out"] else "")
    )


def summary_lines(summary: dict) -> list[str]:
    lines = ["", "goals:"]
    for name, target, measured, met in summary["goals"]:
        lines.append(f"  [{'met' if met else 'NOT met'}] {name}: target {target}; measured {measured}")
    for size in ("tiny", "mid", "large"):
        if size in summary:
            lines.append("  " + _size_line(size, summary[size]))
    return lines


def _fmt_us(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    us = seconds * 1e6
    return f"{us:,.1f}" if us < 100 else f"{us:,.0f}"


def _table(rows: list[Row], roof, size: str) -> list[str]:
    head = [
        "string",
        *(METHOD_TITLES[m] for m in peers.METHODS),
        "fastest peer",
        "speedup",
        "ideal",
        "contract/ideal",
        "path",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted(rows, key=lambda r: (r.error != "", -(r.speedup() or 0))):
        if r.error:
            lines.append(f"| `{r.subscripts}` | error: {r.error} |" + " |" * (len(head) - 2))
            continue
        cells = [f"`{r.subscripts}`"]
        for m in peers.METHODS:
            if m in r.seconds:
                cells.append(_fmt_us(r.seconds[m]) + (" †" if m in r.notes else ""))
            else:
                cells.append("timeout" if "timed out" in r.skipped.get(m, "") else "skip")
        best = r.best_peer()
        speed = r.speedup()
        ideal = roof.ideal_seconds(r.flops, r.nbytes)
        cells += [
            METHOD_TITLES[best[0]] if best else "-",
            f"**{speed:.2f}x**"
            if speed is not None and speed < GOAL_SPEEDUP_FLOOR
            else (f"{speed:.2f}x" if speed else "-"),
            _fmt_us(ideal),
            f"{r.seconds['contract'] / ideal:.1f}x",
            r.strategy,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    mb = n / 1e6
    return f"{mb:.0f}" if abs(mb) >= 100 else (f"{mb:.1f}" if abs(mb) >= 1 else f"{mb:.2f}")


def _memory_table(rows: list[Row]) -> list[str]:
    """Peak extra memory per contender, in MB, next to the largest operand or result."""
    head = [
        "string",
        "largest operand/result",
        *(METHOD_TITLES[m] for m in peers.METHODS),
        "contract/largest",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    measured = [r for r in rows if "contract" in r.memory and r.largest_bytes]
    for r in sorted(measured, key=lambda r: -r.memory["contract"] / r.largest_bytes):
        cells = [f"`{r.subscripts}`", _fmt_bytes(r.largest_bytes)]
        for m in peers.METHODS:
            if m in r.memory:
                cells.append(_fmt_bytes(r.memory[m]) + (" †" if m in r.notes else ""))
            else:
                cells.append("timeout" if "timed out" in r.skipped.get(m, "") else "skip")
        ratio = r.memory["contract"] / r.largest_bytes
        cells.append(f"**{ratio:.2f}x**" if ratio > GOAL_MEMORY else f"{ratio:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _environment_line(env: dict, elapsed: float) -> str:
    return (
        f"on {env['date']} ({elapsed / 60:.1f} min wall). Machine: {env['cpus']} cores ({env['machine']}"
        + (f", {env['cpu']}" if env.get("cpu") else "") + "), "
        f"shared with other work; Python {env['python']}, numpy {env['numpy']} with {env['blas']}, "
        f"opt_einsum {env['opt_einsum']}, cotengra {env.get('cotengra', '?')}, einx {env['einx']}. "
        f"BLAS threading: {env['thread_env']} "
        "(OpenBLAS then uses both cores for large products). "
        f"The model's prices: {env.get('profile', 'built-in defaults')} (`bench/run.py --profile FILE`). "
        + (f"A large call's route: {env['routes']} (each such call settles before it is timed). "
           if env.get("routes") else "")
        + "Raw numbers: `bench/results/latest.json`."
    )


def _results_table(summary: dict) -> list[str]:
    """One row per size: the headline ratios a reader wants first."""
    lines = [
        "| size | strings | speedup over the fastest peer (geomean) | over numpy/opt_einsum only | "
        "over cotengra alone | strings where contract is fastest | peak extra memory (max, x largest array) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for size in ("tiny", "mid", "large"):
        if size not in summary:
            continue
        s = summary[size]
        memory = f"{s['memory_max']:.2f}x" if s["memory_measured"] else "-"
        lines.append(
            f"| {size} | {s['strings']} | **{s['geomean_vs_peers']:.2f}x** | {s['geomean_vs_numpy_peers']:.2f}x | "
            f"{s['geomean_vs_cotengra']:.2f}x | {s['strings'] - s['below_one']} of {s['strings']} | {memory} |"
        )
    return lines


def markdown(results: dict[str, list[Row]], roof, env: dict, summary: dict, elapsed: float) -> str:
    """docs/benchmarks.md: what was measured, the results and plots, then method and tables."""
    out: list[str] = []
    add = out.append
    add("# Benchmarks: `contract` on numpy against its peers")
    add("")
    count = max(summary[s]["strings"] for s in ("tiny", "mid", "large") if s in summary)
    add(
        f"Every grouped string of the vocabulary ({count} strings found in `contractions/` and `examples/`) at "
        "three sizes: `contract` against the fastest of `np.einsum`, `np.einsum(optimize=True)`, an opt_einsum "
        "expression, a cotengra expression and a flatten+reshape baseline on the hand-expanded string, on "
        "float64 numpy arrays. A speedup is the fastest peer's time divided by `contract`'s: above 1x, "
        "`contract` is faster. How each number is measured is under [Method](#method)."
    )
    add("")
    add("## Results")
    add("")
    out.extend(_results_table(summary))
    add("")
    if "tiny" in summary:
        tiny = summary["tiny"]
        add(
            f"On tiny operands (every extent 2) the arithmetic is negligible and the time is overhead: `contract` "
            f"runs at {tiny['vs_einsum_geomean']:.2f}x the speed of `np.einsum` on the expanded string (geometric "
            f"mean; slowest string {tiny['vs_einsum_min']:.2f}x), with a median per-call overhead of "
            f"{tiny['overhead_us_median']:.2f} µs over its own compiled schedule."
        )
        add("")
    add(
        "![Speedup of contract over the fastest peer, one bar per vocabulary string, for mid and large operands, "
        "and speed relative to np.einsum for tiny operands](benchmarks.png)"
    )
    add("")
    add(
        "*Speedup per string (log scale; above 1x `contract` is faster). Bars are coloured by range (legend); "
        "black diamonds mark the ratio against cotengra alone. Vertical lines at 0.8x, 1x and 2x.*"
    )
    add("")
    add(
        "![Measured time per call against the roofline estimate, for contract and the fastest peers]"
        "(benchmarks_roofline.png)"
    )
    add("")
    add(
        f"*Time per call (seconds, log scale) against the roofline estimate max(flops / peak, bytes / bandwidth) "
        f"with the peak (float64 matmul **{roof.peak_flops / 1e9:.1f} GFLOP/s**) and copy bandwidth "
        f"(**{roof.bandwidth / 1e9:.1f} GB/s**) measured in the same run; the diagonal is the roofline, points on "
        "it run at the machine's limit.*"
    )
    add("")
    add("![The time model against the clock and each schedule's roofline, per string](benchmarks_model.png)")
    add("")
    add(
        "*Per string (sorted by measured time): `contract`'s clock, the time model's price of its schedule, and "
        "the schedule's roofline (each step's bytes at the bandwidth measured in the same run, within or past "
        "the caches, or its FLOPs at the peak, summed). "
        + "; ".join(
            f"{size}: the model within 2x of the clock on {summary[size]['model_within_2x']} of "
            f"{summary[size]['model_strings']} strings, {len(summary[size]['steps_below_roofline'])} of "
            f"{summary[size]['steps_priced']} steps priced below their roofline"
            for size in ("mid", "large") if size in summary and summary[size].get("model_strings")
        )
        + ".*"
    )
    add("")
    add("![Peak extra memory of one call per contender, relative to its largest operand or result](benchmarks_memory.png)")
    add("")
    add(
        "*Peak extra memory of one large call (tracemalloc peak minus the result), divided by the largest "
        "operand or result (log scale); the vertical line is 1x.*"
    )
    add("")
    # The other backends and the planning cost are separate runs, each writing its own page; their
    # results are copied here when this report is written.
    sections = [
        ("benchmarks_jax.md", "## JAX under `jit`", "### JAX under `jit`",
         "JAX under `jit` (`python bench/jax_bench.py`, page [benchmarks_jax.md](benchmarks_jax.md)):"),
        ("benchmarks_eager.md", "## Eager JAX call overhead", "### Eager JAX call overhead",
         "Eager JAX calls (`python bench/eager_overhead.py`, page [benchmarks_eager.md](benchmarks_eager.md)):"),
        ("benchmarks_torch.md", None, None,
         "PyTorch, eager and `torch.compile` (`python bench/torch_bench.py`, page "
         "[benchmarks_torch.md](benchmarks_torch.md)):"),
        ("benchmarks_cold_plan.md", "## Cold planning", "### Cold planning",
         "The cost of planning a new shape or a new string (`python bench/cold_plan.py`, page "
         "[benchmarks_cold_plan.md](benchmarks_cold_plan.md)):"),
        ("benchmarks_first_call.md", None, None,
         "First calls: a tensor-train loop whose shapes change on almost every call, timed pass by pass "
         "against the hand-written code, and the first call of a new shape or a new string per vocabulary "
         "string (`python bench/tt_loop.py`, `python bench/first_call.py`, page "
         "[benchmarks_first_call.md](benchmarks_first_call.md)):"),
    ]
    for name, heading, demoted, intro in sections:
        page = HERE.parent / "docs" / name
        if not page.exists():
            continue
        text = page.read_text().strip()
        if heading is not None:
            text = text.replace(heading, demoted, 1)
        else:  # a page opening with a level-1 heading: two levels down, under this page's sections
            text = "\n".join("##" + line if line.startswith("#") else line for line in text.splitlines())
        add(intro)
        add("")
        add(text)
        add("")
    add(
        "The project's performance targets, whether this run meets each, and a reading of the strings that "
        "miss them are on the developer page [benchmark goals](../dev/benchmark-goals.md)."
    )
    add("")
    add("## Setup")
    add("")
    add("Generated by one run of")
    add("")
    add("```")
    add("python bench/run.py")
    add("```")
    add("")
    add(_environment_line(env, elapsed))
    add("")
    add("## Method")
    add("")
    add(
        "- **Workload**: every grouped subscripts string found by the AST vocabulary scan of `contractions/` and "
        "`examples/` (`bench/vocabulary.py`). Each group gets 2 sub-axes; extents start at 2 (tiny), 8 per "
        "sub-axis / 24 per lowercase letter (mid) or 16 / 48 (large) and shrink until no array exceeds "
        "2^19 (mid) / 2^22 (large) elements and the best-path flop count stays under 2e8 (mid) / 2e9 (large). "
        "float64 operands. `contract` gets only the `len_G` supplements the string needs."
    )
    add(
        "- **Contenders** (`bench/peers.py`): `contract`; `np.einsum` on the hand-expanded string (numpy's "
        "default: one C loop, no BLAS); `np.einsum(..., optimize=True)`, numpy's own pairwise path (in numpy "
        "the same call as `optimize='greedy'`: `einsum_path` maps `True` to `'greedy'` with the same memory "
        "limit; also the replaced library's policy); an "
        "opt_einsum `ContractExpression` built once for the shapes; `einx.dot` with one named axis per sub-axis "
        "(it cannot express single-operand strings or repeated axes; on numpy it compiles to the same single "
        f"`np.einsum` call); a flatten+reshape named-function baseline (each group reshaped to one axis, the "
        "grouped string run as a fixed einsum with `optimize='greedy'`, reshaped back; reshape targets "
        "precomputed); a cotengra expression, `cotengra.einsum_expression(expanded, *shapes)` with its default "
        "`optimize='auto'` (a new user's call), built once per case outside the timing like the opt_einsum one. "
        "`'auto'` searches exactly below its hardness cutoff, which every vocabulary string is (a few ms per "
        "case, so no cheaper optimizer had to be substituted), and on numpy cotengra runs each pair as its own "
        "batched matmul. "
        f"The two single-loop contenders are skipped above {peers.NAIVE_EINSUM_MAX_ITERATIONS:.0e} "
        "loop iterations (one C loop: seconds per call, never the fastest). Where `np.einsum_path` predicts more "
        f"than {peers.GREEDY_MAX_FLOPS:.0e} flops for the greedy-based ones (optimize=True, flatten) -- their "
        "greedy path may then fall back to one nested loop, 55 s measured for a mid-size 5-operand string -- "
        "their first call runs in a forked child and is killed after "
        f"{peers.CALL_CAP_SECONDS:g} s: `timeout` in the tables (a timed-out contender is never the fastest, "
        "so the speedup column is unaffected). A peer whose result is a view of an input (`np.einsum` and the "
        "expressions on a pure permutation such as `CWb->WCb`) is timed with `.copy()` appended, marked †: "
        "`contract`'s result never aliases its inputs, so the view would compare a copy with no work."
    )
    add(
        "- **Timing** (`bench/timing.py`): each contender is warmed up, then called in batches sized to a few ms; "
        "contenders take turns batch by batch; the median per-call time is kept. Tiny and mid are measured in "
        "two passes minutes apart and each contender keeps its better pass (the shared machine has episodes "
        "where every BLAS call stalls ~8 ms); large is one pass. Contenders slower than "
        "0.1 s per call take turns call by call, and the median is kept: a peer two calls (for a capped contender "
        "the forked child's call is one of the two), `contract` and the references it is compared with (its "
        "bare program, the unbounded run) five each. `contract`'s result is checked against opt_einsum before timing."
    )
    add(
        "- **Ratios** are computed within the run: speedup = (fastest peer: np.einsum, np.einsum optimize=True, "
        "opt_einsum expression, cotengra expression, flatten baseline) / `contract`; the earlier figure without "
        "cotengra is reported beside it. **Overhead** on tiny operands = `contract` minus "
        "the same cached compiled schedule called directly (parse/solve/plan cache lookup and dispatch)."
    )
    add(
        "- **Peak extra memory** (`bench/memory.py`), mid and large: one untimed call per contender under "
        "`tracemalloc` (numpy reports every array-data allocation to it) -- one more warm call after the timed "
        "ones, or, for a contender slower than 0.1 s per call, its first call (untimed) -- the "
        "traced peak during the call minus the bytes of the returned result, i.e. what the call needed beyond "
        "the array it hands back (intermediates, gathered copies). BLAS's internal work buffers are not seen. "
        "Shown for large next to the largest operand or result, in MB (10^6 bytes)."
    )
    add(
        "- **Roofline** (`bench/roofline.py`): ideal time = max(flops / matmul peak, bytes / copy bandwidth), with "
        "flops = opt_einsum's count for its best path and bytes = operands read once + output written once. "
        "`contract/ideal` is how many times the ideal a string takes (1x = at the roofline). Whole operands "
        "are counted, so a diagonal/trace string (`Bii->B`, `CDaa->CD`), which reads only its diagonal, can "
        "come out below 1x."
    )
    add(
        "- **Strategy** column: `direct` = one einsum call (problem below `DIRECT_MAX_NAIVE_COST` naive loop "
        "iterations, or a single operand); `pairwise` = the schedule's BLAS steps (`contractions/schedule/`, run by `contractions/backends/numpy_backend.py`)."
    )
    add("")
    for size in ("mid", "tiny", "large"):
        if size not in results:
            continue
        rows = results[size]
        add(f"## {size} (times in µs, median per call)")
        add("")
        out.extend(_table(rows, roof, size))
        add("")
        if any(r.notes for r in rows):
            add(
                "† the peer returned a view of its input; timed (and its memory measured) with `.copy()` appended."
            )
            add("")
        skipped: dict[str, list[str]] = {}
        for r in rows:
            for method, reason in r.skipped.items():
                reason = re.sub(r"\d+(\.\d+)?e[+-]?\d+", "N", reason)  # group by kind, not count
                skipped.setdefault(f"{METHOD_TITLES[method]}: {reason}", []).append(r.subscripts)
        if skipped:
            add("Skipped or timed-out contenders:")
            add("")
            for reason, strings in sorted(skipped.items()):
                add(f"- {reason} — {len(strings)} strings: " + ", ".join(f"`{s}`" for s in strings))
            add("")
        modelled = [r for r in _ok(rows) if r.modelled > 0 and "contract" in r.seconds]
        if size != "tiny" and modelled:
            ratios = sorted(((r.seconds["contract"] / r.modelled, r) for r in modelled),
                            key=lambda t: t[0])
            far = [(x, r) for x, r in ratios if x > 2 or x < 0.5]
            add(f"### {size}: measured against modelled time")
            add("")
            add(f"`contract`'s measured median over the numpy time model's estimate of its schedule "
                f"(`python bench/steps.py --size {size} STRING` splits it per step): median "
                f"{statistics.median(x for x, _ in ratios):.2f}x, {len(far)} of {len(ratios)} strings "
                "beyond 2x either way" + (": " + ", ".join(
                    f"`{r.subscripts}` {x:.2f}x" + (f" ({r.blocks} blocks)" if r.blocks > 1 else "")
                    for x, r in far) if far else "") + ".")
            add("")
        bounded = [r for r in _ok(rows) if "unbounded" in r.seconds and "contract" in r.seconds]
        if bounded:
            pairs = sorted(((r.seconds["unbounded"] / r.seconds["contract"], r) for r in bounded),
                           key=lambda t: t[0])
            slow = [(x, r) for x, r in pairs if x < 0.9]
            add(f"### {size}: the default bound's price")
            add("")
            add(f"{len(pairs)} strings run in blocks under the default bound; their time with "
                "`memory_limit=None` (one unblocked run) over their default time: geomean "
                f"{geomean([x for x, _ in pairs]):.2f}x, min {pairs[0][0]:.2f}x; {len(slow)} below "
                "0.9x" + (": " + ", ".join(f"`{r.subscripts}` {x:.2f}x ({r.blocks} blocks)"
                                          for x, r in slow) if slow else "") + ".")
            add("")
        if size == "large" and any(r.memory for r in rows):
            add("### large: peak extra memory (MB; tracemalloc peak of one call minus its result)")
            add("")
            out.extend(_memory_table(_ok(rows)))
            add("")
    return "\n".join(out) + "\n"


def goals_markdown(summary: dict, env: dict, elapsed: float) -> str:
    """dev/benchmark-goals.md: the targets, this run's status, and the hand-written reading."""
    out: list[str] = []
    add = out.append
    add("# Benchmark goals and their status")
    add("")
    add(
        "The targets the project holds `contract` to, evaluated by `bench/report.py` on the same run as "
        "[the benchmark results](../docs/benchmarks.md) (which say how each number is measured). Generated "
        "by `python bench/run.py` " + _environment_line(env, elapsed)
    )
    add("")
    add("## Goals")
    add("")
    add("| goal | target | measured | met |")
    add("|---|---|---|---|")
    for name, target, measured, met in summary["goals"]:
        add(f"| {name} | {target} | {measured} | {'yes' if met else '**no**'} |")
    add("")
    for size in ("tiny", "mid", "large"):
        if size in summary:
            line = _size_line(size, summary[size])
            add(f"- **{size}**{line[len(size) :]}.")
    add("")
    analysis = HERE / "analysis.md"
    if analysis.exists():
        add(analysis.read_text().strip())
        add("")
    return "\n".join(out) + "\n"


def plot(
    results: dict[str, list[Row]],
    roof,
    speed_path: Path,
    roofline_path: Path,
    memory_path: Path | None = None,
    model_path: Path | None = None,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sizes = [s for s in ("mid", "large") if s in results]
    mid_rows = {r.subscripts: r for r in _ok(results.get("mid", []))}
    order = sorted(mid_rows, key=lambda s: mid_rows[s].speedup() or 0) or [
        r.subscripts for r in _ok(results[next(iter(results))])
    ]
    panels = [
        (
            size,
            f"{size}: speedup vs fastest peer (numpy, opt_einsum, cotengra)",
            lambda r: r.speedup(),
            lambda r: r.speedup(("cotengra",)),
            (GOAL_SPEEDUP_FLOOR, GOAL_SPEEDUP_GEOMEAN),
        )
        for size in sizes
    ]
    if "tiny" in results:
        panels.append(
            (
                "tiny",
                "tiny: speed relative to np.einsum (expanded)",
                lambda r: r.seconds["einsum"] / r.seconds["contract"] if "einsum" in r.seconds else None,
                None,
                (GOAL_TINY_FLOOR, None),
            )
        )
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    height = max(6.0, 0.16 * len(order) + 2.2)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.4 * len(panels), height), sharey=True)
    axes = list(np.atleast_1d(axes))
    y = list(range(len(order)))
    low, high = 0.25, 40.0
    for ax, (size, title, value, marker_value, (floor, goal)) in zip(axes, panels):
        by_string = {r.subscripts: r for r in _ok(results[size])}
        values = [value(by_string[s]) if s in by_string else None for s in order]
        colors = [
            "#bbbbbb"
            if v is None
            else (
                "#d62728"
                if v < floor
                else ("#ff7f0e" if v < 1.0 else ("#2ca02c" if goal and v >= goal else "#1f77b4"))
            )
            for v in values
        ]
        ax.barh(y, [min(max(v, low), high) if v else 0 for v in values], color=colors, height=0.8)
        for yi, v in zip(y, values):
            if v is not None and v < low:  # clipped: say the real ratio
                ax.text(low * 1.05, yi, f"{v:.2g}x", va="center", fontsize=6)
        if marker_value is not None:
            marks = [marker_value(by_string[s]) if s in by_string else None for s in order]
            ax.scatter(
                [min(max(m, low), high) for m in marks if m],
                [yi for yi, m in zip(y, marks) if m],
                marker="D",
                color="black",
                s=9,
                zorder=3,
            )
        ax.set_xscale("log")
        ax.set_xlim(low, high)
        lines = [x for x in (floor, 1.0, goal) if x]
        for x, style in zip(lines, (":", "-", "--")):
            ax.axvline(x, color="black", linestyle=style, linewidth=0.8)
        ax.set_title(
            f"{title}\n(geomean {geomean(values):.2f}x; lines at {', '.join(f'{x:g}x' for x in lines)})",
            fontsize=9,
        )
        peer = "np.einsum" if size == "tiny" else "fastest peer"
        ax.set_xlabel(f"speedup = {peer} time / contract time (log scale; > 1 = contract faster)", fontsize=8)
        ax.grid(axis="x", which="both", alpha=0.3)
        handles = [
            Patch(color="#d62728", label=f"< {floor:g}x"),
            Patch(color="#ff7f0e", label=f"{floor:g}x to 1x"),
            Patch(color="#1f77b4", label=f"1x to {goal:g}x" if goal else ">= 1x"),
        ]
        if goal:
            handles.append(Patch(color="#2ca02c", label=f">= {goal:g}x"))
        if any(v is None for v in values):
            handles.append(Patch(color="#bbbbbb", label="not measured"))
        if marker_value is not None:
            handles.append(
                Line2D([], [], marker="D", color="black", linestyle="none", markersize=4, label="vs cotengra alone")
            )
        ax.legend(handles=handles, fontsize=7, loc="lower right", title="bar colour", title_fontsize=7)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(order, fontsize=6, family="monospace")
    axes[0].set_ylim(-1, len(order))
    axes[0].set_ylabel("vocabulary string (sorted by mid speedup)", fontsize=8)
    fig.suptitle(
        "contract on numpy vs peers, per vocabulary string (bars: ratio; >1 = contract faster)", fontsize=11
    )
    fig.tight_layout()
    fig.savefig(speed_path, dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
    for ax, size in zip(axes, sizes):
        rows = _ok(results[size])
        ideal = [roof.ideal_seconds(r.flops, r.nbytes) for r in rows]
        ax.scatter(
            ideal, [r.seconds["contract"] for r in rows], s=14, label="contract", color="#2ca02c", zorder=3
        )
        for names, label, marker, color in (
            (peers.NUMPY_PEERS, "fastest numpy/opt_einsum peer", "x", "#7f7f7f"),
            (("cotengra",), "cotengra expr", "^", "#1f77b4"),
        ):
            points = [(i, r.best_peer(names)) for i, r in zip(ideal, rows) if r.best_peer(names)]
            ax.scatter(
                [i for i, _ in points],
                [b[1] for _, b in points],
                s=14 if marker == "x" else 10,
                label=label,
                color=color,
                marker=marker,
                facecolors=color if marker == "x" else "none",
            )
        lo = min(ideal) / 2
        hi = max(max(r.seconds.values()) for r in rows) * 2
        ax.plot([lo, hi], [lo, hi], "k-", linewidth=0.8, label="roofline (ideal)")
        ax.plot([lo, hi], [2 * lo, 2 * hi], "k--", linewidth=0.8, label="2x roofline")
        ax.plot([lo, hi], [5 * lo, 5 * hi], "k:", linewidth=0.8, label="5x roofline")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ideal time max(flops/peak, bytes/bw) [s]")
        ax.set_ylabel("measured time per call [s]")
        total = sum(r.seconds["contract"] for r in rows) / sum(ideal)
        ax.set_title(f"{size}: measured vs roofline (contract total {total:.2f}x ideal)", fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(
        f"roofline: matmul {roof.peak_flops / 1e9:.1f} GFLOP/s, copy {roof.bandwidth / 1e9:.1f} GB/s (measured in the same run)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(roofline_path, dpi=110)
    plt.close(fig)

    if model_path is not None:
        _plot_model(plt, results, roof, sizes, model_path)

    if memory_path is None or "large" not in results:
        return
    rows = [r for r in _ok(results["large"]) if "contract" in r.memory and r.largest_bytes]
    if not rows:
        return
    rows.sort(key=lambda r: r.memory["contract"] / r.largest_bytes)
    floor, ceiling = 1e-3, 100.0
    fig, ax = plt.subplots(figsize=(8, max(6.0, 0.16 * len(rows) + 1.5)))
    y = list(range(len(rows)))
    styles = {
        "contract": ("o", "#2ca02c"),
        "einsum_greedy": ("s", "#ff7f0e"),
        "opt_einsum": ("x", "#7f7f7f"),
        "cotengra": ("^", "#1f77b4"),
        "flatten": ("d", "#9467bd"),
    }
    for name, (marker, color) in styles.items():
        points = [(r.memory[name] / r.largest_bytes, yi) for r, yi in zip(rows, y) if name in r.memory]
        ax.scatter(
            [min(max(v, floor), ceiling) for v, _ in points],
            [yi for _, yi in points],
            marker=marker,
            s=36 if name == "contract" else 10,
            color=color,
            facecolors="none" if name == "contract" else color,
            label=METHOD_TITLES[name],
            zorder=3 if name == "contract" else 2,
        )
    ax.axvline(GOAL_MEMORY, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlim(floor * 0.8, ceiling)
    ax.set_yticks(y)
    ax.set_yticklabels([r.subscripts for r in rows], fontsize=6, family="monospace")
    ax.set_ylim(-1, len(rows))
    ax.set_xlabel(f"peak extra memory / largest operand or result (clipped to [{floor:g}, {ceiling:g}])")
    ax.set_title("large: peak extra memory of one call (tracemalloc; line at 1x = the largest array)", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(memory_path, dpi=110)
    plt.close(fig)


def _plot_model(plt, results: dict[str, list[Row]], roof, sizes: list[str], path: Path) -> None:
    """Per string, side by side: the clock, the time model and the schedule's roofline."""
    fig, axes = plt.subplots(1, len(sizes), figsize=(7 * len(sizes), 5.5), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        rows = sorted((r for r in _ok(results[size]) if r.modelled), key=lambda r: r.seconds["contract"])
        x = list(range(len(rows)))
        ax.scatter(x, [r.seconds["contract"] for r in rows], s=14, color="#2ca02c", label="clock (contract)", zorder=3)
        ax.scatter(x, [r.modelled for r in rows], s=16, marker="x", color="#d62728", label="time model", zorder=3)
        roofs = [(xi, schedule_roofline(r, roof)) for xi, r in zip(x, rows)]
        ax.scatter([xi for xi, v in roofs if v], [v for _, v in roofs if v], s=22, marker="_", color="black",
                   label="roofline of its steps")
        ax.set_yscale("log")
        s = _model_entry(rows, roof)
        ax.set_title(f"{size}: model within 2x of the clock on {s['model_within_2x']} of {s['model_strings']} "
                     f"strings;\n{len(s['steps_below_roofline'])} of {s['steps_priced']} steps priced below "
                     "their roofline", fontsize=9)
        ax.set_xlabel("vocabulary string, sorted by measured time", fontsize=8)
        ax.set_ylabel("seconds per call (log)", fontsize=8)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle(
        f"the time model against the clock and the roofline (peak {roof.peak_flops / 1e9:.0f} GFLOP/s; copy "
        f"{roof.cache_bandwidth / 1e9:.0f} GB/s within the caches, {roof.bandwidth / 1e9:.0f} GB/s past them)",
        fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

