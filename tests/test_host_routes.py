"""Large numpy calls measure their steps against np.einsum along the schedule's path on their
first calls (contractions/backends/numpy_backend.py ``routes``, backends/measured.py), with an
injected host clock (no real timing): which schedules measure, that every call's result (the
measuring ones too) is np.einsum's on the expanded string, that the faster route is kept and
explained, that a choice outlives the process through the plan store, that
``CONTRACTIONS_MEASURE=off`` times nothing, that a dtype not measured runs the steps, and that
concurrent callers while measuring all get right answers."""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from contractions import contract, contract_expression, explain, identifiability
from contractions.backends import measured, numpy_backend
from contractions.calls import runners
from contractions.calls import store as store_module
from contractions.model import NumpyCostModel, Profile
from contractions.plan import make_plan
from contractions.schedule import framework_path_peak, make_schedule

from ._strategies import grouped_problems, needed_supplements

pytestmark = pytest.mark.usefixtures("nothing_planned")

#: A matmul chain: pairwise on any profile (an explicit optimizer never runs one einsum loop).
STRING, EXPANDED = "Ca,Cab,Cbc->Cc", "xa,xab,xbc->xc"
SHAPES = ((3, 20), (3, 20, 30), (3, 30, 40))
REFERENCE = NumpyCostModel(Profile())   # the built-in prices: the tests state theirs
CLOSE = {"rtol": 1e-10, "atol": 1e-12}    # routes agree to rounding, not bit for bit
#: the measuring calls of one problem: per round, each of the two routes for a run of calls
MEASURING = measured.HOST_ROUNDS * measured.HOST_RUN * 2


def operands(seed: int = 0, dtype: str = "float64") -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def schedule_of(string: str, shapes, memory_limit=None):
    return make_schedule(make_plan(string, shapes, ()), optimize="greedy", memory_limit=memory_limit,
                         cost_model=REFERENCE)


class HostClock:
    """A fake `measured.host_timer`: runs the candidate (its result is the call's) and reports
    ``costs[name]`` seconds; records what it timed."""

    def __init__(self, costs: dict[str, float]) -> None:
        self.costs, self.timed = costs, []

    def __call__(self, name, run, ops, sync):
        result = run(*ops)
        self.timed.append(name)
        return result, self.costs[name]


@pytest.fixture
def measure_all(monkeypatch):
    """Every pairwise schedule measures (whatever the profile prices it at), nothing remembered
    from another test, no runner kept past this one."""
    monkeypatch.delenv(measured.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setattr(numpy_backend, "MEASURE_MIN_NS", 0.0)
    monkeypatch.setattr(measured, "_CHOSEN", collections.OrderedDict())
    yield
    runners.HOT.clear()
    runners._COMPILED.cache_clear()


def clock(monkeypatch, costs) -> HostClock:
    fake = HostClock(costs)
    monkeypatch.setattr(measured, "host_timer", fake)
    return fake


def reference(ops):
    return np.einsum(EXPANDED, *ops)


# ------------------------------------------------------------------- which schedules measure
def test_a_large_unblocked_pairwise_schedule_measures_and_a_small_one_does_not():
    assert numpy_backend.routes(schedule_of("ab,bc->ac", ((400, 500), (500, 600)))) == ("steps", "einsum")
    assert numpy_backend.routes(schedule_of("ab,bc->ac", ((4, 5), (5, 6)))) == ("steps",)


def test_no_route_past_the_memory_limit_or_for_a_blocked_schedule_or_broadcasting(monkeypatch):
    monkeypatch.setattr(numpy_backend, "MEASURE_MIN_NS", 0.0)
    matmul = schedule_of("ab,bc->ac", ((400, 500), (500, 600)))
    assert framework_path_peak(matmul, views=True) == 0                    # read as they lie
    assert framework_path_peak(matmul, views=False) == 400 * 500 + 500 * 600 + 400 * 600
    shapes = ((40, 50, 60), (60, 50, 70))
    assert framework_path_peak(schedule_of("abc,cbd->ad", shapes), views=True) == 40 * 50 * 60 + 60 * 50 * 70
    # (both gathered with views too: (b c) fused, out of order in each)
    peak = framework_path_peak(schedule_of("abc,cbd->ad", shapes), numpy_backend.PAIRS_AS_VIEWS)
    assert numpy_backend.routes(schedule_of("abc,cbd->ad", shapes, memory_limit=peak)) == ("steps", "einsum")
    assert numpy_backend.routes(schedule_of("abc,cbd->ad", shapes, memory_limit=peak - 1)) == ("steps",)
    blocked = schedule_of("Aai,Abi,Aab->Aab", ((8, 200, 20), (8, 200, 20), (8, 200, 200)), memory_limit=40_000)
    assert blocked.blocking is not None and numpy_backend.routes(blocked) == ("steps",)
    broadcast = schedule_of("ab,bc->ac", ((400, 500), (1, 600)))   # b: 500 in one term, 1 in the other
    assert broadcast.strategy == "pairwise" and numpy_backend.routes(broadcast) == ("steps",)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grouped_problems(max_terms=4))
