"""The CUDA route chosen by measurement (contractions/backends/measured.py), with an injected
timer (no real timing): on the CuPy stand-in (tests/_fake_cupy.py) and on torch tensors that
say they are on CUDA.  The faster route is picked and kept, every call's result (measuring
ones too) equals the numpy reference, a failing candidate is dropped, a choice is remembered
per problem, nothing is measured on CPU tensors or numpy arrays."""

from __future__ import annotations

import collections
import sys

import numpy as np
import pytest

from contractions import contract, contract_expression, explain, make_plan, make_schedule
from contractions.backends import BackendOptions, cupy_backend, measured
from contractions.calls import runners
from contractions.model.gpu_prices import CUPY_MODEL, TORCH_CUDA_MODEL

from . import _fake_cupy

TT = "WCa,Caib,WCi->WCb"
TT_EXPANDED = "wca,caib,wci->wcb"
SHAPES = ((4, 2, 3), (2, 3, 5, 6), (4, 2, 5))   # its path is not opt_einsum's 'auto' one


def operands(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in SHAPES]


class Timer:
    """A fake `measured.timer`: runs the candidate for real (its result is the call's) and
    reports ``costs[name]`` seconds; records what it timed and whether it synced."""

    def __init__(self, costs: dict[str, float]) -> None:
        self.costs, self.timed, self.syncs = costs, [], 0

    def __call__(self, name, run, ops, sync):
        sync()
        self.syncs += 1
        result = run(*ops)
        self.timed.append(name)
        return result, self.costs[name]


@pytest.fixture
def fresh(monkeypatch):
    """No route chosen yet: no remembered choice, no runner kept from another test."""
    monkeypatch.setattr(measured, "_CHOSEN", collections.OrderedDict())
    runners.HOT.clear()
    runners._COMPILED.cache_clear()
    yield
    runners.HOT.clear()   # no runner holding this test's fake timer outlives it
    runners._COMPILED.cache_clear()


@pytest.fixture
def cp(monkeypatch, fresh):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy)
    _fake_cupy.calls.clear()
    return _fake_cupy


def install(monkeypatch, costs) -> Timer:
    timer = Timer(costs)
    monkeypatch.setattr(measured, "timer", timer)
    return timer


# ------------------------------------------------------------------ CuPy
@pytest.mark.parametrize("fastest, runs", [("steps", "matmul"), ("one_einsum", "einsum"),
                                           ("cupy_einsum", "einsum")])
def test_cupy_picks_the_faster_route_and_keeps_it(cp, monkeypatch, fastest, runs):
    timer = install(monkeypatch, {"steps": 3.5, "one_einsum": 3.5, "cupy_einsum": 3.5, fastest: 1.0})
    arrays = operands(1)
    ops = [cp.asarray(a) for a in arrays]
    want = np.einsum(TT_EXPANDED, *arrays)
    plan = make_plan(TT, SHAPES, ())
    schedule = make_schedule(plan, use_einsum=False, cost_model=CUPY_MODEL)
    assert cupy_backend.routes(schedule) == ("steps", "one_einsum", "cupy_einsum")
    for _ in range(measured.ROUNDS * 3 + 5):
        got = contract(TT, *ops)   # every call, measuring ones too, is the right result
        np.testing.assert_allclose(got.get(), want, rtol=1e-12)
    # round 1 is a warm-up; the routes 3x slower than the best are dropped after round 2,
    # which leaves one: chosen
    assert timer.timed == ["steps", "one_einsum", "cupy_einsum"] * 2
    assert timer.syncs == len(timer.timed)
    assert cupy_backend.measured_route(schedule) == fastest
    assert cupy_backend.route_seconds(schedule) == {"steps": 3.5, "one_einsum": 3.5, "cupy_einsum": 3.5, fastest: 1.0}
    _fake_cupy.calls.clear()
    contract(TT, *ops)   # kept: nothing timed, the chosen route's functions only
    assert len(timer.timed) == 6
    assert _fake_cupy.calls[runs] >= 1
    assert _fake_cupy.calls["einsum" if runs == "matmul" else "matmul"] == 0


