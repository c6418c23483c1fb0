"""The torch benchmark: ``contract`` on torch tensors, eager and compiled, against its peers.

    python bench/torch_bench.py              # every vocabulary string at mid size; writes
                                             # docs/benchmarks_torch.md, docs/benchmarks_torch.png
                                             # and bench/results/torch_latest.json
    python bench/torch_bench.py --quick      # 3 strings, short timings; writes nothing under docs/
    python bench/torch_bench.py --no-compile # eager columns only (no torch.compile, minutes faster)
    python bench/torch_bench.py --report-only  # re-render docs from bench/results/torch_latest.json

Per string of the vocabulary (bench/vocabulary.py, mid size, float32 CPU tensors):

- eager: ``contract(s, ...)`` against ``torch.einsum`` on the hand-expanded string and
  ``opt_einsum.contract(expanded, ..., backend='torch')``; the ratio is the faster peer's time
  over ``contract``'s (above 1: ``contract`` is faster);
- compiled: ``torch.compile(fullgraph=True, dynamic=False)`` of a function calling ``contract``
  against the same of ``torch.einsum`` on the expanded string (ratio as above), each compile's
  wall time (its first call, after ``torch._dynamo.reset()``) reported separately, and the
  graph breaks ``torch._dynamo.explain`` counts in the ``contract`` function;
- warm eager overhead: ``contract`` at tiny size against the bare compiled callable it runs
  (``contract_expression(...).compiled('torch')``), i.e. what the library adds per call.

Results are checked against torch.einsum before timing.  Timing is warm, interleaved, median of
repeated batches (bench/timing.py).  The goals evaluated in the report: eager geometric mean of
the ratio >= 1.2 and no string below 0.9; compiled within 1.1x of compiled torch.einsum on every
string; 0 graph breaks; warm overhead <= 5 us.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import opt_einsum  # noqa: E402
import timing  # noqa: E402
import torch  # noqa: E402
from vocabulary import make_case, vocabulary  # noqa: E402

from contractions import contract, contract_expression  # noqa: E402

RESULTS = HERE / "results" / "torch_latest.json"
DOC = REPO / "docs" / "benchmarks_torch.md"
PLOT = REPO / "docs" / "benchmarks_torch.png"
GOALS = {"eager_geomean": 1.2, "eager_min": 0.9, "compiled_max_slowdown": 1.1,
         "graph_breaks": 0, "overhead_us": 5.0}


def _tensors(case, dtype):
    return [torch.from_numpy(a).to(dtype) for a in case.arrays()]


def _compiled(fn, tensors):
    """(compiled function, seconds of its first call)."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, dynamic=False)
    start = time.perf_counter()
    compiled(*tensors)
    return compiled, time.perf_counter() - start


def measure_string(subscripts: str, compile_too: bool, repeats: int, batch: float,
                   dtype=torch.float32) -> dict:
    case = make_case(subscripts, "mid")
    tensors = _tensors(case, dtype)
    kwargs = case.kwargs
    expanded = case.expanded

    def ours(*ts):
        return contract(subscripts, *ts, **kwargs)

    def theirs(*ts):
        return torch.einsum(expanded, *ts)

    reference = theirs(*tensors)
    torch.testing.assert_close(ours(*tensors), reference, rtol=1e-3, atol=1e-3)
    eager = timing.interleaved_medians({
        "contract": lambda: ours(*tensors),
        "torch.einsum": lambda: theirs(*tensors),
        "opt_einsum": lambda: opt_einsum.contract(expanded, *tensors, backend="torch"),
    }, repeats, batch)
    row = {"subscripts": subscripts, "expanded": expanded, "shapes": case.shapes,
           "eager_us": {k: v * 1e6 for k, v in eager.items()}}
    row["eager_ratio"] = min(eager["torch.einsum"], eager["opt_einsum"]) / eager["contract"]
    if compile_too:
        report = torch._dynamo.explain(ours)(*tensors)
        row["graph_breaks"] = report.graph_break_count
        ours_c, ours_s = _compiled(ours, tensors)
        theirs_c, theirs_s = _compiled(theirs, tensors)
        torch.testing.assert_close(ours_c(*tensors), reference, rtol=1e-3, atol=1e-3)
        compiled = timing.interleaved_medians({
            "contract": lambda: ours_c(*tensors), "torch.einsum": lambda: theirs_c(*tensors)},
            repeats, batch)
        row["compiled_us"] = {k: v * 1e6 for k, v in compiled.items()}
        row["compiled_ratio"] = compiled["torch.einsum"] / compiled["contract"]
        row["compile_s"] = {"contract": ours_s, "torch.einsum": theirs_s}
    return row


def measure_overhead(repeats: int, batch: float) -> dict:
    """Warm per-call cost of ``contract`` beyond the bare callable it runs (tiny operands)."""
    subscripts = "WCa,Caib,WCi->WCb"
    case = make_case(subscripts, "tiny")
    tensors = _tensors(case, torch.float32)
    bare = contract_expression(subscripts, *case.shapes).compiled("torch")
    times = timing.interleaved_medians({
        "contract": lambda: contract(subscripts, *tensors),
        "bare": lambda: bare(*tensors)}, repeats, batch)
    return {"subscripts": subscripts, "contract_us": times["contract"] * 1e6,
            "bare_us": times["bare"] * 1e6,
            "overhead_us": (times["contract"] - times["bare"]) * 1e6}


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summary(results: dict) -> dict:
    rows = results["rows"]
    eager = [r["eager_ratio"] for r in rows]
    compiled = [r["compiled_ratio"] for r in rows if "compiled_ratio" in r]
    out = {"eager_geomean": geomean(eager), "eager_min": min(eager, default=float("nan")),
           "overhead_us": results["overhead"]["overhead_us"]}
    if compiled:
        out["compiled_geomean"] = geomean(compiled)
        out["compiled_max_slowdown"] = max(1 / c for c in compiled)
        out["graph_breaks"] = sum(r["graph_breaks"] for r in rows)
    return out


