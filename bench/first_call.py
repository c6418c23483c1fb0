"""First calls: what a call costs when ``contract`` has not seen its shape, or its string, before.

Per string of the vocabulary (bench/vocabulary.py) at small sizes (group sub-axes 3, lowercase
letters 6, every array at most ``SMALL_CAP`` elements), each first call timed once, ``reps``
times, the contenders' order rotated from one repetition to the next:

(i) **new shape**: the string was called before with other extents; this call's extents are new
    (repetition k grows one extent by k, a different one each time);
(ii) **new string**: every cache of the engine cleared first (bench/cold_start.py) and the
    string's letters renamed, so it is new to any cache;

each for ``contract`` against ``opt_einsum.contract`` and ``np.einsum(optimize=True)`` on the same
operands and the hand-expanded string (both plan every call), on numpy; on torch (CPU, eager)
against ``torch.einsum`` and ``opt_einsum.contract(..., backend='torch')``.  Every contender's
result is checked against ``np.einsum`` on the expanded string.  Medians per string, then over
strings (all strings, and those with 3-4 operands);

(iii) **large work** (numpy): a few 3-4 operand calls with about ``LARGE_FLOPS`` of work (5-10 ms):
    the first call of a new string (caches and scratch buffers cleared) and of a new shape of a
    known string (caches and scratch buffers cleared, the string called once at extents one
    lowercase letter smaller by k, as a loop whose ranks grow, and that call's buffers kept, as
    a loop keeps its previous shapes'), against the same call warm and
    ``contract_expression``'s warm call (warm: interleaved medians, bench/timing.py), after
    touching a share of the machine's free memory (`settle_memory`);
(iv) **JAX**: the first call of ``jax.jit(lambda *a: contract(s, *a))`` (trace, lowering, compile
    and ``contract``'s planning, engine caches cleared, letters renamed) against
    ``jax.jit(lambda *a: jnp.einsum(expanded, *a))``, float32.

Each part runs in its own process.  The goals printed beside the medians: a new shape's median
first call no slower than ``opt_einsum.contract``'s; a new string's median first call at most
0.5 ms for 3-4 operands; large work's first call at most 1.15x its own warm call, and the warm
call within 1.1x ``contract_expression``'s.

    python bench/first_call.py           # every string, 7 repetitions (JAX 3); ~5-10 min on 2 cores;
                                         # writes its section of docs/benchmarks_first_call.md and
                                         # bench/results/first_call.json
    python bench/first_call.py --quick   # 8 strings, 3 repetitions (JAX 6 strings, 1): prints only
    python bench/first_call.py --quick --write  # the same, and writes the page marked as a smoke run
    python bench/first_call.py --report-only    # re-render the page from first_call.json
    python bench/first_call.py --parts numpy,torch --torch-threads 1  # some parts; torch's threads set
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import opt_einsum  # noqa: E402
from cold_start import clear_engine_caches, median, renamed, write_section  # noqa: E402
from vocabulary import GROUP_AXES, _term_shape, make_case, vocabulary  # noqa: E402

import contractions  # noqa: E402
from contractions import contract, contract_expression, explain  # noqa: E402

RESULTS = HERE / "results" / "first_call.json"
SECTION = "First calls per string"
SUB_AXIS, LOWER, SMALL_CAP = 3, 6, 1 << 12
LARGE_FLOPS = 3e8  # opt_einsum's flop count of the large calls: 5-10 ms warm on a quiet 2-core machine
# (subscripts, group sub-axis extents): the large calls; lowercase extents are scaled to LARGE_FLOPS
LARGE_CASES = (
    ("WCa,Caib,WCi->WCb", {"W": (16, 16), "C": (4, 4)}),
    ("GFa,Gaib,Fo,Gio->GFb", {"G": (4, 4), "F": (16, 16)}),
    ("Cpqr,CWp,CWq,CWr->WC", {"C": (4, 4), "W": (32, 32)}),
    ("Camb,Casc,mstn,Cbtd->Ccnd", {"C": (4, 4)}),
)
GOAL_NEW_STRING_MS = 0.5
GOAL_LARGE_FIRST = 1.15
GOAL_LARGE_WARM = 1.1
CONTENDERS = {
    "numpy": ("contract", "opt_einsum", "einsum_optimize"),
    "torch": ("contract", "torch.einsum", "opt_einsum"),
}
TITLES = {"contract": "`contract`", "opt_einsum": "`opt_einsum.contract`",
          "einsum_optimize": "`np.einsum(optimize=True)`", "torch.einsum": "`torch.einsum`"}


# ----------------------------------------------------------------------------- cases
class Small:
    """A string at small extents: its structure from the vocabulary, extents set here."""

    def __init__(self, subscripts: str) -> None:
        case = make_case(subscripts, "tiny")  # the structure: groups, letters, supplements, expansion
        self.subscripts, self.kwargs, self.expanded = subscripts, case.kwargs, case.expanded
        self.operands = subscripts.count(",") + 1
        self.base: dict[object, int] = {(g, k): SUB_AXIS for g, _ in case.group_axes for k in range(GROUP_AXES)}
        self.base.update({c: LOWER for c, _ in case.lower})
        while max(math.prod(s) for s in self.shapes(self.base)) > SMALL_CAP:
            biggest = max(self.shapes_by_symbol(), key=lambda t: math.prod(self.base[s] for s in t))
            symbol = max((s for s in biggest if self.base[s] > 2), key=lambda s: self.base[s], default=None)
            if symbol is None:
                break
            self.base[symbol] -= 1

    def shapes_by_symbol(self) -> list[list[object]]:
        out = []
        for term in self.subscripts.split("->")[0].split(","):
            symbols: list[object] = []
            for c in term:
                symbols.extend([(c, k) for k in range(GROUP_AXES)] if c.isupper() else [c])
            out.append(symbols)
        return out

    def shapes(self, extent: dict[object, int]) -> tuple[tuple[int, ...], ...]:
        groups: dict[str, list[int]] = {}
        lower: dict[str, int] = {}
        for key, n in extent.items():
            if isinstance(key, tuple):
                groups.setdefault(key[0], [0] * GROUP_AXES)[key[1]] = n
            else:
                lower[str(key)] = n
        as_tuples = {g: tuple(v) for g, v in groups.items()}
        return tuple(_term_shape(t, as_tuples, lower) for t in self.subscripts.split("->")[0].split(","))

    def grown(self, k: int) -> tuple[tuple[int, ...], ...]:
        """Repetition k's new shapes: one symbol (a different one each k) grown by k."""
        extent = dict(self.base)
        symbols = list(extent)
        extent[symbols[(k - 1) % len(symbols)]] += k
        return self.shapes(extent)


