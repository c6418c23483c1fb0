"""A stack of small products cut along its leading axis and run on several cores at once
(`Step.workers`, `contractions.backends.workers`): decided and priced by the schedule, run by
the numpy backend, the same result to the bit as the whole stack.

Every model here is built on a stated profile, never on the machine's: the split is a
decision of the prices, so the tests hold on one core or many.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import identifiability, make_plan
from contractions.backends import workers as workers_module
from contractions.backends.compile import compile_any_extents, compile_schedule
from contractions.backends.numpy_backend import NUMPY_OPS
from contractions.backends.workers import split_matmul
from contractions.model.numpy_prices import NumpyCostModel
from contractions.model.profile import Profile
from contractions.model.torch_prices import TorchCostModel
from contractions.schedule import describe_schedule, make_schedule
from contractions.schedule.extent_specs import extent_specs
from contractions.schedule.ir import Schedule, evolve
from contractions.testing.oracle import loop_contract

from ._strategies import Problem, grouped_problems, needed_supplements

TWO_CORES = NumpyCostModel(dataclasses.replace(Profile(), blas_threads=2))
ONE_CORE = NumpyCostModel(dataclasses.replace(Profile(), blas_threads=1))
#: splits every stack it can (no hand-over, any product size, three parts; never one einsum
#: call): for the executor
EVERY_STACK = NumpyCostModel(dataclasses.replace(Profile(), blas_threads=3, split_min_macs=1,
                                                 ns_per_split=0.0, split_gain=1.0, direct_max_naive=0,
                                                 direct_max_naive_many_labels=0, einsum_vector_step_max_macs=0))

# a stack of 144 products of (1584 x 15) @ (15 x 15): 356,400 multiply-adds each, too small
# for BLAS to thread, 7 ms on one core
STACKED = ("BHqd,Bkd->BHqk", ((12, 12, 12, 12, 11, 15), (12, 12, 15, 15)))


def _plan(subscripts, shapes, **supplements):
    return make_plan(subscripts, shapes, tuple(supplements.items()))


def _whole(schedule: Schedule) -> Schedule:
    """``schedule`` with every stack run whole (an unblocked one)."""
    assert schedule.blocking is None
    return evolve(schedule, steps=tuple(evolve(s, workers=1) for s in schedule.steps))


# ----------------------------------------------------------------------- split_matmul
@pytest.mark.parametrize(("x_shape", "y_shape"), [
    ((6, 4, 3), (6, 3, 5)),            # both stacked
    ((7, 4, 3), (7, 3, 5)),            # an odd stack: parts of 3 and 4
    ((4, 3), (9, 3, 5)),               # a plain matrix broadcast to every part
    ((1, 4, 3), (9, 3, 5)),            # a stack of one broadcast
    ((5, 2, 4, 3), (5, 1, 3, 6)),      # spread axes (1 in one factor), the lead cut
    ((2, 4, 3), (2, 3, 5)),            # fewer entries than workers: two parts
    ((1, 4, 3), (1, 3, 5)),            # one entry: whole
])
@pytest.mark.parametrize("workers", [2, 3])
def test_split_matmul_is_matmul_to_the_bit(x_shape, y_shape, workers):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(x_shape), rng.standard_normal(y_shape)
    want = np.matmul(x, y)
    out = np.empty(want.shape)
    assert split_matmul(x, y, workers, out) is out
    assert np.array_equal(out, want)


def test_split_matmul_runs_whole_while_another_split_runs():
    x, y = np.ones((8, 4, 3)), np.ones((8, 3, 5))
    submitted = []
    with workers_module._BUSY:        # another thread's split holds the pool
        real = workers_module._pool

        def watched(helpers):
            submitted.append(helpers)
            return real(helpers)

        workers_module._pool = watched
        try:
            out = split_matmul(x, y, 2, np.empty((8, 4, 5)))
        finally:
            workers_module._pool = real
    assert submitted == [] and np.array_equal(out, x @ y)


def test_split_matmul_raises_matmuls_error_and_frees_the_pool():
    with pytest.raises(ValueError):
        split_matmul(np.ones((6, 4, 3)), np.ones((6, 2, 5)), 2, np.empty((6, 4, 5)))
    assert workers_module._BUSY.acquire(blocking=False)
    workers_module._BUSY.release()


def test_object_arrays_run_whole():
    x = np.arange(24, dtype=object).reshape(2, 3, 4)
    y = np.arange(40, dtype=object).reshape(2, 4, 5)
    out = np.empty((2, 3, 5), dtype=object)
    assert np.array_equal(split_matmul(x, y, 2, out), x @ y)


def _split_in_child(queue) -> None:
    x, y = np.ones((8, 4, 3)), np.ones((8, 3, 5))
    queue.put(bool(np.array_equal(split_matmul(x, y, 2, np.empty((8, 4, 5))), x @ y)))


@pytest.mark.skipif(sys.platform != "linux", reason="fork is the Linux default only")
def test_a_forked_child_splits_with_a_pool_of_its_own():
    x, y = np.ones((8, 4, 3)), np.ones((8, 3, 5))
    split_matmul(x, y, 2, np.empty((8, 4, 5)))            # the parent's pool exists
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_split_in_child, args=(queue,))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and queue.get(timeout=5) is True


def test_threads_splitting_at_once_all_get_their_products():
    rng = np.random.default_rng(1)
    pairs = [(rng.standard_normal((16, 20, 8)), rng.standard_normal((16, 8, 12))) for _ in range(4)]
    errors: list[BaseException] = []

    def run(x, y):
        try:
            for _ in range(50):
                assert np.array_equal(split_matmul(x, y, 2, np.empty((16, 20, 12))), x @ y)
        except BaseException as exc:   # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=pair) for pair in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_blocks_product_written_into_its_slice_splits_too():
    # (`Blocking.in_place`: a block's last product goes straight into its slice of the result)
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((12, 5, 3)), rng.standard_normal((12, 3, 7))
    out = np.zeros((4, 6, 5, 7))
    NUMPY_OPS.matmul_into(x, y, out[1:3], (12, 5, 7), workers=2)
    assert np.array_equal(out[1:3].reshape(12, 5, 7), x @ y)
    assert not out[0].any() and not out[3].any()


# ----------------------------------------------------------------------- the decision
def test_a_stack_of_small_products_splits_over_the_cores_blas_may_use():
    subscripts, shapes = STACKED
    plan = _plan(subscripts, shapes)
    two = make_schedule(plan, memory_limit=None, cost_model=TWO_CORES)
    one = make_schedule(plan, memory_limit=None, cost_model=ONE_CORE)
    (split,), (whole,) = two.steps, one.steps
    assert (split.workers, whole.workers) == (2, 1)
    assert split.cost_ns < whole.cost_ns
    assert "(stack in 2 parts at once)" in describe_schedule(two)[0]
    assert "parts at once" not in describe_schedule(one)[0]


@pytest.mark.parametrize(("shapes", "why"), [
    (((12, 12, 4, 4, 11, 3), (12, 12, 3, 3)), "products of 99 multiply-adds contend"),
    (((4, 4, 600, 64), (4, 4, 64, 64)), "products BLAS threads itself (2.5M multiply-adds)"),
    (((12, 12, 11, 15), (12, 12, 15, 15)), "too little to spare the hand-over"),
])
def test_no_split_where_it_does_not_pay(shapes, why):
    plan = _plan("BHqd,Bkd->BHqk", shapes)
    assert all(s.workers == 1 for s in make_schedule(plan, memory_limit=None, cost_model=TWO_CORES).steps), why


def test_torch_threads_its_own_stacks():
    subscripts, shapes = STACKED
    schedule = make_schedule(_plan(subscripts, shapes), memory_limit=None, cost_model=TorchCostModel())
    assert all(s.workers == 1 for s in schedule.steps)


# ----------------------------------------------------------------------- the run
def test_a_split_schedule_gives_the_whole_ones_bits():
    subscripts, shapes = STACKED
    schedule = make_schedule(_plan(subscripts, shapes), memory_limit=None, cost_model=TWO_CORES)
    assert schedule.steps[0].workers == 2
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s) for s in shapes]
    got = compile_schedule(schedule, NUMPY_OPS)(*arrays)
    assert np.array_equal(got, compile_schedule(_whole(schedule), NUMPY_OPS)(*arrays))
    np.testing.assert_allclose(got, np.einsum("abcdqe,abke->abcdqk", *arrays), rtol=1e-12, atol=1e-12)


def test_a_program_for_every_extent_runs_a_short_stack_whole():
    # the schedule split a stack of 8; at a shape with a stack of 1 the run cannot cut it
    plan = _plan("Cab,Cbc->Cac", ((8, 40, 30), (8, 30, 50)))
    schedule = make_schedule(plan, memory_limit=None, cost_model=EVERY_STACK)
    assert schedule.steps[0].workers == 3
    for_shape = compile_any_extents(schedule, extent_specs(schedule), NUMPY_OPS)
    (stack_label,) = [lab for lab, n in schedule.extents.items() if n == 8]
    rng = np.random.default_rng(3)
    for stack in (1, 2, 8, 11):
        ext = tuple(stack if lab == stack_label else schedule.extents[lab] for lab in range(len(schedule.extents)))
        x, y = rng.standard_normal((stack, 40, 30)), rng.standard_normal((stack, 30, 50))
        assert np.array_equal(for_shape(ext)(x, y), x @ y)


@st.composite
def stacked_products(draw):
    """A grouped product with a stack: batch group B on both sides (and the output), C
    contracted, W and K free, sometimes a third operand; each term's groups in any order."""
    groups = {"B": draw(st.lists(st.integers(2, 4), min_size=1, max_size=2))}
    for g in "CWK":
        groups[g] = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    x = "".join(draw(st.permutations("BWC")))
    y = "".join(draw(st.permutations("BCK")))
    out = "".join(draw(st.permutations("BWK")))
    inputs = (x, y)
    if draw(st.booleans()):
        groups["V"] = draw(st.lists(st.integers(1, 3), min_size=1, max_size=2))
        inputs = (x, y, "".join(draw(st.permutations("BKV"))))
        out = "".join(draw(st.permutations("BWV")))
    shapes = {g: tuple(n) for g, n in groups.items()}
    return Problem(subscripts=",".join(inputs) + "->" + out, inputs=inputs, output=out,
                   group_shapes=shapes, letter_sizes={})


@settings(max_examples=60, deadline=None)
@given(st.one_of(stacked_products(), grouped_problems(max_terms=4, max_group_axes=2)),
       st.integers(0, 2**32 - 1), st.sampled_from([None, "default", 40, 300]))
def test_split_stacks_match_the_oracle(problem, seed, limit):
    rng = np.random.default_rng(seed)
    operands = [rng.standard_normal(s) for s in problem.operand_shapes()]
    pins = needed_supplements(problem, identifiability(problem.subscripts))
    plan = make_plan(problem.subscripts, tuple(a.shape for a in operands),
                     tuple((name.removeprefix("len_"), n) for name, n in pins.items()))
    try:
        schedule = make_schedule(plan, memory_limit=limit, cost_model=EVERY_STACK)
    except Exception as exc:            # a tiny limit may be impossible: that is another test's
        assert type(exc).__name__ == "MemoryLimitError"
        return
    want = loop_contract(problem.subscripts, operands, problem.group_shapes)
    got = compile_schedule(schedule, NUMPY_OPS)(*operands)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    if schedule.blocking is None and schedule.strategy == "pairwise":
        assert np.array_equal(got, compile_schedule(_whole(schedule), NUMPY_OPS)(*operands))
