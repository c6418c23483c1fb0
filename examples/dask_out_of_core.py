"""Out-of-core tensor-train probe evaluation on a dask cluster with a memory limit.

An ensemble ``C`` of tensor trains is evaluated on a huge stack ``W`` of rank-one probes, one
site at a time (``examples/tensor_train.py``'s ``tt_probe_per_member``)::

    state = contract('WCa,Caib,WCi->WCb', state, cores[k], probes[k])

The probes are dask arrays generated chunk by chunk (``dask.array.random``), chunked along the
sample axis ``W``; the cores are small numpy arrays, lifted to dask by ``contract``.  The whole
sweep is one lazy graph: every block runs the numpy schedule on one ``W`` chunk, the chunks
never meet, so a worker holds a few chunks at a time while the probes together are several
times the cluster's memory.  A window of rows is checked against ``np.einsum`` on the same
probe rows, and the workers' peak memory is printed.

    python -m examples.dask_out_of_core           # small, seconds (CI): threads, no limit
    python -m examples.dask_out_of_core --full    # 3.2 GB of probes, workers limited to 400 MB

The full run (2 worker processes, 1 thread each, 2 shared cores): see docs/scaling.md for
its numbers.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script (python examples/NAME.py): import from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contractions import contract

MB = 2**20


@dataclass(frozen=True)
class Size:
    samples: int          # W: the probe stack (one axis here)
    members: int          # C: the ensemble of TTs (one axis here)
    sites: int
    phys: int             # n_k, every site
    rank: int             # inner TT ranks (the first and last are 1)
    chunk: int            # probes per chunk along W
    workers: int
    memory_limit: int | None   # bytes per worker; None: no limit
    processes: bool


SMALL = Size(samples=4096, members=2, sites=3, phys=4, rank=3, chunk=512, workers=2,
             memory_limit=None, processes=False)
FULL = Size(samples=2**21, members=2, sites=6, phys=16, rank=8, chunk=2**14, workers=2,
            memory_limit=400 * MB, processes=True)


@dataclass(frozen=True)
class Report:
    operand_bytes: int     # all probes together
    budget_bytes: int | None   # workers x memory limit
    chunk_bytes: int       # one probe chunk
    tasks: int
    seconds: float
    sampled_rows: int
    max_error: float       # relative, on the sampled rows
    peak_bytes: int        # the largest peak RSS over the workers' processes
    baseline_bytes: int    # the largest RSS over the workers' processes before computing


def ranks(size: Size) -> list[int]:
    return [1] + [size.rank] * (size.sites - 1) + [1]


def make_cores(size: Size, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    r = ranks(size)
    # Scaled so the state stays O(1) along the sweep.
    return [rng.standard_normal((size.members, r[k], size.phys, r[k + 1])) / np.sqrt(r[k] * size.phys)
            for k in range(size.sites)]


def make_probes(size: Size, seed: int = 1):
    import dask.array as da

    rng = da.random.default_rng(seed)
    return [rng.standard_normal((size.samples, size.members, size.phys),
                                chunks=(size.chunk, size.members, size.phys))
            for _ in range(size.sites)]


def sweep(cores, probes, start):
    """``<T_c, z_w1 (x) ... (x) z_wd>`` for every probe ``w`` and TT ``c``: ``W + C``."""
    state = start
    for core, z in zip(cores, probes):
        state = contract("WCa,Caib,WCi->WCb", state, core, z)
    return state[..., 0]


def reference(cores, probe_rows):
    """The same sweep by ``np.einsum`` on a hand-expanded string (W and C one axis each)."""
    state = np.ones(probe_rows[0].shape[:2] + (1,))
    for core, z in zip(cores, probe_rows):
        state = np.einsum("wca,caib,wci->wcb", state, core, z)
    return state[..., 0]


def _peak_rss() -> int:
    try:
        import resource
    except ImportError:  # pragma: no cover - not Unix: the current RSS is the best we have
        import psutil
        return int(psutil.Process().memory_info().rss)
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux


def _rss() -> int:
    import psutil
    return int(psutil.Process().memory_info().rss)


def run(size: Size, seed: int = 0) -> Report:
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    cores = make_cores(size, seed)
    probes = make_probes(size, seed + 1)
    start = da.ones((size.samples, size.members, 1), chunks=(size.chunk, size.members, 1))
    result = sweep(cores, probes, start)            # lazy: nothing has run yet
    rows = min(256, size.samples)
    first = int(np.random.default_rng(seed).integers(0, size.samples - rows + 1))
    window = slice(first, first + rows)
    sampled = [z[window] for z in probes]           # computed with the result: same chunks

    cluster = LocalCluster(n_workers=size.workers, threads_per_worker=1, processes=size.processes,
                           memory_limit=size.memory_limit or 0, dashboard_address=None,
                           silence_logs=logging.ERROR if size.memory_limit is None else logging.WARNING)
    with cluster, Client(cluster) as client:
        baseline = max(client.run(_rss).values())
        begin = time.perf_counter()
        values, *probe_rows = dask.compute(result, *sampled)
        seconds = time.perf_counter() - begin
        peak = max(client.run(_peak_rss).values())

    want = reference(cores, probe_rows)
    error = float(np.abs(values[window] - want).max() / max(np.abs(want).max(), 1e-300))
    itemsize = np.dtype(np.float64).itemsize
    return Report(
        operand_bytes=size.sites * size.samples * size.members * size.phys * itemsize,
        budget_bytes=size.workers * size.memory_limit if size.memory_limit else None,
        chunk_bytes=size.chunk * size.members * size.phys * itemsize,
        tasks=len(result.__dask_graph__()), seconds=seconds, sampled_rows=rows,
        max_error=error, peak_bytes=peak, baseline_bytes=baseline)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true",
                        help="the out-of-core size (3.2 GB of probes on 2 x 400 MB workers)")
    args = parser.parse_args(argv)
    size = FULL if args.full else SMALL
    report = run(size)
    budget = (f"{report.budget_bytes / MB:.0f} MB ({size.workers} workers x "
              f"{size.memory_limit / MB:.0f} MB)" if report.budget_bytes and size.memory_limit
              else "none (small run: threads, no memory limit)")
    ratio = f" = {report.operand_bytes / report.budget_bytes:.1f}x the budget" if report.budget_bytes else ""
    where = "per worker process" if size.processes else "of this process (threaded workers)"
    print(f"probes: {size.sites} sites x W={size.samples} x C={size.members} x n={size.phys}: "
          f"{report.operand_bytes / MB:.0f} MB{ratio}; chunks of {report.chunk_bytes / MB:.2f} MB")
    print(f"memory budget: {budget}")
    print(f"graph: {report.tasks} tasks, computed in {report.seconds:.2f} s")
    print(f"peak RSS {where}: {report.peak_bytes / MB:.0f} MB (before computing: "
          f"{report.baseline_bytes / MB:.0f} MB)")
    ok = report.max_error < 1e-10
    print(f"rows {report.sampled_rows} sampled against np.einsum: max relative error "
          f"{report.max_error:.1e} {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
