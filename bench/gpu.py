"""The GPU benchmark: ``contract`` on CuPy, torch (eager and compiled) and JAX ``jit`` on one GPU.

    python3 bench/gpu.py --out DIR            # on a CUDA machine: ~5 min; writes DIR/benchmarks_gpu.md,
                                              # DIR/benchmarks_gpu.png, DIR/gpu_results.json
    python3 bench/gpu.py --out DIR --docs     # the same, and copies the page and plot into docs/
    python3 bench/gpu.py --out DIR --dry-run  # CPU smoke run: tiny sizes, 6 strings, the CuPy stand-in
                                              # (tests/_fake_cupy.py), torch and JAX on the CPU
    bash bench/gpu_run.sh                     # the device wrapper: versions, then the above into $OUT

Per string of the benchmark vocabulary (bench/vocabulary.py, ``--size``, default large), float32:

- **CuPy**: ``contract`` against ``cupy.einsum`` on the hand-expanded string (its default,
  ``optimize=False``) and, when cotengra imports, ``cotengra.einsum_expression`` on CuPy arrays;
  besides, two of the routes a CUDA runner measures on a shape's first calls
  (contractions/backends/measured.py), each forced: the schedule's steps and one ``cupy.einsum``
  along the path, so the GPU time model can be fitted; the ``route`` column is the one measured
  fastest (and the GPU model's own pick);
- **torch CUDA eager**: ``contract`` against ``torch.einsum`` on the expanded string; besides, the
  steps and one ``torch.einsum`` along the schedule's path, forced; ``route`` as for CuPy (the
  json keeps each row's ``measured_us``: every route's best time in the runner's own measuring
  calls, single synced calls, beside the columns' batched times);
- **torch.compile** (``fullgraph=True, dynamic=False``, the first strings the budget allows):
  compiled ``contract`` against compiled ``torch.einsum``;
- **JAX jit**: jitted ``contract`` against jitted ``jnp.einsum``, and whether the lowered
  programs are identical.

Every result is checked against a numpy float64 reference (``opt_einsum.contract`` on the
expanded string; max error over max magnitude, at most 1e-3, and 1e-2 for JAX, whose float32
products on a GPU default to TF32).  Timing: warm-up, then batches of calls ending in a device
sync (``cupy.cuda.Device().synchronize()``, ``torch.cuda.synchronize()``, ``block_until_ready``),
contenders interleaved batch by batch, the median per-call time of ``--repeats`` batches.
``contract``'s warm-up covers the calls that measure its route (``measured.ROUNDS`` rounds of at
most three routes), so its column is the chosen route's warm calls.  A
ratio is the peer's time over ``contract``'s (above 1: ``contract`` is faster).  A global budget
(``--budget``, 270 s) is shared by the libraries in turn; cases past it are skipped and the page
says which.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# JAX would take 75% of the GPU's memory when it starts, after CuPy's and torch's pools hold some
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import opt_einsum  # noqa: E402
from vocabulary import make_case, vocabulary  # noqa: E402

import contractions  # noqa: E402
from contractions import contract, explanation, make_plan, make_schedule  # noqa: E402
from contractions.backends import BackendOptions, measured  # noqa: E402
from contractions.model.gpu_prices import CUPY_MODEL, TORCH_CUDA_MODEL  # noqa: E402

TOL = 1e-3
TOL_JAX = 1e-2
SECTIONS = ("cupy", "torch", "jax", "torch.compile")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ------------------------------------------------------------------ timing
#: contract's warm-up calls: every call that measures its route (measured.ROUNDS rounds of at
#: most three routes), so the timed calls run the route chosen
CONTRACT_WARMUP = measured.ROUNDS * 3


def measure(funcs: dict[str, Callable[[], Any]], sync: Callable[[Any], None], repeats: int,
            batch_seconds: float, slow: float = 0.25,
            warmup: dict[str, int] | None = None) -> tuple[dict[str, float], dict[str, Any]]:
    """(median seconds per call of each function, its first result after warm-up): warm-up
    (``warmup[name]`` calls more for a function that needs them), then ``repeats``
    interleaved batches, each ending in a device sync.  A function whose warm call takes more
    than ``slow`` seconds (cupy.einsum left to right through a huge intermediate) is timed
    by that one call only, so it cannot eat the budget."""
    perf = time.perf_counter
    numbers, firsts, once = {}, {}, {}
    failed: dict[str, str] = {}
    for name, fn in funcs.items():
        try:
            for _ in range((warmup or {}).get(name, 0)):
                sync(fn())
            firsts[name] = fn()
            sync(firsts[name])
        except Exception as exc:  # a peer that cannot run it (cupy.einsum's one huge loop: out of
            if name == "contract":  # memory) is reported as failed; contract's own failure is the row's
                raise
            failed[name] = f"{type(exc).__name__}"
            firsts.pop(name, None)
            continue
        start = perf()
        sync(fn())
        one = max(perf() - start, 1e-6)
        if one > slow:
            once[name] = one
            continue
        numbers[name] = max(1, min(500, int(batch_seconds / one)))
    samples: dict[str, list[float]] = {name: [] for name in numbers}
    for _ in range(repeats):
        for name, n in numbers.items():
            fn = funcs[name]
            out = None
            start = perf()
            for _ in range(n):
                out = fn()
            sync(out)
            samples[name].append((perf() - start) / n)
    medians = {name: statistics.median(v) for name, v in samples.items()}
    medians.update(once)
    if failed:
        log("peers failed: " + ", ".join(f"{name} ({why})" for name, why in failed.items()))
    return {name: medians[name] for name in funcs if name not in failed}, firsts


def rel_error(result: np.ndarray, reference: np.ndarray) -> float:
    result = np.asarray(result, dtype=np.float64)
    if result.shape != reference.shape:
        return math.inf
    scale = max(float(np.abs(reference).max(initial=0.0)), 1e-30)
    return float(np.abs(result - reference).max(initial=0.0)) / scale


class Budget:
    """The run's time: each library in turn gets an equal share of what is left."""

    def __init__(self, seconds: float) -> None:
        self.end = time.perf_counter() + seconds

    def section(self, remaining_sections: int) -> float:
        now = time.perf_counter()
        return now + max(0.0, self.end - now) / max(1, remaining_sections)


