"""A program run twice: its first process plans, its second runs the stored plans.

The plan store (contractions/calls/store.py) keeps every full search's decisions; a second
process running the same program lowers them at once.  Each figure below is measured in a fresh
process with an empty store (the *first* process) and again in a fresh process sharing the
store the first one wrote (the *second*), side by side, ``--repeats`` times (medians):

- **large work** (numpy and torch, CPU): the first call of each large 3-4 operand string of
  bench/first_call.py (5-10 ms of work) over the same call warm (interleaved medians), and the
  planning inside that first call (`first_schedule`'s time: it does not swing with the
  machine's memory state as the call's own time does);
- **the ragged tensor-train loop** (bench/tt_loop.py, numpy): pass 1 of ``contract`` over pass 1
  of the hand-written code, in the same process;
- **new strings**: the median first call of the vocabulary's 3-4 operand strings at small
  sizes (numpy), each new to the process;
- **a process's start**: ``import contractions`` (with numpy's own import beside it) and the
  very first call, ``contract('ab,bc->ac')`` on 3x4 and 4x5 arrays.

Nothing else should run on the machine meanwhile (2 cores: a parallel job skews small calls).

    python bench/second_process.py            # 3 repeats; writes its section of
                                              # docs/benchmarks_first_call.md, bench/results/second_process.json
    python bench/second_process.py --quick    # 1 repeat, fewer strings: prints only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "second_process.json"
SECTION = "A program run twice: the plan store"


def _env(store: Path | str) -> dict[str, str]:
    env = dict(os.environ, CONTRACTIONS_PLANS=str(store))
    # (an installed library imports from cached bytecode: so do these processes)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE)] + [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


# ------------------------------------------------------------------------ the worker
def worker(quick: bool) -> dict:
    import numpy as np
    import timing
    from first_call import LARGE_CASES, LARGE_FLOPS, Small, arrays, large_case, once, settle_memory
    from vocabulary import vocabulary

    import contractions
    from contractions import contract

    found: dict = {"large": {}, "new_string_ms": None, "tt": None}
    backends = ["numpy", "torch"]
    # (what a process pays once, whatever it plans: BLAS's threads, torch's start, contract's
    # first use; then memory touched as bench/first_call.py does, so fresh pages are not
    # charged to the call)
    import torch

    a = np.ones((256, 256))
    a @ a
    torch.ones(64, 64) @ torch.ones(64, 64)
    contract("ab,bc->ac", a, a)
    # the planning inside each large first call: `first_schedule`'s time (a stable figure
    # where the first call's own time swings with the VM's memory state)
    from contractions.calls import runners

    planning = [0.0]
    planned = runners.first_schedule

    def timed_first_schedule(*args, **kwargs):
        start = time.perf_counter()
        try:
            return planned(*args, **kwargs)
        finally:
            planning[0] += time.perf_counter() - start

    runners.first_schedule = timed_first_schedule
    for subscripts, groups in LARGE_CASES[: 2 if quick else None]:
        shapes, kwargs, expanded, _ = large_case(subscripts, groups, LARGE_FLOPS)
        settle_memory(quick)
        for backend in backends:
            ops = arrays(shapes)
            if backend == "torch":
                ops = [torch.from_numpy(x) for x in ops]
            planning[0] = 0.0
            seconds, result = once(lambda o=ops, s=subscripts, k=kwargs: contract(s, *o, **k))
            planning_ms = planning[0] * 1e3
            warm = timing.interleaved_medians({"warm": lambda o=ops, s=subscripts, k=kwargs: contract(s, *o, **k)},
                                              3 if quick else 7, 0.05)["warm"]
            found["large"][f"{backend} {subscripts}"] = {"first_ms": seconds * 1e3, "warm_ms": warm * 1e3,
                                                         "planning_ms": planning_ms}
    runners.first_schedule = planned
    # new strings: the vocabulary's 3-4 operand strings, each the process's first of its kind
    firsts = []
    for subscripts in vocabulary()[: 12 if quick else None]:
        case = Small(subscripts)   # (bench/first_call.py's small extents)
        if not 3 <= case.operands <= 4:
            continue
        ops = arrays(case.shapes(case.base))
        try:
            seconds, _ = once(lambda o=ops, c=case: contract(c.subscripts, *o, **c.kwargs))
        except contractions.ContractionError:
            continue
        firsts.append(seconds * 1e3)
    found["new_string_ms"] = statistics.median(firsts) if firsts else None
    found["new_strings"] = len(firsts)
    # the ragged tensor-train loop: pass 1 of contract and of the hand-written code
    import tt_loop

    ops_ = tt_loop.Ops("numpy")
    data = tt_loop.backend_data(tt_loop.make_schedule(), ops_)
    n_stack, n_probes = len(tt_loop.STACK), len(tt_loop.PROBES)
    impls = {name: tt_loop.IMPL_CLASSES[name](n_stack, n_probes, "numpy") for name in tt_loop.IMPLS}
    tt_loop._warm_up(impls, ops_)
    passes = {}
    for name in ("hand", "contract"):
        start = time.perf_counter()
        tt_loop.run_pass(impls[name], ops_, data, n_stack)
        passes[name] = (time.perf_counter() - start) * 1e3
    found["tt"] = passes
    np.asarray(0)
    return found


def start_figures() -> dict:
    """A fresh process's import times and its very first call (milliseconds)."""
    script = ("import time; t0 = time.perf_counter(); import numpy as np; t1 = time.perf_counter(); "
              "import contractions; t2 = time.perf_counter(); a, b = np.ones((3, 4)), np.ones((4, 5)); "
              "t3 = time.perf_counter(); contractions.contract('ab,bc->ac', a, b); t4 = time.perf_counter(); "
              "print((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t4 - t3) * 1e3)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          env=_env("off"))
    numpy_ms, contractions_ms, first_ms = map(float, done.stdout.split())
    return {"numpy_import_ms": numpy_ms, "import_ms": contractions_ms, "first_call_ms": first_ms}


# ---------------------------------------------------------------------------- the run
def measure(repeats: int, quick: bool) -> dict:
    import compileall

    compileall.compile_dir(str(REPO / "contractions"), quiet=1)
    runs = []
    for r in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "plans"
            run = {}
            for which in ("first", "second"):
                out = Path(tmp) / f"{which}.json"
                subprocess.run([sys.executable, __file__, "--worker", str(out)] + (["--quick"] if quick else []),
                               check=True, env=_env(store))
                run[which] = json.loads(out.read_text(encoding="utf-8"))
            run["start"] = [start_figures() for _ in range(5)]
            runs.append(run)
            print(f"[repeat {r + 1}/{repeats}] tt pass 1 ms: first {run['first']['tt']}, "
                  f"second {run['second']['tt']}", flush=True)
    return {"runs": runs, "repeats": repeats, "quick": quick, "cores": os.cpu_count()}


def _median(values: list[float]) -> float:
    return statistics.median(values)


def render(results: dict) -> str:
    runs = results["runs"]
    lines = [f"Measured by `python bench/second_process.py` ({results['repeats']} repeats, medians; "
             f"{results['cores']} cores){' — a quick smoke run' if results['quick'] else ''}. "
             "Each process is fresh; the second shares the store the first wrote.", "",
             "| figure | first process | second process | goal (second process) |", "|---|---:|---:|---|"]
    names = list(runs[0]["first"]["large"])
    for name in names:
        ratio = {w: _median([r[w]["large"][name]["first_ms"] / r[w]["large"][name]["warm_ms"] for r in runs])
                 for w in ("first", "second")}
        warm = _median([r["second"]["large"][name]["warm_ms"] for r in runs])
        lines.append(f"| large first call / warm call, {name} (warm {warm:.1f} ms) | {ratio['first']:.2f}x | "
                     f"{ratio['second']:.2f}x | <= 1.15x |")
    for name in names:
        if "planning_ms" not in runs[0]["first"]["large"][name]:
            continue   # (a run from before the figure was kept)
        planning = {w: _median([r[w]["large"][name]["planning_ms"] for r in runs]) for w in ("first", "second")}
        lines.append(f"| planning inside that first call, {name} | {planning['first']:.2f} ms | "
                     f"{planning['second']:.2f} ms | |")
    tt = {w: _median([r[w]["tt"]["contract"] / r[w]["tt"]["hand"] for r in runs]) for w in ("first", "second")}
    lines.append(f"| tensor-train loop pass 1, contract / hand-written (numpy) | {tt['first']:.2f}x | "
                 f"{tt['second']:.2f}x | <= 0.8x |")
    new = {w: _median([r[w]["new_string_ms"] for r in runs]) for w in ("first", "second")}
    lines.append(f"| new 3-4 operand string, median first call (numpy, small; "
                 f"{runs[0]['first']['new_strings']} strings) | {new['first']:.3f} ms | {new['second']:.3f} ms | "
                 "<= 0.2 ms |")
    start = [s for r in runs for s in r["start"]]
    lines += ["", "A process's start (fresh processes, store off; the same in either process):", "",
              "| | median |", "|---|---:|",
              f"| `import numpy` | {_median([s['numpy_import_ms'] for s in start]):.1f} ms |",
              f"| `import contractions` after numpy | {_median([s['import_ms'] for s in start]):.1f} ms |",
              f"| very first call, `contract('ab,bc->ac')` on 3x4, 4x5 | "
              f"{_median([s['first_call_ms'] for s in start]):.2f} ms |"]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        args.worker.write_text(json.dumps(worker(args.quick)), encoding="utf-8")
        return 0
    results = measure(1 if args.quick else args.repeats, args.quick)
    text = render(results)
    print(text)
    if not args.quick:
        from cold_start import write_section

        RESULTS.write_text(json.dumps(results, indent=1), encoding="utf-8")
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