def test_cupy_close_routes_are_all_measured_every_round(cp, monkeypatch):
    timer = install(monkeypatch, {"steps": 1.1, "one_einsum": 1.0, "cupy_einsum": 1.2})
    ops = [cp.asarray(a) for a in operands(2)]
    for _ in range(measured.ROUNDS * 3 + 2):
        contract(TT, *ops)
    assert timer.timed == ["steps", "one_einsum", "cupy_einsum"] * measured.ROUNDS
    plan = make_plan(TT, SHAPES, ())
    assert cupy_backend.measured_route(make_schedule(plan, use_einsum=False, cost_model=CUPY_MODEL)) == "one_einsum"


def test_cupy_real_timer_syncs_the_device_while_measuring_only(cp, monkeypatch):
    synced = []
    monkeypatch.setattr(_fake_cupy._Device, "synchronize", lambda self: synced.append(1))
    ops = [cp.asarray(a) for a in operands(3)]
    for _ in range(measured.ROUNDS * 3):
        contract(TT, *ops)
    # before and after each measuring call: at least two rounds of three routes, at most all
    assert 2 * 2 * 3 <= len(synced) <= 2 * measured.ROUNDS * 3 and len(synced) % 2 == 0
    before = len(synced)
    contract(TT, *ops)
    contract(TT, *ops)
    assert len(synced) == before


def test_the_device_timer_times_back_to_back_calls_between_two_syncs():
    events = []

    def run(x):
        events.append("call")
        return x + len(events)

    result, seconds = measured.device_timer("steps", run, (np.zeros(2),), lambda: events.append("sync"))
    assert events == ["sync"] + ["call"] * measured.PIPELINED + ["sync"]
    np.testing.assert_array_equal(result, np.full(2, measured.PIPELINED + 1.0))   # the last call's
    assert seconds >= 0


def test_cupy_a_failing_candidate_is_dropped_and_the_call_still_answers(cp, monkeypatch, request):
    timer = install(monkeypatch, {"steps": 2.0, "one_einsum": 1.0, "cupy_einsum": 1.0})

    def out_of_memory(*args, **kwargs):
        raise MemoryError("out of device memory")

    monkeypatch.setattr(_fake_cupy, "einsum", out_of_memory)
    cupy_backend.cupy_ops.cache_clear()   # (it holds the namespace's functions)
    request.addfinalizer(cupy_backend.cupy_ops.cache_clear)
    arrays = operands(4)
    ops = [cp.asarray(a) for a in arrays]
    for _ in range(6):
        np.testing.assert_allclose(contract(TT, *ops).get(), np.einsum(TT_EXPANDED, *arrays), rtol=1e-12)
    assert set(timer.timed) == {"steps"}   # both einsum routes raised: dropped, never timed
    assert len(timer.timed) == 1           # the only one left: chosen at once


def test_cupy_choice_is_remembered_for_the_same_problem(cp, monkeypatch):
    timer = install(monkeypatch, {"steps": 5.0, "one_einsum": 1.0, "cupy_einsum": 5.0})
    arrays = operands(5)
    ops = [cp.asarray(a) for a in arrays]
    for _ in range(measured.ROUNDS * 3):
        contract(TT, *ops)
    timed = len(timer.timed)
    expr = contract_expression(TT, *SHAPES)
    _fake_cupy.calls.clear()
    np.testing.assert_allclose(expr(*ops).get(), np.einsum(TT_EXPANDED, *arrays), rtol=1e-12)
    assert len(timer.timed) == timed and _fake_cupy.calls["matmul"] == 0   # one einsum, not re-measured
    assert "measured: one cupy.einsum along the path" in explain(TT, *ops)


