"""The numpy benchmark: ``contract`` against its peers over the repo's vocabulary, in one run.

    python bench/run.py                  # full run (~10-15 min on 2 cores); rewrites docs/benchmarks.md,
                                         # docs/benchmarks.png, docs/benchmarks_roofline.png,
                                         # docs/benchmarks_memory.png, dev/benchmark-goals.md and
                                         # bench/results/latest.json
    python bench/run.py --quick          # a 12-string smoke run; writes nothing under docs/
    python bench/run.py --report-only    # re-render docs from bench/results/latest.json (e.g. after
                                         # editing bench/analysis.md); measures nothing
    python bench/run.py --profile FILE   # plan with a calibrated profile (contractions calibrate
                                         # --output FILE); the pages name the profile used

What it does (docs/benchmarks.md repeats this next to the numbers):
1. measures this machine's roofline (float64 matmul GFLOP/s, copy bandwidth; bench/roofline.py);
2. scans contractions/ and examples/ for grouped strings (bench/vocabulary.py) and gives each
   tiny, mid and large shapes;
3. per string and size, builds every contender (bench/peers.py), checks ``contract`` against
   opt_einsum's result, and times all contenders warm, interleaved, median of repeated batches
   (bench/timing.py); tiny and mid are measured in two passes at different times and each
   contender keeps its better pass (a shared machine has slow episodes that hit one pass);
   a peer whose result is a view of an input is timed with ``.copy()`` (``contract``'s results
   never alias); a contender whose first call may take seconds runs it in a forked child first
   and is recorded as timed out past peers.CALL_CAP_SECONDS;
4. measures, for mid and large, every contender's peak extra memory in one more untimed call
   (tracemalloc; bench/memory.py);
5. computes ratios inside the run, evaluates the goals (dev/benchmark-goals.md), writes the report and plots.

BLAS threading is left at its default (OpenBLAS uses both cores for large products); the report
records the BLAS build and thread settings.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

# --profile FILE: the prices are chosen when contractions is imported (below, and by the bench
# modules), so the file is put in the environment before any of those imports.
if "--profile" in sys.argv[:-1]:
    os.environ["CONTRACTIONS_PROFILE"] = sys.argv[sys.argv.index("--profile") + 1]

import opt_einsum  # noqa: E402
import peers  # noqa: E402
import roofline  # noqa: E402
import timing  # noqa: E402
from memory import peak_extra_bytes, traced_call  # noqa: E402
from vocabulary import Case, make_case, vocabulary  # noqa: E402

import contractions  # noqa: E402
import contractions.model  # noqa: E402
from contractions.backends import measured, numpy_backend  # noqa: E402

SIZES = ("tiny", "mid", "large")
# per size: (seconds per timed batch, batches per pass, passes)
SCHEDULE = {"tiny": (0.004, 7, 2), "mid": (0.012, 5, 2), "large": (0.04, 3, 1)}
SLOW_CALL_SECONDS = 0.1  # a contender slower than this per call is timed with fewer batches
SLOW_ENGINE_CALLS = 5  # single calls timed for each of ENGINE when slow (a peer: two)
ENGINE = ("contract", "program", "unbounded")
MEMORY_SIZES = ("mid", "large")  # sizes whose peak extra memory is measured (tiny: meaningless)
# (subscripts, size, method) -> reason, for contenders that ran past the cap: not re-run next pass
_TIMED_OUT: dict[tuple[str, str, str], str] = {}


@dataclass
class Row:
    subscripts: str
    size: str
    shapes: list
    expanded: str
    seconds: dict = field(default_factory=dict)  # method -> median seconds per call
    skipped: dict = field(default_factory=dict)  # method -> reason
    strategy: str = ""
    flops: float = 0.0
    nbytes: float = 0.0
    error: str = ""
    memory: dict = field(default_factory=dict)  # method -> peak extra bytes of one call
    largest_bytes: int = 0  # largest operand or result
    notes: dict = field(default_factory=dict)  # method -> how it was timed, when not plainly
    modelled: float = 0.0  # the default schedule's modelled seconds (numpy time model)
    blocks: int = 1  # its blocks (1: unblocked)
    # per step of the default schedule: (modelled seconds, FLOPs, bytes moved, bytes touched),
    # for its roofline (roofline.step_traffic)
    steps: list = field(default_factory=list)

    def best_peer(self, names=peers.PEERS) -> tuple[str, float] | None:
        timed = [(self.seconds[n], n) for n in names if n in self.seconds]
        if not timed:
            return None
        seconds, name = min(timed)
        return name, seconds

    def speedup(self, names=peers.PEERS) -> float | None:
        best = self.best_peer(names)
        if best is None or "contract" not in self.seconds:
            return None
        return best[1] / self.seconds["contract"]


def geomean(values):
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def measure_case(case: Case, batch_seconds: float, repeats: int, measure_memory: bool = True) -> Row:
    row = Row(case.subscripts, case.size, [list(s) for s in case.shapes], case.expanded)
    arrays = case.arrays()
    methods = peers.build_methods(case)
    try:
        got = methods["contract"](*arrays)
        want = methods["opt_einsum"](*arrays)
        if not np.allclose(got, want, rtol=1e-6, atol=1e-8):
            row.error = "contract disagrees with opt_einsum"
            return row
    except Exception as exc:  # a string the engine cannot run is reported, not fatal
        row.error = f"{type(exc).__name__}: {exc}"
        return row
    expression = contractions.contract_expression(
        case.subscripts, *case.shapes, **{f"len_{g}": n for g, n in case.supplements}
    )
    row.strategy = expression.schedule.strategy
    row.modelled = expression.schedule.cost_ns * 1e-9
    if expression.schedule.blocking is not None:
        row.blocks = expression.schedule.blocking.n_blocks
    row.steps = [list(step) for step in roofline.step_traffic(expression.schedule)]
    row.flops, row.nbytes = roofline.contraction_cost(case.expanded, case.shapes)
    row.largest_bytes = max(a.nbytes for a in [*arrays, got])
    funcs = {}
    capped: dict[str, float] = {}  # method -> seconds of its first call (in the forked child)
    for name, method in methods.items():
        key = (case.subscripts, case.size, name)
        if isinstance(method, peers.Skip):
            row.skipped[name] = method.reason
        elif key in _TIMED_OUT:
            row.skipped[name] = _TIMED_OUT[key]
        elif isinstance(method, peers.Capped):
            try:
                seconds = timing.seconds_within_cap(lambda m=method.func: m(*arrays), peers.CALL_CAP_SECONDS)
            except RuntimeError:  # it raised in the child: the first call below reports why
                funcs[name] = lambda m=method.func: m(*arrays)
                continue
            if seconds is None:
                reason = f"timed out: one call > {peers.CALL_CAP_SECONDS:g} s ({method.prediction})"
                _TIMED_OUT[key] = row.skipped[name] = reason
                continue
            capped[name] = seconds
            funcs[name] = lambda m=method.func: m(*arrays)
        else:
            funcs[name] = lambda m=method: m(*arrays)
    # the bare compiled schedule: contract minus the engine's per-call work (overhead measurement)
    execute = expression.compiled("numpy")
    funcs["program"] = lambda: execute(*arrays)
    if row.blocks > 1:   # the same call unbounded: what the default bound costs in time
        unbounded = contractions.contract_expression(
            case.subscripts, *case.shapes, memory_limit=None,
            **{f"len_{g}": n for g, n in case.supplements}).compiled("numpy")
        funcs["unbounded"] = lambda: unbounded(*arrays)
    offered = len(numpy_backend.routes(expression.schedule))
    if offered > 1:
        # a large call measures its route on its first calls (docs/backends.md): timed settled
        for name in ("contract", "program"):
            for _ in range(offered * measured.HOST_ROUNDS * measured.HOST_RUN + 8):   # (a cheap tier's calls first)
                funcs[name]()
    measure_memory = measure_memory and case.size in MEMORY_SIZES
    fast = {}
    slow = {}
    for name, func in funcs.items():
        traced = measure_memory and name not in ("program", "unbounded")
        start = time.perf_counter()
        try:
            # the first call, untimed (it only sorts fast from slow); traced where memory is measured
            result, extra = traced_call(func) if traced else (func(), 0)
        except Exception as exc:  # a peer that cannot express the string is reported as skipped
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            row.skipped[name] = f"raised {type(exc).__name__}: {first_line}"
            continue
        first = time.perf_counter() - start
        if name not in ENGINE and _aliases(result, arrays):
            # contract's result never aliases an input (it copies); compare like with like
            func = lambda f=func: f().copy()  # noqa: E731
            row.notes[name] = "returns a view of its input; timed with .copy()"
        elif traced and first > SLOW_CALL_SECONDS:  # a slow call: this untimed one gives its memory
            row.memory[name] = extra
        del result
        (slow if first > SLOW_CALL_SECONDS else fast)[name] = func
    if fast:
        row.seconds.update(timing.interleaved_medians(fast, repeats, batch_seconds))
    # Slow contenders take turns call by call: a peer two calls (the child's call is one),
    # the engine's own (contract, its bare program, the unbounded run) SLOW_ENGINE_CALLS, as
    # the default bound's price is a ratio of two of them (two calls each made it swing 1.5x).
    samples = {name: [capped[name]] if name in capped else [] for name in slow}
    wanted = {name: SLOW_ENGINE_CALLS if name in ENGINE else 2 for name in slow}
    while any(len(samples[name]) < wanted[name] for name in slow):
        for name, func in slow.items():
            if len(samples[name]) < wanted[name]:
                start = time.perf_counter()
                func()
                samples[name].append(time.perf_counter() - start)
    for name, taken in samples.items():
        row.seconds[name] = statistics.median(taken)
    if measure_memory:  # the rest: one more untimed call each, warm, after the timed ones
        for name, func in {**fast, **slow}.items():
            if name not in ("program", "unbounded") and name not in row.memory:
                row.memory[name] = peak_extra_bytes(func)[0]
    return row


def _aliases(result, arrays) -> bool:
    return isinstance(result, np.ndarray) and any(np.may_share_memory(result, a) for a in arrays)


def run_size(size: str, strings: list[str], log) -> list[Row]:
    batch_seconds, repeats, passes = SCHEDULE[size]
    cases = [make_case(s, size) for s in strings]
    rows: list[Row] = []
    per_pass: list[list[Row]] = []
    for pass_index in range(passes):
        pass_rows = []
        for case in cases:
            row = measure_case(case, batch_seconds, repeats, measure_memory=pass_index == 0)
            pass_rows.append(row)
            speed = row.speedup()
            best = row.best_peer()
            log(
                f"[{size} pass {pass_index + 1}/{passes}] {case.subscripts:34s} "
                + (
                    row.error
                    or f"contract {row.seconds.get('contract', float('nan')) * 1e6:10.1f} us  "
                    f"x{speed if speed is not None else float('nan'):.2f} vs {best[0] if best else '-'}"
                )
            )
        per_pass.append(pass_rows)
    for index in range(len(cases)):
        merged = per_pass[0][index]
        for other in per_pass[1:]:
            for name, seconds in other[index].seconds.items():
                merged.seconds[name] = min(merged.seconds.get(name, math.inf), seconds)
        rows.append(merged)
    return rows


def environment() -> dict:
    config = np.show_config(mode="dicts") if "mode" in np.show_config.__code__.co_varnames else {}
    blas = config.get("Build Dependencies", {}).get("blas", {}) if config else {}
    threads = {
        k: os.environ[k]
        for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE")
        if k in os.environ
    }
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "opt_einsum": opt_einsum.__version__,
        "cotengra": _version("cotengra"),
        "einx": _version("einx"),
        "contractions": contractions.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "blas": f"{blas.get('name', '?')} {blas.get('version', '')}".strip(),
        "thread_env": threads or "defaults (no OPENBLAS_NUM_THREADS/OMP_NUM_THREADS set)",
        "profile": contractions.model.NUMPY_MODEL.profile.describe(),
        "cpu": numpy_backend.cpu_name(),
        "routes": "measured" if measured.measuring() else "model's pick (CONTRACTIONS_MEASURE=off)",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def _version(module: str) -> str:
    try:
        return __import__(module).__version__
    except Exception:
        return "not installed"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="12 strings, writes nothing under docs/")
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument(
        "--report-only", action="store_true", help="re-render docs from bench/results/latest.json"
    )
    parser.add_argument("--profile", metavar="FILE", default=None,
                        help="plan with this profile (contractions calibrate --output FILE); default: "
                             "the one contractions selects (CONTRACTIONS_PROFILE, the user's, built-in)")
    args = parser.parse_args(argv)
    if args.report_only:
        return render_saved()
    started = time.time()
    log_lines: list[str] = []

    def log(message: str) -> None:
        print(message, flush=True)
        log_lines.append(message)

    env = environment()
    log(f"environment: {env}")
    roof = roofline.measure()
    log(
        f"roofline: matmul {roof.peak_flops / 1e9:.1f} GFLOP/s, copy bandwidth {roof.bandwidth / 1e9:.1f} GB/s"
    )
    strings = vocabulary()
    if args.quick:
        strings = strings[:: max(1, len(strings) // 12)][:12]
    log(f"vocabulary: {len(strings)} grouped strings from contractions/ and examples/")
    results: dict[str, list[Row]] = {}
    for size in args.sizes.split(","):
        results[size] = run_size(size, strings, log)
    elapsed = time.time() - started
    log(f"total wall time {elapsed:.0f} s")

    import report  # noqa: E402  (matplotlib only needed here)

    out_dir = REPO / "docs"
    summary = report.summarise(results, roof)
    for line in report.summary_lines(summary):
        log(line)
    if args.quick:
        return 0
    raw = {
        "environment": env,
        "roofline": asdict(roof),
        "elapsed_seconds": elapsed,
        "rows": {size: [asdict(r) for r in rows] for size, rows in results.items()},
    }
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "latest.json").write_text(json.dumps(raw, indent=1))
    write_docs(report, results, roof, env, summary, elapsed)
    log(
        f"wrote {out_dir / 'benchmarks.md'}, benchmarks.png, benchmarks_roofline.png, benchmarks_memory.png, "
        "benchmarks_model.png, "
        "bench/results/latest.json"
    )
    return 0


def write_docs(report, results, roof, env, summary, elapsed) -> None:
    """docs/benchmarks.md and its four plots, and dev/benchmark-goals.md, from one run's results."""
    out_dir = REPO / "docs"
    report.plot(results, roof, out_dir / "benchmarks.png", out_dir / "benchmarks_roofline.png",
                out_dir / "benchmarks_memory.png", out_dir / "benchmarks_model.png")
    (out_dir / "benchmarks.md").write_text(report.markdown(results, roof, env, summary, elapsed))
    (REPO / "dev" / "benchmark-goals.md").write_text(report.goals_markdown(summary, env, elapsed))


def render_saved() -> int:
    import report  # noqa: E402

    raw = json.loads((HERE / "results" / "latest.json").read_text())
    roof = roofline.Roofline(**raw["roofline"])
    results = {size: [Row(**row) for row in rows] for size, rows in raw["rows"].items()}
    summary = report.summarise(results, roof)
    for line in report.summary_lines(summary):
        print(line)
    write_docs(report, results, roof, raw["environment"], summary, raw["elapsed_seconds"])
    print(f"re-rendered {REPO / 'docs' / 'benchmarks.md'} and plots from bench/results/latest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
