"""A ragged, rank-growing tensor-train probe loop: the loop users write, timed pass by pass.

What the loop computes.  A stack ``G`` of tensor trains (``STACK``) with 8 cores of different
mode sizes ``n_k`` and bond ranks ``r_k`` (core ``k``: ``G + (r_k, n_k, r_k+1)``, ``r_0 = r_8 = 1``)
is evaluated on a set ``F`` of probe points (``F = (p1, p2)``, a grid of probes).  Mode ``k``
maps a probe's feature vector ``P_k[F, o]`` to the mode's index space through a matrix
``M_k[G, i, o]``.  One iteration is

1. the left sweep, k = 1..8: ``x_k = contract('Gio,Fo->GFi', M_k, P_k)`` and the left environment
   ``L_k+1 = contract('GFa,Gaib,GFi->GFb', L_k, core_k, x_k)``; ``L_9`` is the trains' value at
   every probe;
2. the right sweep, k = 8..1: the derivative of the value with respect to ``x_k``,
   ``y_k = contract('GFa,Gaib,GFb->GFi', L_k, core_k, R_k+1)``, its pull-back to the features,
   ``g_k = contract('GFi,Gio->GFo', y_k, M_k)``, and the right environment
   ``R_k = contract('GFa,Gaib,GFi->GFb', R_k+1, core_k^T, x_k)`` (the same string on the core's
   transposed view); ``R_1`` is the value again, which the check compares with ``L_9``;
3. the probes move up the gradient summed over the stack, ``P_k += ETA * sum_G g_k``, are
   normalised, and ``p2`` grows by one (new probes are added), while every bond rank grows
   (the cores are padded with small new entries: a rank-adaptive method's schedule, given).

So almost every call of an iteration has a shape no earlier call had: the ranks, the probe
count and the mode sizes all differ.  A *pass* is one run of the whole schedule (``ITERATIONS``
iterations of both sweeps, 240 calls) from the same start; pass 1 meets every shape for the
first time, later passes meet the same shapes again.

Implementations, timed side by side in one process, their order rotated from pass to pass:

- ``contract``: the grouped strings above, default options;
- ``hand``: what one writes without groups: every group flattened by ``reshape``, then
  ``np.einsum`` with a hand-written path (``optimize=['einsum_path', ...]``); on torch, explicit
  pairwise ``torch.einsum`` calls;
- ``opt_einsum``: ``opt_einsum.contract`` on the hand-expanded strings (one letter per axis; it
  plans every call); on torch with ``backend='torch'``.

Each (backend, repeat) runs in a fresh process: after a few unrelated warm-up calls of every
implementation (imports, BLAS threads, ``contract``'s first use), ``contract`` has seen none of
the loop's strings, so pass 1 plans every string and shape from scratch.  All three agree on
pass 1 (``np.allclose`` on every iteration's values and gradients), and ``L_9 == R_1``.  Times
are medians over the repeats.  float64 on both backends.

    python bench/tt_loop.py              # 5 repeats x 6 passes, numpy and torch; ~1-2 min; writes the
                                         # loop's section of docs/benchmarks_first_call.md,
                                         # docs/benchmarks_tt_loop.png, bench/results/tt_loop.json
    python bench/tt_loop.py --quick      # 1 repeat x 5 passes, prints only (seconds)
    python bench/tt_loop.py --quick --write   # the same, and writes the page marked as a smoke run
    python bench/tt_loop.py --report-only     # re-render the page and plot from tt_loop.json
    python bench/tt_loop.py --backends numpy --torch-threads 1  # one backend; torch's threads set
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from cold_start import median, write_section  # noqa: E402

RESULTS = HERE / "results" / "tt_loop.json"
PLOT = REPO / "docs" / "benchmarks_tt_loop.png"
SECTION = "A tensor-train probe loop"

STACK = (2,)  # the group G: two trains side by side
PROBES = (3, 4)  # the group F at the first iteration; its last axis grows by one per iteration
MODES = (4, 6, 5, 8, 7, 3, 9, 10)  # n_k, all different
FEATURES = (3, 4, 5, 3, 4, 5, 3, 4)  # o_k
RANKS = (1, 2, 3, 4, 5, 4, 3, 2, 1)  # r_k at the first iteration (r_0 = r_8 = 1 throughout)
GROWTH = (0, 2, 1, 3, 2, 3, 1, 2, 0)  # added to r_k at every iteration
ITERATIONS = 6
ETA = 0.05
IMPLS = ("contract", "hand", "opt_einsum")
GOAL_PASS1 = 1.0  # pass 1: contract no slower than the hand-written code (speed-up >= 1)
GOAL_PASS5 = 1.5  # pass 5: contract at least 1.5x faster than it


# ----------------------------------------------------------------------------- the data
@dataclass
class Schedule:
    """Everything the loop is given (the same for every pass and implementation)."""

    matrices: list[np.ndarray]  # M_k: G + (n_k, o_k)
    probes: list[np.ndarray]  # P_k at the first iteration: F + (o_k,)
    added: list[list[np.ndarray]]  # per iteration t >= 1, per mode: the new probes, F[:-1] + (1, o_k)
    cores: list[list[np.ndarray]]  # per iteration, per mode: G + (r_k, n_k, r_k+1)


def ranks_at(t: int) -> tuple[int, ...]:
    return tuple(r + t * g for r, g in zip(RANKS, GROWTH))


def make_schedule(stack=STACK, probes=PROBES, iterations=ITERATIONS, seed=0) -> Schedule:
    rng = np.random.default_rng(seed)
    matrices = [rng.standard_normal(stack + (n, o)) / np.sqrt(o) for n, o in zip(MODES, FEATURES)]
    start = [rng.standard_normal(probes + (o,)) for o in FEATURES]
    start = [p / np.linalg.norm(p, axis=-1, keepdims=True) for p in start]
    added = [[]] + [[_unit(rng.standard_normal(probes[:-1] + (1, o))) for o in FEATURES]
                    for _ in range(1, iterations)]
    cores: list[list[np.ndarray]] = []
    for t in range(iterations):
        r = ranks_at(t)
        layer = []
        for k, n in enumerate(MODES):
            core = 0.1 * rng.standard_normal(stack + (r[k], n, r[k + 1])) / np.sqrt(r[k])
            if t:  # grown from the previous iteration's core: its entries kept, new ones small
                old = cores[-1][k]
                core[..., : old.shape[-3], :, : old.shape[-1]] = old
            else:
                core += rng.standard_normal(core.shape) / np.sqrt(r[k] * n)
            layer.append(core)
        cores.append(layer)
    return Schedule(matrices, start, added, cores)


def _unit(p: np.ndarray) -> np.ndarray:
    return p / np.linalg.norm(p, axis=-1, keepdims=True)


# ----------------------------------------------------------------------------- implementations
class ContractImpl:
    """The grouped strings, written at the call sites."""

    def __init__(self, n_stack: int, n_probes: int, backend: str) -> None:
        from contractions import contract

        self.contract = contract

    def probe(self, m, p):
        return self.contract("Gio,Fo->GFi", m, p)

    def env(self, left, core, x):
        return self.contract("GFa,Gaib,GFi->GFb", left, core, x)

    def mid(self, left, core, right):
        return self.contract("GFa,Gaib,GFb->GFi", left, core, right)

    def back(self, y, m):
        return self.contract("GFi,Gio->GFo", y, m)


class HandImpl:
    """Groups flattened by reshape; numpy: np.einsum with a hand path; torch: pairwise calls."""

    def __init__(self, n_stack: int, n_probes: int, backend: str) -> None:
        self.ng, self.nf = n_stack, n_probes
        self.torch = backend == "torch"
        if self.torch:
            import torch

            self.einsum = torch.einsum

    def _gf(self, a):  # G + F + (rest,) -> (g, f, rest)
        return a.reshape(int(np.prod(a.shape[: self.ng])), int(np.prod(a.shape[self.ng: self.ng + self.nf])), -1)

    def _g(self, a):  # G + (rest...) -> (g, rest...)
        return a.reshape((int(np.prod(a.shape[: self.ng])),) + tuple(a.shape[self.ng:]))

    def _out(self, flat, like_g, like_f):
        return flat.reshape(tuple(like_g.shape[: self.ng]) + tuple(like_f.shape[self.ng: self.ng + self.nf])
                            + tuple(flat.shape[-1:]))

    def probe(self, m, p):  # Gio,Fo->GFi
        p2 = p.reshape(-1, p.shape[-1])
        if self.torch:
            flat = self.einsum("gio,fo->gfi", self._g(m), p2)
        else:
            flat = np.einsum("gio,fo->gfi", self._g(m), p2, optimize=["einsum_path", (0, 1)])
        return flat.reshape(tuple(m.shape[: self.ng]) + tuple(p.shape[:-1]) + (m.shape[-2],))

    def env(self, left, core, x):  # GFa,Gaib,GFi->GFb
        ll, c, xx = self._gf(left), self._g(core), self._gf(x)
        if self.torch:
            flat = self.einsum("gfib,gfi->gfb", self.einsum("gfa,gaib->gfib", ll, c), xx)
        else:
            flat = np.einsum("gfa,gaib,gfi->gfb", ll, c, xx, optimize=["einsum_path", (0, 1), (0, 1)])
        return self._out(flat, left, left)

    def mid(self, left, core, right):  # GFa,Gaib,GFb->GFi
        ll, c, rr = self._gf(left), self._g(core), self._gf(right)
        if self.torch:
            flat = self.einsum("gfib,gfb->gfi", self.einsum("gfa,gaib->gfib", ll, c), rr)
        else:
            flat = np.einsum("gfa,gaib,gfb->gfi", ll, c, rr, optimize=["einsum_path", (0, 1), (0, 1)])
        return self._out(flat, left, left)

    def back(self, y, m):  # GFi,Gio->GFo
        yy, mm = self._gf(y), self._g(m)
        if self.torch:
            flat = self.einsum("gfi,gio->gfo", yy, mm)
        else:
            flat = np.einsum("gfi,gio->gfo", yy, mm, optimize=["einsum_path", (0, 1)])
        return self._out(flat, y, y)


def hand_expanded(subscripts: str, n_stack: int, n_probes: int) -> str:
    """One letter per axis: G -> w[x], F -> y[z] (the strings use a, b, i, o only)."""
    return subscripts.replace("G", "wx"[:n_stack]).replace("F", "yz"[:n_probes])


class OptEinsumImpl:
    """opt_einsum.contract on the hand-expanded strings (it plans every call)."""

    def __init__(self, n_stack: int, n_probes: int, backend: str) -> None:
        import opt_einsum

        self.contract = opt_einsum.contract
        self.backend = backend
        self.s = {s: hand_expanded(s, n_stack, n_probes) for s in
                  ("Gio,Fo->GFi", "GFa,Gaib,GFi->GFb", "GFa,Gaib,GFb->GFi", "GFi,Gio->GFo")}

    def probe(self, m, p):
        return self.contract(self.s["Gio,Fo->GFi"], m, p, backend=self.backend)

    def env(self, left, core, x):
        return self.contract(self.s["GFa,Gaib,GFi->GFb"], left, core, x, backend=self.backend)

    def mid(self, left, core, right):
        return self.contract(self.s["GFa,Gaib,GFb->GFi"], left, core, right, backend=self.backend)

    def back(self, y, m):
        return self.contract(self.s["GFi,Gio->GFo"], y, m, backend=self.backend)


IMPL_CLASSES = {"contract": ContractImpl, "hand": HandImpl, "opt_einsum": OptEinsumImpl}


# ----------------------------------------------------------------------------- the loop
class Ops:
    """The few non-contraction operations of the loop, on numpy or torch."""

    def __init__(self, backend: str) -> None:
        self.torch = backend == "torch"
        if self.torch:
            import torch

            self.t = torch

    def asarray(self, a):
        return self.t.from_numpy(np.ascontiguousarray(a)) if self.torch else a

    def ones(self, shape):
        return self.t.ones(shape, dtype=self.t.float64) if self.torch else np.ones(shape)

    def transposed(self, core):  # G + (a, i, b) -> G + (b, i, a), a view
        return core.transpose(-1, -3) if self.torch else np.swapaxes(core, -1, -3)

    def step(self, p, g, n_stack: int, added):
        """P += ETA * sum_G g, normalised, with the new probes appended along F's last axis."""
        if self.torch:
            p = p + ETA * g.sum(dim=tuple(range(n_stack)))
            p = p / self.t.linalg.vector_norm(p, dim=-1, keepdim=True)
            return self.t.cat([p, added], dim=-2)
        p = p + ETA * g.sum(axis=tuple(range(n_stack)))
        p = p / np.linalg.norm(p, axis=-1, keepdims=True)
        return np.concatenate([p, added], axis=-2)

    def numpy(self, a):
        return a.numpy() if self.torch else a