def test_the_einsum_routes_bound_holds_what_np_einsum_allocates(problem):
    """`framework_path_peak` is what lets the einsum route run under a memory limit: on random
    grouped problems (extents 7-9) np.einsum along the path never allocates more (beyond the
    result, with 512 KiB for what no schedule counts either: the einsum loop's iterator
    buffers, 8,192 elements an operand, and Python's bookkeeping), with the view rule where
    this numpy's einsum follows it (`numpy_backend.PAIRS_AS_VIEWS`) and without it before."""
    problem = dataclasses.replace(
        problem, group_shapes={g: tuple(n + 6 for n in s) for g, s in problem.group_shapes.items()},
        letter_sizes={c: n + 6 for c, n in problem.letter_sizes.items()})
    supplements = tuple(needed_supplements(problem, identifiability(problem.subscripts)).items())
    shapes = tuple(problem.operand_shapes())
    schedule = make_schedule(make_plan(problem.subscripts, shapes, tuple((k[4:], n) for k, n in supplements)),
                             optimize="greedy", cost_model=REFERENCE)
    assume(schedule.strategy == "pairwise" and schedule.einsum is not None
           and all(len(pair) == 2 for pair in schedule.path) and len(schedule.inputs) > 1)
    assume(max(math.prod(s) for s in (*shapes, schedule.output_shape)) <= 2**21
           and framework_path_peak(schedule, numpy_backend.PAIRS_AS_VIEWS) <= 2**22)
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(shape) for shape in shapes]
    path = ["einsum_path", *schedule.path]
    np.einsum(schedule.einsum, *ops, optimize=path)   # (numpy's caches filled: not the route's)
    extra = []
    for _ in range(2):   # (the smaller of two: a stray allocation elsewhere in the process is not numpy's)
        tracemalloc.start()
        try:
            result = np.einsum(schedule.einsum, *ops, optimize=path)
            extra.append(tracemalloc.get_traced_memory()[1] - np.asarray(result).nbytes)
        finally:
            tracemalloc.stop()
    assert min(extra) <= framework_path_peak(schedule, numpy_backend.PAIRS_AS_VIEWS) * 8 + 512 * 1024


def test_the_measured_threshold_is_modelled_time(monkeypatch):
    schedule = schedule_of("ab,bc->ac", ((40, 50), (50, 60)))
    monkeypatch.setattr(numpy_backend, "MEASURE_MIN_NS", schedule.cost_ns + 1)
    assert numpy_backend.routes(schedule) == ("steps",)
    monkeypatch.setattr(numpy_backend, "MEASURE_MIN_NS", schedule.cost_ns)
    assert numpy_backend.routes(schedule) == ("steps", "einsum")


# ------------------------------------------------------------------- measuring on first calls
@pytest.mark.parametrize("fastest", ["steps", "einsum"])
def test_the_faster_route_is_kept_and_every_call_is_right(measure_all, monkeypatch, fastest):
    fake = clock(monkeypatch, {"steps": 3.0, "einsum": 3.0, fastest: 1.0})
    ops = operands()
    want = reference(ops)
    for _ in range(MEASURING + 3):
        np.testing.assert_allclose(contract(STRING, *ops, optimize="greedy"), want, **CLOSE)
    run = measured.HOST_RUN
    assert fake.timed == (["steps"] * run + ["einsum"] * run) * measured.HOST_ROUNDS   # then never again
    schedule = make_schedule(make_plan(STRING, SHAPES, ()), optimize="greedy", memory_limit="default")
    assert numpy_backend.measured_route(schedule) == fastest
    assert set(numpy_backend.route_seconds(schedule)) == {"steps", "einsum"}
    text = explain(STRING, *ops, optimize="greedy")
    what = {"steps": "these steps", "einsum": "np.einsum along the path"}[fastest]
    assert "route: chosen by measurement on this shape's first calls" in text
    assert f"measured: {what}" in text


