"""A call's route chosen by measurement on the shape's first calls: CUDA (CuPy, torch) and
large numpy calls.

A schedule can run its own steps or one framework einsum along its path; the time model only
estimates which is faster (on a GPU it is not fitted at all; on the CPU the gap between the
two moves with the CPU, its caches and its BLAS), so, as FFTW plans by measuring, a runner
times the candidates on its own first calls and keeps the fastest (dev/decisions.md 49, 61).
Each of the first ``ROUNDS`` rounds runs every candidate once, timed over `PIPELINED` real
calls between two syncs; the first round is a warm-up.  On the host each of ``HOST_ROUNDS``
rounds runs every candidate for ``HOST_RUN`` calls in a row, each timed alone (`host_timer`),
the first of each run not counted, and another route must beat the model's pick by
``HOST_MARGIN``.  A candidate slower than ``DROP_FACTOR`` times the best in a counted round is
dropped, one that raises too.  The choice is remembered per problem (`remembered`) and,
through the plan store, per device (`persistence`).  While a CUDA graph is captured, while another thread is measuring the same
problem, and under ``CONTRACTIONS_MEASURE=off`` nothing is timed (the model's pick runs).
Routes agree within float rounding, not bit for bit.  The clocks are injectable: `timer` and
`host_timer`, replaced in tests.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..schedule import Finish, Schedule

__all__ = ["DROP_FACTOR", "ENVIRONMENT_VARIABLE", "HOST_MARGIN", "HOST_ROUNDS", "HOST_RUN", "PIPELINED", "ROUNDS",
           "MeasuredRoute", "device_timer", "host_timer", "measured_seconds", "measuring", "one_einsum_schedule",
           "remembered", "timer"]

#: rounds of measuring calls (every candidate once per round); the first is not counted
ROUNDS = 4
#: On the host, each round runs every candidate for ``HOST_RUN`` calls in a row and counts
#: all but the first of them: a host call's time depends on what ran just before it (the
#: allocator's free blocks, the caches), and a loop of calls runs one route after itself.
#: (Alternating single calls misjudged a string 3x: each route measured 7-8 ms beside the
#: other, while in a loop the steps ran 4.4 ms and np.einsum 13 ms.)
HOST_ROUNDS, HOST_RUN = 2, 3
#: On the host, another route replaces the model's pick only when it measures this much faster
#: (timings of one large call on a shared machine move by a few percent from call to call).
HOST_MARGIN = 1.05
#: a candidate slower than this times the best one, in a counted round, is dropped
DROP_FACTOR = 3.0
#: problems whose chosen route is remembered (least recently chosen forgotten first)
REMEMBERED = 1024

Route = tuple[str, Callable[..., Any]]


def one_einsum_schedule(schedule: Schedule, path: Any) -> Schedule:
    """``schedule`` (unblocked, with an einsum string) as one einsum call along ``path``: the
    ``'direct'`` schedule the GPU model would have made (`schedule.as_one_einsum`)."""
    return replace(schedule, strategy="direct", preparations=(), steps=(), path=tuple(path),
                   finish=Finish(None, schedule.output_shape, False, False), peak_extra=0)


#: calls of a candidate timed back to back between two syncs (their mean is its time)
PIPELINED = 3


def device_timer(name: str, run: Callable[..., Any], operands: Sequence[Any],
                 sync: Callable[[], None]) -> tuple[Any, float]:
    """Run one candidate `PIPELINED` times on ``operands`` between two device syncs: (its last
    result, seconds per call).  Back to back, as a caller's loop runs it: the host launches the
    next call while the device still works on the last, so a route is timed by what bounds it
    in a loop (its launches or its kernels), not by the two added together."""
    perf = time.perf_counter
    sync()
    start = perf()
    for _ in range(PIPELINED):
        result = run(*operands)
    sync()
    return result, (perf() - start) / PIPELINED


def _host_timer(name: str, run: Callable[..., Any], operands: Sequence[Any],
                sync: Callable[[], None]) -> tuple[Any, float]:
    """Run one candidate once on the host (its result is the call's): (result, seconds).
    Host arithmetic is synchronous, so one call is timed as it runs; the large calls measured
    there take a millisecond or more, far above the clock's resolution."""
    perf = time.perf_counter
    start = perf()
    result = run(*operands)
    return result, perf() - start


Timer = Callable[[str, Callable[..., Any], Sequence[Any], Callable[[], None]], tuple[Any, float]]

#: how a device candidate is timed: ``timer(name, run, operands, sync) -> (result, seconds)``
timer: Timer = device_timer
#: how a host candidate is timed (numpy), with the same signature
host_timer: Timer = _host_timer

#: ``off`` (or 0, false, no) switches measuring off: every runner takes its model's pick at
#: once, neither timed nor recalled from the store (reproducible to the bit from call to call)
ENVIRONMENT_VARIABLE = "CONTRACTIONS_MEASURE"


def measuring() -> bool:
    """Is measuring on (``CONTRACTIONS_MEASURE`` unset, or not ``off``)?  Read when a runner is
    made, so a test or a script may switch it for the runners it makes next."""
    return os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower() not in ("off", "0", "false", "no")

#: Where chosen routes outlive the process: ``(recall, keep)``, ``recall(key) -> name or None``
#: and ``keep(key, name)``, keyed by the problem and the device's name (`MeasuredRoute`'s
#: ``where``).  The plan store installs them (`calls.store`); None: this process only.
persistence: tuple[Callable[[Any], str | None], Callable[[Any, str], None]] | None = None

# problem key -> (the route chosen, each route's best counted seconds: empty when not timed)
_CHOSEN: collections.OrderedDict[Any, tuple[str, dict[str, float]]] = collections.OrderedDict()
_LOCK = threading.Lock()


def remembered(key: Any) -> str | None:
    """The route measured for the problem ``key`` (a `MeasuredRoute`'s key), or None."""
    with _LOCK:
        found = _CHOSEN.get(key)
    return None if found is None else found[0]


def measured_seconds(key: Any) -> dict[str, float]:
    """Each route's best counted time (seconds) for the problem ``key``, as measured when its
    route was chosen (empty: not measured in this process, or chosen without timing)."""
    with _LOCK:
        found = _CHOSEN.get(key)
    return {} if found is None else dict(found[1])


def _remember(key: Any, name: str, seconds: dict[str, float] | None = None) -> None:
    with _LOCK:
        _CHOSEN[key] = (name, dict(seconds or {}))
        _CHOSEN.move_to_end(key)
        while len(_CHOSEN) > REMEMBERED:
            _CHOSEN.popitem(last=False)


class MeasuredRoute:
    """A runner that measures its ``candidates`` (name, callable) on its first calls and then
    hands the fastest to ``settle`` (which makes it the runner's route from then on); the
    runner starts with `entry`.

    ``sync``: waits for the device; ``measures(operands)``: whether this call's operands are
    measured at all (False: ``settle(default)`` at once, nothing timed: torch on the CPU);
    ``capturing()``: a CUDA graph is being captured (run ``default`` untimed); ``default``: the
    candidate that runs then (the model's pick); ``key``: the problem, for `remembered`;
    ``where(operands)``: the name of the device the operands are on, under which a route chosen
    in an earlier process is recalled and a route chosen here kept (`persistence`); ``host``:
    the candidates run on the host, timed by `host_timer` (else by `timer`).  One thread
    measures at a time: a call that meets another thread's measuring runs ``default`` untimed.
    """

    def __init__(self, candidates: Sequence[Route], default: str, settle: Callable[[Callable[..., Any]], None],
                 sync: Callable[[], None], key: Any,
                 measures: Callable[[Sequence[Any]], bool] | None = None,
                 capturing: Callable[[], bool] | None = None,
                 where: Callable[[Sequence[Any]], str] | None = None, host: bool = False) -> None:
        self.routes = dict(candidates)
        self.default = default if default in self.routes else next(iter(self.routes))
        self.settle_fn = settle
        self.sync = sync
        self.key = key
        self.measures = measures
        self.capturing = capturing
        self.where = where
        self.host = host
        self.device: str | None = None   # the measured operands' device name (`where`)
        self.best: dict[str, float] = {}
        self.measured: dict[str, float] = {}   # every route's best counted time, dropped ones too
        self.round = 0
        self.rounds, self.run_length, self.margin = (HOST_ROUNDS, HOST_RUN, HOST_MARGIN) if host else (ROUNDS, 1, 1.0)
        self.pending: list[str] = self._round_order()
        self.previous: str | None = None   # the candidate the last measuring call ran
        self.chosen: str | None = None
        self.busy = threading.Lock()   # held by the thread that measures
        if not measuring():
            self.chosen = self.default   # (switched off: the model's pick, nothing remembered)
            return
        with _LOCK:
            found = _CHOSEN.get(key)
        if found is not None and found[0] in self.routes:
            self.chosen = found[0]
        elif len(self.routes) == 1:
            self.chosen = self.default
            _remember(key, self.chosen)

    def entry(self) -> Callable[..., Any]:
        """What the runner calls first: the route already known (remembered for this problem,
        or the only candidate), else this measuring runner."""
        return self if self.chosen is None else self.routes[self.chosen]

    def _settle(self, name: str) -> None:
        self.chosen = name
        _remember(self.key, name, self.measured)
        if persistence is not None and self.device and self.measured:
            persistence[1]((self.key, self.device), name)
        self.settle_fn(self.routes[name])

    def _recalled(self, operands: Sequence[Any]) -> bool:
        """Did an earlier process choose this problem's route on this device?  (Then it is
        settled at once, nothing timed.)"""
        if self.where is None or persistence is None:
            return False
        self.device = self.where(operands)
        if not self.device:
            return False   # (a device that cannot be named: this process only)
        name = persistence[0]((self.key, self.device))
        if name not in self.routes:
            return False
        self.chosen = name
        _remember(self.key, name)
        self.settle_fn(self.routes[name])
        return True

    def __call__(self, *operands: Any) -> Any:
        if self.chosen is not None:   # settled by another thread meanwhile
            return self.routes[self.chosen](*operands)
        if not self.busy.acquire(blocking=False):
            return self.routes[self.default](*operands)   # another thread measures
        try:
            return self._measure(operands)
        finally:
            self.busy.release()

    def _measure(self, operands: Sequence[Any]) -> Any:
        if self.chosen is not None:
            return self.routes[self.chosen](*operands)
        if self.measures is not None and not self.measures(operands):
            self.chosen = self.default   # not measured here: the schedule's route, never timed
            run = self.routes[self.default]
            self.settle_fn(run)
            return run(*operands)
        if self.capturing is not None and self.capturing():
            return self.routes[self.default](*operands)
        if self.round == 0 and not self.best and self.device is None and self._recalled(operands):
            return self.routes[self.chosen](*operands)   # type: ignore[index]
        while True:
            if not self.pending:   # a round ended in a dropped candidate
                self._next_round()
            if self.chosen is not None:
                return self.routes[self.chosen](*operands)
            name = self.pending.pop(0)
            try:
                result, seconds = (host_timer if self.host else timer)(
                    name, self.routes[name], operands, self.sync)
            except Exception:
                if len(self.routes) == 1:
                    raise   # the last candidate's error is the call's
                del self.routes[name]   # (the framework einsum out of memory, say): drop it
                self.best.pop(name, None)
                self.pending = [n for n in self.pending if n != name]
                if self.default == name:
                    self.default = next(iter(self.routes))
                continue
            counted = self.round > 0 if self.run_length == 1 else name == self.previous
            self.previous = name
            if counted:
                self.best[name] = min(seconds, self.best.get(name, seconds))
                self.measured[name] = self.best[name]
            if not self.pending:
                self._next_round()
            return result

    def _round_order(self) -> list[str]:
        """The measuring calls of one round: every candidate, ``run_length`` calls in a row."""
        return [name for name in self.routes for _ in range(self.run_length)]

    def _next_round(self) -> None:
        self.round += 1
        # (on a device the first round is a warm-up, counted from the second; on the host
        # every round counts, so a candidate far behind is dropped after the first)
        if self.round > (1 if self.run_length == 1 else 0) and self.best:
            fastest = min(self.best.values())
            for name in [n for n, t in self.best.items() if t > DROP_FACTOR * fastest]:
                del self.routes[name]
                del self.best[name]
        if len(self.routes) == 1 or self.round >= self.rounds:
            pool = self.best or {name: 0.0 for name in self.routes}
            fastest_name = min(pool, key=lambda n: (pool[n], n != self.default))
            if self.default in pool and pool[fastest_name] * self.margin > pool[self.default]:
                fastest_name = self.default   # (within the margin: the model's pick stays)
            self._settle(fastest_name)
            return
        self.pending = self._round_order()
