"""``contractions calibrate``: measure this machine's prices and write them as a profile.

Each measurement times small numpy programs (the best of a few short batches: a shared machine
only ever adds time) and fits the prices of `contractions.model.profile.Profile` that explain
them, by least squares on relative error, as the development machine's prices were fitted:

* BLAS products: stacks of ``calls`` (m x k) @ (k x n) products, in cache, into ``out=``:
  ``ns_per_matmul_call``, ``ns_per_mac``, ``ns_per_matrix_element`` (and the fixed cost of one
  ``np.matmul`` call, fitted apart so it does not leak into them); the same stacks with a
  column-major right factor: ``ns_per_batched_right_transpose_element``;
* large products, split over the BLAS threads in effect: ``thread_gain`` (at most 1: a thread
  adds at most a core);
* stacks of products too small for BLAS to thread, whole against cut over the cores
  (`contractions.backends.workers.split_matmul`): ``split_gain`` and ``ns_per_split``
  (`split_prices`; a machine where the cut does not pay gets a gain of 0, so no stack is cut);
* writes into fresh pages against the same writes into warm ones: ``ns_per_fresh_element``;
  gathers of a transposed view, plus that first touch: ``ns_per_copied_element`` (a copied
  element's price holds its fresh page, as the model assumes);
* reading an operand past the caches (arrays of four last-level caches; full run only, where
  that stays within a GiB): ``ns_per_streamed_element``, and strided walks;
* numpy's einsum loop, contiguous and strided: ``ns_per_einsum_mac``, ``ns_per_strided_einsum_mac``;
* compiled programs of one to four steps on tiny operands: ``ns_per_step`` and, with
  ``contract``'s cached lookup (a tiny call against its compiled program), ``ns_per_call``;
* the cache sizes and BLAS thread count, read from the OS (`contractions.model.host`).

A price whose fit comes out negative or not finite (a noisy machine) keeps the built-in
default, and says so.  The rest keep the built-in defaults: measured once, on the development
machine, by the scripts in ``bench/`` named beside them in the profile module.

>>> profile = calibrate(TINY, log=lambda line: None)
>>> profile.ns_per_mac > 0 and profile.machine.threads >= 1
True
"""

from __future__ import annotations

import datetime
import functools
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TextIO

import numpy as np

from .model.host import this_machine
from .model.numpy_prices import NumpyCostModel
from .model.profile import Profile, builtin_profile

__all__ = ["FULL", "QUICK", "TINY", "Budget", "Progress", "best_seconds", "calibrate", "fit_relative",
           "fit_torch_prices"]

#: Every array of a stack together (float64 elements): within two L2 caches of most machines,
#: so the products run from cache (past it the memory prices take over).
IN_CACHE_ELEMENTS = 1 << 19
#: OpenBLAS splits a product over its threads from 2 * this many multiply-adds: the in-cache
#: fit stays below it, single-threaded (the model credits threads only later:
#: `Profile.threaded_product_macs`).
OPENBLAS_SPLIT_MACS = 1 << 18
MAX_DIM = 400
#: The largest array the reads past the caches allocate (1 GiB of float64): a machine whose
#: last-level cache is larger keeps the built-in memory prices.
MAX_PAST_CACHE_ELEMENTS = 1 << 27


@dataclass(frozen=True)
class Budget:
    """How much to measure: matmul ``stacks`` (timed ``passes`` times in shuffled order), each
    timing the best of ``repeats`` batches of about ``batch_seconds``; gathers of
    ``2**copy_powers`` elements; ``threaded`` large products; ``streaming``: time a read past
    the last-level cache."""

    stacks: int
    passes: int
    repeats: int
    batch_seconds: float
    copy_powers: tuple[int, ...]
    threaded: int
    streaming: bool


#: ``contractions calibrate --quick``: under a minute on 2 cores.
QUICK = Budget(stacks=200, passes=2, repeats=3, batch_seconds=0.003, copy_powers=(14, 16, 18, 20, 22),
               threaded=8, streaming=False)
#: ``contractions calibrate``: a few minutes.
FULL = Budget(stacks=700, passes=3, repeats=5, batch_seconds=0.004, copy_powers=tuple(range(14, 23)),
              threaded=8, streaming=True)
