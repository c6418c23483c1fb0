"""Warm, interleaved, timeit-style timing.

Each contender is called once to warm caches (plans, einx's parser, BLAS threads), then timed in
batches of ``number`` calls sized so one batch lasts about ``batch_seconds``; the contenders take
turns batch by batch (so slow drift of a shared machine hits them alike) and the per-call median
over ``repeats`` batches is reported.  Ratios are computed from medians of the same run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence


def calibrate(func: Callable[[], object], batch_seconds: float) -> tuple[int, float]:
    """(number of calls per batch, seconds of one warm call)."""
    func()  # warm-up
    start = time.perf_counter()
    func()
    one = max(time.perf_counter() - start, 1e-7)
    number = 1
    while one * number < batch_seconds and number < 1_000_000:
        number *= 2
    if number > 1:  # re-measure with a small batch: single-call timing is coarse for tiny work
        start = time.perf_counter()
        for _ in range(min(number, 64)):
            func()
        one = (time.perf_counter() - start) / min(number, 64)
        number = max(1, int(batch_seconds / max(one, 1e-9)))
    return number, one


def interleaved_medians(
    funcs: dict[str, Callable[[], object]], repeats: int, batch_seconds: float
) -> dict[str, float]:
    """Median seconds per call for each function, batches interleaved across functions."""
    numbers = {name: calibrate(func, batch_seconds)[0] for name, func in funcs.items()}
    samples: dict[str, list[float]] = {name: [] for name in funcs}
    perf = time.perf_counter
    for _ in range(repeats):
        for name, func in funcs.items():
            number = numbers[name]
            loop: Sequence[None] = [None] * number
            start = perf()
            for _ in loop:
                func()
            samples[name].append((perf() - start) / number)
    return {name: statistics.median(values) for name, values in samples.items()}


def best_seconds(func: Callable[[], object], batch_seconds: float = 0.02, repeats: int = 5,
                 max_number: int | None = None) -> float:
    """Best (smallest) per-call time over ``repeats`` batches of about ``batch_seconds`` (at
    most ``max_number`` calls a batch): the model-fitting scripts' measure, where the minimum
    is the least disturbed sample.  The library's calibration measures the same way; this is
    its function with the scripts' longer default batches."""
    from contractions.calibrate import best_seconds as measured

    return measured(func, batch_seconds, repeats, max_number if max_number is not None else 10**9)


def seconds_within_cap(func: Callable[[], object], cap: float) -> float | None:
    """Seconds of one call of ``func`` run in a forked child, or None if it ran past ``cap``.

    For a contender whose first call may take a minute (np.einsum's greedy path falling back to
    one nested loop): the child is killed at the cap instead of being waited for, and the parent
    process never runs the call.  The child sees the parent's arrays copy-on-write.
    """
    import os
    import signal

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: time one call, report it, exit without running any cleanup
        code = 1
        try:
            os.close(read_end)
            start = time.perf_counter()
            func()
            os.write(write_end, repr(time.perf_counter() - start).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    deadline = time.perf_counter() + cap
    status = None
    while time.perf_counter() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.005)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_end)
        return None
    message = os.read(read_end, 64).decode()
    os.close(read_end)
    if status != 0 or not message:
        raise RuntimeError("the capped call raised in the child process")
    return float(message)
