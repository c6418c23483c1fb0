"""Turn one run's measurements into the goal summary, docs/benchmarks.md and the plots.

The hand-written analysis (which strings hold a goal back and why) lives in bench/analysis.md and
is copied into the report verbatim, so regenerating the numbers never erases it; re-read it
against the fresh numbers after a run.
"""

from __future__ import annotations

import re
from pathlib import Path

import peers
from run import Row, geomean  # type: ignore[attr-defined]

HERE = Path(__file__).resolve().parent
METHOD_TITLES = {
    "contract": "contract",
    "einsum": "np.einsum",
    "einsum_greedy": "np.einsum greedy",
    "opt_einsum": "opt_einsum expr",
    "einx": "einx.dot",
    "flatten": "flatten+einsum",
}
GOAL_MID_GEOMEAN = 1.5
GOAL_MID_FLOOR = 0.8
GOAL_TINY_FLOOR = 0.8
GOAL_TINY_OVERHEAD_US = 1.5
GOAL_ROOFLINE = 3.0


def _ok(rows: list[Row]) -> list[Row]:
    return [r for r in rows if not r.error and "contract" in r.seconds]


def summarise(results: dict[str, list[Row]], roof) -> dict:
    summary: dict = {}
    for size, rows in results.items():
        rows = _ok(rows)
        speedups = {r.subscripts: r.speedup() for r in rows}
        speedups_all = {
            r.subscripts: r.speedup(tuple(m for m in peers.METHODS if m != "contract")) for r in rows
        }
        entry = {
            "strings": len(rows),
            "errors": [(r.subscripts, r.error) for r in results[size] if r.error],
            "geomean_vs_numpy_peers": geomean(speedups.values()),
            "geomean_vs_all_peers": geomean(speedups_all.values()),
            "below_floor": sorted(
                ((s, v) for s, v in speedups.items() if v is not None and v < GOAL_MID_FLOOR),
                key=lambda x: x[1],
            ),
            "below_one": sum(1 for v in speedups.values() if v is not None and v < 1.0),
        }
        ideal = {r.subscripts: roof.ideal_seconds(r.flops, r.nbytes) for r in rows}
        entry["roofline_total_ratio"] = sum(r.seconds["contract"] for r in rows) / sum(ideal.values())
        best_peer_total = sum(r.best_peer()[1] for r in rows if r.best_peer())
        entry["best_peer_roofline_total_ratio"] = best_peer_total / sum(ideal.values())
        entry["roofline_worst"] = sorted(
            ((r.subscripts, r.seconds["contract"] / ideal[r.subscripts]) for r in rows), key=lambda x: -x[1]
        )[:6]
        if "einsum" in peers.METHODS:
            tiny_ratio = {
                r.subscripts: r.seconds["einsum"] / r.seconds["contract"]
                for r in rows
                if "einsum" in r.seconds
            }
            entry["vs_einsum_geomean"] = geomean(tiny_ratio.values())
            entry["vs_einsum_below_floor"] = sorted(
                ((s, v) for s, v in tiny_ratio.items() if v < GOAL_TINY_FLOOR), key=lambda x: x[1]
            )
            entry["vs_einsum_min"] = min(tiny_ratio.values()) if tiny_ratio else float("nan")
        overheads = [
            (r.seconds["contract"] - r.seconds["program"]) * 1e6 for r in rows if "program" in r.seconds
        ]
        entry["overhead_us_median"] = sorted(overheads)[len(overheads) // 2] if overheads else float("nan")
        entry["overhead_us_p90"] = sorted(overheads)[int(len(overheads) * 0.9)] if overheads else float("nan")
        summary[size] = entry
    goals = []
    if "mid" in summary:
        mid = summary["mid"]
        goals.append(
            (
                "mid: geometric-mean speedup over the per-string fastest numpy/opt_einsum peer",
                f">= {GOAL_MID_GEOMEAN}x",
                f"{mid['geomean_vs_numpy_peers']:.2f}x",
                mid["geomean_vs_numpy_peers"] >= GOAL_MID_GEOMEAN,
            )
        )
        goals.append(
            (
                "mid: no string slower than that fastest peer by more than the floor",
                f"every string >= {GOAL_MID_FLOOR}x",
                f"{len(mid['below_floor'])} below: "
                + (", ".join(f"`{s}` {v:.2f}x" for s, v in mid["below_floor"]) or "none"),
                not mid["below_floor"],
            )
        )
        goals.append(
            (
                "mid: vocabulary total time within 3x of the roofline estimate",
                f"<= {GOAL_ROOFLINE}x",
                f"{mid['roofline_total_ratio']:.2f}x (fastest peers: {mid['best_peer_roofline_total_ratio']:.2f}x)",
                mid["roofline_total_ratio"] <= GOAL_ROOFLINE,
            )
        )
    if "tiny" in summary:
        tiny = summary["tiny"]
        goals.append(
            (
                "tiny: speed relative to np.einsum on the expanded string",
                f"every string >= {GOAL_TINY_FLOOR}x",
                f"geomean {tiny['vs_einsum_geomean']:.2f}x, min {tiny['vs_einsum_min']:.2f}x; "
                f"{len(tiny['vs_einsum_below_floor'])} below: "
                + (", ".join(f"`{s}` {v:.2f}x" for s, v in tiny["vs_einsum_below_floor"]) or "none"),
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
    summary["goals"] = goals
    return summary


def summary_lines(summary: dict) -> list[str]:
    lines = ["", "goals:"]
    for name, target, measured, met in summary["goals"]:
        lines.append(f"  [{'met' if met else 'NOT met'}] {name}: target {target}; measured {measured}")
    for size in ("tiny", "mid", "large"):
        if size in summary:
            s = summary[size]
            lines.append(
                f"  {size}: geomean vs numpy peers {s['geomean_vs_numpy_peers']:.2f}x, vs all peers "
                f"{s['geomean_vs_all_peers']:.2f}x, {s['below_one']} strings < 1x, roofline total "
                f"{s['roofline_total_ratio']:.2f}x"
            )
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
            cells.append(_fmt_us(r.seconds.get(m)) if m in r.seconds else "skip")
        best = r.best_peer()
        speed = r.speedup()
        ideal = roof.ideal_seconds(r.flops, r.nbytes)
        cells += [
            METHOD_TITLES[best[0]] if best else "-",
            f"**{speed:.2f}x**"
            if speed is not None and speed < GOAL_MID_FLOOR
            else (f"{speed:.2f}x" if speed else "-"),
            _fmt_us(ideal),
            f"{r.seconds['contract'] / ideal:.1f}x",
            r.strategy,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(results: dict[str, list[Row]], roof, env: dict, summary: dict, elapsed: float) -> str:
    out: list[str] = []
    add = out.append
    add("# Benchmarks: `contract` on numpy against its peers")
    add("")
    add("Generated by one run of")
    add("")
    add("```")
    add("python bench/run.py")
    add("```")
    add("")
    add(
        f"on {env['date']} ({elapsed / 60:.1f} min wall). Machine: {env['cpus']} cores ({env['machine']}), "
        f"shared with other work; Python {env['python']}, numpy {env['numpy']} with {env['blas']}, "
        f"opt_einsum {env['opt_einsum']}, einx {env['einx']}. BLAS threading: {env['thread_env']} "
        "(OpenBLAS then uses both cores for large products). Raw numbers: `bench/results/latest.json`."
    )
    add("")
    add(
        f"Roofline measured in the same run: float64 matmul **{roof.peak_flops / 1e9:.1f} GFLOP/s**, "
        f"copy bandwidth **{roof.bandwidth / 1e9:.1f} GB/s** (read + write bytes)."
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
            s = summary[size]
            add(
                f"- **{size}** ({s['strings']} strings): geometric-mean speedup {s['geomean_vs_numpy_peers']:.2f}x over "
                f"the fastest numpy/opt_einsum peer ({s['geomean_vs_all_peers']:.2f}x counting einx too); "
                f"{s['below_one']} strings below 1x; total time {s['roofline_total_ratio']:.2f}x the roofline "
                f"estimate (the fastest peers': {s['best_peer_roofline_total_ratio']:.2f}x)."
            )
    add("")
    eager = HERE.parent / "docs" / "benchmarks_eager.md"
    if eager.exists():
        add(
            "JAX is not in the tables below: under `jit` `contract` is the hand-expanded `jnp.einsum` (same HLO). "
            "Its eager-call overhead is measured by `python bench/eager_overhead.py` (a separate run, which writes "
            "[benchmarks_eager.md](benchmarks_eager.md)); that page's result, copied here when this report was written:"
        )
        add("")
        add(eager.read_text().strip().replace("## Eager JAX call overhead", "### Eager JAX call overhead"))
        add("")
    analysis = HERE / "analysis.md"
    if analysis.exists():
        add(analysis.read_text().strip())
        add("")
    add("![speedups](benchmarks.png)")
    add("")
    add("![roofline](benchmarks_roofline.png)")
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
        "default: one C loop, no BLAS); `np.einsum(..., optimize='greedy')` (the replaced library's policy); an "
        "opt_einsum `ContractExpression` built once for the shapes; `einx.dot` with one named axis per sub-axis "
        "(it cannot express single-operand strings or repeated axes; on numpy it compiles to the same single "
        f"`np.einsum` call); a flatten+reshape named-function baseline (each group reshaped to one axis, the "
        "grouped string run as a fixed einsum with `optimize='greedy'`, reshaped back; reshape targets "
        f"precomputed). The two single-loop contenders are skipped above {peers.NAIVE_EINSUM_MAX_ITERATIONS:.0e} "
        "loop iterations, and the greedy-based ones (greedy, flatten) where `np.einsum_path` predicts more than "
        f"{peers.GREEDY_MAX_FLOPS:.0e} flops: their greedy path then falls back to one nested loop and a call "
        "takes seconds to a minute (55 s measured for a mid-size 5-operand string); a skipped contender is never "
        "the fastest one, so the speedup column is unaffected."
    )
    add(
        "- **Timing** (`bench/timing.py`): each contender is warmed up, then called in batches sized to a few ms; "
        "contenders take turns batch by batch; the median per-call time is kept. Tiny and mid are measured in "
        "two passes minutes apart and each contender keeps its better pass (the shared machine has episodes "
        "where every BLAS call stalls ~8 ms); large is one pass. Contenders slower than "
        "0.1 s per call are timed twice (two single calls, median). `contract`'s result is checked against opt_einsum before timing."
    )
    add(
        "- **Ratios** are computed within the run: speedup = (fastest numpy/opt_einsum peer: np.einsum, greedy, "
        "opt_einsum expression, flatten baseline) / `contract`. **Overhead** on tiny operands = `contract` minus "
        "the same cached `NumpyProgram` called directly (parse/solve/plan cache lookup and dispatch)."
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
        "iterations, or a single operand); `pairwise` = the schedule's BLAS steps (`contractions/schedule.py`, run by `contractions/backends/numpy_backend.py`)."
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
        skipped: dict[str, list[str]] = {}
        for r in rows:
            for method, reason in r.skipped.items():
                reason = re.sub(r"\d+(\.\d+)?e[+-]?\d+", "N", reason)  # group by kind, not count
                skipped.setdefault(f"{METHOD_TITLES[method]}: {reason}", []).append(r.subscripts)
        if skipped:
            add("Skipped contenders:")
            add("")
            for reason, strings in sorted(skipped.items()):
                add(f"- {reason} — {len(strings)} strings: " + ", ".join(f"`{s}`" for s in strings))
            add("")
    return "\n".join(out) + "\n"


def plot(results: dict[str, list[Row]], roof, speed_path: Path, roofline_path: Path) -> None:
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
        (size, f"{size}: speedup vs fastest numpy/opt_einsum peer", lambda r: r.speedup()) for size in sizes
    ]
    if "tiny" in results:
        panels.append(
            (
                "tiny",
                "tiny: speed relative to np.einsum (expanded)",
                lambda r: r.seconds["einsum"] / r.seconds["contract"] if "einsum" in r.seconds else None,
            )
        )
    height = max(6.0, 0.16 * len(order) + 1.5)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.4 * len(panels), height), sharey=True)
    axes = list(np.atleast_1d(axes))
    y = list(range(len(order)))
    low, high = 0.25, 40.0
    for ax, (size, title, value) in zip(axes, panels):
        by_string = {r.subscripts: r for r in _ok(results[size])}
        values = [value(by_string[s]) if s in by_string else None for s in order]
        colors = [
            "#bbbbbb"
            if v is None
            else (
                "#d62728" if v < 0.8 else ("#ff7f0e" if v < 1.0 else ("#2ca02c" if v >= 1.5 else "#1f77b4"))
            )
            for v in values
        ]
        ax.barh(y, [min(max(v, low), high) if v else 0 for v in values], color=colors, height=0.8)
        for yi, v in zip(y, values):
            if v is not None and v < low:  # clipped: say the real ratio
                ax.text(low * 1.05, yi, f"{v:.2g}x (copy vs view)", va="center", fontsize=6)
        ax.set_xscale("log")
        ax.set_xlim(low, high)
        for x, style in ((0.8, ":"), (1.0, "-"), (1.5, "--")):
            ax.axvline(x, color="black", linestyle=style, linewidth=0.8)
        ax.set_title(f"{title}\n(geomean {geomean(values):.2f}x; lines at 0.8, 1, 1.5)", fontsize=9)
        ax.grid(axis="x", which="both", alpha=0.3)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(order, fontsize=6, family="monospace")
    axes[0].set_ylim(-1, len(order))
    fig.suptitle(
        "contract on numpy vs peers, per vocabulary string (bars: ratio; >1 = contract faster)", fontsize=11
    )
    fig.tight_layout()
    fig.savefig(speed_path, dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
    for ax, size in zip(axes, [s for s in ("mid", "large") if s in results]):
        rows = _ok(results[size])
        ideal = [roof.ideal_seconds(r.flops, r.nbytes) for r in rows]
        ax.scatter(
            ideal, [r.seconds["contract"] for r in rows], s=14, label="contract", color="#2ca02c", zorder=3
        )
        ax.scatter(
            ideal,
            [r.best_peer()[1] for r in rows],
            s=14,
            label="fastest numpy/opt_einsum peer",
            color="#7f7f7f",
            marker="x",
        )
        lo = min(ideal) / 2
        hi = max(max(r.seconds["contract"] for r in rows), max(r.best_peer()[1] for r in rows)) * 2
        ax.plot([lo, hi], [lo, hi], "k-", linewidth=0.8, label="roofline (ideal)")
        ax.plot([lo, hi], [3 * lo, 3 * hi], "k--", linewidth=0.8, label="3x roofline")
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