# ------------------------------------------------------------------ the libraries
class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.strings = vocabulary()[: args.strings] if args.strings else vocabulary()
        self.cases = {s: make_case(s, args.size) for s in self.strings}
        self.references: dict[str, np.ndarray] = {}
        self.rows: list[dict[str, Any]] = []
        self.skipped: dict[str, list[str]] = {}
        self.errors: dict[str, str] = {}
        self.versions: dict[str, str] = {"python": platform.python_version(), "numpy": np.__version__,
                                         "opt_einsum": opt_einsum.__version__,
                                         "contractions": contractions.__version__}
        self.device = "CPU (dry run)" if args.dry_run else "unknown"

    def arrays(self, s: str) -> list[np.ndarray]:
        return [a.astype(np.float32) for a in self.cases[s].arrays(seed=0)]

    def reference(self, s: str) -> np.ndarray:
        if s not in self.references:
            case = self.cases[s]
            self.references[s] = np.asarray(opt_einsum.contract(case.expanded, *case.arrays(seed=0)))
        return self.references[s]

    def row(self, library: str, s: str, times: dict[str, float], result: Any, tol: float,
            baseline: str, **extra: Any) -> dict[str, Any]:
        err = rel_error(result, self.reference(s))
        row = {"library": library, "subscripts": s, "expanded": self.cases[s].expanded,
               "shapes": [list(x) for x in self.cases[s].shapes],
               "us": {k: v * 1e6 for k, v in times.items()}, "baseline": baseline,
               "error": err, "correct": err <= tol, **extra}
        if baseline in times:
            row["ratio"] = times[baseline] / times["contract"]
            log(f"{library:13s} {s:32s} {row['ratio']:6.2f}x  contract {row['us']['contract']:9.1f} us  "
                f"{baseline} {row['us'][baseline]:9.1f} us  err {err:.1e}")
        else:  # the peer could not run it: contract's result is still checked, no ratio
            row["peer_failed"] = baseline
            log(f"{library:13s} {s:32s}   (no {baseline}: it failed)  contract "
                f"{row['us']['contract']:9.1f} us  err {err:.1e}")
        self.rows.append(row)
        return row

    def loop(self, library: str, deadline: float, strings: list[str], body: Callable[[str], None]) -> None:
        for k, s in enumerate(strings):
            if time.perf_counter() > deadline:
                self.skipped[library] = strings[k:]
                log(f"{library}: budget spent, {len(strings) - k} strings skipped")
                return
            try:
                body(s)
            except Exception as exc:   # one failing case must not end the run
                self.rows.append({"library": library, "subscripts": s, "correct": False,
                                  "failure": f"{type(exc).__name__}: {exc}"[:300]})
                log(f"{library:13s} {s:32s} FAILED {type(exc).__name__}: {exc}")

    # ---------------------------------------------------------------- CuPy
    def cupy(self, deadline: float) -> None:
        if self.args.dry_run:
            from tests import _fake_cupy
            sys.modules["cupy"] = _fake_cupy
        import cupy as cp

        from contractions.backends import cupy_backend

        self.versions["cupy"] = cp.__version__
        if not self.args.dry_run:
            try:
                self.device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
            except Exception:
                pass
        try:
            import cotengra as ctg
            self.versions["cotengra"] = ctg.__version__
        except Exception:
            ctg = None

        def sync(_: Any) -> None:
            cp.cuda.Device().synchronize()

        def body(s: str) -> None:
            case = self.cases[s]
            kw = case.kwargs
            ops = [cp.asarray(a) for a in self.arrays(s)]
            plan = make_plan(s, case.shapes, case.supplements)
            schedule = make_schedule(plan, use_einsum=False, cost_model=CUPY_MODEL)
            funcs = {"contract": lambda: contract(s, *ops, **kw),
                     "cupy.einsum": lambda: cp.einsum(case.expanded, *ops)}
            for name in ("steps", "one_einsum"):
                if name in cupy_backend.routes(schedule):
                    forced = cupy_backend.compile(plan, schedule, BackendOptions(), route=name)
                    funcs[name] = lambda forced=forced: forced(*ops)
            if ctg is not None:
                try:
                    expr = ctg.einsum_expression(case.expanded, *case.shapes)
                    funcs["cotengra"] = lambda: expr(*ops)
                except Exception as exc:
                    log(f"cotengra refused {s}: {exc}")
            times, firsts = measure(funcs, sync, self.args.repeats, self.args.batch,
                                    warmup={"contract": CONTRACT_WARMUP})
            result = cp.asnumpy(firsts["contract"])
            errors = {name: rel_error(cp.asnumpy(out), self.reference(s)) for name, out in firsts.items()
                      if name != "contract"}
            route = route_text(cupy_backend.measured_route(schedule), cupy_backend.routes(schedule),
                               "steps" if CUPY_MODEL.modelled_path(schedule) is None else "one_einsum",
                               explanation(s, *ops, **kw).strategy)
            self.row("cupy", s, times, result, TOL, "cupy.einsum", route=route, peer_errors=errors,
                     measured_us={k: v * 1e6 for k, v in cupy_backend.route_seconds(schedule).items()})

        self.loop("cupy", deadline, self.strings, body)
        if hasattr(cp, "get_default_memory_pool"):
            cp.get_default_memory_pool().free_all_blocks()

    # ---------------------------------------------------------------- torch
    def torch_eager(self, deadline: float) -> None:
        import torch

        from contractions.backends import torch_backend

        self.versions["torch"] = torch.__version__
        device = "cpu" if self.args.dry_run else "cuda"
        if device == "cuda":
            self.device = torch.cuda.get_device_name(0)

        def sync(_: Any) -> None:
            if device == "cuda":
                torch.cuda.synchronize()

        def body(s: str) -> None:
            case = self.cases[s]
            kw = case.kwargs
            ops = [torch.from_numpy(a).to(device) for a in self.arrays(s)]
            plan = make_plan(s, case.shapes, case.supplements)
            schedule = make_schedule(plan, use_einsum=False, cost_model=TORCH_CUDA_MODEL)
            found = torch_backend.cuda_routes(schedule)
            funcs = {"contract": lambda: contract(s, *ops, **kw),
                     "torch.einsum": lambda: torch.einsum(case.expanded, *ops)}
            for name in ("steps", "one_einsum"):
                if name in found:
                    forced = torch_backend.compile(plan, schedule, BackendOptions(), route=name)
                    funcs[name] = lambda forced=forced: forced(*ops)
            times, firsts = measure(funcs, sync, self.args.repeats, self.args.batch,
                                    warmup={"contract": CONTRACT_WARMUP})
            result = firsts["contract"].cpu().numpy()
            pick = TORCH_CUDA_MODEL.modelled_path(schedule)
            route = route_text(torch_backend.measured_route(schedule), tuple(found),
                               next((n for n, p in found.items() if p == pick), "one_einsum"),
                               explanation(s, *ops, **kw).strategy)
            self.row("torch", s, times, result, TOL, "torch.einsum", route=route,
                     measured_us={k: v * 1e6 for k, v in torch_backend.route_seconds(schedule).items()})

        self.loop("torch", deadline, self.strings, body)
        if device == "cuda":
            torch.cuda.empty_cache()

    def torch_compiled(self, deadline: float) -> None:
        import torch

        device = "cpu" if self.args.dry_run else "cuda"

        def sync(_: Any) -> None:
            if device == "cuda":
                torch.cuda.synchronize()

        def body(s: str) -> None:
            case = self.cases[s]
            kw = case.kwargs
            ops = [torch.from_numpy(a).to(device) for a in self.arrays(s)]

            def ours(*ts: Any) -> Any:
                return contract(s, *ts, **kw)

            def theirs(*ts: Any) -> Any:
                return torch.einsum(case.expanded, *ts)

            compiled = {}
            for name, fn in (("contract", ours), ("torch.einsum", theirs)):
                torch._dynamo.reset()
                start = time.perf_counter()
                c = torch.compile(fn, fullgraph=True, dynamic=False)
                c(*ops)
                compiled[name] = (c, time.perf_counter() - start)
            times, firsts = measure({name: (lambda c=c: c(*ops)) for name, (c, _) in compiled.items()}, sync,
                                    self.args.repeats, self.args.batch)
            result = firsts["contract"].cpu().numpy()
            self.row("torch.compile", s, times, result, TOL, "torch.einsum",
                     compile_s={name: t for name, (_, t) in compiled.items()})

        self.loop("torch.compile", deadline, self.strings[: self.args.compile_strings], body)

    # ---------------------------------------------------------------- JAX
    def jax(self, deadline: float) -> None:
        import re

        import jax
        import jax.numpy as jnp

        self.versions["jax"] = jax.__version__
        if not self.args.dry_run:
            self.versions["jax_device"] = str(jax.devices()[0])

        def sync(out: Any) -> None:
            jax.block_until_ready(out)

        def hlo(fn: Any, ops: list[Any]) -> str:
            return re.sub(r"module @\S+", "module @m", jax.jit(fn).lower(*ops).as_text(debug_info=False))

        def body(s: str) -> None:
            case = self.cases[s]
            kw = case.kwargs
            ops = [jnp.asarray(a) for a in self.arrays(s)]

            def ours(*o: Any) -> Any:
                return contract(s, *o, **kw)

            def theirs(*o: Any) -> Any:
                return jnp.einsum(case.expanded, *o)

            same = hlo(ours, ops) == hlo(theirs, ops)
            jo, jt = jax.jit(ours), jax.jit(theirs)
            times, firsts = measure({"contract": lambda: jo(*ops), "jnp.einsum": lambda: jt(*ops)}, sync,
                                    self.args.repeats, self.args.batch)
            result = np.asarray(firsts["contract"])
            self.row("jax", s, times, result, TOL_JAX, "jnp.einsum", same_program=same)

        self.loop("jax", deadline, self.strings, body)