def run_pass(impl, ops: Ops, data: dict, n_stack: int, record: bool = False):
    """One pass of the schedule; with ``record``, every iteration's value (both ways) and gradients."""
    matrices, probes = data["matrices"], list(data["probes"])
    stack = tuple(matrices[0].shape[:n_stack])
    seen = []
    grads: list = []
    for t, (cores, transposed) in enumerate(zip(data["cores"], data["transposed"])):
        if t:
            probes = [ops.step(p, g, n_stack, a) for p, g, a in zip(probes, grads, data["added"][t])]
        fshape = tuple(probes[0].shape[:-1])
        left = [ops.ones(stack + fshape + (1,))]
        xs = []
        for k in range(len(cores)):
            xs.append(impl.probe(matrices[k], probes[k]))
            left.append(impl.env(left[k], cores[k], xs[k]))
        right = ops.ones(stack + fshape + (1,))
        grads = [None] * len(cores)
        for k in reversed(range(len(cores))):
            y = impl.mid(left[k], cores[k], right)
            grads[k] = impl.back(y, matrices[k])
            right = impl.env(right, transposed[k], xs[k])
        if record:
            seen.append((left[-1], right, list(grads)))
    return seen


def backend_data(schedule: Schedule, ops: Ops) -> dict:
    cores = [[ops.asarray(c) for c in layer] for layer in schedule.cores]
    return {"matrices": [ops.asarray(m) for m in schedule.matrices],
            "probes": [ops.asarray(p) for p in schedule.probes],
            "added": [[ops.asarray(a) for a in layer] for layer in schedule.added],
            "cores": cores, "transposed": [[ops.transposed(c) for c in layer] for layer in cores]}