@pytest.mark.parametrize("einsum_seconds, kept", [(0.97, "steps"), (0.9, "einsum")])
def test_another_route_must_beat_the_models_pick_by_the_margin(measure_all, monkeypatch, einsum_seconds, kept):
    assert 0.9 * measured.HOST_MARGIN < 1.0 < 0.97 * measured.HOST_MARGIN
    clock(monkeypatch, {"steps": 1.0, "einsum": einsum_seconds})
    ops = operands()
    for _ in range(MEASURING):
        contract(STRING, *ops, optimize="greedy")
    schedule = make_schedule(make_plan(STRING, SHAPES, ()), optimize="greedy", memory_limit="default")
    assert numpy_backend.measured_route(schedule) == kept


def test_the_first_call_of_each_run_is_not_counted(measure_all, monkeypatch):
    """A route's first call after the other route pays for the switch; a loop never does."""
    seen: list[str] = []

    def switching(name, run, ops, sync):
        first = not seen or seen[-1] != name
        seen.append(name)
        # einsum looks fast only on the call after the steps (as in a misleading alternation)
        return run(*ops), {"steps": 1.0, "einsum": 0.5 if first else 2.0}[name]

    monkeypatch.setattr(measured, "host_timer", switching)
    ops = operands()
    for _ in range(MEASURING):
        contract(STRING, *ops, optimize="greedy")
    schedule = make_schedule(make_plan(STRING, SHAPES, ()), optimize="greedy", memory_limit="default")
    assert numpy_backend.measured_route(schedule) == "steps"
    assert numpy_backend.route_seconds(schedule) == {"steps": 1.0, "einsum": 2.0}


def test_a_route_far_behind_is_dropped_after_the_first_round(measure_all, monkeypatch):
    fake = clock(monkeypatch, {"steps": 1.0, "einsum": measured.DROP_FACTOR * 1.5})
    ops = operands()
    for _ in range(MEASURING):
        np.testing.assert_allclose(contract(STRING, *ops, optimize="greedy"), reference(ops), **CLOSE)
    run = measured.HOST_RUN
    assert fake.timed == ["steps"] * run + ["einsum"] * run     # one run each, then the steps
    schedule = make_schedule(make_plan(STRING, SHAPES, ()), optimize="greedy", memory_limit="default")
    assert numpy_backend.measured_route(schedule) == "steps"


def test_the_chosen_einsum_route_is_np_einsum_along_the_path(measure_all, monkeypatch):
    clock(monkeypatch, {"steps": 2.0, "einsum": 1.0})
    seen = []
    real = np.einsum

    def spy(*args, **kwargs):
        seen.append((args[0], kwargs.get("optimize")))
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "einsum", spy)
    ops = operands()
    expression = contract_expression(STRING, *SHAPES, optimize="greedy")
    for _ in range(MEASURING):
        expression(*ops)
    seen.clear()
    got = expression(*ops)
    schedule = make_schedule(make_plan(STRING, SHAPES, ()), optimize="greedy")
    assert seen == [(schedule.einsum, ["einsum_path", *schedule.path])]   # one call, nothing else
    np.testing.assert_allclose(got, reference(ops), **CLOSE)


def test_a_route_that_raises_is_dropped_and_the_call_still_answers(measure_all, monkeypatch):
    clock(monkeypatch, {"steps": 2.0, "einsum": 1.0})
    real = np.einsum

    def failing(*args, **kwargs):
        if kwargs.get("optimize"):
            raise MemoryError("no room for einsum's copies")
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "einsum", failing)
    ops = operands()
    for _ in range(MEASURING):
        np.testing.assert_allclose(contract(STRING, *ops, optimize="greedy"), reference(ops), **CLOSE)
    schedule = make_schedule(make_plan(STRING, SHAPES, ()), optimize="greedy", memory_limit="default")
    assert numpy_backend.measured_route(schedule) == "steps"


def test_switched_off_nothing_is_timed_and_explain_says_no_route(measure_all, monkeypatch):
    monkeypatch.setenv(measured.ENVIRONMENT_VARIABLE, "off")
    fake = clock(monkeypatch, {"steps": 3.0, "einsum": 1.0})
    ops = operands()
    first = contract(STRING, *ops, optimize="greedy")
    for _ in range(MEASURING + 1):
        np.testing.assert_array_equal(contract(STRING, *ops, optimize="greedy"), first)   # bit for bit
    assert fake.timed == []
    assert "chosen by measurement" not in explain(STRING, *ops, optimize="greedy")