def route_text(chosen: str | None, routes: tuple[str, ...], pick: str, strategy: str | None) -> str:
    """The ``route`` column: the route measured fastest (of how many) and the GPU model's pick;
    the schedule's strategy where nothing was measured (one route; a CPU dry run of torch)."""
    if chosen is None:
        return str(strategy)
    return f"{chosen} (of {len(routes)}; model: {pick})"


# ------------------------------------------------------------------ the report
def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def summary(rows: list[dict[str, Any]], library: str) -> dict[str, Any]:
    mine = [r for r in rows if r["library"] == library]
    timed = [r for r in mine if "ratio" in r]
    ratios = [r["ratio"] for r in timed]
    return {"library": library, "cases": len(mine), "correct": sum(bool(r["correct"]) for r in mine),
            "geomean": geomean(ratios), "min": min(ratios, default=math.nan),
            "below_0.8": [r["subscripts"] for r in timed if r["ratio"] < 0.8],
            "below_0.9": [r["subscripts"] for r in timed if r["ratio"] < 0.9],
            "same_program": sum(bool(r.get("same_program")) for r in timed) if library == "jax" else None}


def render(run: Run, wall: float, plotted: bool = False) -> str:
    a = run.args
    lines = ["# GPU benchmarks", "",
             "Written by `bench/gpu.py` (do not edit by hand): `contract` on one GPU against each "
             "library's own einsum on the hand-expanded string; how it is measured is in the script's "
             "docstring. A ratio is the peer's time over `contract`'s: above 1, `contract` is faster.", "",
             f"- device: **{run.device}**{' (a CPU smoke run, not GPU numbers)' if a.dry_run else ''}",
             f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
             f"- versions: {', '.join(f'{k} {v}' for k, v in run.versions.items())}",
             f"- size class `{a.size}` (bench/vocabulary.py), float32, {len(run.strings)} strings; "
             f"median of {a.repeats} batches; wall time {wall:.0f} s of a {a.budget:.0f} s budget", ""]
    lines += ["| library | correct | geomean | min | below 0.9x | below 0.8x | note |",
              "|---|---|---|---|---|---|---|"]
    for library in SECTIONS:
        sm = summary(run.rows, library)
        if not sm["cases"]:
            note = run.errors.get(library, "not run")
            lines.append(f"| {library} | - | - | - | - | - | {note} |")
            continue
        note = []
        if sm["same_program"] is not None:
            note.append(f"same program as jnp.einsum on {sm['same_program']}/{sm['cases']}")
        if run.skipped.get(library):
            note.append(f"{len(run.skipped[library])} strings skipped (budget)")
        if library in run.errors:
            note.append(run.errors[library])
        lines.append(f"| {library} | {sm['correct']}/{sm['cases']} | {sm['geomean']:.2f}x | {sm['min']:.2f}x | "
                     f"{len(sm['below_0.9'])} | {len(sm['below_0.8'])} | {'; '.join(note)} |")
    lines.append("")
    if plotted:
        lines += ["![contract against each library's own einsum on the GPU: one bar per string, the peer's "
                  "time over contract's (above 1: contract is faster)](benchmarks_gpu.png)", ""]
    for library in SECTIONS:
        mine = [r for r in run.rows if r["library"] == library]
        if not mine:
            continue
        sm = summary(run.rows, library)
        lines += [f"## {library}", ""]
        if sm["below_0.9"]:
            lines.append(f"Below 0.9x: {', '.join(f'`{s}`' for s in sm['below_0.9'])}; below 0.8x: "
                         f"{', '.join(f'`{s}`' for s in sm['below_0.8']) or 'none'}.")
            lines.append("")
        names = sorted({k for r in mine for k in r.get("us", {})}, key=lambda k: (k != "contract", k))
        lines += ["| string | " + " | ".join(f"{n} us" for n in names) + " | ratio | route | error |",
                  "|---|" + "---|" * (len(names) + 3)]
        for r in mine:
            if "failure" in r:
                lines.append(f"| `{r['subscripts']}` | " + " | ".join("-" for _ in names)
                             + f" | - | - | failed: {r['failure'][:120]} |")
                continue
            route = r.get("route") or ("same program" if r.get("same_program") else
                                       "other program" if "same_program" in r else "")
            ratio = f"{r['ratio']:.2f}x" if "ratio" in r else f"({r.get('peer_failed')} failed)"
            lines.append(f"| `{r['subscripts']}` | " + " | ".join(
                f"{r['us'][n]:.1f}" if n in r["us"] else "-" for n in names)
                + f" | {ratio} | {route} | {r['error']:.1e}{'' if r['correct'] else ' WRONG'} |")
        if run.skipped.get(library):
            lines += ["", f"Skipped past the budget: {', '.join(f'`{s}`' for s in run.skipped[library])}."]
        lines.append("")
    return "\n".join(lines)