def _warm_up(impls: dict, ops: Ops) -> None:
    """Unrelated calls of every implementation: imports, BLAS threads, first-use costs."""
    from contractions import contract

    rng = np.random.default_rng(1)
    a, b = ops.asarray(rng.standard_normal((5, 6))), ops.asarray(rng.standard_normal((6, 7)))
    s3 = ops.asarray(rng.standard_normal((2, 5, 6)))
    for _ in range(3):
        contract("ab,bc->ac", a, b)
        contract("Wab,bc->Wac", s3, b)
        impls["opt_einsum"].contract("ab,bc->ac", a, b, backend=impls["opt_einsum"].backend)
        if ops.torch:
            ops.t.einsum("ab,bc->ac", a, b)
        else:
            np.einsum("ab,bc->ac", a, b, optimize=["einsum_path", (0, 1)])


def _close(x, y) -> bool:
    return bool(np.allclose(x, y, rtol=1e-9, atol=1e-12 * (1 + np.abs(y).max())))


def verify(records: dict, ops: Ops) -> list[str]:
    """Problems found comparing pass 1 of every implementation with the hand-written code's."""
    problems = []
    ref = records["hand"]
    for t, (value, again, _) in enumerate(ref):
        if not _close(ops.numpy(value), ops.numpy(again)):
            problems.append(f"hand: iteration {t}: L_9 != R_1")
    for name, rec in records.items():
        for t, ((v, r, gs), (v0, r0, gs0)) in enumerate(zip(rec, ref)):
            pairs = [(v, v0), (r, r0), *zip(gs, gs0)]
            if not all(_close(ops.numpy(x), ops.numpy(y)) for x, y in pairs):
                problems.append(f"{name}: iteration {t} differs from the hand-written code")
    return problems