def test_cupy_explain_says_the_route_is_measured(cp):
    ops = [cp.asarray(a) for a in operands(6)]
    text = explain(TT, *ops)
    assert ("route: chosen by measurement on this shape's first calls, the fastest of these steps, "
            "one cupy.einsum along the path, cupy.einsum in its own order; the GPU model's pick: these steps"
            in text)
    assert "measured:" not in text
    assert "chosen by measurement" not in explain(TT, *ops, optimize=False)   # one einsum, asked for


def test_cupy_two_operands_measure_two_routes_and_optimize_false_none(cp, monkeypatch):
    timer = install(monkeypatch, {"steps": 1.0, "one_einsum": 2.0})
    x, y = np.ones((4, 3)), np.ones((3, 5))
    for _ in range(measured.ROUNDS * 2 + 1):
        contract("Wa,aB->WB", cp.asarray(x), cp.asarray(y))
    assert timer.timed == ["steps", "one_einsum"] * measured.ROUNDS
    for _ in range(3):
        contract(TT, *[cp.asarray(a) for a in operands(7)], optimize=False)
    assert len(timer.timed) == 2 * measured.ROUNDS   # one einsum asked for: nothing to measure


def test_cupy_forced_route_and_unknown_route(cp):
    plan = make_plan(TT, SHAPES, ())
    schedule = make_schedule(plan, use_einsum=False, cost_model=CUPY_MODEL)
    arrays = operands(8)
    ops = [cp.asarray(a) for a in arrays]
    _fake_cupy.calls.clear()
    got = cupy_backend.compile(plan, schedule, BackendOptions(), route="one_einsum")(*ops)
    assert _fake_cupy.calls["einsum"] == 1 and _fake_cupy.calls["matmul"] == 0
    np.testing.assert_allclose(got.get(), np.einsum(TT_EXPANDED, *arrays), rtol=1e-12)
    with pytest.raises(ValueError, match=r"route 'fastest' is not one of this schedule's routes "
                                         r"\('steps', 'one_einsum', 'cupy_einsum'\)"):
        cupy_backend.compile(plan, schedule, BackendOptions(), route="fastest")


def test_cupy_nothing_is_timed_while_a_graph_is_captured(cp, monkeypatch):
    timer = install(monkeypatch, {"steps": 2.0, "one_einsum": 1.0, "cupy_einsum": 1.0})
    monkeypatch.setattr(cupy_backend, "_capturing", lambda cp: True)
    arrays = operands(9)
    for _ in range(3):
        np.testing.assert_allclose(contract(TT, *[cp.asarray(a) for a in arrays]).get(),
                                   np.einsum(TT_EXPANDED, *arrays), rtol=1e-12)
    assert timer.timed == []


# ------------------------------------------------------------------ torch
@pytest.fixture
def torch_cuda(monkeypatch, fresh):
    """torch tensors that say they are on CUDA (CPU memory underneath), a no-op device sync."""
    torch = pytest.importorskip("torch")
    from contractions.backends import torch_backend

    synced = []
    monkeypatch.setattr(torch_backend, "_sync", lambda device: synced.append(device))

    class CudaLooking(torch.Tensor):
        @property
        def is_cuda(self):
            return True

    return torch, torch_backend, CudaLooking, synced


@pytest.mark.parametrize("fastest", ["steps", "one_einsum", "einsum_auto_path"])
def test_torch_cuda_picks_the_faster_route_and_keeps_it(torch_cuda, monkeypatch, fastest):
    torch, torch_backend, CudaLooking, _ = torch_cuda
    plan = make_plan(TT, SHAPES, ())
    schedule = make_schedule(plan, use_einsum=False, cost_model=TORCH_CUDA_MODEL)
    names = tuple(torch_backend.cuda_routes(schedule))
    assert names == ("steps", "one_einsum", "einsum_auto_path")
    timer = install(monkeypatch, {name: 1.0 if name == fastest else 3.5 for name in names})
    arrays = operands(10)
    ops = [torch.from_numpy(a).as_subclass(CudaLooking) for a in arrays]
    want = np.einsum(TT_EXPANDED, *arrays)
    for _ in range(measured.ROUNDS * 3 + 4):
        got = contract(TT, *ops)
        np.testing.assert_allclose(got.detach().as_subclass(torch.Tensor).numpy(), want, rtol=1e-12)
    assert timer.timed == list(names) * 2   # the slow two dropped after the first counted round
    assert torch_backend.measured_route(schedule) == fastest
    assert f"measured: {'these steps' if fastest == 'steps' else 'one torch.einsum'}" in explain(TT, *ops)