def plot(run: Run, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    present = [lib for lib in SECTIONS if any(r["library"] == lib and "ratio" in r for r in run.rows)]
    fig, axes = plt.subplots(len(present) or 1, 1, figsize=(12, 2.6 * max(1, len(present))), squeeze=False)
    for ax, library in zip(axes[:, 0], present):
        rows = [r for r in run.rows if r["library"] == library and "ratio" in r]
        ratios = [r["ratio"] for r in rows]
        colors = ["tab:green" if x >= 1 else "tab:orange" if x >= 0.9 else "tab:red" for x in ratios]
        ax.bar(range(len(rows)), ratios, color=colors)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(0.9, color="grey", linewidth=0.6, linestyle="--")
        ax.set_yscale("log")
        ax.set_ylabel("peer / contract")
        ax.set_title(f"{library}: geomean {geomean(ratios):.2f}x over {rows[0]['baseline']} ({run.device})",
                     fontsize=9)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([r["subscripts"] for r in rows], rotation=90, fontsize=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(run: Run, wall: float) -> None:
    """The page, the json and the plot into ``--out`` (and docs/ with ``--docs``); written after
    every library, so a run stopped from outside keeps what it measured."""
    args = run.args
    try:
        plot(run, args.out / "benchmarks_gpu.png")
        plotted = True
    except Exception as exc:
        log(f"no plot: {exc}")
        plotted = False
    page = render(run, wall, plotted)
    (args.out / "benchmarks_gpu.md").write_text(page + "\n", encoding="utf-8")
    (args.out / "gpu_results.json").write_text(json.dumps(
        {"device": run.device, "versions": run.versions, "args": {k: str(v) for k, v in vars(args).items()},
         "wall_s": wall, "rows": run.rows, "skipped": run.skipped, "errors": run.errors,
         "summary": [summary(run.rows, lib) for lib in SECTIONS]}, indent=1, default=str), encoding="utf-8")
    if args.docs:
        shutil.copy(args.out / "benchmarks_gpu.md", REPO / "docs" / "benchmarks_gpu.md")
        if (args.out / "benchmarks_gpu.png").exists():
            shutil.copy(args.out / "benchmarks_gpu.png", REPO / "docs" / "benchmarks_gpu.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the page, plot and json")
    parser.add_argument("--docs", action="store_true", help="also write docs/benchmarks_gpu.md and .png")
    parser.add_argument("--dry-run", action="store_true", help="CPU smoke run: tiny, 6 strings, fake CuPy")
    parser.add_argument("--size", default=None, help="size class (default: large; tiny with --dry-run)")
    parser.add_argument("--budget", type=float, default=None, help="seconds for all cases (default 270)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch", type=float, default=0.004, help="seconds per timed batch")
    parser.add_argument("--strings", type=int, default=None, help="only the first N strings")
    parser.add_argument("--compile-strings", type=int, default=None, help="strings for torch.compile")
    parser.add_argument("--only", default=None, help="comma-separated libraries (cupy,torch,jax,torch.compile)")
    args = parser.parse_args(argv)
    if args.dry_run:
        args.size = args.size or "tiny"
        args.strings = args.strings or 6
        args.budget = args.budget or 120.0
        args.repeats = min(args.repeats, 3)
        args.batch = min(args.batch, 0.002)
        args.compile_strings = 1 if args.compile_strings is None else args.compile_strings
    args.size = args.size or "large"
    args.budget = args.budget or 270.0
    args.compile_strings = 6 if args.compile_strings is None else args.compile_strings
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = SECTIONS if not args.only else tuple(x for x in SECTIONS if x in args.only.split(","))

    start = time.perf_counter()
    run = Run(args)
    budget = Budget(args.budget)
    log(f"{len(run.strings)} strings, size {args.size}, budget {args.budget:.0f} s, libraries {', '.join(wanted)}")
    steps = {"cupy": run.cupy, "torch": run.torch_eager, "jax": run.jax, "torch.compile": run.torch_compiled}
    for k, library in enumerate(wanted):
        deadline = budget.section(len(wanted) - k)
        log(f"--- {library} (until +{deadline - start:.0f} s)")
        try:
            steps[library](deadline)
        except Exception as exc:   # a library that does not import or start: say so, go on
            run.errors[library] = f"{type(exc).__name__}: {exc}"[:200]
            log(f"{library} not run: {run.errors[library]}")
            traceback.print_exc()
        write_outputs(run, time.perf_counter() - start)
    wall = time.perf_counter() - start
    for library in SECTIONS:
        sm = summary(run.rows, library)
        if sm["cases"]:
            log(f"{library}: {sm['correct']}/{sm['cases']} correct, geomean {sm['geomean']:.2f}x, "
                f"min {sm['min']:.2f}x, below 0.9x: {len(sm['below_0.9'])}, below 0.8x: {len(sm['below_0.8'])}")
    log(f"done in {wall:.0f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