def worker(backend: str, passes: int, rotation: int, out: Path, torch_threads: int | None) -> None:
    ops = Ops(backend)
    if ops.torch and torch_threads:
        ops.t.set_num_threads(torch_threads)
    n_stack, n_probes = len(STACK), len(PROBES)
    data = backend_data(make_schedule(), ops)
    impls = {name: IMPL_CLASSES[name](n_stack, n_probes, backend) for name in IMPLS}
    _warm_up(impls, ops)
    times: dict[str, list[float]] = {name: [] for name in IMPLS}
    records = {}
    for p in range(passes):
        shift = (p + rotation) % len(IMPLS)
        for name in IMPLS[shift:] + IMPLS[:shift]:
            gc.collect()
            start = time.perf_counter()
            rec = run_pass(impls[name], ops, data, n_stack, record=p == 0)
            times[name].append(time.perf_counter() - start)
            if p == 0:
                records[name] = rec
    problems = verify(records, ops)
    threads = ops.t.get_num_threads() if ops.torch else None
    out.write_text(json.dumps({"times": times, "problems": problems, "torch_threads": threads}), encoding="utf-8")


def calls_per_pass() -> tuple[int, int]:
    """(calls of a pass, distinct (string, shapes) among them): how many shapes a pass meets."""
    seen: list[tuple] = []

    class Recorder(HandImpl):
        def probe(self, m, p):
            seen.append(("probe", m.shape, p.shape))
            return super().probe(m, p)

        def env(self, left, core, x):
            seen.append(("env", left.shape, core.shape, x.shape))
            return super().env(left, core, x)

        def mid(self, left, core, right):
            seen.append(("mid", left.shape, core.shape, right.shape))
            return super().mid(left, core, right)

        def back(self, y, m):
            seen.append(("back", y.shape, m.shape))
            return super().back(y, m)

    ops = Ops("numpy")
    run_pass(Recorder(len(STACK), len(PROBES), "numpy"), ops, backend_data(make_schedule(), ops), len(STACK))
    return len(seen), len(set(seen))


