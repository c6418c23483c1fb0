"""Scratch buffers: large layout copies and intermediates of numpy runs reuse memory from one
call to the next (contractions/backends/scratch.py), and nothing a user holds is ever reused."""

from __future__ import annotations

import dataclasses
import threading
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import contract, contract_expression, identifiability, make_plan, make_schedule
from contractions.backends import scratch
from contractions.backends.compile import compile_schedule
from contractions.backends.numpy_backend import NUMPY_OPS
from contractions.schedule import scratch_sites
from contractions.testing.oracle import loop_contract

from ._strategies import grouped_problems, needed_supplements

# Every copy and intermediate through the pool, however small, so that tiny random problems
# exercise it.
ALWAYS = dataclasses.replace(NUMPY_OPS, scratch_min_elements=1)
LAYOUTS = ["C", "F", "transposed", "negative"]


def laid_out(a: np.ndarray, layout: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim < 2:
        return a
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "transposed":
        return np.ascontiguousarray(a.T).T
    if layout == "negative":
        return a[(slice(None, None, -1),) * a.ndim].copy()[(slice(None, None, -1),) * a.ndim]
    return a


@pytest.fixture(autouse=True)
def fresh_pool():
    scratch.clear_scratch()
    yield
    scratch.clear_scratch()


def test_a_buffer_is_reused_only_once_nothing_refers_to_it():
    f8 = np.dtype(np.float64)
    start = scratch.scratch_info()      # its counts run over the thread's life
    a = scratch.take_scratch((4, 5), f8)
    view = a[1:, ::2]                       # a view keeps the buffer (its base) alive
    address = a.ctypes.data
    del a
    b = scratch.take_scratch((20,), f8)
    assert b.ctypes.data != address and not np.shares_memory(b, view)
    del view
    c = scratch.take_scratch((5, 4), f8)    # same byte size, now free: the same memory
    assert c.ctypes.data == address
    info = scratch.scratch_info()
    assert (info.buffers, info.bytes) == (2, 320)
    assert (info.reused - start.reused, info.allocated - start.allocated) == (1, 2)


def test_results_are_fresh_and_survive_later_calls():
    r = np.random.default_rng(0)
    x = r.standard_normal((36, 6, 36, 36))
    y = r.standard_normal((36, 6, 36, 36))
    # one operand is gathered (b and a swap places): 279,936 elements, kept for the next call
    first = contract("Wiab,Wjba->Wij", x, y)
    before = scratch.scratch_info().reused
    kept = first.copy()
    second = contract("Wiab,Wjba->Wij", y, x)
    np.testing.assert_array_equal(first, kept)
    assert not np.shares_memory(first, second)
    np.testing.assert_allclose(second, np.einsum("wiab,wjba->wij", y, x))
    assert scratch.scratch_info().reused - before >= 1    # the second call reuses its gathers


def test_a_chain_reuses_its_intermediates_and_holds_no_more_than_its_peak():
    r = np.random.default_rng(1)
    shapes = [(64, 40, 40), (64, 40, 40), (64, 40, 40), (64, 40, 40)]
    ops = [r.standard_normal(s) for s in shapes]
    expr = contract_expression("Cab,Cbc,Ccd,Cde->Cae", *shapes, memory_limit=None)
    want = np.einsum("zab,zbc,zcd,zde->zae", *ops, optimize=True)
    np.testing.assert_allclose(expr(*ops), want)
    start = scratch.scratch_info()
    for _ in range(2):
        np.testing.assert_allclose(expr(*ops), want)
    info = scratch.scratch_info()
    assert info.allocated == start.allocated and info.reused > start.reused   # warm: none made
    assert info.bytes <= expr.schedule.peak_extra * 8


def traced_extra(call, cold: bool) -> tuple[int, np.ndarray]:
    """(bytes ``call`` allocated at its peak beyond its result, the result); ``cold``: with
    the calling thread's pool emptied first, as a first call finds it."""
    if cold:
        scratch.clear_scratch()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = call()
        return tracemalloc.get_traced_memory()[1] - base - result.nbytes, result
    finally:
        tracemalloc.stop()


def test_a_cold_call_allocates_no_more_than_the_schedule_counts():
    # The pool keeps buffers a call would have freed; only those whose keeping the schedule's
    # memory count allows (`scratch_sites`), so a cold call's allocations fit its peak.
    r = np.random.default_rng(2)
    shapes = [(64, 40, 40), (64, 40, 40), (64, 40, 40), (64, 40, 40)]
    ops = [r.standard_normal(s) for s in shapes]
    expr = contract_expression("Cab,Cbc,Ccd,Cde->Cae", *shapes)
    expr(*ops)
    for cold in (True, False):
        extra, _ = traced_extra(lambda: expr(*ops), cold)
        assert extra <= expr.schedule.peak_extra * 8 + 256 * 1024, (cold, extra)
        assert scratch.scratch_info().bytes <= expr.schedule.peak_extra * 8


@pytest.mark.parametrize("limit", [None, "default", 120_000, 60_000])
def test_blocked_and_unblocked_runs_stay_within_their_peak_cold_and_warm(limit):
    # A blocked run keeps one buffer per site for all its blocks (a shorter block uses a
    # prefix): from the second block on, every one of them is held.
    r = np.random.default_rng(5)
    shapes = [(64, 40, 40), (64, 40, 40), (64, 40, 40), (64, 40, 40)]
    ops = [np.ascontiguousarray(r.standard_normal(s).transpose(0, 2, 1)) for s in shapes]
    expr = contract_expression("Cba,Ccb,Cdc,Ced->Cae", *shapes, memory_limit=limit)
    sites = scratch_sites(expr.schedule, NUMPY_OPS.scratch_min_elements)
    if limit in (120_000, 60_000):
        assert expr.schedule.blocking is not None
    want = np.einsum("zba,zcb,zdc,zed->zae", *ops, optimize=True)
    np.testing.assert_allclose(expr(*ops), want)
    for cold in (True, False):
        extra, result = traced_extra(lambda: expr(*ops), cold)
        np.testing.assert_allclose(result, want)
        assert extra <= expr.schedule.peak_extra * 8 + 256 * 1024, (cold, extra, sites)
    assert scratch.scratch_info().bytes <= expr.schedule.peak_extra * 8


def test_threads_never_share_a_buffer():
    r = np.random.default_rng(3)
    x = r.standard_normal((8, 30, 30, 30))
    ys = [r.standard_normal((8, 30, 30, 30)) for _ in range(4)]
    wants = [np.einsum("zabc,zabd->zcd", np.transpose(x, (0, 3, 2, 1)), y) for y in ys]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(20):
                got = contract("Cabc,Cabd->Ccd", np.transpose(x, (0, 3, 2, 1)), ys[k])
                np.testing.assert_allclose(got, wants[k])
        except BaseException as err:   # noqa: BLE001 - reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_scratch_limit_zero_keeps_nothing_and_rejects_nonsense():
    old = scratch.scratch_limit(0)
    try:
        r = np.random.default_rng(4)
        x = r.standard_normal((36, 6, 36, 36))
        np.testing.assert_allclose(contract("Wiab,Wjba->Wij", x, x),     # a gather, not kept
                                   np.einsum("wiab,wjba->wij", x, x))
        assert scratch.scratch_info().bytes == 0
    finally:
        assert scratch.scratch_limit(old) == 0
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="scratch_limit takes a byte count"):
            scratch.scratch_limit(bad)  # type: ignore[arg-type]