def test_torch_cuda_real_timer_syncs_while_measuring_only(torch_cuda):
    torch, _, CudaLooking, synced = torch_cuda
    ops = [torch.from_numpy(a).as_subclass(CudaLooking) for a in operands(11)]
    for _ in range(measured.ROUNDS * 3 + 3):
        contract(TT, *ops)
    assert 0 < len(synced) <= 2 * measured.ROUNDS * 3
    assert set(synced) == {ops[0].device}   # the operands' device is the one waited for
    before = len(synced)
    contract(TT, *ops)
    assert len(synced) == before


def test_torch_cpu_is_never_measured(monkeypatch, fresh):
    torch = pytest.importorskip("torch")
    from contractions.backends import torch_backend
    from contractions.model.torch_prices import TORCH_MODEL

    def no_timing(*args):
        raise AssertionError("a CPU call was timed")

    monkeypatch.setattr(measured, "timer", no_timing)
    monkeypatch.setattr(torch_backend, "_sync", no_timing)
    arrays = operands(12)
    for subscripts, ops in ((TT, arrays), ("Wa,aB->WB", [np.ones((4, 3)), np.ones((3, 5))])):
        want = np.einsum(subscripts.replace("W", "w").replace("C", "c").replace("B", "b"), *ops)
        for _ in range(measured.ROUNDS * 3 + 2):
            got = contract(subscripts, *[torch.from_numpy(a) for a in ops])
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
            np.testing.assert_allclose(contract(subscripts, *ops), want, rtol=1e-12)   # numpy
    plan = make_plan(TT, SHAPES, ())
    assert torch_backend.cuda_routes(make_schedule(plan, cost_model=TORCH_MODEL)) == {}
    assert "chosen by measurement" not in explain(TT, *[torch.from_numpy(a) for a in arrays])
    assert not measured._CHOSEN


# ------------------------------------------------------------------ the chooser itself
def chooser(monkeypatch, costs, default="a", **kw):
    timer = install(monkeypatch, costs)
    settled = []
    routes = [(name, (lambda name=name: name)) for name in costs]
    choice = measured.MeasuredRoute(routes, default, settled.append, sync=lambda: None, key=("k", default), **kw)
    return choice, timer, settled


def test_ties_go_to_the_default_and_settle_once(monkeypatch, fresh):
    choice, timer, settled = chooser(monkeypatch, {"a": 1.0, "b": 1.0}, default="b")
    results = [choice() for _ in range(2 * measured.ROUNDS)]
    assert results == ["a", "b"] * measured.ROUNDS   # each measuring call returns its route's result
    assert [f() for f in settled] == ["b"] and choice.chosen == "b"
    assert measured.remembered(("k", "b")) == "b"


def test_not_measured_operands_settle_on_the_default_untimed(monkeypatch, fresh):
    choice, timer, settled = chooser(monkeypatch, {"a": 1.0, "b": 0.5}, default="a", measures=lambda ops: False)
    assert choice() == "a" and [f() for f in settled] == ["a"] and timer.timed == []


def test_a_remembered_choice_starts_settled(monkeypatch, fresh):
    measured._remember(("k", "a"), "b")
    choice, timer, _ = chooser(monkeypatch, {"a": 1.0, "b": 2.0})
    assert choice.entry()() == "b" and timer.timed == []