# ----------------------------------------------------------------------------- the run
def measure(backends: list[str], repeats: int, passes: int, torch_threads: int | None = None) -> dict:
    runs: dict[str, list[dict]] = {b: [] for b in backends}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            for backend in backends:
                out = Path(tmp) / f"{backend}-{r}.json"
                subprocess.run([sys.executable, __file__, "--worker", backend, "--passes", str(passes),
                                "--rotation", str(r), "--out", str(out),
                                "--torch-threads", str(torch_threads or 0)], check=True, env=env)
                run = json.loads(out.read_text(encoding="utf-8"))
                runs[backend].append(run)
                p1 = {k: f"{v[0] * 1e3:.1f}" for k, v in run["times"].items()}
                print(f"[repeat {r + 1}/{repeats}] {backend}: pass 1 ms {p1}"
                      + (f"; PROBLEMS {run['problems']}" if run["problems"] else ""), flush=True)
    calls, distinct = calls_per_pass()
    versions = {"numpy": np.__version__, "python": platform.python_version()}
    if "torch" in backends:
        import torch

        versions["torch"] = torch.__version__
        versions["torch threads"] = results_threads(runs["torch"])
    return {"runs": runs, "repeats": repeats, "passes": passes, "calls_per_pass": calls,
            "distinct_per_pass": distinct, "versions": versions, "cores": os.cpu_count(),
            "machine": f"{platform.machine()} {platform.processor() or platform.system()}",
            "stack": STACK, "probes": PROBES, "modes": MODES, "ranks_first": RANKS,
            "ranks_last": ranks_at(ITERATIONS - 1), "iterations": ITERATIONS}


def results_threads(runs: list[dict]) -> int | None:
    return runs[0].get("torch_threads") if runs else None


def medians(results: dict, backend: str) -> dict[str, list[float]]:
    """Per implementation, per pass: the median over repeats (ms)."""
    runs = results["runs"][backend]
    return {name: [median(run["times"][name][p] for run in runs) * 1e3 for p in range(results["passes"])]
            for name in IMPLS}