def arrays(shapes, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def once(call) -> tuple[float, object]:
    """Seconds of one call (garbage collection off, as timeit does) and its result."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        result = call()
        return time.perf_counter() - start, result
    finally:
        gc.enable()


def _check(result, reference, what: str) -> None:
    result = np.asarray(result.numpy() if hasattr(result, "numpy") else result, dtype=np.float64)
    if not np.allclose(result, reference, rtol=1e-4, atol=1e-4 * (1 + np.abs(reference).max())):
        raise AssertionError(f"{what}: differs from np.einsum on the expanded string")


# ----------------------------------------------------------------------------- (i), (ii)
def contenders(backend: str, case: Small):
    """name -> (subscripts, operands, kwargs) -> result, for this backend."""
    e = case.expanded
    if backend == "torch":
        import torch

        return {"contract": lambda s, ops, kw: contract(s, *ops, **kw),
                "torch.einsum": lambda s, ops, kw: torch.einsum(e, *ops),
                "opt_einsum": lambda s, ops, kw: opt_einsum.contract(e, *ops, backend="torch")}
    return {"contract": lambda s, ops, kw: contract(s, *ops, **kw),
            "opt_einsum": lambda s, ops, kw: opt_einsum.contract(e, *ops),
            "einsum_optimize": lambda s, ops, kw: np.einsum(e, *ops, optimize=True)}


def measure_string(subscripts: str, backend: str, reps: int) -> dict | None:
    case = Small(subscripts)
    convert = _converter(backend)
    funcs = contenders(backend, case)
    names = list(funcs)
    base_np = arrays(case.shapes(case.base))
    base = [convert(a) for a in base_np]
    try:
        contract(subscripts, *base, **case.kwargs)  # the string is known from here on
    except contractions.ContractionError as error:
        print(f"  skipped {subscripts}: {error}", flush=True)
        return None
    new_shape: dict[str, list[float]] = {n: [] for n in names}
    new_string: dict[str, list[float]] = {n: [] for n in names}
    for k in range(1, reps + 1):
        order = names[k % len(names):] + names[: k % len(names)]
        ops_np = arrays(case.grown(k), seed=k)
        ops = [convert(a) for a in ops_np]
        reference = np.einsum(case.expanded, *ops_np, optimize=True) if k == 1 else None
        for name in order:
            seconds, result = once(lambda f=funcs[name], ops=ops: f(subscripts, ops, case.kwargs))
            new_shape[name].append(seconds * 1e3)
            if reference is not None:
                _check(result, reference, f"{subscripts} {name} (new shape)")
    reference = np.einsum(case.expanded, *base_np, optimize=True)
    for k in range(1, reps + 1):
        order = names[k % len(names):] + names[: k % len(names)]
        fresh, kwargs = renamed(subscripts, k, case.kwargs)
        for name in order:
            if name == "contract":
                clear_engine_caches()
            seconds, result = once(lambda f=funcs[name], s=fresh, kw=kwargs: f(s, base, kw))
            new_string[name].append(seconds * 1e3)
            if k == 1:
                _check(result, reference, f"{fresh} {name} (new string)")
    return {"subscripts": subscripts, "operands": case.operands, "shapes": case.shapes(case.base),
            "new_shape_ms": {n: median(v) for n, v in new_shape.items()},
            "new_string_ms": {n: median(v) for n, v in new_string.items()}}


def _converter(backend: str):
    if backend == "torch":
        import torch

        return lambda a: torch.from_numpy(a)
    return lambda a: a


# ----------------------------------------------------------------------------- (iii)
def large_case(subscripts: str, groups: dict[str, tuple[int, ...]], flops: float):
    """(shapes, kwargs, expanded, flop count): lowercase extents raised until the work reaches ``flops``."""
    case = make_case(subscripts, "tiny")
    letters = [c for c, _ in case.lower]
    n = 2
    while True:
        shapes = large_shapes(subscripts, groups, {c: n for c in letters})
        cost = float(opt_einsum.contract_path(case.expanded, *shapes, shapes=True, optimize="greedy")[1].opt_cost)
        if cost >= flops or n > 512:
            return shapes, case.kwargs, case.expanded, cost
        n += 1 if n < 16 else 2


def large_shapes(subscripts: str, groups: dict[str, tuple[int, ...]], lower: dict[str, int]):
    return tuple(_term_shape(t, groups, lower) for t in subscripts.split("->")[0].split(","))


def nearby(subscripts: str, groups: dict[str, tuple[int, ...]], shapes, k: int):
    """``shapes`` with one lowercase letter's extent lowered by ``k`` (a different letter for
    each ``k``): the extents a loop called the string at before this shape, as part (i)'s
    repetitions grow one extent by k."""
    lhs = subscripts.split("->")[0].split(",")
    lower: dict[str, int] = {}
    for term, shape in zip(lhs, shapes):
        axes = iter(shape)
        for c in term:
            if c.isupper():
                for _ in groups[c]:
                    next(axes)
            else:
                lower[c] = next(axes)
    letters = sorted(lower)
    letter = letters[(k - 1) % len(letters)]
    return large_shapes(subscripts, groups, {**lower, letter: max(1, lower[letter] - k)})


def settle_memory(quick: bool = False) -> int:
    """Touch (and free) a large block of memory before large calls are timed; the bytes touched.

    On a virtual machine whose host backs guest memory lazily (and takes back memory the guest
    left idle), the pages a process gets can cost a host fault each, ~8 us against ~0.3 us,
    and be mapped without huge pages: measured on the development VM, a 32 MB copy took 66 ms
    instead of 4 and a warm 5 ms call ran 15 ms, for minutes at a time, until ~18 GB had been
    touched.  That state makes every call slow alike and hides what a first call adds, so the
    large part touches a third of the memory available before each large string (8 GB at
    most).  A machine whose memory is already backed pays a few seconds and nothing
    changes.
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            fields = dict(line.split(":", 1) for line in info)
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 0
    size = min((1 if quick else 8) << 30, available // 3)
    block = np.ones(size // 8)
    del block
    return size


def measure_large(subscripts: str, groups, flops: float, reps: int, repeats: int, batch: float) -> dict:
    import timing

    shapes, kwargs, expanded, cost = large_case(subscripts, groups, flops)
    ops = arrays(shapes)
    reference = np.einsum(expanded, *ops, optimize="greedy")
    first_string, first_shape = [], []
    for k in range(1, reps + 1):
        fresh, kw = renamed(subscripts, k, kwargs)  # a new string: caches and scratch cleared
        clear_engine_caches()
        contractions.clear_scratch()
        seconds, result = once(lambda s=fresh, kw=kw: contract(s, *ops, **kw))
        first_string.append(seconds * 1e3)
        _check(result, reference, f"{fresh} (large, new string)")
        # A known string, a new shape: the caches and scratch buffers cleared (the new-string
        # call above planned these very labels at these shapes and left buffers of their
        # sizes), the string called at nearby extents, then here.  The nearby call's buffers
        # stay, as a loop's previous shapes' do: a buffer of a step whose extents did not
        # change is used again, one that grew is made afresh (its first touch is this call's).
        known, kw = renamed(subscripts, 13 + k, kwargs)
        clear_engine_caches()
        contractions.clear_scratch()
        contract(known, *arrays(nearby(subscripts, groups, shapes, k)), **kw)
        seconds, _ = once(lambda s=known, kw=kw: contract(s, *ops, **kw))
        first_shape.append(seconds * 1e3)
    expr = contract_expression(subscripts, *shapes, **kwargs)
    _check(expr(*ops), reference, f"{subscripts} (contract_expression)")
    warm = timing.interleaved_medians({"contract": lambda: contract(subscripts, *ops, **kwargs),
                                       "expression": lambda: expr(*ops)}, repeats, batch)
    return {"subscripts": subscripts, "operands": len(shapes), "shapes": shapes, "flops": cost,
            "first_new_string_ms": median(first_string), "first_new_shape_ms": median(first_shape),
            "warm_ms": warm["contract"] * 1e3, "expression_ms": warm["expression"] * 1e3,
            "explain": explain(subscripts, *shapes, **kwargs)}  # the json keeps what planned it


# ----------------------------------------------------------------------------- (iv)
def measure_jax(subscripts: str, reps: int) -> dict | None:
    import jax
    import jax.numpy as jnp

    case = Small(subscripts)
    ops_np = arrays(case.shapes(case.base))
    ops = [jnp.asarray(a.astype(np.float32)) for a in ops_np]
    try:
        contract(subscripts, *ops, **case.kwargs)
    except contractions.ContractionError:
        return None
    ours, theirs = [], []
    reference = np.einsum(case.expanded, *ops_np, optimize=True)
    for k in range(1, reps + 1):
        fresh, kwargs = renamed(subscripts, k, case.kwargs)
        clear_engine_caches()
        mine = jax.jit(lambda *a, s=fresh, kw=kwargs: contract(s, *a, **kw))
        hand = jax.jit(lambda *a, e=case.expanded: jnp.einsum(e, *a))
        pair = [("contract", mine), ("jnp.einsum", hand)]
        for name, fn in pair if k % 2 else pair[::-1]:
            seconds, result = once(lambda fn=fn: jax.block_until_ready(fn(*ops)))
            (ours if name == "contract" else theirs).append(seconds * 1e3)
            if k == 1:
                _check(np.asarray(result), reference, f"{fresh} {name} (jit)")
    return {"subscripts": subscripts, "operands": case.operands,
            "contract_ms": median(ours), "einsum_ms": median(theirs)}


# ----------------------------------------------------------------------------- the run
def part(name: str, quick: bool, out: Path, torch_threads: int = 0) -> None:
    if name == "torch" and torch_threads:
        import torch

        torch.set_num_threads(torch_threads)
    strings = vocabulary()
    if quick:
        strings = strings[:: max(1, len(strings) // 8)][:8]
    reps = 3 if quick else 7
    result: dict = {}
    if name in ("numpy", "torch"):
        rows = []
        for k, s in enumerate(strings, 1):
            row = measure_string(s, name, reps)
            if row is not None:
                rows.append(row)
                print(f"[{name} {k}/{len(strings)}] {s}: new shape "
                      + ", ".join(f"{c} {v:.3f}" for c, v in row["new_shape_ms"].items()) + " ms; new string "
                      + ", ".join(f"{c} {v:.3f}" for c, v in row["new_string_ms"].items()) + " ms", flush=True)
        result["rows"] = rows
    if name == "numpy":
        flops = LARGE_FLOPS / 10 if quick else LARGE_FLOPS
        result["large"] = []
        result["settled_bytes"] = 0
        for s, groups in LARGE_CASES[:2] if quick else LARGE_CASES:
            result["settled_bytes"] = max(result["settled_bytes"], settle_memory(quick))
            row = measure_large(s, groups, flops, 2 if quick else 5, 3 if quick else 9, 0.02 if quick else 0.1)
            result["large"].append(row)
            print(f"[large] {s}: first {row['first_new_string_ms']:.2f} (new string) / "
                  f"{row['first_new_shape_ms']:.2f} (new shape), warm {row['warm_ms']:.2f}, "
                  f"expression {row['expression_ms']:.2f} ms", flush=True)
    if name == "torch":
        import torch

        result["torch"], result["threads"] = torch.__version__, torch.get_num_threads()
    if name == "jax":
        import jax

        jax_strings = vocabulary()
        jax_strings = jax_strings[:: max(1, len(jax_strings) // 6)][:6] if quick else jax_strings
        rows = []
        for k, s in enumerate(jax_strings, 1):
            row = measure_jax(s, 1 if quick else 3)
            if row is not None:
                rows.append(row)
                print(f"[jax {k}/{len(jax_strings)}] {s}: jit first call contract {row['contract_ms']:.1f} ms, "
                      f"jnp.einsum {row['einsum_ms']:.1f} ms", flush=True)
        result["rows"], result["jax"] = rows, jax.__version__
    out.write_text(json.dumps(result, default=list), encoding="utf-8")


def measure(parts: list[str], quick: bool, torch_threads: int = 0) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in parts:
            out = Path(tmp) / f"{name}.json"
            cmd = [sys.executable, __file__, "--part", name, "--out", str(out), "--torch-threads", str(torch_threads)]
            cmd += ["--quick"] if quick else []
            subprocess.run(cmd, check=True, env=env)
            results[name] = json.loads(out.read_text(encoding="utf-8"))
    results["meta"] = {"numpy": np.__version__, "opt_einsum": opt_einsum.__version__,
                       "python": platform.python_version(), "cores": os.cpu_count(),
                       "machine": f"{platform.machine()} {platform.processor() or platform.system()}"}
    return results


def summary(rows: list[dict], key: str, names, operands=None) -> dict[str, float]:
    chosen = [r for r in rows if operands is None or r["operands"] in operands]
    return {n: median(r[key][n] for r in chosen) for n in names} | {"strings": len(chosen)}


def _verdict(ok: bool) -> str:
    return "yes" if ok else "no"


def render(results: dict, smoke: bool, wall: float | None = None) -> str:
    lines = []
    if smoke:
        lines += ["**Smoke run** (`--quick`, on a busy machine): these numbers only show that the script "
                  "works; they are not a measurement and will be replaced by a full run.", ""]
    meta = results.get("meta", {})
    lines += [
        f"`python bench/first_call.py` on {results.get('date', '?')}"
        + (f" ({wall / 60:.1f} min)" if wall else "") + ": one call timed at a time (ms), "
        "median of the repetitions per string, then the median over strings. *New shape*: the string was "
        "called before with other extents, this call's are new; *new string*: the engine's caches cleared and "
        "the string's letters renamed. Small sizes: group sub-axes 3, lowercase letters 6, arrays of at most "
        f"{SMALL_CAP} elements. The peers plan every call, so their two columns measure the same thing. "
        f"numpy {meta.get('numpy', '?')}, opt_einsum {meta.get('opt_einsum', '?')}, Python "
        f"{meta.get('python', '?')}, {meta.get('cores', '?')} cores.", ""]
    for backend in ("numpy", "torch"):
        if backend not in results:
            continue
        rows, names = results[backend]["rows"], CONTENDERS[backend]
        title = "numpy" if backend == "numpy" else (
            f"torch eager (CPU, torch {results[backend].get('torch', '?')}, "
            f"torch.get_num_threads() {results[backend].get('threads', '?')})")
        lines += [f"### {title}", "",
                  "| median over strings (ms) | " + " | ".join(TITLES[n] for n in names) + " |",
                  "|---|" + "---:|" * len(names)]
        for key, label in (("new_shape_ms", "new shape"), ("new_string_ms", "new string")):
            for ops, which in ((None, "all strings"), ((3, 4), "3-4 operands")):
                s = summary(rows, key, names, ops)
                lines.append(f"| {label}, {which} ({s['strings']}) | "
                             + " | ".join(f"{s[n]:.3f}" for n in names) + " |")
        lines.append("")
        shape = summary(rows, "new_shape_ms", names)
        string = summary(rows, "new_string_ms", names, (3, 4))
        kind = "goal (numpy)" if backend == "numpy" else "the same lines on torch"
        lines += [f"| {kind} | target | measured | met |", "|---|---|---:|---|",
                  f"| new shape: median first call, `contract` / `opt_einsum.contract` | <= 1 | "
                  f"{shape['contract'] / shape['opt_einsum']:.2f}x | "
                  f"{_verdict(shape['contract'] <= shape['opt_einsum'])} |",
                  f"| new string, 3-4 operands: median first call of `contract` | <= {GOAL_NEW_STRING_MS} ms | "
                  f"{string['contract']:.3f} ms | {_verdict(string['contract'] <= GOAL_NEW_STRING_MS)} |", ""]
        lines += ['<details markdown="1"><summary>per string</summary>', "",
                  "| subscripts | operands | " + " | ".join(f"new shape: {TITLES[n]}" for n in names) + " | "
                  + " | ".join(f"new string: {TITLES[n]}" for n in names) + " |",
                  "|---|---:|" + "---:|" * (2 * len(names))]
        for r in rows:
            lines.append(f"| `{r['subscripts']}` | {r['operands']} | "
                         + " | ".join(f"{r['new_shape_ms'][n]:.3f}" for n in names) + " | "
                         + " | ".join(f"{r['new_string_ms'][n]:.3f}" for n in names) + " |")
        lines += ["", "</details>", ""]
    if results.get("numpy", {}).get("large"):
        large = results["numpy"]["large"]
        lines += ["### Large work (numpy)", "",
                  "3-4 operand calls of about "
                  f"{large[0]['flops']:.1e} flops (opt_einsum's count): the first call of a new string (caches and "
                  "scratch buffers cleared) and of a new shape of a known string (caches and scratch buffers "
                  "cleared, the string called once at extents one lowercase letter smaller by k, whose buffers "
                  "stay as a loop's would; median of the repetitions), "
                  "against the same call warm and `contract_expression`'s warm call (interleaved medians). "
                  f"Before each the process touched {results['numpy'].get('settled_bytes', 0) / 2**30:.0f} GB "
                  "of memory and freed it (`settle_memory`: on a VM whose host backs memory lazily, "
                  "untouched pages made every call up to 3x slower).", "",
                  "| subscripts | flops | first, new string (ms) | first, new shape (ms) | warm (ms) | "
                  "expression warm (ms) | new string / warm | new shape / warm | warm / expression |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in large:
            lines.append(f"| `{r['subscripts']}` | {r['flops']:.1e} | {r['first_new_string_ms']:.2f} | "
                         f"{r['first_new_shape_ms']:.2f} | {r['warm_ms']:.2f} | {r['expression_ms']:.2f} | "
                         f"{r['first_new_string_ms'] / r['warm_ms']:.2f}x | "
                         f"{r['first_new_shape_ms'] / r['warm_ms']:.2f}x | {r['warm_ms'] / r['expression_ms']:.2f}x |")
        worst_string = max(r["first_new_string_ms"] / r["warm_ms"] for r in large)
        worst_shape = max(r["first_new_shape_ms"] / r["warm_ms"] for r in large)
        worst_warm = max(r["warm_ms"] / r["expression_ms"] for r in large)
        lines += ["", "| goal (numpy, every large call) | target | worst | met |", "|---|---|---:|---|",
                  f"| first call of a new string / its own warm call | <= {GOAL_LARGE_FIRST} | "
                  f"{worst_string:.2f}x | {_verdict(worst_string <= GOAL_LARGE_FIRST)} |",
                  f"| first call of a new shape / its own warm call | <= {GOAL_LARGE_FIRST} | "
                  f"{worst_shape:.2f}x | {_verdict(worst_shape <= GOAL_LARGE_FIRST)} |",
                  f"| warm call / `contract_expression`'s warm call | <= {GOAL_LARGE_WARM} | {worst_warm:.2f}x | "
                  f"{_verdict(worst_warm <= GOAL_LARGE_WARM)} |", ""]
    if "jax" in results and results["jax"]["rows"]:
        rows = results["jax"]["rows"]
        ratio = [r["contract_ms"] / r["einsum_ms"] for r in rows]
        lines += [f"### JAX: the cold trace of a `jit` (jax {results['jax'].get('jax', '?')})", "",
                  "The first call of `jax.jit(lambda *a: contract(s, *a))` (trace, lowering, XLA compile, and "
                  "`contract`'s planning with its caches cleared and the string renamed) against "
                  "`jax.jit(lambda *a: jnp.einsum(expanded, *a))`, float32, small sizes; JAX's path is one "
                  "`jnp.einsum` either way.", "",
                  "| | `contract` (ms) | `jnp.einsum` (ms) | ratio |", "|---|---:|---:|---:|",
                  f"| median over {len(rows)} strings | {median(r['contract_ms'] for r in rows):.1f} | "
                  f"{median(r['einsum_ms'] for r in rows):.1f} | {median(ratio):.2f}x |",
                  f"| worst ratio | | | {max(ratio):.2f}x |", "",
                  '<details markdown="1"><summary>per string</summary>', "",
                  "| subscripts | operands | `contract` (ms) | `jnp.einsum` (ms) |", "|---|---:|---:|---:|"]
        lines += [f"| `{r['subscripts']}` | {r['operands']} | {r['contract_ms']:.1f} | {r['einsum_ms']:.1f} |"
                  for r in rows]
        lines += ["", "</details>", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 strings, 3 repetitions; prints only unless --write")
    parser.add_argument("--write", action="store_true", help="with --quick: write the page, marked a smoke run")
    parser.add_argument("--report-only", action="store_true", help="re-render the page from the json")
    parser.add_argument("--parts", default="numpy,torch,jax")
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="torch.set_num_threads in the torch part (default: torch's own choice)")
    parser.add_argument("--part", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part:
        part(args.part, args.quick, Path(args.out), args.torch_threads)
        return 0
    if args.report_only:
        results = json.loads(RESULTS.read_text(encoding="utf-8"))
        write_section(SECTION, render(results, results.get("smoke", False), results.get("wall_s")))
        return 0
    start = time.perf_counter()
    results = measure(args.parts.split(","), args.quick, args.torch_threads)
    results["date"] = time.strftime("%Y-%m-%d %H:%M")
    results["wall_s"] = time.perf_counter() - start
    results["smoke"] = args.quick
    text = render(results, args.quick, results["wall_s"])
    print(text)
    if not args.quick or args.write:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1, default=list), encoding="utf-8")
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