def write_report(results: dict, md_path: Path = DOC, png_path: Path = PLOT) -> None:
    """The markdown table (with the goals and their verdicts) and the plot."""
    s = summary(results)
    rows = results["rows"]
    compiled = any("compiled_ratio" in r for r in rows)
    lines = ["# torch benchmark", "",
             f"`python bench/torch_bench.py`: torch {results['torch']}, {results['threads']} threads, "
             f"{results['machine']}; mid size, float32, CPU. Ratios are the faster peer's time over "
             "`contract`'s (above 1: `contract` is faster).", "",
             "| goal | target | measured | met |", "|---|---|---|---|"]

    def goal(name: str, target: str, value: float, met: bool) -> None:
        lines.append(f"| {name} | {target} | {value:.3g} | {'yes' if met else 'no'} |")

    goal("eager: geometric mean ratio", f">= {GOALS['eager_geomean']}", s["eager_geomean"],
         s["eager_geomean"] >= GOALS["eager_geomean"])
    goal("eager: smallest ratio", f">= {GOALS['eager_min']}", s["eager_min"],
         s["eager_min"] >= GOALS["eager_min"])
    if compiled:
        goal("compiled: largest slowdown vs compiled torch.einsum",
             f"<= {GOALS['compiled_max_slowdown']}", s["compiled_max_slowdown"],
             s["compiled_max_slowdown"] <= GOALS["compiled_max_slowdown"])
        goal("graph breaks (all strings)", "0", s["graph_breaks"], s["graph_breaks"] == 0)
    goal("warm eager overhead, us", f"<= {GOALS['overhead_us']}", s["overhead_us"],
         s["overhead_us"] <= GOALS["overhead_us"])
    lines += ["", "| string | contract us | torch.einsum us | opt_einsum us | eager ratio"
              + (" | compiled contract us | compiled einsum us | compiled ratio | compile s "
                 "(contract / einsum) | breaks |" if compiled else " |"),
              "|---|---|---|---|---" + ("|---|---|---|---|---|" if compiled else "|")]
    for r in rows:
        e = r["eager_us"]
        line = (f"| `{r['subscripts']}` | {e['contract']:.1f} | {e['torch.einsum']:.1f} | "
                f"{e['opt_einsum']:.1f} | {r['eager_ratio']:.2f}")
        if "compiled_ratio" in r:
            c, t = r["compiled_us"], r["compile_s"]
            line += (f" | {c['contract']:.1f} | {c['torch.einsum']:.1f} | {r['compiled_ratio']:.2f} | "
                     f"{t['contract']:.1f} / {t['torch.einsum']:.1f} | {r['graph_breaks']}")
        lines.append(line + " |")
    o = results["overhead"]
    lines += ["", f"Warm eager overhead (`{o['subscripts']}`, tiny): `contract` {o['contract_us']:.1f} us, "
              f"the bare callable {o['bare_us']:.1f} us.", "",
              "![contract on torch against its peers](benchmarks_torch.png)", ""]
    md_path.write_text("\n".join(lines), encoding="utf-8")
    _plot(rows, png_path)


def _plot(rows: list[dict], png_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["subscripts"] for r in rows]
    xs = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(8, 0.3 * len(rows)), 5))
    ax.plot(xs, [r["eager_ratio"] for r in rows], "o", label="eager: faster of torch.einsum / "
            "opt_einsum, over contract")
    if any("compiled_ratio" in r for r in rows):
        ax.plot([x for x, r in zip(xs, rows) if "compiled_ratio" in r],
                [r["compiled_ratio"] for r in rows if "compiled_ratio" in r], "s",
                label="torch.compile: compiled torch.einsum over compiled contract")
    ax.axhline(1.0, color="grey", lw=1)
    ax.set_yscale("log")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=90, fontsize=6)
    ax.set_xlabel("vocabulary string (mid size, float32)")
    ax.set_ylabel("speed-up of contract (peer time / contract time)")
    ax.set_title("contract on torch tensors (CPU)")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 strings, short timings, no docs")
    parser.add_argument("--no-compile", action="store_true", help="eager columns only")
    parser.add_argument("--report-only", action="store_true", help="re-render from the last run")
    args = parser.parse_args()
    if args.report_only:
        write_report(json.loads(RESULTS.read_text(encoding="utf-8")))
        return
    strings = vocabulary()
    repeats, batch = 7, 0.05
    if args.quick:
        strings, repeats, batch = strings[:3], 3, 0.01
    rows = []
    for k, subscripts in enumerate(strings, 1):
        row = measure_string(subscripts, not args.no_compile, repeats, batch)
        rows.append(row)
        extra = (f", compiled {row['compiled_ratio']:.2f}x, compile {row['compile_s']['contract']:.1f}s"
                 if "compiled_ratio" in row else "")
        print(f"[{k}/{len(strings)}] {subscripts}: eager {row['eager_ratio']:.2f}x{extra}", flush=True)
    results = {"torch": torch.__version__, "threads": torch.get_num_threads(),
               "machine": f"{platform.machine()} {platform.processor() or platform.system()}",
               "rows": rows, "overhead": measure_overhead(repeats, batch)}
    print(json.dumps(summary(results), indent=1))
    if args.quick:
        return
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1), encoding="utf-8")
    write_report(results)


if __name__ == "__main__":
    main()