def render(results: dict, smoke: bool) -> str:
    lines = []
    if smoke:
        lines += ["**Smoke run** (`--quick`, on a busy machine): these numbers only show that the script "
                  "works; they are not a measurement and will be replaced by a full run.", ""]
    lines += [
        f"`python bench/tt_loop.py` on {results.get('date', '?')}: the loop of `bench/tt_loop.py` (its "
        "docstring says what it computes): a stack of "
        f"{int(np.prod(results['stack']))} tensor trains, 8 cores of mode sizes {', '.join(map(str, results['modes']))}, "
        f"bond ranks growing from {results['ranks_first']} to {results['ranks_last']} over {results['iterations']} "
        f"iterations while the probe grid F grows from {tuple(results['probes'])} to "
        f"{tuple(results['probes'][:-1]) + (results['probes'][-1] + results['iterations'] - 1,)}; each iteration a left and a right sweep "
        "with `'Gio,Fo->GFi'`, `'GFa,Gaib,GFi->GFb'`, `'GFa,Gaib,GFb->GFi'` and `'GFi,Gio->GFo'`. "
        f"A pass is the whole schedule: {results['calls_per_pass']} calls, {results['distinct_per_pass']} of them "
        "with a shape no earlier call of the pass had. Pass 1 meets every shape for the first time; later passes "
        "repeat them. Implementations: `contract` (default options); *hand-written*: groups flattened by "
        "`reshape`, `np.einsum` with a hand path (torch: pairwise `torch.einsum` calls); `opt_einsum.contract` on "
        "the hand-expanded strings (plans every call). Time per pass in ms, median over "
        f"{results['repeats']} fresh process{'es' if results['repeats'] != 1 else ''} (float64; {results['cores']} cores, "
        + ", ".join(f"{k} {v}" for k, v in results["versions"].items())
        + "); speed-up = hand-written time / this time (above 1: faster than the hand-written code).", ""]
    for backend in results["runs"]:
        m = medians(results, backend)
        problems = sorted({p for run in results["runs"][backend] for p in run["problems"]})
        title = "numpy" if backend == "numpy" else "torch eager (CPU)"
        lines += [f"**{title}**" + (f" (results disagree: {'; '.join(problems)})" if problems else
                                    ": all three agree on pass 1 (`np.allclose`).")]
        lines += ["", "| pass | hand-written ms | `contract` ms | speed-up | `opt_einsum.contract` ms | speed-up |",
                  "|---:|---:|---:|---:|---:|---:|"]
        for p in range(results["passes"]):
            hand, ours, oe = m["hand"][p], m["contract"][p], m["opt_einsum"][p]
            lines.append(f"| {p + 1} | {hand:.1f} | {ours:.1f} | {hand / ours:.2f}x | {oe:.1f} | {hand / oe:.2f}x |")
        lines.append("")
        if backend == "numpy":
            first = m["hand"][0] / m["contract"][0]
            lines += ["| goal (numpy) | target | measured | met |", "|---|---|---:|---|",
                      f"| pass 1 (every shape new): speed-up of `contract` | >= {GOAL_PASS1} | {first:.2f}x | "
                      f"{'yes' if first >= GOAL_PASS1 else 'no'} |"]
            if results["passes"] >= 5:
                fifth = m["hand"][4] / m["contract"][4]
                lines.append(f"| pass 5 (shapes seen before): speed-up of `contract` | >= {GOAL_PASS5} | "
                             f"{fifth:.2f}x | {'yes' if fifth >= GOAL_PASS5 else 'no'} |")
            lines.append("")
    lines += ["![Time per pass of the tensor-train loop, per implementation](benchmarks_tt_loop.png)", "",
              "*Time per pass (ms, log scale; median over the repeats), numpy and torch eager.*", ""]
    return "\n".join(lines)


def plot(results: dict, path: Path = PLOT) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = list(results["runs"])
    fig, axes = plt.subplots(1, len(backends), figsize=(5 * len(backends), 4), squeeze=False)
    styles = {"contract": ("tab:blue", "o"), "hand": ("black", "s"), "opt_einsum": ("tab:orange", "^")}
    titles = {"contract": "contract", "hand": "hand-written (reshape + einsum, hand path)",
              "opt_einsum": "opt_einsum.contract"}
    for ax, backend in zip(axes[0], backends):
        m = medians(results, backend)
        xs = range(1, results["passes"] + 1)
        for name in IMPLS:
            colour, marker = styles[name]
            ax.plot(xs, m[name], marker=marker, color=colour, label=titles[name])
        ax.set_yscale("log")
        ax.set_xticks(list(xs))
        ax.set_xlabel("pass (1: every shape new)")
        ax.set_ylabel("ms per pass")
        ax.set_title("numpy" if backend == "numpy" else "torch eager (CPU)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Ragged rank-growing tensor-train loop, {results['calls_per_pass']} calls per pass")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(results: dict, smoke: bool) -> None:
    write_section(SECTION, render(results, smoke))
    plot(results)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat x 5 passes; prints only unless --write")
    parser.add_argument("--write", action="store_true", help="with --quick: write the page, marked a smoke run")
    parser.add_argument("--report-only", action="store_true", help="re-render the page and plot from the json")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--passes", type=int, default=None)
    parser.add_argument("--backends", default="numpy,torch")
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="torch.set_num_threads in the torch runs (default: torch's own choice)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--rotation", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.passes, args.rotation, Path(args.out), args.torch_threads or None)
        return 0
    if args.report_only:
        results = json.loads(RESULTS.read_text(encoding="utf-8"))
        write(results, results.get("smoke", False))
        return 0
    repeats = args.repeats or (1 if args.quick else 5)
    passes = args.passes or (5 if args.quick else 6)
    start = time.perf_counter()
    results = measure(args.backends.split(","), repeats, passes, args.torch_threads or None)
    results["date"] = time.strftime("%Y-%m-%d %H:%M")
    results["wall_s"] = time.perf_counter() - start
    results["smoke"] = args.quick
    print(render(results, args.quick))
    if not args.quick or args.write:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1), encoding="utf-8")
        write(results, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
