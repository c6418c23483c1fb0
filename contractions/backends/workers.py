"""numpy's stacked products split over the cores: the schedule's ``Step.workers``.

numpy runs a stacked ``matmul`` as one product after another, each handed to BLAS, which
threads a product only from about half a million multiply-adds (OpenBLAS); a stack of smaller
products runs on one core however many the machine has.  `split_matmul` cuts the stack's
leading axis into ``workers`` parts and runs them at once, one on the calling thread and the
rest on a small pool (numpy releases the GIL inside ``matmul``).  Each part makes the same
BLAS calls the whole would, on the same matrices, into the same places of one result, so the
result is the same to the bit.  The schedule decides where it pays (dev/decisions.md 63).

One split runs at a time in a process: a call that finds the pool busy (another thread's
split) runs its product whole, so threads calling ``contract`` never queue on each other, and
a forked child starts with no pool (threads do not survive ``fork``).

>>> import numpy as np
>>> x, y = np.ones((6, 4, 3)), np.ones((6, 3, 5))
>>> out = split_matmul(x, y, 2, np.empty((6, 4, 5)))
>>> bool(np.array_equal(out, x @ y))
True
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["split_matmul"]

_BUSY = threading.Lock()          # held while a split runs: the next one runs whole
_POOL: ThreadPoolExecutor | None = None
_POOL_WORKERS = 0


def _pool(helpers: int) -> ThreadPoolExecutor:
    """The pool with at least ``helpers`` threads (made on first use, grown if asked)."""
    global _POOL, _POOL_WORKERS
    if _POOL is None or _POOL_WORKERS < helpers:
        old = _POOL
        _POOL = ThreadPoolExecutor(max_workers=helpers, thread_name_prefix="contractions-split")
        _POOL_WORKERS = helpers
        if old is not None:
            old.shutdown(wait=False)
    return _POOL


def _forget_pool() -> None:
    # a forked child holds the parent's pool object but none of its threads
    global _POOL, _POOL_WORKERS, _BUSY
    _POOL, _POOL_WORKERS, _BUSY = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def split_matmul(x: Any, y: Any, workers: int, out: Any) -> Any:
    """``np.matmul(x, y, out=out)`` with the stack's leading axis cut into ``workers`` parts
    run at once; whole where the stack has fewer entries, for object arrays (no BLAS, the GIL
    held) or while another split runs.  Returns ``out``."""
    lead = out.shape[0] if out.ndim > 2 else 1
    parts = min(workers, lead)
    if parts < 2 or x.dtype.hasobject or y.dtype.hasobject or not _BUSY.acquire(blocking=False):
        np.matmul(x, y, out=out)
        return out
    try:
        def cut(a: Any, lo: int, hi: int) -> Any:
            # a factor with fewer stack axes, or 1 on this one, broadcasts whole to every part
            return a[lo:hi] if a.ndim == out.ndim and a.shape[0] != 1 else a

        bounds = [lead * k // parts for k in range(parts + 1)]
        pending: list[Future[Any]] = []
        try:
            pool = _pool(parts - 1)
            for lo, hi in zip(bounds[:-2], bounds[1:-1]):
                try:
                    pending.append(pool.submit(np.matmul, cut(x, lo, hi), cut(y, lo, hi), out=out[lo:hi]))
                except RuntimeError:   # the interpreter is shutting its pools down: run it here
                    np.matmul(cut(x, lo, hi), cut(y, lo, hi), out=out[lo:hi])
            np.matmul(cut(x, bounds[-2], lead), cut(y, bounds[-2], lead), out=out[bounds[-2]:])
        finally:
            for part in pending:   # every part done before ``out`` is handed back (or raised)
                part.result()
    finally:
        _BUSY.release()
    return out
