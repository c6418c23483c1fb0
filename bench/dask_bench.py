"""The dask backend against numpy `contract` on the same in-memory data, and dask's overhead.

Two contractions whose operands are about 4x a memory budget (128 MB by default), small
enough that numpy still runs them in RAM:

* ``WCa,Caib,WCi->WCb`` (a tensor-train site; the sample axis ``W`` is kept): dask splits
  ``W`` into chunks, every block runs the numpy schedule, the result is written chunk by chunk
  into a preallocated array (``dask.array.store``; the out-of-core pattern);
* ``WCiab,WCjab->Cij`` (a Gram matrix over samples; ``W`` is contracted): the per-chunk
  partial products are summed by dask's tree reduction, the result is tiny.

For each: the median time (interleaved warm batches, ``bench/timing.py``) of numpy `contract`,
of `contract` on dask arrays wrapping the same numpy arrays (threaded scheduler, 2 threads),
and of ``dask.array.einsum`` on the hand-expanded string (dask's own: ``np.einsum`` per
block); and the peak memory each allocates during one call beyond its inputs (``tracemalloc``,
which sees numpy's buffers; the preallocated ``store`` target is not counted, its size is
listed).  Then the per-task overhead: ``Wa,ab->Wb`` on one-row chunks, time per task of the
graph, synchronous and threaded.

    python bench/dask_bench.py                # ~2-4 min on 2 cores; prints a markdown table
    python bench/dask_bench.py --budget-mb 32 # smaller and faster
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dask
import dask.array as da
from timing import interleaved_medians

from contractions import contract

MB = 2**20


def peak_bytes(func: Callable[[], object]) -> int:
    """Peak bytes allocated (numpy buffers included) while ``func`` runs, beyond its start."""
    tracemalloc.start()
    try:
        func()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def tt_site(budget: int, rng: np.random.Generator):
    """``WCa,Caib,WCi->WCb`` with x and z together 4x ``budget``."""
    c, a, i, b = 2, 4, 4, 4
    rows = 4 * budget // ((c * a + c * i) * 8)
    x = rng.standard_normal((rows, c, a))
    cores = rng.standard_normal((c, a, i, b))
    z = rng.standard_normal((rows, c, i))
    return "WCa,Caib,WCi->WCb", "wca,caib,wci->wcb", (x, cores, z), {}, (True, False, True)


def gram(budget: int, rng: np.random.Generator):
    """``WCiab,WCjab->Cij`` (len_W=1) with both operands together 4x ``budget``."""
    c, i, a, b = 2, 8, 4, 4
    rows = 4 * budget // (2 * c * i * a * b * 8)
    x = rng.standard_normal((rows, c, i, a, b))
    y = rng.standard_normal((rows, c, i, a, b))
    return "WCiab,WCjab->Cij", "wciab,wcjab->cij", (x, y), {"len_W": 1}, (True, True)


def case_row(name: str, build, budget: int, chunk_bytes: int, repeats: int) -> dict:
    subscripts, einsum, arrays, lens, chunked = build(budget, np.random.default_rng(0))
    operand_bytes = sum(a.nbytes for a, c in zip(arrays, chunked) if c)
    row_bytes = sum(a[0].nbytes for a, c in zip(arrays, chunked) if c)
    rows = max(1, chunk_bytes // row_bytes)
    lazy = [da.from_array(a, chunks=(rows,) + a.shape[1:]) if c else a for a, c in zip(arrays, chunked)]
    lazy_einsum = [x if isinstance(x, da.Array) else da.from_array(x) for x in lazy]
    out = contract(subscripts, *lazy, **lens)
    blocks = lazy[0].numblocks[0]   # one block per W chunk (every other axis is one chunk)
    big_output = out.ndim and out.shape[0] == arrays[0].shape[0]
    target = np.empty(out.shape, out.dtype) if big_output else None

    def run_numpy():
        return contract(subscripts, *arrays, **lens)

    def run_dask():
        lazy_out = contract(subscripts, *lazy, **lens)
        if target is not None:
            da.store(lazy_out, target, lock=False, scheduler="threads", num_workers=2)
            return target
        return lazy_out.compute(scheduler="threads", num_workers=2)

    def run_dask_einsum():
        lazy_out = da.einsum(einsum, *lazy_einsum)
        if target is not None:
            da.store(lazy_out, target, lock=False, scheduler="threads", num_workers=2)
            return target
        return lazy_out.compute(scheduler="threads", num_workers=2)

    want = run_numpy()
    np.testing.assert_allclose(run_dask(), want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(run_dask_einsum(), want, rtol=1e-9, atol=1e-9)
    times = interleaved_medians({"numpy": run_numpy, "dask": run_dask, "dask.einsum": run_dask_einsum},
                                repeats=repeats, batch_seconds=0.2)
    memory = {k: peak_bytes(f) for k, f in
              (("numpy", run_numpy), ("dask", run_dask), ("dask.einsum", run_dask_einsum))}
    return dict(name=name, subscripts=subscripts, operand_mb=operand_bytes / MB, budget_mb=budget / MB,
                chunk_mb=rows * row_bytes / MB, blocks=blocks, output_mb=want.nbytes / MB,
                stored=target is not None, times=times, memory={k: v / MB for k, v in memory.items()})


def overhead_row(n_rows: int, repeats: int) -> dict:
    rng = np.random.default_rng(1)
    x0, y = rng.standard_normal((n_rows, 4)), rng.standard_normal((4, 4))
    x = da.from_array(x0, chunks=(1, 4))
    out = contract("Wa,ab->Wb", x, y)
    tasks = len(dict(out.__dask_graph__()))
    np.testing.assert_allclose(out.compute(scheduler="sync"), x0 @ y)
    times = interleaved_medians({
        "sync": lambda: contract("Wa,ab->Wb", x, y).compute(scheduler="sync"),
        "threads": lambda: contract("Wa,ab->Wb", x, y).compute(scheduler="threads", num_workers=2),
        "numpy": lambda: contract("Wa,ab->Wb", x0, y),
    }, repeats=repeats, batch_seconds=0.2)
    return dict(tasks=tasks, blocks=n_rows, times=times)


def report(cases: list[dict], overhead: dict) -> str:
    lines = [
        "| contraction | operands | budget | chunk | blocks | numpy | dask `contract` | dask / numpy "
        "| `dask.array.einsum` | einsum / `contract` | peak MB numpy | peak MB dask | peak MB dask.einsum |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cases:
        t, m = c["times"], c["memory"]
        lines.append(
            f"| `{c['subscripts']}` | {c['operand_mb']:.0f} MB | {c['budget_mb']:.0f} MB | "
            f"{c['chunk_mb']:.1f} MB | {c['blocks']} | {t['numpy'] * 1e3:.0f} ms | {t['dask'] * 1e3:.0f} ms | "
            f"{t['dask'] / t['numpy']:.2f}x | {t['dask.einsum'] * 1e3:.0f} ms | "
            f"{t['dask.einsum'] / t['dask']:.2f}x | {m['numpy']:.0f} | {m['dask']:.0f} | {m['dask.einsum']:.0f} |")
    for c in cases:
        if c["stored"]:
            lines.append(f"\n`{c['subscripts']}`: the {c['output_mb']:.0f} MB result is stored chunk by chunk "
                         "into a preallocated array (not counted in dask's peak; numpy's peak includes it).")
    t = overhead["times"]
    lines += [
        "",
        f"Per-task overhead: `Wa,ab->Wb` on {overhead['blocks']} one-row chunks, a graph of "
        f"{overhead['tasks']} tasks.",
        "",
        "| scheduler | time | per task | per block | numpy `contract`, whole array |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in ("sync", "threads"):
        lines.append(f"| {name} | {t[name] * 1e3:.1f} ms | {t[name] / overhead['tasks'] * 1e6:.0f} us | "
                     f"{t[name] / overhead['blocks'] * 1e6:.0f} us | {t['numpy'] * 1e6:.1f} us |")
    lines.append("")
    lines.append(f"Environment: Python {platform.python_version()}, numpy {np.__version__}, dask "
                 f"{dask.__version__}, {os.cpu_count()} cores ({platform.machine()}), threaded scheduler "
                 "with 2 workers; medians of interleaved warm runs.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-mb", type=int, default=128)
    parser.add_argument("--chunk-mb", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--overhead-rows", type=int, default=2048)
    args = parser.parse_args()
    budget, chunk = args.budget_mb * MB, int(args.chunk_mb * MB)
    cases = [case_row("tt", tt_site, budget, chunk, args.repeats),
             case_row("gram", gram, budget, chunk, args.repeats)]
    print(report(cases, overhead_row(args.overhead_rows, args.repeats)))


if __name__ == "__main__":
    main()
