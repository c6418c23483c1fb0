"""Scratch buffers for numpy runs, reused from one call to the next.

Large gathers and intermediates made fresh on every call can pay a page fault per page when
``malloc`` hands back memory just returned to the kernel (dev/decisions.md 40).  This module
keeps such buffers per thread and hands one out again only when CPython's reference count
says nothing (no view, no other thread) refers to it; the arrays a call returns are always
fresh.  The buffers of all threads together are bounded in bytes (`scratch_limit`, default
`DEFAULT_SCRATCH_BYTES`; past it a thread releases its own free buffers, least recently used
first); `clear_scratch` releases the calling thread's.

>>> import numpy as np
>>> a = take_scratch((2, 3), np.dtype(np.float64))
>>> a.shape, a.dtype.name
((2, 3), 'float64')
>>> b = take_scratch((2, 3), np.dtype(np.float64))   # `a` is alive: another buffer
>>> np.shares_memory(a, b)
False
>>> address = a.ctypes.data; del a
>>> take_scratch((3, 2), np.dtype(np.float64)).ctypes.data == address   # same bytes, reused
True
"""

from __future__ import annotations

import math
import sys
import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

__all__ = ["DEFAULT_SCRATCH_BYTES", "ScratchInfo", "clear_scratch", "scratch_info",
           "scratch_limit", "take_scratch"]

DEFAULT_SCRATCH_BYTES = 256 * 2**20
"""Bytes of scratch buffers the process keeps between calls, all threads together (a buffer
larger than half of it is never kept)."""

_limit = DEFAULT_SCRATCH_BYTES
_local = threading.local()
_lock = threading.Lock()
_held = 0   # bytes every thread's pool holds, under `_lock`


def _count(delta: int) -> None:
    global _held
    with _lock:
        _held += delta


class ScratchInfo(NamedTuple):
    """What the calling thread's scratch pool holds."""

    buffers: int
    bytes: int           # the calling thread's
    process_bytes: int   # every thread's together
    max_bytes: int       # the bound on process_bytes
    reused: int      # buffers handed out again
    allocated: int   # buffers allocated (kept or not)


class _Pool:
    __slots__ = ("buffers", "bytes", "reused", "allocated")

    def __init__(self) -> None:
        # nbytes -> buffers of that size (uint8, 1-d); insertion order is recency of use.
        self.buffers: OrderedDict[int, list[np.ndarray]] = OrderedDict()
        self.bytes = 0
        self.reused = 0
        self.allocated = 0

    def __del__(self) -> None:
        # a finished thread's pool goes with it: its bytes no longer count (at interpreter
        # exit the module may be torn down first; nothing is left to count then)
        try:
            _count(-self.bytes)
        except Exception:  # noqa: BLE001
            pass


def _pool() -> _Pool:
    pool: _Pool | None = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = _Pool()
    return pool


def _refs(buffer: np.ndarray) -> int:
    return sys.getrefcount(buffer)


# The count `_refs(buffers[k])` shows for a pooled buffer nothing else holds (the pool's
# list, the argument), measured through the same call shape every check uses, so that an
# interpreter counting differently is measured rather than assumed.
_FREE_REFS = (lambda buffers: _refs(buffers[0]))([np.empty(1, np.uint8)])
# Free-threaded CPython defers and splits reference counts: do not trust them there.
_ENABLED = getattr(sys, "_is_gil_enabled", lambda: True)()


def _first_free(buffers: list[np.ndarray]) -> np.ndarray | None:
    for k in range(len(buffers)):
        if _refs(buffers[k]) <= _FREE_REFS:
            return buffers[k]
    return None


def take_scratch(shape: tuple[int, ...], dtype: np.dtype, capacity: int | None = None) -> np.ndarray:
    """An uninitialised C-ordered array of ``shape`` and ``dtype``, from the calling thread's
    pool when a buffer of ``capacity`` elements (default: just ``shape``'s) is free there:
    the array is a prefix of it.

    The array is the caller's while it (or any view of it) is referenced; afterwards the pool
    may hand its memory out again.  Never return one to a user: return fresh arrays.  A
    buffer made here stays in the pool after its use, so a caller takes one only where its
    memory accounting says that holding it costs nothing (`contractions.schedule.scratch_sites`).
    """
    used = math.prod(shape) * dtype.itemsize
    nbytes = max(used, (capacity or 0) * dtype.itemsize)
    pool = _pool()
    buffers = pool.buffers.get(nbytes)
    if buffers is not None:
        buffer = _first_free(buffers)
        if buffer is not None:
            pool.buffers.move_to_end(nbytes)
            pool.reused += 1
            return buffer[:used].view(dtype).reshape(shape)
    pool.allocated += 1
    buffer = np.empty(nbytes, np.uint8)
    if _ENABLED and _make_room(pool, nbytes):
        if buffers is None:
            buffers = pool.buffers[nbytes] = []
        buffers.append(buffer)
        pool.bytes += nbytes
    return buffer[:used].view(dtype).reshape(shape)


def _make_room(pool: _Pool, nbytes: int) -> bool:
    # Count `nbytes` more against the process's bound if they fit, after releasing this
    # thread's free buffers as far as needed (and all past a lowered bound).
    global _held
    fits = 2 * nbytes <= _limit
    with _lock:
        excess = _held + (nbytes if fits else 0) - _limit
    if excess > 0:
        _release_free(pool, pool.bytes - excess)
    if not fits:
        return False
    with _lock:
        if _held + nbytes > _limit:
            return False
        _held += nbytes
    return True


def _release_free(pool: _Pool, target: int) -> bool:
    # Drop free buffers, least recently used sizes first, until the pool holds at most
    # `target` bytes; whether it does.
    for size in list(pool.buffers):
        if pool.bytes <= target:
            return True
        buffers = pool.buffers[size]
        for k in reversed(range(len(buffers))):
            if pool.bytes > target and _refs(buffers[k]) <= _FREE_REFS:
                del buffers[k]
                pool.bytes -= size
                _count(-size)
        if not buffers:
            del pool.buffers[size]
    return pool.bytes <= target


def scratch_limit(max_bytes: int | None = None) -> int:
    """The bytes of scratch buffers the process may keep between calls, all threads
    together; with ``max_bytes``, set it (0 keeps none: every copy and intermediate is a fresh
    array) and return the old value.  The calling thread's buffers past a lower limit are
    released at once, another thread's when it next allocates one.

    >>> old = scratch_limit(0); scratch_limit(old)
    0
    """
    global _limit
    old = _limit
    if max_bytes is not None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
            raise ValueError(f"scratch_limit takes a byte count >= 0, got {max_bytes!r}")
        _limit = max_bytes
        pool = _pool()
        with _lock:
            excess = _held - _limit
        if excess > 0:
            _release_free(pool, pool.bytes - excess)
    return old


def clear_scratch() -> None:
    """Release the calling thread's scratch buffers (those still in use stay with their user)."""
    pool = _pool()
    pool.buffers.clear()
    _count(-pool.bytes)
    pool.bytes = 0


def scratch_info() -> ScratchInfo:
    """What the calling thread's pool holds and how often it was reused.

    >>> clear_scratch(); scratch_info().bytes
    0
    """
    pool = _pool()
    return ScratchInfo(sum(len(b) for b in pool.buffers.values()), pool.bytes, _held, _limit,
                       pool.reused, pool.allocated)