#: For tests: seconds, and noisy.
TINY = Budget(stacks=12, passes=1, repeats=1, batch_seconds=0.0005, copy_powers=(14, 16),
              threaded=2, streaming=False)


def best_seconds(func: Callable[[], object], batch_seconds: float = 0.002, repeats: int = 3,
                 max_number: int = 10_000) -> float:
    """Best per-call time over ``repeats`` batches of about ``batch_seconds`` (the least
    disturbed sample)."""
    func()
    start = time.perf_counter()
    func()
    one = max(time.perf_counter() - start, 1e-7)
    number = max(1, min(max_number, int(batch_seconds / one)))
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            func()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def fit_relative(features: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Coefficients (ns) minimising the sum of squared relative errors of ``features @ c``
    against ``seconds``."""
    ns = np.asarray(seconds, dtype=float) * 1e9
    weighted = np.asarray(features, dtype=float) / ns[:, None]
    coefficients, *_ = np.linalg.lstsq(weighted, np.ones_like(ns), rcond=None)
    return coefficients


def stack_grid(points: int, threaded_macs: int, seed: int = 0) -> list[tuple[int, int, int, int]]:
    """(calls, m, k, n), log-uniform, in cache and single-threaded, without duplicates."""
    rng = np.random.default_rng(seed)
    grid: dict[tuple[int, int, int, int], None] = {}
    tries = 0
    while len(grid) < points and tries < 100 * points:
        tries += 1
        m, n = (int(round(math.exp(rng.uniform(0, math.log(MAX_DIM))))) for _ in range(2))
        k = int(round(math.exp(rng.uniform(math.log(2), math.log(MAX_DIM)))))
        calls = int(round(math.exp(rng.uniform(0, math.log(8192)))))
        elements = m * k + k * n + m * n
        if elements > IN_CACHE_ELEMENTS or m * k * n >= 2 * threaded_macs:
            continue
        calls = max(1, min(calls, IN_CACHE_ELEMENTS // elements, (1 << 25) // (m * k * n)))
        grid[(calls, m, k, n)] = None
    return list(grid)


class Progress:
    """A one-line progress display, rewritten in place on a terminal ("measuring BLAS products
    in cache, stage 1/8 [312/2100]"); silent unless ``stream`` (stderr by default) is a TTY, so
    a piped or redirected run prints nothing extra.  Redrawn at most every ``every`` seconds.

    >>> import io
    >>> class Terminal(io.StringIO):
    ...     def isatty(self): return True
    >>> shown = Progress(Terminal(), every=0)
    >>> shown('matmul prices', 3, 11); shown.clear()
    >>> shown.stream.getvalue().split('\\r')[1]
    'measuring matmul prices [3/11]'
    """

    def __init__(self, stream: TextIO | None = None, every: float = 0.1) -> None:
        self.stream = sys.stderr if stream is None else stream
        try:
            self.live = bool(self.stream.isatty())
        except (AttributeError, ValueError):  # (no isatty, or a closed stream)
            self.live = False
        self.every, self.width, self.shown_at = every, 0, -math.inf

    def __call__(self, what: str, done: int, total: int) -> None:
        if not self.live:
            return
        now = time.monotonic()
        if done < total and now - self.shown_at < self.every:
            return
        self.shown_at = now
        text = f"measuring {what} [{done}/{total}]"
        self.stream.write("\r" + text + " " * max(0, self.width - len(text)))
        self.stream.flush()
        self.width = len(text)

    def clear(self) -> None:
        """Erase the line (before another line is printed, and at the end)."""
        if self.live and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


class _Run:
    """One calibration: the budget, the progress log, the prices found so far."""

    def __init__(self, budget: Budget, log: Callable[[str], None], base: Profile,
                 progress: Progress | None = None) -> None:
        self.budget, self.log, self.base, self.progress = budget, log, base, progress
        self.prices: dict[str, Any] = {}
        self.rng = np.random.default_rng(1)
        self.stage = ""

    def time(self, func: Callable[[], object]) -> float:
        return best_seconds(func, self.budget.batch_seconds, self.budget.repeats)

    def tick(self, done: int, total: int) -> None:
        """Show how far the stage has come (a long stage is otherwise a silent minute)."""
        if self.progress is not None:
            self.progress(self.stage, done, total)

    def keep(self, name: str, value: float) -> None:
        """Adopt a fitted price, or keep the default where the fit is not usable."""
        if math.isfinite(value) and value > 0:
            self.prices[name] = float(value)
        else:
            self.log(f"    {name}: the fit gave {value:.3g}; kept the default "
                     f"{getattr(self.base, name):g} (re-run on a quieter machine)")

    # ----------------------------------------------------------------- the measurements
    def products(self) -> None:
        grid = stack_grid(self.budget.stacks, OPENBLAS_SPLIT_MACS)
        cases = []
        for calls, m, k, n in grid:
            a = self.rng.standard_normal((calls, m, k))
            b = self.rng.standard_normal((calls, k, n))
            bt = np.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)
            if calls == 1:
                a, b, bt = a[0], b[0], bt[0]
            cases.append((a, b, bt, np.empty(np.matmul(a, b).shape)))
        plain = np.full(len(grid), np.inf)
        transposed = np.full(len(grid), np.nan)
        done, total = 0, self.budget.passes * len(grid)
        for _ in range(self.budget.passes):
            for index in self.rng.permutation(len(grid)):
                self.tick(done, total)
                done += 1
                a, b, bt, out = cases[index]
                plain[index] = min(plain[index], self.time(functools.partial(np.matmul, a, b, out=out)))
                if grid[index][0] > 1:
                    t = self.time(functools.partial(np.matmul, a, bt, out=out))
                    transposed[index] = t if math.isnan(transposed[index]) else min(transposed[index], t)
        features = np.array([[1, c, c * m * k * n, c * (m * k + k * n + m * n)] for c, m, k, n in grid],
                            dtype=float)
        coefficients = fit_relative(features, plain)
        _, call, mac, element = coefficients
        error = features @ coefficients / (plain * 1e9) - 1.0
        classes = {"vector-like (m or n <= 4)": [min(m, n) <= 4 for _, m, _, n in grid],
                   "thin (k <= 8)": [k <= 8 and min(m, n) > 4 for _, m, k, n in grid],
                   "matrix": [min(m, n) > 4 and k > 8 for _, m, k, n in grid]}
        self.log("    fit by shape class, median |error|: " + "; ".join(
            f"{name} {np.median(np.abs(error[np.array(mask)])) * 100:.0f}% of {sum(mask)}"
            for name, mask in classes.items() if any(mask)))
        self.keep("ns_per_matmul_call", call)
        self.keep("ns_per_mac", mac)
        self.keep("ns_per_matrix_element", element)
        batched = ~np.isnan(transposed)
        if batched.any():
            result = np.array([c * m * n for c, m, _, n in grid], dtype=float)[batched]
            t_plain, t_transposed = plain[batched] * 1e9, transposed[batched] * 1e9
            x, d = result / t_transposed, (t_transposed - t_plain) / t_transposed
            # a transposed right factor that costs nothing extra is a price of 0, not a failed fit
            self.prices["ns_per_batched_right_transpose_element"] = max(
                0.0, float(np.sum(x * d) / np.sum(x * x)))

    def threads(self) -> None:
        threads = self.base.blas_threads
        if threads <= 1:
            self.log("    one BLAS thread: thread_gain is not used, kept the default")
            return
        model = NumpyCostModel(replace(self.base, **self.prices, thread_gain=0.0))
        gains = []
        sides = (96, 128, 160, 192, 256, 320, 384, 512)[:self.budget.threaded]
        for done, side in enumerate(sides):
            self.tick(done, len(sides))
            a, b = self.rng.standard_normal((side, side)), self.rng.standard_normal((side, side))
            out = np.empty((side, side))
            macs = side ** 3
            used = min(threads, macs // self.base.threaded_product_macs)
            if used < 2:
                continue
            seconds = self.time(functools.partial(np.matmul, a, b, out=out))
            speedup = model.matmul_ns(1, side, side, side) / (seconds * 1e9)
            gains.append((speedup - 1) / (used - 1))
        if gains:
            gain = float(np.median(gains))
            if gain > 1.0:
                # (the single-thread price comes from the in-cache fit, which large products
                # beat: a thread beyond the first adds at most one core's work)
                self.log(f"    thread_gain: measured {gain:.2f}, more than a core a thread; kept 1")
                gain = 1.0
            self.keep("thread_gain", gain)

    def splits(self) -> None:
        # Stacks whose products BLAS runs on one thread (`Profile.split_min_macs` to
        # `split_max_macs`), run whole and cut over the BLAS threads as the numpy backend cuts
        # them, each pair timed side by side at three stack sizes (`split_prices` fits them).
        from .backends.workers import split_matmul

        threads = self.base.blas_threads
        if threads <= 1:
            self.log("    one BLAS thread: no stack is cut, kept the defaults")
            return
        shapes = ((32, 32, 32), (48, 64, 8), (64, 64, 64))
        totals = (1 << 22, 1 << 24, 1 << 26)[:self.budget.threaded]   # multiply-adds a stack
        cases = [(shape, total) for shape in shapes for total in totals
                 if self.base.split_min_macs <= math.prod(shape) < self.base.split_max_macs]
        if not cases:   # (a gain fitted to nothing would read as a measured 0 and turn the cut off)
            self.log("    no measured product size lies in the profile's cut range: kept the defaults")
            return
        whole, split = [], []
        for done, ((m, k, n), total) in enumerate(cases):
            self.tick(done, len(cases))
            calls = max(2 * threads, total // (m * k * n))
            a, b = self.rng.standard_normal((calls, m, k)), self.rng.standard_normal((calls, k, n))
            out = np.empty((calls, m, n))
            one = functools.partial(np.matmul, a, b, out=out)
            cut = functools.partial(split_matmul, a, b, threads, out)
            # (the shorter of two rounds each: a shared machine only ever adds time)
            whole.append(min(self.time(one), self.time(one)) * 1e9)
            split.append(min(self.time(cut), self.time(cut)) * 1e9)
        gain, handover = split_prices(whole, split, threads)
        self.log(f"    {threads} threads: a stack cut over them runs {1 + gain * (threads - 1):.2f}x "
                 f"as fast, plus {handover / 1000:.0f} us to hand it over")
        self.prices["split_gain"], self.prices["ns_per_split"] = gain, handover

    def copies(self) -> None:
        # fresh pages: the same contiguous write into a new array and into a warm one; 40 MiB,
        # past glibc's largest dynamic mmap threshold (32 MiB), so every new array is fresh pages
        n = 5 << 20
        source, warm = self.rng.standard_normal(n), np.empty(n)
        fresh_s = self.time(source.copy)
        warm_s = self.time(functools.partial(np.copyto, warm, source))
        self.keep("ns_per_fresh_element", (fresh_s - warm_s) * 1e9 / n)
        fresh = self.prices.get("ns_per_fresh_element", self.base.ns_per_fresh_element)
        # a gather: a transposed 4-d view copied into a warm buffer, plus the first touch of the
        # fresh buffer it makes in a schedule (the model's copy price holds both: its final
        # step and a warm result take the fresh part back off)
        elements, seconds = [], []
        for done, power in enumerate(self.budget.copy_powers):
            self.tick(done, len(self.budget.copy_powers))
            side = round((1 << power) ** 0.25)
            x = self.rng.standard_normal((side, side + 1, side, side + 2)).transpose(2, 0, 3, 1)
            out = np.empty(x.shape)
            elements.append(x.size)
            seconds.append(self.time(functools.partial(np.copyto, out, x)))
        (per,) = fit_relative(np.array(elements, dtype=float)[:, None], np.array(seconds))
        self.keep("ns_per_copied_element", per + fresh)

    def past_caches(self) -> int:
        """Elements of an array read from memory, not from the last-level cache: four times
        that cache (`Profile.memory_threshold` is a quarter of it: an array of just the cache's
        size stays in it between calls and measured a tenth of the streaming price)."""
        return 16 * self.base.memory_threshold

    def streaming(self) -> None:
        threshold, elements = self.base.memory_threshold, self.past_caches()
        if not self.budget.streaming or elements > MAX_PAST_CACHE_ELEMENTS:
            self.log("    skipped (a quick run, or a last-level cache too large to outgrow cheaply)")
            return
        big = self.rng.standard_normal((elements // 64, 64))
        small = self.rng.standard_normal((max(1, threshold // 256), 64))
        v = self.rng.standard_normal(64)
        per_big = self.time(functools.partial(np.matmul, big, v)) * 1e9 / big.size
        per_small = self.time(lambda: small @ v) * 1e9 / small.size
        del big   # (the walks make arrays of their own)
        self.keep("ns_per_streamed_element", per_big - per_small)
        self.walks(elements)

    def walks(self, elements: int) -> None:
        # Strided walks past the caches (`NumpyCostModel.strided_read_ns`): an array of
        # ``elements`` copied into a warm buffer in the order that reads runs of 8 or 48
        # elements whose starts lie 81 runs apart (a page or more: far runs) or runs of 8 whose
        # starts lie 2 KiB apart (near runs), each against the contiguous copy of the same
        # array.  Each walk reads so many runs at once that the prefetcher follows none of them.
        # (a difference of two copies of ~10 ms each is noisy on a shared machine: the median
        # of three rounds, each walk timed beside its contiguous copy)
        rounds: list[dict[tuple[int, int], tuple[float, int]]] = []
        for done in range(3 * len(WALKS)):
            self.tick(done, 3 * len(WALKS))
            runs_apart, run = WALKS[done % len(WALKS)]
            source = self.rng.standard_normal((max(1, elements // (runs_apart * run)), runs_apart, run))
            warm, walked = np.empty(source.shape), np.empty((runs_apart, source.shape[0], run))
            contiguous = self.time(functools.partial(np.copyto, warm, source))
            strided = self.time(functools.partial(np.copyto, walked, source.transpose(1, 0, 2)))
            if done % len(WALKS) == 0:
                rounds.append({})
            rounds[-1][runs_apart, run] = strided - contiguous, source.size // run
        prices = [walk_prices(found) for found in rounds]
        for name in prices[0]:
            value = statistics.median(p[name] for p in prices)
            if name == "ns_per_far_line" and value == 0.0:
                self.prices[name] = value   # (measured: no price beyond the run's own)
            else:
                self.keep(name, value)

    def roofline(self) -> None:
        # The floors every step price keeps (`Profile.cache_bytes_per_ns` and the two below):
        # np.copyto's bytes read plus written, within the caches (arrays of a sixteenth of
        # `memory_threshold` each) and past them (`past_caches`, skipped on a quick run where
        # that outgrows 64 MiB); the best square float64 matmul on every BLAS thread.
        threshold, past = self.base.memory_threshold, self.past_caches()
        sizes = [("cache_bytes_per_ns", max(1024, threshold // 16))]
        if past <= MAX_PAST_CACHE_ELEMENTS and (self.budget.streaming or past * 8 <= 64 << 20):
            sizes.append(("memory_bytes_per_ns", past))
        for done, (name, n) in enumerate(sizes):
            self.tick(done, len(sizes) + 1)
            source, target = self.rng.standard_normal(n), np.empty(n)
            self.keep(name, 16 * n / (self.time(functools.partial(np.copyto, target, source)) * 1e9))
        self.tick(len(sizes), len(sizes) + 1)
        side = 1024 if self.budget.streaming else 512
        a, b, out = self.rng.standard_normal((side, side)), self.rng.standard_normal((side, side)), np.empty((side, side))
        self.keep("peak_flops_per_ns", 2 * side ** 3 / (self.time(functools.partial(np.matmul, a, b, out=out)) * 1e9))

    def einsum_loop(self) -> None:
        x, y = self.rng.standard_normal((4096, 16)), self.rng.standard_normal((4096, 16))
        contiguous = self.time(lambda: np.einsum("bk,bk->b", x, y)) * 1e9 / x.size
        self.keep("ns_per_einsum_mac", contiguous)
        k, o = self.rng.standard_normal((64, 32)), self.rng.standard_normal((64, 32, 64))
        strided = self.time(lambda: np.einsum("ki,oik->ko", k, o)) * 1e9 / o.size
        self.keep("ns_per_strided_einsum_mac", strided)

    def python_costs(self) -> None:
        from .calls.store import switched_off

        with switched_off():
            self._python_costs()

    def _python_costs(self) -> None:
        from .api import contract
        from .expressions import contract_expression

        # per step: compiled programs of 1-4 pairwise steps on 2 x 2 operands (the slope);
        # per call: the programs' fixed part (their entry) and `contract`'s cached lookup (a tiny
        # call against the same compiled program)
        steps, seconds = [], []
        for n in range(2, 6):
            self.tick(n - 2, 5)
            letters = "abcdef"[:n + 1]
            subscripts = ",".join(letters[i:i + 2] for i in range(n)) + f"->{letters[0]}{letters[-1]}"
            operands = [self.rng.standard_normal((2, 2)) for _ in range(n)]
            program = contract_expression(subscripts, *[(2, 2)] * n, optimize=[(0, 1)] * (n - 1))
            seconds.append(self.time(functools.partial(program, *operands)))
            steps.append(n - 1)
        entry, step = fit_relative(np.array([[1, s] for s in steps], dtype=float), np.array(seconds))
        self.tick(4, 5)
        self.keep("ns_per_step", step)
        x, y = self.rng.standard_normal((2, 2)), self.rng.standard_normal((2, 2))
        program = contract_expression("ab,bc->ac", (2, 2), (2, 2))
        lookup = self.time(lambda: contract("ab,bc->ac", x, y)) - self.time(lambda: program(x, y))
        self.keep("ns_per_call", max(entry, 0.0) + lookup * 1e9)


def calibrate(budget: Budget = QUICK, log: Callable[[str], None] = print,
              base: Profile | None = None, progress: Progress | None = None) -> Profile:
    """Measure this machine's prices within ``budget`` and return them as a profile (built-in
    defaults for what is not measured; this machine's caches and threads; stamped with the
    machine and the time).  ``log`` receives one line per stage; ``progress`` (a terminal's
    `Progress`) shows how far each stage has come, and is cleared before each line."""
    machine = this_machine()
    base = builtin_profile(machine) if base is None else base
    if progress is not None:
        def logged(line: str, say: Callable[[str], None] = log, shown: Progress = progress) -> None:
            shown.clear()   # (the line replaces the progress display, which the next tick redraws)
            say(line)

        log = logged
    run = _Run(budget, log, base, progress)
    stages = [("BLAS products in cache", run.products), ("threaded products", run.threads),
              ("stacks cut over the cores", run.splits),
              ("gathers and fresh pages", run.copies), ("reads past the caches", run.streaming),
              ("the roofline: bandwidths and peak", run.roofline),
              ("numpy's einsum loop", run.einsum_loop), ("per-call and per-step Python", run.python_costs)]
    log(f"calibrating on {machine}")
    started = time.perf_counter()
    for number, (what, stage) in enumerate(stages, 1):
        begun = time.perf_counter()
        log(f"[{number}/{len(stages)}] {what} ...")
        run.stage = f"{what}, stage {number}/{len(stages)}"
        stage()
        log(f"    done in {time.perf_counter() - begun:.1f} s")
    log(f"measured in {time.perf_counter() - started:.0f} s")   # (clears the progress line)
    measured = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return replace(base, **run.prices, machine=machine, measured=measured, source="")


#: The walks `_Run.walks` times: (runs apart, elements a run); `walk_prices` reads them.
WALKS = ((81, 8), (81, 48), (32, 8))


def walk_prices(extra: dict[tuple[int, int], tuple[float, int]]) -> dict[str, float]:
    """The prices of strided walks past the caches from `WALKS`' timings: for each walk, the
    seconds it took beyond the contiguous copy of the same array and the runs it read.  Far
    runs cost ``ns_per_far_run`` plus ``ns_per_far_line`` a line (runs of 8 elements are one
    line, of 48 six); near runs ``ns_per_near_run``.

    >>> walk_prices({(81, 8): (70e-3, 1_000_000), (81, 48): (20e-3, 100_000), (32, 8): (25e-3, 1_000_000)})
    {'ns_per_far_line': 26.0, 'ns_per_far_run': 44.0, 'ns_per_near_run': 25.0}
    >>> walk_prices({(81, 8): (30e-3, 1_000_000), (81, 48): (2.9e-3, 100_000), (32, 8): (25e-3, 1_000_000)})
    {'ns_per_far_line': 0.0, 'ns_per_far_run': 30.0, 'ns_per_near_run': 25.0}
    """
    one_line = extra[81, 8][0] * 1e9 / extra[81, 8][1]
    six_lines = extra[81, 48][0] * 1e9 / extra[81, 48][1]
    line = max(0.0, (six_lines - one_line) / 5)   # (0: a run's further lines stream as it is read)
    return {"ns_per_far_line": round(line, 6), "ns_per_far_run": round(one_line - line, 6),
            "ns_per_near_run": round(extra[32, 8][0] * 1e9 / extra[32, 8][1], 6)}


def split_prices(whole_ns: list[float], split_ns: list[float], workers: int) -> tuple[float, float]:
    """(``split_gain``, ``ns_per_split``) from stacks timed whole (``whole_ns``) and cut over
    ``workers`` threads (``split_ns``), as the model prices a cut stack:
    ``whole / (1 + gain * (workers - 1)) + handover``, fitted by least squares on relative
    error.  The gain is held to 0..1 (a thread adds at most a core) and the hand-over to
    0 or more; a gain of 0 is a measured answer (the cut does not pay here), not a failed fit.

    >>> split_prices([1e5, 1e6, 1e7], [1e5 / 1.5 + 3e4, 1e6 / 1.5 + 3e4, 1e7 / 1.5 + 3e4], 2)
    (0.5, 30000.0)
    >>> split_prices([1e5, 1e6], [1.2e5, 1.1e6], 2)[0]
    0.0
    """
    share, handover = fit_relative(np.column_stack([whole_ns, np.ones(len(whole_ns))]), np.array(split_ns) / 1e9)
    if handover < 0:   # (no fixed part: the cut's share alone)
        (share,), handover = fit_relative(np.array(whole_ns, dtype=float)[:, None], np.array(split_ns) / 1e9), 0.0
    gain = (1.0 / share - 1.0) / (workers - 1) if share > 0 else 0.0
    return round(min(1.0, max(0.0, float(gain))), 6), round(float(handover), 3)


def _nnls(a: np.ndarray, b: np.ndarray, rounds: int = 50) -> np.ndarray:
    """Least squares with non-negative coefficients (active set; small problems only)."""
    free = list(range(a.shape[1]))
    coef = np.zeros(a.shape[1])
    for _ in range(rounds):
        sol = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
        if (sol >= 0).all():
            coef[:] = 0
            coef[free] = sol
            return coef
        free = [f for f, v in zip(free, sol) if v >= 0]
    coef[:] = 0
    coef[free] = np.clip(np.linalg.lstsq(a[:, free], b, rcond=None)[0], 0, None)
    return coef


def fit_torch_prices(rows: list[tuple[Any, float, float]], base: Profile) -> Profile:
    """``base`` with its ``torch_*`` prices fitted to ``rows`` of (schedule, seconds of its
    steps on torch, seconds of one torch.einsum along its path): non-negative least squares on
    relative error over both routes (`TorchCostModel.steps_features`, ``einsum_features``: both
    routes are linear in the prices).  ``bench/refit_torch_model.py`` measures the rows."""
    from .model.torch_prices import TorchCostModel

    model = TorchCostModel(base)
    design, target = [], []
    for schedule, steps_s, einsum_s in rows:
        ops, calls, copied, macs = model.steps_features(schedule)
        design.append([ops, calls, 0.0, 0.0, macs, copied, 0.0])
        target.append(steps_s * 1e9)
        pairs, calls, pair_elements, macs = model.einsum_features(schedule)
        design.append([0.0, calls, 1.0, pairs, macs, 0.0, pair_elements])
        target.append(einsum_s * 1e9)
    a, b = np.asarray(design), np.asarray(target)
    coef = _nnls(a / b[:, None], np.ones_like(b))
    copy = max(coef[5], 1e-6)
    return replace(base, torch_ns_per_op=float(coef[0]), torch_ns_per_matmul_call=float(coef[1]),
                   torch_ns_per_einsum_call=float(coef[2]), torch_ns_per_einsum_pair=float(coef[3]),
                   torch_ns_per_mac=float(coef[4]), torch_ns_per_copied_element=float(coef[5]),
                   torch_einsum_copy_share=float(min(coef[6] / copy, 4.0)))
