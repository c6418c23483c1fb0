"""Peak extra memory of one call, from tracemalloc.

numpy reports every array-data allocation to tracemalloc (its default allocator calls
``PyTraceMalloc_Track``), so the traced peak during a call covers the intermediates, the gathered
copies and the result.  BLAS's own work buffers (OpenBLAS allocates them once, outside numpy)
are not seen.  ``peak extra`` = traced peak during the call minus the bytes of the returned
result: what the call needed beyond the array it hands back (0 = it wrote the result and
nothing else).  bench/run.py measures it in an untimed call: one more warm call after the timed
ones, or for a contender slower than 0.1 s per call its first call (the one that sorts fast from
slow, not timed), which saves a call of seconds.

    >>> import numpy as np
    >>> a = np.ones((256, 256))
    >>> extra, result = peak_extra_bytes(lambda: a @ a)
    >>> result == a.nbytes and 0 <= extra < a.nbytes // 8
    True
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np


def traced_call(func: Callable[[], object]) -> tuple[object, int]:
    """(the result of one call of ``func``, its peak extra bytes as defined above)."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = func()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, peak - (int(result.nbytes) if isinstance(result, np.ndarray) else 0)


def peak_extra_bytes(func: Callable[[], object]) -> tuple[int, int]:
    """(traced peak bytes during one call minus the result's bytes, the result's bytes)."""
    result, extra = traced_call(func)
    return extra, int(result.nbytes) if isinstance(result, np.ndarray) else 0