def test_a_dtype_not_measured_settles_on_the_steps(measure_all, monkeypatch):
    fake = clock(monkeypatch, {"steps": 3.0, "einsum": 1.0})
    ops = [np.arange(np.prod(s), dtype=np.int64).reshape(s) % 7 for s in SHAPES]
    for _ in range(3):
        np.testing.assert_array_equal(contract(STRING, *ops, optimize="greedy"), reference(ops))
    assert fake.timed == []


def test_after_einsum_is_chosen_other_dtypes_of_the_shape_keep_the_steps_conventions(measure_all, monkeypatch):
    clock(monkeypatch, {"steps": 3.0, "einsum": 1.0})
    ops = operands()
    for _ in range(MEASURING):
        contract(STRING, *ops, optimize="greedy")
    ints = [np.arange(np.prod(s), dtype=np.int64).reshape(s) % 5 for s in SHAPES]
    got = contract(STRING, *ints, optimize="greedy")
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, reference(ints))
    halves = [a.astype(np.float16) for a in operands(1)]
    got = contract(STRING, *halves, optimize="greedy")
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, reference([a.astype(np.float32) for a in halves]).astype(np.float16),
                               rtol=2e-2, atol=2e-2)


def test_callers_in_threads_while_measuring_all_get_the_right_answer(measure_all, monkeypatch):
    clock(monkeypatch, {"steps": 2.0, "einsum": 1.0})
    ops = operands()
    want = reference(ops)
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(MEASURING + 4):
                np.testing.assert_allclose(contract(STRING, *ops, optimize="greedy"), want, **CLOSE)
        except BaseException as exc:   # (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_measured_route_is_recalled_from_the_plan_store_without_timing(measure_all, tmp_path, monkeypatch):
    monkeypatch.setenv("CONTRACTIONS_PLANS", str(tmp_path / "plans"))
    store_module.reset_active_store()
    try:
        fake = clock(monkeypatch, {"steps": 3.0, "einsum": 1.0})
        ops = operands()
        for _ in range(MEASURING):
            contract(STRING, *ops, optimize="greedy")
        assert fake.timed
        store_module.active_store().flush()
        measured._CHOSEN.clear()                      # (as in a new process)
        runners.HOT.clear()
        runners._COMPILED.cache_clear()
        fake.timed.clear()
        np.testing.assert_allclose(contract(STRING, *ops, optimize="greedy"), reference(ops), **CLOSE)
        assert fake.timed == []
        schedule = make_schedule(make_plan(STRING, SHAPES, ()), optimize="greedy", memory_limit="default")
        assert numpy_backend.measured_route(schedule) == "einsum"
    finally:
        store_module.reset_active_store()


# ------------------------------------------------------------------- a split stack, or whole
def test_a_split_stack_is_measured_against_the_same_steps_run_whole(measure_all, monkeypatch):
    # whether another core is free for a split stack is the machine's (dev/decisions.md 63):
    # a schedule that splits one offers its steps run whole as a route, and keeps it if faster
    from contractions.backends import BackendOptions
    from contractions.backends import workers as workers_module

    splitting = NumpyCostModel(dataclasses.replace(Profile(), blas_threads=2, split_min_macs=1, ns_per_split=0.0))
    string, shapes = "Cab,Cbc->Cac", ((16, 40, 30), (16, 30, 50))
    plan = make_plan(string, shapes, ())
    schedule = make_schedule(plan, memory_limit=None, cost_model=splitting)
    assert schedule.steps[0].workers == 2
    assert numpy_backend.routes(schedule) == ("steps", "whole", "einsum")
    split_calls = []
    real = workers_module.split_matmul
    monkeypatch.setattr(numpy_backend, "split_matmul", lambda *a: split_calls.append(1) or real(*a))
    fake = clock(monkeypatch, {"steps": 2.0, "whole": 1.0, "einsum": 3.0})
    run = numpy_backend.compile(plan, schedule, BackendOptions())
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    for _ in range(3 * measured.HOST_ROUNDS * measured.HOST_RUN + 2):
        np.testing.assert_allclose(run(x, y), x @ y, rtol=1e-12, atol=1e-12)
    assert set(fake.timed) == {"steps", "whole", "einsum"}
    assert numpy_backend.measured_route(schedule) == "whole"
    split_calls.clear()
    assert np.array_equal(run(x, y), numpy_backend.compile(plan, schedule, BackendOptions(), route="whole")(x, y))
    assert split_calls == []                     # the kept route runs every stack whole
    assert "measured: these steps with every stack whole" in "\n".join(
        numpy_backend.describe(plan, schedule, BackendOptions()))