def test_the_pool_stays_within_its_limit():
    old = scratch.scratch_limit(1_000_000)
    try:
        f8 = np.dtype(np.float64)
        for n in (50_000, 40_000, 30_000, 20_000, 70_000):
            scratch.take_scratch((n,), f8)
            assert scratch.scratch_info().bytes <= 1_000_000
        assert scratch.scratch_info().buffers >= 1
    finally:
        scratch.scratch_limit(old)


def test_the_bound_holds_for_all_threads_together():
    # A pool of worker threads (dask's) must not multiply the bound: each thread takes buffers
    # of its own sizes and drops them; together they keep at most the limit.
    old = scratch.scratch_limit(3_000_000)
    f8 = np.dtype(np.float64)
    seen: list[int] = []
    barrier = threading.Barrier(4)

    def work(k: int) -> None:
        for n in (100_000 + k, 60_000 + k, 120_000 + k):
            scratch.take_scratch((n,), f8)
            seen.append(scratch.scratch_info().process_bytes)
        barrier.wait()                  # all pools alive at once
        seen.append(scratch.scratch_info().process_bytes)
        barrier.wait()

    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen and max(seen) <= 3_000_000
        assert scratch.scratch_info().process_bytes == 0      # finished threads' pools are gone
    finally:
        scratch.scratch_limit(old)


def test_object_arrays_never_use_scratch():
    x = np.arange(24, dtype=object).reshape(2, 3, 4)
    ops = dataclasses.replace(NUMPY_OPS, scratch_min_elements=1)
    plan = make_plan("abc,cbd->ad", (x.shape, (4, 3, 2)), ())
    schedule = make_schedule(plan, memory_limit=None)
    y = np.arange(24, dtype=object).reshape(4, 3, 2)
    got = compile_schedule(schedule, ops)(x.transpose(0, 1, 2), y)
    np.testing.assert_array_equal(got, np.einsum("abc,cbd->ad", x, y))


@settings(max_examples=60, deadline=None)
@given(grouped_problems(max_terms=4, max_group_axes=2), st.integers(0, 2**32 - 1),
       st.sampled_from([None, "default", 5, 40]),
       st.lists(st.sampled_from(LAYOUTS), min_size=4, max_size=4),
       st.sampled_from(["float64", "float32", "complex128", "int64"]))
def test_runs_through_scratch_match_the_oracle_and_keep_earlier_results(problem, seed, limit,
                                                                       layouts, dtype):
    rng = np.random.default_rng(seed)
    pins = needed_supplements(problem, identifiability(problem.subscripts))

    def operands():
        out = []
        for k, shape in enumerate(problem.operand_shapes()):
            value = np.round(rng.standard_normal(shape) * 3).astype(dtype)
            out.append(laid_out(value, layouts[k]))
        return out

    plan = make_plan(problem.subscripts, tuple(problem.operand_shapes()),
                     tuple((name.removeprefix("len_"), n) for name, n in pins.items()))
    try:
        schedule = make_schedule(plan, memory_limit=limit)
    except Exception:                     # a tiny explicit limit may be refused: not tested here
        return
    run = compile_schedule(schedule, ALWAYS)
    first_ops, second_ops = operands(), operands()
    first = run(*first_ops)
    kept = np.array(first, copy=True)
    second = run(*second_ops)
    third = run(*first_ops)
    for got, ops in ((kept, first_ops), (second, second_ops), (third, first_ops)):
        want = loop_contract(problem.subscripts, ops, problem.group_shapes)
        np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == "float32" else 1e-9, atol=1e-3)
    np.testing.assert_array_equal(first, kept)         # the second call did not write into it
